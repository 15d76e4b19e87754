/*
 * Counts the SIGINT and SIGTERM it receives.
 *
 * usage: sigcount FILE
 *
 * Writes its pid to FILE.ready when it is ready, then waits. 300 ms after the last
 * signal (or after 20 s without any) it writes "INT <n> TERM <m>" to FILE and exits 0,
 * so that a test can tell a signal passed on once from one passed on twice.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t ints, terms, last_change;

static void on_signal(int sig) {
    if (sig == SIGINT) ints++;
    else terms++;
    last_change++;
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: sigcount FILE\n"); return 2; }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    char path[4096];
    snprintf(path, sizeof path, "%s.ready", argv[1]);
    FILE *ready = fopen(path, "w");
    if (!ready) { perror(path); return 2; }
    fprintf(ready, "%d\n", getpid());
    fclose(ready);
    int quiet_ms = 0, seen = 0, waited_ms = 0;
    struct timespec ten_ms = {0, 10000000};
    while (waited_ms < 20000) {
        nanosleep(&ten_ms, NULL);
        waited_ms += 10;
        if (last_change != seen) { seen = last_change; quiet_ms = 0; continue; }
        quiet_ms += 10;
        if (seen > 0 && quiet_ms >= 300) break;
    }
    FILE *out = fopen(argv[1], "w");
    if (!out) { perror(argv[1]); return 2; }
    fprintf(out, "INT %d TERM %d\n", (int)ints, (int)terms);
    fclose(out);
    return 0;
}
