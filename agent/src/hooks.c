/*
 * The hot half of sonda's native recording, in C: the compiler's function hooks
 * (`-finstrument-functions` calls __cyg_profile_func_enter/exit around every function)
 * and the C API's region and event calls (through agent/src/hooks.rs) push their records
 * into the calling thread's ring here.
 *
 * Why C: the per-thread state must be reached with the initial-exec TLS model, one
 * %fs-relative load. Rust's thread_local! in a shared library uses the general-dynamic
 * model, a call to __tls_get_addr per access, and stable Rust cannot choose the model.
 * One enter + exit pair is two clock reads (rdtsc, ~8 ns each here) and two of these
 * pushes, so every instruction counts.
 *
 * Why these symbols are versioned (SONDA_1, see build.rs): glibc defines no-op
 * __cyg_profile_func_enter/exit too. A library that a JVM loads (a JNI library) looks
 * symbols up in the global scope first, where libc comes before libsonda.so, so an
 * unversioned reference would bind to glibc's no-ops. A reference to the SONDA_1
 * version, which code linked against libsonda.so gets, only binds to these.
 *
 * The protocol is sonda-shm's (shm/src/region.rs, `Producer::push`): whole 16-byte
 * units at `write & (len - 1)`, room checked against the consumer's `read`, `write`
 * advanced with a release store, drops counted by the owning thread. The offsets and
 * record kinds come from sonda-shm through build.rs (-D flags), so they cannot drift.
 * Unlike `Producer`, the room is checked against a cached `read + len` first and the
 * consumer's `read` is loaded only when that says the ring is full: `read` only grows,
 * so a stale value can only under-estimate the room. Rust code (a JVM's method probes)
 * may push into the same slot from the same thread: both sides load `write` from the
 * slot header each time.
 *
 * Nothing here is instrumented (every function is no_instrument_function, whatever
 * CFLAGS say), nothing locks, allocates or makes a system call on the fast path. The
 * slow path (a thread's first record in a recording) calls back into Rust, which may
 * allocate; a guard keeps instrumented code it might reach (an instrumented malloc)
 * from recursing into it.
 */

#include <stdint.h>
#include <stddef.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "sonda's ring records are little-endian"
#endif

#if !defined(SONDA_SLOT_WRITE) || !defined(SONDA_SLOT_READ) || !defined(SONDA_SLOT_DROPPED) \
    || !defined(SONDA_SLOT_DROPPED_ENTERS) || !defined(SONDA_UNIT) || !defined(SONDA_ENTER)  \
    || !defined(SONDA_FUNC_ENTER) || !defined(SONDA_FUNC_LEAVE)
#error "build.rs passes the layout of sonda-shm as -D flags"
#endif

#define HOOK __attribute__((no_instrument_function))
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

/* What Rust hands over when it claimed the calling thread's slot (hooks.rs `Claim`). */
struct sonda_hooks_claim {
    uint8_t *header;
    uint8_t *data;
    uint64_t len;
};

typedef int (*sonda_hooks_claim_fn)(struct sonda_hooks_claim *out);

/* The calling thread's slot, as the fast path needs it. Valid while `epoch` equals the
 * global `epoch`: a claim copies the global's value, and every start or end of a
 * recording changes the global. */
struct hook_slot {
    uint8_t *header;
    uint8_t *data;
    uint64_t mask;
    /* `read + len` when last loaded: the ring has room up to here. */
    uint64_t room_until;
    uint32_t epoch;
    /* Inside the slow path (a call into Rust): hooks reached from there do nothing. */
    uint32_t busy;
};

static __thread struct hook_slot slot __attribute__((tls_model("initial-exec")));

/* Odd while a recording runs, even when none does; starts at 2 so that a thread's
 * zeroed `slot.epoch` never matches. Written by Rust through sonda_hooks_recording(). */
static uint32_t epoch = 2;
/* Whether records are stamped with rdtsc (else CLOCK_MONOTONIC), as the buffer says. */
static uint32_t use_tsc;
static sonda_hooks_claim_fn claim_fn;

