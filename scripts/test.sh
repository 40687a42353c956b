#!/usr/bin/env bash
# The project's test command: system deps, a fresh local Kafka broker, then every test.
#
#   bash scripts/test.sh [extra cargo test args...]
#
# Starts Kafka with scripts/kafka.sh (stopped again on exit, whatever happens), exports
#   STREAMS_TEST_BOOTSTRAP=127.0.0.1:$KAFKA_PORT  where the Kafka tests connect
#   STREAMS_TEST_SECURE_BOOTSTRAP, STREAMS_TEST_SECURE_CA
#                                                 the broker's SASL_SSL listener and the CA
#                                                 certificate it is signed with (secure mode)
#   STREAMS_REQUIRE_KAFKA=1                       a Kafka test without a broker fails, never skips
#   STREAMS_REQUIRE_JAVA=1                        a test comparing with Kafka Streams (Java)
#                                                 fails without java or mvn, never skips
# and starts a schema registry with scripts/schema-registry.sh (stopped again after the main
# run when started here), exporting
#   STREAMS_TEST_SCHEMA_REGISTRY, STREAMS_REQUIRE_SCHEMA_REGISTRY=1
#                                                 its Confluent-compatible URL; a registry test
#                                                 without it fails, never skips
# and runs `cargo test --workspace --lib --bins --tests --examples --no-fail-fast` (every
# target but the criterion benches, whose harness takes no test flags), then
# `cargo test --workspace --doc`. Then the short fault suite: a fresh three-broker cluster
# (scripts/kafka-cluster.sh, stopped again on exit), and with
#   STREAMS_TEST_CLUSTER_BOOTSTRAP, STREAMS_REQUIRE_CLUSTER=1, CLUSTER_TOPOLOGY=count (unless set)
# `cargo test -p streams-examples --test cluster_faults --test cluster_permanent_errors` one
# test at a time (the tests named
# `three_brokers_*` but not `three_brokers_long_*`, skipped in the first run so the
# cluster's JVMs never compete with it for the cores). STREAMS_SKIP_CLUSTER=1 leaves the fault suite out.
# Exits with the first failure's status. See docs/kafka-for-tests.md.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/streams-rs/target}
export KAFKA_PORT=${KAFKA_PORT:-9092}
# Kafka tests share one broker: keep parallelism moderate.
TEST_THREADS=${STREAMS_TEST_THREADS:-4}

bash scripts/install-deps.sh

kafka_started=0
cluster_started=0
registry_started=0
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
    if [[ $registry_started == 1 ]]; then
        bash scripts/schema-registry.sh stop || echo "test.sh: warning: stopping the schema registry failed" >&2
    fi
    if [[ $cluster_started == 1 ]]; then
        bash scripts/kafka-cluster.sh stop || echo "test.sh: warning: stopping the three-broker cluster failed" >&2
    fi
    if [[ $kafka_started == 1 ]]; then
        bash scripts/kafka.sh stop || echo "test.sh: warning: stopping Kafka failed" >&2
    fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# A broker of the same run dir that is already up and answering (someone's `kafka.sh start`)
# is reused and left running; otherwise a fresh one is started and stopped on exit.
kafka_status=0
kafka_out=$(bash scripts/kafka.sh status 2>&1) || kafka_status=$?
if [[ $kafka_status -eq 0 && $kafka_out =~ listening\ on\ 127\.0\.0\.1:([0-9]+) ]]; then
    KAFKA_PORT=${BASH_REMATCH[1]}
    echo "test.sh: reusing the Kafka broker already running on 127.0.0.1:$KAFKA_PORT (not stopped on exit)"
    if [[ ! $kafka_out =~ kafka\ secure\ listener\ on ]]; then
        # Started by an older kafka.sh: restarted (keeping its data) with the secure listener.
        echo "test.sh: it has no secure listener: restarting it with the current settings"
        kafka_out=$(bash scripts/kafka.sh restart | tee >(cat >&2))
    fi
else
    if [[ $kafka_status -eq 1 ]]; then
        echo "test.sh: a broker is running but not answering: restarting it fresh" >&2
        bash scripts/kafka.sh stop
    fi
    kafka_started=1
    kafka_out=$(bash scripts/kafka.sh start | tee >(cat >&2))
