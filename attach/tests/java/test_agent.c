/* A minimal JVMTI-loadable library: Agent_OnAttach returns the number in its options,
 * so the caller can tell the JVM really ran it. No JNI headers needed. */
#include <stdlib.h>

int Agent_OnAttach(void *vm, char *options, void *reserved) {
    (void)vm;
    (void)reserved;
    return options ? atoi(options) : -100;
}
