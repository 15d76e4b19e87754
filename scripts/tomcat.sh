#!/usr/bin/env bash
# Traces Debian's Tomcat 10 serving real load and checks the trace against Tomcat's own
# account of the requests it served.
#
#   1. installs tomcat10, wrk and python3 with apt-get when missing (no service started);
#   2. builds a private CATALINA_BASE in a temporary directory: Debian's stock conf
#      files, our server.xml (scripts/tomcat/server.xml: no shutdown port, one HTTP
#      connector on 127.0.0.1 and a free port, an unbuffered access log) and a web
#      application with CPU-bound, sleeping and mixed JSPs (scripts/tomcat/webapp/);
#   3. runs `catalina.sh run` under `sonda record` with the request path instrumented
#      (StandardWrapperValve::invoke, HttpServlet::service, every JSP's _jspService),
#      waits for the connector, warms the JSPs up (they compile on first request),
#      drives Tomcat with wrk for $DURATION seconds and stops it with SIGTERM;
#   4. exports the trace with `sonda paraver`, checks it with prvcheck, and compares the
#      number of recorded StandardWrapperValve::invoke calls with the number of lines
#      in Tomcat's access log (one per request), and the _jspService calls with the JSP
#      requests in that log; `sonda report`'s count must agree with the export's.
# Exit 0 when the counts match, 1 when they do not (or when anything fails).
#
# Environment:
#   OUT          output directory (default <repo>/out/tomcat): tomcat.trace, tomcat.prv/
#                .pcf/.row, report.txt, access.log, catalina.log (Tomcat's and sonda
#                record's output), wrk.log
#   DURATION     seconds of wrk load (default 10); THREADS, CONNECTIONS (2, 8)
#   SONDA_BIN    the sonda binary (default <repo>/target/release/sonda; built if missing)
#   SONDA_AGENT  the agent library (default libsonda.so next to the sonda binary)
#   PRVCHECK     the Paraver checker (default <repo>/../shared/tools/prvcheck, else
#                <repo>/tests/tools/prvcheck)
#   EXTRA_METHODS  more --methods patterns, whitespace-separated (e.g. 'org.apache.**
#                jakarta.**': every Tomcat method), traced beside the request path
#   BUDGET       sonda record --budget PERCENT (the overhead budget; the report's
#                removals are printed)
#   NO_SONDA=1   run the same Tomcat and load without sonda (a baseline: no trace, no
#                check, just the request count and rate)
#   KEEP_BASE=1  keep the temporary CATALINA_BASE (its path is printed)
# Run as root (sonda records kernel tracepoints; apt-get installs packages).

set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FILES="$REPO/scripts/tomcat"
OUT="${OUT:-$REPO/out/tomcat}"
DURATION="${DURATION:-10}"
THREADS="${THREADS:-2}"
CONNECTIONS="${CONNECTIONS:-8}"
NO_SONDA="${NO_SONDA:-0}"
EXTRA_METHODS="${EXTRA_METHODS:-}"
BUDGET="${BUDGET:-}"
CATALINA_HOME=/usr/share/tomcat10
# The methods on every request's path; one StandardWrapperValve::invoke per request.
WRAPPER_METHOD='org.apache.catalina.core.StandardWrapperValve::invoke'
SERVLET_METHOD='jakarta.servlet.http.HttpServlet::service'
JSP_METHOD='::_jspService'
# Paraver's "user function" event type, which sonda uses for Java methods.
METHOD_EVENT=60000019

ME=tomcat.sh
# shellcheck source=scripts/lib/tomcat.sh
source "$REPO/scripts/lib/tomcat.sh"

# --- 3. run it -----------------------------------------------------------------------

JVM_PID=
RECORD_PID=
WRK_PID=
# What the clean-up stops, in this order.
STOP_ORDER=("wrk=WRK_PID" "Tomcat's JVM=JVM_PID" "sonda record=RECORD_PID")

start_tomcat() {
    tomcat_env
    if [ "$NO_SONDA" = 1 ]; then
        say "starting Tomcat on 127.0.0.1:$PORT (without sonda)"
        "$CATALINA_HOME/bin/catalina.sh" run >"$OUT/catalina.log" 2>&1 &
        JVM_PID=$!
    else
        local extra=() pattern
        for pattern in $EXTRA_METHODS; do
            extra+=(--methods "$pattern")
        done
        [ -z "$BUDGET" ] || extra+=(--budget "$BUDGET")
        say "starting Tomcat on 127.0.0.1:$PORT under sonda record ${extra[*]}"
        "$SONDA" record -o "$OUT/tomcat.trace" \
            --methods "$WRAPPER_METHOD" \
            --methods "$SERVLET_METHOD" \
            --methods "$JSP_METHOD" \
            "${extra[@]}" \
            -- "$CATALINA_HOME/bin/catalina.sh" run >"$OUT/catalina.log" 2>&1 &
        RECORD_PID=$!
        # catalina.sh ends in `exec java`: sonda's child is the JVM itself.
        for _ in $(seq 100); do
            JVM_PID="$(pgrep -P "$RECORD_PID" | head -n1 || true)"
            [ -n "$JVM_PID" ] && break
            kill -0 "$RECORD_PID" 2>/dev/null || break
            sleep 0.1
        done
        [ -n "$JVM_PID" ] || die "sonda record started no command: $(tail -n3 "$OUT/catalina.log")"
    fi
}

