#!/usr/bin/env python3
"""Where the JVM's thread CPU clock and the kernel's switch records part, per call.

Input (a directory written by scripts/demo/cpu-clock.sh):
  calls.csv        ServiceDemo's own per-call measurements (--out)
  trace-calls.csv  `sonda services --calls` of the same run
  ftrace.txt       sched_stat_runtime, sched_switch and sched_wakeup of the worker
                   threads, from a private ftrace instance on the monotonic clock

The JVM's thread CPU time is the kernel's fair-class accounting: the sum of the
`runtime` charges (sched_stat_runtime, one per update_curr) between its two reads.
sonda's CPU time is the time between switch-in and switch-out records. They part when
the run queue's clock is stale at a switch: the charge that follows a switch-in then
starts before the switch-in (the thread is charged time its predecessor ran), or the
last charge before a switch-out ends before it. This script shows, per class:

  jvm, trace    mean CPU per call (us)
  charged       the share of calls whose summed charges equal the JVM's reading (3 us)
  before-in     the mean charge per call for time before the thread's switch-ins,
                by the state the thread had left the CPU in (R preempted, S sleep,
                D disk), with the number of such switch-ins per call
Timestamps of ftrace's text output have 1 us resolution; `runtime` is exact.
"""

import bisect
import collections
import re
import statistics
import sys

LINE = re.compile(r"^\s*(.+)-(\d+)\s+\[(\d+)\]\s+\S+\s+(\d+)\.(\d+): (\w+): (.*)$")
FIELD = re.compile(r"(\w+)=(\S+)")
CLASSES = ["browse", "search", "checkout"]


def read_ftrace(path):
    runtime = collections.defaultdict(list)  # tid -> [(ns, charge)]
    switch_in = collections.defaultdict(list)  # tid -> [ns]
    switch_out = collections.defaultdict(list)  # tid -> [(ns, state)]
    with open(path) as f:
        for line in f:
            m = LINE.match(line)
            if not m:
                continue
            _, _, _, sec, usec, event, rest = m.groups()
            ns = int(sec) * 1_000_000_000 + int(usec) * 1000
            if event == "sched_stat_runtime":
                d = dict(FIELD.findall(rest))
                runtime[int(d["pid"])].append((ns, int(d["runtime"])))
            elif event == "sched_switch":
                prev, nxt = rest.split(" ==> ")
                p, n = dict(FIELD.findall(prev)), dict(FIELD.findall(nxt))
                switch_out[int(p["prev_pid"])].append((ns, p["prev_state"]))
                switch_in[int(n["next_pid"])].append(ns)
    return runtime, switch_in, switch_out


def read_csv(path):
    with open(path) as f:
        rows = [line.rstrip("\n").split(",") for line in f]
    header = rows[0]
    return [dict(zip(header, r)) for r in rows[1:]]


def main(run):
    runtime, switch_in, switch_out = read_ftrace(f"{run}/ftrace.txt")
    times = {tid: [t for t, _ in v] for tid, v in runtime.items()}
    traced = collections.defaultdict(list)
    for c in read_csv(f"{run}/trace-calls.csv"):
        traced[c["thread"]].append((int(c["begin_ns"]), int(c["tid"]), int(c["cpu_ns"])))
    for v in traced.values():
        v.sort()

    per_class = collections.defaultdict(list)
    before_in = collections.Counter()
    ins = collections.Counter()
    for j in read_csv(f"{run}/calls.csv"):
        cls, t0 = j["class"], int(j["start_ns"])
        t1 = t0 + int(j["wall_ns"])
        calls = traced[j["thread"]]
        _, tid, trace_cpu = calls[bisect.bisect_left(calls, (t0 - 20_000,))]
        ts = times.get(tid, [])
        # The JVM's two reads of its CPU clock each charge the thread (update_curr):
        # the last charge at or before t0, the first at or after t1.
        a = bisect.bisect_right(ts, t0 + 500) - 1
        z = bisect.bisect_left(ts, t1 - 500)
        charged = None
        if a >= 0 and z < len(ts):
            charged = sum(r for _, r in runtime[tid][a + 1 : z + 1])
        outs = switch_out[tid]
        for tin in switch_in[tid]:
            if not t0 < tin < t1:
                continue
            i = bisect.bisect_right(ts, tin)
            if i >= len(ts):
                continue
            t_charge, charge = runtime[tid][i]
            k = bisect.bisect_left(outs, (tin,)) - 1
            state = outs[k][1].rstrip("+") if k >= 0 else "?"
            before_in[(cls, state)] += charge - (t_charge - tin)
            ins[(cls, state)] += 1
        per_class[cls].append((int(j["cpu_ns"]), trace_cpu, charged))

    print(f"{'class':9} {'calls':>5} {'jvm us':>8} {'trace us':>8} {'jvm-trace':>9} {'charged=jvm':>12}   charge before switch-ins, us/call (switch-ins/call)")
    for cls in CLASSES:
        rows = per_class[cls]
        if not rows:
            continue
        jvm = statistics.mean(r[0] for r in rows)
        trace = statistics.mean(r[1] for r in rows)
        same = sum(1 for r in rows if r[2] is not None and abs(r[2] - r[0]) < 3000)
        parts = "  ".join(
            f"{s}: {before_in[(cls, s)] / len(rows) / 1e3:5.2f} ({ins[(cls, s)] / len(rows):.2f})"
            for s in ["R", "S", "D"]
            if ins[(cls, s)]
        )
        print(
            f"{cls:9} {len(rows):5} {jvm / 1e3:8.1f} {trace / 1e3:8.1f} {(jvm - trace) / 1e3:9.2f} "
            f"{same:5}/{len(rows):<5}   {parts}"
        )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "out/cpu-clock")
