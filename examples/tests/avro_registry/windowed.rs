//! Registry serdes as the keys of a windowed store.
//!
//! Sales keyed by an Avro record (`Till`) are summed per key in 10-second windows. The
//! window store's changelog keys embed the Avro-framed key (Kafka Streams' layout); the output's keys are
//! `WindowedSerde` around an Avro serde. A first instance sums half the sales and stops; a
//! second one, on an empty state directory, restores the store from its changelog and sums
//! the other half into the same windows. Every window's last total must be the sum of both
//! halves, which only holds if the restored keys were read back as the keys they were.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use streams_core::serdes::NullableSerde;
use streams_core::{KafkaStreams, StreamsConfig};
use streams_dsl::{Consumed, Grouped, Materialized, Produced, StreamsBuilder, TimeWindows, WindowedSerde};
use streams_serde_registry::{AvroSerde, RecordPart, SchemaRegistryClient, SerdeConfig, wire};
use streams_state::Serde;
use streams_test_utils::kafka::{self, ConsumeUntil, ConsumedRecord, ProduceRecord};

const TILL: &str = r#"{"type":"record","name":"Till","namespace":"streams.test.windowed",
 "fields":[{"name":"shop","type":"string"},{"name":"till","type":"int"}]}"#;
const SALE: &str = r#"{"type":"record","name":"Sale","namespace":"streams.test.windowed",
 "fields":[{"name":"cents","type":"long"}]}"#;
const TOTAL: &str = r#"{"type":"record","name":"Total","namespace":"streams.test.windowed",
 "fields":[{"name":"sales","type":"long"},{"name":"cents","type":"long"}]}"#;

