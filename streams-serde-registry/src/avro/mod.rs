//! Avro serdes: typed ([`AvroSerde`], any `serde` type) and generic ([`GenericAvroSerde`],
//! apache-avro's [`Value`]).
//!
//! Serializing writes the value with the writer schema (the serde's own schema, or with
//! `use.latest.version` the subject's latest), framed with that schema's id. Deserializing
//! fetches the writer schema by the record's id (once per id) and resolves the record into
//! the serde's reader schema with Avro's schema resolution: a field the writer lacked takes
//! its default, a field the reader lacks is skipped.
//!
//! # Two paths
//!
//! The typed serde encodes a `serde` value straight to Avro binary and decodes Avro binary
//! straight into the type (`serde_avro_fast`), without building a [`Value`] tree, whenever
//! no schema resolution is involved: when writing, and when reading a record whose writer
//! schema is the serde's own (the same JSON). Everything else takes apache-avro's path
//! through a [`Value`]: reading a record written with another schema (resolution, defaults),
//! and any value the direct path refuses, so that the direct path never changes what is
//! accepted: a struct lacking a field that has a default is written with the default, and
//! an error names the mismatch as apache-avro words it.

use std::collections::HashMap;
use std::io::BufRead;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use apache_avro::Schema;
use apache_avro::types::Value;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::client::{SchemaRegistryClient, SchemaType};
use crate::config::{RecordPart, SerdeConfig};
use crate::error::RegistrySerdeError;
use crate::wire;

/// A parsed Avro schema with the text it was parsed from (what is registered).
#[derive(Clone)]
pub struct AvroSchema {
    schema: Schema,
    /// The same schema for the direct path; `None` if `serde_avro_fast` does not take it.
    direct: Option<Arc<serde_avro_fast::Schema>>,
    text: String,
    record_name: Option<String>,
}

impl std::fmt::Debug for AvroSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AvroSchema")
            .field("schema", &self.schema)
            .field("direct", &self.direct.is_some())
            .field("text", &self.text)
            .finish()
    }
}

impl AvroSchema {
    /// Parses an Avro schema from its JSON text.
    pub fn parse(text: &str) -> Result<Self, RegistrySerdeError> {
        Self::parse_with_id(text, None)
    }

    fn parse_with_id(text: &str, id: Option<u32>) -> Result<Self, RegistrySerdeError> {
        let schema = Schema::parse_str(text).map_err(|e| RegistrySerdeError::Schema {
            format: "AVRO",
            id,
            message: e.to_string(),
        })?;
        let record_name = match &schema {
            Schema::Record(_) | Schema::Enum(_) | Schema::Fixed(_) => schema.name().map(|n| n.fullname(None)),
            _ => None,
        };
        Ok(Self {
            schema,
            direct: text.parse().ok().map(Arc::new),
            text: text.to_owned(),
            record_name,
        })
    }

    /// Whether `other` is this schema: the same JSON, whatever its spacing and key order.
    /// Reading a record of the same schema needs no resolution.
    fn same_json(&self, other: &AvroSchema) -> bool {
        self.text == other.text
            || matches!(
                (
                    serde_json::from_str::<serde_json::Value>(&self.text),
                    serde_json::from_str::<serde_json::Value>(&other.text),
                ),
                (Ok(a), Ok(b)) if a == b
            )
    }

    /// Appends `value`'s Avro binary by the direct path. `false`, with `out` as it was,
    /// where the direct path does not take this schema or refuses the value.
    fn encode_direct<T: Serialize + ?Sized>(&self, value: &T, out: &mut Vec<u8>) -> bool {
        let Some(direct) = self.direct.as_deref() else {
            return false;
        };
        let start = out.len();
        let config = &mut serde_avro_fast::ser::SerializerConfig::new(direct);
        if serde_avro_fast::to_datum(value, &mut *out, config).is_err() {
            out.truncate(start);
            return false;
        }
        true
    }

