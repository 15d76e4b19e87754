#!/usr/bin/env bash
# Records the bundled demo workload (scripts/demo: a worker pool serving three request
# classes of known CPU and blocking demand), exports it to Paraver, prints the report and
# the per-request service demands, and writes a JMT queueing model of the run.
# Output goes to ./out/ (override with OUT=dir). Run as root for kernel tracepoints.
# The workload's settings are those of tests/tests/e2e/services.rs: three workers per CPU,
# about one CPU of demand.
source "$(dirname "$0")/lib/setup.sh"
setup_base
setup_tracefs
cd "$SONDA_ROOT"
cargo build --release -p sonda -p sonda-agent
OUT="${OUT:-$SONDA_ROOT/out}"
mkdir -p "$OUT/classes"
javac -d "$OUT/classes" scripts/demo/demo/ServiceDemo.java
SONDA="${CARGO_TARGET_DIR:-$SONDA_ROOT/target}/release/sonda"
"$SONDA" record -o "$OUT/demo.trace" \
    --methods 'demo.ServiceDemo::browse' \
    --methods 'demo.ServiceDemo::search' \
    --methods 'demo.ServiceDemo::checkout' \
    -- java -cp "$OUT/classes" demo.ServiceDemo --workers $((3 * $(nproc))) --rate 550 --seconds 6 \
    --dir "$OUT/data"
"$SONDA" paraver "$OUT/demo.trace" -o "$OUT/demo"
"$SONDA" report "$OUT/demo.trace"
"$SONDA" services "$OUT/demo.trace"
"$SONDA" model "$OUT/demo.trace" -o "$OUT/demo.jsimg"
echo "demo: Paraver trace in $OUT/demo.prv (open it with wxparaver), sonda trace in $OUT/demo.trace,"
echo "demo: JMT model in $OUT/demo.jsimg (JMT's JSIMgraph, or: line -f $OUT/demo.jsimg -s mva)"
