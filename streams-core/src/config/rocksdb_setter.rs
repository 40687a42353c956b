//! The RocksDB options setter of an application (Kafka Streams' `rocksdb.config.setter`).
//!
//! The runtime opens every RocksDB store with [`RocksDbResources::store_options`]: the
//! shared block cache and write-buffer manager, partitioned filters, levelled compaction and
//! LZ4. A setter given to [`StreamsConfigBuilder::rocksdb_config_setter`] is called with
//! each store's name and those options just before the store opens, so an application can
//! change what it needs (compaction style, compression, parallelism, file sizes) without
//! giving up the shared memory budget. It is part of the configuration, not a property: a
//! closure has no string form, so [`StreamsConfig::from_properties`] cannot set it and
//! [`StreamsConfig::to_builder`] carries it over.
//!
//! [`StreamsConfigBuilder::rocksdb_config_setter`]: super::StreamsConfigBuilder::rocksdb_config_setter
//! [`StreamsConfig::from_properties`]: super::StreamsConfig::from_properties
//! [`StreamsConfig::to_builder`]: super::StreamsConfig::to_builder

use std::fmt;
use std::sync::Arc;

use streams_state::RocksDbResources;
use streams_state::librocksdb::Options;

/// A function that tunes the [`Options`] of one RocksDB store, given the store's name.
///
/// Two setters are equal when they are the same function object (a configuration and its
/// clones compare equal; two configurations given separate closures do not).
#[derive(Clone)]
pub struct RocksDbConfigSetter(Arc<SetterFn>);

/// The setter's function type.
type SetterFn = dyn Fn(&str, &mut Options) + Send + Sync;

impl RocksDbConfigSetter {
    /// A setter calling `f` with each store's name and options.
    pub fn new(f: impl Fn(&str, &mut Options) + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    /// Applies the setter to `store`'s options.
    pub fn apply(&self, store: &str, options: &mut Options) {
        (self.0)(store, options);
    }

    /// `resources` with this setter called on every store's options.
    pub(crate) fn install(&self, resources: RocksDbResources) -> RocksDbResources {
        let setter = self.clone();
        resources.with_options_setter(move |store, options| setter.apply(store, options))
    }
}

impl PartialEq for RocksDbConfigSetter {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for RocksDbConfigSetter {}

impl fmt::Debug for RocksDbConfigSetter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RocksDbConfigSetter(..)")
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use streams_state::librocksdb::DBCompactionStyle;

    use super::*;
    use crate::StreamsConfig;

    fn base() -> crate::StreamsConfigBuilder {
        StreamsConfig::builder()
            .application_id("setter-app")
            .bootstrap_servers("127.0.0.1:9092")
    }

    #[test]
    fn the_setter_reaches_every_store_the_resources_open() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let config = base()
            .rocksdb_config_setter({
                let seen = seen.clone();
                move |store: &str, options: &mut Options| {
                    options.set_compaction_style(DBCompactionStyle::Universal);
                    seen.lock().unwrap().push(store.to_owned());
                }
            })
            .build()
            .unwrap();
        let resources = config.rocksdb_resources();
        resources.store_options("counts");
        resources.store_options("hooks");
        assert_eq!(*seen.lock().unwrap(), ["counts", "hooks"]);
    }

    #[test]
    fn without_a_setter_nothing_is_called_and_configs_compare_by_setter() {
        let plain = base().build().unwrap();
        assert_eq!(plain.rocksdb_config_setter(), None);
        let with = base()
            .rocksdb_config_setter(|_: &str, _: &mut Options| {})
            .build()
            .unwrap();
        assert!(with.rocksdb_config_setter().is_some());
        assert_ne!(plain, with, "a setter is part of the configuration");
        assert_eq!(with, with.clone(), "clones share the setter");
        let rebuilt = with.to_builder().build().unwrap();
        assert_eq!(rebuilt, with, "to_builder carries the setter over");
        assert!(format!("{with:?}").contains("rocksdb_config_setter"));
    }
}
