//! [`VersionedStoreBuilder`]: the recipe of a versioned key-value store, and its
//! [`Stores`] entry points.

use std::any::Any;
use std::collections::BTreeMap;
use std::time::Duration;

use crate::builder::{
    KeyValueStoreBuilder, StoreBuildContext, StoreBuilder, StoreLayout, Stores, handle_type_name,
};
use crate::error::Result;
use crate::serde::{BytesSerde, Serde};
use crate::store::KeyValueStore;
use crate::typed::SharedKeyValueStore;
use crate::versioned::VersionedKeyValueStore;
use crate::window::millis;

/// Kafka Streams' extra changelog compaction lag of versioned stores: one day.
const ADDITIONAL_COMPACTION_LAG_MS: i64 = 86_400_000;

/// Builds versioned key-value stores with keys of `KS` and values of `VS`: made by
/// [`Stores::persistent_versioned_kv`] or [`Stores::in_memory_versioned_kv`].
///
/// Logged by default (never cached, as in Kafka Streams): the changelog topic is compacted
/// with `min.compaction.lag.ms` = history retention + 1 day, so compaction never removes a
/// version a restore still needs; [`with_logging`](Self::with_logging) overrides single
/// properties.
#[derive(Debug, Clone)]
pub struct VersionedStoreBuilder<KS, VS> {
    inner: KeyValueStoreBuilder<BytesSerde, BytesSerde>,
    history_retention: i64,
    logging: Option<BTreeMap<String, String>>,
    key_serde: KS,
    value_serde: VS,
}

impl<KS, VS> VersionedStoreBuilder<KS, VS> {
    fn new(
        inner: KeyValueStoreBuilder<BytesSerde, BytesSerde>,
        history_retention: Duration,
        key_serde: KS,
        value_serde: VS,
    ) -> Self {
        let history_retention = millis(history_retention);
        let logging = Some(BTreeMap::from([(
            "min.compaction.lag.ms".to_owned(),
            history_retention
                .saturating_add(ADDITIONAL_COMPACTION_LAG_MS)
                .to_string(),
        )]));
        Self {
            inner,
            history_retention,
            logging,
            key_serde,
            value_serde,
        }
    }

    /// Logs every change to a changelog topic with `topic_config` on top of the defaults.
    pub fn with_logging(mut self, topic_config: impl IntoIterator<Item = (String, String)>) -> Self {
        self.logging
            .get_or_insert_with(BTreeMap::new)
            .extend(topic_config);
        self
    }

    /// Builds the store without a changelog: it is not restored after a failure.
    pub fn without_logging(mut self) -> Self {
        self.logging = None;
        self
    }

    /// How long (ms) behind the observed stream time versions stay readable.
    pub fn history_retention_ms(&self) -> i64 {
        self.history_retention
    }
}

impl<KS: Serde + Clone, VS: Serde + Clone> VersionedStoreBuilder<KS, VS> {
    /// The serde of the store's keys.
    pub fn key_serde(&self) -> KS {
        self.key_serde.clone()
    }

    /// The serde of the store's values.
    pub fn value_serde(&self) -> VS {
        self.value_serde.clone()
    }

    /// The typed handle on `store`, a store this builder built.
    pub fn open(&self, store: SharedKeyValueStore) -> VersionedKeyValueStore<KS, VS> {
        VersionedKeyValueStore::new(
            store,
            self.key_serde.clone(),
            self.value_serde.clone(),
            self.history_retention,
        )
    }
}

impl<KS: Serde + Clone, VS: Serde + Clone> StoreBuilder for VersionedStoreBuilder<KS, VS> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn persistent(&self) -> bool {
        self.inner.persistent()
    }

    fn logging_config(&self) -> Option<&BTreeMap<String, String>> {
        self.logging.as_ref()
    }

    fn caching(&self) -> bool {
        false
    }

    fn build(&self, ctx: StoreBuildContext) -> Result<Box<dyn KeyValueStore>> {
        let inner = match &self.logging {
            Some(config) => self.inner.clone().with_logging(config.clone()),
            None => self.inner.clone().without_logging(),
        };
        inner.without_caching().build(ctx)
    }

    fn typed_handle(&self, store: SharedKeyValueStore) -> Box<dyn Any> {
        Box::new(self.open(store))
    }

    fn layout(&self) -> StoreLayout {
        StoreLayout::Versioned
    }

    fn type_name(&self) -> String {
        handle_type_name::<KS, VS>("VersionedKeyValueStore")
    }
}

impl Stores {
    /// A builder of a persistent (RocksDB) versioned key-value store keeping versions
    /// readable `history_retention` behind the observed stream time (Kafka Streams'
    /// `Stores.persistentVersionedKeyValueStore`); see [`crate::versioned`].
    pub fn persistent_versioned_kv<KS: Serde + Clone, VS: Serde + Clone>(
        name: impl Into<String>,
        history_retention: Duration,
        key_serde: KS,
        value_serde: VS,
    ) -> VersionedStoreBuilder<KS, VS> {
        let inner = Stores::persistent_kv(name, BytesSerde, BytesSerde);
        VersionedStoreBuilder::new(inner, history_retention, key_serde, value_serde)
    }

    /// As [`persistent_versioned_kv`](Self::persistent_versioned_kv), in memory.
    pub fn in_memory_versioned_kv<KS: Serde + Clone, VS: Serde + Clone>(
        name: impl Into<String>,
        history_retention: Duration,
        key_serde: KS,
        value_serde: VS,
    ) -> VersionedStoreBuilder<KS, VS> {
        let inner = Stores::in_memory_kv(name, BytesSerde, BytesSerde);
        VersionedStoreBuilder::new(inner, history_retention, key_serde, value_serde)
    }
}
