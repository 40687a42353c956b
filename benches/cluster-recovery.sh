#!/usr/bin/env bash
# Recovery time after broker faults, on the three-broker cluster of scripts/kafka-cluster.sh.
#
#   bash benches/cluster-recovery.sh [RUNS] [TEST...]
#
# Runs each fault scenario of examples/tests/cluster_faults/ RUNS times (3 by default; the
# scenarios: every `three_brokers_*` test unless TEST names some) and prints, per scenario,
# the time from "broker back" (`start-node`, `restart` or `resume` returned) to the group's
# next committed offset: on the first input partition and on every one, p50 and max over
# all the faults of all the runs, with the runs that failed. The cluster is started when it
# is not running (and left running). The scenarios' environment (CLUSTER_FAULT_ROUNDS,
# CLUSTER_PAUSE_S, CLUSTER_ALL_DOWN_S, CLUSTER_GROUP_PROTOCOL) passes through. Every
# run's output goes to $OUT (default: <target>/tmp/cluster-recovery/<time>/); the table is
# printed and written to $OUT/summary.md.
#
# A timing, not a check: the scenarios' own assertions (nothing lost, nothing duplicated,
# no thread dead) still fail a run, which the table counts.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
runs=${1:-3}
[[ $runs =~ ^[1-9][0-9]*$ ]] || {
    echo "cluster-recovery.sh: RUNS must be a positive number, not '$runs'" >&2
    exit 2
}
shift || true
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/streams-rs/target}
target=$CARGO_TARGET_DIR
out=${OUT:-$target/tmp/cluster-recovery/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"

bootstrap=$(bash scripts/kafka-cluster.sh ensure | tail -n1 | sed 's/^kafka cluster listening on //')
export STREAMS_TEST_CLUSTER_BOOTSTRAP=$bootstrap STREAMS_REQUIRE_CLUSTER=1

cargo test -q -p streams-examples --test cluster_faults --no-run 2>"$out/build.log" ||
    { cat "$out/build.log" >&2; exit 1; }
if [[ $# -gt 0 ]]; then
    tests=("$@")
else
    mapfile -t tests < <(cargo test -q -p streams-examples --test cluster_faults -- --list 2>/dev/null |
        sed -n 's/: test$//p' | grep '^three_brokers_')
fi

summary=$out/summary.md
{
    echo "| scenario | runs (failed) | faults | first partition p50 / max (s) | every partition p50 / max (s) |"
    echo "|---|---|---|---|---|"
} >"$summary"
load=$(cut -d' ' -f1-3 /proc/loadavg)
for t in "${tests[@]}"; do
    failed=0
    : >"$out/$t.times"
    for r in $(seq 1 "$runs"); do
        log=$out/$t.$r.log
        echo "cluster-recovery.sh: $t run $r of $runs (log $log)" >&2
        if ! cargo test -q -p streams-examples --test cluster_faults -- --exact "$t" --nocapture \
            --test-threads=1 >"$log" 2>&1; then
            failed=$((failed + 1))
            echo "cluster-recovery.sh: $t run $r FAILED: $(grep -m1 -A1 'panicked at' "$log" | tail -n1)" >&2
        fi
        # "... committed offsets moved again F s after the broker was back, on every input partition after A s"
        sed -n 's/.*moved again \([0-9.]*\) s after the broker was back, on every input partition after \([0-9.]*\) s.*/\1 \2/p' \
            "$log" >>"$out/$t.times"
    done
    stats() { # column -> "p50 / max"
        cut -d' ' -f"$1" "$out/$t.times" | sort -g | awk '{ v[NR] = $1 } END {
            if (NR == 0) { print "-"; exit }
            printf "%.1f / %.1f", v[int((NR + 1) / 2)], v[NR] }'
    }
    printf '| `%s` | %d (%d) | %d | %s | %s |\n' "$t" "$runs" "$failed" "$(wc -l <"$out/$t.times")" \
        "$(stats 1)" "$(stats 2)" >>"$summary"
done
echo >>"$summary"
echo "Load average before the runs: $load; after: $(cut -d' ' -f1-3 /proc/loadavg)." >>"$summary"
cat "$summary"
