#!/usr/bin/env bash
# Nexmark side by side: this framework's DSL vs Java Kafka Streams' DSL, same broker, same
# events, every query's results compared.
#
#   bash benches/nexmark/run.sh
#
# The side-by-side harness (benches/side-by-side/run.sh, which documents the placement,
# RUNS, PIN, OUT_DIR, ...) with VALUE_FORMAT=nexmark: it preloads RECORDS Nexmark events
# (default 10000000) into topic nexmark-events (PARTITIONS partitions, default 4; NEXMARK_RATE
# events per second of event time, default 10000) and runs the cells ours:qN and java:qN
# (CELLS to choose) at-least-once. table.md ends with the result equality of every query:
# each run's output reduced to its multiset of records (q0-q2) or the last value per key
# (the others), compared with the first run's. See docs/benchmarks.md, "Nexmark".
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export VALUE_FORMAT=nexmark
export RECORDS=${RECORDS:-10000000}
export OUT_DIR=${OUT_DIR:-$ROOT/benches/results/$(date -u +%Y-%m-%d)-nexmark}
exec bash "$ROOT/benches/side-by-side/run.sh" "$@"