const WINDOW: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
struct Till {
    shop: String,
    till: i32,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Sale {
    cents: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Total {
    sales: i64,
    cents: i64,
}

/// The topics and the registry of one run.
struct Run {
    bootstrap: String,
    client: SchemaRegistryClient,
    app_id: String,
    input: String,
    output: String,
}

impl Run {
    fn changelog(&self) -> String {
        format!("{}-sums-changelog", self.app_id)
    }

    fn avro<T: Serialize + serde::de::DeserializeOwned>(
        &self,
        topic: &str,
        part: RecordPart,
        schema: &str,
    ) -> AvroSerde<T> {
        AvroSerde::new(self.client.clone(), SerdeConfig::default(), topic, part, schema).unwrap()
    }

    fn output_key_serde(&self) -> WindowedSerde<Till> {
        WindowedSerde::new(self.avro::<Till>(&self.output, RecordPart::Key, TILL), WINDOW)
    }

    /// An instance of the application on `state`, running.
    fn start(&self, state: &Path) -> KafkaStreams {
        let b = StreamsBuilder::new();
        let changelog = self.changelog();
        b.stream(
            [self.input.as_str()],
            Consumed::with(
                Arc::new(self.avro::<Till>(&self.input, RecordPart::Key, TILL)),
                Arc::new(self.avro::<Sale>(&self.input, RecordPart::Value, SALE)),
            ),
        )
        .group_by_key(Grouped::new())
        .windowed_by(TimeWindows::of_size_with_grace(WINDOW, Duration::from_secs(3600)))
        .aggregate(
            Total::default,
            |_, sale: Sale, total: Total| Total {
                sales: total.sales + 1,
                cents: total.cents + sale.cents,
            },
            Materialized::as_("sums")
                .with_key_serde(self.avro::<Till>(&changelog, RecordPart::Key, TILL))
                .with_value_serde(self.avro::<Total>(&changelog, RecordPart::Value, TOTAL)),
        )
        .to_stream()
        .to(
            &self.output,
            Produced::with(
                self.output_key_serde(),
                NullableSerde(Arc::new(self.avro::<Total>(
                    &self.output,
                    RecordPart::Value,
                    TOTAL,
                ))),
            ),
        );
        let dir = state.display().to_string();
        let config = StreamsConfig::from_properties([
            ("application.id", self.app_id.as_str()),
            ("bootstrap.servers", self.bootstrap.as_str()),
            ("state.dir", dir.as_str()),
            ("commit.interval.ms", "200"),
            ("consumer.session.timeout.ms", "6000"),
            ("consumer.heartbeat.interval.ms", "500"),
        ])
        .unwrap();
        let mut app = KafkaStreams::new(b.build().unwrap(), config).unwrap();
        kafka::start_running(&mut app, Duration::from_secs(60));
        app
    }

    fn produce(&self, sales: &[(Till, i64, i64)]) {
        let keys = self.avro::<Till>(&self.input, RecordPart::Key, TILL);
        let values = self.avro::<Sale>(&self.input, RecordPart::Value, SALE);
        let records: Vec<ProduceRecord> = sales
            .iter()
            .map(|(till, cents, at)| {
                ProduceRecord::new(
                    keys.serialize(till).unwrap(),
                    values.serialize(&Sale { cents: *cents }).unwrap(),
                )
                .with_timestamp(*at)
            })
            .collect();
        kafka::produce(&self.bootstrap, &self.input, &records, Duration::from_secs(60)).unwrap();
    }

    fn read(&self, topic: &str) -> Vec<ConsumedRecord> {
        kafka::consume_all(
            &self.bootstrap,
            topic,
            ConsumeUntil::Idle(Duration::ZERO),
            Duration::from_secs(60),
            false,
        )
        .unwrap()
    }

    /// The last total of every (till, window start) in the output.
    fn totals(&self) -> BTreeMap<(Till, i64), Total> {
        let keys = self.output_key_serde();
        let values = self.avro::<Total>(&self.output, RecordPart::Value, TOTAL);
        self.read(&self.output)
            .iter()
            .map(|r| {
                let w = keys.deserialize(r.key.as_deref().unwrap()).unwrap();
                assert_eq!(w.end - w.start, 10_000);
                let total = values.deserialize(r.value.as_deref().unwrap()).unwrap();
                ((w.key, w.start), total)
            })
            .collect()
    }

    fn wait_for_totals(&self, expected: &BTreeMap<(Till, i64), Total>) {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let totals = self.totals();
            if &totals == expected {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "totals {totals:?}, expected {expected:?}"
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }
}

/// What `sales` sum to per (till, window start).
fn sums(sales: &[(Till, i64, i64)]) -> BTreeMap<(Till, i64), Total> {
    let mut sums: BTreeMap<(Till, i64), Total> = BTreeMap::new();
    for (till, cents, at) in sales {
        let total = sums.entry((till.clone(), at - at % 10_000)).or_default();
        total.sales += 1;
        total.cents += cents;
    }
    sums
}

#[test]
fn avro_keys_of_a_windowed_store_survive_its_changelog() {
    let test = "avro_keys_of_a_windowed_store_survive_its_changelog";
    let Some(bootstrap) = kafka::require_kafka(test) else {
        return;
    };
    let Some(url) = super::registry(test) else {
        return;
    };
    let run = Run {
        client: SchemaRegistryClient::from_properties([("schema.registry.url", url.as_str())]).unwrap(),
        app_id: kafka::unique_name("avro-windowed"),
        input: kafka::unique_name("sales"),
        output: kafka::unique_name("till-totals"),
        bootstrap,
    };
    kafka::create_topic(&run.bootstrap, &run.input, 2, &[]).unwrap();
    kafka::create_topic(&run.bootstrap, &run.output, 2, &[]).unwrap();

    let tills: Vec<Till> = ["north", "south", "east"]
        .iter()
        .flat_map(|shop| {
            (1..=2).map(|till| Till {
                shop: (*shop).into(),
                till,
            })
        })
        .collect();
    // 120 sales of six tills over three windows; each half touches every window. The
    // times are recent (see `recent_minute`): the changelog's segments with records from
    // 1970 would be deleted by the broker's log cleaner at any moment of the test.
    let base = kafka::recent_minute(10);
    let sales: Vec<(Till, i64, i64)> = (0..120i64)
        .map(|i| {
            (
                tills[(i % 6) as usize].clone(),
                100 + i,
                base + 1_000 + ((i / 6) % 3) * 10_000 + i,
            )
        })
        .collect();
    let (first, second) = sales.split_at(60);

    let first_state = tempfile::tempdir().unwrap();
    let mut app = run.start(first_state.path());
    run.produce(first);
    run.wait_for_totals(&sums(first));
    assert!(app.close(Duration::from_secs(60)));

    // The changelog's keys are Kafka Streams' (`WindowKeySchema`): `[Avro-framed key]
    // [window start 8][seq 4]`, the key written with the changelog's own subject.
    let changelog = run.read(&run.changelog());
    assert!(!changelog.is_empty());
    let keys = run.avro::<Till>(&run.changelog(), RecordPart::Key, TILL);
    let registered = run
        .client
        .latest_version(&format!("{}-key", run.changelog()))
        .unwrap()
        .schema
        .id;
    for record in &changelog {
        let key = record.key.as_deref().unwrap();
        let framed = &key[..key.len() - 12];
        let start = i64::from_be_bytes(key[key.len() - 12..key.len() - 4].try_into().unwrap());
        assert_eq!(start % 10_000, 0, "a window start in plain big-endian");
        assert_eq!(wire::split(framed).unwrap().0, registered);
        assert!(tills.contains(&keys.deserialize(framed).unwrap()));
    }

    // A new instance with nothing on disk restores the sums and adds the second half.
    let second_state = tempfile::tempdir().unwrap();
    let mut app = run.start(second_state.path());
    run.produce(second);
    run.wait_for_totals(&sums(&sales));
    assert!(app.close(Duration::from_secs(60)));
    assert_eq!(sums(&sales).len(), 6 * 3);
}
