#!/usr/bin/env bash
# sonda's overhead on a live Tomcat, measured so that it can be trusted on a noisy
# machine: it measures its own noise floor and gives every loss a 95% interval.
#
# Load: Debian's Tomcat 10 (private CATALINA_BASE, scripts/lib/tomcat.sh), the examples
# web application's HelloWorldExample servlet (package tomcat10-examples; ~20 us of JVM
# CPU per request), or the "heavy" page, scripts/tomcat/webapp/heavy.jsp (a chain of
# 16000 SHA-256 digests: 1.2-1.35 ms of JVM CPU per request measured here, 10000 gave
# 0.6 ms; HEAVY_PAGE='/heavy.jsp?n=N' tunes it; cpu.jsp, 2000 digests, ~0.2 ms), driven by
# `wrk -t$THREADS -c$CONNECTIONS` (2, 8) with scripts/tomcat/bench.lua (a done() hook
# only: wrk never calls Lua per request). Tomcat, sonda and wrk share the machine's CPUs
# unless PIN says otherwise; the output says which.
#
# Configurations (sonda attach, in one JVM):
#   none    no sonda
#   kernel  `sonda attach PID` without --methods: kernel scheduling, JVM threads, GC,
#           monitors; nothing retransformed
#   path    `sonda attach PID --methods StandardWrapperValve::invoke --methods
#           HttpServlet::service` (the request path)
#   heavy   the heavy page with the path traced, against the heavy page without sonda
#           (heavy-none)
#   broad   `sonda attach PID --methods 'org.apache.**' --methods 'jakarta.**' --budget
#           $BUDGET` (every Tomcat method, within an overhead budget: issue 13); not in
#           the default CONFIGS (each attach retransforms thousands of classes)
# CONFIGS lists the comparisons, each named by its B side against the same page without
# sonda (its A side): none (A/A, the noise floor), kernel, path, heavy-none (A/A on the
# heavy page), heavy.
#
# Windows mode (the default): windows of $WINDOW s alternate A and B in pairs, in the
# order A B, B A, A B, ... (A B B A blocks: a linear drift cancels). Before every
# window, whatever its configuration, the script switches the configuration if it
# differs (attach or detach) and then runs $SETTLE s of the same load unmeasured, so
# that A and B windows are measured the same way. Per window: requests/s (wrk's count
# over wrk's duration), the JVM's user and system CPU (utime and stime of
# /proc/PID/stat, which sums all its threads, read just before and after the window)
# per request, sonda's CPU per request (its threads' /proc/PID/task/*/schedstat run
# time: 10 ms ticks are too coarse for sonda's tens of ms a window), wrk's CPU (bash's
# `times`) and the machine's other busy CPU (/proc/stat, less JVM, sonda and wrk: the
# other engineers' load) and steal. The kernel's tracepoint cost is in the JVM's system
# time.
# Each pair gives a loss, 100 * (1 - B/A) of requests/s, and relative CPU changes; the
# interval is Student's t over the pairs (95%, scripts/lib/benchstat.py). A comparison
# stops after whole A B B A blocks, at least MIN_PAIRS pairs, when the half-width of the
# loss interval is at most TARGET points, or at MAX_PAIRS pairs; the output says which.
#
# Why one JVM and not a fresh JVM per window: fresh JVMs of the same configuration
# differ by 10-15% in requests/s (their JIT decisions differ, ../shared/notes/tomcat.md),
# so a ±1.5-point interval would need hundreds of JVM starts; within one JVM adjacent
# windows differ by a few percent. `kernel` retransforms nothing: its attaches and
# detaches made 0-3 methods "not entrant" (jit.log; 10 for the very first agent load
# into a JVM), the JIT's own background (it replaces its tier-3 code with tier-4 code
# all the time, about 2 a second in windows without a switch). `path` does: the first
# retransformation after a late attach deoptimises every compiled method (3400-3800
# made not entrant within a second, then ~4000 compilations, more over 20-40 s: the JIT
# recorded no dependencies before the agent's capabilities existed), so before the
# warm-up the script attaches and detaches once with the path (the "priming" switches,
# unmeasured). From then on a retransformation deoptimises only what depends on the
# two retransformed classes: 3-11 methods made not entrant per attach or detach, 4-40
# compilations in the first second after it, 0-3 in the next (measured on this machine,
# 30 switches); an attach takes 0.1-0.5 s and a detach 0.2-0.5 s. SETTLE defaults to 5 s,
# twice what the recompilation took even at a load average of 70; the table printed at
# the end gives, for every switch, the methods made not entrant and the compilations
# in bins of seconds after it, and the compilations per second inside the windows of
# each configuration (a B side with more than its A side would say SETTLE is too short).
# The price of one JVM: the figures hold for that JVM's compiled code; run the script
# again for another.
#
# Attach mode (MODE=attach): one wrk run for the whole time; $ROUNDS rounds of
# $BASELINE s of baseline, `sonda attach` with the request path for $ATTACHED s, then
# $AFTER s after the detach. Requests per second come from the JVM's write count
# (wchar of /proc/PID/io less the growth of its log files, sampled every second by
# scripts/lib/procsample.py) divided by the bytes of one response (wrk's bytes / wrk's
# requests over the run; the script checks that the JVM's writes and wrk's reads agree
# within 1%): nothing is added on the request path, neither in Tomcat nor in wrk (a
# wrk Lua response() hook would cost wrk, on the same CPUs, a call per response). For
# each round: the baseline median, the attached level (median of the attach phase's
# second half) and its loss, the seconds from the agent being ready until throughput
# reaches the attached level (how long the attach depresses it beyond its steady cost)
# and until it reaches the baseline (if ever while attached), and the seconds from the
# detach until it is back within 2% of the baseline ("back": the first second that is,
# and from which the median of the next 5 s is, at least 98% of the reference). Round 1
# is the first attach into this JVM (deoptimises everything); later rounds re-attach.
#
# usage: scripts/bench-tomcat.sh              windows mode
#        MODE=attach scripts/bench-tomcat.sh  attach mode
#        scripts/bench-tomcat.sh --self-test  unit tests of the statistics
#
# Environment:
#   OUT          output directory (default <repo>/out/bench-tomcat); windows mode:
#                windows.csv (raw, one row per window), attaches.csv (each sonda attach:
#                its summary line's figures), switches.csv, stops.csv, results.json,
#                jit.json, table.txt (what stdout shows); attach mode: samples.csv (raw,
#                cumulative), events.csv, seconds.csv (per-second requests and JVM CPU),
#                attach.json, table.txt; both: catalina.log, jit.log (compilations),
#                gc.log (collections; jit.json counts both per switch and window),
#                sonda-*.log
#   MODE         windows (default) or attach
#   CONFIGS      comparisons, in order (default "none kernel path heavy-none heavy")
#   WINDOW       seconds of a measured window (default 5)
#   SETTLE       seconds of unmeasured load before each window (default 5)
#   WARMUP       seconds of load before the first window (default 30), on each page
#   TARGET       half-width of the loss interval to stop at, in points (default 1.5)
#   MIN_PAIRS    pairs before the interval may stop a comparison (default 4)
#   MAX_PAIRS    pairs at most per comparison (default 20)
#   BASELINE, ATTACHED, AFTER, ROUNDS   attach mode: seconds before, during and after
#                each attach (30, 30, 60), rounds (2)
#   ATTACH_CONFIG  attach mode: what is attached, path (default) or broad
#   BUDGET       the broad configuration's --budget PERCENT (default 5)
#   THREADS, CONNECTIONS   wrk's (2, 8)
#   PIN          "SERVER_CPUS/LOAD_CPUS", e.g. 0/1: Tomcat and sonda on the first
#                (taskset -c), wrk on the second; default: not pinned (shared)
#   HEAVY_PAGE   the heavy page (default /heavy.jsp)
#   NICE         a nice value for Tomcat, sonda and wrk alike (default 0); a negative
#                one (e.g. -10) makes other users' batch jobs (builds) yield to the
#                benchmark on a shared machine (measured once, at a load average of 7:
#                the A/A floor was ±16.7 points against ±17.3 at nice 0, no better)
#   JVM_OPTS     extra JVM options (default -Xms256m -Xmx256m)
#   SONDA_BIN    the sonda binary (default <repo>/target/release/sonda; built if missing)
#   SONDA_AGENT  the agent library (default libsonda.so next to the sonda binary)
#   KEEP_TRACES=1  keep each attach's trace in $OUT (default: deleted after its summary)
#   KEEP_BASE=1  keep the temporary CATALINA_BASE (its path is printed)
# Run as root (sonda records kernel tracepoints; apt-get installs packages). Keep one
# benchmark running at a time: two would measure each other.

