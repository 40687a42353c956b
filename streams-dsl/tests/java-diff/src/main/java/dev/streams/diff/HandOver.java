package dev.streams.diff;

import java.time.Duration;
import java.time.Instant;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.EmitStrategy;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.StreamJoined;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TableJoined;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.WindowedSerdes;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;
import org.apache.kafka.streams.state.VersionedKeyValueStore;
import org.apache.kafka.streams.state.VersionedRecord;
import org.apache.kafka.streams.state.SessionStore;
import org.apache.kafka.streams.state.WindowStore;

/**
 * One half of a hand-over test: a Kafka Streams application on a real broker that runs
 * until its group has committed {@code COMMITTED} input records of {@code INPUT} and every
 * record of its repartition topics, then closes and leaves the group, so that another implementation can take over the same
 * {@code application.id}.
 *
 * <p>Usage: HandOver BOOTSTRAP APP_ID INPUT OUTPUT STATE_DIR TOPOLOGY COMMITTED [GUARANTEE]
 * (GUARANTEE: {@code processing.guarantee}, at_least_once by default), TOPOLOGY
 * being {@code count} (the per-key count of String records in the store {@code counts}, as
 * Long values to OUTPUT) or {@code windowed-count} (the same per 10-second window with an
 * hour of grace, in the window store {@code wcounts}, keyed by time-windowed String keys)
 * or {@code session-count} (the same per session of 5 s inactivity, in the session store
 * {@code scounts}, keyed by session-windowed String keys) or {@code table-regroup-count} (INPUT
 * read as a table in the store {@code latest}, re-grouped by value through the repartition
 * topic {@code by-group}, the keys per group counted in the store {@code gcounts}) or
 * {@code table-join} (INPUT and INPUT-right read as tables in the stores {@code left} and
 * {@code right}, joined, {@code left+right} String values to OUTPUT) or {@code stream-join}
 * (INPUT and INPUT-right joined as streams within 10 s, an hour of grace, in the stores
 * {@code sj-this-join-store} and {@code sj-other-join-store}) or {@code fk-join} (INPUT and
 * INPUT-right read as tables, INPUT's value {@code g<n>} joined with the row {@code k<n>} of
 * INPUT-right by a foreign-key join named {@code fk}, whose result store is {@code fk},
 * {@code left+right} String values to OUTPUT) or {@code suppressed-count} (the per-key count
 * per 10-second window without grace, in the window store {@code wcounts}, its final
 * results only through the suppression named {@code sup}, whose buffer is the store
 * {@code sup-store}, keyed by time-windowed String keys) or {@code emit-final-count} (the
 * per-key count per 5-second window without grace, in the window store {@code ecounts}
 * kept an hour, final results only: the close time emitted up to goes in the committed
 * offsets' processor metadata) or {@code left-join} (INPUT
 * left-joined with the stream INPUT-right within 2 s, no grace, stores named {@code lj}:
 * {@code left+right} String values, {@code left+null} for a left record without partner
 * once its window closed, which the store {@code lj-left-shared-join-store} holds until
 * then) or {@code stream-table-join} (INPUT read as a stream and joined with INPUT-right
 * read as the table {@code right}, {@code left+right} String values to OUTPUT) or
 * {@code global-join} (the same with INPUT-right read as the global table {@code right})
 * or {@code outer-join} (the same as an outer join, stores named {@code oj}, the
 * shared store {@code oj-outer-shared-join-store} holding the records of both sides, and
 * {@code null+right} for a right record without partner). COMMITTED counts the
 * committed inputs of every input topic. Prints {@code committed N} when done.
 */
public final class HandOver {
    private HandOver() {}

    /** TOPIC as a table of Strings in the store STORE. */
    private static KTable<String, String> table(StreamsBuilder b, String topic, String store) {
        return b.table(topic, Consumed.with(Serdes.String(), Serdes.String()), strings(store));
    }

    /** The key-value store STORE of String keys and values. */
    private static Materialized<String, String, KeyValueStore<Bytes, byte[]>> strings(String store) {
        return Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as(store)
                .withKeySerde(Serdes.String())
                .withValueSerde(Serdes.String());
    }

