//! Stream-stream joins: [`KStream::join_stream`], [`KStream::left_join_stream`] and
//! [`KStream::outer_join_stream`] over [`JoinWindows`] (Kafka Streams' `KStream.join`,
//! `leftJoin` and `outerJoin` of two streams, with KIP-633's grace period and without
//! spurious left/outer results).
//!
//! # Topology
//!
//! A join `<join>` (the left stream's `named` name, else `<left node>-join`, `-left_join`,
//! `-outer_join`) adds three nodes: `<join>-this` processes the left stream, `<join>-other`
//! the right one, and `<join>` merges what both forward. Each side keeps its records in a
//! window store that retains duplicates and reads the other side's; left and outer joins
//! share a third store, keyed by time, where records without a partner wait. The stores
//! have Kafka Streams' names (see [`StreamJoined`]): `<base>-this-join-store` and
//! `<base>-other-join-store`, with `-outer` before `-this` or `-other` for a side whose
//! records may go out unmatched, and `<base>-left-shared-join-store` (left join) or
//! `<base>-outer-shared-join-store` (outer join).
//! Reading each other's stores puts both streams in one sub-topology: they must be
//! co-partitioned. A stream whose key changed upstream is repartitioned first, through
//! `<join>-left-repartition` or `<join>-right-repartition`.
//!
//! # Semantics
//!
//! The join's stream time is the largest timestamp either side has seen (per task). A left
//! record at `t` joins the right records of its key in `[t - before, t + after]`, a right
//! record at `t` the left records in `[t - after, t + before]`; each result is timestamped
//! with the later of the two records. A record's window closes when the stream time passes
//! its end plus the grace period (`t + after + grace` for a left record, `t + before +
//! grace` for a right one):
//!
//! - a pair is joined when its later record arrives, if the store of the earlier one still
//!   retains it (for `before + after + grace` behind the stream time), whether or not
//!   either window is still open: a record whose window closed before it arrived (late) is
//!   joined too, as in Kafka Streams;
//! - (left and outer joins) a record that found no partner waits in the outer-join store
//!   and is emitted with `None` for the other side, timestamped with its own time, once
//!   its window closed, by the first record that moves the stream time past it; a partner
//!   arriving before that removes it; a late record without a partner is emitted so at
//!   once. So `(v, None)` is emitted only for a record that is never joined.
//!
//! Several partners give several results, in the order of the partners' timestamps
//! (duplicates in arrival order). Kafka Streams 4.1 differs at the edges: it emits an
//! out-of-order unmatched record at once
//! when its window end (without grace) is behind the stream time, checks for closed
//! windows at most once per second of wall-clock time, and may emit a closed record later
//! than here: it skips the check while the last outer-store entry it looked at is still
//! open, even when an earlier one has closed since.

mod options;
mod outer;
mod side;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use streams_core::{Stores, WindowStoreRef};

use crate::dyn_serde::DynSerde;
use crate::error::DslIssue;
use crate::kstream::KStream;
use crate::processors::PassThrough;
use crate::shared::Shared;
use outer::{OuterKeySerde, ValueListSerde};
use side::{JoinSide, Outer, PairFn, Tracker, UnmatchedFn};

pub use options::{JoinWindows, StreamJoined};

/// Tells the joins of a process apart, for the tracker their sides share in each task.
static JOIN_IDS: AtomicU64 = AtomicU64::new(0);

/// The user's joiner in the forms the two sides need.
struct Joiners<K, V1, V2, VR> {
    left: PairFn<K, V1, V2, VR>,
    right: PairFn<K, V2, V1, VR>,
    /// Set for left and outer joins.
    unmatched: Option<UnmatchedFn<K, V1, V2, VR>>,
    /// Whether unmatched right records are emitted (outer joins).
    right_outer: bool,
}

/// The stores of one join.
struct JoinStores<K, V1, V2> {
    this: WindowStoreRef<DynSerde<K>, DynSerde<V1>>,
    other: WindowStoreRef<DynSerde<K>, DynSerde<V2>>,
    outer: Option<String>,
}

