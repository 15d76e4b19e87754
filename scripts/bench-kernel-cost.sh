#!/usr/bin/env bash
# What kernel tracing costs the traced machine, inside the kernel: `perf bench sched
# pipe` (two processes passing a byte back and forth, two context switches, a wakeup
# and a few CPU-time charges per operation) pinned to CPU 0, timed per operation under
# each configuration, in alternating rounds so that a drift of the machine falls on
# all of them alike. The difference to `none` is what the tracing adds to each
# operation on the traced CPU, the collector's own work excluded (it runs on CPU 1).
#
# Configurations:
#   none         nothing traced
#   switch       an ftrace instance with sched_switch only
#   sched        an ftrace instance with every event sonda records (sched_switch,
#                sched_waking, sched_wakeup(_new), sched_stat_runtime, sched_migrate_task,
#                sched_process_exit/exec, task_newtask)
#   filtered     the same, with set_event_pid listing another task: what events of
#                tasks left out by sonda's task filter still cost
#   listed       the same, with set_event_pid listing the benchmark itself (and
#                options/event-fork): every event written, as in sched, plus the pid
#                filter's checks: what the task filter adds to a traced program
#   perfswitch   `perf record -a --switch-events -e dummy` (perf's context-switch
#                records on every CPU)
#   sonda        `sonda record` of the benchmark, collector pinned to CPU 1
#   sonda-b      the same with another sonda build ($SONDA_B_BIN), for an A/B
#   bystander    `sonda record` of another program (a `sleep`), the benchmark not
#                traced: what sonda costs the other programs on the machine (a load
#                generator beside a traced server)
#   bystander-b  the same with $SONDA_B_BIN
#   filter:E=F   an ftrace instance with event E only and the filter F on it (e.g.
#                filter:sched_stat_runtime=pid==1): what an event the filter discards
#                still costs
#   only:E[+E]   an ftrace instance with those events only (sched/ names without the
#                group: only:sched_stat_runtime, only:sched_waking+sched_wakeup), to
#                split the cost of `sched` by event
#   bpf:M:E      BPF programs on BTF raw tracepoints instead of ftrace
#                (scripts/kernel-cost/raw.bpf.c, loaded by scripts/kernel-cost/load.c;
#                needs clang, bpftool, libbpf-dev and /sys/kernel/btf/vmlinux): M is
#                empty (attached, nothing done), lookup (each event's tasks looked up
#                in a map of traced tids that holds none: a program sonda does not
#                trace) or write (looked up, then written to a ring buffer: a traced
#                program); E is charges (sched_stat_runtime) or all (with
#                sched_switch, sched_waking and sched_wakeup)
#
# usage: scripts/bench-kernel-cost.sh [ROUNDS] [LOOPS]     (as root; default 3, 300000)
# Environment: CONFIGS (default "none switch sched filtered perfswitch sonda"),
#              SONDA_BIN (default <repo>/target/release/sonda), SONDA_B_BIN
set -euo pipefail
ROUNDS=${1:-3}
LOOPS=${2:-300000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SONDA_BIN=${SONDA_BIN:-$ROOT/target/release/sonda}
CONFIGS=${CONFIGS:-none switch sched filtered perfswitch sonda}
TRACEFS=/sys/kernel/tracing
[ -d "$TRACEFS/instances" ] || { echo "bench-kernel-cost.sh: no tracefs at $TRACEFS (mount -t tracefs nodev $TRACEFS)" >&2; exit 1; }
command -v perf >/dev/null || { echo "bench-kernel-cost.sh: perf not found (apt-get install linux-perf)" >&2; exit 1; }
INSTANCE=$TRACEFS/instances/bench-kernel-cost-$$
TMP=$(mktemp -d)
cleanup() {
    [ -d "$INSTANCE" ] && { echo 0 > "$INSTANCE/tracing_on"; rmdir "$INSTANCE"; }
    rm -rf "$TMP"
}
trap cleanup EXIT
SCHED_EVENTS="sched/sched_switch sched/sched_waking sched/sched_wakeup sched/sched_wakeup_new
sched/sched_stat_runtime sched/sched_migrate_task sched/sched_process_exit
sched/sched_process_exec task/task_newtask"

pipe() { taskset -c 0 perf bench sched pipe -l "$LOOPS" 2>&1 | awk '/usecs\/op/{print $1}'; }

instance() {
    mkdir "$INSTANCE"
    echo mono > "$INSTANCE/trace_clock"
    echo 4096 > "$INSTANCE/buffer_size_kb"
    for e in "$@"; do [ -e "$INSTANCE/events/$e/enable" ] && echo 1 > "$INSTANCE/events/$e/enable"; done
}

# Builds the loader and raw.bpf.c for mode $1 into $TMP, once.
bpf_build() {
    local src=$ROOT/scripts/kernel-cost mode=$1
    case $mode in empty | lookup | write) ;; *) echo "bench-kernel-cost.sh: bpf mode is empty, lookup or write, not $mode" >&2; exit 2 ;; esac
    [ -f "$TMP/raw-$mode.o" ] && return
    for tool in clang bpftool; do
        command -v $tool >/dev/null || { echo "bench-kernel-cost.sh: $tool not found (apt-get install clang bpftool libbpf-dev)" >&2; exit 1; }
    done
    [ -f "$TMP/vmlinux.h" ] || bpftool btf dump file /sys/kernel/btf/vmlinux format c >"$TMP/vmlinux.h"
    [ -x "$TMP/load" ] || gcc -O2 -o "$TMP/load" "$src/load.c" -lbpf
    clang -O2 -g -target bpf -D__TARGET_ARCH_x86 -DMODE_${mode^^} -I"$TMP" -c "$src/raw.bpf.c" -o "$TMP/raw-$mode.o"
}