set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FILES="$REPO/scripts/tomcat"
LIB="$REPO/scripts/lib"

if [ "${1:-}" = --self-test ]; then
    cd "$LIB" && exec python3 -m unittest -v test_benchstat
fi
[ "$#" = 0 ] || {
    echo "usage: $0 [--self-test]   (options are environment variables: see the header)" >&2
    exit 2
}

OUT="${OUT:-$REPO/out/bench-tomcat}"
MODE="${MODE:-windows}"
CONFIGS="${CONFIGS:-none kernel path heavy-none heavy}"
WINDOW="${WINDOW:-5}"
SETTLE="${SETTLE:-5}"
WARMUP="${WARMUP:-30}"
TARGET="${TARGET:-1.5}"
MIN_PAIRS="${MIN_PAIRS:-4}"
MAX_PAIRS="${MAX_PAIRS:-20}"
BASELINE="${BASELINE:-30}"
ATTACHED="${ATTACHED:-30}"
AFTER="${AFTER:-60}"
ROUNDS="${ROUNDS:-2}"
ATTACH_CONFIG="${ATTACH_CONFIG:-path}"
BUDGET="${BUDGET:-5}"
THREADS="${THREADS:-2}"
CONNECTIONS="${CONNECTIONS:-8}"
PIN="${PIN:-}"
NICE="${NICE:-0}"
HEAVY_PAGE="${HEAVY_PAGE:-/heavy.jsp}"
KEEP_TRACES="${KEEP_TRACES:-0}"
CATALINA_HOME=/usr/share/tomcat10
WRAPPER_METHOD='org.apache.catalina.core.StandardWrapperValve::invoke'
SERVLET_METHOD='jakarta.servlet.http.HttpServlet::service'
EXAMPLES=1
NO_ACCESS_LOG=1
NEED_PRVCHECK=0

