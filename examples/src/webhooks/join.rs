//! The range join: the web-hook table materialized into a RocksDB store, and each event
//! joined with its user's hooks by one prefix scan.
//!
//! Invariants: both processors share the store [`STORE`], so they are in one
//! sub-topology and the hook topic and the event topic must be co-partitioned (see
//! [`super::user_partition`]); the join only reads the store, so forwarding while a scan
//! is open is safe; a request's id is derived from the event's position, so it is the same
//! on every replay of that event; a user's requests go to the user's partition of the request
//! topic ([`super::user_partition`]), in the order of the user's events.

use streams_core::serdes::{JsonSerde, NullableSerde, StringSerde};
use streams_core::{
    KvStore, ProcessResult, Processor, ProcessorContext, Record, SinkConfig, SourceConfig, Stores, Topology,
    TopologyError,
};

use super::records::{EventLog, WebHook, WebHookRequest};
use super::topics::{WebHookTopics, user_key, user_partition};

/// The store of web hooks, keyed `%020d(user_id):webhook_id`.
pub const STORE: &str = "web_hooks_store";

type Hooks = KvStore<StringSerde, JsonSerde<WebHook>>;

/// Materializes the web-hook topic into [`STORE`], as a KTable would: a value upserts, a
/// null value deletes.
pub struct WebHookMaterializer {
    store: Hooks,
}

impl Processor<String, Option<WebHook>> for WebHookMaterializer {
    fn process(
        &mut self,
        _: &mut ProcessorContext<'_, (), ()>,
        r: Record<String, Option<WebHook>>,
    ) -> ProcessResult {
        match r.value {
            Some(hook) => self.store.put(&r.key, &hook)?,
            None => {
                self.store.delete(&r.key)?;
            }
        }
        Ok(())
    }
}

/// The range join: each event prefix-scans its user's hooks and forwards one
/// [`WebHookRequest`] per hook whose `event_id` matches, keyed by the hook's key.
pub struct EventLogProcessor {
    store: Hooks,
}

impl Processor<String, EventLog, String, WebHookRequest> for EventLogProcessor {
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, WebHookRequest>,
        r: Record<String, EventLog>,
    ) -> ProcessResult {
        let source = ctx.record_metadata().map_or_else(
            || format!("t{}", r.timestamp),
            |m| format!("{}/{}/{}", m.topic, m.partition, m.offset),
        );
        let reader = self.store.read()?;
        // Forwarding while the iterator is open is fine: the store is only read.
        for entry in reader.prefix_scan(&format!("{}:", user_key(r.value.user_id)), &StringSerde)? {
            let (key, hook) = entry?;
            if hook.event_id != r.value.event_id {
                continue;
            }
            let request = WebHookRequest {
                request_id: format!("{source}/{}", hook.webhook_id),
                user_id: hook.user_id,
                webhook_id: hook.webhook_id,
                event_id: hook.event_id,
                url: hook.url,
                payload: r.value.payload.clone(),
            };
            ctx.forward(Record::new(key, request, r.timestamp))?;
        }
        Ok(())
    }
}

/// The join's topology over `topics`:
///
/// ```text
/// Source-WebHook -> WebHookMaterializer --(web_hooks_store)-- EventLogProcessor <- Source-EventLog
///                                                              |
///                                                              v
///                                                  Sink-WebHookRequest (requests)
/// ```
pub fn topology(topics: &WebHookTopics) -> Result<Topology, TopologyError> {
    let mut b = Topology::builder();
    let hooks =
        b.store(Stores::persistent_kv(STORE, StringSerde, JsonSerde::<WebHook>::new()).with_caching());
    let web_hooks = b.source(
        "Source-WebHook",
        SourceConfig::new(
            [topics.web_hooks.as_str()],
            StringSerde,
            NullableSerde(JsonSerde::<WebHook>::new()),
        ),
    );
    let materializer = b.processor("WebHookMaterializer", [&web_hooks], {
        let hooks = hooks.clone();
        move |ctx| {
            Ok(WebHookMaterializer {
                store: ctx.store(&hooks)?,
            })
        }
    });
    let events = b.source(
        "Source-EventLog",
        SourceConfig::new(
            [topics.event_logs.as_str()],
            StringSerde,
            JsonSerde::<EventLog>::new(),
        ),
    );
    let join = b.processor("EventLogProcessor", [&events], {
        let hooks = hooks.clone();
        move |ctx| {
            Ok(EventLogProcessor {
                store: ctx.store(&hooks)?,
            })
        }
    });
    b.connect(&materializer, &hooks).connect(&join, &hooks);
    b.sink(
        "Sink-WebHookRequest",
        // A user's requests go to one partition, in the order of the user's events: the
        // deliveries can then keep each user's order.
        SinkConfig::topic(
            topics.requests.as_str(),
            StringSerde,
            JsonSerde::<WebHookRequest>::new(),
        )
        .partitioner(|_: &str, _: &String, r: &WebHookRequest, partitions: i32| {
            Some(user_partition(r.user_id, partitions))
        }),
        [&join],
    );
    b.build()
}

/// The requests the join should emit for `hooks` (the final state of each hook key, `None`
/// = deleted) and `events`: `(webhook_id, index of the event)` pairs, for checking a run.
pub fn expected_requests(
    hooks: &[WebHook],
    deleted: &[(u64, u64)],
    events: &[EventLog],
) -> Vec<(u64, usize)> {
    let live: Vec<&WebHook> = hooks
        .iter()
        .filter(|h| !deleted.contains(&(h.user_id, h.webhook_id)))
        .collect();
    let mut out = Vec::new();
    for (i, e) in events.iter().enumerate() {
        for h in &live {
            if h.user_id == e.user_id && h.event_id == e.event_id {
                out.push((h.webhook_id, i));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topology_is_one_subtopology() {
        let t = topology(&WebHookTopics::default()).unwrap();
        assert_eq!(t.subtopologies().len(), 1);
        let d = t.describe().to_string();
        assert!(d.contains("web_hooks_store"), "{d}");
    }

    #[test]
    fn expected_requests_follow_hooks_and_deletions() {
        let hook = |id, user, event| WebHook {
            webhook_id: id,
            user_id: user,
            event_id: event,
            url: String::new(),
        };
        let hooks = [
            hook(1, 1, 100),
            hook(2, 1, 100),
            hook(3, 1, 200),
            hook(4, 10, 100),
        ];
        let ev = |user, event| EventLog {
            user_id: user,
            event_id: event,
            payload: serde_json::Value::Null,
        };
        let events = [ev(1, 100), ev(10, 100), ev(2, 100)];
        assert_eq!(
            expected_requests(&hooks, &[(1, 2)], &events),
            vec![(1, 0), (4, 1)]
        );
    }
}
