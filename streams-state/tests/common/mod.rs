//! What the window and the session store model tests share: the key bytes the stores
//! order by, the retention rule of the model, and reading an iterator forward or backward.

/// `v` as 8 bytes whose byte order is numeric order (the stores' encoding of times and
/// segment ids).
pub fn enc(v: i64) -> [u8; 8] {
    ((v as u64) ^ (1 << 63)).to_be_bytes()
}

/// Whether an entry retained by time `t` is visible at `stream_time` (`None`: nothing
/// observed yet) in a store of `retention`: `t > stream_time - retention`.
pub fn visible(stream_time: Option<i64>, retention: i64, t: i64) -> bool {
    stream_time.is_none_or(|st| i128::from(t) > i128::from(st) - i128::from(retention))
}

/// The stored key of `key` retained by `t` in a store of `retention` (segments of half the
/// retention): `[segment(t)][key][suffix]`.
pub fn stored_key(retention: i64, t: i64, key: &str, suffix: &[&[u8]]) -> Vec<u8> {
    let mut b = enc(t.div_euclid(retention / 2)).to_vec();
    b.extend_from_slice(key.as_bytes());
    for part in suffix {
        b.extend_from_slice(part);
    }
    b
}

/// The entries in the byte order of their stored keys.
pub fn in_byte_order<E>(mut v: Vec<(Vec<u8>, E)>) -> Vec<E> {
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v.into_iter().map(|(_, e)| e).collect()
}

/// `v`, reversed when `r`.
pub fn rev<T>(mut v: Vec<T>, r: bool) -> Vec<T> {
    if r {
        v.reverse();
    }
    v
}

/// Every item of `it`, failing the test on an error.
pub fn collect<T>(it: impl Iterator<Item = streams_state::Result<T>>) -> Vec<T> {
    it.collect::<Result<_, _>>().expect("iteration")
}

/// Every item of the iterator `backward` makes when `r`, else of the one `forward` makes.
pub fn read<T, I>(
    r: bool,
    forward: impl FnOnce() -> streams_state::Result<I>,
    backward: impl FnOnce() -> streams_state::Result<I>,
) -> Vec<T>
where
    I: Iterator<Item = streams_state::Result<T>>,
{
    collect(if r { backward() } else { forward() }.unwrap())
}
