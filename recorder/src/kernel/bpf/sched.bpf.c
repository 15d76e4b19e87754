// SPDX-License-Identifier: GPL-2.0
//
// sonda's scheduler events as BPF programs on BTF raw tracepoints (`tp_btf`): the
// kernel builds no record before the program runs, and each program decides from a
// map of traced tasks whether anything is written, so a task sonda does not trace
// pays a lookup instead of an ftrace record (docs/overhead.md, "BPF raw
// tracepoints"). Read by recorder/src/kernel/bpf_source.rs; the record layout below is
// decoded by recorder/src/kernel/bpf_record.rs and must change with it.
//
// What is written, the rules of the ftrace task filter (`task_filter.rs`) but decided
// per task, whatever task's context the kernel writes from:
// - a switch when the task leaving or the task arriving is traced;
// - a wakeup when the woken task or the running one (the waker) is traced;
// - a creation, exit, exec or rename when the running task is traced (a rename also
//   when the renamed one is);
// - a migration or a CPU-time charge when the task it is about is traced: the kernel
//   writes those from any task's context (the load balancer, another program's wakeup);
// - another program's charge when it is the first of a task found running on its CPU
//   without a reported switch (`running` below): it dates the switch the tracepoint
//   did not report, which `cpu_queue.rs` recovers.
// A task created by a traced task is traced from its creation on; one created by an
// excluded task (the collector's own threads) is excluded.
//
// Only clang is needed to build this: the few kernel structure fields read are declared
// here with `preserve_access_index`, and libbpf relocates them against the running
// kernel's BTF when it loads the object (CO-RE).

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef int pid_t;
typedef _Bool bool;
// What bpf_helper_defs.h expects from linux/types.h, without the host's asm headers.
typedef u8 __u8;
typedef u16 __u16;
typedef u32 __u32;
typedef u64 __u64;
typedef signed char __s8;
typedef short __s16;
typedef int __s32;
typedef long long __s64;
typedef u16 __be16;
typedef u32 __be32;
typedef u32 __wsum;

// The constants of linux/bpf.h used here (stable kernel ABI).
#define BPF_MAP_TYPE_HASH 1
#define BPF_MAP_TYPE_ARRAY 2
#define BPF_MAP_TYPE_PERCPU_ARRAY 6
#define BPF_MAP_TYPE_RINGBUF 27
#define BPF_F_MMAPABLE (1U << 10)
#define BPF_RB_NO_WAKEUP 1

#include <bpf/bpf_helpers.h>

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)
struct thread_info {
    u32 cpu;
};
struct sched_info {
    unsigned long long run_delay;
    unsigned long long last_arrival;
    unsigned long long last_queued;
};
struct rq {
    u64 clock;
};
struct cfs_rq {
    struct rq *rq;
};
struct sched_entity {
    struct cfs_rq *cfs_rq;
};
struct task_struct {
    struct thread_info thread_info;
    int exit_state;
    pid_t pid;
    pid_t tgid;
    char comm[16];
    struct sched_entity se;
    struct sched_info sched_info;
};
struct linux_binprm {
    const char *filename;
};
#pragma clang attribute pop

char LICENSE[] SEC("license") = "GPL";

// Values of `tasks`.
#define TRACED 1
#define EXCLUDED 2

// Per tid: TRACED or EXCLUDED (0: neither), one byte each for every tid the kernel
// can give (PID_MAX_LIMIT, 4,194,304 on 64-bit machines: 4 MiB, the most an array
// value may be). Filled by the collector through its own mapping of the map (the tasks
// it is asked to trace, its own threads) and here at each creation; a task's byte is
// cleared when it is freed. One load at a known place, where a hash map of tids cost
// about 100 ns a program run on this project's machines (the bucket and the element
// two dependent cache misses, docs/overhead.md).
#define MAX_TIDS (1 << 22)
_Static_assert(MAX_TIDS - 1 == 0x3fffff, "place() masks with MAX_TIDS - 1");
struct verdicts {
    u8 of[MAX_TIDS];
};
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(map_flags, BPF_F_MMAPABLE);
    __uint(max_entries, 1);
    __type(key, u32);
    __type(value, struct verdicts);
} tasks SEC(".maps");

// settings[0]: 1 once the collector named the traced tasks; until then (and with the
// task filter off) every task's events are written.
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, u32);
    __type(value, u32);
} settings SEC(".maps");

// Per CPU: the task arriving at the last switch the tracepoint reported, or the task
// last found running without one (whose first charge was then written).
struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, u32);
    __type(value, u32);
} running SEC(".maps");

// Per CPU: counts[COUNT_LOST], records not written because the ring buffer was full;
// counts[COUNT_SKIPPED], other programs' records left out by the task filter (what
// the collector counts as `kernel.foreign_skipped` with ftrace).
#define COUNT_LOST 0
#define COUNT_SKIPPED 1
struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 2);
    __type(key, u32);
    __type(value, u64);
} counts SEC(".maps");

