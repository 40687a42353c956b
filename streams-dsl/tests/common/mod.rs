//! Helpers shared by the integration tests of this crate. Each test binary that uses them
//! declares `mod common;`; every item here is used by every such binary, so none is dead
//! code in any of them.

pub mod java;
