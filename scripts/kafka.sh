#!/usr/bin/env bash
# Single-node Apache Kafka broker (KRaft, combined broker + controller) for the test suite.
#
#   bash scripts/kafka.sh start     fresh, empty broker on 127.0.0.1:$KAFKA_PORT (data dir wiped)
#   bash scripts/kafka.sh stop      SIGTERM, bounded wait, then SIGKILL; ok when not running
#   bash scripts/kafka.sh status    exit 0 when running and answering, 3 when not running, 1 when stuck
#   bash scripts/kafka.sh restart   stop + start keeping the data (for tests that restart the broker)
#   bash scripts/kafka.sh ensure    running and answering: prints its `kafka listening on` line and exits 0;
#                                   otherwise starts it keeping the data (storage formatted only when new,
#                                   jars resolved on first use as by start). What the examples run by default.
#   bash scripts/kafka.sh resolve   only resolves the jars (as start does on first use) and ends with the
#                                   line `kafka jars in DIR`; starts nothing (used by scripts/kafka-cluster.sh)
#
# start, restart and ensure end with the line `kafka listening on 127.0.0.1:PORT` on stdout,
# after the line `kafka secure listener on 127.0.0.1:SECURE_PORT ca CA_PEM`; status prints both.
#
# Secure mode, always on: besides the PLAINTEXT listener the suite uses, the broker has a
# SASL_SSL listener on KAFKA_SECURE_PORT (TLS with a CA and broker certificate the script
# generates once per run dir into $KAFKA_RUN_DIR/tls; SCRAM-SHA-512, PLAIN and OAUTHBEARER with unsecured JWTs) and the standard
# authorizer. PLAINTEXT and controller connections are the principal User:ANONYMOUS, a super
# user like User:admin, so for them nothing changes; the SASL_SSL users admin (super user),
# streams and no-acls (both without ACLs until a test grants some) are created when the storage
# is formatted. See docs/kafka-for-tests.md, "Secure mode".
#
# Kafka is not downloaded as a tarball: its jars are resolved from Maven Central through
# scripts/kafka/pom.xml into $STREAMS_CACHE/kafka-$KAFKA_VERSION/libs (reused once complete).
# See docs/kafka-for-tests.md.
#
# Environment (all optional):
#   KAFKA_VERSION          Apache Kafka release to run (default 4.4.0; earlier ones: docs/kafka-for-tests.md)
#   KAFKA_PORT             client listener port (default 9092)
#   KAFKA_CONTROLLER_PORT  KRaft controller port (default KAFKA_PORT + 1)
#   KAFKA_SECURE_PORT      SASL_SSL listener port (default KAFKA_PORT + 2)
#   STREAMS_CACHE          cache root (default ~/.cache/streams-rs)
#   KAFKA_RUN_DIR          config, data and logs of the running broker (default $STREAMS_CACHE/kafka-run)
#   KAFKA_HEAP_OPTS        JVM heap (default -Xms256m -Xmx512m)
#   KAFKA_START_TIMEOUT    seconds to wait for the broker to answer (default 60)
#   KAFKA_STOP_TIMEOUT     seconds to wait after SIGTERM before SIGKILL (default 30)
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
KAFKA_VERSION=${KAFKA_VERSION:-4.4.0}
if [[ ! $KAFKA_VERSION =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
    echo "kafka.sh: error: KAFKA_VERSION must be a release such as 4.4.0, not '$KAFKA_VERSION'" >&2
    exit 1
fi
STREAMS_CACHE=${STREAMS_CACHE:-$HOME/.cache/streams-rs}
KAFKA_DIST_DIR=$STREAMS_CACHE/kafka-$KAFKA_VERSION
KAFKA_LIBS=$KAFKA_DIST_DIR/libs
KAFKA_MARKER=$KAFKA_DIST_DIR/.resolved
KAFKA_RUN_DIR=${KAFKA_RUN_DIR:-$STREAMS_CACHE/kafka-run}
KAFKA_PORT=${KAFKA_PORT:-9092}
if [[ ! $KAFKA_PORT =~ ^[0-9]+$ ]]; then
    echo "kafka.sh: error: KAFKA_PORT must be a port number, not '$KAFKA_PORT'" >&2
    exit 1
fi
KAFKA_CONTROLLER_PORT=${KAFKA_CONTROLLER_PORT:-$((KAFKA_PORT + 1))}
KAFKA_SECURE_PORT_ENV=${KAFKA_SECURE_PORT:-}
KAFKA_SECURE_PORT=${KAFKA_SECURE_PORT:-$((KAFKA_PORT + 2))}
KAFKA_HEAP_OPTS=${KAFKA_HEAP_OPTS:--Xms256m -Xmx512m}
KAFKA_START_TIMEOUT=${KAFKA_START_TIMEOUT:-60}
KAFKA_STOP_TIMEOUT=${KAFKA_STOP_TIMEOUT:-30}
POM=$SCRIPT_DIR/kafka/pom.xml
LOG4J_CONFIG=$SCRIPT_DIR/kafka/log4j2.properties
PROPS=$KAFKA_RUN_DIR/server.properties
DATA_DIR=$KAFKA_RUN_DIR/data
LOG_DIR=$KAFKA_RUN_DIR/logs
PID_FILE=$KAFKA_RUN_DIR/kafka.pid
PROBE_DIR=$KAFKA_DIST_DIR/probe
TLS_DIR=$KAFKA_RUN_DIR/tls
# The password of the generated PKCS#12 stores (the broker's keystore and the CAs' keys).
TLS_STORE_PASSWORD=streams-test-store
# The SCRAM-SHA-512 (and PLAIN) users of the SASL_SSL listener, NAME=PASSWORD. Test
# credentials of a loopback broker, mirrored in streams-test-utils (kafka::secure).
SASL_USERS=(admin=admin-pw-7c2b9a streams=streams-pw-4f9c1e no-acls=no-acls-pw-d03e58)
# Same JVM tuning as Kafka's bin/kafka-run-class.sh, minus JMX and GC logging.
JVM_OPTS=(-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35
    -XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 -XX:+ExitOnOutOfMemoryError
    -Djava.awt.headless=true)

SCRIPT_NAME=kafka.sh
# shellcheck source=scripts/lib/common.sh
source "$SCRIPT_DIR/lib/common.sh"

case "$KAFKA_PORT$KAFKA_CONTROLLER_PORT$KAFKA_SECURE_PORT" in
*[!0-9]*) die "KAFKA_PORT ('$KAFKA_PORT'), KAFKA_CONTROLLER_PORT ('$KAFKA_CONTROLLER_PORT') and KAFKA_SECURE_PORT ('$KAFKA_SECURE_PORT') must be numbers" ;;
esac
check_ports_differ() {
    [[ $KAFKA_PORT != "$KAFKA_CONTROLLER_PORT" && $KAFKA_PORT != "$KAFKA_SECURE_PORT" &&
        $KAFKA_CONTROLLER_PORT != "$KAFKA_SECURE_PORT" ]] ||
        die "KAFKA_PORT ($KAFKA_PORT), KAFKA_CONTROLLER_PORT ($KAFKA_CONTROLLER_PORT) and KAFKA_SECURE_PORT ($KAFKA_SECURE_PORT) must differ"
}
check_ports_differ

# One start/stop at a time per run dir.
lock_run_dir() { lock_dir "$KAFKA_RUN_DIR"; }

# Resolves the broker's jars with Maven once; a marker records a complete resolve of this POM.
# Serialized per jar cache with a lock of its own (fd 8): kafka.sh and kafka-cluster.sh of
# different run dirs may resolve at the same time.
resolve_kafka() {
    local stamp
    stamp="$KAFKA_VERSION $(sha256sum "$POM" | cut -d' ' -f1)"
    jars_resolved() {
        [[ -f $KAFKA_MARKER && "$(cat "$KAFKA_MARKER")" == "$stamp" && -f $KAFKA_LIBS/kafka_2.13-$KAFKA_VERSION.jar ]]
    }
    if jars_resolved; then
        return 0
    fi
    mkdir -p "$KAFKA_DIST_DIR"
    if command -v flock >/dev/null 2>&1; then
        exec 8>"$KAFKA_DIST_DIR/.resolve.lock"
        flock -w 600 8 || die "another kafka script holds $KAFKA_DIST_DIR/.resolve.lock for more than 600 s"
        if jars_resolved; then
            exec 8>&-
            return 0
        fi
    fi
    command -v mvn >/dev/null 2>&1 ||
        die "mvn not found on PATH: it resolves Kafka $KAFKA_VERSION from Maven Central (Debian: apt-get install maven, or run scripts/install-deps.sh)"
    local t0 tmp attempt
    t0=$(now_ms)
    tmp=$KAFKA_DIST_DIR/libs.partial
    say "resolving Kafka $KAFKA_VERSION jars from Maven Central into $KAFKA_LIBS ..."
    for attempt in 1 2 3; do
        rm -rf "$tmp"
        if mvn -q -B -Dstyle.color=never -f "$POM" -Dkafka.version="$KAFKA_VERSION" dependency:copy-dependencies \
            -DoutputDirectory="$tmp" -DincludeScope=runtime </dev/null >"$KAFKA_DIST_DIR/mvn.log" 2>&1 8>&- 9>&-; then
            break
        fi
        sed 's/\x1b\[[0-9;]*m//g' "$KAFKA_DIST_DIR/mvn.log" >&2
        [[ $attempt -lt 3 ]] || die "mvn could not resolve Kafka $KAFKA_VERSION (Maven output above)"
        say "mvn failed (attempt $attempt), retrying in 5 s"
        sleep 5
    done
    [[ -f $tmp/kafka_2.13-$KAFKA_VERSION.jar ]] ||
        die "mvn finished but $tmp/kafka_2.13-$KAFKA_VERSION.jar is missing"
    rm -rf "$KAFKA_LIBS"
    mv "$tmp" "$KAFKA_LIBS"
    echo "$stamp" >"$KAFKA_MARKER"
    exec 8>&-
    say "resolved $(find "$KAFKA_LIBS" -name '*.jar' | wc -l) jars in $(elapsed "$t0")"
}

# A small Admin-client program that waits until the broker really answers (describeCluster),
# touches the group coordinator so __consumer_offsets exists before the first test, and
# initializes a transactional producer so the producer-id manager and the transaction
# coordinator answer at once (a client's first idempotent or transactional producer would
# otherwise wait for them, and librdkafka logs a warning about it).
# With the secure arguments it then makes sure the SCRAM users exist (a data dir formatted by
# an older kafka.sh has none) and connects to the SASL_SSL listener as the first of them,
# trusting only the generated CA: the secure listener works end to end.
# Compiled once with javac; without javac we fall back to a TCP check plus the broker's log.
PROBE_SRC='import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialAlteration;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.errors.ResourceNotFoundException;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Usage: StreamsKafkaProbe BOOTSTRAP TIMEOUT_SECONDS [BROKER_PID [SECURE_BOOTSTRAP CA_PEM USER=PASSWORD,...]];
 * prints the cluster id. Exit 1: no answer in time, 2: the broker died, 3: the secure listener failed.
 */
public final class StreamsKafkaProbe {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        long deadline = System.nanoTime() + Long.parseLong(args[1]) * 1_000_000_000L;
        long pid = args.length > 2 ? Long.parseLong(args[2]) : 0L;
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, "streams-rs-probe");
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "3000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "5000");
        p.put(AdminClientConfig.RECONNECT_BACKOFF_MS_CONFIG, "100");
        p.put(AdminClientConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "500");
        p.put(AdminClientConfig.RETRY_BACKOFF_MS_CONFIG, "100");
        String last = "no answer yet";
        String clusterId = null;
        int code = 1;
        Admin admin = Admin.create(p);
        try {
            while (true) {
                if (pid > 0 && !ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false)) {
                    last = "broker process " + pid + " exited";
                    code = 2;
                    break;
                }
                try {
                    DescribeClusterResult c = admin.describeCluster(new DescribeClusterOptions().timeoutMs(3000));
                    Collection<Node> nodes = c.nodes().get(5, TimeUnit.SECONDS);
                    clusterId = c.clusterId().get(5, TimeUnit.SECONDS);
                    if (!nodes.isEmpty()) {
                        admin.listConsumerGroupOffsets("streams-rs-probe")
                            .partitionsToOffsetAndMetadata().get(10, TimeUnit.SECONDS);
                        Properties tp = new Properties();
                        tp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
                        tp.put(ProducerConfig.CLIENT_ID_CONFIG, "streams-rs-probe");
                        tp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "streams-rs-probe");
                        tp.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "10000");
                        try (KafkaProducer<byte[], byte[]> producer =
                                 new KafkaProducer<>(tp, new ByteArraySerializer(), new ByteArraySerializer())) {
                            producer.initTransactions();
                        }
                        code = 0;
                        break;
                    }
                    last = "cluster reports no brokers yet";
                } catch (Exception e) {
                    last = e.toString();
                }
                if (System.nanoTime() > deadline) {
                    last = "no answer from " + bootstrap + " within " + args[1] + " s: " + last;
                    break;
                }
                Thread.sleep(200);
            }
            if (code == 0 && args.length > 5) {
                try {
                    secure(admin, args[3], args[4], args[5]);
                } catch (Exception e) {
                    last = "the SASL_SSL listener " + args[3] + " does not work: " + e;
                    code = 3;
                }
            }
        } finally {
            admin.close(Duration.ofSeconds(2));
        }
        if (code != 0) {
            System.err.println(last);
        } else {
            System.out.println(clusterId);
        }
        System.exit(code);
    }

    /** Creates the SCRAM users that are missing, then connects over SASL_SSL as the first one. */
    static void secure(Admin admin, String bootstrap, String ca, String users) throws Exception {
        List<UserScramCredentialAlteration> missing = new ArrayList<>();
        String first = null;
        String firstPassword = null;
        for (String user : users.split(",")) {
            int at = user.indexOf("=");
            String name = user.substring(0, at);
            String password = user.substring(at + 1);
            if (first == null) {
                first = name;
                firstPassword = password;
            }
            try {
                admin.describeUserScramCredentials(List.of(name)).description(name).get(10, TimeUnit.SECONDS);
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof ResourceNotFoundException)) {
                    throw e;
                }
                missing.add(new UserScramCredentialUpsertion(
                    name, new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), password));
            }
        }
        if (!missing.isEmpty()) {
            admin.alterUserScramCredentials(missing).all().get(10, TimeUnit.SECONDS);
        }
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, "streams-rs-probe-secure");
        p.put(AdminClientConfig.SECURITY_PROTOCOL_CONFIG, "SASL_SSL");
        p.put("sasl.mechanism", "SCRAM-SHA-512");
        p.put("sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"" + first
            + "\" password=\"" + firstPassword + "\";");
        p.put("ssl.truststore.type", "PEM");
        p.put("ssl.truststore.location", ca);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "3000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "5000");
        long deadline = System.nanoTime() + 15_000_000_000L;
        try (Admin secure = Admin.create(p)) {
            while (true) {
                try {
                    secure.describeCluster(new DescribeClusterOptions().timeoutMs(3000)).nodes().get(5, TimeUnit.SECONDS);
                    return;
                } catch (ExecutionException e) {
                    // New SCRAM credentials reach the listener a moment after they are stored.
                    if (System.nanoTime() > deadline) {
                        throw e;
                    }
                    Thread.sleep(200);
                }
            }
        }
    }
}
'
PROBE_CP=""
build_probe() {
    command -v javac >/dev/null 2>&1 || return 0
    local stamp
    stamp=$(printf '%s' "$PROBE_SRC$KAFKA_VERSION" | sha256sum | cut -d' ' -f1)
    if [[ ! -f $PROBE_DIR/StreamsKafkaProbe.class || "$(cat "$PROBE_DIR/.stamp" 2>/dev/null)" != "$stamp" ]]; then
        rm -rf "$PROBE_DIR"
        mkdir -p "$PROBE_DIR"
        printf '%s' "$PROBE_SRC" >"$PROBE_DIR/StreamsKafkaProbe.java"
        if ! javac -nowarn -d "$PROBE_DIR" -cp "$KAFKA_LIBS/kafka-clients-$KAFKA_VERSION.jar" \
            "$PROBE_DIR/StreamsKafkaProbe.java" >"$PROBE_DIR/javac.out" 2>&1; then
            say "warning: could not compile the readiness probe (falling back to a TCP check):"
            cat "$PROBE_DIR/javac.out" >&2
            return 0
        fi
        echo "$stamp" >"$PROBE_DIR/.stamp"
    fi
    PROBE_CP="$PROBE_DIR:$KAFKA_LIBS/*"
}