ME=bench-tomcat.sh
# shellcheck source=scripts/lib/tomcat.sh
source "$REPO/scripts/lib/tomcat.sh"

case "$MODE" in windows | attach) ;; *) die "MODE is $MODE: windows or attach" ;; esac
case "$ATTACH_CONFIG" in path | broad) ;; *) die "ATTACH_CONFIG is $ATTACH_CONFIG: path or broad" ;; esac
[[ "$BUDGET" =~ ^[0-9]+([.][0-9]+)?$ ]] || die "BUDGET is '$BUDGET': a percentage"
for v in WINDOW SETTLE WARMUP MIN_PAIRS MAX_PAIRS BASELINE ATTACHED AFTER ROUNDS THREADS CONNECTIONS; do
    if ! [[ "${!v}" =~ ^[0-9]+$ ]] || [ "${!v}" = 0 ]; then
        die "$v is '${!v}': a positive whole number"
    fi
done
[[ "$TARGET" =~ ^[0-9]+([.][0-9]+)?$ ]] || die "TARGET is '$TARGET': a number of points"
[[ "$NICE" =~ ^-?[0-9]+$ ]] || die "NICE is '$NICE': a nice value, -20 to 19"
# What starts Tomcat and sonda (SERVER_PIN) and wrk (LOAD_PIN): nice, then taskset.
SERVER_PIN=(nice -n "$NICE")
LOAD_PIN=(nice -n "$NICE")
if [ -n "$PIN" ]; then
    [[ "$PIN" =~ ^[0-9,-]+/[0-9,-]+$ ]] || die "PIN is '$PIN': SERVER_CPUS/LOAD_CPUS, e.g. 0/1"
    SERVER_PIN+=(taskset -c "${PIN%/*}")
    LOAD_PIN+=(taskset -c "${PIN#*/}")
fi
for c in $CONFIGS; do
    case "$c" in none | kernel | path | heavy-none | heavy | broad) ;; *) die "unknown configuration '$c' in CONFIGS (none kernel path heavy-none heavy broad)" ;; esac
done

JVM_PID=
WRK_PID=
ATTACH_PID=
SAMPLER_PID=
STOP_ORDER=("sonda attach=ATTACH_PID" "wrk=WRK_PID" "the sampler=SAMPLER_PID" "Tomcat's JVM=JVM_PID")
HZ="$(getconf CLK_TCK)"

