package dev.streams.describe;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.Supplier;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Branched;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.GlobalKTable;
import org.apache.kafka.streams.kstream.Joined;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Named;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.processor.RecordContext;
import org.apache.kafka.streams.processor.TopicNameExtractor;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.StoreBuilder;
import org.apache.kafka.streams.state.Stores;

/**
 * Builds the topologies of streams-dsl/tests/describe_java.rs with Kafka Streams and prints
 * each one's describe() text between two marker lines:
 *
 * <pre>
 * === BEGIN name ===
 * (the text, byte for byte)
 * === END name ===
 * </pre>
 *
 * The text is followed by one newline of the marker's own before the END line. Each case
 * here has a twin of the same name in describe_java.rs, built with the Rust APIs; the two
 * must be kept in step.
 */
public final class DescribeTopologies {

    private DescribeTopologies() {
    }

    /** A processor that does nothing: describe() only shows names, edges and stores. */
    static final class Noop implements Processor<String, String, String, String> {
        @Override
        public void process(final Record<String, String> record) {
        }
    }

    /** The processor of a global store, which forwards nothing. */
    static final class Updater implements Processor<String, String, Void, Void> {
        @Override
        public void process(final Record<String, String> record) {
        }
    }

    /** The topic-name extractor of the Processor API cases; describe() prints its toString(). */
    static final class RouteByRegion implements TopicNameExtractor<String, String> {
        @Override
        public String extract(final String key, final String value, final RecordContext context) {
            return "orders-" + key;
        }

        @Override
        public String toString() {
            return "RouteByRegion";
        }
    }

    static StoreBuilder<KeyValueStore<String, String>> kv(final String name) {
        return Stores.keyValueStoreBuilder(Stores.inMemoryKeyValueStore(name), Serdes.String(), Serdes.String());
    }

    static StoreBuilder<KeyValueStore<String, String>> global(final String name) {
        return kv(name).withLoggingDisabled();
    }

    static final StringDeserializer STR = new StringDeserializer();

    /** A chain with one store: the shape of the README's first example. */
    static Topology papiChain() {
        final Topology t = new Topology();
        t.addSource("events", "event_logs");
        t.addProcessor("join", Noop::new, "events");
        t.addStateStore(kv("web_hooks_store"), "join");
        t.addSink("out", "web_hook_requests", "join");
        return t;
    }

    /**
     * A multi-topic source, fan-out and fan-in, a processor with three stores, a sink with a
     * topic-name extractor, a sub-topology joined to another only by a shared store, and a
     * second, separate sub-topology.
     */
    static Topology papiBranching() {
        final Topology t = new Topology();
        t.addSource("orders", "orders-us", "orders-eu", "orders-apac");
        t.addSource("payments", "payments");
        t.addProcessor("validate", Noop::new, "orders");
        t.addProcessor("audit", Noop::new, "orders");
        t.addProcessor("enrich", Noop::new, "validate", "payments");
        t.addSink("valid-out", "valid-orders", "validate");
        t.addSink("routed", new RouteByRegion(), "enrich");
        t.addProcessor("fanout", Noop::new, "enrich");
        t.addSink("fanout-a", "fanout-a", "fanout");
        t.addSink("fanout-b", "fanout-b", "fanout");
        t.addSink("audit-out", "audit", "audit");
        t.addSource("clicks", "clicks");
        t.addProcessor("sessionize", Noop::new, "clicks");
        t.addSink("sessions-out", "sessions", "sessionize");
        t.addSource("refunds", "refunds");
        t.addProcessor("refund-check", Noop::new, "refunds");
        t.addStateStore(kv("products"));
        t.addStateStore(kv("rates"), "enrich");
        t.addStateStore(kv("customers"), "enrich");
        t.addStateStore(kv("tariffs"), "enrich");
        t.addStateStore(kv("sessions"), "sessionize");
        t.addStateStore(kv("audit-log"), "audit", "refund-check");
        t.addStateStore(kv("refund-ledger"));
        t.connectProcessorAndStateStores("enrich", "products");
        t.connectProcessorAndStateStores("refund-check", "refund-ledger");
        return t;
    }

