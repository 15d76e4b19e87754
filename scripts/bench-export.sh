#!/usr/bin/env bash
# The exporter's speed and memory at scale: exports synthetic traces of two sizes
# (scripts/gen-trace; default 1G and 256M, kept in DIR between runs) with `sonda
# paraver`, RUNS times each, and prints per run the Paraver records written, the CPU
# time (user+sys of the exporter), the wall time, records per CPU-second and per
# wall-second, and the peak resident memory (GNU time's maximum RSS).
#
#   scripts/bench-export.sh [DIR] [RUNS] [SIZES...]      e.g. /tmp/bench 3 1G 256M
set -euo pipefail
source "$(dirname "$0")/lib/bench-traces.sh"
bench_setup bench-export /tmp/sonda-bench-export "$@"
printf '%-6s %8s %12s %8s %8s %10s %10s %8s\n' size "trace" records cpu_s wall_s "M rec/cpu" "M rec/wall" "RSS MiB"
for _ in $(seq "$runs"); do
    for size in "${sizes[@]}"; do
        trace="$dir/busy-$size.trace"
        stats=$(/usr/bin/time -f '%U %S %e %M' "$target/release/sonda" paraver "$trace" -o "$dir/out-$size" 2>&1 >/dev/null | tail -1)
        read -r user sys wall rss <<<"$stats"
        records=$(( $(wc -l < "$dir/out-$size.prv") - 1 ))
        awk -v s="$size" -v t="$(stat -c %s "$trace")" -v n="$records" -v u="$user" -v y="$sys" -v w="$wall" -v r="$rss" \
            'BEGIN { c = u + y; printf "%-6s %6.0fMiB %12d %8.2f %8.2f %10.2f %10.2f %8.1f\n", s, t / 1048576, n, c, w, n / c / 1e6, n / w / 1e6, r / 1024 }'
        rm -f "$dir/out-$size".*
    done
done
