package dev.streams.diff;

import java.io.File;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.HexFormat;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.function.Consumer;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.TestOutputTopic;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.kstream.Branched;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.EmitStrategy;
import org.apache.kafka.streams.kstream.GlobalKTable;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.Joined;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Repartitioned;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.StreamJoined;
import org.apache.kafka.streams.kstream.SlidingWindows;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.Suppressed.BufferConfig;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.test.TestRecord;

/**
 * The Kafka Streams side of streams-dsl/tests/differential_java.rs.
 *
 * <p>Each case builds one topology with Kafka Streams' DSL, reads its input from
 * {@code <cases dir>/<case>.json} and pipes it through Kafka Streams' TopologyTestDriver.
 * After every input step it reads every output topic of the case (in the order the case
 * lists them) and prints each record as one JSON line:
 *
 * <pre>
 * {"case":"filter","after":3,"topic":"kept","key":"a","value":"xyz","timestamp":30}
 * </pre>
 *
 * ({@code after} is the index of the input step that produced it; a null key or value is
 * JSON null; Long values are JSON numbers). Each case ends with {@code {"case":..,"end":true}},
 * or {@code {"case":..,"error":".."}} when it threw. Windowed keys are printed as
 * {@code key@start/end} by a mapping step before {@code to()}.
 *
 * <p>Every case runs with {@code statestore.cache.max.bytes=0}, so every update is forwarded
 * at once, as streams-dsl does; with a fixed application.id and a wall clock starting at 0.
 * Each case here has a twin of the same name in differential_java.rs; the two must be kept
 * in step.
 */
public final class DiffCases {

    private DiffCases() {
    }

    private static final Serde<String> S = Serdes.String();
    private static final Serde<Long> L = Serdes.Long();

    /** An output topic of a case and how its values are read. */
    record Output(String topic, Deserializer<?> values) {
    }

    /** A case: its topology and its output topics. */
    record Case(Consumer<StreamsBuilder> build, List<Output> outputs) {
    }

    private static final Map<String, Case> CASES = new LinkedHashMap<>();

    private static Output str(final String topic) {
        return new Output(topic, new StringDeserializer());
    }

    private static Output lng(final String topic) {
        return new Output(topic, new LongDeserializer());
    }

    private static void add(final String name, final Consumer<StreamsBuilder> build, final Output... outputs) {
        CASES.put(name, new Case(build, List.of(outputs)));
    }

    private static KStream<String, String> in(final StreamsBuilder b, final String topic) {
        return b.stream(topic, Consumed.with(S, S));
    }

    private static KTable<String, String> table(final StreamsBuilder b, final String topic) {
        return b.table(topic, Consumed.with(S, S), Materialized.with(S, S));
    }

    /** Kafka Streams' global tables need a named store. */
    private static GlobalKTable<String, String> global(final StreamsBuilder b, final String topic) {
        return b.globalTable(topic, Consumed.with(S, S),
            Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as(topic + "-store")
                .withKeySerde(S).withValueSerde(S));
    }

    /**
     * A null key or value as the user functions of the twin topologies see it: streams-rs
     * hands a function the serde's reading of a null (an empty string for a string serde),
     * so each function here reads null as "" to compute what its twin computes. Whether
     * the DSL skips or passes on a null is not the functions' business, and is compared.
     */
    private static String nz(final String s) {
        return s == null ? "" : s;
    }

    /**
     * The foreign key of row {@code k} valued {@code "<fk>:<text>"}, read with the row's key
     * (KIP-1104): {@code "*"} stands for the row's own key, an empty {@code <fk>} is a null
     * foreign key.
     */
    private static String foreignKey(final String k, final String v) {
        final String fk = nz(v).split(":", -1)[0];
        if (fk.isEmpty()) {
            return null;
        }
        return fk.equals("*") ? k : fk;
    }

    private static String windowed(final Windowed<String> k) {
        return k.key() + "@" + k.window().start() + "/" + k.window().end();
    }

    /** A windowed key as `serde` writes it to a topic, in hex. */
    private static String bytes(final Serde<Windowed<String>> serde, final Windowed<String> k) {
        return HexFormat.of().formatHex(serde.serializer().serialize("counts", k));
    }