    /** TOPIC as a stream of Strings. */
    private static KStream<String, String> stream(StreamsBuilder b, String topic) {
        return b.stream(topic, Consumed.with(Serdes.String(), Serdes.String()));
    }

    /**
     * Puts, as the version of each record's key at the record's time in the versioned store
     * `versions`, one more than the key's value as of that time (0 without one), and
     * forwards it: a chain of versions that crosses every hand-over.
     */
    static final class AsOf implements Processor<String, String, String, String> {
        private ProcessorContext<String, String> context;
        private VersionedKeyValueStore<String, String> versions;

        @Override
        public void init(final ProcessorContext<String, String> context) {
            this.context = context;
            this.versions = context.getStateStore("versions");
        }

        @Override
        public void process(final Record<String, String> r) {
            final VersionedRecord<String> before = versions.get(r.key(), r.timestamp());
            final String next = Long.toString(before == null ? 1 : Long.parseLong(before.value()) + 1);
            versions.put(r.key(), next, r.timestamp());
            context.forward(r.withValue(next));
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 7 && args.length != 8) {
            throw new IllegalArgumentException(
                    "usage: HandOver BOOTSTRAP APP_ID INPUT OUTPUT STATE_DIR TOPOLOGY COMMITTED [GUARANTEE]");
        }
        String guarantee = args.length == 8 ? args[7] : StreamsConfig.AT_LEAST_ONCE;
        String bootstrap = args[0];
        String appId = args[1];
        String input = args[2];
        String output = args[3];
        String stateDir = args[4];
        String topology = args[5];
        long committed = Long.parseLong(args[6]);

