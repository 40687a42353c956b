package dev.streams.bench;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.zip.CRC32;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;

/**
 * The Java side of the side-by-side benchmark: the same Processor API topologies as
 * benches/src/bin/side_by_side.rs, run until standard input closes.
 *
 * <p>Usage: BenchApp BOOTSTRAP APP_ID INPUT OUTPUT STATE_DIR WORKLOAD GUARANTEE COMMIT_MS
 * CACHE_BYTES THREADS, WORKLOAD being {@code map}, {@code filtermap}, {@code count}, {@code join10},
 * {@code join100}, {@code avro} (a map through Avro serdes, the registry's URL in the
 * environment variable SCHEMA_REGISTRY_URL) or a Nexmark query ({@code q0} ... {@code q11}, see
 * Nexmark.java).
 */
public final class BenchApp {
    private BenchApp() {}

    /** Forwards every record unchanged (a String-to-String map through the serdes). */
    static final class PassThrough implements Processor<String, String, String, String> {
        private ProcessorContext<String, String> ctx;

        @Override
        public void init(ProcessorContext<String, String> context) {
            this.ctx = context;
        }

        @Override
        public void process(Record<String, String> r) {
            ctx.forward(r);
        }
    }

    /** Keeps records whose key ends in an even digit and upper-cases their value. */
    static final class FilterMap implements Processor<String, String, String, String> {
        private ProcessorContext<String, String> ctx;

        @Override
        public void init(ProcessorContext<String, String> context) {
            this.ctx = context;
        }

        @Override
        public void process(Record<String, String> r) {
            String k = r.key();
            if (k == null || k.isEmpty()) {
                return;
            }
            char last = k.charAt(k.length() - 1);
            if (last < '0' || last > '9' || (last - '0') % 2 != 0) {
                return;
            }
            ctx.forward(r.withValue(r.value().toUpperCase(java.util.Locale.ROOT)));
        }
    }

    /** Counts records per key in the store "counts" and forwards each new count. */
    static final class Count implements Processor<String, String, String, Long> {
        private ProcessorContext<String, Long> ctx;
        private KeyValueStore<String, Long> store;

        @Override
        public void init(ProcessorContext<String, Long> context) {
            this.ctx = context;
            this.store = context.getStateStore("counts");
        }

        @Override
        public void process(Record<String, String> r) {
            Long old = store.get(r.key());
            long n = old == null ? 1L : old + 1L;
            store.put(r.key(), n);
            ctx.forward(r.withValue(n));
        }
    }

    /** The store of the join10 / join100 workloads, keyed {@code %06d(user):%04d(hook)}. */
    static final String JOIN_STORE = "hooks";

    private static int env(String name, int dflt) {
        String v = System.getenv(name);
        return v == null || v.isEmpty() ? dflt : Integer.parseInt(v);
    }

    /**
     * The join10 / join100 processor: at init it fills the store with {@code rows} hooks for
     * every user whose input key ({@code key-%05d}) the preload (librdkafka's default
     * partitioner: CRC-32 of the key modulo the partition count, from the environment
     * variables KEYS and PARTITIONS) wrote to this task's partition; each record then
     * prefix-scans {@code %06d(user):} and forwards the input key with the number of rows.
     */
    static final class PrefixJoin implements Processor<String, String, String, String> {
        private final int rows;
        private ProcessorContext<String, String> ctx;
        private KeyValueStore<String, String> store;

        PrefixJoin(int rows) {
            this.rows = rows;
        }

        @Override
        public void init(ProcessorContext<String, String> context) {
            this.ctx = context;
            this.store = context.getStateStore(JOIN_STORE);
            int keys = env("KEYS", 10000);
            int partitions = env("PARTITIONS", 4);
            int partition = context.taskId().partition();
            List<KeyValue<String, String>> entries = new ArrayList<>();
            for (int user = 0; user < keys; user++) {
                CRC32 crc = new CRC32();
                crc.update(String.format("key-%05d", user).getBytes(StandardCharsets.UTF_8));
                if (crc.getValue() % partitions != partition) {
                    continue;
                }
                for (int hook = 0; hook < rows; hook++) {
                    entries.add(KeyValue.pair(
                            String.format("%06d:%04d", user, hook),
                            "https://hooks.example/" + user + "/" + hook));
                }
            }
            store.putAll(entries);
        }

        @Override
        public void process(Record<String, String> r) {
            int user = Integer.parseInt(r.key().substring("key-".length()));
            long found = 0;
            try (KeyValueIterator<String, String> it =
                    store.prefixScan(String.format("%06d:", user), new StringSerializer())) {
                while (it.hasNext()) {
                    it.next();
                    found++;
                }
            }
            ctx.forward(r.withValue(Long.toString(found)));
        }
    }

