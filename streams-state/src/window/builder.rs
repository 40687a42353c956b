//! [`WindowStoreBuilder`]: the recipe of a window store.

use std::any::Any;
use std::collections::BTreeMap;
use std::time::Duration;

use crate::builder::{StoreBuildContext, StoreBuilder, StoreLayout, short_type_name};
use crate::error::Result;
use crate::serde::{BytesSerde, Serde};
use crate::store::KeyValueStore;
use crate::typed::SharedKeyValueStore;
use crate::window::WindowStore;
use crate::window::retention::{SegmentedSpec, build_segmented};
use crate::window::schema::{Schema, Segments};

/// Kafka Streams' `windowstore.changelog.additional.retention.ms` default: one day.
pub const ADDITIONAL_CHANGELOG_RETENTION_MS: i64 = 86_400_000;

/// A duration in ms, saturating at `i64::MAX`.
pub(crate) fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// The changelog topic configuration of a segmented store of retention `retention_ms`:
/// `cleanup.policy=compact,delete` and `retention.ms` = retention + one day, with
/// `overrides` on top.
pub(crate) fn segmented_changelog_config(
    retention_ms: i64,
    overrides: impl IntoIterator<Item = (String, String)>,
) -> BTreeMap<String, String> {
    let mut config = BTreeMap::from([
        ("cleanup.policy".to_owned(), "compact,delete".to_owned()),
        (
            "retention.ms".to_owned(),
            retention_ms
                .saturating_add(ADDITIONAL_CHANGELOG_RETENTION_MS)
                .to_string(),
        ),
    ]);
    config.extend(overrides);
    config
}

/// Builds window stores with keys of `KS` and values of `VS`. Made by
/// [`Stores::in_memory_window_store`](crate::Stores::in_memory_window_store) or
/// [`Stores::persistent_window_store`](crate::Stores::persistent_window_store).
///
/// As a [`KeyValueStoreBuilder`](crate::KeyValueStoreBuilder), whose method names it
/// shares (`with_caching`/`without_caching`, `with_logging`/`without_logging`) so every
/// builder reads alike: logging is enabled and caching disabled until changed. The changelog topic is created with
/// `cleanup.policy=compact,delete` and `retention.ms` = retention + 1 day (Kafka Streams'
/// `windowstore.changelog.additional.retention.ms`); [`with_logging`](Self::with_logging)
/// overrides single properties and keeps the others.
#[derive(Debug, Clone)]
pub struct WindowStoreBuilder<KS, VS> {
    name: String,
    persistent: bool,
    key_serde: KS,
    value_serde: VS,
    segments: Segments,
    window_size: i64,
    retain_duplicates: bool,
    logging: Option<BTreeMap<String, String>>,
    caching: bool,
}

impl<KS, VS> WindowStoreBuilder<KS, VS> {
    pub(crate) fn new(
        name: String,
        persistent: bool,
        (retention, window_size): (Duration, Duration),
        retain_duplicates: bool,
        key_serde: KS,
        value_serde: VS,
    ) -> Self {
        let segments = Segments::new(millis(retention));
        Self {
            name,
            persistent,
            key_serde,
            value_serde,
            segments,
            window_size: millis(window_size),
            retain_duplicates,
            logging: Some(segmented_changelog_config(segments.retention, [])),
            caching: false,
        }
    }

    /// Puts a write-back cache in front of the store (ignored when duplicates are
    /// retained: every put is a new entry, there is nothing to deduplicate).
    pub fn with_caching(mut self) -> Self {
        self.caching = true;
        self
    }

    /// Builds the store without a cache (the default).
    pub fn without_caching(mut self) -> Self {
        self.caching = false;
        self
    }

    /// Logs every change to a changelog topic created with the defaults and
    /// `topic_config` over them.
    pub fn with_logging(mut self, topic_config: impl IntoIterator<Item = (String, String)>) -> Self {
        self.logging = Some(segmented_changelog_config(self.segments.retention, topic_config));
        self
    }

    /// Builds the store without a changelog: it is not restored after a failure.
    pub fn without_logging(mut self) -> Self {
        self.logging = None;
        self
    }

    /// The retention (ms): how far behind the stream time windows stay visible.
    pub fn retention_ms(&self) -> i64 {
        self.segments.retention
    }

    /// The segment interval (ms): `max(retention / 2, 60 s)`.
    pub fn segment_interval_ms(&self) -> i64 {
        self.segments.interval
    }

    /// The window size (ms).
    pub fn window_size_ms(&self) -> i64 {
        self.window_size
    }

    /// Whether every put adds an entry (stream-stream join buffers).
    pub fn retains_duplicates(&self) -> bool {
        self.retain_duplicates
    }
}

