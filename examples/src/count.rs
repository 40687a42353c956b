//! A keyed count with a RocksDB store (cached, logged): the application the crash tests
//! kill and restart, and a minimal example of a stateful Processor API topology.

use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::{
    KvStore, NodeRef, ProcessResult, Processor, ProcessorContext, Record, SinkConfig, SourceConfig, Stores,
    Topology, TopologyBuilder, TopologyError,
};

/// Counts records per key and forwards each new count.
pub struct Count {
    store: KvStore<StringSerde, U64Serde>,
}

impl Count {
    /// Counts in `store`.
    pub fn new(store: KvStore<StringSerde, U64Serde>) -> Self {
        Self { store }
    }
}

impl Processor<String, String, String, u64> for Count {
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, u64>,
        r: Record<String, String>,
    ) -> ProcessResult {
        let n = self.store.get(&r.key)?.unwrap_or(0) + 1;
        self.store.put(&r.key, &n)?;
        ctx.forward(Record::new(r.key, n, r.timestamp))
    }
}

/// `input` -> count per key -> `output`.
pub fn count_topology(input: &str, output: &str) -> Result<Topology, TopologyError> {
    count_topology_with_audit(input, output, None)
}

/// [`count_topology`], and with `seen` every input record also goes unchanged to that
/// topic, from the same task: a record whose offset was committed without its being
/// processed is missing there, whatever duplicates the counts hold. The crash tests check
/// every input's identity with it.
pub fn count_topology_with_audit(
    input: &str,
    output: &str,
    seen: Option<&str>,
) -> Result<Topology, TopologyError> {
    let mut b = Topology::builder();
    let source = b.source("source", SourceConfig::new([input], StringSerde, StringSerde));
    add_count(&mut b, &source, output);
    if let Some(seen) = seen {
        b.sink(
            "seen",
            SinkConfig::topic(seen, StringSerde, StringSerde),
            [&source],
        );
    }
    b.build()
}

/// Adds to `b` the count per key of `source`'s records (processor `count`, store `counts`,
/// cached and logged) and its sink `sink` to `output`.
pub fn add_count(b: &mut TopologyBuilder, source: &NodeRef<String, String>, output: &str) {
    let counts = b.store(Stores::persistent_kv("counts", StringSerde, U64Serde).with_caching());
    let count = b.processor("count", [source], {
        let counts = counts.clone();
        move |ctx| Ok(Count::new(ctx.store(&counts)?))
    });
    b.connect(&count, &counts);
    b.sink("sink", SinkConfig::topic(output, StringSerde, U64Serde), [&count]);
}
