#!/usr/bin/env bash
# What sonda costs a program when its filter selects nothing: the same loop of calls to
# a small non-inlined method (scripts/bench-probe/Bench.java, "plain" column), run
# alternately in a JVM without sonda and under `sonda record --methods` with a filter
# that matches no method, several times. Prints the median ns/call of each and their
# ratio. Goal: unchanged within noise (under 1%).
# Usage: bench-idle-agent.sh [runs] [calls per round] [rounds]
source "$(dirname "$0")/lib/setup.sh"
setup_base
setup_tracefs
cd "$SONDA_ROOT"
cargo build --release -q -p sonda -p sonda-agent
SONDA="${SONDA_BIN:-$SONDA_ROOT/target/release/sonda}"
runs="${1:-5}"; calls="${2:-50000000}"; rounds="${3:-7}"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
javac -d "$work" scripts/bench-probe/Bench.java
JAVA=(java -XX:CompileCommand=quiet '-XX:CompileCommand=dontinline,Bench::*' -cp "$work" Bench "$calls" "$rounds")
# The median of a run's rounds after the first (warm-up), plain column.
median_of_run() { awk '$1=="round"{print $2}' | tail -n +2 | sort -g | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
without=(); with=()
for i in $(seq "$runs"); do
    without+=("$("${JAVA[@]}" | median_of_run)")
    with+=("$("$SONDA" record -o "$work/t.trace" --methods 'NoSuchClass::noSuchMethod' -- "${JAVA[@]}" 2>/dev/null | median_of_run)")
done
med() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
a=$(med "${without[@]}"); b=$(med "${with[@]}")
echo "runs without sonda (ns/call): ${without[*]}"
echo "runs under sonda, filter matching nothing (ns/call): ${with[*]}"
awk -v a="$a" -v b="$b" 'BEGIN{printf "median without %.3f ns/call, with %.3f ns/call: ratio %.4f (%+.2f%%)\n", a, b, b/a, (b/a-1)*100}'
