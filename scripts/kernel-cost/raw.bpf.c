// SPDX-License-Identifier: GPL-2.0
// The scheduler events sonda records, on BTF raw tracepoints (tp_btf: the program gets
// the tracepoint's arguments, the kernel builds no record first), for
// scripts/bench-kernel-cost.sh's bpf:MODE:EVENTS configurations. Compiled three ways:
//   -DMODE_EMPTY   every program returns at once: the least an attached program costs
//   -DMODE_LOOKUP  each event's tasks looked up in a hash map of traced tids that holds
//                  none of them: what a program sonda does not trace would pay with the
//                  task filter done here instead of by ftrace's pid lists
//   -DMODE_WRITE   the same lookups, then the fields sonda keeps written to a BPF ring
//                  buffer whatever they said (BPF_RB_NO_WAKEUP: the reader polls, as
//                  sonda's reads ftrace): what the traced program would pay
// The charges alone (sched_stat_runtime) or all four events are attached by the loader.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 65536);
    __type(key, u32);
    __type(value, u8);
} traced SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_RINGBUF);
    __uint(max_entries, 256 << 20);
} records SEC(".maps");

struct record {
    u64 time;
    u32 kind, cpu;
    u32 a, b;
    u64 c;
};

static __always_inline int is_traced(u32 tid)
{
    return bpf_map_lookup_elem(&traced, &tid) != 0;
}

static __always_inline void emit(u32 kind, u32 a, u32 b, u64 c)
{
    struct record *r = bpf_ringbuf_reserve(&records, sizeof(*r), 0);
    if (!r)
        return;
    r->time = bpf_ktime_get_ns();
    r->kind = kind;
    r->cpu = bpf_get_smp_processor_id();
    r->a = a;
    r->b = b;
    r->c = c;
    bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
}

SEC("tp_btf/sched_stat_runtime")
int BPF_PROG(charge, struct task_struct *p, u64 runtime)
{
#ifndef MODE_EMPTY
    int hit = is_traced(p->pid);
#ifdef MODE_WRITE
    emit(1, p->pid, hit, runtime);
#endif
#endif
    return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(sw, bool preempt, struct task_struct *prev, struct task_struct *next,
             unsigned int prev_state)
{
#ifndef MODE_EMPTY
    int hit = is_traced(prev->pid) || is_traced(next->pid);
#ifdef MODE_WRITE
    emit(2, prev->pid, next->pid, ((u64)prev_state << 32) | hit);
#endif
#endif
    return 0;
}

/* sched_waking and sched_wakeup: the woken task and the task in whose context it is
   woken (the waker, or what an interrupt interrupted). */
static __always_inline void wake(u32 kind, struct task_struct *p, u64 third)
{
#ifndef MODE_EMPTY
    u32 waker = bpf_get_current_pid_tgid();
    int hit = is_traced(p->pid) || is_traced(waker);
#ifdef MODE_WRITE
    emit(kind, p->pid, waker, (third << 32) | hit);
#endif
#endif
}

SEC("tp_btf/sched_waking")
int BPF_PROG(waking, struct task_struct *p)
{
    wake(3, p, 0);
    return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(wakeup, struct task_struct *p)
{
    wake(4, p, p->wake_cpu);
    return 0;
}