// Sized by the collector before loading.
struct {
    __uint(type, BPF_MAP_TYPE_RINGBUF);
    __uint(max_entries, 1 << 24);
} records SEC(".maps");

enum kind {
    K_SWITCH = 1,
    K_WAKING = 2,
    K_WAKEUP = 3,
    K_WAKEUP_NEW = 4,
    K_NEWTASK = 5,
    K_EXIT = 6,
    K_EXEC = 7,
    K_RENAME = 8,
    K_MIGRATE = 9,
    K_CHARGE = 10,
};

// One event, 48 bytes (bpf_record.rs).
struct record {
    u64 time;    // CLOCK_MONOTONIC, as the ftrace instance's `mono` clock
    u32 current; // the running task (its tid; 0 for idle)
    u16 kind;
    u16 cpu;     // the CPU the program ran on
    u32 a;       // the task the event is about
    u32 b;       // a second task or a CPU
    u64 c;       // prev_state, clone flags, runtime
    char text[16];
};

// An exec: the record and the file name.
struct exec_record {
    struct record r;
    char filename[256];
};

static __always_inline struct verdicts *verdicts(void)
{
    u32 zero = 0;
    return bpf_map_lookup_elem(&tasks, &zero);
}

// `tid`'s place in the array, below MAX_TIDS in a way the verifier sees: clang drops
// a plain mask after the range check (it knows it changes nothing) and may take the
// tid afresh from the register it came in, unbounded; the mask in assembly stays.
static __always_inline u64 place(u32 tid)
{
    u64 i = tid;
    asm volatile("%[i] &= 0x3fffff" : [i] "+r"(i));
    return i;
}

static __always_inline u32 state_of(u32 tid)
{
    struct verdicts *v = verdicts();
    return v && tid < MAX_TIDS ? v->of[place(tid)] : 0;
}

static __always_inline void set_state(u32 tid, u8 state)
{
    struct verdicts *v = verdicts();
    if (v && tid < MAX_TIDS)
        v->of[place(tid)] = state;
}

static __always_inline bool filtering(void)
{
    u32 zero = 0;
    u32 *on = bpf_map_lookup_elem(&settings, &zero);
    return on && *on;
}

static __always_inline bool traced(u32 tid)
{
    return !filtering() || state_of(tid) == TRACED;
}

static __always_inline void count(u32 which)
{
    u64 *n = bpf_map_lookup_elem(&counts, &which);
    if (n)
        *n += 1;
}

static __always_inline void fill(struct record *r, u32 kind, u32 current, u32 a, u32 b, u64 c)
{
    r->time = bpf_ktime_get_ns();
    r->current = current;
    r->kind = kind;
    r->cpu = bpf_get_smp_processor_id();
    r->a = a;
    r->b = b;
    r->c = c;
}

static __always_inline struct record *emit(u32 kind, u32 current, u32 a, u32 b, u64 c)
{
    struct record *r = bpf_ringbuf_reserve(&records, sizeof(*r), 0);
    if (!r) {
        count(COUNT_LOST);
        return 0;
    }
    fill(r, kind, current, a, b, c);
    return r;
}

// The reader polls: no wake-up at each record (BPF_RB_NO_WAKEUP).
static __always_inline void submit(struct record *r)
{
    bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
}

static __always_inline void write(u32 kind, u32 current, u32 a, u32 b, u64 c)
{
    struct record *r = emit(kind, current, a, b, c);
    if (r) {
        __builtin_memset(r->text, 0, sizeof(r->text));
        submit(r);
    }
}

static __always_inline u32 current_tid(void)
{
    return (u32)bpf_get_current_pid_tgid();
}

static __always_inline void set_running(u32 tid)
{
    u32 zero = 0;
    u32 *slot = bpf_map_lookup_elem(&running, &zero);
    if (slot)
        *slot = tid;
}

// The `prev_state` ftrace writes (`__trace_sched_switch_state`): TASK_REPORT_MAX when
// preempted, else the highest reported state bit, TASK_IDLE as TASK_REPORT_IDLE and an
// rtlock wait as uninterruptible.
static __always_inline u64 switch_state(bool preempt, u32 prev_state, struct task_struct *prev)
{
    if (preempt)
        return 0x100;
    u32 state = (prev_state | (u32)prev->exit_state) & 0x7f;
    if (prev_state == 0x402)
        state = 0x80;
    if (prev_state == 0x1000)
        state = 0x2;
    // The highest bit of the eight (no count-leading-zeros instruction in BPF).
    u64 high = 0;
    for (u32 bit = 1; bit <= 0x80; bit <<= 1)
        if (state & bit)
            high = bit;
    return high;
}

