//! A Protobuf serde: `prost` messages framed with the id of a registered `.proto` schema and
//! the message's indexes in it.
//!
//! The schema is the `.proto` file's text, as Confluent's serializers register it; the files
//! it imports are registered first, each under its import path as subject (Confluent's
//! default reference subject name strategy), and the schema names them as references. The
//! text is parsed here (no `protoc`) only to find the message's indexes and its full name.
//!
//! Reading checks that the record's message indexes name, in the writer schema, the message
//! this serde reads; a record of another message type is an error naming both, never a
//! silent misread of the bytes. The writer schema is fetched once per id.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Mutex, OnceLock, PoisonError};

use base64::Engine as _;
use prost::Message as _;
use prost_types::{DescriptorProto, FileDescriptorProto};

use crate::client::{SchemaReference, SchemaRegistryClient, SchemaType};
use crate::config::{RecordPart, SerdeConfig};
use crate::error::RegistrySerdeError;
use crate::wire;

/// A parsed `.proto` file: its import path, its text (what is registered) and the schemas
/// of the files it imports that are registered as references.
#[derive(Debug, Clone)]
pub struct ProtobufSchema {
    name: String,
    text: String,
    file: FileDescriptorProto,
    imports: Vec<ProtobufSchema>,
}

impl ProtobufSchema {
    /// Parses the `.proto` text of the file imported as `name` (e.g. `shop/order.proto`).
    ///
    /// Fails with [`RegistrySerdeError::Schema`] when the text is not valid `.proto`
    /// syntax (proto2 or proto3). Types are not resolved: the registry checks that.
    pub fn parse(name: &str, text: &str) -> Result<Self, RegistrySerdeError> {
        let file = parse_file(name, text, None)?;
        Ok(Self {
            name: name.to_owned(),
            text: text.to_owned(),
            file,
            imports: Vec::new(),
        })
    }

    /// Adds the schema of a file this one imports, to be registered as a reference.
    ///
    /// Imports that are not added (e.g. `google/protobuf/timestamp.proto`) are left to the
    /// registry, which knows Protobuf's well-known types. Fails when this file does not
    /// import `import`'s name.
    pub fn with_import(mut self, import: ProtobufSchema) -> Result<Self, RegistrySerdeError> {
        if !self.file.dependency.contains(&import.name) {
            return Err(RegistrySerdeError::Schema {
                format: "PROTOBUF",
                id: None,
                message: format!("`{}` does not import `{}`", self.name, import.name),
            });
        }
        self.imports.push(import);
        Ok(self)
    }

    /// The import path the schema was parsed as.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The `.proto` text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The file's package (empty when it declares none).
    pub fn package(&self) -> &str {
        self.file.package()
    }

    /// The indexes of the message `full_name` (`package.Outer.Inner`, a leading `.`
    /// allowed) in this file, as the wire format carries them; `None` when the file does
    /// not declare it.
    pub fn message_indexes(&self, full_name: &str) -> Option<Vec<i32>> {
        let full_name = full_name.strip_prefix('.').unwrap_or(full_name);
        let local = match self.package() {
            "" => full_name,
            package => full_name.strip_prefix(package)?.strip_prefix('.')?,
        };
        let mut indexes = Vec::new();
        let mut messages = &self.file.message_type;
        for part in local.split('.') {
            let i = messages.iter().position(|m| m.name() == part)?;
            indexes.push(i32::try_from(i).ok()?);
            messages = &messages[i].nested_type;
        }
        Some(indexes)
    }

    /// The full name of the message at `indexes` in this file, `None` when there is none.
    pub fn message_at(&self, indexes: &[i32]) -> Option<String> {
        let mut name = self.package().to_owned();
        let mut messages: &[DescriptorProto] = &self.file.message_type;
        for &i in indexes {
            let message = messages.get(usize::try_from(i).ok()?)?;
            if !name.is_empty() {
                name.push('.');
            }
            name.push_str(message.name());
            messages = &message.nested_type;
        }
        (!indexes.is_empty()).then_some(name)
    }
}

/// Parses `.proto` text; a registry may also hold a schema as a base64-encoded
/// `FileDescriptorProto` (what Confluent's Python and Go clients register), read as such.
fn parse_file(name: &str, text: &str, id: Option<u32>) -> Result<FileDescriptorProto, RegistrySerdeError> {
    protox_parse::parse(name, text).or_else(|e| {
        base64::engine::general_purpose::STANDARD
            .decode(text.trim())
            .ok()
            .and_then(|bytes| FileDescriptorProto::decode(bytes.as_slice()).ok())
            .filter(|file| !file.message_type.is_empty())
            .ok_or_else(|| RegistrySerdeError::Schema {
                format: "PROTOBUF",
                id,
                message: e.to_string(),
            })
    })
}