    static {
        // ---- stateless stream operators ----
        add("filter", b -> {
            final KStream<String, String> s = in(b, "in");
            s.filter((k, v) -> nz(v).length() > 2).to("kept", Produced.with(S, S));
            s.filterNot((k, v) -> nz(v).length() > 2).to("dropped", Produced.with(S, S));
        }, str("kept"), str("dropped"));
        add("map", b -> {
            final KStream<String, String> s = in(b, "in");
            s.map((k, v) -> KeyValue.pair(nz(v), nz(k))).to("swapped", Produced.with(S, S));
            s.mapValues((k, v) -> nz(k) + ":" + nz(v).toUpperCase()).to("upper", Produced.with(S, S));
            s.selectKey((k, v) -> nz(k) + "-" + nz(v).length()).to("rekeyed", Produced.with(S, S));
        }, str("swapped"), str("upper"), str("rekeyed"));
        add("flat-map", b -> {
            final KStream<String, String> s = in(b, "in");
            s.flatMap((k, v) -> {
                final List<KeyValue<String, String>> out = new ArrayList<>();
                final String[] parts = nz(v).split(",", -1);
                for (int i = 0; i < parts.length; i++) {
                    out.add(KeyValue.pair(nz(k) + i, parts[i]));
                }
                return out;
            }).to("pairs", Produced.with(S, S));
            s.flatMapValues(v -> List.of(nz(v).split(",", -1))).to("parts", Produced.with(S, S));
        }, str("pairs"), str("parts"));
        add("peek-merge", b -> {
            final KStream<String, String> left = in(b, "left").peek((k, v) -> { });
            final KStream<String, String> right = in(b, "right").mapValues(v -> "r:" + nz(v));
            left.merge(right).to("merged", Produced.with(S, S));
        }, str("merged"));
        add("split", b -> in(b, "in").split()
            .branch((k, v) -> nz(v).startsWith("a"), Branched.withConsumer(s -> s.to("starts-a", Produced.with(S, S))))
            .branch((k, v) -> nz(v).length() > 3, Branched.withConsumer(s -> s.to("long", Produced.with(S, S))))
            .defaultBranch(Branched.withConsumer(s -> s.to("other", Produced.with(S, S)))),
            str("starts-a"), str("long"), str("other"));

        // ---- grouping and aggregation ----
        add("group-by-key-count", b -> in(b, "in").groupByKey().count()
            .toStream().to("counts", Produced.with(S, L)), lng("counts"));
        add("group-by-key-reduce", b -> in(b, "in").groupByKey().reduce((a, v) -> a + "+" + nz(v))
            .toStream().to("reduced", Produced.with(S, S)), str("reduced"));
        add("group-by-key-aggregate", b -> in(b, "in").groupByKey()
            .aggregate(() -> 0L, (k, v, a) -> a + nz(v).length(), Materialized.with(S, L))
            .toStream().to("lengths", Produced.with(S, L)), lng("lengths"));
        add("group-by-count", b -> in(b, "in").groupBy((k, v) -> nz(v), Grouped.with("by-value", S, S)).count()
            .toStream().to("value-counts", Produced.with(S, L)), lng("value-counts"));
        add("map-group-by-key-count", b -> in(b, "in").map((k, v) -> KeyValue.pair(nz(v), nz(k)))
            .groupByKey(Grouped.with("swapped", S, S)).count()
            .toStream().to("counts", Produced.with(S, L)), lng("counts"));

        // ---- tables ----
        add("table-to-stream", b -> table(b, "t").toStream().to("updates", Produced.with(S, S)), str("updates"));
        // A table's deletions are null values on its stream: a stream aggregation skips them.
        add("table-to-stream-count", b -> table(b, "t").toStream().groupByKey().count()
            .toStream().to("counts", Produced.with(S, L)), lng("counts"));
        add("table-filter", b -> table(b, "t").filter((k, v) -> nz(v).length() > 2)
            .toStream().to("filtered", Produced.with(S, S)), str("filtered"));
        add("table-filter-materialized", b -> table(b, "t")
            .filter((k, v) -> nz(v).length() > 2, Materialized.with(S, S))
            .toStream().to("filtered", Produced.with(S, S)), str("filtered"));
        add("table-map-values", b -> table(b, "t").mapValues((k, v) -> k + "=" + v)
            .toStream().to("mapped", Produced.with(S, S)), str("mapped"));
        add("table-map-values-materialized", b -> table(b, "t")
            .mapValues((k, v) -> k + "=" + v, Materialized.with(S, S))
            .toStream().to("mapped", Produced.with(S, S)), str("mapped"));

        // ---- joins ----
        add("stream-table-join", b -> {
            final KTable<String, String> users = table(b, "users");
            in(b, "orders").join(users, (o, u) -> o + "/" + u).to("joined", Produced.with(S, S));
        }, str("joined"));
        add("stream-table-left-join", b -> {
            final KTable<String, String> users = table(b, "users");
            in(b, "orders").leftJoin(users, (o, u) -> o + "/" + u).to("joined", Produced.with(S, S));
        }, str("joined"));
        add("rekeyed-stream-table-join", b -> {
            final KTable<String, String> users = table(b, "users");
            in(b, "orders").selectKey((k, v) -> nz(v).split(":")[0])
                .join(users, (o, u) -> o + "/" + u, Joined.with(S, S, S)).to("joined", Produced.with(S, S));
        }, str("joined"));
        add("repartition", b -> in(b, "in").repartition(Repartitioned.<String, String>as("through")
            .withKeySerde(S).withValueSerde(S)).mapValues(v -> nz(v) + "!").to("out", Produced.with(S, S)), str("out"));
        add("table-table-join", b -> table(b, "left").join(table(b, "right"), (l, r) -> l + "/" + r)
            .toStream().to("joined", Produced.with(S, S)), str("joined"));
        add("table-table-left-join", b -> table(b, "left").leftJoin(table(b, "right"), (l, r) -> l + "/" + r)
            .toStream().to("joined", Produced.with(S, S)), str("joined"));
        add("table-table-outer-join", b -> table(b, "left").outerJoin(table(b, "right"), (l, r) -> l + "/" + r)
            .toStream().to("joined", Produced.with(S, S)), str("joined"));
        add("global-table-join", b -> {
            final GlobalKTable<String, String> g = global(b, "g");
            in(b, "in").join(g, (k, v) -> nz(v), (v, x) -> v + "/" + x).to("joined", Produced.with(S, S));
        }, str("joined"));
        add("global-table-left-join", b -> {
            final GlobalKTable<String, String> g = global(b, "g");
            in(b, "in").leftJoin(g, (k, v) -> nz(v), (v, x) -> v + "/" + x).to("joined", Produced.with(S, S));
        }, str("joined"));

        // ---- re-grouped tables: the key is the value's length ----
        add("table-group-by-count", b -> table(b, "t")
            .groupBy((k, v) -> KeyValue.pair(String.valueOf(nz(v).length()), k), Grouped.with("by-length", S, S))
            .count().toStream().to("counts", Produced.with(S, L)), lng("counts"));
        add("table-group-by-reduce", b -> table(b, "t")
            .groupBy((k, v) -> KeyValue.pair(String.valueOf(nz(v).length()), k + v), Grouped.with("by-length", S, S))
            .reduce((a, v) -> a + "+" + v, (a, v) -> a + "-" + v)
            .toStream().to("reduced", Produced.with(S, S)), str("reduced"));

        // ---- stream-stream joins: records at most 5 ms apart, 3 ms grace ----
        final JoinWindows within = JoinWindows.ofTimeDifferenceAndGrace(Duration.ofMillis(5), Duration.ofMillis(3));
        add("stream-stream-join", b -> in(b, "left").join(in(b, "right"), (l, r) -> l + "/" + r, within,
            StreamJoined.with(S, S, S)).to("joined", Produced.with(S, S)), str("joined"));
        add("stream-stream-left-join", b -> in(b, "left").leftJoin(in(b, "right"), (l, r) -> l + "/" + r, within,
            StreamJoined.with(S, S, S)).to("joined", Produced.with(S, S)), str("joined"));
        add("stream-stream-outer-join", b -> in(b, "left").outerJoin(in(b, "right"), (l, r) -> l + "/" + r, within,
            StreamJoined.with(S, S, S)).to("joined", Produced.with(S, S)), str("joined"));
        // Records that all arrive while their windows are open (10 ms apart at most, 5 ms grace).
        final JoinWindows inTime = JoinWindows.ofTimeDifferenceAndGrace(Duration.ofMillis(10), Duration.ofMillis(5));
        add("stream-stream-join-in-time", b -> in(b, "left").join(in(b, "right"), (l, r) -> l + "/" + r, inTime,
            StreamJoined.with(S, S, S)).to("joined", Produced.with(S, S)), str("joined"));
        add("stream-stream-left-join-in-time", b -> in(b, "left").leftJoin(in(b, "right"), (l, r) -> l + "/" + r,
            inTime, StreamJoined.with(S, S, S)).to("joined", Produced.with(S, S)), str("joined"));
        add("stream-stream-outer-join-in-time", b -> in(b, "left").outerJoin(in(b, "right"), (l, r) -> l + "/" + r,
            inTime, StreamJoined.with(S, S, S)).to("joined", Produced.with(S, S)), str("joined"));

        // ---- windows: 10 ms windows, 5 ms grace ----
        final Duration size = Duration.ofMillis(10);
        final Duration grace = Duration.ofMillis(5);
        add("tumbling-count", b -> in(b, "in").groupByKey()
            .windowedBy(TimeWindows.ofSizeAndGrace(size, grace)).count()
            .toStream((k, v) -> windowed(k)).to("counts", Produced.with(S, L)), lng("counts"));
        final Serde<Windowed<String>> timeKeys =
            org.apache.kafka.streams.kstream.WindowedSerdes.timeWindowedSerdeFrom(String.class, 10L);
        add("windowed-key-bytes", b -> in(b, "in").groupByKey()
            .windowedBy(TimeWindows.ofSizeAndGrace(size, grace)).count()
            .toStream((k, v) -> bytes(timeKeys, k)).to("counts", Produced.with(S, L)), lng("counts"));
        add("tumbling-aggregate", b -> in(b, "in").groupByKey()
            .windowedBy(TimeWindows.ofSizeAndGrace(size, grace))
            .aggregate(() -> "", (k, v, a) -> a + nz(v), Materialized.with(S, S))
            .toStream((k, v) -> windowed(k)).to("aggregates", Produced.with(S, S)), str("aggregates"));
        add("hopping-count", b -> in(b, "in").groupByKey()
            .windowedBy(TimeWindows.ofSizeAndGrace(size, grace).advanceBy(Duration.ofMillis(5))).count()
            .toStream((k, v) -> windowed(k)).to("counts", Produced.with(S, L)), lng("counts"));
        add("hopping-aggregate", b -> in(b, "in").groupByKey()
            .windowedBy(TimeWindows.ofSizeAndGrace(size, grace).advanceBy(Duration.ofMillis(5)))
            .aggregate(() -> "", (k, v, a) -> a + nz(v), Materialized.with(S, S))
            .toStream((k, v) -> windowed(k)).to("aggregates", Produced.with(S, S)), str("aggregates"));
        // Per-user hopping windows re-grouped into per-region windows: a value is
        // "<region>:<clicks>"; a user's window keeps its latest region and adds up the clicks,
        // and the re-grouped windows sum the clicks of the users whose latest region they are.
        final Serde<Windowed<String>> windowKeys =
            org.apache.kafka.streams.kstream.WindowedSerdes.timeWindowedSerdeFrom(String.class, 10L);
        add("hopping-group-by-reduce", b -> in(b, "in").groupByKey()
            .windowedBy(TimeWindows.ofSizeAndGrace(size, grace).advanceBy(Duration.ofMillis(5)))
            .reduce((a, v) -> nz(v).split(":")[0] + ":"
                + (Long.parseLong(a.split(":")[1]) + Long.parseLong(nz(v).split(":")[1])))
            .groupBy((w, v) -> KeyValue.pair(new Windowed<>(nz(v).split(":")[0], w.window()),
                Long.parseLong(nz(v).split(":")[1])), Grouped.with("by-region", windowKeys, L))
            .reduce(Long::sum, (a, v) -> a - v, Materialized.with(windowKeys, L))
            .toStream((k, v) -> windowed(k)).to("counts", Produced.with(S, L)), lng("counts"));
        add("windowed-table-join", b -> in(b, "left").groupByKey()
            .windowedBy(TimeWindows.ofSizeAndGrace(size, grace)).count()
            .join(in(b, "right").groupByKey().windowedBy(TimeWindows.ofSizeAndGrace(size, grace))
                .reduce((a, v) -> nz(v)), (n, v) -> n + "/" + v)
            .toStream((k, v) -> windowed(k)).to("joined", Produced.with(S, S)), str("joined"));
        add("tumbling-reduce", b -> in(b, "in").groupByKey()
            .windowedBy(TimeWindows.ofSizeAndGrace(size, grace)).reduce((a, v) -> a + "+" + nz(v))
            .toStream((k, v) -> windowed(k)).to("reduced", Produced.with(S, S)), str("reduced"));
        // Final results only: the input advances the wall clock by 1 s before each record, so
        // Kafka Streams' emit throttle (1 s of wall-clock time) lets every record emit.
        add("tumbling-count-emit-final", b -> in(b, "in").groupByKey()
            .windowedBy(TimeWindows.ofSizeAndGrace(size, grace))
            .emitStrategy(EmitStrategy.onWindowClose()).count()
            .toStream((k, v) -> windowed(k)).to("counts", Produced.with(S, L)), lng("counts"));
        add("suppress-window-close", b -> in(b, "in").groupByKey()
            .windowedBy(TimeWindows.ofSizeAndGrace(size, grace)).count()
            .suppress(Suppressed.untilWindowCloses(BufferConfig.unbounded()))
            .toStream((k, v) -> windowed(k)).to("finals", Produced.with(S, L)), lng("finals"));
        add("suppress-time-limit", b -> in(b, "in").groupByKey().count()
            .suppress(Suppressed.untilTimeLimit(Duration.ofMillis(10), BufferConfig.maxRecords(2)))
            .toStream().to("limited", Produced.with(S, L)), lng("limited"));

        // ---- sliding windows: 10 ms time difference, 5 ms grace ----
        final SlidingWindows sliding = SlidingWindows.ofTimeDifferenceAndGrace(size, grace);
        add("sliding-count", b -> in(b, "in").groupByKey().windowedBy(sliding).count()
            .toStream((k, v) -> windowed(k)).to("counts", Produced.with(S, L)), lng("counts"));
        add("sliding-aggregate", b -> in(b, "in").groupByKey().windowedBy(sliding)
            .aggregate(() -> "", (k, v, a) -> a + nz(v), Materialized.with(S, S))
            .toStream((k, v) -> windowed(k)).to("aggregates", Produced.with(S, S)), str("aggregates"));
        add("sliding-reduce", b -> in(b, "in").groupByKey().windowedBy(sliding).reduce((a, v) -> a + "+" + nz(v))
            .toStream((k, v) -> windowed(k)).to("reduced", Produced.with(S, S)), str("reduced"));
        add("sliding-count-emit-final", b -> in(b, "in").groupByKey().windowedBy(sliding)
            .emitStrategy(EmitStrategy.onWindowClose()).count()
            .toStream((k, v) -> windowed(k)).to("counts", Produced.with(S, L)), lng("counts"));
        add("sliding-count-no-grace", b -> in(b, "in").groupByKey()
            .windowedBy(SlidingWindows.ofTimeDifferenceWithNoGrace(size)).count()
            .toStream((k, v) -> windowed(k)).to("counts", Produced.with(S, L)), lng("counts"));
        add("sliding-suppress-window-close", b -> in(b, "in").groupByKey().windowedBy(sliding).count()
            .suppress(Suppressed.untilWindowCloses(BufferConfig.unbounded()))
            .toStream((k, v) -> windowed(k)).to("finals", Produced.with(S, L)), lng("finals"));
        add("hopping-count-emit-final", b -> in(b, "in").groupByKey()
            .windowedBy(TimeWindows.ofSizeAndGrace(size, grace).advanceBy(Duration.ofMillis(5)))
            .emitStrategy(EmitStrategy.onWindowClose()).count()
            .toStream((k, v) -> windowed(k)).to("counts", Produced.with(S, L)), lng("counts"));
        add("table-suppress-time-limit", b -> table(b, "t")
            .suppress(Suppressed.untilTimeLimit(Duration.ofMillis(10), BufferConfig.unbounded()))
            .toStream().to("limited", Produced.with(S, S)), str("limited"));

        // ---- session windows: 10 ms inactivity gap, 20 ms grace ----
        final SessionWindows sessions = SessionWindows.ofInactivityGapAndGrace(Duration.ofMillis(10), Duration.ofMillis(20));
        add("session-table-join", b -> in(b, "left").groupByKey().windowedBy(sessions).count()
            .leftJoin(in(b, "right").groupByKey().windowedBy(sessions).count(), (l, r) -> l + "/" + r)
            .toStream((k, v) -> windowed(k)).to("joined", Produced.with(S, S)), str("joined"));
        add("session-count", b -> in(b, "in").groupByKey().windowedBy(sessions).count()
            .toStream((k, v) -> windowed(k)).to("counts", Produced.with(S, L)), lng("counts"));
        final Serde<Windowed<String>> sessionKeys =
            new org.apache.kafka.streams.kstream.WindowedSerdes.SessionWindowedSerde<>(S);
        add("session-key-bytes", b -> in(b, "in").groupByKey().windowedBy(sessions).count()
            .toStream((k, v) -> bytes(sessionKeys, k)).to("counts", Produced.with(S, L)), lng("counts"));
        add("session-aggregate", b -> in(b, "in").groupByKey().windowedBy(sessions)
            .aggregate(() -> "", (k, v, a) -> a + nz(v), (k, a1, a2) -> a1 + "|" + a2, Materialized.with(S, S))
            .toStream((k, v) -> windowed(k)).to("aggregates", Produced.with(S, S)), str("aggregates"));
        add("session-reduce", b -> in(b, "in").groupByKey().windowedBy(sessions).reduce((a, v) -> a + "+" + nz(v))
            .toStream((k, v) -> windowed(k)).to("reduced", Produced.with(S, S)), str("reduced"));
        add("session-count-emit-final", b -> in(b, "in").groupByKey().windowedBy(sessions)
            .emitStrategy(EmitStrategy.onWindowClose()).count()
            .toStream((k, v) -> windowed(k)).to("counts", Produced.with(S, L)), lng("counts"));
        add("session-suppress-window-close", b -> in(b, "in").groupByKey().windowedBy(sessions).count()
            .suppress(Suppressed.untilWindowCloses(BufferConfig.unbounded()))
            .toStream((k, v) -> windowed(k)).to("finals", Produced.with(S, L)), lng("finals"));

        // ---- foreign-key joins: a left value "<fk>:<text>" joins the right row of key <fk> ----
        add("fk-join", b -> table(b, "left").join(table(b, "right"), (String v) -> nz(v).split(":")[0],
            (l, r) -> l + "/" + r).toStream().to("joined", Produced.with(S, S)), str("joined"));
        add("fk-left-join", b -> table(b, "left").leftJoin(table(b, "right"), (String v) -> nz(v).split(":")[0],
            (l, r) -> l + "/" + r).toStream().to("joined", Produced.with(S, S)), str("joined"));
        add("fk-join-null-key", b -> table(b, "left").join(table(b, "right"), DiffCases::foreignKey,
            (l, r) -> l + "/" + r).toStream().to("joined", Produced.with(S, S)), str("joined"));
        add("fk-left-join-null-key", b -> table(b, "left").leftJoin(table(b, "right"), DiffCases::foreignKey,
            (l, r) -> l + "/" + r).toStream().to("joined", Produced.with(S, S)), str("joined"));

        // ---- cogroup: two inputs, the second re-keyed by its value's prefix ----
        add("cogroup-aggregate", b -> {
            final var second = in(b, "b").map((k, v) -> KeyValue.pair(nz(v).split(":")[0], nz(v)))
                .groupByKey(Grouped.with("b-by-prefix", S, S));
            in(b, "a").groupByKey().<String>cogroup((k, v, agg) -> agg + "a(" + nz(v) + ")")
                .cogroup(second, (k, v, agg) -> agg + "b(" + nz(v) + ")")
                .aggregate(() -> "|", Materialized.with(S, S))
                .toStream().to("aggregates", Produced.with(S, S));
        }, str("aggregates"));
        add("cogroup-windowed-aggregate", b -> in(b, "a").groupByKey()
            .<String>cogroup((k, v, agg) -> agg + "a(" + nz(v) + ")")
            .cogroup(in(b, "b").groupByKey(), (k, v, agg) -> agg + "b(" + nz(v) + ")")
            .windowedBy(TimeWindows.ofSizeAndGrace(size, grace))
            .aggregate(() -> "|", Materialized.with(S, S))
            .toStream((k, v) -> windowed(k)).to("aggregates", Produced.with(S, S)), str("aggregates"));
    }