run() {
    case $1 in
    none) pipe ;;
    listed)
        instance $SCHED_EVENTS
        echo 1 > "$INSTANCE/options/event-fork"
        echo 1 > "$INSTANCE/tracing_on"
        # The shell lists itself, then becomes the benchmark, whose tasks event-fork lists.
        bash -c 'echo $$ > "$1/set_event_pid"; exec taskset -c 0 perf bench sched pipe -l "$2"' _ "$INSTANCE" "$LOOPS" 2>&1 |
            awk '/usecs\/op/{print $1}'
        echo 0 > "$INSTANCE/tracing_on"; rmdir "$INSTANCE" ;;
    switch|sched|filtered)
        if [ "$1" = switch ]; then instance sched/sched_switch; else instance $SCHED_EVENTS; fi
        # pid 1 is never one of the benchmark's tasks.
        [ "$1" = filtered ] && echo 1 > "$INSTANCE/set_event_pid"
        echo 1 > "$INSTANCE/tracing_on"
        pipe
        echo 0 > "$INSTANCE/tracing_on"; rmdir "$INSTANCE" ;;
    only:*)
        local events=() e
        IFS=+ read -r -a events <<<"${1#only:}"
        instance "${events[@]/#/sched/}"
        echo 1 > "$INSTANCE/tracing_on"
        pipe
        echo 0 > "$INSTANCE/tracing_on"; rmdir "$INSTANCE" ;;
    filter:*)
        local spec=${1#filter:}
        instance "sched/${spec%%=*}"
        echo "${spec#*=}" > "$INSTANCE/events/sched/${spec%%=*}/filter"
        echo 1 > "$INSTANCE/tracing_on"
        pipe
        echo 0 > "$INSTANCE/tracing_on"; rmdir "$INSTANCE" ;;
    bystander|bystander-b)
        local bin=$SONDA_BIN
        [ "$1" = bystander-b ] && bin=${SONDA_B_BIN:?bystander-b needs SONDA_B_BIN}
        taskset -c 1 "$bin" record -o "$TMP/b.trace" -- sleep 600 2>"$TMP/sonda.err" &
        local recorder=$!
        # Recording once the trace has its first block.
        for _ in $(seq 100); do [ -s "$TMP/b.trace" ] && break; sleep 0.05; done
        sleep 0.5
        pipe
        pkill -INT -P "$recorder" sleep || true
        wait "$recorder" || true
        grep -o 'collector CPU [0-9.]* s' "$TMP/sonda.err" >&2 || cat "$TMP/sonda.err" >&2
        rm -f "$TMP/b.trace" ;;
    bpf:*)
        local spec=${1#bpf:} progs
        local mode=${spec%%:*} events=${spec#*:}
        case $events in charges) progs=charge ;; all) progs="charge sw waking wakeup" ;;
            *) echo "bench-kernel-cost.sh: bpf events are charges or all, not $events" >&2; exit 2 ;; esac
        bpf_build "$mode"
        taskset -c 1 "$TMP/load" "$TMP/raw-$mode.o" $progs >"$TMP/load.out" 2>&1 &
        local loader=$!
        for _ in $(seq 200); do grep -q '^attached' "$TMP/load.out" && break; sleep 0.05; done
        grep -q '^attached' "$TMP/load.out" || { echo "bench-kernel-cost.sh: $1 did not attach:" >&2; cat "$TMP/load.out" >&2; exit 1; }
        pipe
        kill -INT "$loader"; wait "$loader" || true ;;
    perfswitch)
        perf record -q -a --switch-events -e dummy -o "$TMP/perf.data" -- \
            taskset -c 0 perf bench sched pipe -l "$LOOPS" 2>&1 | awk '/usecs\/op/{print $1}' ;;
    sonda|sonda-b)
        local bin=$SONDA_BIN
        [ "$1" = sonda-b ] && bin=${SONDA_B_BIN:?sonda-b needs SONDA_B_BIN}
        taskset -c 1 "$bin" record -o "$TMP/t.trace" -- \
            taskset -c 0 perf bench sched pipe -l "$LOOPS" 2>"$TMP/sonda.err" | awk '/usecs\/op/{print $1}'
        grep -o 'collector CPU [0-9.]* s' "$TMP/sonda.err" >&2 || cat "$TMP/sonda.err" >&2
        rm -f "$TMP/t.trace" ;;
    *) echo "bench-kernel-cost.sh: unknown configuration $1" >&2; exit 2 ;;
    esac
}

# The BPF objects are built before the first round (run is called in a subshell).
for c in $CONFIGS; do
    case $c in bpf:*) m=${c#bpf:}; bpf_build "${m%%:*}" ;; esac
done

declare -A all
for round in $(seq "$ROUNDS"); do
    for c in $CONFIGS; do
        v=$(run "$c")
        all[$c]="${all[$c]:-} $v"
        echo "round $round $c $v us/op"
    done
done
echo
echo "config        us/op (median of $ROUNDS; min-max)   added us/op vs none (median)"
base=$(echo ${all[none]:-0} | tr ' ' '\n' | sort -g | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}')
for c in $CONFIGS; do
    echo ${all[$c]} | tr ' ' '\n' | sort -g | awk -v c="$c" -v base="$base" \
        '{a[NR]=$1} END{m=a[int((NR+1)/2)]; printf "%-12s %8.3f (%.3f-%.3f)            %+.3f\n", c, m, a[1], a[NR], m-base}'
done
