//! `split()` into branches: one split node evaluates the predicates in order and forwards
//! each record to the first branch whose predicate holds (or to the default branch).

use std::sync::Arc;

use streams_core::{ProcessResult, Processor, ProcessorContext, Record};

use crate::kstream::KStream;
use crate::processors::PassThrough;

type Predicate<K, V> = Arc<dyn Fn(&K, &V) -> bool + Send + Sync>;

/// Branches being declared on a stream; see [`KStream::split`].
///
/// Branch nodes are named `<split node>-<n>` (n from 1, in declaration order) unless named
/// with [`branch_as`](Self::branch_as), and the default branch `<split node>-default`.
pub struct BranchedKStream<K, V> {
    stream: KStream<K, V>,
    name: String,
    branches: Vec<(Option<String>, Predicate<K, V>)>,
}

struct Split<K, V> {
    branches: Vec<(String, Predicate<K, V>)>,
    default: Option<String>,
}

impl<K: Clone + 'static, V: Clone + 'static> Processor<K, V, K, V> for Split<K, V> {
    fn process(&mut self, ctx: &mut ProcessorContext<'_, K, V>, r: Record<K, V>) -> ProcessResult {
        let target = self
            .branches
            .iter()
            .find(|(_, p)| p(&r.key, &r.value))
            .map(|(n, _)| n)
            .or(self.default.as_ref());
        match target {
            Some(child) => ctx.forward_to(child, r),
            None => Ok(()),
        }
    }
}

impl<K: Clone + 'static, V: Clone + 'static> KStream<K, V> {
    /// Splits this stream into branches: a record goes to the first branch whose predicate
    /// holds.
    pub fn split(&self) -> BranchedKStream<K, V> {
        BranchedKStream {
            name: self.child_name("split"),
            stream: self.clone(),
            branches: Vec::new(),
        }
    }
}

impl<K: Clone + 'static, V: Clone + 'static> BranchedKStream<K, V> {
    /// Adds a branch of the records for which `predicate` holds.
    pub fn branch(mut self, predicate: impl Fn(&K, &V) -> bool + Send + Sync + 'static) -> Self {
        self.branches.push((None, Arc::new(predicate)));
        self
    }

    /// Adds a branch whose node is named `name` (under [`Naming::KafkaStreams`](crate::Naming),
    /// `<split node><name>`, as Kafka Streams' `Branched.as`).
    pub fn branch_as(
        mut self,
        name: &str,
        predicate: impl Fn(&K, &V) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.branches.push((Some(name.to_owned()), Arc::new(predicate)));
        self
    }

    /// The branches in declaration order, then one of the records no predicate took.
    pub fn default_branch(self) -> Vec<KStream<K, V>> {
        self.finish(true)
    }

    /// The branches in declaration order; records no predicate took are dropped.
    pub fn no_default_branch(self) -> Vec<KStream<K, V>> {
        self.finish(false)
    }

    fn finish(self, with_default: bool) -> Vec<KStream<K, V>> {
        let shared = &self.stream.shared;
        // Kafka Streams names branch `i` (from 1; the default branch 0) `<split><i>`, or
        // `<split><Branched name>`, and takes a value of its counter for each.
        let kafka = shared.kafka_names();
        let branch_name = |given: Option<&str>, index: &str| {
            let name = match (kafka, given) {
                (true, Some(g)) => format!("{}{g}", self.name),
                (true, None) => format!("{}{index}", self.name),
                (false, Some(g)) => g.to_owned(),
                (false, None) => format!("{}-{index}", self.name),
            };
            shared.burn_name();
            shared.name(Some(&name), "", "")
        };
        let mut names: Vec<String> = self
            .branches
            .iter()
            .enumerate()
            .map(|(i, (given, _))| branch_name(given.as_deref(), &(i + 1).to_string()))
            .collect();
        let default = with_default.then(|| branch_name(None, if kafka { "0" } else { "default" }));
        let split = Split {
            branches: names
                .iter()
                .cloned()
                .zip(self.branches.iter().map(|(_, p)| p.clone()))
                .collect(),
            default: default.clone(),
        };
        let branches = Arc::new(split.branches);
        let default_child = split.default;
        shared.processor(
            &self.name,
            move || Split {
                branches: (*branches).clone(),
                default: default_child.clone(),
            },
            &self.stream.node,
        );
        names.extend(default);
        names
            .into_iter()
            .map(|name| {
                shared.processor(&name, PassThrough::<K, V>::new, &self.name);
                self.stream.derive(
                    name,
                    self.stream.key_serde.clone(),
                    self.stream.value_serde.clone(),
                    false,
                )
            })
            .collect()
    }
}
