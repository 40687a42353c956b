//! Validation of a [`TopologyBuilder`] and the computation of sub-topologies.

use std::collections::{HashMap, HashSet};

use super::builder::TopologyBuilder;
use super::spec::{NodeKind, SinkTarget, StoreDef};
use super::{SubTopology, Topology};
use crate::model::error::{TopologyError, TopologyIssue};

impl TopologyBuilder {
    /// Validates the topology and computes its sub-topologies.
    pub fn build(&self) -> Result<Topology, TopologyError> {
        build(self)
    }
}

fn build(b: &TopologyBuilder) -> Result<Topology, TopologyError> {
    let mut issues = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    for (i, n) in b.nodes.iter().enumerate() {
        if index.insert(n.name.as_str(), i).is_some() {
            issues.push(TopologyIssue::DuplicateName(n.name.clone()));
        }
    }

    // Edges and their types.
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); b.nodes.len()];
    let mut parents: Vec<Vec<usize>> = vec![Vec::new(); b.nodes.len()];
    let mut topic_owner: HashMap<&str, &str> = HashMap::new();
    for (i, n) in b.nodes.iter().enumerate() {
        if let NodeKind::Source { topics, .. } = &n.kind {
            if topics.is_empty() {
                issues.push(TopologyIssue::NoTopics(n.name.clone()));
            }
            for t in topics {
                if let Some(first) = topic_owner.insert(t, &n.name) {
                    issues.push(TopologyIssue::SharedSourceTopic {
                        topic: t.clone(),
                        first: first.to_owned(),
                        second: n.name.clone(),
                    });
                }
            }
            continue;
        }
        if n.parents.is_empty() {
            issues.push(TopologyIssue::NoParent(n.name.clone()));
        }
        for p in &n.parents {
            let Some(&pi) = index.get(p.as_str()) else {
                issues.push(TopologyIssue::UnknownParent {
                    node: n.name.clone(),
                    parent: p.clone(),
                });
                continue;
            };
            let parent = &b.nodes[pi];
            let (Some(out), Some(input)) = (parent.output, n.input) else {
                issues.push(TopologyIssue::SinkAsParent {
                    node: n.name.clone(),
                    parent: p.clone(),
                });
                continue;
            };
            if !out.same(&input) {
                issues.push(TopologyIssue::TypeMismatch {
                    parent: parent.name.clone(),
                    parent_key: out.key_name,
                    parent_value: out.value_name,
                    child: n.name.clone(),
                    child_key: input.key_name,
                    child_value: input.value_name,
                });
            }
            if !children[pi].contains(&i) {
                children[pi].push(i);
                parents[i].push(pi);
            }
        }
    }
    if let Some(node) = find_cycle(&children) {
        issues.push(TopologyIssue::Cycle(b.nodes[node].name.clone()));
    }

    let stores = connect_stores(b, &index, &mut issues);
    if !issues.is_empty() {
        return Err(TopologyError(issues));
    }
    let subtopologies = subtopologies(b, &parents, &stores, &index);
    check_source_changelogs(b, &stores, &subtopologies, &mut issues);
    if !issues.is_empty() {
        return Err(TopologyError(issues));
    }
    Ok(Topology {
        nodes: b.nodes.clone(),
        stores,
        subtopologies,
        children,
        repartition_partitions: b.repartition_partitions.clone(),
        internal_topics: b.internal_topics.clone(),
        renamed: Default::default(),
        store_links: b.store_links.clone(),
        source_changelogs: b.source_changelogs.clone(),
    })
}

/// A store restored from a source topic must exist, not be global, write no changelog of
/// its own, and share its sub-topology with a source of the topic.
fn check_source_changelogs(
    b: &TopologyBuilder,
    stores: &[StoreDef],
    subs: &[SubTopology],
    issues: &mut Vec<TopologyIssue>,
) {
    for (store, (topic, _)) in &b.source_changelogs {
        let issue = |message: String| TopologyIssue::Store {
            store: store.clone(),
            message,
        };
        let Some(i) = stores.iter().position(|s| s.builder.name() == store) else {
            issues.push(issue(format!(
                "restored from source topic `{topic}` but not added"
            )));
            continue;
        };
        if stores[i].global {
            issues.push(issue(
                "a global store cannot use a source topic as changelog".into(),
            ));
        } else if stores[i].builder.logging_config().is_some() {
            issues.push(issue(format!(
                "restored from source topic `{topic}`, so it must be built without logging"
            )));
        } else if !subs
            .iter()
            .any(|s| s.stores.contains(&i) && s.source_topics.iter().any(|t| t == topic))
        {
            issues.push(issue(format!(
                "restored from topic `{topic}`, which no source of its sub-topology reads"
            )));
        }
    }
}

