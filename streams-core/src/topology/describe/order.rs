//! The order in which Kafka Streams 4.1's `describe()` lists things, reproduced so that our
//! text is the same byte for byte.
//!
//! Two Java collections decide it:
//!
//! - **Hash sets of strings** (a sub-topology's node names, a source's topics, a processor's
//!   stores) iterate by bucket, the bucket being the spread Java `String.hashCode` modulo the
//!   table size, and within a bucket in insertion order; the table doubles when it is more
//!   than three quarters full, or when one bucket chain grows past eight while the table has
//!   fewer than 64 buckets. [`hash_set_order`] replays this. (A chain past eight in a table
//!   of 64 or more becomes a tree, whose order is not replayed: that needs nine names of one
//!   bucket in one set.)
//! - **Tree sets of nodes** (a node's successors and predecessors, a sub-topology's nodes),
//!   red-black trees ordered by the node's size, larger first, then by name. A node's size
//!   is the number of paths from it downstream, itself included; it grows while Kafka
//!   Streams connects the nodes one edge at a time and fills the successor and predecessor
//!   sets as it goes, so an element inserted early sits where its size of the time put it.
//!   [`NodeSet`] replays those insertions, comparing as the sizes are at each moment.

use std::cmp::Ordering;

/// Java's `String.hashCode`: over UTF-16 code units, `h = 31 * h + c`, wrapping.
pub(super) fn java_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

