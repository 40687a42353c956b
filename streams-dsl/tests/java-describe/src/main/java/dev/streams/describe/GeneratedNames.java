package dev.streams.describe;

import java.time.Duration;
import java.util.Arrays;
import java.util.Map;
import java.util.Properties;
import java.util.function.Supplier;

import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.GlobalKTable;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.SlidingWindows;
import org.apache.kafka.streams.kstream.StreamJoined;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TimeWindows;

/**
 * Topologies whose steps are left unnamed, so that Kafka Streams generates every name
 * (`KSTREAM-FILTER-0000000001`, `KSTREAM-AGGREGATE-STATE-STORE-0000000003`,
 * `<store>-repartition`). Each has a twin in streams-dsl/tests/describe_java/generated_names.rs,
 * built with `StreamsBuilder::with_kafka_streams_names()` and the same steps in the same
 * order; the two must be kept in step.
 */
final class GeneratedNames {

    private GeneratedNames() {
    }

    /** The branch of a split's result whose generated name ends in `index`. */
    static KStream<String, String> branch(final Map<String, KStream<String, String>> branches, final String index) {
        return branches.entrySet().stream()
            .filter(e -> e.getKey().endsWith(index))
            .findFirst()
            .orElseThrow()
            .getValue();
    }

    /** Every stateless operator, a split and a merge. */
    static Topology stateless() {
        final StreamsBuilder b = new StreamsBuilder();
        final KStream<String, String> words = b.stream("words");
        final KStream<String, String> kept = words.filter((k, v) -> !v.isEmpty()).filterNot((k, v) -> v.isEmpty());
        kept.foreach((k, v) -> { });
        final Map<String, KStream<String, String>> branches = kept
            .mapValues(v -> v.toUpperCase())
            .flatMapValues(v -> Arrays.asList(v.split(" ")))
            .split()
            .branch((k, v) -> v.length() > 5)
            .branch((k, v) -> v.length() > 2)
            .defaultBranch();
        branch(branches, "1").to("long-words");
        branch(branches, "2").selectKey((k, v) -> v).to("short-words");
        branch(branches, "0")
            .peek((k, v) -> { })
            .map((k, v) -> KeyValue.pair(v, k))
            .merge(words.flatMap((k, v) -> Arrays.asList(KeyValue.pair(k, v))))
            .to("tiny-words");
        return b.build();
    }

    /** A word count: groupBy repartitions through a topic named after the count's store. */
    static Topology count() {
        final StreamsBuilder b = new StreamsBuilder();
        b.<String, String>stream("lines")
            .flatMapValues(v -> Arrays.asList(v.split(" ")))
            .groupBy((k, v) -> v)
            .count()
            .toStream()
            .to("counts");
        return b.build();
    }

    /** reduce without a repartition, aggregate after a key change. */
    static Topology reduce() {
        final StreamsBuilder b = new StreamsBuilder();
        b.<String, String>stream("in")
            .groupByKey()
            .reduce((a, c) -> a + c)
            .toStream()
            .to("out");
        b.<String, String>stream("in2")
            .selectKey((k, v) -> v)
            .groupByKey()
            .aggregate(() -> "", (k, v, a) -> a + v, Materialized.with(null, null))
            .toStream()
            .to("out2");
        return b.build();
    }

    /** Named steps among generated ones: a named Grouped, a named store. */
    static Topology namedSteps() {
        final StreamsBuilder b = new StreamsBuilder();
        final KStream<String, String> lines = b.stream("lines");
        lines.groupBy((k, v) -> v, Grouped.as("words")).count(Materialized.as("counts"));
        lines.selectKey((k, v) -> v).groupByKey().count(Materialized.as("by-value"));
        return b.build();
    }

    /** Tables read from topics, stream-table and table-table joins, table operators. */
    static Topology tables() {
        final StreamsBuilder b = new StreamsBuilder();
        final KTable<String, String> users = b.table("users");
        final KTable<String, String> ages = b.table("ages");
        b.<String, String>stream("orders").join(users, (o, u) -> o + u).to("enriched");
        b.<String, String>stream("orders2").leftJoin(users, (o, u) -> o + u).to("enriched2");
        users.join(ages, (n, a) -> n + a).toStream().to("joined");
        users.leftJoin(ages, (n, a) -> n + a)
            .filter((k, v) -> true)
            .mapValues(v -> v, Materialized.with(null, null))
            .toStream()
            .to("joined2");
        return b.build();
    }

