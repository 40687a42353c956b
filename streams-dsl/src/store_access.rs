//! Mixing the DSL with the Processor API through typed store handles: a materialized
//! table's store ([`KTable::store_ref`]) is connected to a user processor by
//! [`KStream::process_with`], whose supplier opens it with
//! [`ProcessorContext::store`](streams_core::ProcessorContext::store).
//!
//! A handle carries the store's own serdes (the `DynSerde`s every DSL store is typed
//! with), so a processor cannot open a table's store with other key or value types. A
//! processor connected to a table's store runs in the table's sub-topology: its stream and
//! the table's topic must be co-partitioned, as in Kafka Streams.

use streams_core::{ConnectableStore, Processor, ProcessorContext, ProcessorError, StoreRef};

use crate::dyn_serde::{DynSerde, carry};
use crate::kstream::KStream;
use crate::ktable::KTable;

/// The typed handle of a table's key-value store (see [`KTable::store_ref`]).
pub type TableStoreRef<K, V> = StoreRef<DynSerde<K>, DynSerde<V>>;

impl<K: 'static, V: 'static> KTable<K, V> {
    /// The typed handle of the store this table is kept in, for a user processor added by
    /// [`KStream::process_with`]; `None` when the table is not materialized in a store the
    /// DSL keeps a handle of (today: tables read by
    /// [`StreamsBuilder::table`](crate::StreamsBuilder::table)).
    pub fn store_ref(&self) -> Option<TableStoreRef<K, V>> {
        self.shared.kv_ref(self.store.as_deref()?)
    }
}

impl<K: Clone + 'static, V: Clone + 'static> KStream<K, V> {
    /// Runs a user [`Processor`] made by `supplier` with its context, connected to `stores`
    /// (typed handles such as [`KTable::store_ref`], or stores added with
    /// [`StreamsBuilder::add_state_store`](crate::StreamsBuilder::add_state_store) by
    /// [`StoreRef`]): the supplier opens them with `ctx.store(&handle)` and the processor
    /// holds the handles (Kafka Streams' `KStream.process(supplier, storeNames...)`).
    /// Grouping afterwards repartitions, as the processor may have changed keys.
    pub fn process_with<P, K2, V2>(
        &self,
        supplier: impl Fn(&mut ProcessorContext<'_, K2, V2>) -> Result<P, ProcessorError> + Send + Sync + 'static,
        stores: &[&dyn ConnectableStore],
    ) -> KStream<K2, V2>
    where
        P: Processor<K, V, K2, V2>,
        K2: Clone + 'static,
        V2: Clone + 'static,
    {
        let name = self.child_name("process");
        self.shared.processor_with(&name, supplier, &self.node);
        self.shared.with(|t| {
            t.connect_processor_and_state_stores(&name, stores.iter().map(|s| s.store_name()));
        });
        self.derive(name, carry(&self.key_serde), carry(&self.value_serde), true)
    }
}
