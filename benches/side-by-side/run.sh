#!/usr/bin/env bash
# Side-by-side benchmark: this framework vs Java Kafka Streams 4.1.1 vs a raw rdkafka loop.
#
#   bash benches/side-by-side/run.sh
#
# Starts its own broker on 127.0.0.1:39092 (run dir /tmp/kafka-bench, so a test broker on
# 9092 is not disturbed), builds the release binaries and the Java app, preloads one input
# topic, runs every cell RUNS times (interleaved), prints the table of medians and stops the
# broker. Every run's output is checked against its input after the run; a run whose check
# fails is marked in runs.tsv and left out of the medians. Results go to
# benches/results/<UTC date>/ (machine.txt, runs.tsv, table.md and one log per application
# run). See docs/benchmarks.md.
#
# Environment (all optional):
#   RECORDS      input records (default 2000000)
#   KEYS         distinct keys (default 10000)
#   VALUE_BYTES  value size (default 100)
#   PARTITIONS   input partitions (default 4)
#   RUNS         runs per cell (default 3)
#   RESTORE_RECORDS, RESTORE_KEYS  size of the input of the restore cells, preloaded only when
#                a cell is a restore (default 1000000 records over 1000000 possible keys)
#   CELLS        comma-separated impl:workload:guarantee list (default: every cell below);
#                the workloads agg100k, agg1m, agg10m and agg50m (not in the default) are the
#                count over a store first filled with that many keys, timed over AGG_RECORDS
#                records (default 3000000) on random keys of them; the driver fills their
#                inputs (bench-input-aggN) itself
#   BENCH_JAVA_OPTS  JVM options of the Java app (default -Xmx1g)
#   OUT_DIR      where results go (default benches/results/<UTC date>)
#   KEEP_BROKER  1 leaves the broker running afterwards
#   SKIP_BUILD   1 uses the binaries already built (e.g. while another build holds cargo's lock)
#   BENCH_OURS_PROPS  extra properties of our application, key=value,key=value (experiments)
#   BENCH_OURS_ROCKSDB  store options of our application (experiments): memtable-bloom
#                (a whole-key bloom filter on the memtables), filters-for-hits (no filters on
#                the last level), comma-separated
#   PIN          1 pins the broker to CPU 0 and the driver with the applications to CPU 1
#                (taskset); default: shared, every process on every core
#   VALUE_FORMAT avro: the Avro comparison instead (cells ours:avro and java:avro by default):
#                every input value one ~110-byte record of a 10-field schema in the Confluent
#                wire format, decoded and encoded again by both applications through a schema
#                registry that scripts/schema-registry.sh starts (input topic bench-input-avro);
#                nexmark: the Nexmark queries instead (benches/nexmark/run.sh sets this): RECORDS
#                Nexmark events in topic nexmark-events, cells ours:qN and java:qN
#   NEXMARK_RATE events per second of event time of the Nexmark input (default 10000)
set -euo pipefail

say() { echo "side-by-side: $*"; }
die() {
    echo "side-by-side: error: $*" >&2
    exit 1
}


ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
RECORDS=${RECORDS:-2000000}
KEYS=${KEYS:-10000}
VALUE_BYTES=${VALUE_BYTES:-100}
PARTITIONS=${PARTITIONS:-4}
RUNS=${RUNS:-3}
VALUE_FORMAT=${VALUE_FORMAT:-string}
# The join workloads' applications read KEYS and PARTITIONS to fill their stores; the
# aggregation workloads' inputs carry values of VALUE_BYTES.
export KEYS PARTITIONS VALUE_BYTES
ALOS=at_least_once
EOS=exactly_once_v2
if [[ $VALUE_FORMAT == avro ]]; then
    CELLS=${CELLS:-ours:avro:$ALOS,java:avro:$ALOS}
fi
if [[ $VALUE_FORMAT == nexmark ]]; then
    cells=()
    for q in q0 q1 q2 q3 q4 q5 q6 q7 q8 q11 q12; do cells+=("ours:$q:$ALOS" "java:$q:$ALOS"); done
    CELLS=${CELLS:-$(IFS=,; echo "${cells[*]}")}
fi
CELLS=${CELLS:-ours:map:$ALOS,java:map:$ALOS,raw:map:$ALOS,ours:map:$EOS,java:map:$EOS,raw:map:$EOS,ours:filtermap:$ALOS,java:filtermap:$ALOS,raw:filtermap:$ALOS,ours:count:$ALOS,java:count:$ALOS,ours:count:$EOS,java:count:$EOS,ours:restore:$ALOS,java:restore:$ALOS,ours:join10:$ALOS,java:join10:$ALOS,ours:join100:$ALOS,java:join100:$ALOS}
OUT_DIR=${OUT_DIR:-$ROOT/benches/results/$(date -u +%Y-%m-%d)}
export KAFKA_PORT=39092
export KAFKA_RUN_DIR=/tmp/kafka-bench
BOOTSTRAP=127.0.0.1:$KAFKA_PORT
INPUT=bench-input
[[ $VALUE_FORMAT == avro ]] && INPUT=bench-input-avro
[[ $VALUE_FORMAT == nexmark ]] && INPUT=nexmark-events
[[ $VALUE_FORMAT =~ ^(string|avro|nexmark)$ ]] || die "VALUE_FORMAT is string (the default), avro or nexmark, not '$VALUE_FORMAT'"
# The driver reads PIN to name the mode in table.md.
export PIN=${PIN:-0}