    /// Decodes a record of this schema by the direct path: the value, and how many bytes
    /// of `payload` follow it. `None` where the direct path does not take this schema or
    /// refuses the bytes.
    fn decode_direct<T: DeserializeOwned>(&self, payload: &[u8]) -> Option<(T, usize)> {
        let mut state = serde_avro_fast::de::DeserializerState::from_slice(payload, self.direct.as_deref()?);
        let value = T::deserialize(state.deserializer()).ok()?;
        let rest = state.into_reader().fill_buf().map_or(0, <[u8]>::len);
        Some((value, rest))
    }

    /// Appends `value`'s Avro binary by apache-avro's path: resolved against this schema
    /// (defaults filled in, promotions applied), then encoded.
    fn encode_value(&self, value: Value, out: &mut Vec<u8>) -> Result<(), String> {
        let resolved = value.resolve(&self.schema).map_err(|e| e.to_string())?;
        let payload = apache_avro::to_avro_datum(&self.schema, resolved).map_err(|e| e.to_string())?;
        out.extend_from_slice(&payload);
        Ok(())
    }

    /// The parsed schema.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// The schema's text, as registered.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The fully qualified name of a named schema (record, enum, fixed).
    pub fn record_name(&self) -> Option<&str> {
        self.record_name.as_deref()
    }
}

/// What the typed and the generic serde share: registry, subject, schemas and caches.
struct AvroCore {
    client: SchemaRegistryClient,
    config: SerdeConfig,
    topic: String,
    part: RecordPart,
    /// The application's schema: what is registered and written, and what records are
    /// resolved into. `None` for a generic serde that reads with the writer schemas.
    schema: Option<Arc<AvroSchema>>,
    /// The id of `schema` under its subject, once known (not with `use.latest.version`).
    own_id: OnceLock<u32>,
    /// Writer schemas by id, parsed.
    writers: Mutex<HashMap<u32, Writer>>,
}

/// A writer schema, and whether it is the core's own schema (no resolution to read it).
#[derive(Clone)]
struct Writer {
    schema: Arc<AvroSchema>,
    is_reader: bool,
}

impl AvroCore {
    /// A core for `topic`'s `part`, with the Avro schema `schema` (JSON text) if any.
    fn new(
        client: SchemaRegistryClient,
        config: SerdeConfig,
        topic: String,
        part: RecordPart,
        schema: Option<&str>,
    ) -> Result<Self, RegistrySerdeError> {
        Ok(Self {
            client,
            config,
            topic,
            part,
            schema: schema.map(AvroSchema::parse).transpose()?.map(Arc::new),
            own_id: OnceLock::new(),
            writers: Mutex::default(),
        })
    }

    /// The `Debug` output of the serde `name` around this core.
    fn debug(&self, name: &str, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct(name)
            .field("topic", &self.topic)
            .field("part", &self.part)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }

    fn subject(&self, schema: Option<&AvroSchema>) -> Result<String, RegistrySerdeError> {
        self.config
            .subject_name_strategy
            .subject(&self.topic, self.part, schema.and_then(AvroSchema::record_name))
            .map_err(RegistrySerdeError::Subject)
    }

