//! The JSON bodies of the registry's REST API as this client sends and reads them, and how
//! an answer that is not a success is classed.

use serde::{Deserialize, Serialize};

use super::types::{RegisteredSchema, SchemaReference, SchemaType, SubjectVersion};
use crate::error::RegistryError;

#[derive(Serialize)]
pub(super) struct SchemaRequest<'a> {
    pub(super) schema: &'a str,
    #[serde(rename = "schemaType", skip_serializing_if = "Option::is_none")]
    pub(super) schema_type: Option<&'a str>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub(super) references: &'a [SchemaReference],
}

impl SchemaRequest<'_> {
    /// The JSON body registering or looking up `schema` (Avro, the default type, unnamed).
    pub(super) fn body(
        schema_type: SchemaType,
        schema: &str,
        references: &[SchemaReference],
    ) -> Result<String, RegistryError> {
        json_body(&SchemaRequest {
            schema,
            schema_type: (schema_type != SchemaType::Avro).then_some(schema_type.as_str()),
            references,
        })
    }
}

#[derive(Deserialize)]
pub(super) struct IdResponse {
    pub(super) id: u32,
}

#[derive(Deserialize)]
pub(super) struct SchemaResponse {
    pub(super) schema: String,
    #[serde(rename = "schemaType")]
    pub(super) schema_type: Option<String>,
    #[serde(default)]
    pub(super) references: Vec<SchemaReference>,
}

#[derive(Deserialize)]
pub(super) struct VersionResponse {
    pub(super) subject: String,
    pub(super) version: i32,
    pub(super) id: u32,
    pub(super) schema: String,
    #[serde(rename = "schemaType")]
    pub(super) schema_type: Option<String>,
    #[serde(default)]
    pub(super) references: Vec<SchemaReference>,
}

impl VersionResponse {
    pub(super) fn into_version(self) -> Result<SubjectVersion, RegistryError> {
        Ok(SubjectVersion {
            subject: self.subject,
            version: self.version,
            schema: RegisteredSchema {
                id: self.id,
                schema_type: SchemaType::parse(self.schema_type.as_deref())?,
                schema: self.schema,
                references: self.references,
            },
        })
    }
}

#[derive(Deserialize)]
pub(super) struct ErrorResponse {
    pub(super) error_code: Option<i64>,
    pub(super) message: Option<String>,
}

/// An answer that is neither a success nor retried.
pub(super) struct Refusal {
    pub(super) status: u16,
    pub(super) error_code: i64,
    pub(super) message: String,
}

impl Refusal {
    pub(super) fn into_http(self) -> RegistryError {
        RegistryError::Http {
            status: self.status,
            error_code: self.error_code,
            message: self.message,
        }
    }
}

pub(super) enum Failure {
    /// A 4xx answer, or a 5xx one after the retries ran out.
    Refused(Refusal),
    /// Transport failure after the retries, or an answer that cannot be read.
    Fatal(RegistryError),
}

impl From<RegistryError> for Failure {
    fn from(e: RegistryError) -> Self {
        Self::Fatal(e)
    }
}

/// Percent-encodes a path segment (subjects may hold any character).
pub(super) fn encode_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

pub(super) fn json_body<T: Serialize>(value: &T) -> Result<String, RegistryError> {
    serde_json::to_string(value).map_err(|e| RegistryError::InvalidResponse {
        message: format!("cannot encode request: {e}"),
    })
}

pub(super) fn parse<T: for<'de> Deserialize<'de>>(body: &str) -> Result<T, RegistryError> {
    serde_json::from_str(body).map_err(|e| RegistryError::InvalidResponse {
        message: format!("{e}: {}", truncate(body)),
    })
}

pub(super) fn truncate(s: &str) -> &str {
    match s.char_indices().nth(300) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}
