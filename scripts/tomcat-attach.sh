#!/usr/bin/env bash
# Attaches sonda to a Tomcat 10 that is already running under load, records its request
# path for a few seconds, detaches, and does it again: measures how long `sonda attach`
# takes to the first recorded method event, and checks the traces and Tomcat's health.
#
#   1. installs tomcat10, wrk and python3 with apt-get when missing (no service started);
#   2. builds a private CATALINA_BASE as scripts/tomcat.sh does (same server.xml, web
#      application and wrk script, from scripts/tomcat/) and starts Tomcat *without*
#      sonda; warms its JSPs up;
#   3. drives it with wrk for the whole run; after $WARM seconds of load, runs
#      `sonda attach <JVM pid> --methods <request path> --duration $DURATION` $ROUNDS
#      times, $PAUSE seconds apart (the second attach reuses the agent HotSpot already
#      loaded);
#   4. for each round: the time sonda reports from its start to the agent being ready and
#      to the first recorded method event, the StandardWrapperValve::invoke calls in the
#      trace, prvcheck on the Paraver export; at the end, that Tomcat answered every
#      request with 200 and stops cleanly.
# Exit 0 when every round recorded request-path calls, every export passes prvcheck,
# every request succeeded, and every time to the first event is under $GOAL_MS ms.
#
# Environment:
#   OUT          output directory (default <repo>/out/tomcat-attach): attach<N>.trace,
#                attach<N>.prv/.pcf/.row, attach<N>.log (sonda's stderr), report<N>.txt,
#                times.txt (the figures), access.log, catalina.log, wrk.log
#   DURATION     seconds each attach records (default 3); ROUNDS (2); PAUSE (2);
#                WARM seconds of load before the first attach (5); GOAL_MS (1000)
#   THREADS, CONNECTIONS   wrk's (2, 8)
#   SONDA_BIN    the sonda binary (default <repo>/target/release/sonda; built if missing)
#   SONDA_AGENT  the agent library (default libsonda.so next to the sonda binary)
#   PRVCHECK     the Paraver checker (default <repo>/../shared/tools/prvcheck, else
#                <repo>/tests/tools/prvcheck)
#   KEEP_BASE=1  keep the temporary CATALINA_BASE (its path is printed)
# Run as root (sonda records kernel tracepoints; apt-get installs packages).

set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FILES="$REPO/scripts/tomcat"
OUT="${OUT:-$REPO/out/tomcat-attach}"
DURATION="${DURATION:-3}"
ROUNDS="${ROUNDS:-2}"
PAUSE="${PAUSE:-2}"
WARM="${WARM:-5}"
GOAL_MS="${GOAL_MS:-1000}"
THREADS="${THREADS:-2}"
CONNECTIONS="${CONNECTIONS:-8}"
CATALINA_HOME=/usr/share/tomcat10
WRAPPER_METHOD='org.apache.catalina.core.StandardWrapperValve::invoke'
SERVLET_METHOD='jakarta.servlet.http.HttpServlet::service'
JSP_METHOD='::_jspService'
METHOD_EVENT=60000019

ME=tomcat-attach.sh
# shellcheck source=scripts/lib/tomcat.sh
source "$REPO/scripts/lib/tomcat.sh"

# --- 2. a private Tomcat, without sonda ----------------------------------------------

JVM_PID=
WRK_PID=
ATTACH_PID=
# What the clean-up stops, in this order: sonda first, since SIGTERM makes it detach
# (restore the classes) and finish its trace.
STOP_ORDER=("sonda attach=ATTACH_PID" "wrk=WRK_PID" "Tomcat's JVM=JVM_PID")

start_tomcat() {
    tomcat_env
    say "starting Tomcat on 127.0.0.1:$PORT (without sonda)"
    # catalina.sh ends in `exec java`: $! is the JVM itself.
    "$CATALINA_HOME/bin/catalina.sh" run >"$OUT/catalina.log" 2>&1 &
    JVM_PID=$!
}

# --- 3. attach under load ------------------------------------------------------------

# attach_round N: one `sonda attach` of $DURATION s; fills ATTACH_MS and FIRST_MS.
attach_round() {
    local n="$1" log="$OUT/attach$1.log" rc=0
    say "round $n: sonda attach $JVM_PID --duration $DURATION (under load)"
    "$SONDA" attach "$JVM_PID" -o "$OUT/attach$n.trace" \
        --methods "$WRAPPER_METHOD" --methods "$SERVLET_METHOD" --methods "$JSP_METHOD" \
        --duration "$DURATION" 2>"$log" &
    ATTACH_PID=$!
    wait "$ATTACH_PID" || rc=$?
    ATTACH_PID=
    sed 's/^/    /' "$log" >&2
    [ "$rc" = 0 ] || die "sonda attach (round $n) failed with exit status $rc"
    grep -q 'original classes restored' "$log" || die "round $n: sonda did not report the classes restored"
    # "attached to JVM P (java) in 0.31 s; ..." and "first method event 0.352 s after ..."
    ATTACH_MS="$(sed -n 's/.*attached to JVM [0-9]* (.*) in \([0-9.]*\) s;.*/\1/p' "$log" | awk '{ printf "%d", $1 * 1000 }')"
    FIRST_MS="$(sed -n 's/.*first method event \([0-9.]*\) s after.*/\1/p' "$log" | awk '{ printf "%d", $1 * 1000 }')"
    [ -n "$FIRST_MS" ] || die "round $n: no method event recorded (see $log)"
}

