/*
 * fork() without exec under sonda: the parent and the child both call instrumented
 * functions; each must record into a slot of its own (the child's under its own pid),
 * with the calls it made. The parent prints "before <n>" (calls before the fork, which
 * the child's count includes too), and each process "pid <pid> calls <n>" (its count of
 * work() calls) before it exits.
 */
#include <stdint.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

static uint64_t calls;

__attribute__((noinline)) static long work(int n) {
    calls++;
    return n <= 0 ? 0 : n + work(n - 1);
}

int main(void) {
    long sum = 0;
    for (int i = 0; i < 50; i++)
        sum += work(i % 5);
    printf("before %llu\n", (unsigned long long)calls);
    fflush(stdout);
    pid_t child = fork();
    if (child < 0)
        return 1;
    int rounds = child == 0 ? 80 : 30;
    for (int i = 0; i < rounds; i++)
        sum += work(i % 7);
    printf("pid %d calls %llu sum %ld\n", (int)getpid(), (unsigned long long)calls, sum);
    fflush(stdout);
    if (child > 0) {
        int status = 0;
        waitpid(child, &status, 0);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    }
    return 0;
}
