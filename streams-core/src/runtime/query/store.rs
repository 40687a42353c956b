//! [`ReadOnlyKeyValueStore`], the typed query handle over every local task's instance of
//! a store, and [`KeyValueCursor`], a resumable range read in chunks.

use std::collections::VecDeque;
use std::fmt;
use std::ops::Bound;
use std::time::Duration;

use bytes::Bytes;
use streams_state::{KeyRange, OrderedSerde, Serde};

use super::QueryError;
use super::handle::{Chunked, Reader, handle_common};
use super::router::{EpochPin, Op, Partial, merge_scans};

/// How long a query waits for the stream threads by default.
pub const DEFAULT_QUERY_TIMEOUT: Duration = Duration::from_secs(10);

/// The default number of entries a cursor reads per round trip.
pub const DEFAULT_CHUNK_SIZE: usize = 1000;

/// A read-only, typed view of one store over every task of this instance that holds it.
///
/// Made by [`KafkaStreams::store`](crate::KafkaStreams::store); cheap to clone, `Send`
/// and `Sync`, so an HTTP handler can keep one. Every method asks the stream threads (see
/// the [module docs](super) for how, and for the consistency a caller gets). Range reads
/// need an ordered key serde, as in processors.
pub struct ReadOnlyKeyValueStore<KS, VS>(pub(super) Reader<KS, VS>);

handle_common!(ReadOnlyKeyValueStore, "key-value");

impl<KS: Serde + Clone, VS: Serde + Clone> ReadOnlyKeyValueStore<KS, VS> {
    fn ask(&self, op: &Op) -> Result<Vec<Partial>, QueryError> {
        let answered = self.0.router.ask(&self.0.target, op, self.0.timeout)?;
        Ok(answered.parts.into_iter().map(|(_, p)| p).collect())
    }

    /// The value of `key`, if a local task holds it. `None` also when the key belongs to a
    /// partition hosted elsewhere: [`KafkaStreams::query_metadata_for_key`](crate::KafkaStreams::query_metadata_for_key)
    /// says which instance hosts it.
    pub fn get(&self, key: &KS::Target) -> Result<Option<VS::Target>, QueryError> {
        let parts = self.ask(&Op::Get(self.0.key(key)?))?;
        let found = parts.into_iter().find_map(|p| match p {
            Partial::Get(v) => v,
            _ => None,
        });
        found.map(|v| self.0.value(&v)).transpose()
    }

    /// The approximate number of entries over the local tasks.
    pub fn approximate_num_entries(&self) -> Result<u64, QueryError> {
        let parts = self.ask(&Op::Count)?;
        Ok(parts
            .into_iter()
            .map(|p| match p {
                Partial::Count(n) => n,
                _ => 0,
            })
            .sum())
    }

    /// Every entry, ascending by serialized key.
    pub fn all(&self) -> KeyValueCursor<KS, VS> {
        self.cursor(KeyRange::all(), false)
    }

    /// Every entry, descending by serialized key.
    pub fn reverse_all(&self) -> KeyValueCursor<KS, VS> {
        self.cursor(KeyRange::all(), true)
    }

    fn cursor(&self, range: KeyRange, reverse: bool) -> KeyValueCursor<KS, VS> {
        KeyValueCursor {
            store: self.clone(),
            from: range.from.map(Bytes::from),
            to: range.to.map(Bytes::from),
            reverse,
            chunk: DEFAULT_CHUNK_SIZE,
            buffered: VecDeque::new(),
            last_key: None,
            exhausted: false,
            pin: EpochPin::default(),
        }
    }

    fn entry(&self, (k, v): (Bytes, Bytes)) -> Result<(KS::Target, VS::Target), QueryError> {
        Ok((self.0.read_key(&k)?, self.0.value(&v)?))
    }
}

impl<KS: OrderedSerde + Clone, VS: Serde + Clone> ReadOnlyKeyValueStore<KS, VS> {
    fn bound(&self, b: Bound<&KS::Target>) -> Result<Bound<Vec<u8>>, QueryError> {
        let bytes = |k: &KS::Target| {
            self.0.key_serde.serialize(k).map_err(|source| QueryError::Serde {
                what: "bound",
                source,
            })
        };
        Ok(match b {
            Bound::Included(k) => Bound::Included(bytes(k)?),
            Bound::Excluded(k) => Bound::Excluded(bytes(k)?),
            Bound::Unbounded => Bound::Unbounded,
        })
    }

    /// The cursor over the keys between `from` and `to`, in the direction `reverse` says.
    fn key_range(
        &self,
        from: Bound<&KS::Target>,
        to: Bound<&KS::Target>,
        reverse: bool,
    ) -> Result<KeyValueCursor<KS, VS>, QueryError> {
        let range = KeyRange {
            from: self.bound(from)?,
            to: self.bound(to)?,
        };
        Ok(self.cursor(range, reverse))
    }

    /// The entries with keys between `from` and `to`, ascending.
    pub fn range(
        &self,
        from: Bound<&KS::Target>,
        to: Bound<&KS::Target>,
    ) -> Result<KeyValueCursor<KS, VS>, QueryError> {
        self.key_range(from, to, false)
    }