impl<KS: Serde + Clone, VS: Serde + Clone> WindowStoreBuilder<KS, VS> {
    /// The serde of the store's keys.
    pub fn key_serde(&self) -> KS {
        self.key_serde.clone()
    }

    /// The serde of the store's values.
    pub fn value_serde(&self) -> VS {
        self.value_serde.clone()
    }

    /// The typed handle on `store`, a store this builder built.
    pub fn open(&self, store: SharedKeyValueStore) -> WindowStore<KS, VS> {
        WindowStore::new(
            store,
            self.key_serde.clone(),
            self.value_serde.clone(),
            self.segments,
            self.window_size,
            self.retain_duplicates,
        )
    }
}

impl<KS: Serde + Clone, VS: Serde + Clone> StoreBuilder for WindowStoreBuilder<KS, VS> {
    fn name(&self) -> &str {
        &self.name
    }

    fn persistent(&self) -> bool {
        self.persistent
    }

    fn logging_config(&self) -> Option<&BTreeMap<String, String>> {
        self.logging.as_ref()
    }

    fn caching(&self) -> bool {
        self.caching && !self.retain_duplicates
    }

    fn build(&self, ctx: StoreBuildContext) -> Result<Box<dyn KeyValueStore>> {
        let spec = SegmentedSpec {
            schema: Schema::Window,
            segments: self.segments,
            retain_duplicates: self.retain_duplicates,
        };
        let caching = StoreBuilder::caching(self);
        build_segmented(
            &self.name,
            self.persistent,
            self.logging.is_some(),
            caching,
            spec,
            ctx,
        )
    }

    fn typed_handle(&self, store: SharedKeyValueStore) -> Box<dyn Any> {
        Box::new(self.open(store))
    }

    fn layout(&self) -> StoreLayout {
        StoreLayout::Window {
            store: WindowStoreBuilder {
                name: self.name.clone(),
                persistent: self.persistent,
                key_serde: BytesSerde,
                value_serde: BytesSerde,
                segments: self.segments,
                window_size: self.window_size,
                retain_duplicates: self.retain_duplicates,
                logging: self.logging.clone(),
                caching: self.caching,
            },
            timestamped: self.value_serde.is_value_and_timestamp(),
        }
    }

    fn type_name(&self) -> String {
        format!(
            "WindowStore<{}, {}>",
            short_type_name(std::any::type_name::<KS>()),
            short_type_name(std::any::type_name::<VS>())
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Stores;
    use crate::serde::{StringSerde, U64Serde};

    const MIN: Duration = Duration::from_secs(60);

    #[test]
    fn changelog_defaults_are_compact_delete_with_a_day_more() {
        let b = Stores::in_memory_window_store("w", MIN * 10, MIN, false, StringSerde, U64Serde);
        let c = b.logging_config().unwrap();
        assert_eq!(c["cleanup.policy"], "compact,delete");
        assert_eq!(c["retention.ms"], (600_000 + 86_400_000).to_string());
        let b = b.with_logging([("retention.ms".to_owned(), "5".to_owned())]);
        let c = b.logging_config().unwrap();
        assert_eq!(
            (c["cleanup.policy"].as_str(), c["retention.ms"].as_str()),
            ("compact,delete", "5")
        );
        assert!(b.without_logging().logging_config().is_none());
        let s = Stores::persistent_session_store("s", MIN, StringSerde, U64Serde);
        assert_eq!(s.logging_config().unwrap()["retention.ms"], "86460000");
        assert!(s.persistent() && !StoreBuilder::caching(&s));
    }

    #[test]
    fn segments_and_names() {
        let b = Stores::persistent_window_store("w", MIN * 10, MIN, true, StringSerde, U64Serde);
        assert_eq!(
            (b.segment_interval_ms(), b.retention_ms(), b.window_size_ms()),
            (300_000, 600_000, 60_000)
        );
        assert_eq!(b.type_name(), "WindowStore<StringSerde, U64Serde>");
        assert!(
            !StoreBuilder::caching(&b.with_caching()),
            "no cache over duplicates"
        );
        let s = Stores::in_memory_session_store("s", MIN, StringSerde, U64Serde);
        assert_eq!(s.type_name(), "SessionStore<StringSerde, U64Serde>");
        assert_eq!(s.segment_interval_ms(), 60_000);
    }

    #[test]
    fn typed_handles_downcast() {
        let b = Stores::in_memory_window_store("w", MIN, MIN, false, StringSerde, U64Serde);
        let store = b.build(StoreBuildContext::default()).unwrap();
        let shared: SharedKeyValueStore = std::rc::Rc::new(std::cell::RefCell::new(store));
        assert!(
            b.typed_handle(shared)
                .downcast::<WindowStore<StringSerde, U64Serde>>()
                .is_ok()
        );
    }
}