# Everything said on stdout also goes to table.txt.
out() { echo "$*" | tee -a "$OUT/table.txt"; }

now() { echo "$EPOCHREALTIME"; }

# machine: "busy steal" in ticks, all CPUs, from /proc/stat.
machine() {
    local user nice system irq softirq steal
    read -r _ user nice system _ _ irq softirq steal _ </proc/stat
    echo "$((user + nice + system + irq + softirq)) $steal"
}

# children_s: user + system seconds of this shell's waited-for children (bash `times`,
# run in this shell: in a command substitution it would count the subshell's). Sets CHILDREN_S.
children_s() {
    times >"$OUT/.times"
    CHILDREN_S="$(tail -n1 "$OUT/.times" | awk '{ n = split($0, f, " "); s = 0
        for (i = 1; i <= n; i++) { split(f[i], p, "m"); sub("s", "", p[2]); s += p[1] * 60 + p[2] }
        printf "%.3f", s }')"
}

page_path() {
    case "$1" in hello) echo "$HELLO_PATH" ;; heavy) echo "$HEAVY_PAGE" ;; esac
}

# load PAGE SECONDS [LOG]: wrk on PAGE for SECONDS; sets WRK_LINE (its BENCH line).
load() {
    local log="${3:-$OUT/wrk.log}" rc=0
    "${LOAD_PIN[@]}" wrk -t "$THREADS" -c "$CONNECTIONS" -d "${2}s" -s "$FILES/bench.lua" \
        "http://127.0.0.1:$PORT$(page_path "$1")" >"$log" 2>&1 &
    WRK_PID=$!
    wait "$WRK_PID" || rc=$?
    WRK_PID=
    [ "$rc" = 0 ] || die "wrk failed (exit $rc): $(tail -n 3 "$log")"
    WRK_LINE="$(grep '^BENCH ' "$log")" || die "wrk printed no totals: $(tail -n 3 "$log")"
}

# field NAME: a key=value of WRK_LINE.
field() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" <<<" $WRK_LINE"; }

start_tomcat() {
    tomcat_env
    export CATALINA_OPTS="${JVM_OPTS:--Xms256m -Xmx256m} -Xlog:jit+compilation=debug:file=$OUT/jit.log:timemillis -Xlog:gc:file=$OUT/gc.log:timemillis"
    local where
    where="sharing the machine's $(nproc) CPUs with wrk"
    [ -z "$PIN" ] || where="on CPU(s) ${PIN%/*} (taskset), wrk on CPU(s) ${PIN#*/}"
    [ "$NICE" = 0 ] || where+=", all at nice $NICE"
    say "starting Tomcat on 127.0.0.1:$PORT, $where"
    # catalina.sh ends in `exec java`: $! is the JVM itself.
    "${SERVER_PIN[@]}" "$CATALINA_HOME/bin/catalina.sh" run >"$OUT/catalina.log" 2>&1 &
    JVM_PID=$!
    PLACEMENT="$where"
}

# --- sonda attach and detach -----------------------------------------------------------

CURRENT=none
ATTACHES=0
SWITCHES=0

methods_of() {
    case "$1" in
        kernel) ;;
        path) printf '%s\n' --methods "$WRAPPER_METHOD" --methods "$SERVLET_METHOD" ;;
        broad) printf '%s\n' --methods 'org.apache.**' --methods 'jakarta.**' --budget "$BUDGET" ;;
    esac
}

attach() {
    local cfg="$1" log t0 args=()
    ATTACHES=$((ATTACHES + 1))
    log="$OUT/sonda-$ATTACHES.log"
    mapfile -t args < <(methods_of "$cfg")
    TRACE="$OUT/attach-$ATTACHES.trace"
    t0=$SECONDS
    "${SERVER_PIN[@]}" "$SONDA" attach "$JVM_PID" -o "$TRACE" "${args[@]}" 2>"$log" &
    ATTACH_PID=$!
    ATTACH_LOG="$log"
    ATTACH_CFG="$cfg"
    until grep -qs 'attached to JVM' "$log"; do
        kill -0 "$ATTACH_PID" 2>/dev/null || die "sonda attach ($cfg) ended: $(tail -n 3 "$log")"
        [ $((SECONDS - t0)) -lt 120 ] || die "sonda attach ($cfg) not ready within 120 s: $(tail -n 3 "$log")"
        sleep 0.05
    done
}

