//! A client of the streams rebalance protocol (KIP-1071, `group.protocol=streams`): the
//! broker's group coordinator assigns active, standby and warm-up *tasks* to the members
//! of a streams group, and sends a failed-over task to a member that holds its standby.
//! librdkafka has no client for it; this one speaks the protocol itself over a blocking
//! connection per member, PLAINTEXT or secured as the application's other clients are.
//!
//! - [`wire`]: connections, framing, API versions, finding the coordinator;
//! - [`security`], [`sasl`] and [`oauth`]: TLS (rustls) and SASL (PLAIN, SCRAM,
//!   OAUTHBEARER) from the `security.protocol`, `ssl.*` and `sasl.*` properties;
//! - [`codec`]: the `StreamsGroupHeartbeat` request and response;
//! - [`failures`]: which of the coordinator's errors and group statuses fail a member;
//! - [`describe`]: a member's assignment as the coordinator holds it, read after a
//!   heartbeat failed (its lost answer may have carried new tasks);
//! - [`decode`] and [`responses`]: bounds-checked decoding of everything read off the wire;
//! - [`topology`]: the group topology sent on join, from our [`Topology`](crate::topology::Topology);
//! - [`member`] and [`heartbeat`]: the membership state machine on its own thread, and the
//!   handle a stream thread drives ([`StreamsMember`]);
//! - [`task_reports`]: when the member reports its task offsets and end offsets;
//! - [`endpoints`]: the group's endpoint map, which interactive queries read;
//! - [`commit`]: offset commits fenced by the member epoch;
//! - [`fetch`]: committed offsets read from the coordinator the member finds;
//! - [`group_config`]: the application's group settings, applied before joining.

pub(crate) mod codec;
pub(crate) mod commit;
pub(crate) mod decode;
pub(crate) mod describe;
pub(crate) mod endpoints;
pub(crate) mod failures;
pub(crate) mod fetch;
pub(crate) mod group_config;
pub(crate) mod heartbeat;
pub(crate) mod member;
pub(crate) mod oauth;
pub(crate) mod responses;
pub(crate) mod sasl;
pub(crate) mod security;
pub(crate) mod shared;
pub(crate) mod task_reports;
pub(crate) mod topology;
pub(crate) mod wire;

// The stream thread's API.
#[allow(unused_imports)]
pub(crate) use commit::CommitError;
#[allow(unused_imports)]
pub(crate) use group_config::{group_configs, group_configs_of};
#[allow(unused_imports)]
pub(crate) use member::StreamsMember;
#[allow(unused_imports)]
pub(crate) use security::Security;
#[allow(unused_imports)]
pub(crate) use shared::{MemberEvent, MemberSettings, TaskAssignment, TaskOffsetSource};
#[allow(unused_imports)]
pub(crate) use topology::GroupTopology;

#[cfg(test)]
mod kafka_tests;
#[cfg(test)]
mod secure_kafka_tests;
#[cfg(test)]
mod task_offsets_kafka_tests;