    private static final ObjectMapper JSON = new ObjectMapper();

    /** Runs every case (or those named after the directory) and prints their output. */
    public static void main(final String[] args) throws IOException {
        if (args.length < 1) {
            System.err.println("usage: DiffCases <cases dir> [case...]");
            System.exit(2);
        }
        final File dir = new File(args[0]);
        final List<String> names = new ArrayList<>();
        for (int i = 1; i < args.length; i++) {
            names.add(args[i]);
        }
        if (names.isEmpty()) {
            names.addAll(CASES.keySet());
        }
        // Generated inputs: "<case>~<seed>.json" in the directory, each run as its case.
        final String[] generated = dir.list((d, n) -> n.contains("~") && n.endsWith(".json"));
        if (generated != null) {
            java.util.Arrays.sort(generated);
            for (final String file : generated) {
                final String input = file.substring(0, file.length() - ".json".length());
                if (names.contains(input.substring(0, input.indexOf('~')))) {
                    names.add(input);
                }
            }
        }
        final PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        for (final String name : names) {
            final int tilde = name.indexOf('~');
            final Case c = CASES.get(tilde < 0 ? name : name.substring(0, tilde));
            try {
                if (c == null) {
                    throw new IllegalArgumentException("no case " + name);
                }
                run(name, c, JSON.readTree(new File(dir, name + ".json")), out);
                out.println(JSON.writeValueAsString(JSON.createObjectNode().put("case", name).put("end", true)));
            } catch (final RuntimeException | IOException e) {
                out.println(JSON.writeValueAsString(JSON.createObjectNode().put("case", name).put("error", e.toString())));
            }
            out.flush();
        }
    }