    fn writer_by_id(&self, id: u32) -> Result<Writer, RegistrySerdeError> {
        if let Some(w) = self
            .writers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&id)
        {
            return Ok(w.clone());
        }
        let registered = self.client.schema_of_type(id, SchemaType::Avro)?;
        let parsed = Arc::new(AvroSchema::parse_with_id(&registered.schema, Some(id))?);
        let writer = Writer {
            is_reader: self.schema.as_deref().is_some_and(|own| own.same_json(&parsed)),
            schema: parsed,
        };
        self.writers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, writer.clone());
        Ok(writer)
    }

    /// The id and schema to write with.
    fn writer(&self) -> Result<(u32, Arc<AvroSchema>), RegistrySerdeError> {
        let own = self.schema.as_ref();
        if self.config.use_latest_version {
            let subject = self.subject(own.map(Arc::as_ref))?;
            let latest = self.client.latest_version(&subject)?;
            return Ok((latest.schema.id, self.writer_by_id(latest.schema.id)?.schema));
        }
        let Some(own) = own else {
            return Err(RegistrySerdeError::Encode(
                "this generic Avro serde has no schema to write with (give it one, or set use.latest.version)".into(),
            ));
        };
        if let Some(&id) = self.own_id.get() {
            return Ok((id, Arc::clone(own)));
        }
        let subject = self.subject(Some(own))?;
        let id = if self.config.auto_register_schemas {
            self.client.register(&subject, SchemaType::Avro, own.text())?
        } else {
            self.client
                .lookup(&subject, SchemaType::Avro, own.text())?
                .schema
                .id
        };
        let _ = self.own_id.set(id);
        Ok((id, Arc::clone(own)))
    }

    /// Writes `value` framed, by apache-avro's path.
    fn write_value(&self, value: Value, out: &mut Vec<u8>) -> Result<(), RegistrySerdeError> {
        let (id, writer) = self.writer()?;
        let start = out.len();
        wire::write_header(id, out);
        writer.encode_value(value, out).map_err(|e| {
            out.truncate(start);
            RegistrySerdeError::Encode(format!("value does not match writer schema id {id}: {e}"))
        })
    }

    /// Reads a record through apache-avro into a [`Value`] of the reader schema.
    /// `id` and `writer` are the record's schema id and writer schema, `payload` what
    /// follows the header.
    fn read_value(&self, id: u32, writer: &Writer, mut payload: &[u8]) -> Result<Value, RegistrySerdeError> {
        // The same schema needs no resolution, which apache-avro would do all the same.
        let reader = match writer.is_reader {
            true => None,
            false => self.schema.as_deref().map(AvroSchema::schema),
        };
        let value =
            apache_avro::from_avro_datum(writer.schema.schema(), &mut payload, reader).map_err(|e| {
                RegistrySerdeError::Decode {
                    id,
                    message: e.to_string(),
                }
            })?;
        left_over(id, payload.len())?;
        Ok(value)
    }
}

/// Fails if a record's payload has `rest` bytes after its value.
fn left_over(id: u32, rest: usize) -> Result<(), RegistrySerdeError> {
    match rest {
        0 => Ok(()),
        n => Err(RegistrySerdeError::Decode {
            id,
            message: format!("{n} bytes left over after the record"),
        }),
    }
}

/// An Avro serde of a `serde` type `T`, for one topic's keys or values.
///
/// `T`'s `Serialize`/`Deserialize` must match the schema's shape (field names; Rust
/// `Option<X>` for a `["null", X]` union). The schema is the writer schema when
/// serializing and the reader schema when deserializing.
///
/// ```no_run
/// use serde::{Deserialize, Serialize};
/// use streams_serde_registry::{AvroSerde, RecordPart, SchemaRegistryClient, SerdeConfig};
///
/// #[derive(Serialize, Deserialize)]
/// struct User { name: String, age: i32 }
///
/// let client = SchemaRegistryClient::from_properties([("schema.registry.url", "http://localhost:8081")])?;
/// let schema = r#"{"type":"record","name":"User","fields":[
///     {"name":"name","type":"string"},{"name":"age","type":"int","default":0}]}"#;
/// let users = AvroSerde::<User>::new(client, SerdeConfig::default(), "users", RecordPart::Value, schema)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct AvroSerde<T> {
    core: AvroCore,
    _type: PhantomData<fn() -> T>,
}

impl<T> std::fmt::Debug for AvroSerde<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.core.debug("AvroSerde", f)
    }
}

impl<T: Serialize + DeserializeOwned> AvroSerde<T> {
    /// A serde for the keys or values (`part`) of `topic`, with the Avro schema `schema`
    /// (JSON text). The subject follows `config.subject_name_strategy`. Makes no request.
    pub fn new(
        client: SchemaRegistryClient,
        config: SerdeConfig,
        topic: impl Into<String>,
        part: RecordPart,
        schema: &str,
    ) -> Result<Self, RegistrySerdeError> {
        Ok(Self {
            core: AvroCore::new(client, config, topic.into(), part, Some(schema))?,
            _type: PhantomData,
        })
    }