/// Java's `String.compareTo`: lexicographic over UTF-16 code units.
pub(super) fn java_compare(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

/// The capacity Java 17's `new HashSet<>(collection)` starts with for `n` elements.
pub(super) fn copy_capacity(n: usize) -> usize {
    // `(int) (n / .75f) + 1`, at least 16; the cast truncates the float.
    ((n as f32 / 0.75f32) as usize + 1).max(DEFAULT_CAPACITY)
}

/// The table size of a `HashSet` made without a capacity.
pub(super) const DEFAULT_CAPACITY: usize = 16;

/// A bucket chain longer than this is turned into a tree, or makes a small table double.
const TREEIFY_THRESHOLD: usize = 8;

/// Below this table size a long chain doubles the table instead of becoming a tree.
const MIN_TREEIFY_CAPACITY: usize = 64;

/// The order in which a Java `HashSet<String>` with `capacity` (rounded up to a power of
/// two) iterates `items` added in the order given: indices into `items`, each distinct
/// string once (at its first index).
pub(super) fn hash_set_order<S: AsRef<str>>(items: &[S], capacity: usize) -> Vec<usize> {
    let spread = |s: &str| {
        let h = java_hash(s) as u32;
        (h ^ (h >> 16)) as usize
    };
    let mut cap = capacity.max(1).next_power_of_two();
    let mut bins: Vec<Vec<(usize, usize)>> = vec![Vec::new(); cap];
    let mut size = 0usize;
    let grow = |bins: &mut Vec<Vec<(usize, usize)>>, cap: &mut usize| {
        *cap *= 2;
        let mut next = vec![Vec::new(); *cap];
        for (h, i) in bins.drain(..).flatten() {
            next[h & (*cap - 1)].push((h, i));
        }
        *bins = next;
    };
    for (i, item) in items.iter().enumerate() {
        let item = item.as_ref();
        let h = spread(item);
        let b = h & (cap - 1);
        if bins[b].iter().any(|&(_, j)| items[j].as_ref() == item) {
            continue;
        }
        bins[b].push((h, i));
        if bins[b].len() > TREEIFY_THRESHOLD && cap < MIN_TREEIFY_CAPACITY {
            grow(&mut bins, &mut cap);
        }
        size += 1;
        if size > cap / 4 * 3 {
            grow(&mut bins, &mut cap);
        }
    }
    bins.into_iter().flatten().map(|(_, i)| i).collect()
}

/// How Kafka Streams compares two nodes of one sub-topology: the same node is equal;
/// otherwise the larger size comes first (by Java's wrapping `int` difference), then the
/// smaller name.
pub(super) fn compare_nodes(a: usize, b: usize, sizes: &[i32], names: &[&str]) -> Ordering {
    if a == b {
        return Ordering::Equal;
    }
    let by_size = sizes[b].wrapping_sub(sizes[a]);
    if by_size != 0 {
        return by_size.cmp(&0);
    }
    java_compare(names[a], names[b])
}

/// One entry of a [`NodeSet`]'s tree.
#[derive(Debug, Clone)]
struct Entry {
    node: usize,
    left: Option<usize>,
    right: Option<usize>,
    parent: Option<usize>,
    red: bool,
}

/// A set of nodes kept as Java's `TreeSet` keeps it: a red-black tree built by successive
/// insertions, each placed by comparisons made at its own time; iterated in order.
#[derive(Debug, Clone, Default)]
pub(super) struct NodeSet {
    entries: Vec<Entry>,
    root: Option<usize>,
}

impl NodeSet {
    /// Adds `node`, placed by `cmp`; a node that `cmp` finds equal to one on its search
    /// path is not added again.
    pub(super) fn insert(&mut self, node: usize, cmp: impl Fn(usize, usize) -> Ordering) {
        let entry = Entry {
            node,
            left: None,
            right: None,
            parent: None,
            red: false,
        };
        let Some(mut at) = self.root else {
            self.entries.push(entry);
            self.root = Some(self.entries.len() - 1);
            return;
        };
        let new = self.entries.len();
        loop {
            let slot = match cmp(node, self.entries[at].node) {
                Ordering::Equal => return,
                Ordering::Less => &mut self.entries[at].left,
                Ordering::Greater => &mut self.entries[at].right,
            };
            match *slot {
                Some(next) => at = next,
                None => {
                    *slot = Some(new);
                    break;
                }
            }
        }
        self.entries.push(Entry {
            parent: Some(at),
            ..entry
        });
        self.rebalance(new);
    }

    /// The nodes in the set's order.
    pub(super) fn nodes(&self) -> Vec<usize> {
        let mut out = Vec::with_capacity(self.entries.len());
        let mut stack = Vec::new();
        let mut at = self.root;
        while at.is_some() || !stack.is_empty() {
            while let Some(e) = at {
                stack.push(e);
                at = self.entries[e].left;
            }
            if let Some(e) = stack.pop() {
                out.push(self.entries[e].node);
                at = self.entries[e].right;
            }
        }
        out
    }

    fn parent(&self, e: Option<usize>) -> Option<usize> {
        e.and_then(|e| self.entries[e].parent)
    }

    fn left(&self, e: Option<usize>) -> Option<usize> {
        e.and_then(|e| self.entries[e].left)
    }

    fn right(&self, e: Option<usize>) -> Option<usize> {
        e.and_then(|e| self.entries[e].right)
    }

    fn is_red(&self, e: Option<usize>) -> bool {
        e.is_some_and(|e| self.entries[e].red)
    }

    fn paint(&mut self, e: Option<usize>, red: bool) {
        if let Some(e) = e {
            self.entries[e].red = red;
        }
    }

    /// The red-black fix-up after inserting entry `new` (the textbook algorithm, which
    /// `java.util.TreeMap` uses).
    fn rebalance(&mut self, new: usize) {
        let mut x = Some(new);
        self.paint(x, true);
        while x.is_some() && x != self.root && self.is_red(self.parent(x)) {
            let parent = self.parent(x);
            let grand = self.parent(parent);
            let parent_is_left = parent == self.left(grand);
            let uncle = if parent_is_left {
                self.right(grand)
            } else {
                self.left(grand)
            };
            if self.is_red(uncle) {
                self.paint(parent, false);
                self.paint(uncle, false);
                self.paint(grand, true);
                x = grand;
                continue;
            }
            if parent_is_left {
                if x == self.right(parent) {
                    x = parent;
                    self.rotate_left(x);
                }
            } else if x == self.left(parent) {
                x = parent;
                self.rotate_right(x);
            }
            let parent = self.parent(x);
            let grand = self.parent(parent);
            self.paint(parent, false);
            self.paint(grand, true);
            if parent_is_left {
                self.rotate_right(grand);
            } else {
                self.rotate_left(grand);
            }
        }
        let root = self.root;
        self.paint(root, false);
    }

    /// Replaces `p` in its parent (or as the root) by `c`.
    fn replace_child(&mut self, p: usize, c: usize) {
        let up = self.entries[p].parent;
        self.entries[c].parent = up;
        match up {
            None => self.root = Some(c),
            Some(u) if self.entries[u].left == Some(p) => self.entries[u].left = Some(c),
            Some(u) => self.entries[u].right = Some(c),
        }
    }

    fn rotate_left(&mut self, p: Option<usize>) {
        let Some(p) = p else { return };
        let Some(r) = self.entries[p].right else { return };
        let inner = self.entries[r].left;
        self.entries[p].right = inner;
        if let Some(i) = inner {
            self.entries[i].parent = Some(p);
        }
        self.replace_child(p, r);
        self.entries[r].left = Some(p);
        self.entries[p].parent = Some(r);
    }

    fn rotate_right(&mut self, p: Option<usize>) {
        let Some(p) = p else { return };
        let Some(l) = self.entries[p].left else { return };
        let inner = self.entries[l].right;
        self.entries[p].left = inner;
        if let Some(i) = inner {
            self.entries[i].parent = Some(p);
        }
        self.replace_child(p, l);
        self.entries[l].right = Some(p);
        self.entries[p].parent = Some(l);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_hash_codes() {
        // Values of Java's "".hashCode(), "a".hashCode(), "hello".hashCode(),
        // "orders-us".hashCode() and of a string beyond the BMP.
        assert_eq!(java_hash(""), 0);
        assert_eq!(java_hash("a"), 97);
        assert_eq!(java_hash("hello"), 99_162_322);
        assert_eq!(java_hash("\u{1F600}"), 0xD83D * 31 + 0xDE00);
    }

    #[test]
    fn utf16_order_differs_from_utf8_beyond_the_bmp() {
        // U+FF61 is one UTF-16 unit above the surrogates, U+1F600 two units starting 0xD83D.
        assert_eq!(java_compare("\u{FF61}", "\u{1F600}"), Ordering::Greater);
        assert_eq!("\u{FF61}".cmp("\u{1F600}"), Ordering::Less);
    }

    #[test]
    fn hash_sets_iterate_by_bucket_then_insertion() {
        // Buckets (of 16): orders-us 0, orders-apac 2, orders-eu 14; tariffs and products
        // share bucket 15.
        let topics = ["orders-us", "orders-eu", "orders-apac"];
        assert_eq!(hash_set_order(&topics, 16), vec![0, 2, 1]);
        assert_eq!(hash_set_order(&["tariffs", "products"], 16), vec![0, 1]);
        assert_eq!(hash_set_order(&["products", "tariffs"], 16), vec![0, 1]);
        assert_eq!(hash_set_order(&["a", "a", "b"], 16), vec![0, 2]);
    }

    #[test]
    fn hash_sets_grow_past_three_quarters() {
        let names: Vec<String> = (0..100).map(|i| format!("node-{i}")).collect();
        let order = hash_set_order(&names, 16);
        assert_eq!(order.len(), 100);
        // 100 entries fill a table of 256: iteration is by (spread hash & 255).
        let bucket = |i: usize| {
            let h = java_hash(&names[i]) as u32;
            ((h ^ (h >> 16)) & 255, i)
        };
        let mut expected: Vec<usize> = (0..100).collect();
        expected.sort_by_key(|&i| bucket(i));
        assert_eq!(order, expected);
    }

    #[test]
    fn tree_sets_sort_consistent_keys() {
        let names = ["c", "a", "d", "b", "e", "f", "g"];
        let sizes = [1, 1, 2, 1, 1, 3, 1];
        let mut set = NodeSet::default();
        for i in 0..names.len() {
            set.insert(i, |a, b| compare_nodes(a, b, &sizes, &names));
        }
        set.insert(3, |a, b| compare_nodes(a, b, &sizes, &names));
        assert_eq!(set.nodes(), vec![5, 2, 1, 3, 0, 4, 6]);
    }
}
