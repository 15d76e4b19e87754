#!/usr/bin/env bash
# The Parquet export's speed and memory at scale: exports synthetic traces of two sizes
# (scripts/gen-trace; default 1G and 256M, kept in DIR between runs) with `sonda export
# --parquet`, RUNS times each, and prints per run the trace records read, the rows
# written, the CPU time (user+sys), the wall time, trace records per CPU-second and per
# wall-second, the peak resident memory (GNU time's maximum RSS) and the dataset's size.
# The acceptance is at most 64 MiB of memory for the 1 GiB trace.
#
#   scripts/bench-parquet.sh [DIR] [RUNS] [SIZES...]      e.g. /tmp/bench 3 1G 256M
set -euo pipefail
source "$(dirname "$0")/lib/bench-traces.sh"
bench_setup bench-parquet /tmp/sonda-bench-parquet "$@"
printf '%-6s %8s %11s %11s %8s %8s %10s %10s %8s %9s\n' size trace records rows cpu_s wall_s "M rec/cpu" "M rec/wall" "RSS MiB" "data MiB"
for _ in $(seq "$runs"); do
    for size in "${sizes[@]}"; do
        trace="$dir/busy-$size.trace"
        out="$dir/ds-$size"
        rm -rf "$out"
        log="$dir/export-$size.log"
        /usr/bin/time -o "$dir/time-$size" -f '%U %S %e %M' "$target/release/sonda" export "$trace" --parquet "$out" 2>"$log"
        read -r user sys wall rss <"$dir/time-$size"
        # sonda: wrote 9 tables to DIR (...): N calls, N states, N wakeups, N GCs, N monitor waits; N trace records in ...
        summary=$(grep '^sonda: wrote' "$log")
        records=$(sed -E 's/.*; ([0-9]+) trace records.*/\1/' <<<"$summary")
        rows=$(sed -E 's/.*\): (.*);.*/\1/' <<<"$summary" | grep -oE '[0-9]+' | awk '{ s += $1 } END { print s }')
        data=$(du -sm "$out" | cut -f1)
        awk -v s="$size" -v t="$(stat -c %s "$trace")" -v n="$records" -v m="$rows" -v u="$user" -v y="$sys" -v w="$wall" -v r="$rss" -v d="$data" \
            'BEGIN { c = u + y; printf "%-6s %6.0fMiB %11d %11d %8.2f %8.2f %10.2f %10.2f %8.1f %9d\n", s, t / 1048576, n, m, c, w, n / c / 1e6, n / w / 1e6, r / 1024, d }'
        rm -rf "$out"
    done
done
