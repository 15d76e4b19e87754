#!/usr/bin/env bash
# Runs every test of sonda on a fresh machine: installs what the tests need, builds the
# workspace, runs the unit and end-to-end tests, and checks formatting and lints.
# Run as root for the kernel-tracepoint tests; with CI=true a missing capability fails.
source "$(dirname "$0")/lib/setup.sh"
setup_base
setup_tracefs
cd "$SONDA_ROOT"

# The tests' Python environment (LINE, jsonschema and pertalde, pinned in
# tests/python-requirements.txt), made once under the target directory and reused by
# every later run; made afresh when the requirements change. The tests make it too
# when run alone (sonda_tests::python_env); here the minute pip takes is spent once,
# before the tests.
python_venv() {
    local venv="${CARGO_TARGET_DIR:-$SONDA_ROOT/target}/release/python-venv"
    local req="$SONDA_ROOT/tests/python-requirements.txt"
    if cmp -s "$req" "$venv/requirements.installed" && [ -x "$venv/bin/line" ] && [ -x "$venv/bin/ptd" ]; then
        return
    fi
    python3 -c 'import ensurepip' >/dev/null 2>&1 || apt_install "the tests' Python tools" python3-venv
    echo "setup: making $venv (pip install -r tests/python-requirements.txt)" >&2
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q -r "$req"
    cp "$req" "$venv/requirements.installed"
}

start=$(date +%s)
# The BPF kernel source is tested too: a build without clang fails instead of leaving
# it out (recorder/build.rs).
export SONDA_REQUIRE_BPF=1
build_release
python_venv
cargo test --release --workspace --no-fail-fast
cargo fmt --all --check
cargo clippy --release --workspace --all-targets -- -D warnings
echo "test.sh: all tests passed in $(( $(date +%s) - start )) s"
