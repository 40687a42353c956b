//! The node adapters a topology makes per task: sources, user processors and sinks, each
//! behind the engine's type-erased [`ErasedNode`] face.
//!
//! Records cross edges as `&mut Option<Record<K, V>>` behind `&mut dyn Any`: the child
//! takes the record out, so forwarding allocates nothing. The topology builder has checked
//! that every edge's types match, so a failed downcast is a bug, reported as an error.

use std::any::Any;
use std::marker::PhantomData;
use std::sync::Arc;

use streams_state::{Serde, SerdeError};

use crate::model::error::{ProcessResult, ProcessorError};
use crate::model::partitioner::{StreamPartitioner, default_partition};
use crate::model::record::{Nulls, OutputRef, RawRecord, Record};
use crate::processor::node::{ErasedNode, NodeContext, NodeFault};
use crate::processor::{Processor, ProcessorContext, ScheduleId};

fn take_record<K: 'static, V: 'static>(record: &mut dyn Any) -> Result<Record<K, V>, ProcessorError> {
    record
        .downcast_mut::<Option<Record<K, V>>>()
        .and_then(Option::take)
        .ok_or_else(|| {
            format!(
                "internal error: expected Record<{}, {}>",
                std::any::type_name::<K>(),
                std::any::type_name::<V>()
            )
            .into()
        })
}

/// A user processor.
pub(crate) struct ProcessorNode<P, KIn, VIn, KOut, VOut> {
    processor: P,
    _types: PhantomData<fn(KIn, VIn, KOut, VOut)>,
}

impl<P, KIn, VIn, KOut, VOut> ProcessorNode<P, KIn, VIn, KOut, VOut> {
    pub fn new(processor: P) -> Self {
        Self {
            processor,
            _types: PhantomData,
        }
    }
}

impl<P, KIn, VIn, KOut, VOut> ErasedNode for ProcessorNode<P, KIn, VIn, KOut, VOut>
where
    P: Processor<KIn, VIn, KOut, VOut>,
    KIn: 'static,
    VIn: 'static,
{
    fn init(&mut self, cx: &dyn NodeContext) -> ProcessResult {
        self.processor.init(&mut ProcessorContext::new(cx))
    }
    fn process(&mut self, cx: &dyn NodeContext, record: &mut dyn Any) -> ProcessResult {
        let record = take_record::<KIn, VIn>(record)?;
        self.processor.process(&mut ProcessorContext::new(cx), record)
    }
    fn punctuate(&mut self, cx: &dyn NodeContext, id: ScheduleId, timestamp: i64) -> ProcessResult {
        self.processor
            .punctuate(&mut ProcessorContext::new(cx), id, timestamp)
    }
    fn flush(&mut self, cx: &dyn NodeContext) -> ProcessResult {
        self.processor.flush(&mut ProcessorContext::new(cx))
    }
    fn close(&mut self) -> ProcessResult {
        self.processor.close()
    }
}

/// A user processor made by its supplier in `init`, with the context (so it can open its
/// stores and schedule punctuators). Until `init` there is no processor; a record or a
/// punctuation before it is an engine bug, reported as an error.
pub(crate) struct SuppliedNode<P, F, KIn, VIn, KOut, VOut> {
    supplier: Arc<F>,
    processor: Option<P>,
    _types: PhantomData<fn(KIn, VIn, KOut, VOut)>,
}

impl<P, F, KIn, VIn, KOut, VOut> SuppliedNode<P, F, KIn, VIn, KOut, VOut> {
    pub fn new(supplier: Arc<F>) -> Self {
        Self {
            supplier,
            processor: None,
            _types: PhantomData,
        }
    }

    fn processor(&mut self) -> Result<&mut P, ProcessorError> {
        self.processor
            .as_mut()
            .ok_or_else(|| "internal error: processor used before init".into())
    }
}

