/*
 * A native workload for sonda's tests: several threads, recursion, a mutual recursion,
 * calls through a function pointer, and the C API's regions, events and names. Built
 * with -finstrument-functions and linked with -lsonda, every function call of this
 * file is recorded; each function also counts its own calls, and the program prints
 * those counts at the end (one "calls <function> <n>" line each): the truth a trace
 * must agree with.
 *
 * Usage: calls [threads] [rounds]   (defaults 3 and 200)
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef SONDA_ABSENT
/* Built without libsonda.so (what sonda records of a program that never loads it): the
 * API calls do nothing. */
#define sonda_region(name) ((void)(name), 0u)
#define sonda_region_enter(id) ((void)(id))
#define sonda_region_exit(id) ((void)(id))
#define sonda_event(type, value) ((void)(type), (void)(value))
#define sonda_event_type_name(type, name) ((void)(type), (void)(name))
#define sonda_event_value_name(type, value, name) ((void)(type), (void)(value), (void)(name))
#define sonda_thread_name(name) ((void)(name))
#define sonda_recording() 0
#else
#include <sonda.h>
#endif

enum { F_MAIN, F_WORKER, F_FIB, F_IS_EVEN, F_IS_ODD, F_SQUARE, F_APPLY, F_ROUND, F_COUNT };
static const char *const NAMES[F_COUNT] = {
    "main", "worker", "fib", "is_even", "is_odd", "square", "apply", "run_round",
};
static uint64_t counts[F_COUNT];

#define COUNT(f) __atomic_fetch_add(&counts[f], 1, __ATOMIC_RELAXED)

static uint32_t region_batch;
static uint64_t regions_entered;

/* Plain recursion. */
__attribute__((noinline)) static long fib(int n) {
    COUNT(F_FIB);
    return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

/* Mutual recursion. */
__attribute__((noinline)) int is_odd(unsigned n);
__attribute__((noinline)) int is_even(unsigned n) {
    COUNT(F_IS_EVEN);
    return n == 0 ? 1 : is_odd(n - 1);
}
__attribute__((noinline)) int is_odd(unsigned n) {
    COUNT(F_IS_ODD);
    return n == 0 ? 0 : is_even(n - 1);
}

__attribute__((noinline)) static long square(long x) {
    COUNT(F_SQUARE);
    return x * x;
}

/* A call through a function pointer. */
__attribute__((noinline)) static long apply(long (*f)(long), long x) {
    COUNT(F_APPLY);
    return f(x);
}

__attribute__((noinline)) static long run_round(int i) {
    COUNT(F_ROUND);
    sonda_region_enter(region_batch);
    __atomic_fetch_add(&regions_entered, 1, __ATOMIC_RELAXED);
    long r = fib(8 + i % 5) + apply(square, i) + is_even((unsigned)(i % 7));
    sonda_event(1, (uint64_t)(i % 3));
    sonda_region_exit(region_batch);
    return r;
}

struct job {
    int index;
    int rounds;
    long result;
};

static void *worker(void *arg) {
    COUNT(F_WORKER);
    struct job *job = arg;
    char name[32];
    snprintf(name, sizeof name, "calls-worker-%d", job->index);
    sonda_thread_name(name);
    long sum = 0;
    for (int i = 0; i < job->rounds; i++)
        sum += run_round(i + job->index);
    job->result = sum;
    return NULL;
}

int main(int argc, char **argv) {
    COUNT(F_MAIN);
    int threads = argc > 1 ? atoi(argv[1]) : 3;
    int rounds = argc > 2 ? atoi(argv[2]) : 200;
    if (threads < 1 || threads > 64 || rounds < 0) {
        fprintf(stderr, "usage: calls [threads 1..64] [rounds]\n");
        return 2;
    }
    region_batch = sonda_region("batch");
    sonda_event_type_name(1, "phase");
    sonda_event_value_name(1, 0, "zero");
    sonda_event_value_name(1, 1, "one");
    sonda_event_value_name(1, 2, "two");
    sonda_thread_name("calls-main");

    pthread_t tids[64];
    struct job jobs[64];
    for (int t = 0; t < threads; t++) {
        jobs[t] = (struct job){.index = t, .rounds = rounds, .result = 0};
        if (pthread_create(&tids[t], NULL, worker, &jobs[t]) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            return 1;
        }
    }
    long total = run_round(0);
    for (int t = 0; t < threads; t++) {
        pthread_join(tids[t], NULL);
        total += jobs[t].result;
    }
    printf("total %ld\n", total);
    printf("recording %d\n", sonda_recording());
    printf("region batch %llu\n", (unsigned long long)regions_entered);
    for (int f = 0; f < F_COUNT; f++)
        printf("calls %s %llu\n", NAMES[f], (unsigned long long)__atomic_load_n(&counts[f], __ATOMIC_RELAXED));
    fflush(stdout);
    return 0;
}