# detach: SIGINT ends the recording; sonda restores the classes and writes its summary,
# whose figures go to attaches.csv.
detach() {
    local rc=0 line
    kill -INT "$ATTACH_PID"
    wait "$ATTACH_PID" || rc=$?
    ATTACH_PID=
    [ "$rc" = 0 ] || die "sonda attach ($ATTACH_CFG) ended with status $rc: $(tail -n 3 "$ATTACH_LOG")"
    grep -q 'original classes restored' "$ATTACH_LOG" || die "sonda did not report the detach: $(tail -n 3 "$ATTACH_LOG")"
    line="$(grep '^sonda: recorded' "$ATTACH_LOG")" || die "no summary from sonda: $(tail -n 3 "$ATTACH_LOG")"
    # sonda: recorded K kernel events (L lost), A agent events (D dropped) in S s, collector CPU C s; PATH (SIZE)
    sed -E -n "s/^sonda: recorded ([0-9]+) kernel events \(([0-9]+) lost\), ([0-9]+) agent events \(([0-9]+) dropped\) in ([0-9.]+) s, collector CPU ([0-9.]+) s.*/$ATTACHES,$ATTACH_CFG,\1,\2,\3,\4,\5,\6,$(stat -c %s "$TRACE")/p" \
        <<<"$line" >>"$OUT/attaches.csv"
    [ "$KEEP_TRACES" = 1 ] || rm -f "$TRACE"
}

# switch_to CONFIG: attach or detach so that CONFIG (none, kernel or path) holds.
switch_to() {
    local want="$1" t_start
    [ "$want" != "$CURRENT" ] || return 0
    t_start="$(now)"
    [ "$CURRENT" = none ] || detach
    [ "$want" = none ] || attach "$want"
    SWITCHES=$((SWITCHES + 1))
    printf '%s,%s,%s,%s,%s\n' "$SWITCHES" "$CURRENT" "$want" "$t_start" "$(now)" >>"$OUT/switches.csv"
    CURRENT="$want"
}

# --- windows mode ------------------------------------------------------------------------

# measure COMPARISON PAIR SLOT A_CONFIG B_CONFIG CONFIG PAGE: one window.
measure() {
    local comp="$1" pair="$2" slot="$3" acfg="$4" bcfg="$5" cfg="$6" page="$7"
    local sonda_cfg=none
    case "$cfg" in kernel) sonda_cfg=kernel ;; path | heavy) sonda_cfg=path ;; broad) sonda_cfg=broad ;; esac
    switch_to "$sonda_cfg"
    load "$page" "$SETTLE"
    local j0 j1 s0=(0 0) s1=(0 0) n0=0 n1=0 m0 m1 c0 c1 t0
    local spid="$ATTACH_PID"
    children_s
    c0="$CHILDREN_S"
    read -r -a m0 <<<"$(machine)"
    read -r -a j0 <<<"$(ticks "$JVM_PID")"
    if [ -n "$spid" ]; then
        read -r -a s0 <<<"$(ticks "$spid")"
        n0="$(run_ns "$spid")"
    fi
    t0="$(now)"
    load "$page" "$WINDOW" "$OUT/wrk-window.log"
    read -r -a j1 <<<"$(ticks "$JVM_PID")"
    if [ -n "$spid" ]; then
        read -r -a s1 <<<"$(ticks "$spid")"
        n1="$(run_ns "$spid")"
    fi
    read -r -a m1 <<<"$(machine)"
    children_s
    c1="$CHILDREN_S"
    local req dur_us
    req="$(field requests)"
    dur_us="$(field duration_us)"
    if [ "$req" = 0 ]; then
        say "FAILED: no request completed in a window of $cfg (see $OUT/wrk-window.log, $OUT/gc.log); the figures so far:"
        summarise
        exit 1
    fi
    awk -v OFS=, -v comp="$comp" -v pair="$pair" -v slot="$slot" -v acfg="$acfg" -v bcfg="$bcfg" \
        -v cfg="$cfg" -v page="$page" -v t0="$t0" -v req="$req" -v dur="$dur_us" \
        -v err="$(field errors)" -v non2xx="$(field non2xx)" -v p50="$(field p50_us)" -v p99="$(field p99_us)" \
        -v ju="$((j1[0] - j0[0]))" -v js="$((j1[1] - j0[1]))" -v su="$((s1[0] - s0[0]))" -v ss="$((s1[1] - s0[1]))" \
        -v sns="$((n1 - n0))" -v wrk="$(awk -v a="$c0" -v b="$c1" 'BEGIN { print b - a }')" \
        -v busy="$((m1[0] - m0[0]))" -v steal="$((m1[1] - m0[1]))" -v hz="$HZ" 'BEGIN {
            other = busy / hz - (ju + js) / hz - sns / 1e9 - wrk
            print comp, pair, slot, acfg, bcfg, page, cfg, t0, req, dur / 1e6, err, non2xx, p50, p99,
                ju / hz, js / hz, su / hz, ss / hz, sns, wrk, busy / hz, steal / hz, other
        }' >>"$OUT/windows.csv"
    if [ "$(field errors)" != 0 ] || [ "$(field non2xx)" != 0 ]; then
        say "warning: wrk saw $(field errors) socket errors and $(field non2xx) non-2xx responses in a window"
    fi
}