drive_load() {
    say "wrk: $THREADS threads, $CONNECTIONS connections, $DURATION s over cpu.jsp, sleep.jsp, mixed.jsp, index.html"
    # In the background, so that a signal to this script runs the clean-up at once.
    wrk -t "$THREADS" -c "$CONNECTIONS" -d "${DURATION}s" -s "$FILES/load.lua" \
        "http://127.0.0.1:$PORT/" >"$OUT/wrk.log" 2>&1 &
    WRK_PID=$!
    local rc=0
    wait "$WRK_PID" || rc=$?
    WRK_PID=
    [ "$rc" = 0 ] || die "wrk failed (exit $rc): $(cat "$OUT/wrk.log")"
    sed 's/^/    /' "$OUT/wrk.log" >&2
    WRK_RATE="$(awk '/^Requests\/sec:/ { print $2 }' "$OUT/wrk.log")"
    WRK_REQUESTS="$(awk '/ requests in / { print $1 }' "$OUT/wrk.log")"
}

stop_tomcat() {
    say "stopping Tomcat (SIGTERM to JVM pid $JVM_PID)"
    kill -TERM "$JVM_PID"
    local waited=0 rc=0
    if [ "$NO_SONDA" = 1 ]; then
        wait "$JVM_PID" || rc=$?
    else
        # sonda record ends when the JVM does, after draining the JVM's last events.
        while kill -0 "$RECORD_PID" 2>/dev/null; do
            sleep 0.2
            waited=$((waited + 1))
            [ "$waited" -lt 300 ] || die "sonda record still running 60 s after Tomcat was stopped"
        done
        wait "$RECORD_PID" || rc=$?
        RECORD_PID=
    fi
    JVM_PID=
    # A JVM stopped by SIGTERM exits with 143 (128 + 15), which is a clean stop here.
    case "$rc" in
        0 | 143) ;;
        *) die "Tomcat or sonda record ended with exit status $rc; see $OUT/catalina.log" ;;
    esac
    [ "$NO_SONDA" = 1 ] || grep '^sonda:' "$OUT/catalina.log" | sed 's/^/    /' >&2 || true
}

# --- 4. check the trace --------------------------------------------------------------

# method_ids REGEX: the ids of the methods whose .pcf label matches REGEX (ERE), one
# per line, from the VALUES of the method event type.
method_ids() {
    awk -v type="$METHOD_EVENT" -v want="$1" '
        /^EVENT_TYPE/ { in_type = 1; ours = 0; in_values = 0; next }
        in_type && $2 == type { ours = 1 }
        /^VALUES/ { in_type = 0; in_values = ours; next }
        /^[[:space:]]*$/ { in_type = 0; in_values = 0; next }
        in_values && $1 != 0 {
            label = $0
            sub(/^[[:space:]]*[0-9]+[[:space:]]+/, "", label)
            if (label ~ want) print $1
        }' "$OUT/tomcat.pcf"
}

# method_enters IDS: how many method-entry events (type 60000019, value = one of the
# whitespace-separated IDS) the .prv holds. Event records are 2:cpu:appl:task:thread:time:type:value[:...].
method_enters() {
    awk -F: -v type="$METHOD_EVENT" -v ids="$1" '
        BEGIN { n = split(ids, list, " "); for (i = 1; i <= n; i++) want[list[i]] = 1 }
        $1 == "2" { for (i = 7; i < NF; i += 2) if ($i == type && ($(i + 1) in want)) count++ }
        END { print count + 0 }' "$OUT/tomcat.prv"
}

# report_calls REGEX: the calls `sonda report` counts for the methods matching REGEX
# (summed), from its "Instrumented methods" table; nothing when it lists none.
report_calls() {
    awk -v want="$1" '
        /^Instrumented methods/ { table = 1; next }
        table && /^[^[:space:]]/ { table = 0 }
        table && !col { for (i = 1; i <= NF; i++) if ($i == "calls") col = i; next }
        table && $1 ~ want { sum += $col; found = 1 }
        END { if (found) print sum }' "$OUT/report.txt"
}

