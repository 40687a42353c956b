package dev.streams.bench;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.RocksDBConfigSetter;
import org.apache.kafka.streams.state.Stores;
import org.apache.kafka.streams.state.internals.BlockBasedTableConfigWithAccessibleCache;
import org.rocksdb.Cache;
import org.rocksdb.LRUCache;
import org.rocksdb.Options;
import org.rocksdb.WriteBufferManager;

/**
 * The Java side of the bounded-memory benchmark (benches/src/bin/store_memory_kafka.rs):
 * one stream thread whose tasks each hold 4 cached, logged RocksDB stores, every input
 * record written to one of them (after a read of its key with {@code rmw}), a commit
 * requested by each task every 10,000 of its records. RocksDB is bounded as Kafka Streams'
 * memory-management docs recommend: every store shares one LRU block cache of 64 MiB, and a
 * write-buffer manager charges up to 32 MiB of memtables to it.
 *
 * <p>Usage: StoreMemoryApp BOOTSTRAP APP_ID INPUT STATE_DIR RECORDS MODE, MODE being
 * {@code writes} or {@code rmw}. Prints the time to process RECORDS records and the peak
 * RSS ({@code VmHWM}), then closes.
 */
public final class StoreMemoryApp {
    private StoreMemoryApp() {}

    static final int STORES_PER_TASK = 4;
    static final long CACHE_BYTES = 10L << 20;
    static final long BLOCK_CACHE_BYTES = 64L << 20;
    static final long WRITE_BUFFER_BYTES = 32L << 20;
    static final int COMMIT_EVERY = 10_000;

    static final AtomicLong PROCESSED = new AtomicLong();
    static final AtomicLong FIRST_NANOS = new AtomicLong();

    /** One block cache and one write-buffer manager for every store of the process. */
    public static final class BoundedRocksDb implements RocksDBConfigSetter {
        private static final Cache CACHE = new LRUCache(BLOCK_CACHE_BYTES, -1, false, 0.1);
        private static final WriteBufferManager WRITE_BUFFERS =
                new WriteBufferManager(WRITE_BUFFER_BYTES, CACHE);

        @Override
        public void setConfig(String storeName, Options options, Map<String, Object> configs) {
            BlockBasedTableConfigWithAccessibleCache table =
                    (BlockBasedTableConfigWithAccessibleCache) options.tableFormatConfig();
            table.setBlockCache(CACHE);
            table.setCacheIndexAndFilterBlocks(true);
            table.setCacheIndexAndFilterBlocksWithHighPriority(true);
            table.setPinTopLevelIndexAndFilter(true);
            options.setWriteBufferManager(WRITE_BUFFERS);
            options.setTableFormatConfig(table);
        }

        @Override
        public void close(String storeName, Options options) {
            // Shared by every store: never closed here.
        }
    }

    /** The store a key lives in: its last hex digit modulo the stores per task. */
    static int storeOf(String key) {
        int digit = Character.digit(key.charAt(key.length() - 1), 16);
        return Math.max(digit, 0) % STORES_PER_TASK;
    }

    /** Writes each record into its key's store, reading the key first when {@code rmw}. */
    static final class Writer implements Processor<String, byte[], Void, Void> {
        private final boolean rmw;
        private final KeyValueStore<String, byte[]>[] stores;
        private ProcessorContext<Void, Void> ctx;
        private long sinceCommit;

        @SuppressWarnings("unchecked")
        Writer(boolean rmw) {
            this.rmw = rmw;
            this.stores = new KeyValueStore[STORES_PER_TASK];
        }

        @Override
        public void init(ProcessorContext<Void, Void> context) {
            this.ctx = context;
            for (int i = 0; i < STORES_PER_TASK; i++) {
                stores[i] = context.getStateStore("store-" + i);
            }
        }

        @Override
        public void process(Record<String, byte[]> r) {
            KeyValueStore<String, byte[]> store = stores[storeOf(r.key())];
            if (rmw) {
                store.get(r.key());
            }
            store.put(r.key(), r.value());
            FIRST_NANOS.compareAndSet(0, System.nanoTime());
            PROCESSED.incrementAndGet();
            if (++sinceCommit >= COMMIT_EVERY) {
                sinceCommit = 0;
                ctx.commit();
            }
        }
    }

    /** A field of /proc/self/status in KiB, -1 where unavailable. */
    static long statusKib(String field) throws IOException {
        for (String line : Files.readAllLines(Path.of("/proc/self/status"), StandardCharsets.UTF_8)) {
            if (line.startsWith(field + ":")) {
                return Long.parseLong(line.substring(field.length() + 1).replace("kB", "").trim());
            }
        }
        return -1;
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 6) {
            System.err.println("usage: StoreMemoryApp BOOTSTRAP APP_ID INPUT STATE_DIR RECORDS writes|rmw");
            System.exit(2);
        }
        long records = Long.parseLong(args[4]);
        boolean rmw = args[5].equals("rmw");
        Properties p = new Properties();
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        p.put(StreamsConfig.STATE_DIR_CONFIG, args[3]);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, CACHE_BYTES);
        // Commits come from the processor's requests, every COMMIT_EVERY records.
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 3_600_000L);
        p.put(StreamsConfig.ROCKSDB_CONFIG_SETTER_CLASS_CONFIG, BoundedRocksDb.class);
        p.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");

        Topology t = new Topology();
        t.addSource("source", Serdes.String().deserializer(), Serdes.ByteArray().deserializer(), args[2]);
        t.addProcessor("writer", () -> new Writer(rmw), "source");
        for (int i = 0; i < STORES_PER_TASK; i++) {
            t.addStateStore(
                    Stores.keyValueStoreBuilder(
                                    Stores.persistentKeyValueStore("store-" + i),
                                    Serdes.String(),
                                    Serdes.ByteArray())
                            .withCachingEnabled(),
                    "writer");
        }
        KafkaStreams streams = new KafkaStreams(t, p);
        long started = System.nanoTime();
        streams.start();
        while (PROCESSED.get() < records) {
            Thread.sleep(20);
        }
        long done = System.nanoTime();
        long peak = statusKib("VmHWM");
        String load = Files.readString(Path.of("/proc/loadavg")).trim();
        System.out.printf(
                "java %s: %d records in %.1f s from start (%.1f s from the first record), peak RSS (VmHWM) %.1f MiB,"
                        + " max heap %d MiB, load average %s%n",
                rmw ? "read-modify-write" : "writes",
                records,
                (done - started) / 1e9,
                (done - FIRST_NANOS.get()) / 1e9,
                peak / 1024.0,
                Runtime.getRuntime().maxMemory() >> 20,
                load);
        streams.close();
    }
}
