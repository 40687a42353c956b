//! A JSON Schema serde: `serde` types as JSON text, framed with the id of a registered JSON
//! schema.
//!
//! The payload is the value's JSON (`serde_json`). The schema is registered (or looked up)
//! as the record's contract, and a record's schema id is checked to name a JSON schema known
//! to the registry when it is read. With `json.fail.invalid.schema` each value is also
//! validated: against the serde's schema when written, against the record's writer schema
//! when read (compiled once per id; `$ref`s to other documents are not fetched).

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use jsonschema::Validator;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::client::{SchemaRegistryClient, SchemaType};
use crate::config::{RecordPart, SerdeConfig};
use crate::error::RegistrySerdeError;
use crate::wire;

/// A JSON Schema serde of a `serde` type `T`, for one topic's keys or values.
///
/// The schema must be a JSON object; the registry needs its `$schema` keyword to tell it
/// from other formats (Apicurio does). With the record name strategies its `title` is the
/// record name.
pub struct JsonSchemaSerde<T> {
    client: SchemaRegistryClient,
    config: SerdeConfig,
    topic: String,
    part: RecordPart,
    schema: String,
    title: Option<String>,
    /// The serde's schema compiled, with `json.fail.invalid.schema`.
    own_validator: Option<Validator>,
    own_id: OnceLock<u32>,
    /// Schema ids already checked to be JSON schemas, with their compiled schema when
    /// values are validated.
    known: Mutex<HashMap<u32, Option<Arc<Validator>>>>,
    _type: PhantomData<fn() -> T>,
}

impl<T> std::fmt::Debug for JsonSchemaSerde<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonSchemaSerde")
            .field("topic", &self.topic)
            .field("part", &self.part)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<T: Serialize + DeserializeOwned> JsonSchemaSerde<T> {
    /// A serde for the keys or values (`part`) of `topic`, with the JSON schema `schema`.
    /// Makes no request.
    pub fn new(
        client: SchemaRegistryClient,
        config: SerdeConfig,
        topic: impl Into<String>,
        part: RecordPart,
        schema: &str,
    ) -> Result<Self, RegistrySerdeError> {
        let parsed: serde_json::Value =
            serde_json::from_str(schema).map_err(|e| RegistrySerdeError::Schema {
                format: "JSON",
                id: None,
                message: e.to_string(),
            })?;
        let Some(object) = parsed.as_object() else {
            return Err(RegistrySerdeError::Schema {
                format: "JSON",
                id: None,
                message: "a JSON schema here must be an object".into(),
            });
        };
        let title = object.get("title").and_then(|t| t.as_str()).map(str::to_owned);
        let own_validator = config
            .json_fail_invalid_schema
            .then(|| compile(&parsed, None))
            .transpose()?;
        Ok(Self {
            client,
            config,
            topic: topic.into(),
            part,
            schema: schema.to_owned(),
            title,
            own_validator,
            own_id: OnceLock::new(),
            known: Mutex::default(),
            _type: PhantomData,
        })
    }

    /// The subject this serde registers or looks up its schema under.
    pub fn subject(&self) -> Result<String, RegistrySerdeError> {
        self.config
            .subject_name_strategy
            .subject(&self.topic, self.part, self.title.as_deref())
            .map_err(RegistrySerdeError::Subject)
    }

    fn writer_id(&self) -> Result<u32, RegistrySerdeError> {
        if let Some(&id) = self.own_id.get() {
            return Ok(id);
        }
        let subject = self.subject()?;
        let id = if self.config.use_latest_version {
            // Written as the latest version; the value is not checked against it.
            return Ok(self.client.latest_version(&subject)?.schema.id);
        } else if self.config.auto_register_schemas {
            self.client.register(&subject, SchemaType::Json, &self.schema)?
        } else {
            self.client
                .lookup(&subject, SchemaType::Json, &self.schema)?
                .schema
                .id
        };
        let _ = self.own_id.set(id);
        Ok(id)
    }

    /// Checks that `id` names a JSON schema; returns it compiled when values are validated.
    fn check_id(&self, id: u32) -> Result<Option<Arc<Validator>>, RegistrySerdeError> {
        if let Some(known) = self.known.lock().unwrap_or_else(PoisonError::into_inner).get(&id) {
            return Ok(known.clone());
        }
        let registered = self.client.schema_of_type(id, SchemaType::Json)?;
        let validator = if self.config.json_fail_invalid_schema {
            let schema =
                serde_json::from_str(&registered.schema).map_err(|e| RegistrySerdeError::Schema {
                    format: "JSON",
                    id: Some(id),
                    message: e.to_string(),
                })?;
            Some(Arc::new(compile(&schema, Some(id))?))
        } else {
            None
        };
        self.known
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, validator.clone());
        Ok(validator)
    }

    /// Serializes `value` into `out` (header and JSON text), with the typed error.
    pub fn try_serialize_into(&self, value: &T, out: &mut Vec<u8>) -> Result<(), RegistrySerdeError> {
        let id = self.writer_id()?;
        let start = out.len();
        wire::write_header(id, out);
        let written = match &self.own_validator {
            None => {
                serde_json::to_writer(&mut *out, value).map_err(|e| RegistrySerdeError::Encode(e.to_string()))
            }
            Some(validator) => serde_json::to_value(value)
                .map_err(|e| RegistrySerdeError::Encode(e.to_string()))
                .and_then(|json| {
                    validate(validator, &json, None)?;
                    serde_json::to_writer(&mut *out, &json)
                        .map_err(|e| RegistrySerdeError::Encode(e.to_string()))
                }),
        };
        written.inspect_err(|_| out.truncate(start))
    }

    /// Deserializes a framed record, with the typed error.
    pub fn try_deserialize(&self, bytes: &[u8]) -> Result<T, RegistrySerdeError> {
        let (id, payload) = wire::split(bytes)?;
        let decode = |e: serde_json::Error| RegistrySerdeError::Decode {
            id,
            message: e.to_string(),
        };
        match self.check_id(id)? {
            None => serde_json::from_slice(payload).map_err(decode),
            Some(validator) => {
                let json: serde_json::Value = serde_json::from_slice(payload).map_err(decode)?;
                validate(&validator, &json, Some(id))?;
                serde_json::from_value(json).map_err(decode)
            }
        }
    }
}

/// Compiles a JSON schema for validation (its draft from `$schema`, draft 2020-12 without).
fn compile(schema: &serde_json::Value, id: Option<u32>) -> Result<Validator, RegistrySerdeError> {
    jsonschema::validator_for(schema).map_err(|e| RegistrySerdeError::Schema {
        format: "JSON",
        id,
        message: e.to_string(),
    })
}

/// Validates `json`, naming the first violation and where in the value it is.
fn validate(
    validator: &Validator,
    json: &serde_json::Value,
    id: Option<u32>,
) -> Result<(), RegistrySerdeError> {
    validator.validate(json).map_err(|e| RegistrySerdeError::Invalid {
        id,
        message: match e.instance_path().as_str() {
            "" => e.to_string(),
            path => format!("at {path}: {e}"),
        },
    })
}

serde_through_try!("JsonSchemaSerde", [T: Serialize + DeserializeOwned + 'static] JsonSchemaSerde<T> => T);
