#!/usr/bin/env bash
# 100 RocksDB stores through the runtime, beside Kafka Streams: `store_memory_kafka` and its
# Java twin `StoreMemoryApp`, alternated on a broker of its own (port 39192, data in
# /tmp/kafka-store-memory, stopped at the end), each run with a fresh application id and
# state directory. Prints each run's line (time, peak RSS, load) and the CPU seconds of
# the process (/usr/bin/time), the SST files its stores ended with and the memtable
# flushes by reason (from the stores' RocksDB LOG files).
#
#   RECORDS   records preloaded and processed per run (default 3000000)
#   WORKLOAD  writes (default) or rmw (read-modify-write)
#   RUNS      runs per implementation (default 3)
#   PIN       1 pins the broker to CPU 0 and the application to CPU 1 (default 1)
#   IMPLS     the order within a round (default "ours java")
#   JAVA_OPTS JVM options of the Java app (default -Xmx256m)
#   STORE_MEMORY_PROPS  extra properties of ours (see store_memory_kafka.rs)
#   OUT_DIR   where each run's output goes (default benches/results/store-memory-<date>)
#   SKIP_BUILD=1 uses the binaries already built
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
RECORDS=${RECORDS:-3000000}
WORKLOAD=${WORKLOAD:-writes}
RUNS=${RUNS:-3}
PIN=${PIN:-1}
IMPLS=${IMPLS:-ours java}
JAVA_OPTS=${JAVA_OPTS:--Xmx256m}
OUT_DIR=${OUT_DIR:-benches/results/store-memory-$(date +%F)}
# A broker of its own, as benches/side-by-side/run.sh has: a developer's broker on the
# default port and run dir is neither measured nor stopped.
export KAFKA_PORT=39192
export KAFKA_RUN_DIR=/tmp/kafka-store-memory
BOOTSTRAP=127.0.0.1:$KAFKA_PORT
SCRIPT_NAME=store-memory
# shellcheck source=scripts/lib/common.sh
source "$ROOT/scripts/lib/common.sh"

if [[ $PIN == 1 ]]; then
    BROKER_ON=(taskset -c 0)
    APP_ON=(taskset -c 1)
else
    BROKER_ON=()
    APP_ON=()
fi
if [[ ${SKIP_BUILD:-0} != 1 ]]; then
    bash scripts/install-deps.sh
    cargo build --release -p streams-benches --bin store_memory_kafka
fi
BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/store_memory_kafka
(cd benches/java && mvn -q -B -Dstyle.color=never compile dependency:copy-dependencies)
JAVA_CP="$ROOT/benches/java/target/classes:$ROOT/benches/java/target/deps/*"

mkdir -p "$OUT_DIR"
"${BROKER_ON[@]}" bash scripts/kafka.sh start
trap 'bash scripts/kafka.sh stop' EXIT
if [[ $PIN == 1 ]]; then
    taskset -a -pc 0 "$(cat "$KAFKA_RUN_DIR/kafka.pid")" >/dev/null
fi

TOPIC=store-memory-$WORKLOAD-$RECORDS-$$
"$BIN" preload "$BOOTSTRAP" "$TOPIC" "$RECORDS" "$WORKLOAD" | tee "$OUT_DIR/preload-$WORKLOAD.txt"
STATE=$(mktemp -d /tmp/store-memory-XXXX)
for round in $(seq 1 "$RUNS"); do
    for impl in $IMPLS; do
        app=store-memory-$impl-$round-$$
        out=$OUT_DIR/$impl-$WORKLOAD-$round.txt
        say "round $round: $impl (load $(cut -d' ' -f1-3 /proc/loadavg))"
        case $impl in
            ours) cmd=("$BIN" run "$BOOTSTRAP" "$app" "$TOPIC" "$STATE/$app" "$RECORDS" "$WORKLOAD") ;;
            java) cmd=(java $JAVA_OPTS -cp "$JAVA_CP" dev.streams.bench.StoreMemoryApp
                "$BOOTSTRAP" "$app" "$TOPIC" "$STATE/$app" "$RECORDS" "$WORKLOAD") ;;
            *) die "IMPLS names ours and java, not '$impl'" ;;
        esac
        "${APP_ON[@]}" /usr/bin/time -f "cpu %U user %S sys, max RSS %M KiB" "${cmd[@]}" >"$out" 2>&1 ||
            { cat "$out"; exit 1; }
        grep -E "records in|^cpu" "$out"
        echo "SST files: $(find "$STATE/$app" -name '*.sst' | wc -l)" | tee -a "$out"
        # Memtable flushes by reason, from the RocksDB LOG of each store.
        find "$STATE/$app" -name LOG -exec grep -ho '"flush_reason": "[^"]*"' {} + 2>/dev/null |
            sort | uniq -c | sed 's/^ */flushes: /' | tee -a "$out" || true
        rm -rf "${STATE:?}/$app"
    done
done
rm -rf "$STATE"
