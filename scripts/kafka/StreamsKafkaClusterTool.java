import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListTopicsOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.QuorumInfo;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Admin-client helper of scripts/kafka-cluster.sh. Exit 1: error or no answer in time, 2: a node process exited.
 *   cluster BOOTSTRAP TIMEOUT_S IDS NODE:PID,...  until describeCluster lists exactly the broker ids IDS (1,2,3),
 *       the group coordinator answers and a transactional producer initializes; prints the cluster id
 *   node OWN_BOOTSTRAP BOOTSTRAP TIMEOUT_S ID PID  until node ID lists itself through its own listener, then until it
 *       is in the ISR of every partition it replicates that has a leader; prints "REGISTERED_MS IN_SYNC LEADERLESS"
 *   fenced BOOTSTRAP TIMEOUT_S ID        until describeCluster no longer lists broker ID (the controller has
 *       fenced it: its partitions have other leaders); prints the milliseconds waited
 *   leader BOOTSTRAP TOPIC PARTITION     the leader id, or none
 *   controller CONTROLLERS               the active controller (quorum leader) id, or none
 *   describe BOOTSTRAP TOPIC             one line per partition
 *   create-topic BOOTSTRAP TOPIC PARTITIONS RF [KEY=VALUE...]
 *   transactions BOOTSTRAP PREFIX        one line "ID STATE" per transactional id starting with PREFIX
 *   delete-topic BOOTSTRAP TOPIC         deletes the topic and waits until the cluster no longer lists it
 */
public final class StreamsKafkaClusterTool {
    static final class Fail extends Exception {
        final int code;
        Fail(int code, String message) {
            super(message);
            this.code = code;
        }
    }

    interface Call<T> {
        T apply(Admin admin) throws Exception;
    }

    static Admin admin(String bootstrap, int apiTimeoutMs) {
        return admin(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap, apiTimeoutMs);
    }

