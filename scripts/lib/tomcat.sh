# shellcheck shell=bash
# Shared by scripts/tomcat.sh and scripts/tomcat-attach.sh: installing what they need,
# a private CATALINA_BASE (Debian's stock conf files with scripts/tomcat/server.xml and
# the web application of scripts/tomcat/webapp/), starting it and waiting for it, an
# HTTP probe without curl, and the clean-up run on exit.
#
# The sourcing script sets, before sourcing: ME (its name, for messages), REPO, FILES
# (scripts/tomcat), OUT and CATALINA_HOME; and before the clean-up runs, STOP_ORDER:
# the names of the variables holding the pids to stop, in order, each "label=VAR".
# Optional: EXAMPLES=1 installs and deploys Debian's examples web application at
# /examples (HelloWorldExample at $HELLO_PATH); NO_ACCESS_LOG=1 leaves the access log
# out of server.xml.

say() { echo "$ME: $*" >&2; }
die() {
    say "FAILED: $*"
    exit 1
}

APT_UPDATED=0
# apt_install PACKAGE...: installs with apt-get, never starting a service.
apt_install() {
    local policy=/usr/sbin/policy-rc.d made_policy=0
    if [ ! -e "$policy" ]; then
        # invoke-rc.d asks policy-rc.d whether it may start a service; 101 means no.
        printf '#!/bin/sh\nexit 101\n' >"$policy"
        chmod 755 "$policy"
        made_policy=1
    fi
    if [ "$APT_UPDATED" = 0 ]; then
        DEBIAN_FRONTEND=noninteractive apt-get update -qq
        APT_UPDATED=1
    fi
    say "installing $*"
    local rc=0
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null || rc=$?
    if [ "$made_policy" = 1 ]; then
        rm -f "$policy"
    fi
    [ "$rc" = 0 ] || die "apt-get install $* failed (exit $rc)"
}

# The package's own service must not run: it would hold port 8080 and is not ours.
stop_system_tomcat() {
    if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ] &&
        systemctl is-active --quiet tomcat10 2>/dev/null; then
        say "stopping the tomcat10 service the package started"
        systemctl stop tomcat10
        systemctl disable --quiet tomcat10 2>/dev/null || true
    fi
}

# Debian's examples web application (HelloWorldExample), deployed by make_base when
# the sourcing script sets EXAMPLES=1.
EXAMPLES_DIR=/usr/share/tomcat10-examples/examples
HELLO_PATH=/examples/servlets/servlet/HelloWorldExample

setup_packages() {
    local need=()
    [ -x "$CATALINA_HOME/bin/catalina.sh" ] || need+=(tomcat10)
    [ "${EXAMPLES:-0}" != 1 ] || [ -d "$EXAMPLES_DIR/WEB-INF" ] || need+=(tomcat10-examples)
    command -v wrk >/dev/null 2>&1 || need+=(wrk)
    command -v python3 >/dev/null 2>&1 || need+=(python3)
    command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
    if [ "${#need[@]}" -gt 0 ]; then
        [ "$(id -u)" = 0 ] || die "missing ${need[*]}; run as root to install them"
        apt_install "${need[@]}"
        case " ${need[*]} " in *" tomcat10 "*) stop_system_tomcat ;; esac
    fi
    [ -x "$CATALINA_HOME/bin/catalina.sh" ] || die "no $CATALINA_HOME/bin/catalina.sh after installing tomcat10"
}

