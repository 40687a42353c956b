#!/usr/bin/env bash
# The long differential run: every DSL case of streams-dsl/tests/differential_java.rs on
# `seeds` random inputs each (default 200), against Kafka Streams 4.4.0's TopologyTestDriver.
#
#   bash scripts/diff-random.sh [seeds] [extra cargo test args...]
#
# Needs java and mvn (the first run builds the Java program with Maven). No broker. The
# suite (scripts/test.sh) runs 5 seeds per case; a failure prints the seed, the input and
# both outputs, and the command that reruns it. See docs/dsl.md, "Compared with Kafka Streams".
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/streams-rs/target}
export STREAMS_DIFF_SEEDS=${1:-200}
[[ $# -gt 0 ]] && shift
export STREAMS_REQUIRE_JAVA=1
echo "diff-random.sh: every differential case on $STREAMS_DIFF_SEEDS random inputs"
cargo test -p streams-dsl --test differential_java "$@"
