# Shell helpers shared by scripts/kafka.sh, scripts/kafka-cluster.sh and
# scripts/schema-registry.sh: messages, clocks, the run-dir lock, ports, Java and stopping a
# process. Sourced, never run; the sourcing script sets SCRIPT_NAME (its file name, the prefix
# of every message) first.

say() { echo "$SCRIPT_NAME: $*"; }
die() {
    echo "$SCRIPT_NAME: error: $*" >&2
    exit 1
}
now_ms() { date +%s%3N; }
elapsed() { # elapsed START_MS -> "1.234s"
    local ms=$(($(now_ms) - $1))
    printf '%d.%03ds' $((ms / 1000)) $((ms % 1000))
}

# One start/stop at a time per run dir (two concurrent scripts would otherwise race): an
# exclusive lock on DIR/.lock held on fd 9 until the script exits or unlock_dir. Taking it
# again while held is a no-op. Child processes that outlive a command get `9>&-`.
DIR_LOCKED=0
lock_dir() { # lock_dir DIR
    [[ $DIR_LOCKED == 0 ]] || return 0
    mkdir -p "$1"
    if command -v flock >/dev/null 2>&1; then
        exec 9>"$1/.lock"
        flock -w 300 9 || die "another scripts/$SCRIPT_NAME holds $1/.lock for more than 300 s"
    fi
    DIR_LOCKED=1
}
unlock_dir() {
    exec 9>&-
    DIR_LOCKED=0
}

port_open() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }
port_owner() { # the `ss` line of the process listening on PORT, when ss is installed
    if command -v ss >/dev/null 2>&1; then
        ss -Hltnp "sport = :$1" 2>/dev/null | head -n1 | sed 's/  */ /g'
    fi
}

need_java() { # need_java WHAT: dies unless java 17+ is on PATH; WHAT is what needs it
    command -v java >/dev/null 2>&1 ||
        die "java not found on PATH: $1 needs Java 17+ (Debian: apt-get install openjdk-17-jdk-headless, or run scripts/install-deps.sh)"
    local v
    v=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1)
    if [[ -n $v && $v -lt 17 ]]; then
        die "java on PATH is version $v: $1 needs Java 17+"
    fi
}

# Prints the pid recorded in PID_FILE when that process is alive and its command line
# contains PATTERN (a pid reused by an unrelated program does not count); else returns 1.
live_pid() { # live_pid PID_FILE PATTERN
    [[ -f $1 ]] || return 1
    local pid
    pid=$(cat "$1" 2>/dev/null || true)
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    kill -0 "$pid" 2>/dev/null || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$2" || return 1
    echo "$pid"
}

# SIGTERM, up to TIMEOUT seconds for the process to exit, then SIGKILL and up to 10 s more;
# dies when it is still there. WHAT names it in the messages ("broker pid 123").
stop_pid() { # stop_pid PID TIMEOUT WHAT
    local pid=$1 timeout=$2 what=$3 deadline
    kill -TERM "$pid" 2>/dev/null || true
    deadline=$(($(date +%s) + timeout))
    while kill -0 "$pid" 2>/dev/null && [[ $(date +%s) -lt $deadline ]]; do
        sleep 0.2
    done
    if kill -0 "$pid" 2>/dev/null; then
        say "$what still running after ${timeout}s: sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        deadline=$(($(date +%s) + 10))
        while kill -0 "$pid" 2>/dev/null && [[ $(date +%s) -lt $deadline ]]; do
            sleep 0.2
        done
    fi
    if kill -0 "$pid" 2>/dev/null; then
        die "$what did not exit even after SIGKILL"
    fi
}

# The `stop` verb of a script that runs one process: stops the process its `running_pid`
# finds (under its `lock_run_dir`) and removes PID_FILE. NAME names the service in the
# messages ("kafka"), WHAT its process ("broker"); RUN_DIR is where it runs.
stop_service() { # stop_service NAME WHAT RUN_DIR TIMEOUT
    local t0 pid
    t0=$(now_ms)
    lock_run_dir
    if ! pid=$(running_pid); then
        rm -f "$PID_FILE"
        say "$1 not running (run dir $3)"
        return 0
    fi
    stop_pid "$pid" "$4" "$2 pid $pid"
    rm -f "$PID_FILE"
    say "$1 stopped (pid $pid) in $(elapsed "$t0")"
}

# The broker settings of every test broker (single node and cluster): group joins without
# an initial rebalance delay and with short session timeouts allowed, for the classic,
# consumer (KIP-848) and streams (KIP-1071) protocols; time retention checked once at
# start-up, before any test has written, and then daily, not every 5 minutes in the middle
# of a test (some tests write records with fixed timestamps years in the past, and the
# broker deletes a segment whose newest record is older than the topic's retention.ms;
# topics of the compact,delete policy, such as window-store changelogs, are checked by the
# log cleaner whatever this says: tests that write to them use recent timestamps).
test_broker_props() {
    cat <<'EOF'
group.initial.rebalance.delay.ms=0
group.min.session.timeout.ms=1000
group.consumer.min.session.timeout.ms=6000
group.consumer.session.timeout.ms=10000
group.consumer.min.heartbeat.interval.ms=500
group.consumer.heartbeat.interval.ms=1000
group.streams.min.session.timeout.ms=6000
group.streams.session.timeout.ms=10000
group.streams.min.heartbeat.interval.ms=500
group.streams.heartbeat.interval.ms=1000
group.streams.initial.rebalance.delay.ms=0
log.retention.hours=24
log.initial.task.delay.ms=0
log.retention.check.interval.ms=86400000
EOF
}
