//! This runtime's twins of `HandOver.java`'s topologies: the same steps, store names and
//! topics.

use std::time::Duration;

use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::state::VersionedKeyValueStore;
use streams_core::state::serde::NullableSerde;
use streams_core::{
    ProcessResult, Processor, ProcessorContext, Record, SinkConfig, SourceConfig, Stores, Topology,
};
use streams_dsl::{
    BufferConfig, Consumed, EmitStrategy, Grouped, JoinWindows, Materialized, Produced, SessionWindowedSerde,
    SessionWindows, StreamJoined, StreamsBuilder, Suppressed, TimeWindows, WindowedSerde,
};

use super::topo::{FINAL_WINDOW, Topo, WINDOW};

/// The twin of `topo` reading `input` (and `right`, the second input) and writing `output`.
pub fn topology(topo: Topo, input: &str, right: &str, output: &str) -> Topology {
    let b = if matches!(topo, Topo::UnnamedCount | Topo::UnnamedTableRegroup) {
        StreamsBuilder::new().with_kafka_streams_names()
    } else {
        StreamsBuilder::new()
    };
    // A topic read as a stream of Strings.
    let stream = |topic: &str| b.stream([topic], Consumed::with(StringSerde, StringSerde));
    let grouped = || stream(input).group_by_key(Grouped::new());
    let counts = Materialized::as_(topo.store());
    // A String table's store.
    let strings = |store: &str| {
        Materialized::as_(store)
            .with_key_serde(StringSerde)
            .with_value_serde(StringSerde)
    };
    // The input and `<input>-right` as String tables in the stores `left` and `right`.
    let tables = || (b.table(input, strings("left")), b.table(right, strings("right")));
    match topo {
        // The Processor API, no DSL.
        Topo::Versioned => return versioned(input, output),
        Topo::Count => grouped()
            .count(counts)
            .to_stream()
            .to(output, Produced::with(StringSerde, NullableSerde(U64Serde))),
        Topo::UnnamedCount => stream(input)
            .select_key(|k: &String, _: &String| k.clone())
            .group_by_key(Grouped::with(StringSerde, StringSerde))
            .count(Materialized::with(StringSerde, U64Serde))
            .to_stream()
            .to(output, Produced::with(StringSerde, NullableSerde(U64Serde))),
        Topo::WindowedCount => grouped()
            .windowed_by(TimeWindows::of_size_with_grace(WINDOW, Duration::from_secs(3600)))
            .count(counts)
            .to_stream()
            .to(
                output,
                Produced::with(WindowedSerde::new(StringSerde, WINDOW), NullableSerde(U64Serde)),
            ),
        Topo::SuppressedCount => grouped()
            .windowed_by(TimeWindows::of_size_no_grace(WINDOW))
            .count(Materialized::as_("wcounts"))
            .suppress(Suppressed::until_window_closes(BufferConfig::unbounded()).with_name("sup"))
            .to_stream()
            .to(
                output,
                Produced::with(WindowedSerde::new(StringSerde, WINDOW), NullableSerde(U64Serde)),
            ),
        Topo::EmitFinalCount => grouped()
            .windowed_by(TimeWindows::of_size_no_grace(FINAL_WINDOW))
            .emit_strategy(EmitStrategy::on_window_close())
            .count(Materialized::as_("ecounts").with_retention(Duration::from_secs(3600)))
            .to_stream()
            .to(
                output,
                Produced::with(
                    WindowedSerde::new(StringSerde, FINAL_WINDOW),
                    NullableSerde(U64Serde),
                ),
            ),
        Topo::SessionCount => grouped()
            .windowed_by_session(SessionWindows::of_inactivity_gap_with_grace(
                Duration::from_secs(5),
                Duration::from_secs(3600),
            ))
            .count(counts)
            .to_stream()
            .to(
                output,
                Produced::with(SessionWindowedSerde::new(StringSerde), NullableSerde(U64Serde)),
            ),
        Topo::UnnamedTableRegroup => b
            .table(input, Materialized::with(StringSerde, StringSerde))
            .group_by(
                |k: &String, v: &String| (v.clone(), k.clone()),
                Grouped::with(StringSerde, StringSerde),
            )
            .count(Materialized::with(StringSerde, U64Serde))
            .to_stream()
            .to(output, Produced::with(StringSerde, NullableSerde(U64Serde))),
        Topo::TableRegroup => b
            .table(input, strings("latest"))
            .group_by(
                |k: &String, v: &String| (v.clone(), k.clone()),
                Grouped::with(StringSerde, StringSerde).named("by-group"),
            )
            .count(counts)
            .to_stream()
            .to(output, Produced::with(StringSerde, NullableSerde(U64Serde))),
        Topo::TableJoin => {
            let (left, right) = tables();
            left.join(&right, |_, l: String, r: String| format!("{l}+{r}"))
                .to_stream()
                .to(output, Produced::with(StringSerde, NullableSerde(StringSerde)));
        }
        Topo::FkJoin => {
            let (left, right) = tables();
            left.join_foreign(
                &right,
                |v: &String| format!("k{}", &v[1..]),
                |l, r| format!("{l}+{r}"),
                Materialized::as_("fk").with_value_serde(StringSerde),
            )
            .to_stream()
            .to(output, Produced::with(StringSerde, NullableSerde(StringSerde)));
        }
        Topo::StreamTable => {
            let table = b.table(right, strings("right"));
            stream(input)
                .join(&table, |_, l: String, r: String| format!("{l}+{r}"))
                .to(output, Produced::with(StringSerde, StringSerde));
        }
        Topo::GlobalJoin => {
            let table = b.global_table(right, strings("right"));
            stream(input)
                .join_global(
                    &table,
                    |k: &String, _: &String| k.clone(),
                    |_, l: String, r: String| format!("{l}+{r}"),
                )
                .to(output, Produced::with(StringSerde, StringSerde));
        }
        Topo::LeftJoin => {
            stream(input)
                .left_join_stream(
                    &stream(right),
                    |_, l: &String, r: Option<&String>| format!("{l}+{}", r.map_or("null", String::as_str)),
                    JoinWindows::of_time_difference_no_grace(Duration::from_secs(2)),
                    StreamJoined::with(StringSerde, StringSerde, StringSerde).with_store_name("lj"),
                )
                .to(output, Produced::with(StringSerde, StringSerde));
        }
        Topo::OuterJoin => {
            stream(input)
                .outer_join_stream(
                    &stream(right),
                    |_, l: Option<&String>, r: Option<&String>| {
                        let (l, r) = (l.map_or("null", String::as_str), r.map_or("null", String::as_str));
                        format!("{l}+{r}")
                    },
                    JoinWindows::of_time_difference_no_grace(Duration::from_secs(2)),
                    StreamJoined::with(StringSerde, StringSerde, StringSerde).with_store_name("oj"),
                )
                .to(output, Produced::with(StringSerde, StringSerde));
        }
        Topo::StreamJoin => {
            stream(input)
                .join_stream(
                    &stream(right),
                    |_, l: &String, r: &String| format!("{l}+{r}"),
                    JoinWindows::of_time_difference_with_grace(WINDOW, Duration::from_secs(3600)),
                    StreamJoined::with(StringSerde, StringSerde, StringSerde).with_store_name("sj"),
                )
                .to(output, Produced::with(StringSerde, StringSerde));
        }
    }
    b.build().unwrap()
}

