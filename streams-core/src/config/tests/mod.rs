//! The unit tests of the streams configuration, by topic; the helpers they share are here.

mod builder;
mod clients;
mod display;
mod handlers;
mod properties_file;
mod protocol;
mod reference;
mod rocksdb;
mod values;

use std::collections::BTreeMap;

use super::StreamsConfig;
use crate::model::error::StreamsError;

fn config(props: &[(&str, &str)]) -> Result<StreamsConfig, StreamsError> {
    StreamsConfig::from_properties(props.iter().copied())
}

fn with_app(props: &[(&str, &str)]) -> Result<StreamsConfig, StreamsError> {
    let mut all = vec![("application.id", "app")];
    all.extend_from_slice(props);
    config(&all)
}

/// Asserts that `result` is a config error naming `property`; returns its message.
#[track_caller]
fn fails_on(result: Result<StreamsConfig, StreamsError>, property: &str) -> String {
    match result {
        Err(StreamsError::Config { property: p, message }) => {
            assert_eq!(p, property, "wrong property; message: {message}");
            message
        }
        Err(other) => panic!("expected a config error on `{property}`, got {other}"),
        Ok(c) => panic!("expected a config error on `{property}`, got a config:\n{c}"),
    }
}

/// The properties `pairs`, as the config and client code reads them.
pub(crate) fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}
