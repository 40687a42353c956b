//! Serdes chosen at run time: the DSL keeps every operator's serdes as [`DynSerde`]s, so
//! streams and tables of any types share one representation of them. A leaf of the crate.

use std::sync::Arc;

use streams_state::Serde;

/// A serde behind an `Arc`, chosen at run time. Every store the DSL creates is typed
/// `KvStore<DynSerde<K>, DynSerde<V>>`, which is what
/// `streams_test_utils::TopologyTestDriver::kv_store` must be asked for; such a handle reads
/// plain values, and [`timestamped`](crate::timestamped) makes it read each value's timestamp
/// too.
pub type DynSerde<T> = Arc<dyn Serde<Target = T>>;

/// Boxes a serde as a [`DynSerde`].
pub fn dyn_serde<S: Serde>(serde: S) -> DynSerde<S::Target> {
    Arc::new(serde)
}

/// `serde` again when `B` is the type `A`, else `None`: operators that may change a type
/// keep the serde when the type stayed the same.
pub(crate) fn carry<A: 'static, B: 'static>(serde: &Option<DynSerde<A>>) -> Option<DynSerde<B>> {
    let boxed: Box<dyn std::any::Any> = Box::new(serde.clone()?);
    boxed.downcast::<DynSerde<B>>().ok().map(|b| *b)
}

#[cfg(test)]
mod tests {
    use streams_state::serde::StringSerde;

    use super::*;

    #[test]
    fn carry_keeps_a_serde_only_for_the_same_type() {
        let s: Option<DynSerde<String>> = Some(dyn_serde(StringSerde));
        let same: Option<DynSerde<String>> = carry(&s);
        assert_eq!(same.unwrap().serialize(&"x".to_owned()).unwrap(), b"x");
        assert!(carry::<String, u64>(&s).is_none());
        assert!(carry::<String, String>(&None).is_none());
    }
}