fi
# `kafka secure listener on ADDRESS ca FILE` (kafka.sh start, restart, status).
if [[ $kafka_out =~ kafka\ secure\ listener\ on\ ([^ ]+)\ ca\ ([^$'\n']+) ]]; then
    export STREAMS_TEST_SECURE_BOOTSTRAP=${BASH_REMATCH[1]}
    export STREAMS_TEST_SECURE_CA=${BASH_REMATCH[2]}
else
    echo "test.sh: warning: kafka.sh reported no secure listener; the secure-mode tests will fail" >&2
fi

export STREAMS_TEST_BOOTSTRAP=127.0.0.1:$KAFKA_PORT
export STREAMS_REQUIRE_KAFKA=1
export STREAMS_REQUIRE_JAVA=1

# The schema registry of streams-serde-registry's tests: one already running and answering
# is reused (and left running); otherwise one is started here and stopped after the main run.
registry_status=0
registry_out=$(bash scripts/schema-registry.sh status 2>/dev/null) || registry_status=$?
if [[ $registry_status -ne 0 ]]; then
    if [[ $registry_status -eq 1 ]]; then
        bash scripts/schema-registry.sh stop
    fi
    registry_started=1
    registry_out=$(bash scripts/schema-registry.sh start | tee >(cat >&2))
fi
if [[ $registry_out =~ schema\ registry\ listening\ on\ ([^$'\n']+) ]]; then
    export STREAMS_TEST_SCHEMA_REGISTRY=${BASH_REMATCH[1]}
else
    echo "test.sh: warning: schema-registry.sh reported no URL; the registry tests will fail" >&2
fi
export STREAMS_REQUIRE_SCHEMA_REGISTRY=1

# Both runs happen even when the first fails; the exit status is the first failure's.
status=0
cargo test --workspace --lib --bins --tests --examples --no-fail-fast "$@" -- --test-threads="$TEST_THREADS" \
    --skip three_brokers_ || status=$?
doc_status=0
cargo test --workspace --doc "$@" -- --test-threads="$TEST_THREADS" || doc_status=$?
# The fault suite needs the cores: the registry's JVM goes first.
if [[ $registry_started == 1 ]]; then
    bash scripts/schema-registry.sh stop || echo "test.sh: warning: stopping the schema registry failed" >&2
    registry_started=0
fi

# The short fault suite on a fresh three-broker cluster (the full matrix: docs/kafka-for-tests.md).
cluster_status=0
if [[ ${STREAMS_SKIP_CLUSTER:-0} != 1 ]]; then
    cluster_started=1
    cluster_out=$(bash scripts/kafka-cluster.sh start | tee >(cat >&2)) || cluster_status=$?
    if [[ $cluster_status -eq 0 && $cluster_out =~ kafka\ cluster\ listening\ on\ ([^$'\n']+) ]]; then
        # The count topology: the smoke topology doubles the suite's time on two cores, and
        # its load stretches recoveries towards the suite's 120 s limit; the full run
        # (docs/kafka-for-tests.md) keeps the smoke topology.
        STREAMS_TEST_CLUSTER_BOOTSTRAP=${BASH_REMATCH[1]} STREAMS_REQUIRE_CLUSTER=1 \
            CLUSTER_TOPOLOGY=${CLUSTER_TOPOLOGY:-count} \
            cargo test -p streams-examples --test cluster_faults --test cluster_permanent_errors "$@" -- \
            --test-threads=1 three_brokers_ \
            --skip three_brokers_long_ ||
            cluster_status=$?
    else
        echo "test.sh: the three-broker cluster did not start" >&2
        cluster_status=1
    fi
fi

if [[ $status -ne 0 ]]; then
    echo "test.sh: cargo test --workspace (lib, bins, tests, examples) failed (exit $status)" >&2
elif [[ $doc_status -ne 0 ]]; then
    echo "test.sh: cargo test --workspace --doc failed (exit $doc_status)" >&2
    status=$doc_status
elif [[ $cluster_status -ne 0 ]]; then
    echo "test.sh: the fault suite on the three-broker cluster failed (exit $cluster_status)" >&2
    status=$cluster_status
fi
exit "$status"
