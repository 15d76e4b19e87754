#!/usr/bin/env bash
# The seed study on this machine: Tomcat's TLS service demands per kind of work (full
# handshake, resumed handshake, connection set-up, request processing), from `sonda
# services`' classes of units, next to the original study's figures.
#
#   1. installs tomcat10 (and a JDK) with apt-get when missing; builds a private
#      CATALINA_BASE (scripts/lib/tomcat.sh) with scripts/tomcat/server-tls.xml: a TLS
#      1.2 and a TLS 1.3 NIO connector with a 2048-bit RSA key made now by keytool;
#   2. starts Tomcat (without sonda) and warms it up;
#   3. for each protocol, with and without session reuse, at each rate of $RATES
#      connections/s: `sonda attach --duration` with the TLS path traced, the load of
#      scripts/tls/TlsLoad.java ($DURATION s, one request per connection, Connection:
#      close; it counts which connections resumed, the independent truth), then
#      `sonda services --unit-class` naming the classes by what decides them:
#        full handshake     a SocketProcessor::doRun that ran JSSE's server-certificate
#                           producer (once per full handshake: the ClientHello leg)
#        resumed handshake  a doRun that consumed a ClientHello without it
#        handshake, later   the handshake's other legs (client key exchange, Finished)
#        request            a doRun that ran Http11Processor::service (with the last
#                           handshake leg when it ended in the same doRun)
#        connection set-up  NioEndpoint::setSocketOptions on the acceptor thread
#   4. prints per run the classes' units, CPU, waiting for CPU and blocked (mean, p95),
#      the load's own counts, throughput and mean connection time, the machine's CPU
#      utilisation, and checks that sonda's full/resumed counts equal the load's;
#   5. when the tests' Python environment is there (VENV, LINE), the run's model
#      (`sonda model --run-queues`, solved by LINE's simulator) next to the run:
#      connections/s, the machine's CPU, and the server's time per connection
#      against sonda's measurement and the load's connection time
#      (scripts/tls/model_vs_load.py says what each figure is).
# A non-blocking connector runs one handshake as several doRun calls, on any worker
# thread; sonda groups calls by thread and outermost call (model/src/units.rs), so a
# handshake's legs are classes of their own, not summed per connection.
#
# Environment: OUT (default <repo>/out/study-tls), RATES (default "60 110 160"),
# DURATION (s per run, default 8), PROTOCOLS (default "TLSv1.2 TLSv1.3"), SONDA_BIN,
# SONDA_AGENT, VENV (default <target>/release/python-venv, made by scripts/test.sh).
# Exit 0 when every run's counts match, 1 otherwise. Run as root.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FILES="$REPO/scripts/tomcat"
OUT="${OUT:-$REPO/out/study-tls}"
RATES="${RATES:-60 110 160}"
DURATION="${DURATION:-8}"
PROTOCOLS="${PROTOCOLS:-TLSv1.2 TLSv1.3}"
CATALINA_HOME=/usr/share/tomcat10
ME=study-tls.sh
NEED_PRVCHECK=0
PASSWORD=sonda-study
VENV="${VENV:-${CARGO_TARGET_DIR:-$REPO/target}/release/python-venv}"
# shellcheck source=scripts/lib/tomcat.sh
source "$REPO/scripts/lib/tomcat.sh"

METHODS=(
    'org.apache.tomcat.util.net.NioEndpoint$SocketProcessor::doRun'
    'org.apache.tomcat.util.net.SecureNioChannel::handshake'
    'org.apache.tomcat.util.net.NioEndpoint::setSocketOptions'
    'org.apache.coyote.http11.Http11Processor::service'
    'sun.security.ssl.ClientHello$T1*ClientHelloConsumer::consume'
    'sun.security.ssl.CertificateMessage$T1*CertificateProducer::produce'
)
DORUN='NioEndpoint$SocketProcessor::doRun'
RULES=(
    --unit-class "full handshake=$DORUN +*CertificateProducer::produce"
    --unit-class "resumed handshake=$DORUN +*ClientHelloConsumer::consume"
    --unit-class "handshake, later=$DORUN +SecureNioChannel::handshake !Http11Processor::service"
    --unit-class "request=$DORUN +Http11Processor::service"
    --unit-class "connection set-up=NioEndpoint::setSocketOptions*"
)

