package dev.streams.bench;

import java.io.IOException;
import java.io.InputStream;
import java.time.Duration;
import java.util.Properties;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;

/**
 * The Java side of the side-by-side benchmark: the same Processor API topologies as
 * benches/src/bin/side_by_side.rs, run until standard input closes.
 *
 * <p>Usage: BenchApp BOOTSTRAP APP_ID INPUT OUTPUT STATE_DIR WORKLOAD GUARANTEE COMMIT_MS
 * CACHE_BYTES THREADS, WORKLOAD being {@code map}, {@code filtermap} or {@code count}.
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

    static Topology topology(String workload, String input, String output) {
        Topology t = new Topology();
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
