//! [`SessionStoreBuilder`]: the recipe of a session store.

use crate::builder::{StoreBuildContext, StoreBuilder, StoreLayout, handle_type_name};
use crate::error::Result;
use crate::serde::{BytesSerde, Serde};
use crate::session::SessionStore;
use crate::store::KeyValueStore;
use crate::typed::SharedKeyValueStore;
use crate::window::schema::Schema;
use crate::window::{SegmentedRecipe, recipe_methods};

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
    pub(crate) fn new(recipe: SegmentedRecipe, key_serde: KS, value_serde: VS) -> Self {
        Self {
            recipe,
            key_serde,
            value_serde,
        }
    }

    recipe_methods! {
        with_caching, without_caching, with_logging, without_logging,
        /// The retention (ms): how far behind the stream time session ends stay visible.
        retention_ms,
        segment_interval_ms,
    }
}

impl<KS: Serde + Clone, VS: Serde + Clone> SessionStoreBuilder<KS, VS> {
    recipe_methods!(key_serde, value_serde, handle);

    /// The typed handle on `store`, a store this builder built.
    pub fn open(&self, store: SharedKeyValueStore) -> SessionStore<KS, VS> {
        SessionStore::new(self.handle(store), self.recipe.segments)
    }
}

impl<KS: Serde + Clone, VS: Serde + Clone> StoreBuilder for SessionStoreBuilder<KS, VS> {
    recipe_methods!(name, persistent, logging_config, typed_handle);

    fn caching(&self) -> bool {
        self.recipe.caching
    }

    fn build(&self, ctx: StoreBuildContext) -> Result<Box<dyn KeyValueStore>> {
        self.recipe
            .build(Schema::Session, false, self.recipe.caching, ctx)
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