impl<K: Clone + 'static, V: Clone + 'static> KStream<K, V> {
    /// Joins every record with the records of `other` of the same key within `windows`,
    /// forwarding `joiner(key, this value, other value)` once per pair (see the
    /// [module docs](crate::stream_join) for windows, grace and naming). Records whose key
    /// or value is null are skipped (see [null keys and values](crate#null-keys-and-values)).
    pub fn join_stream<V2, VR>(
        &self,
        other: &KStream<K, V2>,
        joiner: impl Fn(&K, &V, &V2) -> VR + Send + Sync + 'static,
        windows: JoinWindows,
        joined: StreamJoined<K, V, V2>,
    ) -> KStream<K, VR>
    where
        V2: Clone + 'static,
        VR: Clone + 'static,
    {
        let joiner = Arc::new(joiner);
        let j = joiner.clone();
        let joiners = Joiners {
            left: Arc::new(move |k, a, b| joiner(k, a, b)),
            right: Arc::new(move |k, b, a| j(k, a, b)),
            unmatched: None,
            right_outer: false,
        };
        self.stream_join("join", other, joiners, windows, joined)
    }

    /// As [`join_stream`](Self::join_stream), and every record of this stream that joins
    /// nothing is forwarded as `joiner(key, value, None)` once its window closed; one whose
    /// key is null, at once.
    pub fn left_join_stream<V2, VR>(
        &self,
        other: &KStream<K, V2>,
        joiner: impl Fn(&K, &V, Option<&V2>) -> VR + Send + Sync + 'static,
        windows: JoinWindows,
        joined: StreamJoined<K, V, V2>,
    ) -> KStream<K, VR>
    where
        V2: Clone + 'static,
        VR: Clone + 'static,
    {
        let joiner = Arc::new(joiner);
        let (j, u) = (joiner.clone(), joiner.clone());
        let joiners = Joiners {
            left: Arc::new(move |k, a, b| joiner(k, a, Some(b))),
            right: Arc::new(move |k, b, a| j(k, a, Some(b))),
            unmatched: Some(Arc::new(move |k, a, _| a.map(|a| u(k, a, None)))),
            right_outer: false,
        };
        self.stream_join("left_join", other, joiners, windows, joined)
    }

    /// As [`left_join_stream`](Self::left_join_stream), and every record of `other` that
    /// joins nothing is forwarded as `joiner(key, None, other value)` too.
    pub fn outer_join_stream<V2, VR>(
        &self,
        other: &KStream<K, V2>,
        joiner: impl Fn(&K, Option<&V>, Option<&V2>) -> VR + Send + Sync + 'static,
        windows: JoinWindows,
        joined: StreamJoined<K, V, V2>,
    ) -> KStream<K, VR>
    where
        V2: Clone + 'static,
        VR: Clone + 'static,
    {
        let joiner = Arc::new(joiner);
        let (j, u) = (joiner.clone(), joiner.clone());
        let joiners = Joiners {
            left: Arc::new(move |k, a, b| joiner(k, Some(a), Some(b))),
            right: Arc::new(move |k, b, a| j(k, Some(a), Some(b))),
            unmatched: Some(Arc::new(move |k, a, b| Some(u(k, a, b)))),
            right_outer: true,
        };
        self.stream_join("outer_join", other, joiners, windows, joined)
    }