# probe TIMEOUT_S [PID [secure]]: prints the cluster id on success. Exit 1 timeout, 2 broker
# died, 3 the SASL_SSL listener failed (checked only when asked: `secure`).
probe() {
    local timeout=$1 pid=${2:-0} secure=${3:-} users
    if [[ -n $PROBE_CP ]]; then
        local args=("127.0.0.1:$KAFKA_PORT" "$timeout" "$pid")
        if [[ -n $secure ]]; then
            users=$(IFS=,; echo "${SASL_USERS[*]}")
            args+=("127.0.0.1:$KAFKA_SECURE_PORT" "$TLS_DIR/ca.pem" "$users")
        fi
        java -Xmx128m -XX:TieredStopAtLevel=1 -Dlog4j2.configurationFile="$LOG4J_CONFIG" \
            -Dkafka.logs.dir="$LOG_DIR/probe" -cp "$PROBE_CP" StreamsKafkaProbe "${args[@]}" 9>&-
        return
    fi
    local deadline=$(($(date +%s) + timeout))
    while :; do
        if [[ $pid != 0 ]] && ! kill -0 "$pid" 2>/dev/null; then
            echo "broker process $pid exited" >&2
            return 2
        fi
        if port_open "$KAFKA_PORT" && grep -q 'Kafka Server started' "$LOG_DIR/server.log" 2>/dev/null &&
            { [[ -z $secure ]] || port_open "$KAFKA_SECURE_PORT"; }; then
            echo "unknown (no javac for the Admin-client probe)"
            return 0
        fi
        if [[ $(date +%s) -ge $deadline ]]; then
            echo "no answer from 127.0.0.1:$KAFKA_PORT within $timeout s" >&2
            return 1
        fi
        sleep 0.2
    done
}

