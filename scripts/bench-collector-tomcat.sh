#!/usr/bin/env bash
# Compares the collector CPU of two sonda binaries on one live Tomcat: Debian's Tomcat 10
# serving the examples' HelloWorldExample under `wrk -t2 -c8`, `sonda attach` with
# binaries A and B in turns, A B then B A (a fresh attach per window, 2 s settle, 10 s window), sonda's
# CPU read from its threads' schedstat and the JVM's from /proc. Prints per window
# sonda's ms of CPU a second and its share of the JVM's CPU, and the JVM's bytes written
# a second (its responses: throughput) with its CPU and system time per MB written
# (per request, up to the response size) for what the kernel's side costs the JVM. Throughput is not the
# question here (scripts/bench-tomcat.sh asks it); one JVM keeps the comparison paired.
#
# With IDLE=1 there is no load: what the collector costs a server that does nothing (its
# fixed cost: wakes, polls, scans), the other figures then meaningless. KEEP=1 keeps the
# traces (OUTDIR/t-ROUND-BIN.trace) to look at.
#
# usage: A=path/to/sonda B=path/to/sonda [IDLE=1] scripts/bench-collector-tomcat.sh OUTDIR ROUNDS [attach args]
#        (each binary needs libsonda.so next to it). Needs root (kernel tracepoints).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd); FILES=$REPO/scripts/tomcat; OUT=$1; ROUNDS=$2; shift 2
mkdir -p "$OUT"
CATALINA_HOME=/usr/share/tomcat10; EXAMPLES=1; NO_ACCESS_LOG=1; ME=bench-collector-tomcat.sh
HELLO_PATH=/examples/servlets/servlet/HelloWorldExample
JVM_PID=; WRK_PID=; AP=
STOP_ORDER=("sonda=AP" "wrk=WRK_PID" "jvm=JVM_PID")
source $REPO/scripts/lib/tomcat.sh
trap cleanup EXIT
setup_packages
command -v wrk >/dev/null 2>&1 || die "wrk is not installed"
make_base; tomcat_env
$CATALINA_HOME/bin/catalina.sh run >"$OUT/catalina.log" 2>&1 & JVM_PID=$!
wait_ready
if [ "${IDLE:-0}" = 1 ]; then
  sleep 5
else
  wrk -t2 -c8 -d$((30 + ROUNDS*2*16))s http://127.0.0.1:$PORT$HELLO_PATH >"$OUT/wrk.log" 2>&1 & WRK_PID=$!
  sleep 20
fi
HZ="$(getconf CLK_TCK)"
jvmcpu() { local t; read -r -a t <<<"$(ticks "$JVM_PID")"; echo $((t[0] + t[1])); }
jvmsys() { local t; read -r -a t <<<"$(ticks "$JVM_PID")"; echo "${t[1]}"; }
# The JVM's bytes written (the responses: no access log here), for its throughput.
jvmwrites() { awk '/^wchar:/{print $2}' "/proc/$JVM_PID/io"; }
# A B in odd rounds, B A in even ones: the second attach of a round may cost more
# sonda CPU whichever binary it is (2026-12-07, the same two binaries: 1.052 +- 0.032
# and 1.042 +- 0.043 with each second in turn; 0.977 +- 0.095 in a third run), which a
# fixed order would charge to B; alternating cancels it and a linear drift.
for r in $(seq 1 $ROUNDS); do order="A B"; [ $((r % 2)) = 0 ] && order="B A"; for bin in $order; do
  b=${!bin}
  $b attach $JVM_PID -o $OUT/t-$r-$bin.trace "$@" 2>"$OUT/sonda-$r-$bin.log" & AP=$!
  until grep -qs 'attached to JVM' "$OUT/sonda-$r-$bin.log"; do
    kill -0 "$AP" 2>/dev/null || die "sonda $bin did not attach: $(tail -1 "$OUT/sonda-$r-$bin.log")"
    sleep 0.1
  done
  sleep 2
  s0=$(run_ns $AP); j0=$(jvmcpu); y0=$(jvmsys); w0=$(jvmwrites); t0=$(date +%s.%N)
  sleep 10
  s1=$(run_ns $AP); j1=$(jvmcpu); y1=$(jvmsys); w1=$(jvmwrites); t1=$(date +%s.%N)
  kill -INT $AP; wait $AP || true; AP=
  ev=$(grep -o 'recorded [0-9]* kernel events' $OUT/sonda-$r-$bin.log | awk '{print $2}')
  [ -n "$ev" ] || die "sonda $bin gave no summary: $(tail -1 "$OUT/sonda-$r-$bin.log")"
  if [ "${IDLE:-0}" = 1 ]; then
    python3 -c "s=($s1-$s0)/1e6; d=$t1-$t0; j=($j1-$j0)*1000/$HZ; print(f'round $r $bin: sonda {s/d:.1f} ms/s idle, events {$ev}; JVM CPU {j/d:.0f} ms/s')"
  else
    python3 -c "import sys; s=($s1-$s0)/1e6; d=$t1-$t0; j=($j1-$j0)*1000/$HZ; w=($w1-$w0)/1e6; y=($y1-$y0)*1000/$HZ; print(f'round $r $bin: sonda {s/d:.1f} ms/s, {100*s/j:.2f}% of JVM CPU ({j/d:.0f} ms/s), events {$ev}; JVM wrote {w/d:.2f} MB/s (throughput), JVM CPU {j/w:.1f} ms/MB, system {y/w:.1f} ms/MB')"
  fi
  [ "${KEEP:-0}" = 1 ] || rm -f $OUT/t-$r-$bin.trace
  sleep 3
done; done