# check_round N: Paraver export, prvcheck, request-path calls.
check_round() {
    local n="$1" stem="$OUT/attach$1" ids
    "$SONDA" paraver "$stem.trace" -o "$stem" >"$OUT/paraver$n.log" 2>&1 ||
        die "sonda paraver (round $n) failed: $(cat "$OUT/paraver$n.log")"
    python3 "$PRVCHECK" "$stem.prv" >"$OUT/prvcheck$n.log" 2>&1 ||
        die "prvcheck rejects $stem.prv: $(head -n 20 "$OUT/prvcheck$n.log")"
    ids="$(awk -v type="$METHOD_EVENT" '
        /^EVENT_TYPE/ { in_type = 1; ours = 0; in_values = 0; next }
        in_type && $2 == type { ours = 1 }
        /^VALUES/ { in_type = 0; in_values = ours; next }
        /^[[:space:]]*$/ { in_type = 0; in_values = 0; next }
        in_values && $1 != 0 && /StandardWrapperValve(::|\.)invoke/ { print $1 }' "$stem.pcf")"
    [ -n "$ids" ] || die "round $n: no StandardWrapperValve::invoke among the methods of $stem.pcf"
    CALLS="$(awk -F: -v type="$METHOD_EVENT" -v ids="$ids" '
        BEGIN { n = split(ids, list, "\n"); for (i = 1; i <= n; i++) want[list[i]] = 1 }
        $1 == "2" { for (i = 7; i < NF; i += 2) if ($i == type && ($(i + 1) in want)) count++ }
        END { print count + 0 }' "$stem.prv")"
    [ "$CALLS" -gt 0 ] || die "round $n: no StandardWrapperValve::invoke call recorded"
    # The agent's own account: ms to name the live threads, to find the classes to
    # instrument, and from its start in the JVM to the instrumentation in place.
    "$SONDA" report "$stem.trace" >"$OUT/report$n.txt" 2>&1 || true
    AGENT_MS="$(awk '$1 ~ /^agent\.(naming|scan|ready)_ns$/ { v[$1] = $2 }
        END { printf "%d/%d/%d", v["agent.naming_ns"] / 1e6, v["agent.scan_ns"] / 1e6, v["agent.ready_ns"] / 1e6 }' "$OUT/report$n.txt")"
}

# --- main ----------------------------------------------------------------------------

START=$SECONDS
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
rm -f "$OUT"/attach*.{trace,prv,pcf,row,log} "$OUT"/{access,catalina,wrk}.log "$OUT"/paraver*.log \
    "$OUT"/prvcheck*.log "$OUT"/report*.txt "$OUT/times.txt"
rm -f "$OUT"/attach*.*.cfg
setup_packages
setup_sonda
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
make_base
start_tomcat
wait_ready

# Load for as long as the attaches take (they may be slow on a busy machine): wrk is
# stopped once the last round is done.
say "wrk: $THREADS threads, $CONNECTIONS connections over cpu.jsp, sleep.jsp, mixed.jsp, index.html"
wrk -t "$THREADS" -c "$CONNECTIONS" -d 3600s -s "$FILES/load.lua" \
    "http://127.0.0.1:$PORT/" >"$OUT/wrk.log" 2>&1 &
WRK_PID=$!
sleep "$WARM"

status=0
printf 'round\tready_ms\tfirst_event_ms\tagent_naming/scan/ready_ms\twrapper_calls\n' >"$OUT/times.txt"
for n in $(seq "$ROUNDS"); do
    attach_round "$n"
    check_round "$n"
    printf '%s\t%s\t%s\t%s\t%s\n' "$n" "$ATTACH_MS" "$FIRST_MS" "$AGENT_MS" "$CALLS" >>"$OUT/times.txt"
    say "round $n: agent ready ${ATTACH_MS} ms and first method event ${FIRST_MS} ms after sonda started; $CALLS StandardWrapperValve::invoke calls in ${DURATION} s"
    if [ "$FIRST_MS" -ge "$GOAL_MS" ]; then
        say "round $n: over the goal of $GOAL_MS ms"
        status=1
    fi
    kill -0 "$JVM_PID" 2>/dev/null || die "Tomcat died after round $n"
    [ "$n" = "$ROUNDS" ] || sleep "$PAUSE"
done

say "stopping wrk"
kill -INT "$WRK_PID" 2>/dev/null || true
wait "$WRK_PID" || true
WRK_PID=
sed 's/^/    /' "$OUT/wrk.log" >&2
say "stopping Tomcat (SIGTERM to JVM pid $JVM_PID)"
kill -TERM "$JVM_PID"
rc=0
wait "$JVM_PID" || rc=$?
JVM_PID=
case "$rc" in
    0 | 143) ;;
    *) die "Tomcat ended with exit status $rc after the attaches; see $OUT/catalina.log" ;;
esac
cp "$ACCESS_LOG" "$OUT/access.log"
REQUESTS="$(wc -l <"$OUT/access.log")"
NON_200="$(awk '$(NF - 2) != 200' "$OUT/access.log" | wc -l)"
say "Tomcat served $REQUESTS requests, $NON_200 not 200 OK"
if [ "$NON_200" != 0 ]; then
    say "FAILED: requests failed while sonda attached and detached (see $OUT/access.log)"
    status=1
fi
if grep -q '^sonda:' "$OUT/catalina.log"; then
    say "the agent complained on Tomcat's stderr: $(grep '^sonda:' "$OUT/catalina.log" | head -n 3)"
    status=1
fi
column -t "$OUT/times.txt" >&2 || cat "$OUT/times.txt" >&2
say "outputs in $OUT; $((SECONDS - START)) s in all"
exit "$status"
