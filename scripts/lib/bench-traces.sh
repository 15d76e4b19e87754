# shellcheck shell=bash
# What the exporters' benchmarks (bench-export.sh, bench-parquet.sh) share: their
# arguments and the synthetic traces they export.

# bench_setup NAME DEFAULT_DIR [DIR] [RUNS] [SIZES...]: sets root, dir, runs, sizes
# (default 1G 256M) and target; checks for GNU time, builds sonda, and writes the
# traces DIR/busy-SIZE.trace that are missing (scripts/gen-trace; kept between runs).
bench_setup() {
    local name="$1" default_dir="$2"
    shift 2
    root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
    dir="${1:-$default_dir}"
    runs="${2:-3}"
    shift $(( $# > 2 ? 2 : $# ))
    sizes=("$@")
    [ ${#sizes[@]} -gt 0 ] || sizes=(1G 256M)
    command -v /usr/bin/time >/dev/null || { echo "$name: needs GNU time (apt-get install time)" >&2; exit 1; }
    target="${CARGO_TARGET_DIR:-$root/target}"
    (cd "$root" && cargo build --release -q -p sonda)
    mkdir -p "$dir"
    local size
    for size in "${sizes[@]}"; do
        [ -s "$dir/busy-$size.trace" ] || "$root/scripts/gen-trace" "$dir/busy-$size.trace" "$size"
    done
}
