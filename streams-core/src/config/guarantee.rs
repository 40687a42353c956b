//! [`ProcessingGuarantee`]: the `processing.guarantee` property.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use super::{StreamsConfig, keys};
use crate::model::error::StreamsError;

/// What a stream thread promises about records being processed and their results written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ProcessingGuarantee {
    /// Every record is processed at least once; after a failure some may be processed again
    /// (`at_least_once`, the default).
    #[default]
    AtLeastOnce,
    /// Each record's effects (state changes, output, offsets) are committed exactly once, in a
    /// Kafka transaction (`exactly_once_v2`).
    ExactlyOnceV2,
}

impl ProcessingGuarantee {
    /// The property value: `at_least_once` or `exactly_once_v2`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AtLeastOnce => "at_least_once",
            Self::ExactlyOnceV2 => "exactly_once_v2",
        }
    }

    /// The `commit.interval.ms` used when none is set: 30 s, or 100 ms under exactly-once.
    pub fn default_commit_interval(self) -> Duration {
        match self {
            Self::AtLeastOnce => Duration::from_millis(StreamsConfig::DEFAULT_COMMIT_INTERVAL_MS),
            Self::ExactlyOnceV2 => Duration::from_millis(StreamsConfig::DEFAULT_EOS_COMMIT_INTERVAL_MS),
        }
    }
}

impl fmt::Display for ProcessingGuarantee {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ProcessingGuarantee {
    type Err = StreamsError;

    /// Parses `at_least_once` or `exactly_once_v2`; the retired `exactly_once` and
    /// `exactly_once_beta` are errors pointing at `exactly_once_v2`.
    fn from_str(value: &str) -> Result<Self, StreamsError> {
        match value {
            "at_least_once" => Ok(Self::AtLeastOnce),
            "exactly_once_v2" => Ok(Self::ExactlyOnceV2),
            "exactly_once" | "exactly_once_beta" => Err(super::invalid(
                keys::PROCESSING_GUARANTEE,
                format!("`{value}` is no longer supported; use `exactly_once_v2`"),
            )),
            _ => Err(super::invalid(
                keys::PROCESSING_GUARANTEE,
                format!("`{value}` is not one of `at_least_once`, `exactly_once_v2`"),
            )),
        }
    }
}
