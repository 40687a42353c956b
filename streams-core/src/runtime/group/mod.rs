//! Group membership of a stream thread: which partitions and tasks it owns.
//!
//! Under the classic and consumer protocols librdkafka's rebalance callbacks say so
//! (`rebalance.rs`: the consumer context of a stream thread); under the streams protocol
//! the thread's member of the streams group (`streams_group/`) receives task assignments,
//! which `assignment.rs` applies through the same callbacks. Either way the work that must
//! happen before partitions move (revoked tasks commit and suspend) is done on the thread's
//! task manager, which the loop lends to the callbacks for the calls that run them
//! (`lend.rs`); nothing else here holds tasks.
//!
//! Uses `tasks/`, `topics/` and `client/`; the stream thread (`thread/`) uses it.

pub(in crate::runtime) mod assignment;
pub(in crate::runtime) mod lend;
pub(in crate::runtime) mod rebalance;