    /** Two paths from one source meet again; a node of one path also feeds a sink. */
    static Topology papiDiamond() {
        final Topology t = new Topology();
        t.addSource("in", "input");
        t.addProcessor("left", Noop::new, "in");
        t.addProcessor("right", Noop::new, "in");
        t.addProcessor("both", Noop::new, "left", "right");
        t.addSink("side", "side-output", "right");
        t.addSink("out", "output", "both");
        return t;
    }

    /** Global stores between and after ordinary sub-topologies. */
    static Topology papiGlobalInterleaved() {
        final Topology t = new Topology();
        t.addSource("a-in", "a");
        t.addSink("a-out", "a-copy", "a-in");
        t.addGlobalStore(global("lookup"), "lookup-source", STR, STR, "lookup", "lookup-updater", Updater::new);
        t.addSource("b-in", "b");
        t.addProcessor("b-proc", Noop::new, "b-in");
        t.addSink("b-out", "b-copy", "b-proc");
        t.addGlobalStore(global("geo"), "geo-source", STR, STR, "geo", "geo-updater", Updater::new);
        return t;
    }

    /** A global store added before the only ordinary sub-topology. */
    static Topology papiGlobalFirst() {
        final Topology t = new Topology();
        t.addGlobalStore(global("lookup"), "lookup-source", STR, STR, "lookup", "lookup-updater", Updater::new);
        t.addSource("in", "input");
        t.addProcessor("use-lookup", Noop::new, "in");
        t.addSink("out", "output", "use-lookup");
        return t;
    }

    /** Nothing but a global store. */
    static Topology papiGlobalOnly() {
        final Topology t = new Topology();
        t.addGlobalStore(global("lookup"), "lookup-source", STR, STR, "lookup", "lookup-updater", Updater::new);
        return t;
    }

    /**
     * filter, mapValues, split into branches, peek, foreach and to, named as the Rust DSL
     * names them (its naming rule derives names from the parent; Kafka Streams takes them
     * from Named, Consumed, Produced and Branched).
     */
    static Topology dslStateless() {
        final StreamsBuilder b = new StreamsBuilder();
        final KStream<String, String> words = b.stream("words", Consumed.as("words-source"));
        final KStream<String, String> kept = words.filter((k, v) -> !v.isEmpty(), Named.as("words-source-filter"));
        kept.foreach((k, v) -> { }, Named.as("words-source-filter-foreach"));
        final Map<String, KStream<String, String>> branches = kept
            .mapValues(v -> v.toUpperCase(), Named.as("upper"))
            .split(Named.as("upper-split"))
            .branch((k, v) -> v.length() > 5, Branched.as("-1"))
            .branch((k, v) -> v.length() > 2, Branched.as("-2"))
            .defaultBranch(Branched.as("-default"));
        branches.get("upper-split-1").to("long-words", Produced.as("upper-split-1-to"));
        branches.get("upper-split-2").to("short-words", Produced.as("upper-split-2-to"));
        branches.get("upper-split-default")
            .peek((k, v) -> { }, Named.as("upper-split-default-peek"))
            .to("tiny-words", Produced.as("upper-split-default-peek-to"));
        return b.build();
    }

    /**
     * A re-keying map, then a count by the new key through a repartition topic. Kafka
     * Streams' groupByKey would add a null-key filter node (`words-repartition-filter`) and
     * name the pair `words-repartition-sink`/`-source`; the Rust DSL, whose keys are never
     * null, writes the pair `words-sink`/`words-source` directly. This twin writes that pair
     * itself, so both sides describe the same graph.
     */
    static Topology dslRepartitionCount() {
        final StreamsBuilder b = new StreamsBuilder();
        b.stream("lines", Consumed.<String, String>as("lines-source"))
            .map((k, v) -> org.apache.kafka.streams.KeyValue.pair(v, v), Named.as("lines-source-map"))
            .to("words-repartition", Produced.as("words-sink"));
        b.stream("words-repartition", Consumed.<String, String>as("words-source"))
            .groupByKey()
            .count(Named.as("counts"), Materialized.as("counts"));
        return b.build();
    }

