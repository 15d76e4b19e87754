# Shared set-up for sonda's scripts: install what is missing, mount tracefs, build.
# Sourced, not run. Everything here is idempotent and safe to repeat.

set -euo pipefail
SONDA_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export SONDA_ROOT

# apt_install WHY PACKAGE...: installs PACKAGE(s) with apt-get (the index updated once
# per run), saying what they are for.
apt_install() {
    local why="$1"
    shift
    echo "setup: installing $* (for $why)" >&2
    if [ -z "${SONDA_APT_UPDATED:-}" ]; then
        DEBIAN_FRONTEND=noninteractive apt-get update -qq
        export SONDA_APT_UPDATED=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# apt_need CMD PACKAGE...: installs PACKAGE(s) when CMD is missing.
apt_need() {
    local cmd="$1"
    shift
    command -v "$cmd" >/dev/null 2>&1 || apt_install "$cmd" "$@"
}

# apt_need_file FILE PACKAGE...: installs PACKAGE(s) unless FILE exists (headers have
# no command to look for).
apt_need_file() {
    local file="$1"
    shift
    [ -e "$file" ] || apt_install "$file" "$@"
}

# The tools every sonda script needs.
setup_base() {
    apt_need javac openjdk-17-jdk-headless
    apt_need gcc gcc libc6-dev
    apt_need g++ g++
    apt_need python3 python3
    apt_need mount mount
    # The live-metrics test scrapes `sonda record --metrics` with Debian's Prometheus.
    apt_need prometheus prometheus
    # The recorder's BPF kernel source: clang compiles its programs, and libbpf-sys
    # builds the libbpf it links (make, pkg-config, libelf and zlib headers).
    apt_need clang clang
    apt_need make make
    apt_need pkg-config pkg-config
    apt_need_file /usr/include/libelf.h libelf-dev
    apt_need_file /usr/include/zlib.h zlib1g-dev
    if ! command -v cargo >/dev/null 2>&1; then
        echo "setup: cargo is missing; install Rust (https://rustup.rs) first" >&2
        exit 1
    fi
}

# Kernel tracepoints: tracefs must be mounted (a fresh machine has it empty).
setup_tracefs() {
    if [ "$(id -u)" = 0 ] && [ -d /sys/kernel/tracing ] && [ ! -e /sys/kernel/tracing/events ]; then
        mount -t tracefs nodev /sys/kernel/tracing || echo "setup: could not mount tracefs" >&2
    fi
}

# Release build of the whole workspace (sonda, libsonda.so, test binaries).
build_release() {
    (cd "$SONDA_ROOT" && cargo build --release --workspace --all-targets)
}