check_trace() {
    say "exporting to Paraver"
    "$SONDA" paraver "$OUT/tomcat.trace" -o "$OUT/tomcat" >"$OUT/paraver.log" 2>&1 ||
        die "sonda paraver failed: $(cat "$OUT/paraver.log")"
    say "checking $OUT/tomcat.prv with prvcheck"
    python3 "$PRVCHECK" "$OUT/tomcat.prv" >"$OUT/prvcheck.log" 2>&1 ||
        die "prvcheck rejects $OUT/tomcat.prv: $(head -n 20 "$OUT/prvcheck.log")"
    "$SONDA" report "$OUT/tomcat.trace" >"$OUT/report.txt" 2>&1 || say "warning: sonda report failed: $(cat "$OUT/report.txt")"

    local wrapper_ids servlet_ids jsp_ids
    wrapper_ids="$(method_ids 'StandardWrapperValve(::|\.)invoke')"
    servlet_ids="$(method_ids 'jakarta\.servlet\.http\.HttpServlet(::|\.)service')"
    jsp_ids="$(method_ids '(::|\.)_jspService')"
    [ -n "$wrapper_ids" ] || die "no StandardWrapperValve::invoke among the methods in $OUT/tomcat.pcf"
    [ -n "$jsp_ids" ] || die "no _jspService among the methods in $OUT/tomcat.pcf"
    WRAPPER_CALLS="$(method_enters "$wrapper_ids")"
    SERVLET_CALLS=0
    [ -z "$servlet_ids" ] || SERVLET_CALLS="$(method_enters "$servlet_ids")"
    JSP_CALLS="$(method_enters "$jsp_ids")"
    REPORT_CALLS="$(report_calls 'StandardWrapperValve::invoke')"
}

# --- main ----------------------------------------------------------------------------

START=$SECONDS
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
rm -f "$OUT"/tomcat.{trace,prv,pcf,row} "$OUT"/{access,catalina,wrk,paraver,prvcheck}.log "$OUT/report.txt"
setup_packages
command -v wrk >/dev/null 2>&1 || die "wrk is not installed"
[ "$NO_SONDA" = 1 ] || setup_sonda
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
make_base
start_tomcat
wait_ready
drive_load
stop_tomcat
cp "$ACCESS_LOG" "$OUT/access.log"

REQUESTS="$(wc -l <"$OUT/access.log")"
JSP_REQUESTS="$(grep -c '"GET /[a-z]*\.jsp ' "$OUT/access.log" || true)"
NON_200="$(awk '$(NF - 2) != 200' "$OUT/access.log" | wc -l)"
say "Tomcat logged $REQUESTS requests ($JSP_REQUESTS to JSPs, $NON_200 not 200 OK); wrk measured ${WRK_RATE:-?} requests/s"
[ "$NON_200" = 0 ] || say "warning: $NON_200 requests did not end in 200 OK (see $OUT/access.log)"
# The access log is the truth the trace is checked against: it must hold at least every
# request wrk saw answered (plus our 4 warm-up requests; requests wrk abandoned at the
# end of its run are served and logged too).
if [ -z "$WRK_REQUESTS" ] || [ "$WRK_REQUESTS" -lt 100 ]; then
    die "wrk completed only ${WRK_REQUESTS:-no} requests; see $OUT/wrk.log"
fi
[ "$REQUESTS" -ge $((WRK_REQUESTS + 4)) ] ||
    die "the access log has $REQUESTS lines, fewer than the $((WRK_REQUESTS + 4)) requests answered: is it flushed?"

if [ "$NO_SONDA" = 1 ]; then
    say "done without sonda in $((SECONDS - START)) s"
    exit 0
fi

check_trace
if [ -n "$BUDGET" ]; then
    # The first 40 lines (awk stops itself: `| head` would end it with SIGPIPE, which
    # pipefail turns into the script's failure).
    awk '/^Methods removed by the overhead budget/ { on = 1 } on && /^$/ { exit } on { print; if (++n == 40) exit }' "$OUT/report.txt" >&2
    say "the budget removed $(awk '/^Methods removed/ { on = 1; getline; next } on && /^  \(/ { exit } on && NF { n++ } END { print n + 0 }' "$OUT/report.txt") methods"
fi
say "trace: $WRAPPER_CALLS StandardWrapperValve::invoke (sonda report: ${REPORT_CALLS:-none}), $SERVLET_CALLS HttpServlet::service, $JSP_CALLS _jspService calls"
status=0
if [ "$WRAPPER_CALLS" = "$REQUESTS" ]; then
    say "OK: StandardWrapperValve::invoke calls ($WRAPPER_CALLS) = requests in the access log ($REQUESTS)"
else
    say "MISMATCH: StandardWrapperValve::invoke calls recorded: $WRAPPER_CALLS, requests in the access log: $REQUESTS"
    status=1
fi
# sonda report reads the trace through another path than the Paraver export.
if [ -z "$REPORT_CALLS" ]; then
    say "warning: sonda report lists no StandardWrapperValve::invoke calls (see $OUT/report.txt)"
elif [ "$REPORT_CALLS" != "$WRAPPER_CALLS" ]; then
    say "MISMATCH: sonda report counts $REPORT_CALLS StandardWrapperValve::invoke calls, the Paraver export $WRAPPER_CALLS"
    status=1
fi
if [ "$JSP_CALLS" = "$JSP_REQUESTS" ]; then
    say "OK: _jspService calls ($JSP_CALLS) = JSP requests in the access log ($JSP_REQUESTS)"
else
    say "MISMATCH: _jspService calls recorded: $JSP_CALLS, JSP requests in the access log: $JSP_REQUESTS"
    status=1
fi
say "outputs in $OUT (tomcat.trace, tomcat.prv/.pcf/.row, access.log, catalina.log, report.txt); $((SECONDS - START)) s in all"
exit "$status"
