#!/usr/bin/env bash
# Measures where the JVM's thread CPU clock and sonda's switch records part (see
# docs/services-schema.md, "Measurement notes"): records the demo workload under sonda
# with the kernel's CPU-time charges (sched:sched_stat_runtime) of its worker threads in
# a private ftrace instance beside it, then compares them call by call
# (scripts/demo/cpu_clock.py). Run as root. Output in ./out/cpu-clock (OUT=dir);
# arguments go to ServiceDemo (default: the test's --workers 6 --rate 550 --seconds 6).
source "$(dirname "$0")/../lib/setup.sh"
setup_base
setup_tracefs
cd "$SONDA_ROOT"
cargo build --release -p sonda -p sonda-agent
SONDA="${CARGO_TARGET_DIR:-$SONDA_ROOT/target}/release/sonda"
OUT="${OUT:-$SONDA_ROOT/out/cpu-clock}"
ARGS=("$@")
[ ${#ARGS[@]} -eq 0 ] && ARGS=(--workers 6 --rate 550 --seconds 6)
rm -rf "$OUT"
mkdir -p "$OUT/classes"
javac -d "$OUT/classes" scripts/demo/demo/ServiceDemo.java

I=/sys/kernel/tracing/instances/sonda-cpu-clock-$$
mkdir "$I"
trap 'echo 0 > "$I/tracing_on"; for e in "$I"/events/sched/*/enable; do echo 0 > "$e"; done; rmdir "$I"' EXIT
echo mono > "$I/trace_clock"
# The burn loop reads its CPU clock every few microseconds, and every read is a charge.
echo 131072 > "$I/buffer_size_kb"
echo 'comm ~ "worker-*"' > "$I/events/sched/sched_stat_runtime/filter"
echo 'prev_comm ~ "worker-*" || next_comm ~ "worker-*"' > "$I/events/sched/sched_switch/filter"
for e in sched_stat_runtime sched_switch; do echo 1 > "$I/events/sched/$e/enable"; done
echo 1 > "$I/tracing_on"
"$SONDA" record -o "$OUT/demo.trace" \
    --methods 'demo.ServiceDemo::browse' \
    --methods 'demo.ServiceDemo::search' \
    --methods 'demo.ServiceDemo::checkout' \
    -- java -cp "$OUT/classes" demo.ServiceDemo "${ARGS[@]}" --out "$OUT/calls.csv" --dir "$OUT/data"
echo 0 > "$I/tracing_on"
if grep -q '^overrun: [1-9]' "$I"/per_cpu/cpu*/stats; then
    echo "cpu-clock: the ftrace buffer overflowed; run shorter (--seconds)" >&2
    exit 1
fi
cat "$I/trace" > "$OUT/ftrace.txt"
"$SONDA" services "$OUT/demo.trace" --calls > "$OUT/trace-calls.csv"
python3 scripts/demo/cpu_clock.py "$OUT"
