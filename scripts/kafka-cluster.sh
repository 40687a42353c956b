#!/usr/bin/env bash
# Three-node Apache Kafka cluster on 127.0.0.1 for fault tests: KRaft, every node a combined
# broker + controller (node ids 1, 2, 3, static voters), PLAINTEXT only, internal topics with
# three replicas and min.insync.replicas=2. A sibling of scripts/kafka.sh: the same Kafka
# jars (resolved by `kafka.sh resolve`), log4j2 configuration and JVM flags.
#
#   bash scripts/kafka-cluster.sh start           fresh cluster: stops whatever of it runs, wipes the data of
#                                                 all three nodes, formats them, starts them in parallel and
#                                                 waits until describeCluster lists the 3 brokers and the group
#                                                 and transaction coordinators answer
#   bash scripts/kafka-cluster.sh stop            every node: SIGTERM, bounded wait, then SIGKILL; ok when stopped
#   bash scripts/kafka-cluster.sh status          one line per node (running / paused / stopped, pid, ports);
#                                                 exit 0 when all three run and answer (plus the bootstrap line),
#                                                 3 when none runs, 1 otherwise
#   bash scripts/kafka-cluster.sh ensure          all three running and answering: prints the bootstrap line;
#                                                 otherwise resumes paused nodes and starts stopped ones keeping
#                                                 their data (a new cluster when there is none yet)
#   bash scripts/kafka-cluster.sh kill N          SIGKILL node N and wait until it has exited
#   bash scripts/kafka-cluster.sh start-node N    start node N again keeping its data; waits until it is
#                                                 registered (it lists itself through its own listener) and back
#                                                 in the ISR of every partition it replicates that has a leader
#   bash scripts/kafka-cluster.sh restart N       clean stop of node N (SIGTERM: controlled shutdown), then start-node N
#   bash scripts/kafka-cluster.sh bounce N        kill N, then start-node N
#   bash scripts/kafka-cluster.sh pause N         SIGSTOP node N (a hung broker: its sockets stay open)
#   bash scripts/kafka-cluster.sh resume N        SIGCONT node N
#   bash scripts/kafka-cluster.sh pid N           prints node N's pid (exit 3 when it is not running)
#   bash scripts/kafka-cluster.sh leader TOPIC PARTITION   prints the node id of the partition's leader (or `none`)
#   bash scripts/kafka-cluster.sh controller      prints the node id of the active controller, the KRaft
#                                                 quorum leader (or `none`)
#   bash scripts/kafka-cluster.sh describe TOPIC  one line per partition: leader, replicas, ISR, ELR
#   bash scripts/kafka-cluster.sh create-topic TOPIC PARTITIONS [RF [KEY=VALUE...]]
#                                                 creates a topic (RF default 3) and waits until every
#                                                 partition has a leader
#   bash scripts/kafka-cluster.sh transactions PREFIX   one line `ID STATE` per transactional id that
#                                                 starts with PREFIX (ListTransactions)
#   bash scripts/kafka-cluster.sh delete-topic TOPIC   deletes a topic and waits until it is no longer listed
#
# start and ensure end with the line
#   kafka cluster listening on 127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3
# on stdout; status prints it when all three nodes run and answer. pid, leader, controller,
# describe and transactions print only their answer on stdout. Every other line starts with `kafka-cluster.sh:`; errors
# go to stderr as `kafka-cluster.sh: error: ...` with exit status 1 (2 for a usage error).
#
# Ports: node N listens for clients on CLUSTER_BASE_PORT + 10*N and for the KRaft quorum
# (CONTROLLER listener) on CLUSTER_BASE_PORT + 10*N + 1. With the default base 19090:
#   node 1  127.0.0.1:19100  controller 19101
#   node 2  127.0.0.1:19110  controller 19111
#   node 3  127.0.0.1:19120  controller 19121
# The base port of a cluster is recorded at `start` in $KAFKA_CLUSTER_DIR/cluster.conf; the
# other verbs use the recorded one (a node's identity), whatever CLUSTER_BASE_PORT says.
#
# Run dir $KAFKA_CLUSTER_DIR: cluster.conf (base port, cluster id), .lock, tool-logs/ and
# node-N/ with server.properties, kafka.pid, data/ and logs/ (server.log, console.out,
# format.out). Verbs that start, stop or signal nodes are serialized with flock on .lock;
# status, pid, leader, controller, describe and create-topic take no lock.
#
# See docs/kafka-for-tests.md, "Three-broker cluster (fault tests)".
#
# Environment (all optional):
#   CLUSTER_BASE_PORT            base of the port scheme above (default 19090)
#   STREAMS_CACHE                cache root (default ~/.cache/streams-rs)
#   KAFKA_CLUSTER_DIR            run dir (default $STREAMS_CACHE/kafka-cluster)
#   KAFKA_HEAP_OPTS              JVM heap of each node (default -Xms128m -Xmx384m)
#   KAFKA_CLUSTER_JIT_OPTS       JIT flags of each node (default -XX:TieredStopAtLevel=1: C1 only, which
#                                starts the three JVMs about a third faster on 2 cores; set it empty for C2)
#   KAFKA_CLUSTER_START_TIMEOUT  seconds to wait for the cluster / a node to answer (default 120)
#   KAFKA_CLUSTER_STOP_TIMEOUT   seconds to wait after SIGTERM before SIGKILL (default 30)
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# The release comes from kafka.sh's default (or KAFKA_VERSION, passed on to kafka.sh).
KAFKA_VERSION=${KAFKA_VERSION:-4.4.0}
export KAFKA_VERSION
STREAMS_CACHE=${STREAMS_CACHE:-$HOME/.cache/streams-rs}
export STREAMS_CACHE
KAFKA_CLUSTER_DIR=${KAFKA_CLUSTER_DIR:-$STREAMS_CACHE/kafka-cluster}
CLUSTER_BASE_PORT_ENV=${CLUSTER_BASE_PORT:-}
CLUSTER_BASE_PORT=${CLUSTER_BASE_PORT:-19090}
KAFKA_HEAP_OPTS=${KAFKA_HEAP_OPTS:--Xms128m -Xmx384m}
KAFKA_CLUSTER_JIT_OPTS=${KAFKA_CLUSTER_JIT_OPTS--XX:TieredStopAtLevel=1}
KAFKA_CLUSTER_START_TIMEOUT=${KAFKA_CLUSTER_START_TIMEOUT:-120}
KAFKA_CLUSTER_STOP_TIMEOUT=${KAFKA_CLUSTER_STOP_TIMEOUT:-30}
NODES=(1 2 3)
LOG4J_CONFIG=$SCRIPT_DIR/kafka/log4j2.properties
CONF=$KAFKA_CLUSTER_DIR/cluster.conf
TOOL_LOG_DIR=$KAFKA_CLUSTER_DIR/tool-logs
CLUSTER_ID=""
# Same JVM tuning as Kafka's bin/kafka-run-class.sh (and scripts/kafka.sh), minus JMX and GC logging.
JVM_OPTS=(-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35
    -XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 -XX:+ExitOnOutOfMemoryError
    -Djava.awt.headless=true)