// What a switch record carries in its text: whether the task leaving and the task
// arriving are traced (PREV_TRACED, NEXT_TRACED), and the run-queue wait that ends
// with this switch-in as the kernel measures it for schedstat (the run queue's clock
// now less `sched_info.last_queued`, the same subtraction `sched_info_arrive` makes
// right after this tracepoint; WAIT_UNKNOWN when the kernel has no enqueue time, or the
// task arriving is not traced). With them the reader makes up the wakeups and
// migrations the programs did not see (bpf_unseen.rs). Last, the record's time less
// the run queue's clock, low 32 bits, as a charge carries it (CLOCK_KNOWN: it was
// read): the clock the kernel dates this switch by, which a wakeup that asked for it
// may have left stale for as long as the switch was delayed (switch_clock.rs).
struct switch_text {
    u64 wait;
    u8 flags;
    u8 unused[3];
    u32 clock_lag;
};
#define PREV_TRACED 1
#define NEXT_TRACED 2
#define CLOCK_KNOWN 4
#define WAIT_UNKNOWN (~0ULL)

static __always_inline u64 run_queue_wait(struct task_struct *next, u64 now)
{
    u64 queued = next->sched_info.last_queued;
    if (!queued)
        return WAIT_UNKNOWN;
    return now > queued ? now - queued : 0;
}

SEC("tp_btf/sched_switch")
int sched_switch(u64 *ctx)
{
    bool preempt = (bool)ctx[0];
    struct task_struct *prev = (struct task_struct *)ctx[1];
    struct task_struct *next = (struct task_struct *)ctx[2];
    u32 prev_state = (u32)ctx[3];
    u32 p = prev->pid, n = next->pid;
    set_running(n);
    bool tp = traced(p), tn = traced(n);
    if (!tp && !tn) {
        count(COUNT_SKIPPED);
        return 0;
    }
    struct record *r = emit(K_SWITCH, p, p, n, switch_state(preempt, prev_state, prev));
    if (!r)
        return 0;
    __builtin_memset(r->text, 0, sizeof(r->text));
    struct switch_text *t = (struct switch_text *)r->text;
    // This CPU's run queue, through the task's: `runqueues` itself has no address
    // the verifier can find on kernels without data symbols in kallsyms.
    u64 now = next->se.cfs_rq->rq->clock;
    t->flags = (tp ? PREV_TRACED : 0) | (tn ? NEXT_TRACED : 0) | (now ? CLOCK_KNOWN : 0);
    t->wait = tn ? run_queue_wait(next, now) : WAIT_UNKNOWN;
    t->clock_lag = (u32)(r->time - now);
    submit(r);
    return 0;
}

static __always_inline void wake(u32 kind, struct task_struct *p, u32 target)
{
    u32 current = current_tid();
    u32 wakee = p->pid;
    if (traced(wakee) || traced(current))
        write(kind, current, wakee, target, 0);
    else
        count(COUNT_SKIPPED);
}

SEC("tp_btf/sched_waking")
int sched_waking(u64 *ctx)
{
    struct task_struct *p = (struct task_struct *)ctx[0];
    wake(K_WAKING, p, 0);
    return 0;
}

SEC("tp_btf/sched_wakeup")
int sched_wakeup(u64 *ctx)
{
    struct task_struct *p = (struct task_struct *)ctx[0];
    wake(K_WAKEUP, p, p->thread_info.cpu);
    return 0;
}

SEC("tp_btf/sched_wakeup_new")
int sched_wakeup_new(u64 *ctx)
{
    struct task_struct *p = (struct task_struct *)ctx[0];
    wake(K_WAKEUP_NEW, p, p->thread_info.cpu);
    return 0;
}

SEC("tp_btf/task_newtask")
int task_newtask(u64 *ctx)
{
    struct task_struct *task = (struct task_struct *)ctx[0];
    u64 clone_flags = ctx[1];
    u32 current = current_tid();
    u32 child = task->pid;
    u32 state = state_of(current);
    // Written whatever it is: the collector may have listed an earlier task of this
    // tid just as it exited, after its free cleared the byte.
    set_state(child, state);
    if (!filtering() || state == TRACED) {
        struct record *r = emit(K_NEWTASK, current, child, task->tgid, clone_flags);
        if (r) {
            bpf_probe_read_kernel_str(r->text, sizeof(r->text), task->comm);
            submit(r);
        }
    }
    return 0;
}

SEC("tp_btf/sched_process_exit")
int sched_process_exit(u64 *ctx)
{
    struct task_struct *p = (struct task_struct *)ctx[0];
    u32 tid = p->pid;
    if (traced(tid))
        write(K_EXIT, current_tid(), tid, 0, 0);
    return 0;
}