# comparison NAME: pairs of windows until the interval or MAX_PAIRS stops it.
comparison() {
    local name="$1" page=hello acfg=none bcfg="$1" pair=0 verdict n mean half slot cfg
    case "$name" in heavy-none) page=heavy acfg=heavy-none ;; heavy) page=heavy acfg=heavy-none ;; esac
    say "comparison $name: $acfg (A) against $bcfg (B) on $(page_path "$page"), $WINDOW s windows after $SETTLE s of load each"
    while :; do
        for slot in $(python3 -c "import sys; sys.path.insert(0, '$LIB'); import benchstat; print(*benchstat.order($pair))"); do
            cfg="$acfg"
            [ "$slot" = A ] || cfg="$bcfg"
            measure "$name" "$pair" "$slot" "$acfg" "$bcfg" "$cfg" "$page"
        done
        pair=$((pair + 1))
        read -r verdict n mean half <<<"$(python3 "$LIB/benchstat.py" check "$OUT/windows.csv" "$name" "$TARGET" "$MIN_PAIRS" "$MAX_PAIRS")"
        say "  $name: $n pairs, loss $mean ± $half % (95% t-interval)"
        case "$verdict" in
            target)
                out "$name: stopped after $n pairs: the interval's half-width ($half points) is at most TARGET ($TARGET)"
                break
                ;;
            max_pairs)
                out "$name: stopped after $n pairs: MAX_PAIRS reached; the half-width is $half points (TARGET $TARGET)"
                break
                ;;
        esac
    done
    printf '%s,%s,%s\n' "$name" "$verdict" "$n" >>"$OUT/stops.csv"
}

settings_json() {
    python3 - "$@" <<'EOF'
import json, sys
keys = sys.argv[1::2]
vals = sys.argv[2::2]
print(json.dumps(dict(zip(keys, vals)), indent=1))
EOF
}

windows_mode() {
    printf 'comparison,pair,slot,a_config,b_config,page,config,start_unix,requests,duration_s,errors,non2xx,p50_us,p99_us,jvm_user_s,jvm_sys_s,sonda_user_s,sonda_sys_s,sonda_ns,wrk_cpu_s,machine_busy_s,steal_s,other_cpu_s\n' >"$OUT/windows.csv"
    printf 'n,config,kernel_events,kernel_lost,agent_events,agent_dropped,seconds,collector_cpu_s,trace_bytes\n' >"$OUT/attaches.csv"
    printf 'n,from,to,t_start,t_done\n' >"$OUT/switches.csv"
    printf 'comparison,stop,pairs\n' >"$OUT/stops.csv"
    local c wanted=" "
    for c in $CONFIGS; do
        case "$c" in heavy*) wanted+="heavy " ;; *) wanted+="hello " ;; esac
    done
    case " $CONFIGS " in
        *" path "* | *" heavy "* | *" broad "*)
            # The first retransformation into this JVM deoptimises every compiled
            # method: do it once, unmeasured, before the warm-up.
            say "priming: attach and detach once with the request path (the first retransformation deoptimises everything), under load"
            load hello 5
            switch_to path
            load hello 10
            switch_to none
            ;;
    esac
    case "$wanted" in *hello*) say "warm-up: $WARMUP s of load on $HELLO_PATH" && load hello "$WARMUP" ;; esac
    case "$wanted" in *heavy*) say "warm-up: $WARMUP s of load on $HEAVY_PAGE" && load heavy "$WARMUP" ;; esac
    for c in $CONFIGS; do
        comparison "$c"
    done
    switch_to none
    summarise
}

