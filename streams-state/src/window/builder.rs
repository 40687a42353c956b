//! [`WindowStoreBuilder`]: the recipe of a window store.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::builder::{StoreBuildContext, StoreBuilder, StoreLayout, handle_type_name};
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

/// What the window and the session store builders share: the store's name, whether it is
/// persistent, its segments, its changelog configuration (`None`: not logged) and whether
/// it is cached. A new recipe is logged with [`segmented_changelog_config`] and not cached.
#[derive(Debug, Clone)]
pub(crate) struct SegmentedRecipe {
    pub(crate) name: String,
    pub(crate) persistent: bool,
    pub(crate) segments: Segments,
    pub(crate) logging: Option<BTreeMap<String, String>>,
    pub(crate) caching: bool,
}

impl SegmentedRecipe {
    pub(crate) fn new(name: String, persistent: bool, retention: Duration) -> Self {
        let segments = Segments::new(millis(retention));
        Self {
            name,
            persistent,
            segments,
            logging: Some(segmented_changelog_config(segments.retention, [])),
            caching: false,
        }
    }

    /// Logs to a changelog created with the defaults and `topic_config` over them.
    pub(crate) fn log_with(&mut self, topic_config: impl IntoIterator<Item = (String, String)>) {
        self.logging = Some(segmented_changelog_config(self.segments.retention, topic_config));
    }

    /// Builds the bytes store of `schema` (`caching`: whether a cache goes in front).
    pub(crate) fn build(
        &self,
        schema: Schema,
        retain_duplicates: bool,
        caching: bool,
        ctx: StoreBuildContext,
    ) -> Result<Box<dyn KeyValueStore>> {
        let spec = SegmentedSpec {
            schema,
            segments: self.segments,
            retain_duplicates,
        };
        let logged = self.logging.is_some();
        build_segmented(&self.name, self.persistent, logged, caching, spec, ctx)
    }
}

/// Writes, inside the `impl` block of the window or the session store builder, the named
/// methods the two share, on their fields `recipe`, `key_serde` and `value_serde`: the
/// setters `with_caching`, `without_caching`, `with_logging` and `without_logging`, the
/// getters `retention_ms`, `segment_interval_ms`, `key_serde` and `value_serde`, the
/// private `handle` (the `StoreHandle` of a built store, with clones of the serdes), and
/// the [`StoreBuilder`] methods `name`, `persistent`, `logging_config` and `typed_handle`
/// (a boxed `open`). Doc comments before a name are added to the method's docs
/// (`retention_ms` has only those).
macro_rules! recipe_methods {
    (@one $(#[$attr:meta])* with_caching) => {
        /// Puts a write-back cache in front of the store.
        $(#[$attr])*
        pub fn with_caching(mut self) -> Self {
            self.recipe.caching = true;
            self
        }
    };
    (@one $(#[$attr:meta])* retention_ms) => {
        $(#[$attr])*
        pub fn retention_ms(&self) -> i64 {
            self.recipe.segments.retention
        }
    };
    (@one without_caching) => {
        /// Builds the store without a cache (the default).
        pub fn without_caching(mut self) -> Self {
            self.recipe.caching = false;
            self
        }
    };
    (@one with_logging) => {
        /// Logs every change to a changelog topic created with the defaults and
        /// `topic_config` over them.
        pub fn with_logging(mut self, topic_config: impl IntoIterator<Item = (String, String)>) -> Self {
            self.recipe.log_with(topic_config);
            self
        }
    };
    (@one without_logging) => {
        /// Builds the store without a changelog: it is not restored after a failure.
        pub fn without_logging(mut self) -> Self {
            self.recipe.logging = None;
            self
        }
    };
    (@one segment_interval_ms) => {
        /// The segment interval (ms): `max(retention / 2, 60 s)`.
        pub fn segment_interval_ms(&self) -> i64 {
            self.recipe.segments.interval
        }
    };
    (@one key_serde) => {
        /// The serde of the store's keys.
        pub fn key_serde(&self) -> KS {
            self.key_serde.clone()
        }
    };
    (@one value_serde) => {
        /// The serde of the store's values.
        pub fn value_serde(&self) -> VS {
            self.value_serde.clone()
        }
    };
    (@one handle) => {
        fn handle(&self, store: $crate::typed::SharedKeyValueStore) -> $crate::handle::StoreHandle<KS, VS> {
            $crate::handle::StoreHandle::new(store, self.key_serde.clone(), self.value_serde.clone())
        }
    };
    (@one typed_handle) => {
        fn typed_handle(&self, store: $crate::typed::SharedKeyValueStore) -> Box<dyn ::std::any::Any> {
            Box::new(self.open(store))
        }
    };
    (@one name) => {
        fn name(&self) -> &str {
            &self.recipe.name
        }
    };
    (@one persistent) => {
        fn persistent(&self) -> bool {
            self.recipe.persistent
        }
    };
    (@one logging_config) => {
        fn logging_config(&self) -> Option<&::std::collections::BTreeMap<String, String>> {
            self.recipe.logging.as_ref()
        }
    };
    ($($(#[$attr:meta])* $method:ident),* $(,)?) => {
        $($crate::window::recipe_methods!(@one $(#[$attr])* $method);)*
    };
}

pub(crate) use recipe_methods;

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
    recipe: SegmentedRecipe,
    key_serde: KS,
    value_serde: VS,
    window_size: i64,
    retain_duplicates: bool,
}

impl<KS, VS> WindowStoreBuilder<KS, VS> {
    pub(crate) fn new(
        recipe: SegmentedRecipe,
        window_size: Duration,
        retain_duplicates: bool,
        key_serde: KS,
        value_serde: VS,
    ) -> Self {
        Self {
            recipe,
            window_size: millis(window_size),
            retain_duplicates,
            key_serde,
            value_serde,
        }
    }

    recipe_methods! {
        /// Ignored when duplicates are retained: every put is a new entry, there is nothing
        /// to deduplicate.
        with_caching,
        without_caching, with_logging, without_logging,
        /// The retention (ms): how far behind the stream time windows stay visible.
        retention_ms,
        segment_interval_ms,
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
    recipe_methods!(key_serde, value_serde, handle);

    /// The typed handle on `store`, a store this builder built.
    pub fn open(&self, store: SharedKeyValueStore) -> WindowStore<KS, VS> {
        let (segments, size, duplicates) = (self.recipe.segments, self.window_size, self.retain_duplicates);
        WindowStore::new(self.handle(store), segments, size, duplicates)
    }
}

impl<KS: Serde + Clone, VS: Serde + Clone> StoreBuilder for WindowStoreBuilder<KS, VS> {
    recipe_methods!(name, persistent, logging_config, typed_handle);

    fn caching(&self) -> bool {
        self.recipe.caching && !self.retain_duplicates
    }

    fn build(&self, ctx: StoreBuildContext) -> Result<Box<dyn KeyValueStore>> {
        let caching = StoreBuilder::caching(self);
        self.recipe
            .build(Schema::Window, self.retain_duplicates, caching, ctx)
    }

    fn layout(&self) -> StoreLayout {
        StoreLayout::Window {
            store: WindowStoreBuilder {
                recipe: self.recipe.clone(),
                key_serde: BytesSerde,
                value_serde: BytesSerde,
                window_size: self.window_size,
                retain_duplicates: self.retain_duplicates,
            },
            timestamped: self.value_serde.is_value_and_timestamp(),
        }
    }

    fn type_name(&self) -> String {
        handle_type_name::<KS, VS>("WindowStore")
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