    /** The avro workload's schema: the same as benches/src/bin/side_by_side/apps.rs. */
    static final String AVRO_SCHEMA = "{\"type\":\"record\",\"name\":\"Event\",\"namespace\":\"bench\",\"fields\":["
            + "{\"name\":\"id\",\"type\":\"long\"},{\"name\":\"user\",\"type\":\"string\"},"
            + "{\"name\":\"item\",\"type\":\"string\"},{\"name\":\"category\",\"type\":\"string\"},"
            + "{\"name\":\"price\",\"type\":\"double\"},{\"name\":\"quantity\",\"type\":\"int\"},"
            + "{\"name\":\"ts\",\"type\":\"long\"},{\"name\":\"country\",\"type\":\"string\"},"
            + "{\"name\":\"gift\",\"type\":\"boolean\"},{\"name\":\"note\",\"type\":\"string\"}]}";

    /** Forwards every Avro record unchanged: decoded by the source, encoded again by the sink. */
    static final class AvroPassThrough
            implements Processor<String, org.apache.avro.generic.GenericRecord, String, org.apache.avro.generic.GenericRecord> {
        private ProcessorContext<String, org.apache.avro.generic.GenericRecord> ctx;

        @Override
        public void init(ProcessorContext<String, org.apache.avro.generic.GenericRecord> context) {
            this.ctx = context;
        }

        @Override
        public void process(Record<String, org.apache.avro.generic.GenericRecord> r) {
            ctx.forward(r);
        }
    }

    static Topology topology(String workload, String input, String output) {
        if (workload.matches("q[0-9]+")) {
            return Nexmark.topology(workload, input, output);
        }
        Topology t = new Topology();
        if (workload.equals("avro")) {
            AvroSerde avro = new AvroSerde(System.getenv("SCHEMA_REGISTRY_URL"), AVRO_SCHEMA);
            t.addSource("source", Serdes.String().deserializer(), avro.deserializer(), input);
            t.addProcessor("map", AvroPassThrough::new, "source");
            t.addSink("sink", output, Serdes.String().serializer(), avro.serializer(), "map");
            return t;
        }
        t.addSource("source", Serdes.String().deserializer(), Serdes.String().deserializer(), input);
        switch (workload) {
            case "map":
                t.addProcessor("map", PassThrough::new, "source");
                t.addSink("sink", output, Serdes.String().serializer(), Serdes.String().serializer(), "map");
                break;
            case "filtermap":
                t.addProcessor("filtermap", FilterMap::new, "source");
                t.addSink("sink", output, Serdes.String().serializer(), Serdes.String().serializer(), "filtermap");
                break;
            case "count":
                t.addProcessor("count", Count::new, "source");
                t.addStateStore(
                        Stores.keyValueStoreBuilder(
                                        Stores.persistentKeyValueStore("counts"), Serdes.String(), Serdes.Long())
                                .withCachingEnabled()
                                .withLoggingEnabled(new java.util.HashMap<>()),
                        "count");
                t.addSink("sink", output, Serdes.String().serializer(), Serdes.Long().serializer(), "count");
                break;
            case "join10":
            case "join100":
                int rows = workload.equals("join10") ? 10 : 100;
                t.addProcessor("join", () -> new PrefixJoin(rows), "source");
                t.addStateStore(
                        Stores.keyValueStoreBuilder(
                                        Stores.persistentKeyValueStore(JOIN_STORE), Serdes.String(), Serdes.String())
                                .withLoggingDisabled(),
                        "join");
                t.addSink("sink", output, Serdes.String().serializer(), Serdes.String().serializer(), "join");
                break;
            default:
                throw new IllegalArgumentException("unknown workload " + workload);
        }
        return t;
    }

    public static void main(String[] args) throws IOException {
        if (args.length != 10) {
            System.err.println("usage: BenchApp BOOTSTRAP APP_ID INPUT OUTPUT STATE_DIR WORKLOAD GUARANTEE COMMIT_MS CACHE_BYTES THREADS");
            System.exit(2);
        }
        Properties p = new Properties();
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        p.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, args[6]);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, args[7]);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, args[8]);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, args[9]);
        p.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        KafkaStreams app = new KafkaStreams(topology(args[5], args[2], args[3]), p);
        app.start();
        System.out.println("started");
        System.out.flush();
        InputStream in = System.in;
        byte[] buf = new byte[256];
        while (in.read(buf) >= 0) {
            // Runs until standard input closes.
        }
        app.close(Duration.ofSeconds(30));
    }
}
