#!/usr/bin/env bash
# What sonda's BPF programs cost the machine on a live Tomcat, by the kernel's own
# count: Debian's Tomcat 10 serving the examples' HelloWorldExample under `wrk -t2 -c8`,
# `sonda attach` (kernel only, or with the attach arguments given), and for WINDOW
# seconds the kernel's BPF statistics (`kernel.bpf_stats_enabled`: each program's run
# count and run time, what `bpftool prog show` reports). Prints per program its runs a
# second and ns a run, and in all: the programs' CPU a second, sonda's own (its
# threads' schedstat), the JVM's, and per request (wrk's requests counted by the JVM's
# bytes written, at wrk's own bytes per request).
#
# The programs run in the context of whatever task hits the tracepoint, so this CPU is
# the traced server's (and its neighbours'), not sonda's: the cost `sonda attach`'s own
# summary cannot show. The statistics add two clock reads to every run of every BPF
# program on the machine while on (about 20-40 ns a run here): they are on only during
# the window, and the figures include them.
#
# With PERF=1, `perf record -a -g` samples every CPU during the window into
# OUTDIR/perf.data (where inside the programs the time goes: the helpers, map lookups,
# the ring buffer); its own cost is then in the figures. On a virtual machine without a
# PMU, perf samples on a timer, which cannot fire where interrupts are off: the
# scheduler's tracepoints' programs then show at the next place interrupts come back on
# (`finish_task_switch`, `_raw_spin_unlock_irqrestore`), not as themselves; compare
# variants of the programs with this script's counts instead.
#
# usage: [SONDA_BIN=path/to/sonda] [WINDOW=10] [PERF=1] scripts/bench-bpf-cost.sh OUTDIR [attach args]
#        Needs root (BPF, kernel tracepoints) and bpftool (installed if missing).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd); FILES=$REPO/scripts/tomcat
[ "$#" -ge 1 ] || { echo "usage: $0 OUTDIR [attach args]" >&2; exit 2; }
OUT=$1; shift
WINDOW=${WINDOW:-10}
mkdir -p "$OUT"
CATALINA_HOME=/usr/share/tomcat10; EXAMPLES=1; NO_ACCESS_LOG=1; ME=bench-bpf-cost.sh
JVM_PID=; WRK_PID=; AP=
STOP_ORDER=("sonda=AP" "wrk=WRK_PID" "jvm=JVM_PID")
# shellcheck source=scripts/lib/tomcat.sh
source "$REPO/scripts/lib/tomcat.sh"
STATS_WERE=$(cat /proc/sys/kernel/bpf_stats_enabled 2>/dev/null || echo 0)
trap 'echo "$STATS_WERE" >/proc/sys/kernel/bpf_stats_enabled 2>/dev/null || true; cleanup' EXIT
[ "$(id -u)" = 0 ] || die "run as root (BPF programs, kernel BPF statistics)"
setup_packages
command -v bpftool >/dev/null 2>&1 || apt_install bpftool
command -v bpftool >/dev/null 2>&1 || die "bpftool is not installed"
setup_sonda
make_base; tomcat_env
"$CATALINA_HOME/bin/catalina.sh" run >"$OUT/catalina.log" 2>&1 & JVM_PID=$!
wait_ready
WARM=20
# wrk runs past the window and ends by itself, so that its report (bytes per request)
# is printed.
wrk -t2 -c8 -d$((WARM + WINDOW + 15))s "http://127.0.0.1:$PORT$HELLO_PATH" >"$OUT/wrk.log" 2>&1 & WRK_PID=$!
sleep "$WARM"
# The programs loaded before sonda's (other tools'), left out of the count.
bpftool -j prog show >"$OUT/progs-before.json"
"$SONDA" attach "$JVM_PID" -o "$OUT/t.trace" "$@" 2>"$OUT/sonda.log" & AP=$!
until grep -qs 'attached to JVM' "$OUT/sonda.log"; do
    kill -0 "$AP" 2>/dev/null || die "sonda did not attach: $(tail -n 1 "$OUT/sonda.log")"
    sleep 0.1
