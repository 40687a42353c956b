//! Schema Registry serdes in the Confluent wire format.
//!
//! Records written by these serdes carry the id of their schema in a registry speaking the
//! Confluent Schema Registry REST API (Confluent's registry, Apicurio's `/apis/ccompat/v7`,
//! Karapace), and read records written by Confluent's clients in any language:
//!
//! ```text
//! magic byte 0 | schema id, 4 bytes big-endian | payload
//! ```
//!
//! - [`AvroSerde`]: Avro binary for `serde` types, with reader/writer schema resolution;
//! - [`GenericAvroSerde`]: Avro binary for apache-avro's generic [`apache_avro::types::Value`];
//! - [`ProtobufSerde`]: Protobuf binary for `prost` messages, with the message indexes;
//! - [`JsonSchemaSerde`]: JSON text for `serde` types, framed with a JSON schema's id, and
//!   validated against the schema with `json.fail.invalid.schema`.
//!
//! All serdes share a [`SchemaRegistryClient`], a blocking HTTP client with caches (one
//! request per schema id per process), basic authentication, timeouts and bounded retries.
//! Settings come from the usual property names ([`RegistryConfig::from_properties`],
//! [`SerdeConfig::from_properties`]).
//!
//! # Topic, key or value
//!
//! The [`Serde`](streams_state::Serde) trait is given neither the topic nor whether it
//! serializes a key or a value, which the subject name strategies need. A serde here is
//! therefore made for one topic and one [`RecordPart`]; use one instance per topic and
//! part (a serde for a store's changelog is made for the changelog topic's name).
//!
//! # Errors
//!
//! Each serde's `try_serialize_into`/`try_deserialize` returns a [`RegistrySerdeError`] that
//! names the case (wrong magic byte, payload too short, unknown schema id, registry
//! unreachable after retries, incompatible schema with the registry's message, ...).
//! Through the `Serde` trait the same error arrives as a
//! [`SerdeError`](streams_state::SerdeError) carrying its text.

/// Implements [`Serde`](streams_state::Serde) for a registry serde through its typed
/// `try_serialize_into` / `try_deserialize`, the error becoming the serde's text.
macro_rules! serde_through_try {
    ($name:literal, [$($generics:tt)*] $serde:ty => $target:ty) => {
        impl<$($generics)*> streams_state::Serde for $serde {
            type Target = $target;

            fn serialize_into(&self, value: &$target, out: &mut Vec<u8>) -> Result<(), streams_state::SerdeError> {
                self.try_serialize_into(value, out).map_err(|e| e.into_serde_error($name))
            }

            fn deserialize(&self, bytes: &[u8]) -> Result<$target, streams_state::SerdeError> {
                self.try_deserialize(bytes).map_err(|e| e.into_serde_error($name))
            }
        }
    };
}

pub mod avro;
pub mod client;
pub mod config;
pub mod error;
pub mod json;
pub mod protobuf;
pub mod wire;

/// The Avro library the Avro serdes use (its `Value`, `Schema`).
pub use apache_avro;
pub use avro::{AvroSchema, AvroSerde, GenericAvroSerde};
pub use client::{RegisteredSchema, SchemaReference, SchemaRegistryClient, SchemaType, SubjectVersion};
pub use config::{RecordPart, RegistryConfig, SerdeConfig, SubjectNameStrategy};
pub use error::{RegistryError, RegistrySerdeError, WireError};
pub use json::JsonSchemaSerde;
/// The Protobuf library the Protobuf serde's messages implement (`prost::Message`).
pub use prost;
pub use protobuf::{ProtobufSchema, ProtobufSerde};
