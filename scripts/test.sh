#!/usr/bin/env bash
# Runs every test of sonda on a fresh machine: installs what the tests need, builds the
# workspace, runs the unit and end-to-end tests, and checks formatting and lints.
# Run as root for the kernel-tracepoint tests; with CI=true a missing capability fails.
source "$(dirname "$0")/lib/setup.sh"
setup_base
setup_tracefs
cd "$SONDA_ROOT"
start=$(date +%s)
build_release
cargo test --release --workspace
cargo fmt --all --check
cargo clippy --release --workspace --all-targets -- -D warnings
echo "test.sh: all tests passed in $(( $(date +%s) - start )) s"
