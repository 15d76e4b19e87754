/*
 * The JNI library of NativeNest.java, built by the tests with -finstrument-functions
 * and linked with -lsonda. Each C function counts its own calls: the truth a trace's
 * call counts must equal.
 */
#include <jni.h>
#include <stdint.h>
#include <stdio.h>

enum { F_WORK, F_OUTER, F_INNER, F_COUNT };
static const char *const NAMES[F_COUNT] = {"Java_NativeNest_work", "c_outer", "c_inner"};
static uint64_t counts[F_COUNT];

#define COUNT(f) __atomic_fetch_add(&counts[f], 1, __ATOMIC_RELAXED)

__attribute__((noinline)) static long c_inner(int n) {
    COUNT(F_INNER);
    return n <= 0 ? 1 : n + c_inner(n - 1);
}

__attribute__((noinline)) static long c_outer(int n) {
    COUNT(F_OUTER);
    return c_inner(n) * 2;
}

JNIEXPORT jlong JNICALL Java_NativeNest_work(JNIEnv *env, jclass cls, jint n) {
    (void)env;
    (void)cls;
    COUNT(F_WORK);
    return c_outer(n);
}

__attribute__((no_instrument_function)) JNIEXPORT jstring JNICALL
Java_NativeNest_counts(JNIEnv *env, jclass cls) {
    (void)cls;
    char text[512];
    int at = 0;
    for (int f = 0; f < F_COUNT; f++)
        at += snprintf(text + at, sizeof text - (size_t)at, "calls %s %llu\n", NAMES[f],
                       (unsigned long long)__atomic_load_n(&counts[f], __ATOMIC_RELAXED));
    return (*env)->NewStringUTF(env, text);
}