    /**
     * A stream-table join. The Rust DSL's table() is a source and a table node named after
     * the topic (`users-source`, `users-table`); Kafka Streams' table() names its table node
     * `<Consumed name>-table-source`, so this twin reads the table with stream().toTable(),
     * which takes both names as given and builds the same two nodes.
     */
    static Topology dslStreamTableJoin() {
        final StreamsBuilder b = new StreamsBuilder();
        final KTable<String, String> users = b.stream("users", Consumed.<String, String>as("users-source"))
            .toTable(Named.as("users-table"), Materialized.as("users-store"));
        b.stream("orders", Consumed.<String, String>as("orders-source"))
            .join(users, (o, u) -> o + u, Joined.as("orders-source-join"))
            .to("enriched-orders", Produced.as("orders-source-join-to"));
        return b.build();
    }

    /**
     * A table-table join. Kafka Streams names the two side nodes `<Named>-join-this` and
     * `<Named>-join-other`; the Rust DSL names them `<join>-this` and `<join>-other`. The
     * test renames Kafka's two names before comparing.
     */
    static Topology dslTableTableJoin() {
        final StreamsBuilder b = new StreamsBuilder();
        final KTable<String, String> names = b.stream("names", Consumed.<String, String>as("names-source"))
            .toTable(Named.as("names-table"), Materialized.as("names"));
        final KTable<String, String> ages = b.stream("ages", Consumed.<String, String>as("ages-source"))
            .toTable(Named.as("ages-table"), Materialized.as("ages"));
        names.join(ages, (n, a) -> n + a, Named.as("names-table-join"));
        return b.build();
    }

    /**
     * A global table and a stream joined with it. Kafka Streams names the global source
     * `<Consumed name>-source`; the Rust DSL names it `<topic>-global_source`. The test renames
     * Kafka's name before comparing.
     */
    static Topology dslGlobalTableJoin() {
        final StreamsBuilder b = new StreamsBuilder();
        final GlobalKTable<String, String> users = b.globalTable(
            "users", Consumed.as("users-global_table"), Materialized.as("users-global-store"));
        b.stream("clicks", Consumed.<String, String>as("clicks-source"))
            .join(users, (k, v) -> v, (c, u) -> c + u, Named.as("clicks-source-join_global"))
            .to("enriched-clicks", Produced.as("clicks-source-join_global-to"));
        return b.build();
    }

    public static void main(final String[] args) {
        final Map<String, Supplier<Topology>> cases = new LinkedHashMap<>();
        cases.put("papi-chain", DescribeTopologies::papiChain);
        cases.put("papi-branching", DescribeTopologies::papiBranching);
        cases.put("papi-diamond", DescribeTopologies::papiDiamond);
        cases.put("papi-global-interleaved", DescribeTopologies::papiGlobalInterleaved);
        cases.put("papi-global-first", DescribeTopologies::papiGlobalFirst);
        cases.put("papi-global-only", DescribeTopologies::papiGlobalOnly);
        cases.put("dsl-stateless", DescribeTopologies::dslStateless);
        cases.put("dsl-repartition-count", DescribeTopologies::dslRepartitionCount);
        cases.put("dsl-stream-table-join", DescribeTopologies::dslStreamTableJoin);
        cases.put("dsl-table-table-join", DescribeTopologies::dslTableTableJoin);
        cases.put("dsl-global-table-join", DescribeTopologies::dslGlobalTableJoin);
        GeneratedNames.register(cases);
        final StringBuilder out = new StringBuilder();
        for (final Map.Entry<String, Supplier<Topology>> c : cases.entrySet()) {
            out.append("=== BEGIN ").append(c.getKey()).append(" ===\n");
            out.append(c.getValue().get().describe().toString());
            out.append("\n=== END ").append(c.getKey()).append(" ===\n");
        }
        System.out.print(out);
        System.out.flush();
    }
}