# summarise: the tables and JSON of the windows measured so far.
summarise() {
    settings_json mode windows window_s "$WINDOW" settle_s "$SETTLE" warmup_s "$WARMUP" target "$TARGET" \
        min_pairs "$MIN_PAIRS" max_pairs "$MAX_PAIRS" configs "$CONFIGS" threads "$THREADS" connections "$CONNECTIONS" \
        placement "$PLACEMENT" nice "$NICE" cpus "$(nproc)" hello "$HELLO_PATH" heavy "$HEAVY_PAGE" \
        order "A B, B A, ... (A B B A blocks)" interval "Student t 95% over pairs" \
        sonda "$("$SONDA" --version 2>&1 | head -n1)" git "$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
        >"$OUT/settings.json"
    out ""
    python3 "$LIB/benchstat.py" summary "$OUT/windows.csv" "$OUT/stops.csv" "$OUT/settings.json" "$OUT/results.json" | tee -a "$OUT/table.txt"
    out ""
    out "sonda's own account of each attach (attaches.csv):"
    column -t -s, "$OUT/attaches.csv" | tee -a "$OUT/table.txt"
    out ""
    python3 "$LIB/jitlog.py" "$OUT/jit.log" "$OUT/gc.log" "$OUT/switches.csv" "$OUT/windows.csv" "$OUT/jit.json" | tee -a "$OUT/table.txt"
}

# --- attach mode ---------------------------------------------------------------------------