# Prints the pid of the broker of this run dir when it is running, else returns 1.
running_pid() { live_pid "$PID_FILE" "kafka.Kafka $PROPS"; }

# Reads the ports of an existing server.properties (restart keeps the broker's identity). A
# file written by an older kafka.sh has no SASL_SSL listener: its secure port is then the
# default for its client port.
ports_from_props() {
    local line
    line=$(grep '^listeners=' "$PROPS" 2>/dev/null || true)
    if [[ $line =~ PLAINTEXT://127\.0\.0\.1:([0-9]+),CONTROLLER://127\.0\.0\.1:([0-9]+) ]]; then
        KAFKA_PORT=${BASH_REMATCH[1]}
        KAFKA_CONTROLLER_PORT=${BASH_REMATCH[2]}
        if [[ $line =~ SASL_SSL://127\.0\.0\.1:([0-9]+) ]]; then
            KAFKA_SECURE_PORT=${BASH_REMATCH[1]}
        else
            KAFKA_SECURE_PORT=${KAFKA_SECURE_PORT_ENV:-$((KAFKA_PORT + 2))}
        fi
    fi
}

# Whether the running broker's server.properties is what this kafka.sh writes now (false for
# a broker started by an older kafka.sh, without the secure listener).
props_current() {
    [[ -f $PROPS ]] && render_props | cmp -s - "$PROPS"
}

write_props() {
    render_props >"$PROPS"
}

render_props() {
    local sasl_users="" user
    for user in "${SASL_USERS[@]}"; do
        sasl_users+=" user_${user%%=*}=\"${user#*=}\""
    done
    cat <<EOF
# Written by scripts/kafka.sh: single-node KRaft test broker (combined broker + controller).
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:$KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT,SASL_SSL://127.0.0.1:$KAFKA_SECURE_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT,SASL_SSL://127.0.0.1:$KAFKA_SECURE_PORT
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL
log.dirs=$DATA_DIR

# Secure mode: the SASL_SSL listener (TLS with the certificate in $TLS_DIR; SCRAM-SHA-512 users
# created at format time, PLAIN users listed below, OAUTHBEARER with unsecured JWTs, Kafka's
# default validator) and ACLs. PLAINTEXT and controller connections are User:ANONYMOUS, a
# super user: the authorizer changes nothing for them.
sasl.enabled.mechanisms=SCRAM-SHA-512,PLAIN,OAUTHBEARER
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required$sasl_users;
listener.name.sasl_ssl.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="admin";
# PLAIN and OAUTHBEARER sessions last 4 s (KIP-368): clients must authenticate again on the
# connection (SCRAM-SHA-512 sessions are not limited).
listener.name.sasl_ssl.plain.connections.max.reauth.ms=4000
listener.name.sasl_ssl.oauthbearer.connections.max.reauth.ms=4000
ssl.keystore.type=PKCS12
ssl.keystore.location=$TLS_DIR/broker.p12
ssl.keystore.password=$TLS_STORE_PASSWORD
ssl.key.password=$TLS_STORE_PASSWORD
ssl.client.auth=none
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:ANONYMOUS;User:admin
allow.everyone.if.no.acl.found=false

# Sized for a 2-core machine.
num.network.threads=2
num.io.threads=4
num.recovery.threads.per.data.dir=1
background.threads=4

# Single node: every internal topic has one replica.
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
auto.create.topics.enable=true
delete.topic.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=10
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=10
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1


# Fast group joins, time retention checked daily (scripts/lib/common.sh).
$(test_broker_props)
EOF
}

format_storage() {
    if [[ -f $DATA_DIR/meta.properties ]]; then
        return 0
    fi
    local cluster_id
    mkdir -p "$DATA_DIR" "$LOG_DIR"
    # What `kafka-storage.sh random-uuid` prints (16 random bytes, URL-safe base64 without
    # padding, not starting with '-'), without paying for one more JVM start.
    cluster_id=-
    while [[ $cluster_id == -* ]]; do
        cluster_id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')
    done
    # The SCRAM users of the SASL_SSL listener go into the first metadata records.
    local scram=() user
    for user in "${SASL_USERS[@]}"; do
        scram+=(--add-scram "SCRAM-SHA-512=[name=${user%%=*},password=${user#*=}]")
    done
    if ! java "${JVM_OPTS[@]}" -Xmx256m -XX:TieredStopAtLevel=1 -Dlog4j2.configurationFile="$LOG4J_CONFIG" \
        -Dkafka.logs.dir="$LOG_DIR/storage-tool" -cp "$KAFKA_LIBS/*" kafka.tools.StorageTool \
        format --standalone -t "$cluster_id" -c "$PROPS" "${scram[@]}" >"$LOG_DIR/format.out" 2>&1 9>&-; then
        cat "$LOG_DIR/format.out" >&2
        die "kafka.tools.StorageTool format failed for $DATA_DIR"
    fi
}

# The TLS material of the SASL_SSL listener, made once per run dir with the JDK's keytool
# (EC P-256 keys, valid ten years) and kept by start, restart and ensure:
#   ca.pem        the test CA's certificate: what clients trust (ssl.ca.location)
#   broker.p12    the broker's key and its certificate (CN=localhost, SAN IP:127.0.0.1 and
#                 DNS:localhost) signed by that CA, with the CA's certificate
#   other-ca.pem  a second CA that signed nothing: a client trusting only it must refuse the broker
#   ca.p12, other-ca.p12  the CAs' keys
make_tls() {
    [[ -f $TLS_DIR/.complete ]] && return 0
    command -v keytool >/dev/null 2>&1 ||
        die "keytool not found on PATH: it makes the test broker's TLS certificates (it comes with the JDK: openjdk-17-jdk-headless)"
    local t0 tmp=$TLS_DIR.partial
    t0=$(now_ms)
    rm -rf "$tmp"
    mkdir -p "$tmp"
    kt() {
        keytool -J-XX:TieredStopAtLevel=1 -noprompt "$@" -storepass "$TLS_STORE_PASSWORD" \
            >>"$tmp/keytool.log" 2>&1 9>&- || {
            cat "$tmp/keytool.log" >&2
            die "keytool $1 failed (output above)"
        }
    }
    local key=(-keyalg EC -groupname secp256r1 -validity 3650 -storetype PKCS12)
    kt -genkeypair -alias ca "${key[@]}" -dname "CN=streams-rs test CA" -ext bc:c -keystore "$tmp/ca.p12"
    kt -exportcert -rfc -alias ca -keystore "$tmp/ca.p12" -file "$tmp/ca.pem"
    kt -genkeypair -alias broker "${key[@]}" -dname "CN=localhost" -keystore "$tmp/broker.p12"
    kt -certreq -alias broker -keystore "$tmp/broker.p12" -file "$tmp/broker.csr"
    kt -gencert -alias ca -keystore "$tmp/ca.p12" -infile "$tmp/broker.csr" -outfile "$tmp/broker.pem" -rfc \
        -validity 3650 -ext "SAN=IP:127.0.0.1,DNS:localhost" -ext KU=digitalSignature -ext EKU=serverAuth
    kt -importcert -alias ca -file "$tmp/ca.pem" -keystore "$tmp/broker.p12"
    kt -importcert -alias broker -file "$tmp/broker.pem" -keystore "$tmp/broker.p12"
    kt -genkeypair -alias other "${key[@]}" -dname "CN=streams-rs other CA" -ext bc:c -keystore "$tmp/other-ca.p12"
    kt -exportcert -rfc -alias other -keystore "$tmp/other-ca.p12" -file "$tmp/other-ca.pem"
    rm -f "$tmp/broker.csr" "$tmp/keytool.log"
    touch "$tmp/.complete"
    rm -rf "$TLS_DIR"
    mv "$tmp" "$TLS_DIR"
    say "made the test CA and broker certificate in $TLS_DIR in $(elapsed "$t0")"
}

# The line that names the secure listener and the CA certificate its clients must trust.
secure_line() {
    echo "kafka secure listener on 127.0.0.1:$KAFKA_SECURE_PORT ca $TLS_DIR/ca.pem"
}

show_logs() {
    echo "---- last lines of $LOG_DIR/server.log ----" >&2
    tail -n 40 "$LOG_DIR/server.log" >&2 2>/dev/null || true
    echo "---- $LOG_DIR/console.out ----" >&2
    tail -n 20 "$LOG_DIR/console.out" >&2 2>/dev/null || true
}

do_start() { # do_start keep|fresh [announce]
    local mode=$1 announce=${2:-} t0 pid cluster_id rc
    t0=$(now_ms)
    lock_run_dir
    if pid=$(running_pid); then
        ports_from_props
        if props_current; then
            say "Kafka $KAFKA_VERSION already running: pid $pid on 127.0.0.1:$KAFKA_PORT, run dir $KAFKA_RUN_DIR"
            secure_line
            echo "kafka listening on 127.0.0.1:$KAFKA_PORT"
            return 0
        fi
        say "the running broker (pid $pid) was started with other settings (an older kafka.sh, without the" \
            "secure listener): restarting it with the current ones"
        do_stop
    fi
    rm -f "$PID_FILE"
    if [[ $mode == keep && -f $PROPS ]]; then
        ports_from_props
    fi
    check_ports_differ
    local port
    for port in "$KAFKA_PORT" "$KAFKA_CONTROLLER_PORT" "$KAFKA_SECURE_PORT"; do
        if port_open "$port"; then
            die "port $port on 127.0.0.1 is already in use by another process, not by the broker of" \
                "$KAFKA_RUN_DIR [$(port_owner "$port")]; stop that process or choose other ports" \
                "(KAFKA_PORT=..., controller port KAFKA_CONTROLLER_PORT defaults to KAFKA_PORT+1," \
                "secure port KAFKA_SECURE_PORT to KAFKA_PORT+2)"
        fi
    done
    if [[ -n $announce ]]; then
        say "starting Kafka $KAFKA_VERSION on 127.0.0.1:$KAFKA_PORT, data in $KAFKA_RUN_DIR (a few seconds; the first time also resolves its jars from Maven Central)"
    fi
    need_java "Kafka $KAFKA_VERSION"
    resolve_kafka
    build_probe
    if [[ $mode == fresh ]]; then
        rm -rf "$DATA_DIR" "$LOG_DIR"
    fi
    mkdir -p "$DATA_DIR" "$LOG_DIR"
    make_tls
    write_props
    format_storage

    # shellcheck disable=SC2086 # KAFKA_HEAP_OPTS holds several JVM flags on purpose.
    nohup java $KAFKA_HEAP_OPTS "${JVM_OPTS[@]}" \
        -Dlog4j2.configurationFile="$LOG4J_CONFIG" -Dkafka.logs.dir="$LOG_DIR" \
        -cp "$KAFKA_LIBS/*" kafka.Kafka "$PROPS" >>"$LOG_DIR/console.out" 2>&1 </dev/null 9>&- &
    pid=$!
    echo "$pid" >"$PID_FILE"

    rc=0
    cluster_id=$(probe "$KAFKA_START_TIMEOUT" "$pid" secure) || rc=$?
    if [[ $rc -ne 0 ]]; then
        show_logs
        if kill -0 "$pid" 2>/dev/null; then
            kill -KILL "$pid" 2>/dev/null || true
        fi
        rm -f "$PID_FILE"
        if [[ $rc -eq 2 ]]; then
            die "the broker exited during startup (logs above, full log in $LOG_DIR)"
        fi
        if [[ $rc -eq 3 ]]; then
            die "the broker's SASL_SSL listener on 127.0.0.1:$KAFKA_SECURE_PORT did not work (killed it; logs above)"
        fi
        die "the broker did not answer on 127.0.0.1:$KAFKA_PORT within $KAFKA_START_TIMEOUT s (killed it; logs above)"
    fi
    say "Kafka $KAFKA_VERSION up: pid $pid, cluster id $cluster_id, run dir $KAFKA_RUN_DIR ($mode data), started in $(elapsed "$t0")"
    secure_line
    echo "kafka listening on 127.0.0.1:$KAFKA_PORT"
}

do_stop() { stop_service kafka broker "$KAFKA_RUN_DIR" "$KAFKA_STOP_TIMEOUT"; }

do_status() {
    local pid cluster_id
    if ! pid=$(running_pid); then
        say "kafka not running (run dir $KAFKA_RUN_DIR)"
        return 3
    fi
    ports_from_props
    need_java "Kafka $KAFKA_VERSION"
    build_probe
    if ! props_current; then
        # Started by an older kafka.sh: it answers, but has no secure listener.
        if cluster_id=$(probe 10 "$pid"); then
            say "kafka running: pid $pid, cluster id $cluster_id, run dir $KAFKA_RUN_DIR; started with other" \
                "settings (an older kafka.sh): no secure listener until 'bash scripts/kafka.sh restart'"
            echo "kafka listening on 127.0.0.1:$KAFKA_PORT"
            return 0
        fi
    else
        local rc=0
        cluster_id=$(probe 10 "$pid" secure) || rc=$?
        if [[ $rc -eq 0 ]]; then
            say "kafka running: pid $pid, cluster id $cluster_id, run dir $KAFKA_RUN_DIR"
            secure_line
            echo "kafka listening on 127.0.0.1:$KAFKA_PORT"
            return 0
        fi
        if [[ $rc -eq 3 ]]; then
            say "kafka process $pid answers on 127.0.0.1:$KAFKA_PORT but its SASL_SSL listener on" \
                "127.0.0.1:$KAFKA_SECURE_PORT does not work (log: $LOG_DIR/server.log)"
            return 1
        fi
    fi
    say "kafka process $pid is running but does not answer on 127.0.0.1:$KAFKA_PORT (log: $LOG_DIR/server.log)"
    return 1
}

# A broker already running and answering is left as it is; otherwise one is started keeping
# the data. A broker started with other settings (an older kafka.sh, without the secure
# listener) is restarted with the current ones, keeping its data (the probe adds the SCRAM
# users its storage lacks). Holds the lock throughout, so concurrent ensures start one broker
# between them.
do_ensure() {
    local pid cluster_id rc=0
    lock_run_dir
    if pid=$(running_pid); then
        ports_from_props
        if props_current; then
            need_java "Kafka $KAFKA_VERSION"
            build_probe
            cluster_id=$(probe "$KAFKA_START_TIMEOUT" "$pid" secure) || rc=$?
            if [[ $rc -eq 0 ]]; then
                say "Kafka $KAFKA_VERSION already running: pid $pid, cluster id $cluster_id, run dir $KAFKA_RUN_DIR"
                secure_line
                echo "kafka listening on 127.0.0.1:$KAFKA_PORT"
                return 0
            fi
            if [[ $rc -eq 3 ]]; then
                die "the broker of $KAFKA_RUN_DIR (pid $pid) answers on 127.0.0.1:$KAFKA_PORT but its SASL_SSL" \
                    "listener on 127.0.0.1:$KAFKA_SECURE_PORT does not work (log: $LOG_DIR/server.log);" \
                    "restart it with: bash scripts/kafka.sh restart"
            fi
            die "the broker of $KAFKA_RUN_DIR (pid $pid) is running but does not answer on 127.0.0.1:$KAFKA_PORT" \
                "within $KAFKA_START_TIMEOUT s (log: $LOG_DIR/server.log); restart it with: bash scripts/kafka.sh restart"
        fi
    fi
    do_start keep announce
}

case "${1:-}" in
start) do_start fresh ;;
stop) do_stop ;;
status) do_status ;;
restart)
    do_stop
    unlock_dir # release the lock between the two halves
    do_start keep
    ;;
ensure) do_ensure ;;
resolve)
    need_java "Kafka $KAFKA_VERSION"
    resolve_kafka
    echo "kafka jars in $KAFKA_LIBS"
    ;;
*)
    echo "usage: $0 start|stop|status|restart|ensure|resolve" >&2
    exit 2
    ;;
esac
