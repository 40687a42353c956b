//! The model: the plain types every layer above speaks in.
//!
//! Nothing here depends on another module of the crate but `model` itself; the processor
//! API, the topology, the engine, metrics and the hosts all build on it.

pub mod error;
pub mod handlers;
mod ids;
mod levels;
pub(crate) mod partitioner;
pub(crate) mod record;
pub mod serdes;

pub use ids::TaskId;
pub use levels::{RecordingLevel, State};
