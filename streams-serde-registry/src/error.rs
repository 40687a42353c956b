//! Error types: of the wire format, of the registry client and of the serdes.

use streams_state::SerdeError;

/// A framed record could not be split into schema id and payload.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// The record is shorter than the 5-byte header (magic byte and schema id).
    #[error("payload too short for the schema registry wire format: {len} bytes, the header alone is 5")]
    TooShort {
        /// The record's length in bytes.
        len: usize,
    },
    /// The first byte is not the wire format's magic byte `0`: the record was not written
    /// by a schema registry serializer.
    #[error("unknown magic byte {byte:#04x}: not the schema registry wire format (expected 0x00)")]
    UnknownMagicByte {
        /// The first byte of the record.
        byte: u8,
    },
    /// A Protobuf payload's message indexes cannot be read.
    #[error("invalid Protobuf message indexes: {reason}")]
    MessageIndexes {
        /// What is wrong with them.
        reason: String,
    },
}

/// A failure of the schema registry client or of its configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// A configuration property is missing or has an invalid value.
    #[error("schema registry config `{property}`: {message}")]
    Config {
        /// The property's name.
        property: String,
        /// What is wrong with it.
        message: String,
    },
    /// No registry URL answered, after the configured retries (transport errors and 5xx).
    #[error("schema registry unreachable after {attempts} attempt(s): {message}")]
    Unreachable {
        /// How many requests were made.
        attempts: u32,
        /// The last failure (transport error or 5xx status with the registry's message).
        message: String,
    },
    /// The registry knows no schema with this id.
    #[error("unknown schema id {id}: the registry has no such schema")]
    UnknownSchemaId {
        /// The schema id read from the record or asked for.
        id: u32,
    },
    /// The registry knows no such subject.
    #[error("subject `{subject}` not found in the schema registry")]
    SubjectNotFound {
        /// The subject.
        subject: String,
    },
    /// The schema is not registered under the subject (a lookup with
    /// `auto.register.schemas=false`).
    #[error("schema not registered under subject `{subject}` (auto.register.schemas is false): {message}")]
    SchemaNotRegistered {
        /// The subject.
        subject: String,
        /// The registry's message.
        message: String,
    },
    /// The registry refused to register the schema: it is incompatible with earlier
    /// versions of the subject under the subject's compatibility level.
    #[error("schema incompatible with subject `{subject}`: {message}")]
    IncompatibleSchema {
        /// The subject.
        subject: String,
        /// The registry's message.
        message: String,
    },
    /// The registry rejected the schema as invalid.
    #[error("invalid schema for subject `{subject}`: {message}")]
    InvalidSchema {
        /// The subject.
        subject: String,
        /// The registry's message.
        message: String,
    },
    /// The registry answered with an error this client does not map to a case of its own
    /// (e.g. 401 Unauthorized).
    #[error("schema registry answered {status} (error code {error_code}): {message}")]
    Http {
        /// The HTTP status.
        status: u16,
        /// The registry's `error_code`, or the status when the body has none.
        error_code: i64,
        /// The registry's message, or the body.
        message: String,
    },
    /// The registry's answer could not be understood.
    #[error("unexpected schema registry response: {message}")]
    InvalidResponse {
        /// What was wrong with it.
        message: String,
    },
}

/// A failure of a schema registry serde, with its cause.
///
/// Through the [`Serde`](streams_state::Serde) trait it becomes a [`SerdeError`] whose
/// message is this error's text; the serdes' `try_serialize`/`try_deserialize` methods
/// return it as is.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistrySerdeError {
    /// The record is not in the wire format.
    #[error(transparent)]
    Wire(#[from] WireError),
    /// The registry failed or refused.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// A schema (given to the serde or read from the registry) could not be parsed.
    #[error("schema id {id:?}: cannot parse {format} schema: {message}")]
    Schema {
        /// The schema's format: "AVRO", "PROTOBUF" or "JSON".
        format: &'static str,
        /// The schema's id when it came from the registry.
        id: Option<u32>,
        /// The parser's message.
        message: String,
    },
    /// The registry returned a schema of another type than this serde reads.
    #[error("schema id {id} is of type {actual}, this serde reads {expected}")]
    SchemaType {
        /// The schema's id.
        id: u32,
        /// The type this serde reads.
        expected: &'static str,
        /// The type the registry reported.
        actual: String,
    },
    /// The value could not be encoded with the schema.
    #[error("cannot encode value: {0}")]
    Encode(String),
    /// The payload could not be decoded with the writer schema, or not resolved into the
    /// reader schema or the target type.
    #[error("cannot decode payload written with schema id {id}: {message}")]
    Decode {
        /// The writer schema's id.
        id: u32,
        /// The decoder's message.
        message: String,
    },
    /// The subject name strategy cannot name a subject for this value.
    #[error("subject name strategy: {0}")]
    Subject(String),
    /// A Protobuf record names another message type than the serde reads (its message
    /// indexes point elsewhere in the writer schema, or nowhere).
    #[error(
        "schema id {id}: the record is a `{actual}` message (indexes {indexes:?}), this serde reads `{expected}`"
    )]
    WrongMessage {
        /// The writer schema's id.
        id: u32,
        /// The record's message indexes.
        indexes: Vec<i32>,
        /// The message this serde reads.
        expected: String,
        /// The message the indexes name, or a description of why they name none.
        actual: String,
    },
    /// A JSON value does not conform to its schema (`json.fail.invalid.schema`).
    #[error("JSON value does not conform to schema id {id:?}: {message}")]
    Invalid {
        /// The schema's id, when known (the writer schema on reading).
        id: Option<u32>,
        /// The validator's first error, with its location in the value.
        message: String,
    },
}

impl RegistrySerdeError {
    /// This error as the [`SerdeError`] of the [`Serde`](streams_state::Serde) trait.
    pub fn into_serde_error(self, serde: &'static str) -> SerdeError {
        SerdeError::new(serde, self.to_string())
    }
}
