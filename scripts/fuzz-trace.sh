#!/usr/bin/env bash
# A long mutation campaign over sonda traces: writes real traces with the trace crate's
# writer, applies random damage (flipped bytes and bits, with and without the block
# checksum recomputed, truncations, zeroed, inserted and deleted bytes, huge lengths,
# spliced, duplicated and swapped blocks) and reads each result as the tools do. Prints
# cases per second, panics, hangs and failed expectations; exits non-zero on any.
# The test suite runs a few thousand such cases (trace/tests/mutations.rs); this runs
# as many as asked.
#
#   scripts/fuzz-trace.sh [CASES | SECONDSs] [SEED]     e.g. 1000000, or 600s (default 60s)
#   scripts/fuzz-trace.sh measure [OUT]                one flipped byte in a ~1 MB trace
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
(cd "$root" && cargo build --release -q -p sonda-trace --example fuzz_trace)
exec "$target/release/examples/fuzz_trace" "${1:-60s}" "${@:2}"