    fn stream_join<V2, VR>(
        &self,
        op: &str,
        other: &KStream<K, V2>,
        joiners: Joiners<K, V, V2, VR>,
        windows: JoinWindows,
        joined: StreamJoined<K, V, V2>,
    ) -> KStream<K, VR>
    where
        V2: Clone + 'static,
        VR: Clone + 'static,
    {
        let shared = &self.shared;
        let kafka = shared.kafka_names();
        // Under Kafka Streams' names the nodes are named after any repartitioning, as
        // Kafka Streams does; until then problems are reported against a provisional name.
        let mut node = match (kafka, &self.next_name) {
            (true, Some(n)) => n.clone(),
            (true, None) => format!("{}-{op}", self.node),
            (false, _) => self.child_name(op),
        };
        let node_named = self.next_name.is_some();
        let outer = joiners.unmatched.is_some();
        shared.check_named(node_named || joined.names_given(outer), &node, "a store");
        let key_serde = joined
            .key_serde
            .clone()
            .or_else(|| self.key_serde.clone())
            .or_else(|| other.key_serde.clone());
        let this_serde = joined
            .this_value_serde
            .clone()
            .or_else(|| self.value_serde.clone());
        let other_serde = joined
            .other_value_serde
            .clone()
            .or_else(|| other.value_serde.clone());
        let (Some(ks), Some(v1s), Some(v2s)) = (key_serde, this_serde, other_serde) else {
            shared.issue(DslIssue::MissingSerde {
                operator: node.clone(),
                what: "key or value",
            });
            return self.derive(node, None, None, false);
        };
        if self.repartition_required || other.repartition_required {
            shared.check_named(node_named, &node, "a repartition topic");
        }
        // A side whose unmatched records are emitted takes records with a null key.
        // Kafka Streams names an unnamed join's repartition topics after the streams' nodes.
        let prefix = (!kafka || node_named).then_some(node.as_str());
        let left = co_partitioned(self, prefix, "left", &ks, &v1s, joiners.unmatched.is_some());
        let right = co_partitioned(other, prefix, "right", &ks, &v2s, joiners.right_outer);

        let outer_kinds = (joiners.unmatched.is_some(), joiners.right_outer);
        let (this_side, other_side, generated) = if kafka {
            let names = KafkaJoinNames::take(shared, self.next_name.as_deref(), outer_kinds);
            node = shared.name(Some(&names.merge), "", "");
            (names.this.clone(), names.other.clone(), Some(names))
        } else {
            (format!("{node}-this"), format!("{node}-other"), None)
        };
        let this_side = shared.name(Some(&this_side), "", "");
        let other_side = shared.name(Some(&other_side), "", "");
        let stores = add_stores(
            self,
            &node,
            generated.as_ref(),
            &joined,
            &windows,
            outer_kinds,
            (&ks, &v1s, &v2s),
        );
        let join_id = JOIN_IDS.fetch_add(1, Ordering::Relaxed);
        let outer_params = joiners.unmatched.map(|unmatched| OuterParams {
            store: stores.outer.clone().unwrap_or_default(),
            key_serde: ks.clone(),
            unmatched,
            left_serde: v1s.clone(),
            right_serde: v2s.clone(),
            right_outer: joiners.right_outer,
        });

        let this_spec = SideSpec {
            left: true,
            this: stores.this.clone(),
            other: stores.other.clone(),
            this_serde: v1s.clone(),
            pair: joiners.left,
        };
        add_side(
            shared,
            (&this_side, &left.node),
            windows,
            join_id,
            this_spec,
            outer_params.clone(),
        );
        let other_spec = SideSpec {
            left: false,
            this: stores.other.clone(),
            other: stores.this.clone(),
            this_serde: v2s.clone(),
            pair: joiners.right,
        };
        add_side(
            shared,
            (&other_side, &right.node),
            windows,
            join_id,
            other_spec,
            outer_params,
        );
        let mut names = vec![stores.this.name().to_owned(), stores.other.name().to_owned()];
        names.extend(stores.outer.clone());
        shared.with(|t| {
            t.connect_processor_and_state_stores(&this_side, &names)
                .connect_processor_and_state_stores(&other_side, &names)
                .add_processor(
                    &node,
                    PassThrough::<K, VR>::new,
                    [this_side.clone(), other_side.clone()],
                );
        });
        left.derive(node, Some(ks), None, false)
    }
}

/// One side of a join: whether it is the left one, its own store and the other side's,
/// the serde of its values and its joiner.
struct SideSpec<K, VT, VO, VR> {
    left: bool,
    this: WindowStoreRef<DynSerde<K>, DynSerde<VT>>,
    other: WindowStoreRef<DynSerde<K>, DynSerde<VO>>,
    this_serde: DynSerde<VT>,
    pair: PairFn<K, VT, VO, VR>,
}

/// Adds the processor `name` of one side, fed by `parent`; `outer` is set for left and
/// outer joins.
fn add_side<K, VT, VO, V1, V2, VR>(
    shared: &Shared,
    (name, parent): (&str, &str),
    windows: JoinWindows,
    join_id: u64,
    side: SideSpec<K, VT, VO, VR>,
    outer: Option<OuterParams<K, V1, V2, VR>>,
) where
    K: Clone + 'static,
    VT: Clone + 'static,
    VO: Clone + 'static,
    V1: 'static,
    V2: 'static,
    VR: Clone + 'static,
{
    let SideSpec {
        left,
        this,
        other,
        this_serde,
        pair,
    } = side;
    shared.processor_with(
        name,
        move |ctx| {
            Ok(JoinSide {
                left,
                windows,
                this_store: ctx.store(&this)?,
                other_store: ctx.store(&other)?,
                this_serde: this_serde.clone(),
                pair: pair.clone(),
                outer: outer.as_ref().map(|o| o.open(ctx)).transpose()?,
                tracker: ctx.task_shared(&format!("stream-join-{join_id}-tracker"), Tracker::new)?,
            })
        },
        parent,
    );
}