/// A Protobuf serde of the `prost` message `M`, for one topic's keys or values.
///
/// `M` must be the message the schema declares under the given full name (its fields'
/// tags and types, as `prost-build` generates it from the same `.proto`); the schema is
/// registered and its indexes written, and records are checked to carry that message.
///
/// ```no_run
/// use streams_serde_registry::{ProtobufSchema, ProtobufSerde, RecordPart, SchemaRegistryClient, SerdeConfig};
///
/// #[derive(Clone, PartialEq, prost::Message)]
/// struct Order {
///     #[prost(string, tag = "1")]
///     id: String,
///     #[prost(int64, tag = "2")]
///     cents: i64,
/// }
///
/// let client = SchemaRegistryClient::from_properties([("schema.registry.url", "http://localhost:8081")])?;
/// let schema = ProtobufSchema::parse(
///     "shop/order.proto",
///     "syntax = \"proto3\"; package shop; message Order { string id = 1; int64 cents = 2; }",
/// )?;
/// let orders = ProtobufSerde::<Order>::new(client, SerdeConfig::default(), "orders", RecordPart::Value, schema, "shop.Order")?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct ProtobufSerde<M> {
    client: SchemaRegistryClient,
    config: SerdeConfig,
    topic: String,
    part: RecordPart,
    schema: ProtobufSchema,
    /// The message's full name, without a leading dot.
    message: String,
    /// The message's indexes, encoded as the wire format writes them.
    indexes: Vec<u8>,
    own_id: OnceLock<u32>,
    /// Writer schema ids and message indexes already checked to name `message`.
    checked: Mutex<HashMap<u32, Vec<Vec<i32>>>>,
    _type: PhantomData<fn() -> M>,
}

impl<M> std::fmt::Debug for ProtobufSerde<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProtobufSerde")
            .field("topic", &self.topic)
            .field("part", &self.part)
            .field("message", &self.message)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<M: prost::Message + Default> ProtobufSerde<M> {
    /// A serde for the keys or values (`part`) of `topic`, writing and reading the message
    /// `message` (its full name, `package.Name`) of `schema`. Makes no request.
    ///
    /// Fails when `schema` declares no such message.
    pub fn new(
        client: SchemaRegistryClient,
        config: SerdeConfig,
        topic: impl Into<String>,
        part: RecordPart,
        schema: ProtobufSchema,
        message: &str,
    ) -> Result<Self, RegistrySerdeError> {
        let message = message.strip_prefix('.').unwrap_or(message).to_owned();
        let Some(indexes) = schema.message_indexes(&message) else {
            return Err(RegistrySerdeError::Schema {
                format: "PROTOBUF",
                id: None,
                message: format!("`{}` declares no message `{message}`", schema.name),
            });
        };
        let mut encoded = Vec::new();
        wire::write_message_indexes(&indexes, &mut encoded);
        Ok(Self {
            client,
            config,
            topic: topic.into(),
            part,
            schema,
            message,
            indexes: encoded,
            own_id: OnceLock::new(),
            checked: Mutex::default(),
            _type: PhantomData,
        })
    }

    /// The subject this serde registers or looks up its schema under (with the record name
    /// strategies, the record name is the message's full name).
    pub fn subject(&self) -> Result<String, RegistrySerdeError> {
        self.config
            .subject_name_strategy
            .subject(&self.topic, self.part, Some(&self.message))
            .map_err(RegistrySerdeError::Subject)
    }

    /// The references of `schema`'s imports, each registered (or looked up) first.
    fn references(&self, schema: &ProtobufSchema) -> Result<Vec<SchemaReference>, RegistrySerdeError> {
        let mut references = Vec::with_capacity(schema.imports.len());
        for import in &schema.imports {
            let nested = self.references(import)?;
            let subject = import.name.as_str();
            if self.config.auto_register_schemas {
                self.client
                    .register_with_references(subject, SchemaType::Protobuf, &import.text, &nested)?;
            }
            let version = self
                .client
                .lookup_with_references(subject, SchemaType::Protobuf, &import.text, &nested)?
                .version;
            references.push(SchemaReference {
                name: import.name.clone(),
                subject: subject.to_owned(),
                version,
            });
        }
        Ok(references)
    }

    fn writer_id(&self) -> Result<u32, RegistrySerdeError> {
        if let Some(&id) = self.own_id.get() {
            return Ok(id);
        }
        let subject = self.subject()?;
        if self.config.use_latest_version {
            // Written as the latest version; the message is checked to be declared there.
            let id = self.client.latest_version(&subject)?.schema.id;
            let indexes = self.schema.message_indexes(&self.message).unwrap_or_default();
            self.check(id, &indexes)?;
            return Ok(id);
        }
        let references = self.references(&self.schema)?;
        let id = if self.config.auto_register_schemas {
            self.client.register_with_references(
                &subject,
                SchemaType::Protobuf,
                &self.schema.text,
                &references,
            )?
        } else {
            self.client
                .lookup_with_references(&subject, SchemaType::Protobuf, &self.schema.text, &references)?
                .schema
                .id
        };
        let _ = self.own_id.set(id);
        Ok(id)
    }

    /// Checks that `indexes` name this serde's message in the schema with id `id`.
    fn check(&self, id: u32, indexes: &[i32]) -> Result<(), RegistrySerdeError> {
        let known = |checked: &HashMap<u32, Vec<Vec<i32>>>| {
            checked
                .get(&id)
                .is_some_and(|seen| seen.iter().any(|i| i == indexes))
        };
        if known(&self.checked.lock().unwrap_or_else(PoisonError::into_inner)) {
            return Ok(());
        }
        let registered = self.client.schema_of_type(id, SchemaType::Protobuf)?;
        let writer = ProtobufSchema {
            name: format!("schema-{id}.proto"),
            file: parse_file(&format!("schema-{id}.proto"), &registered.schema, Some(id))?,
            text: String::new(),
            imports: Vec::new(),
        };
        match writer.message_at(indexes) {
            Some(name) if name == self.message => {
                self.checked
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .entry(id)
                    .or_default()
                    .push(indexes.to_vec());
                Ok(())
            }
            other => Err(RegistrySerdeError::WrongMessage {
                id,
                indexes: indexes.to_vec(),
                expected: self.message.clone(),
                actual: other.unwrap_or_else(|| "no message of the schema".to_owned()),
            }),
        }
    }

    /// Serializes `message` into `out` (header, message indexes and Protobuf binary), with
    /// the typed error.
    pub fn try_serialize_into(&self, message: &M, out: &mut Vec<u8>) -> Result<(), RegistrySerdeError> {
        let id = self.writer_id()?;
        out.reserve(wire::HEADER_LEN + self.indexes.len() + message.encoded_len());
        wire::write_header(id, out);
        out.extend_from_slice(&self.indexes);
        // Cannot fail: `out` grows as needed.
        message
            .encode(out)
            .map_err(|e| RegistrySerdeError::Encode(e.to_string()))
    }

    /// Deserializes a framed record, with the typed error.
    pub fn try_deserialize(&self, bytes: &[u8]) -> Result<M, RegistrySerdeError> {
        let (id, payload) = wire::split(bytes)?;
        let (indexes, message) = wire::read_message_indexes(payload)?;
        self.check(id, &indexes)?;
        M::decode(message).map_err(|e| RegistrySerdeError::Decode {
            id,
            message: e.to_string(),
        })
    }
}