    /// The entries with keys between `from` and `to`, descending.
    pub fn reverse_range(
        &self,
        from: Bound<&KS::Target>,
        to: Bound<&KS::Target>,
    ) -> Result<KeyValueCursor<KS, VS>, QueryError> {
        self.key_range(from, to, true)
    }

    /// The entries whose serialized key starts with the serialized `prefix`, ascending.
    pub fn prefix_scan<PS: OrderedSerde>(
        &self,
        prefix: &PS::Target,
        prefix_serde: &PS,
    ) -> Result<KeyValueCursor<KS, VS>, QueryError> {
        let p = prefix_serde
            .serialize(prefix)
            .map_err(|source| QueryError::Serde {
                what: "bound",
                source,
            })?;
        Ok(self.cursor(KeyRange::prefix(&p), false))
    }
}

/// Where a scan stopped: the last key returned and the rebalance epoch its entries were read
/// in, for a later cursor to continue ([`KeyValueCursor::resume`]). Its text form
/// (`Display`/`FromStr`: `<epoch>.<key in hex>`) fits in a URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResumeToken {
    epoch: u64,
    last_key: Bytes,
}

impl ResumeToken {
    /// The serialized key of the last entry returned.
    pub fn last_key(&self) -> &Bytes {
        &self.last_key
    }
}

impl fmt::Display for ResumeToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.", self.epoch)?;
        self.last_key.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl std::str::FromStr for ResumeToken {
    type Err = QueryError;

    fn from_str(s: &str) -> Result<Self, QueryError> {
        let bad = || QueryError::BadToken(s.to_owned());
        let (epoch, hex) = s.split_once('.').ok_or_else(bad)?;
        if hex.len() % 2 != 0 || !hex.is_ascii() {
            return Err(bad());
        }
        let last_key = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16))
            .collect::<Result<Vec<u8>, _>>()
            .map_err(|_| bad())?;
        Ok(Self {
            epoch: epoch.parse().map_err(|_| bad())?,
            last_key: Bytes::from(last_key),
        })
    }
}

/// One chunk of a cursor: typed entries in the cursor's order.
pub type Chunk<KS, VS> = Vec<(<KS as Serde>::Target, <VS as Serde>::Target)>;

/// A range read in chunks: an iterator of entries that asks the stream threads for at most
/// [`chunk_size`](Self::chunk_size) entries at a time, so that no answer holds the whole
/// range.
///
/// Resumable: [`last_key`](Self::last_key) is the serialized key of the last entry
/// returned; a new cursor over the same range continues after it with
/// [`resume_after`](Self::resume_after), e.g. in the next request of an HTTP client
/// paging through a store.
pub struct KeyValueCursor<KS, VS> {
    store: ReadOnlyKeyValueStore<KS, VS>,
    from: Bound<Bytes>,
    to: Bound<Bytes>,
    reverse: bool,
    chunk: usize,
    buffered: VecDeque<(Bytes, Bytes)>,
    last_key: Option<Bytes>,
    exhausted: bool,
    /// The rebalance epoch the chunks are read in.
    pin: EpochPin,
}

impl<KS, VS> fmt::Debug for KeyValueCursor<KS, VS> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyValueCursor")
            .field("store", &self.store.0.target.store)
            .field("reverse", &self.reverse)
            .field("chunk", &self.chunk)
            .field("last_key", &self.last_key)
            .field("exhausted", &self.exhausted)
            .finish_non_exhaustive()
    }
}

impl<KS: Serde + Clone, VS: Serde + Clone> KeyValueCursor<KS, VS> {
    /// Reads at most `n` entries per round trip (at least 1; default 1,000).
    #[must_use]
    pub fn chunk_size(mut self, n: usize) -> Self {
        self.chunk = n.max(1);
        self
    }

    /// Continues after the serialized key `key` (a [`last_key`](Self::last_key) of an
    /// earlier cursor over the same range): the entries before it, in the cursor's
    /// direction, are skipped. Unlike [`resume`](Self::resume) this does not notice a
    /// rebalance in between: use it on a handle limited to one partition
    /// ([`ReadOnlyKeyValueStore::for_partition`], which fails where the partition is not
    /// hosted) or on a global store.
    #[must_use]
    pub fn resume_after(mut self, key: impl Into<Bytes>) -> Self {
        self.last_key = Some(key.into());
        self
    }

    /// The serialized key of the last entry returned, where a later cursor can resume.
    pub fn last_key(&self) -> Option<&Bytes> {
        self.last_key.as_ref()
    }

    /// Where a later cursor over the same range can continue ([`resume`](Self::resume)):
    /// the last key returned and the rebalance epoch the entries were read in. `None`
    /// before the first entry (and for a global store, which [`resume_after`](Self::resume_after)
    /// continues safely).
    pub fn resume_token(&self) -> Option<ResumeToken> {
        Some(ResumeToken {
            epoch: self.pin.epoch()?,
            last_key: self.last_key.clone()?,
        })
    }