JVM_PID=
ATTACH_PID=
STOP_ORDER=("sonda attach=ATTACH_PID" "Tomcat's JVM=JVM_PID")
trap cleanup EXIT
mkdir -p "$OUT"
setup_packages
setup_sonda
make_base
PORT12="$(free_port)"
PORT13="$(free_port)"
KEYSTORE="$BASE/conf/server.p12"
keytool -genkeypair -alias tomcat -keyalg RSA -keysize 2048 -dname CN=localhost -validity 2 \
    -storetype PKCS12 -keystore "$KEYSTORE" -storepass "$PASSWORD" >/dev/null 2>&1 ||
    die "keytool could not make the key"
sed "s/@PORT12@/$PORT12/; s/@PORT13@/$PORT13/; s#@KEYSTORE@#$KEYSTORE#g; s/@PASSWORD@/$PASSWORD/g" \
    "$FILES/server-tls.xml" >"$BASE/conf/server.xml"
LOADER="$OUT/classes"
mkdir -p "$LOADER"
javac -d "$LOADER" "$REPO/scripts/tls/TlsLoad.java" || die "javac TlsLoad.java failed"

port_of() { if [ "$1" = TLSv1.2 ]; then echo "$PORT12"; else echo "$PORT13"; fi; }
load() { # PROTOCOL RATE SECONDS REUSE
    java -cp "$LOADER" TlsLoad "$(port_of "$1")" "$KEYSTORE" "$PASSWORD" "$1" "$2" "$3" "$4" /index.html
}
# "machine-busy machine-total tomcat-cpu" in clock ticks: /proc/stat's first line and
# utime + stime of Tomcat's JVM.
cpu_busy() {
    awk '/^cpu / { printf "%d %d ", $2 + $3 + $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8 }' /proc/stat
    sed 's/.*) //' "/proc/$JVM_PID/stat" | awk '{ print $12 + $13 }'
}

tomcat_env
say "starting Tomcat (TLS 1.2 on $PORT12, TLS 1.3 on $PORT13)"
"$CATALINA_HOME/bin/catalina.sh" run >"$OUT/catalina.log" 2>&1 &
JVM_PID=$!
for _ in $(seq 120); do
    (echo >"/dev/tcp/127.0.0.1/$PORT12") 2>/dev/null && break
    kill -0 "$JVM_PID" 2>/dev/null || die "Tomcat exited; see $OUT/catalina.log"
    sleep 0.5
done
say "warming up (both protocols, both modes), with one throwaway attach"
# The first retransformation after a late attach deoptimises every compiled method
# (docs: ../shared/notes/jvm.md): take that hit here, not in the first measured run.
"$SONDA" attach "$JVM_PID" -o "$OUT/warmup.trace" --duration 4 \
    $(printf -- "--methods %s " "${METHODS[@]}") >"$OUT/warmup.attach.log" 2>&1 &
ATTACH_PID=$!
for p in $PROTOCOLS; do for r in 0 1; do load "$p" 60 3 "$r" >/dev/null; done; done
wait "$ATTACH_PID" || die "the warm-up attach failed: $(tail -3 "$OUT/warmup.attach.log")"
ATTACH_PID=
for p in $PROTOCOLS; do for r in 0 1; do load "$p" 60 2 "$r" >/dev/null; done; done

