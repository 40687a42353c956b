//! The range join of the seed article, in the test driver: web hooks materialized in a
//! store keyed `%020d(user_id):webhook_id`, event logs joined against every hook of their
//! user by a prefix scan, on several co-partitioned partitions.

use serde::{Deserialize, Serialize};
use streams_core::serdes::{JsonSerde, NullableSerde, StringSerde};
use streams_core::{
    KvStore, ProcessResult, Processor, ProcessorContext, Record, Stores, Topology, default_partition,
};
use streams_test_utils::{DriverConfig, TopologyTestDriver};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct WebHook {
    webhook_id: u64,
    user_id: u64,
    event_id: u64,
    url: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct EventLog {
    user_id: u64,
    event_id: u64,
    payload: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct WebHookRequest {
    user_id: u64,
    webhook_id: u64,
    url: String,
    payload: String,
}

const STORE: &str = "web_hooks_store";
type Hooks = KvStore<StringSerde, JsonSerde<WebHook>>;

/// Materializes the web-hook topic into the store, as a KTable would (null = delete).
#[derive(Default)]
struct Materialize {
    store: Option<Hooks>,
}
impl Processor<String, Option<WebHook>> for Materialize {
    fn init(&mut self, ctx: &mut ProcessorContext<'_, (), ()>) -> ProcessResult {
        self.store = Some(ctx.kv_store(STORE)?);
        Ok(())
    }
    fn process(
        &mut self,
        _: &mut ProcessorContext<'_, (), ()>,
        r: Record<String, Option<WebHook>>,
    ) -> ProcessResult {
        let store = self.store.as_ref().ok_or("not initialized")?;
        match r.value {
            Some(hook) => store.put(&r.key, &hook)?,
            None => {
                store.delete(&r.key)?;
            }
        }
        Ok(())
    }
}

/// Joins each event with every hook of its user whose event id matches.
#[derive(Default)]
struct EventLogProcessor {
    store: Option<Hooks>,
}
impl Processor<String, EventLog, String, WebHookRequest> for EventLogProcessor {
    fn init(&mut self, ctx: &mut ProcessorContext<'_, String, WebHookRequest>) -> ProcessResult {
        self.store = Some(ctx.kv_store(STORE)?);
        Ok(())
    }
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, WebHookRequest>,
        r: Record<String, EventLog>,
    ) -> ProcessResult {
        let store = self.store.as_ref().ok_or("not initialized")?;
        let reader = store.read()?;
        // Forwarding while the iterator is open: the store is only read.
        for entry in reader.prefix_scan(&format!("{:020}:", r.value.user_id), &StringSerde)? {
            let (_, hook) = entry?;
            if hook.event_id == r.value.event_id {
                let req = WebHookRequest {
                    user_id: hook.user_id,
                    webhook_id: hook.webhook_id,
                    url: hook.url,
                    payload: r.value.payload.clone(),
                };
                ctx.forward(Record::new(r.key.clone(), req, r.timestamp))?;
            }
        }
        Ok(())
    }
}

fn topology() -> Topology {
    let mut b = Topology::builder();
    b.add_source(
        "Source-WebHook",
        ["web_hooks"],
        StringSerde,
        NullableSerde(JsonSerde::<WebHook>::new()),
    )
    .add_processor("WebHookMaterializer", Materialize::default, ["Source-WebHook"])
    .add_source(
        "Source-EventLog",
        ["event_logs"],
        StringSerde,
        JsonSerde::<EventLog>::new(),
    )
    .add_processor(
        "EventLogProcessor",
        EventLogProcessor::default,
        ["Source-EventLog"],
    )
    .add_state_store(
        Stores::persistent_kv(STORE, StringSerde, JsonSerde::<WebHook>::new()).with_caching(),
        ["WebHookMaterializer", "EventLogProcessor"],
    )
    .add_sink(
        "requests",
        "web_hook_requests",
        StringSerde,
        JsonSerde::<WebHookRequest>::new(),
        ["EventLogProcessor"],
    );
    b.build().unwrap()
}

#[test]
fn events_join_every_matching_hook_of_their_user() {
    const PARTITIONS: i32 = 3;
    let t = topology();
    assert_eq!(t.subtopologies().len(), 1, "{t:?}");
    let config = DriverConfig::default()
        .partitions("web_hooks", PARTITIONS)
        .partitions("event_logs", PARTITIONS);
    let d = TopologyTestDriver::new(t, config).unwrap();
    let hooks = d.input_topic(
        "web_hooks",
        StringSerde,
        NullableSerde(JsonSerde::<WebHook>::new()),
    );
    let events = d.input_topic("event_logs", StringSerde, JsonSerde::<EventLog>::new());
    let user_key = |u: u64| format!("{u:020}");
    // Web hooks are partitioned by their user id, like the events: co-partitioned.
    let mut webhook_id = 0;
    for user in 1..=20u64 {
        for event_id in [100, 200] {
            for _ in 0..3 {
                webhook_id += 1;
                let hook = WebHook {
                    webhook_id,
                    user_id: user,
                    event_id,
                    url: format!("http://h/{webhook_id}"),
                };
                let p = default_partition(user_key(user).as_bytes(), PARTITIONS);
                hooks
                    .pipe_to_partition(p, format!("{}:{webhook_id}", user_key(user)), Some(hook), 0)
                    .unwrap();
            }
        }
    }
    // User 10 (id 1..=20 share prefixes like 1 and 10 without padding) deletes one hook.
    let p10 = default_partition(user_key(10).as_bytes(), PARTITIONS);
    let deleted = format!("{}:{}", user_key(10), 55);
    hooks.pipe_to_partition(p10, deleted, None, 1).unwrap();

    for user in [1u64, 10, 2] {
        events
            .pipe_at(
                user_key(user),
                EventLog {
                    user_id: user,
                    event_id: 100,
                    payload: format!("p{user}"),
                },
                5,
            )
            .unwrap();
    }
    events
        .pipe_at(
            user_key(3),
            EventLog {
                user_id: 3,
                event_id: 999,
                payload: "none".into(),
            },
            6,
        )
        .unwrap();

    let out = d.output_topic(
        "web_hook_requests",
        StringSerde,
        JsonSerde::<WebHookRequest>::new(),
    );
    let got = out.read_records().unwrap();
    let ids = |u: u64| -> Vec<u64> {
        got.iter()
            .filter(|r| r.value.user_id == u)
            .map(|r| r.value.webhook_id)
            .collect()
    };
    // Hooks are scanned in key order: `%020d:<id>` sorts ids as strings.
    assert_eq!(ids(1), vec![1, 2, 3]);
    assert_eq!(ids(10), vec![56, 57], "hook 55 was deleted");
    assert_eq!(ids(2), vec![7, 8, 9]);
    assert_eq!(got.len(), 8);
    assert!(
        got.iter()
            .all(|r| r.value.payload == format!("p{}", r.value.user_id))
    );
}
