#!/usr/bin/env bash
# Cost of one enter+exit probe pair added to a call, with the TSC and the monotonic
# clock, through JNI natives and through JDK 17 critical natives (-XX:+CriticalJNINatives).
# See agent/examples/bench_probe.rs. Usage: bench-probe.sh [calls per round] [rounds]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p sonda-agent --lib --examples
exe="${CARGO_TARGET_DIR:-target}/release/examples/bench_probe"
for natives in jni critical; do
  for clock in tsc monotonic; do
    "$exe" "$clock" "$natives" "${1:-20000000}" "${2:-9}"
    echo
  done
done