attach_mode() {
    printf 'round,event,t\n' >"$OUT/events.csv"
    printf 'n,config,kernel_events,kernel_lost,agent_events,agent_dropped,seconds,collector_cpu_s,trace_bytes\n' >"$OUT/attaches.csv"
    printf 'n,from,to,t_start,t_done\n' >"$OUT/switches.csv"
    say "warm-up: $WARMUP s of load on $HELLO_PATH"
    load hello "$WARMUP"
    local total=$((ROUNDS * (BASELINE + ATTACHED + AFTER) + 3600))
    python3 "$LIB/procsample.py" "$JVM_PID" 1 "$OUT/jit.log" "$OUT/gc.log" "$OUT/catalina.log" >"$OUT/samples.csv" &
    SAMPLER_PID=$!
    local w0 w1
    # The JVM's writes less what it wrote to its logs.
    w0=$(($(awk '/^wchar:/ { print $2 }' "/proc/$JVM_PID/io") - $(cat "$OUT/jit.log" "$OUT/gc.log" "$OUT/catalina.log" | wc -c)))
    "${LOAD_PIN[@]}" wrk -t "$THREADS" -c "$CONNECTIONS" -d "${total}s" -s "$FILES/bench.lua" \
        "http://127.0.0.1:$PORT$HELLO_PATH" >"$OUT/wrk.log" 2>&1 &
    WRK_PID=$!
    local r
    for r in $(seq "$ROUNDS"); do
        say "round $r: $BASELINE s of baseline"
        echo "$r,baseline,$(now)" >>"$OUT/events.csv"
        sleep "$BASELINE"
        echo "$r,attach,$(now)" >>"$OUT/events.csv"
        switch_to "$ATTACH_CONFIG"
        echo "$r,ready,$(now)" >>"$OUT/events.csv"
        say "round $r: attached ($(sed -n 's/.*attached to JVM [0-9]* (.*) in \([0-9.]*\) s;.*/\1/p' "$ATTACH_LOG") s); $ATTACHED s with $ATTACH_CONFIG traced"
        sleep "$ATTACHED"
        echo "$r,detach,$(now)" >>"$OUT/events.csv"
        switch_to none
        echo "$r,detached,$(now)" >>"$OUT/events.csv"
        say "round $r: detached; $AFTER s after"
        sleep "$AFTER"
        echo "$r,end,$(now)" >>"$OUT/events.csv"
    done
    kill -INT "$WRK_PID"
    wait "$WRK_PID" || true
    WRK_PID=
    sleep 1.5
    kill -TERM "$SAMPLER_PID"
    wait "$SAMPLER_PID" || true
    SAMPLER_PID=
    w1=$(($(awk '/^wchar:/ { print $2 }' "/proc/$JVM_PID/io") - $(cat "$OUT/jit.log" "$OUT/gc.log" "$OUT/catalina.log" | wc -c)))
    WRK_LINE="$(grep '^BENCH ' "$OUT/wrk.log")" || die "wrk printed no totals: $(tail -n 3 "$OUT/wrk.log")"
    local req bytes
    req="$(field requests)"
    bytes="$(field bytes)"
    [ "$req" -gt 0 ] || die "wrk completed no request"
    local bpr agree
    bpr="$(awk -v b="$bytes" -v r="$req" 'BEGIN { printf "%.3f", b / r }')"
    agree="$(awk -v w=$((w1 - w0)) -v b="$bytes" 'BEGIN { printf "%.3f", 100 * (w / b - 1) }')"
    out "attach mode: $req requests, $bpr bytes a response (wrk); the JVM wrote $((w1 - w0)) bytes (logs excluded), ${agree}% more than wrk read"
    awk -v a="$agree" 'BEGIN { exit !(a < 1 && a > -1) }' ||
        say "warning: the JVM's writes and wrk's reads differ by ${agree}%: the per-second counts are off by as much"
    settings_json mode attach baseline_s "$BASELINE" attached_s "$ATTACHED" after_s "$AFTER" rounds "$ROUNDS" \
        warmup_s "$WARMUP" threads "$THREADS" connections "$CONNECTIONS" placement "$PLACEMENT" nice "$NICE" cpus "$(nproc)" \
        bytes_per_request "$bpr" writes_vs_reads_pct "$agree" clock_ticks "$HZ" tolerance 0.02 \
        counting "JVM wchar (/proc/PID/io) less its log files' growth, per second / bytes per response" \
        sonda "$("$SONDA" --version 2>&1 | head -n1)" git "$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
        >"$OUT/settings.json"
    python3 "$LIB/benchstat.py" attach "$OUT/samples.csv" "$OUT/events.csv" "$OUT/settings.json" "$OUT/attach.json" "$OUT/seconds.csv" |
        tee -a "$OUT/table.txt"
    out ""
    printf 'comparison,pair,config,start_unix,duration_s\n' >"$OUT/no-windows.csv"
    python3 "$LIB/jitlog.py" "$OUT/jit.log" "$OUT/gc.log" "$OUT/switches.csv" "$OUT/no-windows.csv" "$OUT/jit.json" | tee -a "$OUT/table.txt"
    rm -f "$OUT/no-windows.csv"
}

# --- main --------------------------------------------------------------------------------

START=$SECONDS
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
rm -f "$OUT"/{windows,attaches,switches,stops,samples,events,seconds}.csv "$OUT"/{results,attach,jit,settings}.json \
    "$OUT"/{table.txt,catalina.log,jit.log,gc.log,wrk.log,wrk-window.log} "$OUT"/sonda-*.log "$OUT"/attach-*.trace
setup_packages
command -v wrk >/dev/null 2>&1 || die "wrk is not installed"
setup_sonda
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
make_base
start_tomcat
wait_ready
out "bench-tomcat ($MODE): Tomcat $PLACEMENT; wrk -t$THREADS -c$CONNECTIONS; HelloWorldExample at $HELLO_PATH, heavy page $HEAVY_PAGE"
out "load average before: $(cut -d' ' -f1-3 /proc/loadavg) (the machine is shared: other_cpu_s in windows.csv, other_cpu_per_s in seconds.csv)"
if [ "$MODE" = windows ]; then
    windows_mode
else
    attach_mode
fi
switch_to none
say "stopping Tomcat (SIGTERM to JVM pid $JVM_PID)"
kill -TERM "$JVM_PID"
rc=0
wait "$JVM_PID" || rc=$?
JVM_PID=
case "$rc" in 0 | 143) ;; *) die "Tomcat ended with exit status $rc; see $OUT/catalina.log" ;; esac
if grep -q '^sonda:' "$OUT/catalina.log"; then
    say "the agent said on Tomcat's stderr: $(grep '^sonda:' "$OUT/catalina.log" | head -n 3)"
fi
out "outputs in $OUT; $((SECONDS - START)) s in all"