impl<P, F, KIn, VIn, KOut, VOut> ErasedNode for SuppliedNode<P, F, KIn, VIn, KOut, VOut>
where
    P: Processor<KIn, VIn, KOut, VOut>,
    F: Fn(&mut ProcessorContext<'_, KOut, VOut>) -> Result<P, ProcessorError>,
    KIn: 'static,
    VIn: 'static,
{
    fn init(&mut self, cx: &dyn NodeContext) -> ProcessResult {
        let mut ctx = ProcessorContext::new(cx);
        let mut processor = (self.supplier)(&mut ctx)?;
        processor.init(&mut ctx)?;
        self.processor = Some(processor);
        Ok(())
    }
    fn process(&mut self, cx: &dyn NodeContext, record: &mut dyn Any) -> ProcessResult {
        let record = take_record::<KIn, VIn>(record)?;
        self.processor()?.process(&mut ProcessorContext::new(cx), record)
    }
    fn punctuate(&mut self, cx: &dyn NodeContext, id: ScheduleId, timestamp: i64) -> ProcessResult {
        self.processor()?
            .punctuate(&mut ProcessorContext::new(cx), id, timestamp)
    }
    fn flush(&mut self, cx: &dyn NodeContext) -> ProcessResult {
        match self.processor.as_mut() {
            Some(p) => p.flush(&mut ProcessorContext::new(cx)),
            None => Ok(()),
        }
    }
    fn close(&mut self) -> ProcessResult {
        self.processor.as_mut().map_or(Ok(()), Processor::close)
    }
}

/// A source: deserializes raw records and forwards them. It reads the raw record from
/// `&mut Option<RawRecord>` without taking it, so the task still has the original bytes
/// when deserialization fails.
pub(crate) struct SourceNode<KS, VS> {
    key_serde: KS,
    value_serde: VS,
}

impl<KS, VS> SourceNode<KS, VS> {
    pub fn new(key_serde: KS, value_serde: VS) -> Self {
        Self {
            key_serde,
            value_serde,
        }
    }
}

impl<KS, VS> ErasedNode for SourceNode<KS, VS>
where
    KS: Serde,
    VS: Serde,
    KS::Target: Clone + 'static,
    VS::Target: Clone + 'static,
{
    fn init(&mut self, _: &dyn NodeContext) -> ProcessResult {
        Ok(())
    }

    fn process(&mut self, cx: &dyn NodeContext, record: &mut dyn Any) -> ProcessResult {
        let raw = record
            .downcast_ref::<Option<RawRecord>>()
            .and_then(Option::as_ref)
            .ok_or("internal error: a source expects a raw record")?;
        let key = self
            .key_serde
            .deserialize_nullable(raw.key.as_deref())
            .map_err(|source| cx.fault(NodeFault::Deserialize { what: "key", source }))?;
        let value = self
            .value_serde
            .deserialize_nullable(raw.value.as_deref())
            .map_err(|source| {
                cx.fault(NodeFault::Deserialize {
                    what: "value",
                    source,
                })
            })?;
        let record = Record {
            key,
            value,
            timestamp: cx.timestamp(),
            headers: raw.headers.clone(),
            nulls: Nulls {
                key: raw.key.is_none(),
                value: raw.value.is_none(),
            },
        };
        let children = cx.children();
        let Some((last, rest)) = children.split_last() else {
            return Ok(());
        };
        for &child in rest {
            cx.dispatch(child, &mut Some(record.clone()))?;
        }
        cx.dispatch(*last, &mut Some(record))
    }

    fn punctuate(&mut self, _: &dyn NodeContext, _: ScheduleId, _: i64) -> ProcessResult {
        Ok(())
    }
    fn close(&mut self) -> ProcessResult {
        Ok(())
    }
}

/// Chooses a sink's destination topic from the record.
pub(crate) type TopicExtractorFn<K, V> = Arc<dyn Fn(&K, &V) -> String + Send + Sync>;

/// Where a sink node writes.
pub(crate) enum SinkDestination<K, V> {
    Topic(String),
    Extractor(TopicExtractorFn<K, V>),
}

impl<K, V> Clone for SinkDestination<K, V> {
    fn clone(&self) -> Self {
        match self {
            Self::Topic(t) => Self::Topic(t.clone()),
            Self::Extractor(f) => Self::Extractor(f.clone()),
        }
    }
}

/// A sink: serializes records, picks their partition and hands them to the collector.
pub(crate) struct SinkNode<KS: Serde, VS: Serde> {
    pub destination: SinkDestination<KS::Target, VS::Target>,
    pub key_serde: KS,
    pub value_serde: VS,
    pub partitioner: Option<Arc<dyn StreamPartitioner<KS::Target, VS::Target>>>,
    /// Records with a null key are dropped, not written.
    pub skip_null_keys: bool,
    pub key_buf: Vec<u8>,
    pub value_buf: Vec<u8>,
}

impl<KS, VS> ErasedNode for SinkNode<KS, VS>
where
    KS: Serde,
    VS: Serde,
    KS::Target: 'static,
    VS::Target: 'static,
{
    fn init(&mut self, cx: &dyn NodeContext) -> ProcessResult {
        if let SinkDestination::Topic(t) = &mut self.destination
            && let Some(full) = cx.internal_topic(t)
        {
            *t = full.to_owned();
        }
        Ok(())
    }

    fn process(&mut self, cx: &dyn NodeContext, record: &mut dyn Any) -> ProcessResult {
        let record = take_record::<KS::Target, VS::Target>(record)?;
        if self.skip_null_keys && record.nulls.key {
            tracing::debug!(node = cx.node_name(), "not writing a record with a null key");
            cx.count_dropped();
            return Ok(());
        }
        let extracted;
        let topic: &str = match &self.destination {
            SinkDestination::Topic(t) => t,
            SinkDestination::Extractor(f) => {
                extracted = f(&record.key, &record.value);
                &extracted
            }
        };
        self.key_buf.clear();
        self.value_buf.clear();
        let failure = |topic: &str, source: SerdeError| {
            cx.fault(NodeFault::Serialize {
                topic: topic.to_owned(),
                source,
            })
        };
        // A part that was null when read stays null, whatever the serde would write for
        // its typed stand-in (`""` for a string).
        let has_key = !record.nulls.key
            && self
                .key_serde
                .serialize_nullable(&record.key, &mut self.key_buf)
                .map_err(|e| failure(topic, e))?;
        let has_value = !record.nulls.value
            && self
                .value_serde
                .serialize_nullable(&record.value, &mut self.value_buf)
                .map_err(|e| failure(topic, e))?;
        let partitions = cx.partitions(topic);
        let partition = match (&self.partitioner, partitions) {
            (Some(p), Some(n)) => p.partition(topic, &record.key, &record.value, n),
            _ => None,
        }
        .or_else(|| match (has_key, partitions) {
            (true, Some(n)) => Some(default_partition(
                self.key_serde.partition_bytes(&self.key_buf),
                n,
            )),
            _ => None,
        });
        cx.send(OutputRef {
            topic,
            partition,
            key: has_key.then_some(self.key_buf.as_slice()),
            value: has_value.then_some(self.value_buf.as_slice()),
            timestamp: record.timestamp,
            headers: &record.headers,
        })
    }

    fn punctuate(&mut self, _: &dyn NodeContext, _: ScheduleId, _: i64) -> ProcessResult {
        Ok(())
    }
    fn close(&mut self) -> ProcessResult {
        Ok(())
    }
}
