/* Maps libjvm.so (argv[1]) without creating a JVM: what a launcher looks like before
 * JNI_CreateJavaVM has installed HotSpot's signal handlers. SIGQUIT would kill it. */
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2 || !dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL)) {
        fprintf(stderr, "dlopen: %s\n", argc < 2 ? "no path" : dlerror());
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    char buf[64];
    while (read(0, buf, sizeof buf) > 0) {
    }
    return 0;
}
