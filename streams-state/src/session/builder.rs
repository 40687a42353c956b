//! [`SessionStoreBuilder`]: the recipe of a session store.

use std::any::Any;
use std::collections::BTreeMap;
use std::time::Duration;

use crate::builder::{StoreBuildContext, StoreBuilder, StoreLayout, handle_type_name};
use crate::error::Result;
use crate::serde::{BytesSerde, Serde};
use crate::session::SessionStore;
use crate::store::KeyValueStore;
use crate::typed::SharedKeyValueStore;
use crate::window::SegmentedRecipe;
use crate::window::schema::Schema;

/// Builds session stores with keys of `KS` and values of `VS`. Made by
/// [`Stores::in_memory_session_store`](crate::Stores::in_memory_session_store) or
/// [`Stores::persistent_session_store`](crate::Stores::persistent_session_store).
///
/// Logging is enabled and caching disabled until changed; the changelog topic is created
/// with `cleanup.policy=compact,delete` and `retention.ms` = retention + 1 day, and
/// [`with_logging`](Self::with_logging) overrides single properties over those.
#[derive(Debug, Clone)]
pub struct SessionStoreBuilder<KS, VS> {
    recipe: SegmentedRecipe,
    key_serde: KS,
    value_serde: VS,
}

impl<KS, VS> SessionStoreBuilder<KS, VS> {
    pub(crate) fn new(
        name: String,
        persistent: bool,
        retention: Duration,
        key_serde: KS,
        value_serde: VS,
    ) -> Self {
        Self {
            recipe: SegmentedRecipe::new(name, persistent, retention),
            key_serde,
            value_serde,
        }
    }

    /// Puts a write-back cache in front of the store.
    pub fn with_caching(mut self) -> Self {
        self.recipe.caching = true;
        self
    }

    /// Builds the store without a cache (the default).
    pub fn without_caching(mut self) -> Self {
        self.recipe.caching = false;
        self
    }

    /// Logs every change to a changelog topic created with the defaults and
    /// `topic_config` over them.
    pub fn with_logging(mut self, topic_config: impl IntoIterator<Item = (String, String)>) -> Self {
        self.recipe.log_with(topic_config);
        self
    }

    /// Builds the store without a changelog: it is not restored after a failure.
    pub fn without_logging(mut self) -> Self {
        self.recipe.logging = None;
        self
    }

    /// The retention (ms): how far behind the stream time session ends stay visible.
    pub fn retention_ms(&self) -> i64 {
        self.recipe.segments.retention
    }

    /// The segment interval (ms): `max(retention / 2, 60 s)`.
    pub fn segment_interval_ms(&self) -> i64 {
        self.recipe.segments.interval
    }
}

impl<KS: Serde + Clone, VS: Serde + Clone> SessionStoreBuilder<KS, VS> {
    /// The serde of the store's keys.
    pub fn key_serde(&self) -> KS {
        self.key_serde.clone()
    }

    /// The serde of the store's values.
    pub fn value_serde(&self) -> VS {
        self.value_serde.clone()
    }

    /// The typed handle on `store`, a store this builder built.
    pub fn open(&self, store: SharedKeyValueStore) -> SessionStore<KS, VS> {
        SessionStore::new(
            store,
            self.key_serde.clone(),
            self.value_serde.clone(),
            self.recipe.segments,
        )
    }
}

impl<KS: Serde + Clone, VS: Serde + Clone> StoreBuilder for SessionStoreBuilder<KS, VS> {
    fn name(&self) -> &str {
        &self.recipe.name
    }

    fn persistent(&self) -> bool {
        self.recipe.persistent
    }

    fn logging_config(&self) -> Option<&BTreeMap<String, String>> {
        self.recipe.logging.as_ref()
    }

    fn caching(&self) -> bool {
        self.recipe.caching
    }

    fn build(&self, ctx: StoreBuildContext) -> Result<Box<dyn KeyValueStore>> {
        self.recipe
            .build(Schema::Session, false, self.recipe.caching, ctx)
    }

    fn typed_handle(&self, store: SharedKeyValueStore) -> Box<dyn Any> {
        Box::new(self.open(store))
    }

    fn layout(&self) -> StoreLayout {
        StoreLayout::Session {
            store: SessionStoreBuilder {
                recipe: self.recipe.clone(),
                key_serde: BytesSerde,
                value_serde: BytesSerde,
            },
        }
    }

    fn type_name(&self) -> String {
        handle_type_name::<KS, VS>("SessionStore")
    }
}
