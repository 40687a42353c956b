//! Processors for topologies under test whose processing is not the point: one that
//! forwards every record as it is, one that forwards nothing, and a keyed count.

use std::marker::PhantomData;

use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::{KvStore, ProcessResult, Processor, ProcessorContext, Record};

/// Forwards every record unchanged, from records `K`, `V` to the same.
pub struct Pass<K, V>(PhantomData<fn(K, V)>);

impl<K, V> Default for Pass<K, V> {
    fn default() -> Self {
        Self(PhantomData)
    }
}

impl<K: Clone + 'static, V: Clone + 'static> Processor<K, V, K, V> for Pass<K, V> {
    fn process(&mut self, ctx: &mut ProcessorContext<'_, K, V>, r: Record<K, V>) -> ProcessResult {
        ctx.forward(r)
    }
}

/// Takes records `K`, `V` and forwards nothing (declared to forward `KO`, `VO`): a global
/// store's updater, or a node of which only the shape matters.
pub struct Discard<K, V, KO = (), VO = ()>(PhantomData<fn(K, V, KO, VO)>);

impl<K, V, KO, VO> Default for Discard<K, V, KO, VO> {
    fn default() -> Self {
        Self(PhantomData)
    }
}

impl<K: 'static, V: 'static, KO: 'static, VO: 'static> Processor<K, V, KO, VO> for Discard<K, V, KO, VO> {
    fn process(&mut self, _: &mut ProcessorContext<'_, KO, VO>, _: Record<K, V>) -> ProcessResult {
        Ok(())
    }
}

/// Counts records per key in a store of `u64` counts and forwards each new count: the
/// store `counts`, opened at init ([`Count::default`]), or one given open ([`Count::new`]).
#[derive(Default)]
pub struct Count {
    store: Option<KvStore<StringSerde, U64Serde>>,
}

impl Count {
    /// Counts in `store`, opened by the processor's supplier.
    pub fn new(store: KvStore<StringSerde, U64Serde>) -> Self {
        Self { store: Some(store) }
    }
}

impl Processor<String, String, String, u64> for Count {
    fn init(&mut self, ctx: &mut ProcessorContext<'_, String, u64>) -> ProcessResult {
        if self.store.is_none() {
            self.store = Some(ctx.kv_store("counts")?);
        }
        Ok(())
    }

    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, u64>,
        r: Record<String, String>,
    ) -> ProcessResult {
        let store = self.store.as_ref().ok_or("init")?;
        let n = store.get(&r.key)?.unwrap_or(0) + 1;
        store.put(&r.key, &n)?;
        ctx.forward(Record::new(r.key, n, r.timestamp))
    }
}