    /// Continues a scan where `token` left it. If this instance rebalanced since (its tasks
    /// may not be those that answered before), the cursor fails with
    /// [`QueryError::Rebalancing`]: the scan must start over, never silently skip what
    /// moved.
    #[must_use]
    pub fn resume(mut self, token: &ResumeToken) -> Self {
        self.last_key = Some(token.last_key.clone());
        self.pin.pin(token.epoch);
        self
    }

    /// Whether the range has been read to its end.
    pub fn is_exhausted(&self) -> bool {
        self.exhausted && self.buffered.is_empty()
    }

    /// The next chunk of entries (at most the chunk size), or `None` at the end of the
    /// range.
    pub fn next_chunk(&mut self) -> Result<Option<Chunk<KS, VS>>, QueryError> {
        let Some(entries) = self.take_chunk()? else {
            return Ok(None);
        };
        if let Some((k, _)) = entries.last() {
            self.last_key = Some(k.clone());
        }
        entries
            .into_iter()
            .map(|e| self.store.entry(e))
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }
}

impl<KS: Serde + Clone, VS: Serde + Clone> Chunked for KeyValueCursor<KS, VS> {
    type Raw = (Bytes, Bytes);

    fn buffered(&mut self) -> &mut VecDeque<(Bytes, Bytes)> {
        &mut self.buffered
    }

    fn fetch(&mut self) -> Result<(), QueryError> {
        self.pin.usable()?;
        if self.exhausted {
            return Ok(());
        }
        let (from, to) = match &self.last_key {
            None => (self.from.clone(), self.to.clone()),
            Some(last) if self.reverse => (self.from.clone(), tighten_upper(&self.to, last)),
            Some(last) => (tighten_lower(&self.from, last), self.to.clone()),
        };
        let op = Op::Scan {
            from,
            to,
            reverse: self.reverse,
            limit: self.chunk,
        };
        let answered = self
            .store
            .0
            .router
            .ask(&self.store.0.target, &op, self.store.0.timeout)?;
        self.pin.observe(answered.epoch)?;
        let (entries, more) = merge_scans(answered.parts, self.reverse, self.chunk);
        self.exhausted = !more;
        self.buffered.extend(entries);
        Ok(())
    }
}

impl<KS: Serde + Clone, VS: Serde + Clone> Iterator for KeyValueCursor<KS, VS> {
    type Item = Result<(KS::Target, VS::Target), QueryError>;

    /// The next entry; an error ends nothing: the next call retries the same chunk.
    fn next(&mut self) -> Option<Self::Item> {
        Some(self.next_raw()?.and_then(|(k, v)| {
            self.last_key = Some(k.clone());
            self.store.entry((k, v))
        }))
    }
}

/// The lower bound of a forward range continued after `last`: the larger of `from` and
/// "after `last`".
fn tighten_lower(from: &Bound<Bytes>, last: &Bytes) -> Bound<Bytes> {
    match from {
        Bound::Included(f) | Bound::Excluded(f) if last < f => from.clone(),
        _ => Bound::Excluded(last.clone()),
    }
}

/// The upper bound of a reverse range continued before `last`: the smaller of `to` and
/// "before `last`".
fn tighten_upper(to: &Bound<Bytes>, last: &Bytes) -> Bound<Bytes> {
    match to {
        Bound::Included(t) | Bound::Excluded(t) if last > t => to.clone(),
        _ => Bound::Excluded(last.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn a_resume_token_reads_back_from_its_text() {
        let t = ResumeToken {
            epoch: 42,
            last_key: Bytes::from_static(b"a\x00\xff:"),
        };
        assert_eq!(t.to_string(), "42.6100ff3a");
        assert_eq!("42.6100ff3a".parse::<ResumeToken>().unwrap(), t);
        for bad in ["", "42", "x.61", "42.6", "42.zz", "42.\u{e9}"] {
            assert!(
                matches!(bad.parse::<ResumeToken>(), Err(QueryError::BadToken(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_resumed_range_never_reaches_outside_its_bounds() {
        assert_eq!(tighten_lower(&Bound::Unbounded, &b("m")), Bound::Excluded(b("m")));
        assert_eq!(
            tighten_lower(&Bound::Included(b("c")), &b("m")),
            Bound::Excluded(b("m"))
        );
        assert_eq!(
            tighten_lower(&Bound::Included(b("c")), &b("a")),
            Bound::Included(b("c"))
        );
        assert_eq!(
            tighten_lower(&Bound::Excluded(b("c")), &b("c")),
            Bound::Excluded(b("c"))
        );
        assert_eq!(tighten_upper(&Bound::Unbounded, &b("m")), Bound::Excluded(b("m")));
        assert_eq!(
            tighten_upper(&Bound::Included(b("x")), &b("m")),
            Bound::Excluded(b("m"))
        );
        assert_eq!(
            tighten_upper(&Bound::Excluded(b("x")), &b("z")),
            Bound::Excluded(b("x"))
        );
    }
}
