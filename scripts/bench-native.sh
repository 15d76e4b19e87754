#!/bin/sh
# What recording one instrumented C function call (entry + exit) costs.
#
# tests/native/bench.c calls a small non-inlined function in a tight loop, in rounds
# timed with the thread's CPU clock. It is built twice with gcc -O2: plain, and with
# -finstrument-functions linked with libsonda.so; both run under `sonda record` (the
# plain one records kernel states only). The difference of the per-call medians is the
# cost of one recorded call. Repeated RUNS times; prints each run and the median.
#
# Usage: scripts/bench-native.sh [runs] [calls per round] [rounds] [ring] [pause ms] [sleep|spin]
# sleep (default): the collector drains while the loop sleeps between rounds; spin: the
# loop spins through the pause and the collector drains while the next round runs (the
# cost then includes the cache traffic of a ring read while it is written). A run with
# drops measured the drop path, not recording: the script says how many there were.
# Needs: cargo build --release -p sonda -p sonda-agent (CARGO_TARGET_DIR honoured), gcc,
# root for kernel tracepoints (else sonda samples /proc, which is fine here).
set -eu
RUNS=${1:-5}
CALLS=${2:-200000}
ROUNDS=${3:-15}
RING=${4:-16M}
PAUSE=${5:-300}
MODE=${6:-sleep}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release
SONDA=$BIN/sonda
[ -x "$SONDA" ] && [ -f "$BIN/libsonda.so" ] || {
    echo "build first: cargo build --release -p sonda -p sonda-agent" >&2
    exit 1
}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
SRC=$ROOT/tests/native/bench.c
gcc -O2 -g "$SRC" -o "$WORK/plain"
gcc -O2 -g -finstrument-functions "$SRC" -o "$WORK/traced" \
    -L"$BIN" -lsonda -Wl,-rpath,"$BIN"

median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

# One run of a build under sonda: its median ns per call. Ring of 16 MiB: a round of
# CALLS calls writes 64 bytes per call, drained in the pause between rounds (PAUSE ms).
one() {
    "$SONDA" record -o "$WORK/$1.trace" --agent-buffer "$RING" -- "$WORK/$1" "$CALLS" "$ROUNDS" "$PAUSE" "$MODE" \
        >"$WORK/$1.out" 2>"$WORK/$1.err"
    awk '/^ns_per_call/ {print $3}' "$WORK/$1.out"
}

echo "calls per round $CALLS, $ROUNDS rounds (2 warm-up), $RUNS runs, ring $RING, pause $PAUSE ms ($MODE); ns per call (thread CPU time)"
: >"$WORK/diffs"
for i in $(seq "$RUNS"); do
    p=$(one plain)
    t=$(one traced)
    dropped=$("$SONDA" report "$WORK/traced.trace" | awk '$1 == "agent.dropped" {print $2}')
    d=$(echo "$t $p" | awk '{printf "%.2f", $1 - $2}')
    echo "run $i: plain $p  instrumented $t  cost $d  (dropped $dropped)"
    echo "$d" >>"$WORK/diffs"
done
echo "median cost per instrumented call (entry + exit): $(median <"$WORK/diffs") ns"
grep -h "did not load" "$WORK/plain.err" || true
