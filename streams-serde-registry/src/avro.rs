//! Avro serdes: typed ([`AvroSerde`], any `serde` type) and generic ([`GenericAvroSerde`],
//! apache-avro's [`Value`]).
//!
//! Serializing writes the value with the writer schema (the serde's own schema, or with
//! `use.latest.version` the subject's latest), framed with that schema's id. Deserializing
//! fetches the writer schema by the record's id (once per id) and resolves the record into
//! the serde's reader schema with Avro's schema resolution: a field the writer lacked takes
//! its default, a field the reader lacks is skipped.

use std::collections::HashMap;
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
#[derive(Debug, Clone)]
pub struct AvroSchema {
    schema: Schema,
    text: String,
    record_name: Option<String>,
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
            text: text.to_owned(),
            record_name,
        })
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
    writers: Mutex<HashMap<u32, Arc<AvroSchema>>>,
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

    fn writer_by_id(&self, id: u32) -> Result<Arc<AvroSchema>, RegistrySerdeError> {
        if let Some(s) = self
            .writers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&id)
        {
            return Ok(Arc::clone(s));
        }
        let registered = self.client.schema_by_id(id)?;
        if registered.schema_type != SchemaType::Avro {
            return Err(RegistrySerdeError::SchemaType {
                id,
                expected: "AVRO",
                actual: registered.schema_type.as_str().to_owned(),
            });
        }
        let parsed = Arc::new(AvroSchema::parse_with_id(&registered.schema, Some(id))?);
        self.writers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, Arc::clone(&parsed));
        Ok(parsed)
    }

    /// The id and schema to write with.
    fn writer(&self) -> Result<(u32, Arc<AvroSchema>), RegistrySerdeError> {
        let own = self.schema.as_ref();
        if self.config.use_latest_version {
            let subject = self.subject(own.map(Arc::as_ref))?;
            let latest = self.client.latest_version(&subject)?;
            return Ok((latest.schema.id, self.writer_by_id(latest.schema.id)?));
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

    fn write(&self, value: Value, out: &mut Vec<u8>) -> Result<(), RegistrySerdeError> {
        let (id, writer) = self.writer()?;
        let resolved = value.resolve(writer.schema()).map_err(|e| {
            RegistrySerdeError::Encode(format!("value does not match writer schema id {id}: {e}"))
        })?;
        let payload = apache_avro::to_avro_datum(writer.schema(), resolved)
            .map_err(|e| RegistrySerdeError::Encode(e.to_string()))?;
        wire::write_header(id, out);
        out.extend_from_slice(&payload);
        Ok(())
    }

    fn read(&self, bytes: &[u8]) -> Result<Value, RegistrySerdeError> {
        let (id, mut payload) = wire::split(bytes)?;
        let writer = self.writer_by_id(id)?;
        let reader = self.schema.as_deref().map(AvroSchema::schema);
        let value = apache_avro::from_avro_datum(writer.schema(), &mut payload, reader).map_err(|e| {
            RegistrySerdeError::Decode {
                id,
                message: e.to_string(),
            }
        })?;
        if !payload.is_empty() {
            return Err(RegistrySerdeError::Decode {
                id,
                message: format!("{} bytes left over after the record", payload.len()),
            });
        }
        Ok(value)
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
        let value = apache_avro::to_value(value).map_err(|e| RegistrySerdeError::Encode(e.to_string()))?;
        self.core.write(value, out)
    }

    /// Deserializes a framed record, with the typed error.
    pub fn try_deserialize(&self, bytes: &[u8]) -> Result<T, RegistrySerdeError> {
        let value = self.core.read(bytes)?;
        apache_avro::from_value(&value).map_err(|e| RegistrySerdeError::Decode {
            id: wire::split(bytes).map(|(id, _)| id).unwrap_or_default(),
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
        self.core.writer_by_id(id)
    }

    /// Serializes `value` into `out`, with the typed error.
    pub fn try_serialize_into(&self, value: &Value, out: &mut Vec<u8>) -> Result<(), RegistrySerdeError> {
        self.core.write(value.clone(), out)
    }

    /// Deserializes a framed record, with the typed error.
    pub fn try_deserialize(&self, bytes: &[u8]) -> Result<Value, RegistrySerdeError> {
        self.core.read(bytes)
    }
}

serde_through_try!("GenericAvroSerde", [] GenericAvroSerde => Value);

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use streams_state::Serde;

    use super::*;
    use crate::config::RegistryConfig;
    use crate::error::{RegistryError, WireError};

    const SCHEMA: &str = r#"{"type":"record","name":"P","fields":[{"name":"x","type":"long"}]}"#;

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct P {
        x: i64,
    }

    /// A client of a registry that is not there, failing fast.
    fn nowhere() -> SchemaRegistryClient {
        let mut config = RegistryConfig::new("http://127.0.0.1:9");
        config.max_retries = 1;
        config.retry_wait = Duration::from_millis(1);
        SchemaRegistryClient::new(config).unwrap()
    }

    #[test]
    fn bad_frames_fail_before_any_request() {
        let client = nowhere();
        let serde = AvroSerde::<P>::new(
            client.clone(),
            SerdeConfig::default(),
            "t",
            RecordPart::Value,
            SCHEMA,
        )
        .unwrap();
        assert_eq!(
            serde.try_deserialize(b"\x07\x00\x00\x00\x01\x02").unwrap_err(),
            RegistrySerdeError::Wire(WireError::UnknownMagicByte { byte: 7 })
        );
        assert_eq!(
            serde.try_deserialize(b"").unwrap_err(),
            RegistrySerdeError::Wire(WireError::TooShort { len: 0 })
        );
        let e = Serde::deserialize(&serde, b"\x00\x01").unwrap_err();
        assert_eq!(e.serde, "AvroSerde");
        assert!(e.message.contains("too short"), "{}", e.message);
        assert_eq!(client.http_requests(), 0);
    }

    #[test]
    fn unreachable_registry_is_named() {
        let serde =
            AvroSerde::<P>::new(nowhere(), SerdeConfig::default(), "t", RecordPart::Value, SCHEMA).unwrap();
        let e = serde
            .try_serialize_into(&P { x: 1 }, &mut Vec::new())
            .unwrap_err();
        assert!(
            matches!(
                e,
                RegistrySerdeError::Registry(RegistryError::Unreachable { attempts: 2, .. })
            ),
            "{e:?}"
        );
        let e = serde.try_deserialize(&wire::frame(1, b"\x02")).unwrap_err();
        assert!(
            matches!(e, RegistrySerdeError::Registry(RegistryError::Unreachable { .. })),
            "{e:?}"
        );
    }

    #[test]
    fn invalid_schemas_and_subjects() {
        let e = AvroSerde::<P>::new(nowhere(), SerdeConfig::default(), "t", RecordPart::Value, "{nope")
            .unwrap_err();
        assert!(
            matches!(e, RegistrySerdeError::Schema { format: "AVRO", .. }),
            "{e:?}"
        );
        let record = SerdeConfig {
            subject_name_strategy: crate::SubjectNameStrategy::Record,
            ..SerdeConfig::default()
        };
        let serde = AvroSerde::<i64>::new(nowhere(), record, "t", RecordPart::Key, r#""long""#).unwrap();
        assert!(matches!(serde.subject(), Err(RegistrySerdeError::Subject(_))));
        let generic =
            GenericAvroSerde::new(nowhere(), SerdeConfig::default(), "t", RecordPart::Value, None).unwrap();
        assert!(matches!(
            generic.try_serialize_into(&Value::Long(1), &mut Vec::new()),
            Err(RegistrySerdeError::Encode(_))
        ));
    }
}
