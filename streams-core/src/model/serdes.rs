//! Serdes: the ones of `streams-state` plus JSON through `serde`.
//!
//! See [`streams_state::serde`] for the primitive serdes and which of them are ordered
//! (usable as range keys).

use std::marker::PhantomData;

pub use streams_state::serde::*;
pub use streams_state::{OrderedSerde, Serde, SerdeError};

/// Values as JSON through `serde`. Not ordered.
pub struct JsonSerde<T>(PhantomData<fn() -> T>);

impl<T> JsonSerde<T> {
    /// A JSON serde for `T`.
    pub fn new() -> Self {
        Self(PhantomData)
    }
}

impl<T> Default for JsonSerde<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Clone for JsonSerde<T> {
    fn clone(&self) -> Self {
        Self::new()
    }
}

impl<T> std::fmt::Debug for JsonSerde<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "JsonSerde<{}>", std::any::type_name::<T>())
    }
}

impl<T> Serde for JsonSerde<T>
where
    T: serde::Serialize + serde::de::DeserializeOwned + 'static,
{
    type Target = T;

    fn serialize_into(&self, value: &T, out: &mut Vec<u8>) -> Result<(), SerdeError> {
        serde_json::to_writer(out, value).map_err(|e| SerdeError::new("JsonSerde", e.to_string()))
    }

    fn deserialize(&self, bytes: &[u8]) -> Result<T, SerdeError> {
        serde_json::from_slice(bytes).map_err(|e| SerdeError::new("JsonSerde", e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    struct Hook {
        id: u64,
        url: String,
    }

    #[test]
    fn json_round_trip_and_error_value() {
        let s = JsonSerde::<Hook>::new();
        let h = Hook {
            id: 1,
            url: "http://x".into(),
        };
        assert_eq!(s.deserialize(&s.serialize(&h).unwrap()).unwrap(), h);
        let e = s.deserialize(b"{not json").unwrap_err();
        assert_eq!(e.serde, "JsonSerde");
    }
}
