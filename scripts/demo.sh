#!/usr/bin/env bash
# Records the bundled demo workload (scripts/demo: a worker pool serving three request
# classes of known CPU and blocking demand), exports it to Paraver and prints the report.
# Output goes to ./out/ (override with OUT=dir). Run as root for kernel tracepoints.
source "$(dirname "$0")/lib/setup.sh"
setup_base
setup_tracefs
cd "$SONDA_ROOT"
(cd "$SONDA_ROOT" && cargo build --release -p sonda -p sonda-agent)
OUT="${OUT:-$SONDA_ROOT/out}"
mkdir -p "$OUT/classes"
javac -d "$OUT/classes" scripts/demo/demo/ServiceDemo.java
SONDA="$SONDA_ROOT/target/release/sonda"
"$SONDA" record -o "$OUT/demo.trace" \
    --methods 'demo.ServiceDemo::browse' \
    --methods 'demo.ServiceDemo::search' \
    --methods 'demo.ServiceDemo::checkout' \
    -- java -cp "$OUT/classes" demo.ServiceDemo --workers 4 --rate 400 --seconds 5 --dir "$OUT/data"
"$SONDA" paraver "$OUT/demo.trace" -o "$OUT/demo"
"$SONDA" report "$OUT/demo.trace"
echo "demo: Paraver trace in $OUT/demo.prv (open it with wxparaver), sonda trace in $OUT/demo.trace"