/// The names Kafka Streams gives a stream-stream join's nodes and, unless the
/// `StreamJoined` names them, its stores. Kafka Streams has two more nodes (one writing each
/// side's window store) whose counter values are taken here unused: this crate's side
/// nodes write their own store.
struct KafkaJoinNames {
    this: String,
    other: String,
    merge: String,
    /// The generated names the stores are named after (`<name>-store`).
    this_generated: String,
    other_generated: String,
}

impl KafkaJoinNames {
    /// Takes the names in Kafka Streams' order, for a join named `named` (`Named`), whose
    /// left and right sides may go out unmatched as `outer`.
    fn take(shared: &Shared, named: Option<&str>, (left_outer, right_outer): (bool, bool)) -> Self {
        let generate = |prefix: &str| shared.kafka_name(prefix).unwrap_or_default();
        let _this_windowed = generate("KSTREAM-WINDOWED-");
        let _other_windowed = generate("KSTREAM-WINDOWED-");
        let this_generated = generate(if right_outer {
            "KSTREAM-OUTERTHIS-"
        } else {
            "KSTREAM-JOINTHIS-"
        });
        let other_generated = generate(if left_outer {
            "KSTREAM-OUTEROTHER-"
        } else {
            "KSTREAM-JOINOTHER-"
        });
        let merge = generate("KSTREAM-MERGE-");
        let this_suffix = if right_outer {
            "-outer-this-join"
        } else {
            "-this-join"
        };
        let other_suffix = if left_outer {
            "-outer-other-join"
        } else {
            "-other-join"
        };
        match named {
            Some(n) => Self {
                this: format!("{n}{this_suffix}"),
                other: format!("{n}{other_suffix}"),
                merge: format!("{n}-merge"),
                this_generated,
                other_generated,
            },
            None => Self {
                this: this_generated.clone(),
                other: other_generated.clone(),
                merge,
                this_generated,
                other_generated,
            },
        }
    }

    /// The store names of an unnamed `StreamJoined`: each side's window store, and the
    /// shared store of unmatched records (`KSTREAM-OUTERSHARED-<n>-store`, `n` the counter
    /// value of this side's name).
    fn stores(&self) -> (String, String, String) {
        let shared = match self.this_generated.rsplit_once('-') {
            Some((_, n)) => format!("KSTREAM-OUTERSHARED-{n}-store"),
            None => format!("{}-shared-store", self.this_generated),
        };
        (
            format!("{}-store", self.this_generated),
            format!("{}-store", self.other_generated),
            shared,
        )
    }
}

/// `stream`, or (when its key changed upstream) `stream` through the repartition topic
/// `<join>-<side>-repartition` (without `join`: named after the stream's node).
fn co_partitioned<K: Clone + 'static, V: Clone + 'static>(
    stream: &KStream<K, V>,
    join: Option<&str>,
    side: &str,
    key_serde: &DynSerde<K>,
    value_serde: &DynSerde<V>,
    keep_null_keys: bool,
) -> KStream<K, V> {
    if !stream.repartition_required {
        return stream.clone();
    }
    let mut s = stream.clone();
    s.key_serde = Some(key_serde.clone());
    s.value_serde = Some(value_serde.clone());
    s.next_name = join.map(|join| format!("{join}-{side}"));
    s.through_topic("group", None, keep_null_keys)
}

