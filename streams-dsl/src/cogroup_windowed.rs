//! Windowed cogroups: [`CogroupedKStream::windowed_by`] cuts the cogrouped inputs into
//! [`TimeWindows`] (tumbling or hopping), and [`TimeWindowedCogroupedKStream::aggregate`]
//! keeps one aggregate per key and window over all of them, in one window store (Kafka
//! Streams' `TimeWindowedCogroupedKStream`).
//!
//! Each input gets the windowed aggregation node of `windowed_by(..).aggregate(..)`,
//! `<name>-input-<n>`, on the shared window store; a merge node `<name>` forwards their
//! updates keyed by [`Windowed`] keys. `<name>` is the `Materialized` name, else the
//! grouping name of the first input, else `<first input node>-windowed_cogroup`; the store
//! is the `Materialized` name, else `<name>-store`, kept `Materialized::with_retention`,
//! else the window size plus the grace period (also the least accepted).
//!
//! Invariants: as for one windowed aggregation, a window takes a record while it is open
//! (its end plus the grace period after the stream time), and each input's node tracks the
//! stream time of the records it saw, as each of Kafka Streams' per-input processors does.
//! Every update is forwarded; final results only (`EmitStrategy::on_window_close`) are not
//! offered for cogroups.

use std::sync::Arc;

use streams_state::ValueAndTimestampSerde;

use crate::change::OldValues;
use crate::cogroup::{CogroupedKStream, Init, Target};
use crate::dyn_serde::dyn_serde;
use crate::error::DslIssue;
use crate::ktable::KTable;
use crate::options::Materialized;
use crate::windowed::{CoreParams, TimeWindows, Windowed, WindowedSerde, millis};

/// Cogrouped streams cut into time windows, to aggregate per key and window. Made by
/// [`CogroupedKStream::windowed_by`].
pub struct TimeWindowedCogroupedKStream<K, A> {
    cogrouped: CogroupedKStream<K, A>,
    windows: TimeWindows,
}

impl<K: Clone + 'static, A: Clone + 'static> CogroupedKStream<K, A> {
    /// Aggregates per key and time window (tumbling, or hopping with `advance_by`).
    pub fn windowed_by(self, windows: TimeWindows) -> TimeWindowedCogroupedKStream<K, A> {
        TimeWindowedCogroupedKStream {
            cogrouped: self,
            windows,
        }
    }
}

impl<K: Clone + 'static, A: Clone + 'static> TimeWindowedCogroupedKStream<K, A> {
    /// One aggregate per key and window over all inputs, starting as `initializer()`, kept in
    /// the window store `materialized` names (its serde for `A` is required).
    pub fn aggregate(
        &self,
        initializer: impl Fn() -> A + Send + Sync + 'static,
        materialized: Materialized<K, A>,
    ) -> KTable<Windowed<K>, A> {
        let c = &self.cogrouped;
        let shared = &c.shared;
        let windows = self.windows;
        let (node, store) = c.names(materialized.name.as_deref(), "windowed_cogroup");
        if !windows.valid() {
            shared.issue(DslIssue::InvalidWindows {
                operator: node.clone(),
                size_ms: windows.size_ms,
                advance_ms: windows.advance_ms,
            });
        }
        let least_ms = windows.size_ms.saturating_add(windows.grace_ms);
        let retention_ms = materialized.retention.map_or(least_ms, millis);
        if retention_ms < least_ms {
            shared.issue(DslIssue::RetentionTooShort {
                operator: node.clone(),
                retention_ms,
                least_ms,
            });
        }
        let ks = materialized.key_serde.clone().or_else(|| c.key_serde.clone());
        let (Some(ks), Some(vs)) = (ks, materialized.value_serde.clone()) else {
            shared.issue(DslIssue::MissingSerde {
                operator: node.clone(),
                what: "store key or value",
            });
            return KTable::new(shared.clone(), node, None);
        };
        let builder = materialized.window_store_of(
            &store,
            retention_ms,
            windows.size_ms,
            ks.clone(),
            ValueAndTimestampSerde(vs.clone()),
        );
        let store_ref = shared.with(|t| t.store(builder));
        let old_values = OldValues::from_store();
        let params = CoreParams {
            store: store_ref,
            emit_final: None,
            old_values: old_values.clone(),
        };
        let init: Init<A> = Arc::new(initializer);
        let (node, inputs) = c.add_inputs(&node, &store, || Target::Windows {
            windows,
            params: params.clone(),
            init: init.clone(),
        });
        shared.with(|t| {
            for input in &inputs {
                t.connect_processor_and_state_stores(input, [store.as_str()]);
            }
        });
        c.merge::<Windowed<K>>(&node, &inputs);
        shared.set_window_grace(&node, windows.grace_ms);
        let wks = WindowedSerde::of(ks, windows.size_ms);
        KTable::changes(shared.clone(), node, Some(store), old_values)
            .with_serdes(Some(dyn_serde(wks)), Some(vs))
    }
}
