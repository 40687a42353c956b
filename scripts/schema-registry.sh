#!/usr/bin/env bash
# A Confluent-compatible schema registry on localhost for the tests of streams-serde-registry:
# Apicurio Registry (in-memory storage) with its Confluent API under /apis/ccompat/v7.
#
#   bash scripts/schema-registry.sh start    start it (idempotent: a running registry is left as it is),
#                                            wait until it answers, set the global compatibility to BACKWARD
#   bash scripts/schema-registry.sh stop     SIGTERM, bounded wait, then SIGKILL; ok when not running
#   bash scripts/schema-registry.sh status   exit 0 when running and answering, 3 when not running, 1 when stuck
#   bash scripts/schema-registry.sh resolve  only fetches the registry (as start does on first use)
#   bash scripts/schema-registry.sh python   makes the Python environment of the cross-check tests
#                                            (confluent-kafka with Avro, Protobuf and JSON Schema) and
#                                            ends with the line `python at PATH`
#
# start and status end with the line `schema registry listening on URL` on stdout; URL is what
# STREAMS_TEST_SCHEMA_REGISTRY (and schema.registry.url) takes. Its storage is in memory: every
# start begins empty. See docs/serdes.md.
#
# The registry is not built here: Apicurio publishes its packaged application on Maven Central
# (io.apicurio:apicurio-registry-app:$APICURIO_VERSION, classifier `all`, a tar.gz); Maven fetches
# it into $STREAMS_CACHE/apicurio-registry-$APICURIO_VERSION (once) and it runs with Java 17+.
# (Apicurio 3.1 and later need Java 21; 3.0.9 is the newest that runs on Java 17.)
#
# Environment (all optional):
#   SCHEMA_REGISTRY_PORT           HTTP port on 127.0.0.1 (default 8081)
#   STREAMS_CACHE                  cache root (default ~/.cache/streams-rs)
#   SCHEMA_REGISTRY_RUN_DIR        pid file and logs (default $STREAMS_CACHE/schema-registry-run)
#   SCHEMA_REGISTRY_HEAP_OPTS      JVM heap (default -Xms128m -Xmx512m)
#   SCHEMA_REGISTRY_START_TIMEOUT  seconds to wait for it to answer (default 180)
#   SCHEMA_REGISTRY_STOP_TIMEOUT   seconds to wait after SIGTERM before SIGKILL (default 20)
#   MAVEN_CENTRAL_URL              Maven repository to fetch from (default Maven Central)
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
APICURIO_VERSION=3.0.9
STREAMS_CACHE=${STREAMS_CACHE:-$HOME/.cache/streams-rs}
DIST_DIR=$STREAMS_CACHE/apicurio-registry-$APICURIO_VERSION
APP_DIR=$DIST_DIR/app
RUNNER=$APP_DIR/apicurio-registry-app-$APICURIO_VERSION-runner.jar
MARKER=$DIST_DIR/.resolved
RUN_DIR=${SCHEMA_REGISTRY_RUN_DIR:-$STREAMS_CACHE/schema-registry-run}
PID_FILE=$RUN_DIR/registry.pid
PORT_FILE=$RUN_DIR/registry.port
LOG_FILE=$RUN_DIR/registry.log
PY_ENV=$STREAMS_CACHE/schema-registry-py
PY_REQUIREMENTS="confluent-kafka[avro,json,protobuf,schemaregistry]==2.16.1"
SCHEMA_REGISTRY_PORT=${SCHEMA_REGISTRY_PORT:-8081}
SCHEMA_REGISTRY_HEAP_OPTS=${SCHEMA_REGISTRY_HEAP_OPTS:--Xms128m -Xmx512m}
SCHEMA_REGISTRY_START_TIMEOUT=${SCHEMA_REGISTRY_START_TIMEOUT:-180}
SCHEMA_REGISTRY_STOP_TIMEOUT=${SCHEMA_REGISTRY_STOP_TIMEOUT:-20}
MAVEN_CENTRAL_URL=${MAVEN_CENTRAL_URL:-https://repo.maven.apache.org/maven2}
CCOMPAT=/apis/ccompat/v7

SCRIPT_NAME=schema-registry.sh
# shellcheck source=scripts/lib/common.sh
source "$SCRIPT_DIR/lib/common.sh"

[[ $SCHEMA_REGISTRY_PORT =~ ^[0-9]+$ ]] ||
    die "SCHEMA_REGISTRY_PORT must be a port number, not '$SCHEMA_REGISTRY_PORT'"

# One start/stop at a time per run dir.
lock_run_dir() { lock_dir "$RUN_DIR"; }

need_curl() {
    command -v curl >/dev/null 2>&1 || die "curl not found on PATH (Debian: apt-get install curl)"
}

# Fetches the packaged application from Maven Central once; a marker records a complete unpack.
resolve() {
    if [[ -f $MARKER && -f $RUNNER ]]; then
        return 0
    fi
    command -v mvn >/dev/null 2>&1 ||
        die "mvn not found on PATH: it fetches Apicurio Registry $APICURIO_VERSION from Maven Central (Debian: apt-get install maven)"
    mkdir -p "$DIST_DIR"
    local t0 attempt tmp=$DIST_DIR/partial
    t0=$(now_ms)
    # Only Maven Central: the artifact's parent POM names other repositories that need not answer.
    cat >"$DIST_DIR/settings.xml" <<SETTINGS
<settings>
  <mirrors>
    <mirror><id>streams-rs-central</id><mirrorOf>*</mirrorOf><url>$MAVEN_CENTRAL_URL</url></mirror>
  </mirrors>
</settings>
SETTINGS
    say "fetching Apicurio Registry $APICURIO_VERSION (about 110 MB) from Maven Central into $DIST_DIR ..."
    for attempt in 1 2 3; do
        rm -rf "$tmp"
        if mvn -q -B -Dstyle.color=never -s "$DIST_DIR/settings.xml" dependency:copy \
            -Dartifact="io.apicurio:apicurio-registry-app:$APICURIO_VERSION:tar.gz:all" -Dtransitive=false \
            -DoutputDirectory="$tmp/dist" </dev/null >"$DIST_DIR/mvn.log" 2>&1 9>&-; then
            break
        fi
        sed 's/\x1b\[[0-9;]*m//g' "$DIST_DIR/mvn.log" >&2
        [[ $attempt -lt 3 ]] || die "mvn could not fetch Apicurio Registry $APICURIO_VERSION (Maven output above)"
        say "mvn failed (attempt $attempt), retrying in 5 s"
        sleep 5
    done
    mkdir -p "$tmp/app"
    tar xzf "$tmp/dist/apicurio-registry-app-$APICURIO_VERSION-all.tar.gz" -C "$tmp/app" ||
        die "cannot unpack $tmp/dist/apicurio-registry-app-$APICURIO_VERSION-all.tar.gz"
    [[ -f $tmp/app/apicurio-registry-app-$APICURIO_VERSION-runner.jar ]] ||
        die "the unpacked archive has no apicurio-registry-app-$APICURIO_VERSION-runner.jar"
    rm -rf "$APP_DIR"
    mv "$tmp/app" "$APP_DIR"
    rm -rf "$tmp"
    touch "$MARKER"
    say "fetched Apicurio Registry $APICURIO_VERSION in $(elapsed "$t0")"
}

# Prints the pid of the registry of this run dir when it is alive.
running_pid() { live_pid "$PID_FILE" "apicurio-registry-app"; }

url_of() { echo "http://127.0.0.1:$1$CCOMPAT"; }

answers() { # answers PORT: the Confluent API answers
    curl -sf -m 5 -o /dev/null "$(url_of "$1")/subjects"
}

set_backward() {
    local port=$1 out
    out=$(curl -sf -m 10 -X PUT -H 'Content-Type: application/vnd.schemaregistry.v1+json' \
        -d '{"compatibility":"BACKWARD"}' "$(url_of "$port")/config") ||
        die "could not set the global compatibility to BACKWARD at $(url_of "$port")/config"
    [[ $out == *BACKWARD* ]] || die "setting the global compatibility answered: $out"
}

show_log() {
    echo "---- last lines of $LOG_FILE ----" >&2
    tail -n 30 "$LOG_FILE" >&2 2>/dev/null || true
}

do_start() {
    local t0 pid port deadline
    t0=$(now_ms)
    lock_run_dir
    if pid=$(running_pid); then
        port=$(cat "$PORT_FILE" 2>/dev/null || echo "$SCHEMA_REGISTRY_PORT")
        if answers "$port"; then
            say "Apicurio Registry $APICURIO_VERSION already running: pid $pid, run dir $RUN_DIR"
            echo "schema registry listening on $(url_of "$port")"
            return 0
        fi
        say "registry pid $pid is running but does not answer on port $port yet: waiting for it"
    else
        rm -f "$PID_FILE"
        port=$SCHEMA_REGISTRY_PORT
        if port_open "$port"; then
            die "port $port on 127.0.0.1 is already in use by another process; stop it or choose another port (SCHEMA_REGISTRY_PORT=...)"
        fi
        need_java "Apicurio Registry $APICURIO_VERSION"
        need_curl
        resolve
        say "starting Apicurio Registry $APICURIO_VERSION on 127.0.0.1:$port (in-memory storage; 6-60 s)"
        : >"$LOG_FILE"
        # shellcheck disable=SC2086 # SCHEMA_REGISTRY_HEAP_OPTS holds several JVM flags on purpose.
        (cd "$APP_DIR" && exec nohup java $SCHEMA_REGISTRY_HEAP_OPTS -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
            -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true \
            -Dquarkus.http.host=127.0.0.1 -Dquarkus.http.port="$port" \
            -Dquarkus.management.enabled=false -Dquarkus.log.console.color=false \
            -Dapicurio.storage.kind=sql -Dapicurio.storage.sql.kind=h2 \
            -jar "$RUNNER" >>"$LOG_FILE" 2>&1 </dev/null 9>&-) &
        pid=$!
        echo "$pid" >"$PID_FILE"
        echo "$port" >"$PORT_FILE"
    fi
    deadline=$(($(date +%s) + SCHEMA_REGISTRY_START_TIMEOUT))
    until answers "$port"; do
        if ! kill -0 "$pid" 2>/dev/null; then
            show_log
            rm -f "$PID_FILE"
            die "the registry exited during start-up (log above, full log in $LOG_FILE)"
        fi
        if [[ $(date +%s) -ge $deadline ]]; then
            show_log
            kill -KILL "$pid" 2>/dev/null || true
            rm -f "$PID_FILE"
            die "the registry did not answer on 127.0.0.1:$port within $SCHEMA_REGISTRY_START_TIMEOUT s (killed it; log above)"
        fi
        sleep 0.5
    done
    set_backward "$port"
    say "Apicurio Registry $APICURIO_VERSION up: pid $pid, global compatibility BACKWARD, log $LOG_FILE, started in $(elapsed "$t0")"
    echo "schema registry listening on $(url_of "$port")"
}

do_stop() { stop_service "schema registry" registry "$RUN_DIR" "$SCHEMA_REGISTRY_STOP_TIMEOUT"; }

do_status() {
    local pid port
    if ! pid=$(running_pid); then
        say "schema registry not running (run dir $RUN_DIR)"
        return 3
    fi
    port=$(cat "$PORT_FILE" 2>/dev/null || echo "$SCHEMA_REGISTRY_PORT")
    if answers "$port"; then
        say "Apicurio Registry $APICURIO_VERSION running: pid $pid, run dir $RUN_DIR"
        echo "schema registry listening on $(url_of "$port")"
        return 0
    fi
    say "registry process $pid is running but does not answer on 127.0.0.1:$port (log: $LOG_FILE)"
    return 1
}

# A virtualenv with Confluent's Python client, for the cross-check tests.
do_python() {
    local py=$PY_ENV/bin/python
    if [[ -x $py ]] && "$py" -c 'import confluent_kafka.schema_registry.avro, confluent_kafka.schema_registry.json_schema, confluent_kafka.schema_registry.protobuf, fastavro, jsonschema' 2>/dev/null; then
        echo "python at $py"
        return 0
    fi
    command -v python3 >/dev/null 2>&1 || die "python3 not found on PATH (Debian: apt-get install python3 python3-venv)"
    local t0
    t0=$(now_ms)
    mkdir -p "$STREAMS_CACHE"
    say "making $PY_ENV with $PY_REQUIREMENTS ..."
    python3 -m venv "$PY_ENV" >&2 || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
    "$py" -m pip install -q "$PY_REQUIREMENTS" >&2 || die "pip install $PY_REQUIREMENTS failed"
    "$py" -c 'import confluent_kafka.schema_registry.avro, confluent_kafka.schema_registry.json_schema, confluent_kafka.schema_registry.protobuf' ||
        die "the Python environment $PY_ENV lacks confluent_kafka's schema registry serdes"
    say "Python environment ready in $(elapsed "$t0")"
    echo "python at $py"
}

case "${1:-}" in
start) do_start ;;
stop) do_stop ;;
status) do_status ;;
resolve)
    resolve
    echo "apicurio registry in $APP_DIR"
    ;;
python) do_python ;;
*)
    echo "usage: $0 start|stop|status|resolve|python" >&2
    exit 2
    ;;
esac