/// Adds the window stores (and for left and outer joins the outer-join store).
fn add_stores<K, V1, V2, X>(
    stream: &KStream<K, X>,
    node: &str,
    generated: Option<&KafkaJoinNames>,
    joined: &StreamJoined<K, V1, V2>,
    windows: &JoinWindows,
    (left_outer, right_outer): (bool, bool),
    (ks, v1s, v2s): (&DynSerde<K>, &DynSerde<V1>, &DynSerde<V2>),
) -> JoinStores<K, V1, V2>
where
    K: 'static,
    V1: 'static,
    V2: 'static,
{
    // Kafka Streams' names: a side whose records can go out unmatched is an "outer" store.
    // Under Kafka Streams' names an unnamed `StreamJoined` gets generated store names.
    let generated = generated
        .filter(|_| joined.store_name.is_none())
        .map(KafkaJoinNames::stores);
    let base = joined.store_name.clone().unwrap_or_else(|| node.to_owned());
    let outer_prefix = |outer: bool| if outer { "-outer" } else { "" };
    let this = joined.this_store.clone().unwrap_or_else(|| match &generated {
        Some((this, _, _)) => this.clone(),
        None => format!("{base}{}-this-join-store", outer_prefix(right_outer)),
    });
    let other = joined.other_store.clone().unwrap_or_else(|| match &generated {
        Some((_, other, _)) => other.clone(),
        None => format!("{base}{}-other-join-store", outer_prefix(left_outer)),
    });
    let retention = Duration::from_millis(windows.retention_ms().unsigned_abs());
    let size = Duration::from_millis(windows.size_ms().unsigned_abs());
    let (persistent, logging) = (joined.persistent, joined.logging);
    let this_builder = window_store(this, (retention, size), (persistent, logging), ks, v1s);
    let other_builder = window_store(other, (retention, size), (persistent, logging), ks, v2s);
    let shared_kind = if right_outer { "outer" } else { "left" };
    let outer = left_outer.then(|| match &generated {
        Some((_, _, shared)) => shared.clone(),
        None => format!("{base}-{shared_kind}-shared-join-store"),
    });
    stream.shared.with(|t| {
        let this = t.store(this_builder);
        let other = t.store(other_builder);
        if let Some(name) = &outer {
            let key_serde = OuterKeySerde(ks.clone());
            let b = if persistent {
                Stores::persistent_kv(name, key_serde, ValueListSerde)
            } else {
                Stores::in_memory_kv(name, key_serde, ValueListSerde)
            };
            let b = if logging { b } else { b.without_logging() };
            t.add_state_store(b, std::iter::empty::<&str>());
        }
        JoinStores { this, other, outer }
    })
}

/// A window store of one side: retains duplicates, keeps `retention` behind its stream time.
fn window_store<K: 'static, V: 'static>(
    name: String,
    (retention, size): (Duration, Duration),
    (persistent, logging): (bool, bool),
    ks: &DynSerde<K>,
    vs: &DynSerde<V>,
) -> streams_core::state::WindowStoreBuilder<DynSerde<K>, DynSerde<V>> {
    let b = if persistent {
        Stores::persistent_window_store(name, retention, size, true, ks.clone(), vs.clone())
    } else {
        Stores::in_memory_window_store(name, retention, size, true, ks.clone(), vs.clone())
    };
    if logging { b } else { b.without_logging() }
}

/// What a side needs to open the outer-join store.
struct OuterParams<K, V1, V2, VR> {
    store: String,
    key_serde: DynSerde<K>,
    unmatched: UnmatchedFn<K, V1, V2, VR>,
    left_serde: DynSerde<V1>,
    right_serde: DynSerde<V2>,
    right_outer: bool,
}

impl<K, V1, V2, VR> Clone for OuterParams<K, V1, V2, VR> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            key_serde: self.key_serde.clone(),
            unmatched: self.unmatched.clone(),
            left_serde: self.left_serde.clone(),
            right_serde: self.right_serde.clone(),
            right_outer: self.right_outer,
        }
    }
}

impl<K: 'static, V1: 'static, V2: 'static, VR> OuterParams<K, V1, V2, VR> {
    fn open<KO, VO>(
        &self,
        ctx: &streams_core::ProcessorContext<'_, KO, VO>,
    ) -> Result<Outer<K, V1, V2, VR>, streams_core::state::StoreError> {
        Ok(Outer {
            store: ctx.kv_store::<OuterKeySerde<K>, ValueListSerde>(&self.store)?,
            unmatched: self.unmatched.clone(),
            left_serde: self.left_serde.clone(),
            right_serde: self.right_serde.clone(),
            left_outer: true,
            right_outer: self.right_outer,
        })
    }
}
