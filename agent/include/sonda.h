/*
 * sonda.h: sonda's C API, for C and C++ programs and JNI libraries.
 *
 * Native code marks regions and events, and names them, into the same trace as sonda's
 * kernel scheduling records and (inside a JVM) its Java method records:
 *
 *     #include <sonda.h>
 *
 *     static uint32_t parse;                 // a region id
 *     int main(void) {
 *         parse = sonda_region("parse");     // once: registers and names the region
 *         sonda_thread_name("main loop");
 *         sonda_event_type_name(1, "queue length");
 *         for (;;) {
 *             sonda_region_enter(parse);
 *             ...
 *             sonda_region_exit(parse);
 *             sonda_event(1, queue_length);
 *         }
 *     }
 *
 * Build: cc -I<sonda>/agent/include prog.c -L<dir of libsonda.so> -lsonda
 *        -Wl,-rpath,<dir of libsonda.so>
 * Record: sonda record -o prog.trace -- ./prog
 *
 * Compiler instrumentation: code built with -finstrument-functions (gcc or clang) and
 * linked with -lsonda records every entry and exit of its functions; their names are
 * read from the binary's symbols when the trace is exported (build with symbols, and
 * keep the binary where it was run). Functions marked
 * __attribute__((no_instrument_function)), or excluded with
 * -finstrument-functions-exclude-file-list=..., are not recorded. libsonda.so's hooks
 * are versioned symbols (__cyg_profile_func_enter@@SONDA_1): code linked against it
 * binds to them even inside a JVM, where glibc's no-op hooks come first otherwise.
 *
 * Where records go: in a process started by `sonda record` (which sets SONDA_SHM for
 * the command and its children), libsonda.so maps the recording's buffer when it is
 * loaded; in a JVM that runs sonda's agent (-agentpath:libsonda.so, or `sonda attach`),
 * a JNI library linked with -lsonda uses the agent's copy of the library (its SONAME is
 * libsonda.so, which the loader matches against the loaded agent) and its recording.
 * Without a recording every call does nothing and costs a few nanoseconds.
 *
 * Rules of the calls:
 * - sonda_region_enter, sonda_region_exit, sonda_event and the instrumentation hooks are
 *   hot: no lock, no allocation, no system call (but a clock read). When the calling
 *   thread's buffer is full the record is dropped and counted (the trace says how
 *   many), never waited for.
 * - The naming calls (sonda_region, sonda_event_type_name, sonda_event_value_name,
 *   sonda_thread_name) may lock and allocate: call them at start-up, not per event.
 * - Every call is thread-safe, accepts NULL names (ignored), and never fails: a
 *   program behaves the same with or without sonda.
 * - Regions and functions nest: enter and exit them in LIFO order on each thread (an
 *   exit of a region that is not the innermost one closes the regions inside it).
 *
 * In Paraver, regions and instrumented functions are values of event type 60000019
 * ("User function", with the Java methods), and the events of type T are event type
 * 70000000 + T (T at most 9999999, values at most 2^31 - 1 to be labelled).
 */
#ifndef SONDA_H
#define SONDA_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The id of the region called `name`, registered and named in the trace on its first
 * use (the same name gives the same id). Ids share the space of Java method ids, so
 * regions and methods never collide. Returns 0 when nothing is recorded: entering and
 * leaving region 0 does nothing.
 */
uint32_t sonda_region(const char *name);

/* The calling thread enters region `id` (from sonda_region). Hot. */
void sonda_region_enter(uint32_t id);

/* The calling thread leaves region `id`. Hot. */
void sonda_region_exit(uint32_t id);

/* A typed event with a value on the calling thread, at this instant. Hot. */
void sonda_event(uint32_t type, uint64_t value);

/* Names event type `type` in the trace. */
void sonda_event_type_name(uint32_t type, const char *name);

/* Names value `value` of event type `type` in the trace. */
void sonda_event_value_name(uint32_t type, uint64_t value, const char *name);

/* Names the calling thread in the trace (instead of its kernel name). */
void sonda_thread_name(const char *name);

/* 1 when this process records (calls are written to a trace), else 0. */
int sonda_recording(void);

#ifdef __cplusplus
}
#endif

#endif /* SONDA_H */