# Placement: BROKER_ON and APP_ON prefix the commands that start the broker and the
# driver (whose children, the applications, inherit its CPU).
if [[ $PIN == 1 ]]; then
    command -v taskset >/dev/null 2>&1 ||
        die "PIN=1 needs taskset (util-linux; Debian: apt-get install util-linux)"
    taskset -c 0 true 2>/dev/null && taskset -c 1 true 2>/dev/null ||
        die "PIN=1 needs CPUs 0 and 1, and this process may not run on both ($(taskset -pc $$ 2>&1))"
    BROKER_ON=(taskset -c 0)
    APP_ON=(taskset -c 1)
    MODE="pinned: broker on CPU 0, driver and applications on CPU 1 (taskset)"
elif [[ $PIN == 0 ]]; then
    BROKER_ON=()
    APP_ON=()
    MODE="shared: broker and applications on every core"
else
    die "PIN is 0 (shared, the default) or 1 (pinned), not '$PIN'"
fi

if [[ ${SKIP_BUILD:-0} != 1 ]]; then
    # A fresh machine lacks the system packages the build needs (libclang for RocksDB's
    # bindings, OpenSSL for librdkafka); the script installs what is missing and is quick
    # when everything is there.
    bash scripts/install-deps.sh
    say "building (release)"
    cargo build --workspace --release --bins
fi
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
BIN=$TARGET_DIR/release/side_by_side
(cd benches/java && mvn -q -B -Dstyle.color=never compile dependency:copy-dependencies)
JAVA_CP="$ROOT/benches/java/target/classes:$ROOT/benches/java/target/deps/*"

mkdir -p "$OUT_DIR"
"${BROKER_ON[@]}" bash scripts/kafka.sh start
if [[ ${KEEP_BROKER:-0} != 1 ]]; then
    trap 'bash scripts/kafka.sh stop' EXIT
fi
# scripts/kafka.sh keeps the broker's pid in its run dir; the driver reads the broker's CPU
# time from /proc/<pid>/stat around every timed window.
BENCH_BROKER_PID=$(cat "$KAFKA_RUN_DIR/kafka.pid" 2>/dev/null || true)
[[ $BENCH_BROKER_PID =~ ^[0-9]+$ ]] && kill -0 "$BENCH_BROKER_PID" 2>/dev/null ||
    die "no running broker pid in $KAFKA_RUN_DIR/kafka.pid"
export BENCH_BROKER_PID
# A broker left running by an earlier KEEP_BROKER=1 run was not started here: set the
# placement of all its threads (new threads inherit it).
if [[ $PIN == 1 ]]; then
    taskset -a -pc 0 "$BENCH_BROKER_PID" >/dev/null
elif command -v taskset >/dev/null 2>&1; then
    taskset -a -pc "0-$(($(nproc --all) - 1))" "$BENCH_BROKER_PID" >/dev/null 2>&1 || true
fi

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "nproc: $(nproc)"
    echo "cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)"
    echo "memory: $(free -h | awk '/^Mem:/ {print $2 " total, " $7 " available"}')"
    echo "kernel: $(uname -sr)"
    echo "java: $(java -version 2>&1 | head -n1)"
    echo "rustc: $(rustc --version)"
    echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "mode: $MODE"
    echo "broker pid: $BENCH_BROKER_PID, CPUs $(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/"$BENCH_BROKER_PID"/status)"
    echo "records: $RECORDS, keys: $KEYS, value bytes: $VALUE_BYTES, value format: $VALUE_FORMAT, partitions: $PARTITIONS, runs: $RUNS"
} >"$OUT_DIR/machine.txt"

if [[ $VALUE_FORMAT == avro ]]; then
    # The registry runs beside the broker, on the broker's CPU when pinned.
    SCHEMA_REGISTRY_URL=$("${BROKER_ON[@]}" bash scripts/schema-registry.sh start | sed -n 's/^schema registry listening on //p')
    [[ -n $SCHEMA_REGISTRY_URL ]] || die "scripts/schema-registry.sh start reported no URL"
    export SCHEMA_REGISTRY_URL
    if [[ ${KEEP_BROKER:-0} != 1 ]]; then
        trap 'bash scripts/schema-registry.sh stop; bash scripts/kafka.sh stop' EXIT
    fi
    "${APP_ON[@]}" "$BIN" preload-avro "$BOOTSTRAP" "$INPUT" "$RECORDS" "$PARTITIONS" "$KEYS" "$SCHEMA_REGISTRY_URL" |
        tee "$OUT_DIR/preload.txt"
elif [[ $VALUE_FORMAT == nexmark ]]; then
    "${APP_ON[@]}" "$BIN" preload-nexmark "$BOOTSTRAP" "$INPUT" "$RECORDS" "$PARTITIONS" "${NEXMARK_RATE:-10000}" |
        tee "$OUT_DIR/preload.txt"
else
    "${APP_ON[@]}" "$BIN" preload "$BOOTSTRAP" "$INPUT" "$RECORDS" "$PARTITIONS" "$KEYS" "$VALUE_BYTES" | tee "$OUT_DIR/preload.txt"
fi
if [[ $CELLS == *:restore:* ]]; then
    "${APP_ON[@]}" "$BIN" preload "$BOOTSTRAP" "$INPUT-restore" "${RESTORE_RECORDS:-1000000}" "$PARTITIONS" \
        "${RESTORE_KEYS:-1000000}" "$VALUE_BYTES" | tee -a "$OUT_DIR/preload.txt"
fi
"${APP_ON[@]}" "$BIN" run "$BOOTSTRAP" "$INPUT" "$OUT_DIR" "$RUNS" "$JAVA_CP" "$CELLS"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT_DIR/machine.txt"
say "results in $OUT_DIR"