done
sleep 2
wchar() { awk '/^wchar:/{print $2}' "/proc/$JVM_PID/io"; }
echo 1 >/proc/sys/kernel/bpf_stats_enabled
bpftool -j prog show >"$OUT/progs-0.json"
w0=$(wchar); s0=$(run_ns "$AP"); t0=$(date +%s.%N); read -r -a j0 <<<"$(ticks "$JVM_PID")"
if [ "${PERF:-0}" = 1 ]; then
    perf record -a -g -F 2999 -o "$OUT/perf.data" -- sleep "$WINDOW" 2>"$OUT/perf.log"
else
    sleep "$WINDOW"
fi
bpftool -j prog show >"$OUT/progs-1.json"
w1=$(wchar); s1=$(run_ns "$AP"); t1=$(date +%s.%N); read -r -a j1 <<<"$(ticks "$JVM_PID")"
echo "$STATS_WERE" >/proc/sys/kernel/bpf_stats_enabled
kill -INT "$AP"; wait "$AP" || true; AP=
wait "$WRK_PID" || true; WRK_PID=
tail -n 1 "$OUT/sonda.log"
python3 - "$OUT" "$w0" "$w1" "$s0" "$s1" "$t0" "$t1" "${j0[0]}" "${j0[1]}" "${j1[0]}" "${j1[1]}" "$(getconf CLK_TCK)" <<'PY' | tee "$OUT/table.txt"
import json, re, sys
out = sys.argv[1]
w0, w1, s0, s1, t0, t1, ju0, js0, ju1, js1, hz = map(float, sys.argv[2:])
d = t1 - t0
# wrk's whole-run report: bytes per request.
text = open(out + "/wrk.log").read()
def rate(pattern):
    m = re.search(pattern, text)
    if not m:
        sys.exit(f"bench-bpf-cost.sh: no '{pattern}' in {out}/wrk.log")
    v, unit = float(m.group(1)), m.group(2) or ""
    return v * {"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "KB": 1e3, "MB": 1e6, "GB": 1e9, "B": 1}[unit]
per_req = rate(r"Transfer/sec:\s+([\d.]+)(\w*)") / rate(r"Requests/sec:\s+([\d.]+)(\w*)")
reqs = (w1 - w0) / per_req / d
before = {p["id"]: p for p in json.load(open(out + "/progs-0.json"))}
# sonda's programs: those loaded between the attach and the window.
others = {p["id"] for p in json.load(open(out + "/progs-before.json"))}
total_ns = runs = 0
print(f"{'program':22} {'runs/s':>9} {'ns/run':>7} {'ms/s':>7}")
for p in json.load(open(out + "/progs-1.json")):
    a = before.get(p["id"])
    if a is None or p["id"] in others:
        continue
    n = p.get("run_cnt", 0) - a.get("run_cnt", 0)
    ns = p.get("run_time_ns", 0) - a.get("run_time_ns", 0)
    if n == 0:
        continue
    total_ns += ns; runs += n
    print(f"{p['name']:22} {n / d:9.0f} {ns / n:7.0f} {ns / d / 1e6:7.2f}")
sonda = (s1 - s0) / d / 1e6
jvm = ((ju1 - ju0) + (js1 - js0)) * 1000 / hz / d
sysm = (js1 - js0) * 1000 / hz / d
print(f"in all: {runs / d:.0f} runs/s, {total_ns / d / 1e6:.2f} ms/s of CPU in the programs "
      f"({total_ns / max(runs, 1):.0f} ns a run)")
print(f"sonda {sonda:.2f} ms/s; JVM {jvm:.0f} ms/s (system {sysm:.0f}); "
      f"{reqs:.0f} requests/s ({per_req:.0f} bytes each)")
print(f"per request: programs {total_ns / d / reqs / 1e3:.3f} us, sonda {sonda / reqs * 1e3:.3f} us, "
      f"JVM {jvm / reqs * 1e3:.2f} us")
PY
