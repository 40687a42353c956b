//! `TopologyBuilder::use_source_topic_as_changelog`: what `build()` accepts and rejects, and
//! what the built topology says of the store (no changelog topic of its own).

use streams_core::serdes::StringSerde;
use streams_core::state::KvStore;
use streams_core::{
    ProcessResult, Processor, ProcessorContext, Record, SourceValues, Stores, Topology, TopologyBuilder,
    TopologyIssue,
};

/// Keeps the latest value per key.
struct Keep {
    store: KvStore<StringSerde, StringSerde>,
}
impl Processor<String, String> for Keep {
    fn process(&mut self, _: &mut ProcessorContext<'_, (), ()>, r: Record<String, String>) -> ProcessResult {
        self.store.put(&r.key, &r.value)?;
        Ok(())
    }
}

/// A source of `topic`, a processor keeping it in store `table` (logged if `logged`), and an
/// unrelated source of `other`.
fn table(logged: bool) -> TopologyBuilder {
    let mut b = Topology::builder();
    b.add_source("src", ["users"], StringSerde, StringSerde)
        .add_source("other-src", ["other"], StringSerde, StringSerde)
        .add_processor_with(
            "keep",
            |ctx: &mut ProcessorContext<'_, (), ()>| {
                Ok(Keep {
                    store: ctx.kv_store("table")?,
                })
            },
            ["src"],
        );
    let store = Stores::in_memory_kv("table", StringSerde, StringSerde);
    if logged {
        b.add_state_store(store, ["keep"]);
    } else {
        b.add_state_store(store.without_logging(), ["keep"]);
    }
    b
}

fn store_issue(b: &TopologyBuilder) -> String {
    let issues = b.build().expect_err("build must fail").0;
    match issues.as_slice() {
        [TopologyIssue::Store { store, message }] => format!("{store}: {message}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_unlogged_store_restores_from_its_own_source_topic() {
    let mut b = table(false);
    b.use_source_topic_as_changelog("table", "users", SourceValues::Plain);
    let topology = b.build().unwrap();
    assert_eq!(topology.source_changelog("table"), Some("users"));
    assert!(topology.logged_stores().is_empty());

    let topology = table(true).build().unwrap();
    assert_eq!(topology.source_changelog("table"), None);
    assert_eq!(topology.logged_stores(), [(0, "table".to_owned())]);
}

#[test]
fn a_logged_store_unknown_store_or_foreign_topic_is_rejected() {
    let mut b = table(true);
    b.use_source_topic_as_changelog("table", "users", SourceValues::Plain);
    assert!(
        store_issue(&b).contains("must be built without logging"),
        "{}",
        store_issue(&b)
    );

    let mut b = table(false);
    b.use_source_topic_as_changelog("nope", "users", SourceValues::Plain);
    assert!(store_issue(&b).starts_with("nope: "), "{}", store_issue(&b));

    let mut b = table(false);
    b.use_source_topic_as_changelog("table", "other", SourceValues::Timestamped);
    assert!(
        store_issue(&b).contains("which no source of its sub-topology reads"),
        "{}",
        store_issue(&b)
    );
}