# The helper JVMs (readiness probes, leader, controller, ...): cheap to start.
TOOL_JVM_OPTS=(-Xms32m -Xmx128m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Djava.awt.headless=true)

SCRIPT_NAME=kafka-cluster.sh
# shellcheck source=scripts/lib/common.sh
source "$SCRIPT_DIR/lib/common.sh"
usage() {
    local verbs="start|stop|status|ensure|kill N|start-node N|restart N|bounce N|pause N|resume N|pid N"
    verbs+="|leader TOPIC PARTITION|controller|describe TOPIC|create-topic TOPIC PARTITIONS [RF [KEY=VALUE...]]"
    verbs+="|transactions PREFIX|delete-topic TOPIC"
    echo "usage: $0 $verbs" >&2
    exit 2
}

for v in KAFKA_CLUSTER_START_TIMEOUT KAFKA_CLUSTER_STOP_TIMEOUT; do
    [[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a number of seconds, not '${!v}'"
done

# The base port recorded by `start` (a cluster keeps its ports); CLUSTER_BASE_PORT otherwise.
if [[ -f $CONF ]]; then
    conf_port=$(sed -n 's/^base.port=//p' "$CONF")
    CLUSTER_ID=$(sed -n 's/^cluster.id=//p' "$CONF")
    [[ -n $conf_port ]] && CLUSTER_BASE_PORT=$conf_port
    unset conf_port
fi
check_base_port() {
    [[ $CLUSTER_BASE_PORT =~ ^[0-9]+$ && $CLUSTER_BASE_PORT -ge 1024 && $CLUSTER_BASE_PORT -le 65500 ]] ||
        die "CLUSTER_BASE_PORT must be a port number between 1024 and 65500, not '$CLUSTER_BASE_PORT'"
}
check_base_port

client_port() { echo $((CLUSTER_BASE_PORT + 10 * $1)); }
controller_port() { echo $((CLUSTER_BASE_PORT + 10 * $1 + 1)); }
node_dir() { echo "$KAFKA_CLUSTER_DIR/node-$1"; }
props_file() { echo "$KAFKA_CLUSTER_DIR/node-$1/server.properties"; }
pid_file() { echo "$KAFKA_CLUSTER_DIR/node-$1/kafka.pid"; }
bootstrap_all() {
    local n out=""
    for n in "${NODES[@]}"; do out+="${out:+,}127.0.0.1:$(client_port "$n")"; done
    echo "$out"
}
listening_line() { echo "kafka cluster listening on $(bootstrap_all)"; }

check_node_arg() {
    [[ ${1:-} =~ ^[123]$ ]] || die "node must be 1, 2 or 3, not '${1:-}'"
}

# One change of the cluster at a time (two fault scripts would otherwise race).
lock_cluster() { lock_dir "$KAFKA_CLUSTER_DIR"; }

# The process state letter of PID (R, S, D, T = stopped, Z = zombie, ...), empty when gone.
proc_state() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
    stat=${stat##*) }
    echo "${stat%% *}"
}
# Whether PID still runs. The first thread of a killed JVM can be a zombie while its other
# threads still exit and hold its sockets: it is gone once only that zombie is left.
alive() {
    local s tasks
    s=$(proc_state "$1")
    [[ -n $s ]] || return 1
    if [[ $s == Z || $s == X ]]; then
        tasks=(/proc/"$1"/task/*)
        [[ ${#tasks[@]} -gt 1 ]]
        return
    fi
    return 0
}

# Prints the pid of node N when it runs (paused included), else returns 1.
node_pid() {
    local f pid
    f=$(pid_file "$1")
    [[ -f $f ]] || return 1
    pid=$(cat "$f" 2>/dev/null || true)
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    alive "$pid" || return 1
    # Make sure the pid was not reused by an unrelated process.
    is_node_jvm "$pid" "$1" || return 1
    echo "$pid"
}
# Whether process PID is node N's JVM (its command line runs kafka.Kafka on N's properties).
is_node_jvm() { # is_node_jvm PID N
    tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -qF "kafka.Kafka $(props_file "$2")"
}
# running | paused | stopped
node_state() {
    local pid s
    pid=$(node_pid "$1") || {
        echo stopped
        return 0
    }
    s=$(proc_state "$pid")
    if [[ $s == T || $s == t ]]; then echo paused; else echo running; fi
}
# The client listeners of the nodes that run and are not paused (all three when none is).
bootstrap_live() {
    local n out=""
    for n in "${NODES[@]}"; do
        [[ $(node_state "$n") == running ]] && out+="${out:+,}127.0.0.1:$(client_port "$n")"
    done
    echo "${out:-$(bootstrap_all)}"
}

# The controller listeners of the nodes that run and are not paused (all three when none is).
controllers_live() {
    local n out="" all=""
    for n in "${NODES[@]}"; do
        all+="${all:+,}127.0.0.1:$(controller_port "$n")"
        [[ $(node_state "$n") == running ]] && out+="${out:+,}127.0.0.1:$(controller_port "$n")"
    done
    echo "${out:-$all}"
}

need_jdk() {
    need_java "Kafka $KAFKA_VERSION"
    command -v javac >/dev/null 2>&1 ||
        die "javac not found on PATH: kafka-cluster.sh compiles a small Admin-client helper (it comes with the JDK: openjdk-17-jdk-headless)"
}

# The jars, resolved (once) by kafka.sh: its last line is `kafka jars in DIR`. Its progress
# lines (only when it resolves) go to stderr: stdout of pid, leader and controller is their answer.
KAFKA_LIBS=""
resolve_libs() {
    [[ -z $KAFKA_LIBS ]] || return 0
    local out last
    out=$(bash "$SCRIPT_DIR/kafka.sh" resolve 9>&-) || die "bash scripts/kafka.sh resolve failed (output above)"
    last=${out##*$'\n'}
    if [[ $out == *$'\n'* ]]; then
        printf '%s\n' "${out%$'\n'*}" >&2
    fi
    [[ $last == "kafka jars in "* ]] || die "unexpected last line of scripts/kafka.sh resolve: '$last'"
    KAFKA_LIBS=${last#kafka jars in }
    [[ -f $KAFKA_LIBS/kafka_2.13-$KAFKA_VERSION.jar ]] || die "$KAFKA_LIBS has no kafka_2.13-$KAFKA_VERSION.jar"
}

# The Admin-client helper: readiness probes of the cluster and of one node, leader, controller,
# describe, create-topic. Compiled once with javac into $STREAMS_CACHE/kafka-$KAFKA_VERSION/cluster-tool.
TOOL_SRC_FILE=$SCRIPT_DIR/kafka/StreamsKafkaClusterTool.java
TOOL_LOG4J_FILE=$SCRIPT_DIR/kafka/cluster-tool-log4j2.properties
# The helper's own log4j2 configuration: warnings and errors only (at INFO an Admin client
# waiting for a starting node logs every re-bootstrap) to $TOOL_LOG_DIR/tool.log.
# shellcheck disable=SC2016 # ${sys:...} is for log4j, not for bash.
TOOL_CP=""
TOOL_LOG4J=""
build_tool() {
    [[ -z $TOOL_CP ]] || return 0
    need_jdk
    resolve_libs
    local dir stamp tmp
    dir=$(dirname "$KAFKA_LIBS")/cluster-tool
    stamp=$(cat "$TOOL_SRC_FILE" "$TOOL_LOG4J_FILE" <(echo "$KAFKA_VERSION") | sha256sum | cut -d' ' -f1)
    if [[ ! -f $dir/StreamsKafkaClusterTool.class || "$(cat "$dir/.stamp" 2>/dev/null)" != "$stamp" ]]; then
        # Compiled aside and moved in place: verbs that take no lock may build it at the same time.
        tmp=$(mktemp -d "$dir.XXXXXX")
        cp "$TOOL_SRC_FILE" "$tmp/StreamsKafkaClusterTool.java"
        if ! javac -nowarn -d "$tmp" -cp "$KAFKA_LIBS/kafka-clients-$KAFKA_VERSION.jar" \
            "$tmp/StreamsKafkaClusterTool.java" >"$tmp/javac.out" 2>&1 9>&-; then
            cat "$tmp/javac.out" >&2
            rm -rf "$tmp"
            die "could not compile the Admin-client helper StreamsKafkaClusterTool (javac output above)"
        fi
        cp "$TOOL_LOG4J_FILE" "$tmp/log4j2.properties"
        echo "$stamp" >"$tmp/.stamp"
        rm -rf "$dir"
        mv "$tmp" "$dir" 2>/dev/null || rm -rf "$tmp" # another one won the race: use its copy
    fi
    TOOL_CP="$dir:$KAFKA_LIBS/*"
    TOOL_LOG4J=$dir/log4j2.properties
}
tool() {
    build_tool
    mkdir -p "$TOOL_LOG_DIR"
    java "${TOOL_JVM_OPTS[@]}" -Dlog4j2.configurationFile="$TOOL_LOG4J" -Dkafka.logs.dir="$TOOL_LOG_DIR" \
        -cp "$TOOL_CP" StreamsKafkaClusterTool "$@" 9>&-
}

check_ports_free() { # check_ports_free N...
    local n port
    for n in "$@"; do
        for port in "$(client_port "$n")" "$(controller_port "$n")"; do
            if port_open "$port"; then
                die "port $port on 127.0.0.1 (node $n) is already in use by another process, not by a node of" \
                    "$KAFKA_CLUSTER_DIR [$(port_owner "$port")]; stop that process or choose other ports" \
                    "(CLUSTER_BASE_PORT=..., node N uses BASE+10*N and BASE+10*N+1)"
            fi
        done
    done
}

write_conf() {
    mkdir -p "$KAFKA_CLUSTER_DIR"
    printf 'base.port=%s\ncluster.id=%s\n' "$CLUSTER_BASE_PORT" "$CLUSTER_ID" >"$CONF"
}

new_cluster_id() {
    # What `kafka-storage.sh random-uuid` prints (16 random bytes, URL-safe base64 without
    # padding, not starting with '-'), without paying for one more JVM start.
    local id=-
    while [[ $id == -* ]]; do
        id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')
    done
    echo "$id"
}

render_props() { # render_props N
    local n=$1 voters="" v dir
    dir=$(node_dir "$n")
    for v in "${NODES[@]}"; do voters+="${voters:+,}$v@127.0.0.1:$(controller_port "$v")"; done
    cat <<EOF
# Written by scripts/kafka-cluster.sh: node $n of a three-node KRaft test cluster (every node broker + controller).
process.roles=broker,controller
node.id=$n
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.1:$(client_port "$n"),CONTROLLER://127.0.0.1:$(controller_port "$n")
advertised.listeners=PLAINTEXT://127.0.0.1:$(client_port "$n"),CONTROLLER://127.0.0.1:$(controller_port "$n")
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$dir/data

# Three JVMs on a 2-core machine.
num.network.threads=2
num.io.threads=2
num.recovery.threads.per.data.dir=1
num.replica.fetchers=1
background.threads=2
group.coordinator.threads=1
share.coordinator.threads=1

# Three replicas of everything, two of them in sync to accept a write: one node may be down.
num.partitions=1
default.replication.factor=3
min.insync.replicas=2
unclean.leader.election.enable=false
auto.create.topics.enable=false
delete.topic.enable=true
offsets.topic.replication.factor=3
offsets.topic.num.partitions=6
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
transaction.state.log.num.partitions=6
share.coordinator.state.topic.replication.factor=3
share.coordinator.state.topic.min.isr=2
share.coordinator.state.topic.num.partitions=6

# Fast fail-over on loopback. A follower that stops fetching leaves the ISR after 10 s; the
# controllers fence a broker whose heartbeats stop for 6 s (its partitions get new leaders);
# the quorum elects a new active controller 2 s after the old one stops answering.
replica.lag.time.max.ms=10000
broker.heartbeat.interval.ms=1000
broker.session.timeout.ms=6000
controller.quorum.fetch.timeout.ms=2000
controller.quorum.election.timeout.ms=1000
controller.quorum.election.backoff.max.ms=1000
controller.quorum.request.timeout.ms=2000

# Fast group joins, time retention checked daily (as the single broker: scripts/lib/common.sh).
$(test_broker_props)
EOF
}

# Formats the storage of the given nodes that are not formatted yet, in parallel, with the
# cluster id of cluster.conf (static voters: no --standalone / --initial-controllers).
format_nodes() { # format_nodes N...
    local n dir pids=() todo=() i failed=""
    for n in "$@"; do
        dir=$(node_dir "$n")
        [[ -f $dir/data/meta.properties ]] && continue
        mkdir -p "$dir/data" "$dir/logs"
        java "${JVM_OPTS[@]}" -Xmx256m -XX:TieredStopAtLevel=1 -Dlog4j2.configurationFile="$LOG4J_CONFIG" \
            -Dkafka.logs.dir="$dir/logs/storage-tool" -cp "$KAFKA_LIBS/*" kafka.tools.StorageTool \
            format -t "$CLUSTER_ID" -c "$(props_file "$n")" >"$dir/logs/format.out" 2>&1 9>&- &
        pids+=($!)
        todo+=("$n")
    done
    for i in "${!pids[@]}"; do
        if ! wait "${pids[$i]}"; then
            cat "$(node_dir "${todo[$i]}")/logs/format.out" >&2
            failed+=" ${todo[$i]}"
        fi
    done
    [[ -z $failed ]] || die "kafka.tools.StorageTool format failed for node(s)$failed (output above)"
}

# The cluster id of an existing cluster: cluster.conf, else a node's meta.properties.
find_cluster_id() {
    [[ -n $CLUSTER_ID ]] && return 0
    local n id
    for n in "${NODES[@]}"; do
        id=$(sed -n 's/^cluster.id=//p' "$(node_dir "$n")/data/meta.properties" 2>/dev/null || true)
        if [[ -n $id ]]; then
            CLUSTER_ID=$id
            return 0
        fi
    done
    return 1
}

launch_node() { # launch_node N: starts the JVM, writes the pid file
    local n=$1 dir pid
    dir=$(node_dir "$n")
    mkdir -p "$dir/data" "$dir/logs"
    # shellcheck disable=SC2086 # KAFKA_HEAP_OPTS and KAFKA_CLUSTER_JIT_OPTS hold several JVM flags on purpose.
    nohup java $KAFKA_HEAP_OPTS $KAFKA_CLUSTER_JIT_OPTS "${JVM_OPTS[@]}" \
        -Dlog4j2.configurationFile="$LOG4J_CONFIG" -Dkafka.logs.dir="$dir/logs" \
        -cp "$KAFKA_LIBS/*" kafka.Kafka "$(props_file "$n")" >>"$dir/logs/console.out" 2>&1 </dev/null 9>&- &
    pid=$!
    echo "$pid" >"$(pid_file "$n")"
    # The child runs this script's shell until it execs the JVM. node_pid checks the command
    # line, so a look right after the launch could take a JVM about to start for one that
    # exited (seen once under load: "node 2 exited right after its start" while it started
    # normally). Wait for the exec, at most 10 s, or for the child to die.
    local deadline=$(($(date +%s) + 10))
    while alive "$pid" && ! is_node_jvm "$pid" "$n"; do
        (($(date +%s) < deadline)) || break
        sleep 0.05
    done
}

show_logs() { # show_logs N...
    local n dir
    for n in "$@"; do
        dir=$(node_dir "$n")
        echo "---- node $n: last lines of $dir/logs/server.log ----" >&2
        tail -n 25 "$dir/logs/server.log" >&2 2>/dev/null || true
        echo "---- node $n: $dir/logs/console.out ----" >&2
        tail -n 10 "$dir/logs/console.out" >&2 2>/dev/null || true
    done
}

# Waits up to 5 s until nothing listens on the ports of the given nodes any more (a node that
# just exited).
wait_ports_closed() { # wait_ports_closed N...
    local deadline=$(($(date +%s) + 5)) n open
    while :; do
        open=0
        for n in "$@"; do
            if port_open "$(client_port "$n")" || port_open "$(controller_port "$n")"; then open=1; fi
        done
        [[ $open == 1 && $(date +%s) -lt $deadline ]] || return 0
        sleep 0.2
    done
}

wait_gone() { # wait_gone SECONDS PID...: 0 when all exited
    local deadline=$(($(date +%s) + $1)) pid left
    shift
    while :; do
        left=0
        for pid in "$@"; do alive "$pid" && left=1; done
        [[ $left == 0 ]] && return 0
        [[ $(date +%s) -lt $deadline ]] || return 1
        sleep 0.2
    done
}

# stop_nodes N...: SIGTERM (a paused node also gets SIGCONT, or it would never see it), wait up
# to KAFKA_CLUSTER_STOP_TIMEOUT, then SIGKILL. Nodes that do not run are skipped.
stop_nodes() {
    local n pid t0 pids=() names=()
    t0=$(now_ms)
    for n in "$@"; do
        if pid=$(node_pid "$n"); then
            kill -TERM "$pid" 2>/dev/null || true
            kill -CONT "$pid" 2>/dev/null || true
            pids+=("$pid")
            names+=("$n:$pid")
        else
            rm -f "$(pid_file "$n")"
        fi
    done
    [[ ${#pids[@]} -gt 0 ]] || return 0
    if ! wait_gone "$KAFKA_CLUSTER_STOP_TIMEOUT" "${pids[@]}"; then
        local i
        for i in "${!pids[@]}"; do
            if alive "${pids[$i]}"; then
                say "node ${names[$i]%%:*} (pid ${pids[$i]}) still running ${KAFKA_CLUSTER_STOP_TIMEOUT}s after SIGTERM: sending SIGKILL"
                kill -KILL "${pids[$i]}" 2>/dev/null || true
            fi
        done
        wait_gone 10 "${pids[@]}" || die "node process(es) ${pids[*]} did not exit even after SIGKILL"
    fi
    local stopped=()
    for n in "${names[@]}"; do stopped+=("${n%%:*}"); done
    wait_ports_closed "${stopped[@]}"
    for n in "${names[@]}"; do
        rm -f "$(pid_file "${n%%:*}")"
        say "node ${n%%:*} stopped (pid ${n#*:}) in $(elapsed "$t0")"
    done
}

# The cluster probe: exactly brokers 1,2,3 registered, group and transaction coordinators answer.
probe_cluster() { # probe_cluster TIMEOUT: prints the cluster id
    local n pid node_pids=""
    for n in "${NODES[@]}"; do
        if pid=$(node_pid "$n"); then node_pids+="${node_pids:+,}$n:$pid"; fi
    done
    tool cluster "$(bootstrap_all)" "$1" "$(
        IFS=,
        echo "${NODES[*]}"
    )" "$node_pids"
}

announce_up() { # announce_up T0 WHAT
    local n pid_list="" cluster_id=$3
    for n in "${NODES[@]}"; do pid_list+="${pid_list:+,}$(node_pid "$n" || echo '?')"; done
    say "Kafka $KAFKA_VERSION cluster up: nodes 1,2,3 (pids $pid_list), cluster id $cluster_id, run dir $KAFKA_CLUSTER_DIR ($2), in $(elapsed "$1")"
    listening_line
}

fail_start() { # fail_start RC NODES...: show logs, kill what was started, die
    local rc=$1 n pid
    shift
    show_logs "$@"
    for n in "$@"; do
        if pid=$(node_pid "$n"); then kill -KILL "$pid" 2>/dev/null || true; fi
        rm -f "$(pid_file "$n")"
    done
    if [[ $rc -eq 2 ]]; then
        die "a node exited during startup (logs above, full logs in $KAFKA_CLUSTER_DIR/node-*/logs)"
    fi
    die "the cluster did not answer on $(bootstrap_all) within $KAFKA_CLUSTER_START_TIMEOUT s (killed node(s) $*; logs above)"
}

do_start() {
    local t0 n cluster_id rc=0 running=()
    t0=$(now_ms)
    lock_cluster
    for n in "${NODES[@]}"; do [[ $(node_state "$n") != stopped ]] && running+=("$n"); done
    if [[ ${#running[@]} -gt 0 ]]; then
        say "stopping the running node(s) ${running[*]} first (start is always fresh; ensure keeps a running cluster)"
        stop_nodes "${running[@]}"
    fi
    CLUSTER_BASE_PORT=${CLUSTER_BASE_PORT_ENV:-19090}
    check_base_port
    check_ports_free "${NODES[@]}"
    say "starting a fresh Kafka $KAFKA_VERSION cluster on $(bootstrap_all), data in $KAFKA_CLUSTER_DIR"
    build_tool
    for n in "${NODES[@]}"; do rm -rf "$(node_dir "$n")/data" "$(node_dir "$n")/logs"; done
    CLUSTER_ID=$(new_cluster_id)
    write_conf
    for n in "${NODES[@]}"; do
        mkdir -p "$(node_dir "$n")/data" "$(node_dir "$n")/logs"
        render_props "$n" >"$(props_file "$n")"
    done
    format_nodes "${NODES[@]}"
    say "formatted the storage of nodes 1,2,3 (cluster id $CLUSTER_ID) in $(elapsed "$t0")"
    for n in "${NODES[@]}"; do launch_node "$n"; done
    cluster_id=$(probe_cluster "$KAFKA_CLUSTER_START_TIMEOUT") || rc=$?
    [[ $rc -eq 0 ]] || fail_start "$rc" "${NODES[@]}"
    announce_up "$t0" "fresh data" "$cluster_id"
}

do_stop() {
    local t0 n any=0
    t0=$(now_ms)
    lock_cluster
    for n in "${NODES[@]}"; do [[ $(node_state "$n") != stopped ]] && any=1; done
    if [[ $any == 0 ]]; then
        for n in "${NODES[@]}"; do rm -f "$(pid_file "$n")"; done
        say "kafka cluster not running (run dir $KAFKA_CLUSTER_DIR)"
        return 0
    fi
    stop_nodes "${NODES[@]}"
    say "kafka cluster stopped in $(elapsed "$t0")"
}

do_status() {
    local n state pid up=0 any_alive="" cluster_id rc=0
    for n in "${NODES[@]}"; do
        state=$(node_state "$n")
        pid=$(node_pid "$n" || true)
        say "node $n $state${pid:+ pid $pid} 127.0.0.1:$(client_port "$n") controller 127.0.0.1:$(controller_port "$n")"
        [[ $state == running ]] && up=$((up + 1))
        [[ $state == stopped ]] || any_alive=1
    done
    if [[ $up -eq 3 ]]; then
        cluster_id=$(probe_cluster 15) || rc=$?
        if [[ $rc -eq 0 ]]; then
            say "kafka cluster running: cluster id $cluster_id, run dir $KAFKA_CLUSTER_DIR"
            listening_line
            return 0
        fi
        say "all three nodes run but the cluster does not answer on $(bootstrap_all) (logs: $KAFKA_CLUSTER_DIR/node-*/logs/server.log)"
        return 1
    fi
    if [[ -z $any_alive ]]; then
        say "kafka cluster not running (run dir $KAFKA_CLUSTER_DIR)"
        return 3
    fi
    say "kafka cluster degraded: $up of 3 nodes running and not paused"
    return 1
}

# Starts the given stopped nodes keeping their data (formatting a node with no data).
start_stopped_nodes() { # start_stopped_nodes N...
    local n
    check_ports_free "$@"
    build_tool
    if ! find_cluster_id; then
        CLUSTER_ID=$(new_cluster_id)
        say "no cluster in $KAFKA_CLUSTER_DIR yet: making a new one (cluster id $CLUSTER_ID)"
    fi
    write_conf
    for n in "$@"; do
        mkdir -p "$(node_dir "$n")/data" "$(node_dir "$n")/logs"
        render_props "$n" >"$(props_file "$n")"
    done
    format_nodes "$@"
    for n in "$@"; do launch_node "$n"; done
}

do_ensure() {
    local t0 n state stopped=() cluster_id rc=0
    t0=$(now_ms)
    lock_cluster
    for n in "${NODES[@]}"; do
        state=$(node_state "$n")
        if [[ $state == paused ]]; then
            kill -CONT "$(node_pid "$n")" 2>/dev/null || true
            say "node $n was paused: resumed it (SIGCONT)"
        elif [[ $state == stopped ]]; then
            stopped+=("$n")
        fi
    done
    if [[ ${#stopped[@]} -eq 0 ]]; then
        cluster_id=$(probe_cluster "$KAFKA_CLUSTER_START_TIMEOUT") || rc=$?
        if [[ $rc -eq 0 ]]; then
            say "Kafka $KAFKA_VERSION cluster already running: cluster id $cluster_id, run dir $KAFKA_CLUSTER_DIR"
            listening_line
            return 0
        fi
        die "the nodes of $KAFKA_CLUSTER_DIR run but the cluster does not answer on $(bootstrap_all) within" \
            "$KAFKA_CLUSTER_START_TIMEOUT s (logs: $KAFKA_CLUSTER_DIR/node-*/logs/server.log); start a fresh one with:" \
            "bash scripts/kafka-cluster.sh start"
    fi
    say "starting node(s) ${stopped[*]} keeping their data (run dir $KAFKA_CLUSTER_DIR)"
    start_stopped_nodes "${stopped[@]}"
    cluster_id=$(probe_cluster "$KAFKA_CLUSTER_START_TIMEOUT") || rc=$?
    [[ $rc -eq 0 ]] || fail_start "$rc" "${stopped[@]}"
    announce_up "$t0" "kept data" "$cluster_id"
}

do_kill() { # do_kill N
    local n=$1 pid t0
    t0=$(now_ms)
    lock_cluster
    if ! pid=$(node_pid "$n"); then
        rm -f "$(pid_file "$n")"
        say "node $n not running"
        return 0
    fi
    kill -KILL "$pid" 2>/dev/null || true
    wait_gone 10 "$pid" || die "node $n (pid $pid) did not exit within 10 s of SIGKILL"
    wait_ports_closed "$n"
    rm -f "$(pid_file "$n")"
    say "node $n killed (pid $pid, SIGKILL) in $(elapsed "$t0")"
}

# Waits until the controller has fenced node N's previous run (describeCluster no longer lists it), so
# that N starts again only once its partitions have other leaders. A killed broker that comes back
# before that still leads its partitions in the metadata it replays, and until the controller fences
# it acts on its own log tail that no follower ever fetched: in Kafka 4.4 its transaction coordinator
# loaded a PrepareCommit that was never replicated and wrote COMMIT markers to some of the
# transaction's partitions, while the next coordinator (without that record) aborted the rest (one
# transaction half committed; docs/kafka-for-tests.md). No client can defend against that, so the
# faults here model a crash whose restart comes after the controller noticed it.
wait_fenced() { # wait_fenced N
    local n=$1 m others="" out
    for m in "${NODES[@]}"; do
        [[ $m != "$n" && $(node_state "$m") == running ]] && others+="${others:+,}127.0.0.1:$(client_port "$m")"
    done
    [[ -n $others ]] || return 0
    out=$(tool fenced "$others" "$KAFKA_CLUSTER_START_TIMEOUT" "$n") ||
        die "the controller did not fence node $n within $KAFKA_CLUSTER_START_TIMEOUT s (above)"
    [[ $out -lt 250 ]] || say "node $n fenced by the controller after $((out / 1000)).$(printf '%03d' $((out % 1000)))s"
}

do_start_node() { # do_start_node N
    local n=$1 t0 pid state out rc=0
    t0=$(now_ms)
    lock_cluster
    state=$(node_state "$n")
    [[ $state != paused ]] || die "node $n (pid $(node_pid "$n")) is paused: resume it with: bash scripts/kafka-cluster.sh resume $n"
    if [[ $state == running ]]; then
        say "node $n already running (pid $(node_pid "$n")): waiting until it is registered and in sync"
    else
        find_cluster_id || die "no cluster in $KAFKA_CLUSTER_DIR: start one with: bash scripts/kafka-cluster.sh start"
        wait_fenced "$n"
        start_stopped_nodes "$n"
    fi
    pid=$(node_pid "$n") || {
        show_logs "$n"
        die "node $n exited right after its start (logs above)"
    }
    out=$(tool node "127.0.0.1:$(client_port "$n")" "$(bootstrap_live)" "$KAFKA_CLUSTER_START_TIMEOUT" "$n" "$pid") || rc=$?
    if [[ $rc -ne 0 ]]; then
        show_logs "$n"
        if [[ $rc -eq 2 ]]; then
            rm -f "$(pid_file "$n")"
            die "node $n exited during startup (logs above, full log in $(node_dir "$n")/logs)"
        fi
        die "node $n (pid $pid) did not come back within $KAFKA_CLUSTER_START_TIMEOUT s (left running; logs above)"
    fi
    local registered_ms insync leaderless note=""
    read -r registered_ms insync leaderless <<<"$out"
    [[ ${leaderless:-0} == 0 ]] || note=" ($leaderless of its partitions have no leader: skipped)"
    say "node $n up: pid $pid on 127.0.0.1:$(client_port "$n"), registered after" \
        "$((registered_ms / 1000)).$(printf '%03d' $((registered_ms % 1000)))s, back in the ISR of all" \
        "its $insync partitions$note, in $(elapsed "$t0")"
}

do_restart() { # do_restart N
    local n=$1
    lock_cluster
    if [[ $(node_state "$n") == stopped ]]; then
        say "node $n not running"
    else
        stop_nodes "$n"
    fi
    do_start_node "$n"
}

do_pause() { # do_pause N
    local n=$1 pid state i
    lock_cluster
    state=$(node_state "$n")
    [[ $state != stopped ]] || die "node $n is not running"
    pid=$(node_pid "$n")
    if [[ $state == paused ]]; then
        say "node $n already paused (pid $pid)"
        return 0
    fi
    kill -STOP "$pid"
    for i in $(seq 50); do
        [[ $(node_state "$n") == paused ]] && break
        sleep 0.1
    done
    [[ $(node_state "$n") == paused ]] || die "node $n (pid $pid) did not stop on SIGSTOP"
    say "node $n paused (pid $pid, SIGSTOP)"
}

do_resume() { # do_resume N
    local n=$1 pid state
    lock_cluster
    state=$(node_state "$n")
    [[ $state != stopped ]] || die "node $n is not running"
    pid=$(node_pid "$n")
    if [[ $state == running ]]; then
        say "node $n not paused (pid $pid)"
        return 0
    fi
    kill -CONT "$pid"
    say "node $n resumed (pid $pid, SIGCONT)"
}

do_pid() { # do_pid N
    local pid
    if pid=$(node_pid "$1"); then
        echo "$pid"
        return 0
    fi
    echo "kafka-cluster.sh: node $1 not running" >&2
    return 3
}

cmd=${1:-}
[[ $# -gt 0 ]] && shift
case "$cmd" in
start | stop | status | ensure | controller) [[ $# -eq 0 ]] || usage ;;
esac
case "$cmd" in
start) do_start ;;
stop) do_stop ;;
status) do_status ;;
ensure) do_ensure ;;
kill | start-node | restart | bounce | pause | resume | pid)
    [[ $# -eq 1 ]] || usage
    check_node_arg "$1"
    case "$cmd" in
    kill) do_kill "$1" ;;
    start-node) do_start_node "$1" ;;
    restart) do_restart "$1" ;;
    bounce)
        do_kill "$1"
        do_start_node "$1"
        ;;
    pause) do_pause "$1" ;;
    resume) do_resume "$1" ;;
    pid) do_pid "$1" ;;
    esac
    ;;
leader)
    [[ $# -eq 2 && $2 =~ ^[0-9]+$ ]] || usage
    tool leader "$(bootstrap_live)" "$1" "$2" || die "could not find the leader of $1-$2 (above)"
    ;;
controller)
    tool controller "$(controllers_live)" || die "could not find the active controller (above)"
    ;;
describe)
    [[ $# -eq 1 ]] || usage
    tool describe "$(bootstrap_live)" "$1" || die "could not describe topic $1 (above)"
    ;;
transactions)
    [[ $# -eq 1 ]] || usage
    tool transactions "$(bootstrap_live)" "$1" || die "could not list the transactions (above)"
    ;;
delete-topic)
    [[ $# -eq 1 ]] || usage
    tool delete-topic "$(bootstrap_live)" "$1" || die "could not delete topic $1 (above)"
    say "topic $1 deleted"
    ;;
create-topic)
    [[ $# -ge 2 && $2 =~ ^[0-9]+$ ]] || usage
    topic=$1 partitions=$2
    shift 2
    rf=3
    if [[ $# -gt 0 && $1 =~ ^[0-9]+$ ]]; then
        rf=$1
        shift
    fi
    tool create-topic "$(bootstrap_live)" "$topic" "$partitions" "$rf" "$@" ||
        die "could not create topic $topic (above)"
    say "topic $topic created: $partitions partition(s), replication factor $rf"
    ;;
*) usage ;;
esac
