//! Processors for topologies under test whose processing is not the point: one that
//! forwards every record as it is, one that forwards nothing.

use std::marker::PhantomData;

use streams_core::{ProcessResult, Processor, ProcessorContext, Record};

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