FAILED=0
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
for p in $PROTOCOLS; do
    for reuse in 0 1; do
        for rate in $RATES; do
            tag="$p-reuse$reuse-$rate"
            trace="$OUT/$tag.trace"
            rm -f "$trace"
            "$SONDA" attach "$JVM_PID" -o "$trace" --duration $((DURATION + 3)) \
                $(printf -- "--methods %s " "${METHODS[@]}") >"$OUT/$tag.attach.log" 2>&1 &
            ATTACH_PID=$!
            for _ in $(seq 100); do
                grep -q 'attached to JVM' "$OUT/$tag.attach.log" 2>/dev/null && break
                kill -0 "$ATTACH_PID" 2>/dev/null || die "sonda attach failed: $(cat "$OUT/$tag.attach.log")"
                sleep 0.1
            done
            sleep 1 # the instrumentation of already loaded classes
            read -r b0 t0 j0 < <(cpu_busy)
            s0=$(date +%s.%N)
            loadline="$(load "$p" "$rate" "$DURATION" "$reuse" | grep '^LOAD ')"
            read -r b1 t1 j1 < <(cpu_busy)
            s1=$(date +%s.%N)
            wait "$ATTACH_PID" || die "sonda attach ended with an error: $(tail -3 "$OUT/$tag.attach.log")"
            ATTACH_PID=
            "$SONDA" services "$trace" "${RULES[@]}" >"$OUT/$tag.services.txt" 2>&1 ||
                die "sonda services failed: $(tail -3 "$OUT/$tag.services.txt")"
            # Machine: all CPUs' busy share (the load generator's JVM, start-up included,
            # is in it); Tomcat: its JVM's CPU time over the load's wall time, per CPU.
            util="$(awk -v b="$((b1 - b0))" -v t="$((t1 - t0))" -v j="$((j1 - j0))" -v w="$(echo "$s1 - $s0" | bc)" \
                -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "machine %.0f%%, Tomcat %.0f%%", 100 * b / t, 100 * j / hz / w / 2 }')"
            python3 - "$OUT/$tag.services.txt" "$tag" "$util" "$loadline" >>"$SUMMARY" <<'PY' || FAILED=1
import re, sys
path, tag, util, load = sys.argv[1:]
lf = dict(kv.split("=") for kv in load.split()[1:])
text = open(path).read().split("Units of work", 1)[1].splitlines()[1:]
head = re.split(r"\s{2,}", text[0].strip())
rows = {}
for line in text[1:]:
    cells = re.split(r"\s{2,}", line.strip())
    if len(cells) != len(head):
        break
    rows[cells[0]] = dict(zip(head, cells))
print(f"== {tag}: CPU of 2: {util}; load: {lf['connections']} connections "
      f"({lf['full']} full, {lf['resumed']} resumed, {lf['errors']} errors), "
      f"{lf['throughput']} conn/s, mean connection time {lf['conn_ms_mean']} ms")
study = {"full handshake": "~170 ms", "resumed handshake": "~2 ms"}
print(f"  {'class':<18} {'units':>6}  {'cpu':>9} {'p95':>9}  {'waiting':>9} {'p95':>9}  {'blocked':>9} {'p95':>9}  study (CPU)")
for k in ["full handshake", "resumed handshake", "handshake, later", "request", "connection set-up"]:
    r = rows.get(k)
    if r is None:
        print(f"  {k:<18} {0:>6}")
        continue
    print(f"  {k:<18} {r['units']:>6}  {r['cpu']:>9} {r['cpu p95']:>9}  {r['waiting']:>9} {r['waiting p95']:>9}  "
          f"{r['blocked']:>9} {r['blocked p95']:>9}  {study.get(k, '')}")
got = (int(rows.get("full handshake", {}).get("units", 0)), int(rows.get("resumed handshake", {}).get("units", 0)))
want = (int(lf["full"]), int(lf["resumed"]))
ok = got == want
print(f"  counts: sonda full/resumed {got[0]}/{got[1]}, load {want[0]}/{want[1]}: {'equal' if ok else 'DIFFERENT'}")
sys.exit(0 if ok else 1)
PY
            if [ -x "$VENV/bin/python" ]; then
                "$VENV/bin/python" "$REPO/scripts/tls/model_vs_load.py" "$trace" "$SONDA" "$VENV" \
                    "$(awk -v b="$((b1 - b0))" -v t="$((t1 - t0))" 'BEGIN { print b / t }')" "$loadline" \
                    >>"$SUMMARY" 2>"$OUT/$tag.model.log" || echo "  model: failed (see $OUT/$tag.model.log)" >>"$SUMMARY"
            fi
            tail -n 9 "$SUMMARY" | sed -n '/^== '"$tag"'/,$p' >&2
        done
    done
done
say "summary in $SUMMARY"
[ "$FAILED" = 0 ] || die "sonda's handshake counts differ from the load's in some run (see $SUMMARY)"