/// [`Topo::Versioned`] with the Processor API: `AsOf` over the versioned store `versions`.
fn versioned(input: &str, output: &str) -> Topology {
    let mut b = Topology::builder();
    let source = b.source("in", SourceConfig::new([input], StringSerde, StringSerde));
    let store = b.store(Stores::persistent_versioned_kv(
        "versions",
        Duration::from_secs(3600),
        StringSerde,
        StringSerde,
    ));
    let as_of = b.processor("as-of", [&source], {
        let store = store.clone();
        move |ctx| {
            Ok(AsOf {
                versions: ctx.store(&store)?,
            })
        }
    });
    b.connect(&as_of, &store);
    b.sink(
        "out",
        SinkConfig::topic(output, StringSerde, StringSerde),
        [&as_of],
    );
    b.build().unwrap()
}

/// Puts, as the version of a record's key at the record's time, one more than the key's
/// value as of that time (0 without one), and forwards it (the Java program's `AsOf`).
struct AsOf {
    versions: VersionedKeyValueStore<StringSerde, StringSerde>,
}

impl Processor<String, String, String, String> for AsOf {
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, String>,
        r: Record<String, String>,
    ) -> ProcessResult {
        let before = self.versions.get_as_of(&r.key, r.timestamp)?;
        let before: u64 = before
            .map_or(Ok(0), |b| b.value.parse())
            .map_err(|e| format!("{e}"))?;
        let next = (before + 1).to_string();
        self.versions.put(&r.key, Some(&next), r.timestamp)?;
        ctx.forward(r.with_value(next))
    }
}