setup_sonda() {
    if [ -n "${SONDA_BIN:-}" ]; then
        SONDA="$SONDA_BIN"
    else
        SONDA="$REPO/target/release/sonda"
        if [ ! -x "$SONDA" ] || [ ! -e "$REPO/target/release/libsonda.so" ]; then
            say "building sonda (cargo build --release -p sonda -p sonda-agent)"
            (cd "$REPO" && cargo build --release -p sonda -p sonda-agent)
        fi
    fi
    [ -x "$SONDA" ] || die "$SONDA is not an executable (set SONDA_BIN)"
    export SONDA_AGENT="${SONDA_AGENT:-$(dirname "$SONDA")/libsonda.so}"
    [ -f "$SONDA_AGENT" ] || die "agent library $SONDA_AGENT not found (set SONDA_AGENT)"
    # NEED_PRVCHECK=0: the sourcing script checks no Paraver export.
    if [ "${NEED_PRVCHECK:-1}" = 1 ]; then
        PRVCHECK="${PRVCHECK:-}"
        if [ -z "$PRVCHECK" ]; then
            PRVCHECK="$REPO/../shared/tools/prvcheck"
            [ -e "$PRVCHECK" ] || PRVCHECK="$REPO/tests/tools/prvcheck"
        fi
        [ -f "$PRVCHECK" ] || die "prvcheck not found at $PRVCHECK (set PRVCHECK)"
    fi
    if [ "$(id -u)" = 0 ] && [ -d /sys/kernel/tracing ] && [ ! -e /sys/kernel/tracing/events ]; then
        mount -t tracefs nodev /sys/kernel/tracing || say "could not mount tracefs"
    fi
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

make_base() {
    BASE="$(mktemp -d "/tmp/sonda-${ME%.sh}.XXXXXX")"
    mkdir -p "$BASE"/{conf,webapps/ROOT,logs,work,temp}
    local f
    for f in web.xml logging.properties context.xml catalina.properties; do
        cp "$CATALINA_HOME/etc/$f" "$BASE/conf/$f"
    done
    PORT="$(free_port)"
    sed "s/@PORT@/$PORT/" "$FILES/server.xml" >"$BASE/conf/server.xml"
    if [ "${NO_ACCESS_LOG:-0}" = 1 ]; then
        # A benchmark does not want a file write per request that is not Tomcat's work.
        sed -i '/<Valve className="org.apache.catalina.valves.AccessLogValve"/,/\/>/d' "$BASE/conf/server.xml"
        grep -q AccessLogValve "$BASE/conf/server.xml" && die "could not remove the access log from server.xml"
    fi
    cp "$FILES"/webapp/* "$BASE/webapps/ROOT/"
    if [ "${EXAMPLES:-0}" = 1 ]; then
        [ -d "$EXAMPLES_DIR/WEB-INF" ] || die "no examples web application in $EXAMPLES_DIR (package tomcat10-examples)"
        mkdir -p "$BASE/conf/Catalina/localhost"
        # As Debian's /etc/tomcat10/Catalina/localhost/examples.xml (linked jars allowed),
        # without its path attribute, which Tomcat ignores there (the file name is the path).
        printf '<Context docBase="%s">\n  <Resources allowLinking="true"/>\n</Context>\n' \
            "$EXAMPLES_DIR" >"$BASE/conf/Catalina/localhost/examples.xml"
    fi
    ACCESS_LOG="$BASE/logs/access.log"
}

# http_get PATH: one HTTP/1.0 GET over bash's /dev/tcp (no curl needed); prints the
# status code, fails when there is no answer.
http_get() {
    local status
    exec 3<>"/dev/tcp/127.0.0.1/$PORT" || return 1
    printf 'GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n' "$1" >&3
    IFS=' ' read -r -t 30 _ status _ <&3 || status=
    # Read the rest: the server closes an HTTP/1.0 connection after the response.
    timeout 30 cat <&3 >/dev/null || true
    exec 3<&- 3>&-
    [ -n "$status" ] || return 1
    echo "$status"
}

# Stops what still runs (STOP_ORDER: "label=VARIABLE" pairs, in order: SIGTERM, then
# SIGKILL after 10 s), keeps Tomcat's access log and removes the CATALINA_BASE.
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
    local rc=$?
    set +e
    local entry label var pid
    for entry in "${STOP_ORDER[@]}"; do
        label="${entry%%=*}"
        var="${entry#*=}"
        pid="${!var:-}"
        if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
            say "cleaning up: stopping $label (pid $pid)"
            kill -TERM "$pid" 2>/dev/null
            for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            kill -KILL "$pid" 2>/dev/null
        fi
    done
    wait 2>/dev/null
    if [ -n "${BASE:-}" ] && [ -d "$BASE" ]; then
        [ -f "$BASE/logs/access.log" ] && cp "$BASE/logs/access.log" "$OUT/access.log"
        if [ "${KEEP_BASE:-0}" = 1 ]; then
            say "CATALINA_BASE kept in $BASE"
        else
            rm -rf "$BASE"
        fi
    fi
    exit "$rc"
}

# The environment catalina.sh runs in: our base, the JDK of `java`, a small fixed heap
# (less GC noise, the same run on every machine).
tomcat_env() {
    export CATALINA_HOME CATALINA_BASE="$BASE" CATALINA_TMPDIR="$BASE/temp"
    export JAVA_HOME="${JAVA_HOME:-$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")}"
    export CATALINA_OPTS="${CATALINA_OPTS:--Xms256m -Xmx256m}"
}

# Waits for Tomcat to answer, then warms its JSPs up.
wait_ready() {
    local t0=$SECONDS status
    while :; do
        kill -0 "$JVM_PID" 2>/dev/null || die "Tomcat exited during start-up; see $OUT/catalina.log"
        if status="$(http_get /index.html 2>/dev/null)"; then
            [ "$status" = 200 ] || die "Tomcat answered /index.html with status $status"
            break
        fi
        [ $((SECONDS - t0)) -lt 60 ] || die "Tomcat did not answer on port $PORT within 60 s; see $OUT/catalina.log"
        sleep 0.2
    done
    say "Tomcat (JVM pid $JVM_PID) answers after $((SECONDS - t0)) s"
    # JSPs compile on their first request: do that before the measured load (and check
    # the examples' servlet answers when it is deployed).
    local page
    local pages=(/cpu.jsp /sleep.jsp /mixed.jsp)
    [ "${EXAMPLES:-0}" != 1 ] || pages+=("$HELLO_PATH")
    for page in "${pages[@]}"; do
        status="$(http_get "$page")" || die "no answer for $page"
        [ "$status" = 200 ] || die "$page answered with status $status; see $OUT/catalina.log"
    done
}

# ticks PID: "utime stime" of the whole process (all its threads, dead ones included).
ticks() {
    local s f
    read -r s <"/proc/$1/stat" || return 1
    s="${s##*) }"
    read -r -a f <<<"$s"
    echo "${f[11]} ${f[12]}"
}

# run_ns PID: CPU time of the process's live threads in ns (schedstat's first field).
run_ns() {
    local sum=0 t v
    for t in /proc/"$1"/task/*/schedstat; do
        read -r v _ <"$t" 2>/dev/null || continue
        sum=$((sum + v))
    done
    echo "$sum"
}
