//! The suppression node (Kafka Streams' `KTableSuppressProcessor`): buffers each update,
//! then forwards every entry whose buffer time is at or before `stream time - limit`,
//! oldest first, and enforces the buffer's capacity.

use streams_core::Nulls;
use streams_core::{ProcessResult, Processor, ProcessorContext, ProcessorError, Record};

use crate::dyn_serde::DynSerde;
use crate::suppress::buffer::{Buffer, Entry};
use crate::suppress::{BufferConfig, SuppressError, TimeFn, WhenFull};

pub(crate) struct SuppressProcessor<K, V> {
    pub node: String,
    pub buffer: Buffer,
    pub key_serde: DynSerde<K>,
    /// The serde of the table's updates (`None` a deletion).
    pub value_serde: DynSerde<Option<V>>,
    /// The buffer time of a key (window end); `None`: the record's timestamp.
    pub time_of: Option<TimeFn<K>>,
    pub limit_ms: i64,
    pub config: BufferConfig,
    /// Final results only: deletions are not forwarded.
    pub drop_deletions: bool,
    /// The largest timestamp processed.
    pub observed: i64,
}

impl<K: Clone + 'static, V: Clone + 'static> SuppressProcessor<K, V> {
    fn over_capacity(&self) -> bool {
        self.config.max_records.is_some_and(|n| self.buffer.records() > n)
            || self.config.max_bytes.is_some_and(|n| self.buffer.bytes() > n)
    }

    /// Forwards the oldest entry; `false` if the buffer was empty.
    fn emit(&mut self, ctx: &mut ProcessorContext<'_, K, Option<V>>) -> Result<bool, ProcessorError> {
        let Some(e) = self.buffer.pop()? else {
            return Ok(false);
        };
        let value = match &e.value {
            None if self.drop_deletions => return Ok(true),
            None => None,
            Some(bytes) => self.value_serde.deserialize(bytes)?,
        };
        // A deletion is a null value, as the table's stream shows it.
        let nulls = Nulls {
            key: false,
            value: value.is_none(),
        };
        ctx.forward(Record {
            key: self.key_serde.deserialize(&e.key)?,
            value,
            timestamp: e.timestamp,
            headers: e.headers,
            nulls,
        })?;
        Ok(true)
    }
}

impl<K: Clone + 'static, V: Clone + 'static> Processor<K, Option<V>, K, Option<V>>
    for SuppressProcessor<K, V>
{
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, Option<V>>,
        r: Record<K, Option<V>>,
    ) -> ProcessResult {
        self.observed = self.observed.max(r.timestamp);
        let time = self.time_of.as_ref().map_or(r.timestamp, |f| f(&r.key));
        let value = match &r.value {
            None => None,
            Some(_) => {
                let mut out = Vec::new();
                self.value_serde.serialize_into(&r.value, &mut out)?;
                Some(out)
            }
        };
        let entry = Entry {
            key: self.key_serde.serialize(&r.key)?,
            timestamp: r.timestamp,
            headers: r.headers,
            value,
            source: ctx.record_metadata(),
        };
        self.buffer.put(time, &entry)?;
        let expiry = self.observed.saturating_sub(self.limit_ms);
        while self.buffer.min_time()?.is_some_and(|t| t <= expiry) {
            self.emit(ctx)?;
        }
        if self.over_capacity() {
            match self.config.when_full {
                WhenFull::EmitEarly => while self.over_capacity() && self.emit(ctx)? {},
                WhenFull::ShutDown => {
                    return Err(Box::new(SuppressError::BufferFull {
                        node: self.node.clone(),
                        records: self.buffer.records(),
                        max_records: self.config.max_records,
                        bytes: self.buffer.bytes(),
                        max_bytes: self.config.max_bytes,
                    }));
                }
            }
        }
        Ok(())
    }
}