HOOK static inline uint64_t now(void) {
#if defined(__x86_64__)
    if (LIKELY(__atomic_load_n(&use_tsc, __ATOMIC_RELAXED)))
        return __rdtsc();
#endif
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The calling thread's slot for the current recording, claiming one through Rust on
 * its first record; NULL when nothing can be recorded now. */
HOOK __attribute__((noinline, cold)) static struct hook_slot *refill(struct hook_slot *s,
                                                                   uint32_t e) {
    if (s->busy)
        return NULL;
    sonda_hooks_claim_fn claim = __atomic_load_n(&claim_fn, __ATOMIC_ACQUIRE);
    if (claim == NULL)
        return NULL;
    s->busy = 1;
    struct sonda_hooks_claim c = {NULL, NULL, 0};
    int ok = claim(&c);
    s->busy = 0;
    if (!ok || c.header == NULL || c.len < 2 * SONDA_UNIT || (c.len & (c.len - 1)) != 0)
        return NULL;
    s->header = c.header;
    s->data = c.data;
    s->mask = c.len - 1;
    s->room_until = __atomic_load_n((uint64_t *)(c.header + SONDA_SLOT_READ), __ATOMIC_ACQUIRE)
                    + c.len;
    s->epoch = e;
    return s;
}

/* The thread's valid slot, or NULL (no recording: two loads and a compare). */
HOOK static inline struct hook_slot *current_slot(void) {
    struct hook_slot *s = &slot;
    uint32_t e = __atomic_load_n(&epoch, __ATOMIC_ACQUIRE);
    if (LIKELY(s->epoch == e))
        return s;
    if (!(e & 1))
        return NULL;
    return refill(s, e);
}

/* A full ring: count the drop (only this thread writes these counters). */
HOOK __attribute__((noinline, cold)) static void count_drop(struct hook_slot *s, uint32_t kind) {
    uint64_t *d = (uint64_t *)(s->header + SONDA_SLOT_DROPPED);
    __atomic_store_n(d, __atomic_load_n(d, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
    if (kind == SONDA_ENTER || kind == SONDA_FUNC_ENTER) {
        uint64_t *e = (uint64_t *)(s->header + SONDA_SLOT_DROPPED_ENTERS);
        __atomic_store_n(e, __atomic_load_n(e, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
    }
}

/* Pushes a record of `units` units (1, or 2 with `extra` in the second); `head`
 * carries the kind and the `aux` field (the unit count is added here). The clock is
 * read once the room is known, so that a full ring costs no clock read. */
HOOK static inline void push(struct hook_slot *s, uint32_t head, uint32_t units, uint32_t arg,
                             uint64_t extra) {
    uint64_t *write_word = (uint64_t *)(s->header + SONDA_SLOT_WRITE);
    uint64_t w = __atomic_load_n(write_word, __ATOMIC_RELAXED);
    uint64_t need = (uint64_t)units * SONDA_UNIT;
    if (UNLIKELY(w + need > s->room_until)) {
        s->room_until = __atomic_load_n((uint64_t *)(s->header + SONDA_SLOT_READ),
                                        __ATOMIC_ACQUIRE)
                        + s->mask + 1;
        if (w + need > s->room_until) {
            count_drop(s, head & 0xff);
            return;
        }
    }
    uint64_t time = now();
    uint8_t *p = s->data + (w & s->mask);
    ((uint64_t *)p)[0] = time;
    ((uint32_t *)p)[2] = head | (units - 1) << 8;
    ((uint32_t *)p)[3] = arg;
    if (units == 2) {
        uint8_t *q = s->data + ((w + SONDA_UNIT) & s->mask);
        ((uint64_t *)q)[0] = extra;
        ((uint64_t *)q)[1] = 0;
    }
    __atomic_store_n(write_word, w + need, __ATOMIC_RELEASE);
}

/* ---- the compiler's hooks: exported as __cyg_profile_func_*@@SONDA_1 ---------------- */

/* A function record: one unit with the address's low 48 bits in aux:arg (the short
 * form, `sonda_shm::records::func_short`), or two units for a higher address. Half the
 * memory traffic of the long form: at tens of millions of calls a second the ring's
 * cache lines, not the instructions, are most of the cost. */
HOOK __attribute__((noinline, cold)) static void push_func_long(struct hook_slot *s,
                                                               uint32_t kind, uint64_t addr) {
    push(s, kind, 2, 0, addr);
}

HOOK static inline void push_func(uint32_t kind, void *fn) {
    struct hook_slot *s = current_slot();
    if (UNLIKELY(s == NULL))
        return;
    uint64_t addr = (uint64_t)(uintptr_t)fn;
    if (LIKELY(addr >> 48 == 0))
        push(s, kind | (uint32_t)(addr >> 32) << 16, 1, (uint32_t)addr, 0);
    else
        push_func_long(s, kind, addr);
}

HOOK void sonda_cyg_enter(void *fn, void *site) {
    (void)site;
    push_func(SONDA_FUNC_ENTER, fn);
}

HOOK void sonda_cyg_exit(void *fn, void *site) {
    (void)site;
    push_func(SONDA_FUNC_LEAVE, fn);
}

#ifndef SONDA_UNVERSIONED_HOOKS
__asm__(".symver sonda_cyg_enter, __cyg_profile_func_enter@@SONDA_1");
__asm__(".symver sonda_cyg_exit, __cyg_profile_func_exit@@SONDA_1");
#endif /* else hooks.rs exports them (see build.rs) */

/* ---- called from Rust (hooks.rs); not exported from libsonda.so --------------------- */

/* A one-unit record of `kind` (region enter and exit). */
HOOK void sonda_hooks_record1(uint32_t kind, uint32_t arg) {
    struct hook_slot *s = current_slot();
    if (LIKELY(s != NULL))
        push(s, kind, 1, arg, 0);
}

/* A two-unit record of `kind` with `extra` (typed events). */
HOOK void sonda_hooks_record2(uint32_t kind, uint32_t arg, uint64_t extra) {
    struct hook_slot *s = current_slot();
    if (LIKELY(s != NULL))
        push(s, kind, 2, arg, extra);
}

/* A recording started (`active`, records stamped with rdtsc when `tsc`) or ended:
 * every thread's slot is stale from now on. */
HOOK void sonda_hooks_recording(int active, int tsc, sonda_hooks_claim_fn claim) {
    __atomic_store_n(&use_tsc, tsc ? 1u : 0u, __ATOMIC_RELAXED);
    __atomic_store_n(&claim_fn, claim, __ATOMIC_RELEASE);
    uint32_t e = __atomic_load_n(&epoch, __ATOMIC_RELAXED);
    uint32_t next = e + 1;
    if ((next & 1) != (active ? 1u : 0u))
        next += 1;
    __atomic_store_n(&epoch, next, __ATOMIC_RELEASE);
}

/* The calling thread gave its slot back (its end), or is the child of a fork (the
 * slot is the parent's): its next record claims again. */
HOOK void sonda_hooks_forget_thread(void) {
    struct hook_slot *s = &slot;
    s->header = NULL;
    s->epoch = 0;
}