        StreamsBuilder b = new StreamsBuilder();
        switch (topology) {
            case "count" -> stream(b, input)
                    .groupByKey(Grouped.with(Serdes.String(), Serdes.String()))
                    .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("counts")
                            .withKeySerde(Serdes.String())
                            .withValueSerde(Serdes.Long()))
                    .toStream()
                    .to(output, Produced.with(Serdes.String(), Serdes.Long()));
            case "versioned" -> {
                b.addStateStore(Stores.versionedKeyValueStoreBuilder(
                        Stores.persistentVersionedKeyValueStore("versions", Duration.ofHours(1)),
                        Serdes.String(), Serdes.String()));
                stream(b, input)
                        .process(AsOf::new, "versions")
                        .to(output, Produced.with(Serdes.String(), Serdes.String()));
            }
            case "unnamed-count" -> stream(b, input)
                    .selectKey((k, v) -> k)
                    .groupByKey(Grouped.with(Serdes.String(), Serdes.String()))
                    .count(Materialized.with(Serdes.String(), Serdes.Long()))
                    .toStream()
                    .to(output, Produced.with(Serdes.String(), Serdes.Long()));
            case "windowed-count" -> stream(b, input)
                    .groupByKey(Grouped.with(Serdes.String(), Serdes.String()))
                    .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofSeconds(10), Duration.ofHours(1)))
                    .count(Materialized.<String, Long, WindowStore<Bytes, byte[]>>as("wcounts")
                            .withKeySerde(Serdes.String())
                            .withValueSerde(Serdes.Long()))
                    .toStream()
                    .to(output, Produced.with(
                            WindowedSerdes.timeWindowedSerdeFrom(String.class, 10_000L), Serdes.Long()));
            case "emit-final-count" -> stream(b, input)
                    .groupByKey(Grouped.with(Serdes.String(), Serdes.String()))
                    .windowedBy(TimeWindows.ofSizeWithNoGrace(Duration.ofSeconds(5)))
                    .emitStrategy(EmitStrategy.onWindowClose())
                    .count(Materialized.<String, Long, WindowStore<Bytes, byte[]>>as("ecounts")
                            .withKeySerde(Serdes.String())
                            .withValueSerde(Serdes.Long())
                            .withRetention(Duration.ofHours(1)))
                    .toStream()
                    .to(output, Produced.with(
                            WindowedSerdes.timeWindowedSerdeFrom(String.class, 5_000L), Serdes.Long()));
            case "suppressed-count" -> stream(b, input)
                    .groupByKey(Grouped.with(Serdes.String(), Serdes.String()))
                    .windowedBy(TimeWindows.ofSizeWithNoGrace(Duration.ofSeconds(10)))
                    .count(Materialized.<String, Long, WindowStore<Bytes, byte[]>>as("wcounts")
                            .withKeySerde(Serdes.String())
                            .withValueSerde(Serdes.Long()))
                    .suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()).withName("sup"))
                    .toStream()
                    .to(output, Produced.with(
                            WindowedSerdes.timeWindowedSerdeFrom(String.class, 10_000L), Serdes.Long()));
            case "session-count" -> stream(b, input)
                    .groupByKey(Grouped.with(Serdes.String(), Serdes.String()))
                    .windowedBy(SessionWindows.ofInactivityGapAndGrace(Duration.ofSeconds(5), Duration.ofHours(1)))
                    .count(Materialized.<String, Long, SessionStore<Bytes, byte[]>>as("scounts")
                            .withKeySerde(Serdes.String())
                            .withValueSerde(Serdes.Long()))
                    .toStream()
                    .to(output, Produced.with(WindowedSerdes.sessionWindowedSerdeFrom(String.class), Serdes.Long()));
            case "unnamed-table-regroup-count" -> b.table(input, Consumed.with(Serdes.String(), Serdes.String()))
                    .groupBy((k, v) -> KeyValue.pair(v, k), Grouped.with(Serdes.String(), Serdes.String()))
                    .count(Materialized.with(Serdes.String(), Serdes.Long()))
                    .toStream()
                    .to(output, Produced.with(Serdes.String(), Serdes.Long()));
            case "table-regroup-count" -> table(b, input, "latest")
                    .groupBy((k, v) -> KeyValue.pair(v, k), Grouped.with("by-group", Serdes.String(), Serdes.String()))
                    .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("gcounts")
                            .withKeySerde(Serdes.String())
                            .withValueSerde(Serdes.Long()))
                    .toStream()
                    .to(output, Produced.with(Serdes.String(), Serdes.Long()));
            case "table-join" -> {
                KTable<String, String> left = table(b, input, "left");
                KTable<String, String> right = table(b, input + "-right", "right");
                left.join(right, (l, r) -> l + "+" + r)
                        .toStream()
                        .to(output, Produced.with(Serdes.String(), Serdes.String()));
            }
            case "fk-join" -> {
                KTable<String, String> left = table(b, input, "left");
                KTable<String, String> right = table(b, input + "-right", "right");
                left.join(right, (String v) -> "k" + v.substring(1), (l, r) -> l + "+" + r, TableJoined.as("fk"),
                                Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("fk")
                                        .withKeySerde(Serdes.String())
                                        .withValueSerde(Serdes.String()))
                        .toStream()
                        .to(output, Produced.with(Serdes.String(), Serdes.String()));
            }
            case "stream-join" -> {
                KStream<String, String> left = stream(b, input);
                KStream<String, String> right = stream(b, input + "-right");
                left.join(right, (l, r) -> l + "+" + r,
                                JoinWindows.ofTimeDifferenceAndGrace(Duration.ofSeconds(10), Duration.ofHours(1)),
                                StreamJoined.with(Serdes.String(), Serdes.String(), Serdes.String()).withStoreName("sj"))
                        .to(output, Produced.with(Serdes.String(), Serdes.String()));
            }
            case "left-join" -> {
                KStream<String, String> left = stream(b, input);
                KStream<String, String> right = stream(b, input + "-right");
                left.leftJoin(right, (l, r) -> l + "+" + r,
                                JoinWindows.ofTimeDifferenceWithNoGrace(Duration.ofSeconds(2)),
                                StreamJoined.with(Serdes.String(), Serdes.String(), Serdes.String()).withStoreName("lj"))
                        .to(output, Produced.with(Serdes.String(), Serdes.String()));
            }
            case "stream-table-join" -> stream(b, input)
                    .join(table(b, input + "-right", "right"), (l, r) -> l + "+" + r)
                    .to(output, Produced.with(Serdes.String(), Serdes.String()));
            case "global-join" -> stream(b, input)
                    .join(b.globalTable(input + "-right", Consumed.with(Serdes.String(), Serdes.String()), strings("right")),
                            (k, v) -> k, (l, r) -> l + "+" + r)
                    .to(output, Produced.with(Serdes.String(), Serdes.String()));
            case "outer-join" -> {
                KStream<String, String> left = stream(b, input);
                KStream<String, String> right = stream(b, input + "-right");
                left.outerJoin(right, (l, r) -> l + "+" + r,
                                JoinWindows.ofTimeDifferenceWithNoGrace(Duration.ofSeconds(2)),
                                StreamJoined.with(Serdes.String(), Serdes.String(), Serdes.String()).withStoreName("oj"))
                        .to(output, Produced.with(Serdes.String(), Serdes.String()));
            }
            default -> throw new IllegalArgumentException("unknown topology " + topology);
        }

        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, guarantee);
        props.put(StreamsConfig.consumerPrefix("session.timeout.ms"), 6000);
        props.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), 500);
        // Left and outer joins look for closed windows at every record, not at most once per
        // second of wall-clock time (an internal setting): what is emitted at the switch
        // then depends on the input alone, as it does in this project.
        props.put("__emit.interval.ms.kstreams.outer.join.spurious.results.fix__", 0L);
        // Likewise for emit-final windowed aggregations.
        props.put("__emit.interval.ms.kstreams.windowed.aggregation__", 0L);

        try (KafkaStreams streams = new KafkaStreams(b.build(), props);
                Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap))) {
            streams.start();
            Instant deadline = Instant.now().plus(Duration.ofSeconds(90));
            long done = 0;
            boolean repartitionsDrained = false;
            while (done < committed || !repartitionsDrained) {
                if (streams.state() == KafkaStreams.State.ERROR) {
                    throw new IllegalStateException("Kafka Streams failed after " + done + " of " + committed + " inputs");
                }
                if (Instant.now().isAfter(deadline)) {
                    throw new IllegalStateException(
                            "committed " + done + " of " + committed + " inputs in 90 s; state " + streams.state());
                }
                Thread.sleep(200);
                done = 0;
                Map<TopicPartition, OffsetAndMetadata> offsets =
                        admin.listConsumerGroupOffsets(appId).partitionsToOffsetAndMetadata().get();
                // The inputs' offsets say nothing of the records still in a repartition
                // topic (or a foreign-key join's subscription and response topics): the
                // application stops only once those are consumed too, on every partition,
                // including one the group has not committed yet (its records are not).
                for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
                    if (e.getKey().topic().startsWith(input) && e.getValue() != null) {
                        done += e.getValue().offset();
                    }
                }
                List<String> internal = admin.listTopics().names().get().stream()
                        .filter(topic -> topic.startsWith(appId) && (topic.endsWith("-repartition")
                                || topic.endsWith("-subscription-registration-topic")
                                || topic.endsWith("-subscription-response-topic")))
                        .toList();
                Map<TopicPartition, OffsetSpec> repartitions = new HashMap<>();
                for (TopicDescription topic : admin.describeTopics(internal).allTopicNames().get().values()) {
                    for (TopicPartitionInfo partition : topic.partitions()) {
                        repartitions.put(new TopicPartition(topic.name(), partition.partition()), OffsetSpec.latest());
                    }
                }
                repartitionsDrained = true;
                if (!repartitions.isEmpty()) {
                    var ends = admin.listOffsets(repartitions).all().get();
                    // Under exactly-once the log ends with the last transaction's marker,
                    // one offset past the last record consumed.
                    long marker = StreamsConfig.AT_LEAST_ONCE.equals(guarantee) ? 0 : 1;
                    for (TopicPartition tp : repartitions.keySet()) {
                        OffsetAndMetadata at = offsets.get(tp);
                        long end = ends.get(tp).offset();
                        if (end > 0 && (at == null || at.offset() < end - marker)) {
                            repartitionsDrained = false;
                        }
                    }
                }
            }
            if (!streams.close(new KafkaStreams.CloseOptions().leaveGroup(true).timeout(Duration.ofSeconds(30)))) {
                throw new IllegalStateException("Kafka Streams did not close within 30 s");
            }
            System.out.println("committed " + done);
        }
    }
}