fn connect_stores(
    b: &TopologyBuilder,
    index: &HashMap<&str, usize>,
    issues: &mut Vec<TopologyIssue>,
) -> Vec<StoreDef> {
    let mut stores = b.stores.clone();
    let mut seen = HashSet::new();
    for s in &stores {
        if !seen.insert(s.builder.name().to_owned()) {
            issues.push(TopologyIssue::DuplicateName(s.builder.name().to_owned()));
        }
    }
    for (processor, store) in &b.connections {
        match stores.iter_mut().find(|s| s.builder.name() == store) {
            Some(s) => s.processors.push(processor.clone()),
            None => issues.push(TopologyIssue::Store {
                store: store.clone(),
                message: format!("unknown store connected to processor `{processor}`"),
            }),
        }
    }
    for s in &stores {
        let name = s.builder.name();
        if s.processors.is_empty() {
            issues.push(TopologyIssue::Store {
                store: name.to_owned(),
                message: "not connected to any processor".into(),
            });
        }
        for p in &s.processors {
            match index.get(p.as_str()).map(|&i| &b.nodes[i].kind) {
                Some(NodeKind::Processor) => {}
                Some(_) => issues.push(TopologyIssue::Store {
                    store: name.to_owned(),
                    message: format!("connected to `{p}`, which is not a processor"),
                }),
                None => issues.push(TopologyIssue::Store {
                    store: name.to_owned(),
                    message: format!("connected to unknown processor `{p}`"),
                }),
            }
        }
    }
    stores
}

/// A node on a cycle, if the graph has one.
fn find_cycle(children: &[Vec<usize>]) -> Option<usize> {
    // 0 = unvisited, 1 = on the stack, 2 = done.
    let mut state = vec![0u8; children.len()];
    for start in 0..children.len() {
        if state[start] != 0 {
            continue;
        }
        let mut stack = vec![(start, 0usize)];
        state[start] = 1;
        while let Some((node, next)) = stack.pop() {
            if let Some(&child) = children[node].get(next) {
                stack.push((node, next + 1));
                match state[child] {
                    0 => {
                        state[child] = 1;
                        stack.push((child, 0));
                    }
                    1 => return Some(child),
                    _ => {}
                }
            } else {
                state[node] = 2;
            }
        }
    }
    None
}

fn subtopologies(
    b: &TopologyBuilder,
    parents: &[Vec<usize>],
    stores: &[StoreDef],
    index: &HashMap<&str, usize>,
) -> Vec<SubTopology> {
    let n = b.nodes.len();
    let mut root: Vec<usize> = (0..n).collect();
    fn find(root: &mut [usize], mut x: usize) -> usize {
        while root[x] != x {
            root[x] = root[root[x]];
            x = root[x];
        }
        x
    }
    let union = |root: &mut Vec<usize>, a: usize, c: usize| {
        let (ra, rc) = (find(root, a), find(root, c));
        if ra != rc {
            root[ra.max(rc)] = ra.min(rc);
        }
    };
    for (i, ps) in parents.iter().enumerate() {
        for &p in ps {
            union(&mut root, i, p);
        }
    }
    for s in stores {
        let members: Vec<usize> = s
            .processors
            .iter()
            .filter_map(|p| index.get(p.as_str()).copied())
            .collect();
        for w in members.windows(2) {
            union(&mut root, w[0], w[1]);
        }
    }
    let mut groups: Vec<(usize, Vec<usize>)> = Vec::new();
    for i in 0..n {
        let r = find(&mut root, i);
        match groups.iter_mut().find(|g| g.0 == r) {
            Some(g) => g.1.push(i),
            None => groups.push((r, vec![i])),
        }
    }
    groups
        .into_iter()
        .enumerate()
        .map(|(id, (_, mut nodes))| {
            nodes.sort_by_key(|&i| (!b.nodes[i].is_source(), i));
            let mut source_topics = Vec::new();
            let mut sink_topics = Vec::new();
            for &i in &nodes {
                match &b.nodes[i].kind {
                    NodeKind::Source { topics, .. } => source_topics.extend(topics.iter().cloned()),
                    NodeKind::Sink {
                        target: SinkTarget::Topic(t),
                    } => sink_topics.push(t.clone()),
                    _ => {}
                }
            }
            let names: HashSet<&str> = nodes.iter().map(|&i| b.nodes[i].name.as_str()).collect();
            let store_idx = stores
                .iter()
                .enumerate()
                .filter(|(_, s)| s.processors.iter().any(|p| names.contains(p.as_str())))
                .map(|(i, _)| i)
                .collect();
            let global = nodes.iter().any(|&i| b.nodes[i].global);
            SubTopology {
                id: id as u32,
                nodes,
                source_topics,
                sink_topics,
                stores: store_idx,
                global,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::find_cycle;

    #[test]
    fn cycles_are_found() {
        assert_eq!(find_cycle(&[vec![1], vec![2], vec![]]), None);
        assert!(find_cycle(&[vec![1], vec![2], vec![0]]).is_some());
        assert!(find_cycle(&[vec![], vec![1]]).is_some());
    }
}
