/*
 * A scheduling workload that reports the kernel's own accounting of every thread.
 *
 * usage: threads PROCESSES THREADS ITERATIONS DIR
 *
 * Starts PROCESSES processes (itself and PROCESSES-1 forked children), each with THREADS
 * threads. Every thread repeats ITERATIONS times: spin on the CPU for 3 ms of its own
 * CPU time, sleep 1 ms, and every fourth time write 4 KiB to its own file in DIR and
 * fdatasync it (uninterruptible I/O). With more threads than CPUs, threads also wait
 * for a CPU.
 *
 * Right before it ends, each thread (and each process's main thread, after joining the
 * others) appends one line to DIR/schedstat.txt:
 *
 *     pid tid cut_ns run_ns wait_ns slices
 *
 * run_ns, wait_ns and slices are the three fields of /proc/self/task/<tid>/schedstat, read
 * at CLOCK_MONOTONIC time cut_ns (the middle of a window of at most 100 us; reading
 * CLOCK_THREAD_CPUTIME_ID first makes the kernel account the running slice).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int iterations;
static const char *dir;

static long long now_ns(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void report(void) {
    pid_t pid = getpid();
    pid_t tid = (pid_t)syscall(SYS_gettid);
    char path[256], buf[256], line[256];
    snprintf(path, sizeof path, "/proc/self/task/%d/schedstat", tid);
    for (int attempt = 0; attempt < 100; attempt++) {
        long long t1 = now_ns(CLOCK_MONOTONIC);
        now_ns(CLOCK_THREAD_CPUTIME_ID);
        int fd = open(path, O_RDONLY);
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
        if (fd >= 0) close(fd);
        long long t2 = now_ns(CLOCK_MONOTONIC);
        if (n <= 0) { perror("schedstat"); exit(2); }
        buf[n] = 0;
        if (t2 - t1 > 100000 && attempt < 99) continue; /* preempted while reading */
        unsigned long long run, wait, slices;
        if (sscanf(buf, "%llu %llu %llu", &run, &wait, &slices) != 3) { fprintf(stderr, "bad schedstat\n"); exit(2); }
        int len = snprintf(line, sizeof line, "%d %d %lld %llu %llu %llu\n", pid, tid, (t1 + t2) / 2, run, wait, slices);
        snprintf(path, sizeof path, "%s/schedstat.txt", dir);
        int out = open(path, O_WRONLY | O_APPEND | O_CREAT, 0666);
        if (out < 0 || write(out, line, len) != len) { perror("schedstat.txt"); exit(2); }
        close(out);
        return;
    }
}

static void spin_cpu_ms(int ms) {
    long long until = now_ns(CLOCK_THREAD_CPUTIME_ID) + ms * 1000000LL;
    volatile unsigned x = 0;
    while (now_ns(CLOCK_THREAD_CPUTIME_ID) < until)
        for (int i = 0; i < 1000; i++) x += i;
}

static void *work(void *arg) {
    long id = (long)arg;
    char path[256], block[4096];
    memset(block, 'x', sizeof block);
    snprintf(path, sizeof path, "%s/io-%d-%ld", dir, getpid(), id);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) { perror("io file"); exit(2); }
    struct timespec one_ms = {0, 1000000};
    for (int i = 0; i < iterations; i++) {
        spin_cpu_ms(3);
        nanosleep(&one_ms, NULL);
        if (i % 4 == 0) {
            if (write(fd, block, sizeof block) != sizeof block) { perror("write"); exit(2); }
            fdatasync(fd);
        }
    }
    close(fd);
    report();
    return NULL;
}

static void run_process(int threads) {
    pthread_t t[64];
    for (long i = 0; i < threads; i++)
        if (pthread_create(&t[i], NULL, work, (void *)i) != 0) { perror("pthread_create"); exit(2); }
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    report();
}

int main(int argc, char **argv) {
    if (argc != 5) { fprintf(stderr, "usage: threads PROCESSES THREADS ITERATIONS DIR\n"); return 2; }
    int processes = atoi(argv[1]), threads = atoi(argv[2]);
    iterations = atoi(argv[3]);
    dir = argv[4];
    if (threads < 1 || threads > 64 || processes < 1) { fprintf(stderr, "bad counts\n"); return 2; }
    for (int p = 1; p < processes; p++) {
        pid_t child = fork();
        if (child < 0) { perror("fork"); return 2; }
        if (child == 0) { run_process(threads); return 0; }
    }
    run_process(threads);
    int status, failed = 0;
    while (wait(&status) > 0)
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed = 1;
    return failed ? 3 : 0;
}
