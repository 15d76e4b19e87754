#!/usr/bin/env bash
# Issue 13's lossless-rate benchmark: scripts/rate/Rate.java calls a traced static
# method of another class THREADS x RATE times a second for SECONDS, under `sonda record
# --methods Target::work`; prints the calls the program made, what sonda recorded and
# dropped, and the collector's CPU per event. Usage: bench-rate.sh [THREADS] [RATE] [SECONDS] [RING]
# PACE=sleep: threads ahead of their schedule park instead of spinning (see Rate.java).
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${1:-1} RATE=${2:-5000000} SECONDS_=${3:-10} RING=${4:-1M} PACE=${PACE:-spin}
BIN=${CARGO_TARGET_DIR:-target}/release
[ -x "$BIN/sonda" ] && [ -f "$BIN/libsonda.so" ] || cargo build --release -q -p sonda -p sonda-agent
OUT=$(mktemp -d /tmp/bench-rate.XXXXXX)
javac -d "$OUT" scripts/rate/Rate.java
"$BIN/sonda" record -o "$OUT/t.trace" --agent-slots 8 --agent-buffer "$RING" --methods 'Target::work' \
    -- java -cp "$OUT" Rate "$THREADS" "$RATE" "$SECONDS_" "$PACE"
"$BIN/sonda" report "$OUT/t.trace" | grep -E "agent.events|agent.dropped |collector.cpu_ns|bell_cycles"
rm -rf "$OUT"
