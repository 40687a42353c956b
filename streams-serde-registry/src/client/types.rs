//! The registry's objects as this client returns them: schema types, registered schemas,
//! references and subject versions.

use serde::{Deserialize, Serialize};

use crate::error::RegistryError;

/// The format of a registered schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SchemaType {
    /// Apache Avro (the registry's default when a response names no type).
    Avro,
    /// JSON Schema.
    Json,
    /// Protocol Buffers.
    Protobuf,
}

impl SchemaType {
    /// The registry's name of the type: `AVRO`, `JSON` or `PROTOBUF`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Avro => "AVRO",
            Self::Json => "JSON",
            Self::Protobuf => "PROTOBUF",
        }
    }

    pub(crate) fn parse(name: Option<&str>) -> Result<Self, RegistryError> {
        match name.map(str::to_ascii_uppercase).as_deref() {
            None | Some("AVRO") | Some("") => Ok(Self::Avro),
            Some("JSON") => Ok(Self::Json),
            Some("PROTOBUF") => Ok(Self::Protobuf),
            Some(other) => Err(RegistryError::InvalidResponse {
                message: format!("unknown schema type `{other}`"),
            }),
        }
    }
}

/// A schema as the registry stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisteredSchema {
    /// The schema's id (what the wire format carries).
    pub id: u32,
    /// The schema's format.
    pub schema_type: SchemaType,
    /// The schema's text.
    pub schema: String,
    /// The schemas this one refers to (a Protobuf schema's imports), in the registry's
    /// order; empty for most Avro and JSON schemas.
    pub references: Vec<SchemaReference>,
}

/// A reference from one schema to another registered schema: a Protobuf `import`, an Avro
/// named type or a JSON `$ref` defined under another subject.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SchemaReference {
    /// The name the referring schema uses (for Protobuf the import path, `common.proto`).
    pub name: String,
    /// The subject the referred schema is registered under.
    pub subject: String,
    /// The version of that subject.
    pub version: i32,
}

/// A version of a subject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubjectVersion {
    /// The subject.
    pub subject: String,
    /// The version number within the subject.
    pub version: i32,
    /// The schema.
    pub schema: RegisteredSchema,
}
