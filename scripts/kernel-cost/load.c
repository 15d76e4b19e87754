// Loads raw.bpf.o and attaches the programs named on the command line (charge, sw,
// waking, wakeup), prints "attached" and holds them until SIGINT or SIGTERM. For
// scripts/bench-kernel-cost.sh only.
#include <bpf/libbpf.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop;
static void on_signal(int sig) { (void)sig; stop = 1; }

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s OBJ PROG...\n", argv[0]);
        return 2;
    }
    struct bpf_object *obj = bpf_object__open_file(argv[1], NULL);
    if (!obj || libbpf_get_error(obj)) {
        fprintf(stderr, "load: cannot open %s\n", argv[1]);
        return 1;
    }
    struct bpf_program *prog;
    bpf_object__for_each_program(prog, obj) {
        int wanted = 0;
        for (int i = 2; i < argc; i++)
            wanted |= !strcmp(bpf_program__name(prog), argv[i]);
        bpf_program__set_autoload(prog, wanted);
    }
    if (bpf_object__load(obj)) {
        fprintf(stderr, "load: cannot load %s\n", argv[1]);
        return 1;
    }
    for (int i = 2; i < argc; i++) {
        prog = bpf_object__find_program_by_name(obj, argv[i]);
        if (!prog || libbpf_get_error(bpf_program__attach(prog))) {
            fprintf(stderr, "load: cannot attach %s\n", argv[i]);
            return 1;
        }
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    printf("attached\n");
    fflush(stdout);
    while (!stop)
        pause();
    return 0;
}