    /** Time-windowed with final results, session-windowed, sliding. */
    static Topology windowed() {
        final StreamsBuilder b = new StreamsBuilder();
        b.<String, String>stream("clicks")
            .groupByKey()
            .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMinutes(5), Duration.ofMinutes(1)))
            .count()
            .suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()))
            .toStream()
            .foreach((k, v) -> { });
        b.<String, String>stream("views")
            .groupByKey()
            .windowedBy(SessionWindows.ofInactivityGapWithNoGrace(Duration.ofMinutes(5)))
            .count()
            .toStream()
            .foreach((k, v) -> { });
        b.<String, String>stream("taps")
            .groupByKey()
            .windowedBy(SlidingWindows.ofTimeDifferenceWithNoGrace(Duration.ofMinutes(5)))
            .reduce((a, c) -> a + c);
        return b.build();
    }

    /** A table re-grouped: counted; reduced and suppressed. */
    static Topology tableGroupBy() {
        final StreamsBuilder b = new StreamsBuilder();
        b.<String, String>table("t")
            .groupBy((k, v) -> KeyValue.pair(v, k))
            .count()
            .toStream()
            .to("out");
        b.<String, String>table("t2")
            .groupBy((k, v) -> KeyValue.pair(v, k))
            .reduce((a, c) -> a + c, (a, c) -> a)
            .suppress(Suppressed.untilTimeLimit(Duration.ofSeconds(1), Suppressed.BufferConfig.unbounded()));
        return b.build();
    }

    /** A global table joined twice. */
    static Topology global() {
        final StreamsBuilder b = new StreamsBuilder();
        final GlobalKTable<String, String> g = b.globalTable("g");
        b.<String, String>stream("s")
            .join(g, (k, v) -> v, (a, c) -> a + c)
            .leftJoin(g, (k, v) -> v, (a, c) -> a + c)
            .to("out");
        return b.build();
    }

    /** An explicit repartition; a stream-table join after a key change. */
    static Topology repartition() {
        final StreamsBuilder b = new StreamsBuilder();
        b.<String, String>stream("s").repartition().to("out");
        final KStream<String, String> rekeyed = b.<String, String>stream("s2").selectKey((k, v) -> v);
        rekeyed.join(b.<String, String>table("t3"), (a, c) -> a + c).to("out2");
        return b.build();
    }

    /**
     * Inner, left and outer stream-stream joins, one named. Kafka Streams writes each side's
     * window store in a node of its own (`KSTREAM-WINDOWED-`); the Rust side nodes write
     * their own store, so only the names are compared, not the graph.
     */
    static Topology streamJoins() {
        final StreamsBuilder b = new StreamsBuilder();
        final KStream<String, String> l = b.stream("left");
        final KStream<String, String> r = b.stream("right");
        final JoinWindows w = JoinWindows.ofTimeDifferenceWithNoGrace(Duration.ofMinutes(1));
        l.join(r, (a, c) -> a + c, w).to("inner");
        l.leftJoin(r, (a, c) -> a + c, w).to("left-out");
        l.outerJoin(r, (a, c) -> a + c, w, StreamJoined.<String, String, String>as("pairs").withName("both"))
            .to("outer");
        l.selectKey((k, v) -> v).join(r, (a, c) -> a + c, w).to("rekeyed");
        return b.build();
    }

    /**
     * `topology.optimization=all`: the table restores from its topic, and the two
     * aggregations and the join of one re-keyed stream share one repartition topic.
     */
    static Topology optimized() {
        final StreamsBuilder b = new StreamsBuilder();
        final KTable<String, String> users = b.table("users");
        final KStream<String, String> rekeyed = b.<String, String>stream("clicks").selectKey((k, v) -> v);
        rekeyed.groupByKey().count().toStream().to("c1");
        rekeyed.groupByKey().reduce((a, c) -> a + c).toStream().to("c2");
        rekeyed.join(users, (a, c) -> a + c).to("c3");
        final Properties props = new Properties();
        props.put(StreamsConfig.TOPOLOGY_OPTIMIZATION_CONFIG, StreamsConfig.OPTIMIZE);
        return b.build(props);
    }

    /** A cogroup of a grouped stream and a re-keyed one. */
    static Topology cogroup() {
        final StreamsBuilder b = new StreamsBuilder();
        final KGroupedStream<String, String> a = b.<String, String>stream("a").groupByKey();
        final KGroupedStream<String, String> c = b.<String, String>stream("c").selectKey((k, v) -> v).groupByKey();
        a.<String>cogroup((k, v, agg) -> agg + v)
            .cogroup(c, (k, v, agg) -> agg + v)
            .aggregate(() -> "")
            .toStream()
            .to("out");
        return b.build();
    }

    /**
     * Foreign-key joins, one with a named result store. Kafka Streams has two nodes more
     * than the Rust join, so only store and topic names are compared.
     */
    static Topology fkJoin() {
        final StreamsBuilder b = new StreamsBuilder();
        final KTable<String, String> left = b.table("left");
        final KTable<String, String> right = b.table("right");
        left.join(right, v -> v, (l, r) -> l + r).toStream().to("out");
        left.leftJoin(right, v -> v, (l, r) -> l + r, Materialized.as("fk2"));
        return b.build();
    }

    /** Adds the cases to `cases`, each named `generated-<name>`. */
    static void register(final Map<String, Supplier<Topology>> cases) {
        cases.put("generated-stateless", GeneratedNames::stateless);
        cases.put("generated-count", GeneratedNames::count);
        cases.put("generated-reduce", GeneratedNames::reduce);
        cases.put("generated-named-steps", GeneratedNames::namedSteps);
        cases.put("generated-tables", GeneratedNames::tables);
        cases.put("generated-windowed", GeneratedNames::windowed);
        cases.put("generated-table-group-by", GeneratedNames::tableGroupBy);
        cases.put("generated-global", GeneratedNames::global);
        cases.put("generated-repartition", GeneratedNames::repartition);
        cases.put("generated-stream-joins", GeneratedNames::streamJoins);
        cases.put("generated-optimized", GeneratedNames::optimized);
        cases.put("generated-cogroup", GeneratedNames::cogroup);
        cases.put("generated-fk-join", GeneratedNames::fkJoin);
    }
}