    private static void run(final String name, final Case c, final JsonNode input, final PrintStream out)
        throws IOException {
        final StreamsBuilder b = new StreamsBuilder();
        c.build().accept(b);
        final Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, "diff");
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "unused:9092");
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        // A state directory of its own: test binaries may run this program at the same time.
        final Path stateDir = Files.createTempDirectory("kafka-streams-diff-");
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        try (TopologyTestDriver driver = new TopologyTestDriver(b.build(), props, Instant.EPOCH)) {
            final Map<String, TestInputTopic<String, String>> inputs = new LinkedHashMap<>();
            final List<TestOutputTopic<String, ?>> outputs = new ArrayList<>();
            for (final Output o : c.outputs()) {
                outputs.add(driver.createOutputTopic(o.topic(), new StringDeserializer(), o.values()));
            }
            int step = 0;
            for (final JsonNode r : input.get("records")) {
                if (r.has("advance_wall_clock_ms")) {
                    driver.advanceWallClockTime(Duration.ofMillis(r.get("advance_wall_clock_ms").asLong()));
                } else {
                    final String topic = r.get("topic").asText();
                    final TestInputTopic<String, String> t = inputs.computeIfAbsent(topic,
                        x -> driver.createInputTopic(x, new StringSerializer(), new StringSerializer()));
                    final JsonNode key = r.get("key");
                    final JsonNode value = r.get("value");
                    t.pipeInput(key == null || key.isNull() ? null : key.asText(),
                        value == null || value.isNull() ? null : value.asText(),
                        r.get("timestamp").asLong());
                }
                for (int i = 0; i < outputs.size(); i++) {
                    for (final TestRecord<String, ?> rec : outputs.get(i).readRecordsToList()) {
                        final ObjectNode line = JSON.createObjectNode()
                            .put("case", name)
                            .put("after", step)
                            .put("topic", c.outputs().get(i).topic());
                        line.put("key", rec.key());
                        final Object v = rec.value();
                        if (v == null) {
                            line.putNull("value");
                        } else if (v instanceof Long n) {
                            line.put("value", n);
                        } else {
                            line.put("value", v.toString());
                        }
                        line.put("timestamp", rec.timestamp());
                        out.println(JSON.writeValueAsString(line));
                    }
                }
                step++;
            }
        } finally {
            try (var paths = Files.walk(stateDir)) {
                paths.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            }
        }
    }
}