SEC("tp_btf/sched_process_free")
int sched_process_free(u64 *ctx)
{
    struct task_struct *p = (struct task_struct *)ctx[0];
    u32 tid = p->pid;
    set_state(tid, 0);
    return 0;
}

SEC("tp_btf/sched_process_exec")
int sched_process_exec(u64 *ctx)
{
    struct task_struct *p = (struct task_struct *)ctx[0];
    struct linux_binprm *bprm = (struct linux_binprm *)ctx[2];
    u32 current = current_tid();
    if (!traced(current))
        return 0;
    struct exec_record *e = bpf_ringbuf_reserve(&records, sizeof(*e), 0);
    if (!e) {
        count(COUNT_LOST);
        return 0;
    }
    fill(&e->r, K_EXEC, current, p->pid, 0, 0);
    __builtin_memset(e->r.text, 0, sizeof(e->r.text));
    const char *filename = bprm->filename;
    bpf_probe_read_kernel_str(e->filename, sizeof(e->filename), filename);
    bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
    return 0;
}

SEC("tp_btf/task_rename")
int task_rename(u64 *ctx)
{
    struct task_struct *task = (struct task_struct *)ctx[0];
    const char *comm = (const char *)ctx[1];
    u32 current = current_tid();
    u32 tid = task->pid;
    if (!traced(tid) && !traced(current))
        return 0;
    struct record *r = emit(K_RENAME, current, tid, 0, 0);
    if (r) {
        __builtin_memset(r->text, 0, sizeof(r->text));
        bpf_probe_read_kernel_str(r->text, sizeof(r->text), comm);
        submit(r);
    }
    return 0;
}

SEC("tp_btf/sched_migrate_task")
int sched_migrate_task(u64 *ctx)
{
    struct task_struct *p = (struct task_struct *)ctx[0];
    u32 dest = (u32)ctx[1];
    u32 tid = p->pid;
    if (!traced(tid)) {
        count(COUNT_SKIPPED);
        return 0;
    }
    struct record *r = emit(K_MIGRATE, current_tid(), tid, p->thread_info.cpu, dest);
    if (!r)
        return 0;
    // The task's run_delay: a queued task is taken off its run queue before this
    // tracepoint (`sched_info_dequeue` adds the wait so far), so what it grew by since
    // the task went to sleep is how long it had been waiting, woken, before the move;
    // with it the reader dates a wakeup it did not see, which the switch-in's own wait
    // (from the enqueue on the new CPU) cannot (bpf_unseen.rs).
    u64 *text = (u64 *)r->text;
    text[0] = p->sched_info.run_delay;
    text[1] = WAIT_UNKNOWN;
    submit(r);
    return 0;
}

SEC("tp_btf/sched_stat_runtime")
int sched_stat_runtime(u64 *ctx)
{
    struct task_struct *p = (struct task_struct *)ctx[0];
    u64 runtime = ctx[1];
    u32 tid = p->pid;
    u32 current = current_tid();
    bool mine = traced(tid);
    if (!mine) {
        // Another program's charge: written only when it is the first of a task found
        // running here without a reported switch, to date that switch.
        u32 zero = 0;
        u32 *slot = bpf_map_lookup_elem(&running, &zero);
        if (tid != current || !slot || *slot == tid) {
            count(COUNT_SKIPPED);
            return 0;
        }
        *slot = tid;
    }
    struct record *r = emit(K_CHARGE, current, tid, 0, runtime);
    if (!r)
        return 0;
    // The task's run_delay (schedstat's waiting, as of its last switch-in): with it
    // the reader dates a wakeup whose switch-in it did not see either (bpf_unseen.rs).
    // Then the wall time it has been on its CPU, by its run queue's clock (now, for
    // the charge: updated just before) less `sched_info.last_arrival` (that clock at
    // its switch-in): a switch-in the programs did not report is dated by it
    // (cpu_queue.rs), where the charge itself leaves out what the hypervisor stole.
    // Both words of the text are written below.
    u64 *text = (u64 *)r->text;
    text[0] = mine ? p->sched_info.run_delay : WAIT_UNKNOWN;
    text[1] = WAIT_UNKNOWN;
    u64 arrived = p->sched_info.last_arrival;
    struct rq *rq = p->se.cfs_rq->rq;
    if (mine && arrived && rq) {
        u64 now = rq->clock;
        text[1] = now > arrived ? now - arrived : 0;
        // How far the run queue's clock lags the record's time, low 32 bits (the two
        // clocks differ by a constant the reader takes out): the clock was updated
        // some µs before this charge, a different amount each time, and the wall time
        // above is short by that much; the reader corrects it by the least lag seen
        // lately (clock_lag.rs).
        r->b = (u32)(r->time - now);
    }
    submit(r);
    return 0;
}