serde_through_try!("ProtobufSerde", [M: prost::Message + Default + 'static] ProtobufSerde<M> => M);

#[cfg(test)]
mod tests {
    use super::*;

    const SHOP: &str = r#"
        syntax = "proto3";
        package shop;
        import "common/money.proto";
        message Customer { string name = 1; }
        message Order {
            string id = 1;
            common.Money total = 2;
            message Line { string sku = 1; int32 quantity = 2; }
            repeated Line lines = 3;
        }
    "#;

    #[test]
    fn message_indexes_and_names() {
        let schema = ProtobufSchema::parse("shop/order.proto", SHOP).expect("parse");
        assert_eq!(schema.package(), "shop");
        assert_eq!(schema.message_indexes("shop.Customer"), Some(vec![0]));
        assert_eq!(schema.message_indexes(".shop.Order"), Some(vec![1]));
        assert_eq!(schema.message_indexes("shop.Order.Line"), Some(vec![1, 0]));
        assert_eq!(schema.message_indexes("Order"), None);
        assert_eq!(schema.message_indexes("other.Order"), None);
        assert_eq!(schema.message_at(&[1, 0]).as_deref(), Some("shop.Order.Line"));
        assert_eq!(schema.message_at(&[2]), None);
        assert_eq!(schema.message_at(&[]), None);
        assert_eq!(schema.message_at(&[-1]), None);
    }

    #[test]
    fn imports_must_be_declared() {
        let money = ProtobufSchema::parse(
            "common/money.proto",
            "syntax = \"proto3\"; package common; message Money { int64 cents = 1; }",
        )
        .expect("parse");
        let shop = ProtobufSchema::parse("shop/order.proto", SHOP).expect("parse");
        assert!(shop.clone().with_import(money.clone()).is_ok());
        let other = ProtobufSchema::parse("other.proto", "syntax = \"proto3\"; message X {}").expect("parse");
        let err = other.with_import(money).expect_err("not imported");
        assert!(
            err.to_string().contains("does not import `common/money.proto`"),
            "{err}"
        );
    }

    #[test]
    fn invalid_proto_is_a_schema_error() {
        let err = ProtobufSchema::parse("bad.proto", "message {").expect_err("invalid");
        assert!(
            matches!(
                err,
                RegistrySerdeError::Schema {
                    format: "PROTOBUF",
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn base64_descriptors_are_read() {
        let file = protox_parse::parse("shop/order.proto", SHOP).expect("parse");
        let text = base64::engine::general_purpose::STANDARD.encode(file.encode_to_vec());
        let read = parse_file("x.proto", &text, Some(3)).expect("descriptor");
        assert_eq!(read.message_type.len(), 2);
    }
}
