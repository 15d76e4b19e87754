#!/usr/bin/env bash
# Benchmarks sonda's collector under a heavy scheduling load: `perf bench sched pipe`
# (two processes passing a token through pipes, hundreds of thousands of context
# switches per second) recorded with `sonda record`. Prints the context-switch rate
# (from /proc/stat, independent of sonda), the events recorded and lost, and the
# collector's CPU time per million events (getrusage of sonda itself, from its summary).
#
# usage: scripts/bench-collector.sh [LOOPS]     (default 3000000: over 10 s here)
# env:   SONDA=path/to/sonda to use a given binary instead of building one;
#        PIN=CPUS to run the benchmark on those CPUs (taskset), default 0. Pinned to one
#        CPU the two processes switch 500k times a second on it; unpinned (PIN=) every
#        switch crosses CPUs, which on a VM may run ten times slower.
# Needs root (kernel tracepoints); installs Debian's linux-perf if perf is missing.
set -euo pipefail
source "$(dirname "$0")/lib/setup.sh"
setup_tracefs
apt_need perf linux-perf

loops="${1:-3000000}"
pin="${PIN-0}"
pin_cmd=()
if [ -n "$pin" ]; then
    pin_cmd=(taskset -c "$pin")
fi
if [ -z "${SONDA:-}" ]; then
    (cd "$SONDA_ROOT" && cargo build --release -p sonda >&2)
    SONDA="$SONDA_ROOT/target/release/sonda"
fi
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

ctxt() { awk '/^ctxt/ { print $2 }' /proc/stat; }
c0=$(ctxt)
t0=$(date +%s.%N)
"$SONDA" record -o "$out/bench.sonda" -- "${pin_cmd[@]}" perf bench sched pipe -l "$loops" \
    >"$out/perf.txt" 2>"$out/sonda.txt"
t1=$(date +%s.%N)
c1=$(ctxt)

summary=$(grep '^sonda: recorded' "$out/sonda.txt") || { cat "$out/sonda.txt" >&2; exit 1; }
events=$(sed -E 's/^sonda: recorded ([0-9]+) kernel events.*/\1/' <<<"$summary")
lost=$(sed -E 's/.*kernel events \(([0-9]+) lost\).*/\1/' <<<"$summary")
cpu=$(sed -E 's/.*collector CPU ([0-9.]+) s.*/\1/' <<<"$summary")
ops=$(awk '/ops\/sec/ { print $1 }' "$out/perf.txt")
size=$(du -h "$out/bench.sonda" | cut -f1)

awk -v loops="$loops" -v pin="${pin:-none}" -v t0="$t0" -v t1="$t1" -v c0="$c0" -v c1="$c1" -v events="$events" \
    -v lost="$lost" -v cpu="$cpu" -v ops="$ops" -v size="$size" 'BEGIN {
    secs = t1 - t0
    printf "bench-collector: perf bench sched pipe -l %d (CPUs %s) under sonda record: %.1f s, %s ops/s\n", loops, pin, secs, ops
    printf "  context switches (whole machine, /proc/stat): %d, %.0f per second\n", c1 - c0, (c1 - c0) / secs
    printf "  events recorded: %d (%.0f per second), events lost: %d\n", events, events / secs, lost
    printf "  collector CPU: %.2f s, %.3f s per million events recorded; trace %s\n", cpu, cpu / (events / 1e6), size
    if (secs < 10 || (c1 - c0) / secs < 100000)
        printf "  note: below the target of 10 s at 100k switches/s: give more loops, or PIN=0\n"
}'
if [ "$lost" != 0 ]; then
    echo "bench-collector: events were lost" >&2
    exit 1
fi