    /// The subject this serde registers or looks up its schema under.
    pub fn subject(&self) -> Result<String, RegistrySerdeError> {
        self.core.subject(self.core.schema.as_deref())
    }

    /// Serializes `value` into `out` (header and Avro binary), with the typed error.
    pub fn try_serialize_into(&self, value: &T, out: &mut Vec<u8>) -> Result<(), RegistrySerdeError> {
        let (id, writer) = self.core.writer()?;
        let start = out.len();
        wire::write_header(id, out);
        if writer.encode_direct(value, out) {
            return Ok(());
        }
        // apache-avro's path decides: it fills in defaults, or names the mismatch.
        out.truncate(start);
        let value = apache_avro::to_value(value).map_err(|e| RegistrySerdeError::Encode(e.to_string()))?;
        self.core.write_value(value, out)
    }

    /// Deserializes a framed record, with the typed error.
    pub fn try_deserialize(&self, bytes: &[u8]) -> Result<T, RegistrySerdeError> {
        let (id, payload) = wire::split(bytes)?;
        let writer = self.core.writer_by_id(id)?;
        if writer.is_reader
            && let Some((value, rest)) = writer.schema.decode_direct(payload)
        {
            left_over(id, rest)?;
            return Ok(value);
        }
        // Another schema (resolution), or bytes the direct path refuses: apache-avro's
        // path decides, and words any error.
        let value = self.core.read_value(id, &writer, payload)?;
        apache_avro::from_value(&value).map_err(|e| RegistrySerdeError::Decode {
            id,
            message: format!("cannot convert to the target type: {e}"),
        })
    }
}

serde_through_try!("AvroSerde", [T: Serialize + DeserializeOwned + 'static] AvroSerde<T> => T);

/// An Avro serde of apache-avro's generic [`Value`], for one topic's keys or values.
///
/// With a schema it writes with that schema and resolves what it reads into it; without
/// one it reads every record as written (with its writer schema) and can write only with
/// `use.latest.version`.
pub struct GenericAvroSerde {
    core: AvroCore,
}

impl std::fmt::Debug for GenericAvroSerde {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.core.debug("GenericAvroSerde", f)
    }
}

impl GenericAvroSerde {
    /// A serde for the keys or values (`part`) of `topic`, with an optional Avro schema
    /// (JSON text). Makes no request.
    pub fn new(
        client: SchemaRegistryClient,
        config: SerdeConfig,
        topic: impl Into<String>,
        part: RecordPart,
        schema: Option<&str>,
    ) -> Result<Self, RegistrySerdeError> {
        Ok(Self {
            core: AvroCore::new(client, config, topic.into(), part, schema)?,
        })
    }

    /// The writer schema of a framed record, fetched by its id (once per id).
    pub fn writer_schema(&self, bytes: &[u8]) -> Result<Arc<AvroSchema>, RegistrySerdeError> {
        let (id, _) = wire::split(bytes)?;
        Ok(self.core.writer_by_id(id)?.schema)
    }

    /// Serializes `value` into `out`, with the typed error.
    pub fn try_serialize_into(&self, value: &Value, out: &mut Vec<u8>) -> Result<(), RegistrySerdeError> {
        self.core.write_value(value.clone(), out)
    }

    /// Deserializes a framed record, with the typed error.
    pub fn try_deserialize(&self, bytes: &[u8]) -> Result<Value, RegistrySerdeError> {
        let (id, payload) = wire::split(bytes)?;
        let writer = self.core.writer_by_id(id)?;
        self.core.read_value(id, &writer, payload)
    }
}

serde_through_try!("GenericAvroSerde", [] GenericAvroSerde => Value);

#[cfg(test)]
mod tests;
