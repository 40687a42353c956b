//! One store instance's part of a query: what a stream thread reads for its running tasks
//! and a state updater for its standbys and restoring tasks, through the same code.

use std::ops::Bound;

use streams_state::{SharedKeyValueStore, StoreBuilder};

use super::router::{Op, Partial};

/// One store instance's part of `op` (not [`Op::Lag`], which the instance's owner knows).
/// `builder` is the store's, which says how a window or session store lays out its bytes.
pub(crate) fn read(
    store: &SharedKeyValueStore,
    builder: &dyn StoreBuilder,
    op: &Op,
) -> Result<Partial, String> {
    if let Op::Time(scan) = op {
        return super::windowed::read(store, builder, scan).map(Partial::Time);
    }
    // Between two loop iterations no processor holds the store.
    let store = store
        .try_borrow()
        .map_err(|_| "the store is in use by its task".to_owned())?;
    let part = match op {
        Op::Get(key) => store.get(key).map(Partial::Get),
        Op::Count => store.approximate_num_entries().map(Partial::Count),
        Op::Scan {
            from,
            to,
            reverse,
            limit,
        } => {
            let (from, to) = (as_slice(from), as_slice(to));
            let iter = if *reverse {
                store.reverse_range(from, to)
            } else {
                store.range(from, to)
            };
            iter.and_then(|i| i.take(*limit).collect::<Result<Vec<_>, _>>())
                .map(Partial::Scan)
        }
        Op::Time(_) | Op::Lag => return Err("not a key-value query".to_owned()),
    };
    part.map_err(|e| e.to_string())
}

fn as_slice(b: &Bound<bytes::Bytes>) -> Bound<&[u8]> {
    b.as_ref().map(|k| k.as_ref())
}