    static Admin admin(String bootstrapKey, String bootstrap, int apiTimeoutMs) {
        Properties p = new Properties();
        p.put(bootstrapKey, bootstrap);
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, "streams-rs-cluster-tool");
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "3000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, Integer.toString(apiTimeoutMs));
        p.put(AdminClientConfig.RECONNECT_BACKOFF_MS_CONFIG, "100");
        p.put(AdminClientConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "500");
        p.put(AdminClientConfig.RETRY_BACKOFF_MS_CONFIG, "100");
        p.put(AdminClientConfig.RETRY_BACKOFF_MAX_MS_CONFIG, "500");
        return Admin.create(p);
    }

    static long deadline(String seconds) {
        return System.nanoTime() + Long.parseLong(seconds) * 1_000_000_000L;
    }

    static String cause(Exception e) {
        Throwable t = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
        return t.toString();
    }

    static String ids(Collection<Node> nodes) {
        return nodes.stream().map(n -> Integer.toString(n.id())).collect(Collectors.joining(","));
    }

    /** NODE:PID,... : fails with exit 2 when one of the processes has exited. */
    static void checkAlive(String pids) throws Fail {
        if (pids.isEmpty()) {
            return;
        }
        for (String np : pids.split(",")) {
            String[] a = np.split(":");
            long pid = Long.parseLong(a[1]);
            if (!ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false)) {
                throw new Fail(2, "node " + a[0] + " (pid " + pid + ") exited");
            }
        }
    }

    public static void main(String[] args) {
        int code = 0;
        try {
            switch (args[0]) {
                case "cluster": cluster(args[1], args[2], args[3], args.length > 4 ? args[4] : ""); break;
                case "node": node(args[1], args[2], args[3], Integer.parseInt(args[4]), args[5]); break;
                case "fenced": fenced(args[1], args[2], Integer.parseInt(args[3])); break;
                case "leader": leader(args[1], args[2], Integer.parseInt(args[3])); break;
                case "controller": controller(args[1]); break;
                case "describe": describe(args[1], args[2]); break;
                case "create-topic": createTopic(args); break;
                case "transactions": transactions(args[1], args[2]); break;
                case "delete-topic": deleteTopic(args[1], args[2]); break;
                default: throw new Fail(1, "unknown command " + args[0]);
            }
        } catch (Fail f) {
            System.err.println(f.getMessage());
            code = f.code;
        } catch (Exception e) {
            System.err.println(cause(e));
            code = 1;
        }
        System.out.flush();
        System.exit(code);
    }

    static void cluster(String bootstrap, String timeout, String wantIds, String pids) throws Exception {
        long deadline = deadline(timeout);
        String last = "no answer yet";
        try (Admin admin = admin(bootstrap, 5000)) {
            while (true) {
                checkAlive(pids);
                try {
                    DescribeClusterResult c = admin.describeCluster(new DescribeClusterOptions().timeoutMs(3000));
                    Collection<Node> nodes = c.nodes().get(5, TimeUnit.SECONDS);
                    String clusterId = c.clusterId().get(5, TimeUnit.SECONDS);
                    Set<Integer> have = new TreeSet<>();
                    nodes.forEach(n -> have.add(n.id()));
                    String haveIds = have.stream().map(String::valueOf).collect(Collectors.joining(","));
                    if (haveIds.equals(wantIds)) {
                        admin.listConsumerGroupOffsets("streams-rs-cluster-probe")
                            .partitionsToOffsetAndMetadata().get(10, TimeUnit.SECONDS);
                        Properties tp = new Properties();
                        tp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
                        tp.put(ProducerConfig.CLIENT_ID_CONFIG, "streams-rs-cluster-probe");
                        tp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "streams-rs-cluster-probe");
                        tp.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "10000");
                        try (KafkaProducer<byte[], byte[]> producer =
                                 new KafkaProducer<>(tp, new ByteArraySerializer(), new ByteArraySerializer())) {
                            producer.initTransactions();
                        }
                        System.out.println(clusterId);
                        return;
                    }
                    last = "brokers registered: [" + haveIds + "], waiting for [" + wantIds + "]";
                } catch (Exception e) {
                    last = cause(e);
                }
                if (System.nanoTime() > deadline) {
                    throw new Fail(1, "no complete answer from " + bootstrap + " within " + timeout + " s: " + last);
                }
                Thread.sleep(250);
            }
        }
    }

    static void fenced(String bootstrap, String timeout, int id) throws Exception {
        long deadline = deadline(timeout);
        long t0 = System.nanoTime();
        String last = "no answer yet";
        try (Admin admin = admin(bootstrap, 5000)) {
            while (true) {
                try {
                    Collection<Node> nodes = admin.describeCluster(new DescribeClusterOptions().timeoutMs(3000))
                        .nodes().get(5, TimeUnit.SECONDS);
                    if (nodes.stream().noneMatch(n -> n.id() == id)) {
                        System.out.println((System.nanoTime() - t0) / 1_000_000);
                        return;
                    }
                    last = "the cluster still lists brokers [" + ids(nodes) + "]";
                } catch (Exception e) {
                    last = cause(e);
                }
                if (System.nanoTime() > deadline) {
                    throw new Fail(1, "node " + id + " was not fenced within " + timeout + " s: " + last);
                }
                Thread.sleep(250);
            }
        }
    }

    static void node(String own, String bootstrap, String timeout, int id, String pid) throws Exception {
        long deadline = deadline(timeout);
        long t0 = System.nanoTime();
        String pids = id + ":" + pid;
        String last = "no answer yet";
        try (Admin admin = admin(own, 5000)) {
            while (true) {
                checkAlive(pids);
                try {
                    Collection<Node> nodes = admin.describeCluster(new DescribeClusterOptions().timeoutMs(3000))
                        .nodes().get(5, TimeUnit.SECONDS);
                    if (nodes.stream().anyMatch(n -> n.id() == id)) {
                        break;
                    }
                    last = "it lists brokers [" + ids(nodes) + "] without itself";
                } catch (Exception e) {
                    last = cause(e);
                }
                if (System.nanoTime() > deadline) {
                    throw new Fail(1, "node " + id + " did not answer on " + own + " within " + timeout + " s: " + last);
                }
                Thread.sleep(250);
            }
        }
        long registeredMs = (System.nanoTime() - t0) / 1_000_000;
        last = "no answer yet";
        try (Admin admin = admin(bootstrap, 10000)) {
            while (true) {
                checkAlive(pids);
                try {
                    Set<String> names = admin.listTopics(new ListTopicsOptions().listInternal(true)).names()
                        .get(10, TimeUnit.SECONDS);
                    Map<String, TopicDescription> topics = names.isEmpty() ? Map.of()
                        : admin.describeTopics(names).allTopicNames().get(10, TimeUnit.SECONDS);
                    int inSync = 0;
                    int leaderless = 0;
                    List<String> behind = new ArrayList<>();
                    for (TopicDescription t : topics.values()) {
                        for (TopicPartitionInfo p : t.partitions()) {
                            if (p.replicas().stream().noneMatch(n -> n.id() == id)) {
                                continue;
                            }
                            if (p.leader() == null || p.leader().id() < 0) {
                                leaderless++;
                            } else if (p.isr().stream().anyMatch(n -> n.id() == id)) {
                                inSync++;
                            } else {
                                behind.add(t.name() + "-" + p.partition());
                            }
                        }
                    }
                    if (behind.isEmpty()) {
                        System.out.println(registeredMs + " " + inSync + " " + leaderless);
                        return;
                    }
                    last = "not yet in the ISR of " + behind.size() + " partitions, e.g. "
                        + behind.subList(0, Math.min(5, behind.size()));
                } catch (Exception e) {
                    last = cause(e);
                }
                if (System.nanoTime() > deadline) {
                    throw new Fail(1, "node " + id + " is registered but not back in sync within " + timeout + " s: " + last);
                }
                Thread.sleep(250);
            }
        }
    }

    /**
     * One question, asked again with a new Admin client until it is answered or 30 s have passed.
     * Right after a node is paused or killed an Admin client may keep sending to it (to the
     * controller it knew, or a broker forwarding to it) until its API time-out; a new client
     * starts from the current metadata.
     */
    static <T> T retrying(String bootstrapKey, String bootstrap, Call<T> call) throws Exception {
        long deadline = System.nanoTime() + 30_000_000_000L;
        while (true) {
            Exception last;
            Admin admin = admin(bootstrapKey, bootstrap, 6000);
            try {
                return call.apply(admin);
            } catch (Fail f) {
                throw f;
            } catch (Exception e) {
                last = e;
            } finally {
                admin.close(Duration.ofSeconds(1));
            }
            if (System.nanoTime() > deadline) {
                throw new Fail(1, "no answer from " + bootstrap + " within 30 s: " + cause(last));
            }
            Thread.sleep(200);
        }
    }

    static TopicDescription topic(Admin admin, String name) throws Exception {
        try {
            return admin.describeTopics(List.of(name)).allTopicNames().get(30, TimeUnit.SECONDS).get(name);
        } catch (ExecutionException e) {
            if (e.getCause() instanceof UnknownTopicOrPartitionException) {
                throw new Fail(1, "topic " + name + " does not exist");
            }
            throw e;
        }
    }

    static String leaderOf(TopicPartitionInfo p) {
        return p.leader() == null || p.leader().id() < 0 ? "none" : Integer.toString(p.leader().id());
    }

    static void leader(String bootstrap, String name, int partition) throws Exception {
        TopicDescription t = retrying(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap, a -> topic(a, name));
        for (TopicPartitionInfo p : t.partitions()) {
            if (p.partition() == partition) {
                System.out.println(leaderOf(p));
                return;
            }
        }
        throw new Fail(1, "topic " + name + " has no partition " + partition + " (it has " + t.partitions().size() + ")");
    }

    /** Asks the controllers themselves (bootstrap.controllers): a broker forwards to the one it knows. */
    static void controller(String controllers) throws Exception {
        QuorumInfo q = retrying(AdminClientConfig.BOOTSTRAP_CONTROLLERS_CONFIG, controllers,
            a -> a.describeMetadataQuorum().quorumInfo().get(30, TimeUnit.SECONDS));
        System.out.println(q.leaderId() < 0 ? "none" : Integer.toString(q.leaderId()));
    }

    static void describe(String bootstrap, String name) throws Exception {
        TopicDescription t = retrying(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap, a -> topic(a, name));
        for (TopicPartitionInfo p : t.partitions()) {
            System.out.println(name + " partition " + p.partition() + " leader " + leaderOf(p) + " replicas "
                + ids(p.replicas()) + " isr " + ids(p.isr()) + " elr " + ids(p.elr()));
        }
    }

    static void createTopic(String[] args) throws Exception {
        String bootstrap = args[1];
        String name = args[2];
        int partitions = Integer.parseInt(args[3]);
        short rf = Short.parseShort(args[4]);
        Map<String, String> configs = new HashMap<>();
        for (int i = 5; i < args.length; i++) {
            int eq = args[i].indexOf("=");
            if (eq <= 0) {
                throw new Fail(1, "topic config must be KEY=VALUE, not " + args[i]);
            }
            configs.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        try (Admin admin = admin(bootstrap, 15000)) {
            admin.createTopics(List.of(new NewTopic(name, partitions, rf).configs(configs))).all().get(20, TimeUnit.SECONDS);
            long deadline = System.nanoTime() + 30_000_000_000L;
            String last = "";
            while (true) {
                try {
                    TopicDescription t = topic(admin, name);
                    long leaderless = t.partitions().stream().filter(p -> leaderOf(p).equals("none")).count();
                    if (t.partitions().size() == partitions && leaderless == 0) {
                        return;
                    }
                    last = leaderless + " partitions without a leader";
                } catch (Exception e) {
                    last = cause(e);
                }
                if (System.nanoTime() > deadline) {
                    throw new Fail(1, "topic " + name + " created, but not every partition has a leader after 30 s: " + last);
                }
                Thread.sleep(200);
            }
        }
    }

    /** Every transactional id of the cluster that starts with PREFIX, and the state of its transaction. */
    static void transactions(String bootstrap, String prefix) throws Exception {
        Collection<TransactionListing> all = retrying(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap,
            a -> a.listTransactions().all().get(30, TimeUnit.SECONDS));
        for (TransactionListing t : all) {
            if (t.transactionalId().startsWith(prefix)) {
                System.out.println(t.transactionalId() + " " + t.state());
            }
        }
    }

    static void deleteTopic(String bootstrap, String name) throws Exception {
        try (Admin admin = admin(bootstrap, 15000)) {
            admin.deleteTopics(List.of(name)).all().get(20, TimeUnit.SECONDS);
            long deadline = System.nanoTime() + 30_000_000_000L;
            while (admin.listTopics().names().get(10, TimeUnit.SECONDS).contains(name)) {
                if (System.nanoTime() > deadline) {
                    throw new Fail(1, "topic " + name + " deleted, but still listed after 30 s");
                }
                Thread.sleep(200);
            }
        }
    }
}
