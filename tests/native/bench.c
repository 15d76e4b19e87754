/*
 * The loop of scripts/bench-native.sh: a small non-inlined function called in a tight
 * loop, in rounds, each timed with the thread's CPU clock (so that time the machine
 * gives to others does not count). Built twice, with and without
 * -finstrument-functions; the difference of the per-call medians is what recording
 * one call (entry + exit) costs.
 *
 * Usage: bench [calls per round] [rounds] [pause ms between rounds] [sleep|spin]
 * The pause lets the collector drain the thread's ring between rounds, so that no
 * round runs into a full ring (which drops instead of recording). `sleep` (the
 * default) sleeps through it: the collector drains while the loop does not run.
 * `spin` keeps the thread busy instead, so that the collector drains on the other
 * CPU while the next round runs: the cost then includes the cache traffic of a ring
 * that another process reads while it is written.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define QUIET __attribute__((no_instrument_function))

__attribute__((noinline)) long step(long x) {
    __asm__ volatile("" ::: "memory");
    return x * 3 + 1;
}

QUIET static double cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

QUIET static double mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* Busy for `ms` milliseconds (see the top of the file). */
QUIET static void spin(int ms) {
    double until = mono_ns() + ms * 1e6;
    while (mono_ns() < until)
        __asm__ volatile("pause");
}

QUIET static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

QUIET int main(int argc, char **argv) {
    long calls = argc > 1 ? atol(argv[1]) : 200000;
    int rounds = argc > 2 ? atoi(argv[2]) : 15;
    int pause_ms = argc > 3 ? atoi(argv[3]) : 300;
    int spinning = argc > 4 && strcmp(argv[4], "spin") == 0;
    if (calls < 1 || rounds < 3 || rounds > 1000 || pause_ms < 0) {
        fprintf(stderr, "usage: bench [calls >= 1] [rounds 3..1000] [pause ms] [sleep|spin]\n");
        return 2;
    }
    double per_call[1000];
    long acc = 0;
    for (int r = 0; r < rounds; r++) {
        double t0 = cpu_ns();
        for (long i = 0; i < calls; i++)
            acc = step(acc);
        per_call[r] = (cpu_ns() - t0) / calls;
        if (spinning)
            spin(pause_ms);
        else
            usleep((useconds_t)pause_ms * 1000);
    }
    /* The first two rounds warm up (caches, the ring's pages). */
    int kept = rounds - 2;
    qsort(per_call + 2, (size_t)kept, sizeof per_call[0], by_value);
    printf("ns_per_call median %.2f min %.2f max %.2f rounds %d calls %ld acc %ld\n",
           per_call[2 + kept / 2], per_call[2], per_call[rounds - 1], kept, calls, acc & 1);
    return 0;
}
