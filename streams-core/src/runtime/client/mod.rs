//! Kafka clients as the runtime uses them: connecting and checking credentials at start
//! (`connect.rs`), which group protocol the brokers offer (`protocol.rs`), the clients'
//! defaults (`defaults.rs`), librdkafka's log lines (`client_log.rs`) with secrets masked
//! (`redact.rs`), client errors as the runtime reports them (`errors.rs`), partition
//! watermarks (`watermarks.rs`), consumed messages as raw records in a per-thread payload
//! arena (`consumed.rs`, `payloads.rs`), a stream thread's fetch queue that takes them from
//! librdkafka a batch per call (`fetch_queue.rs`), OAUTHBEARER tokens from the application's
//! provider handed to each client (`oauth.rs`), and librdkafka's in-process mock cluster
//! (`embedded.rs`).
//!
//! The lowest folder of the runtime: it uses no other folder of `runtime/`, and every other
//! folder may use it. It owns no runtime state: each function works on the clients or
//! values it is given.

pub(in crate::runtime) mod client_log;
pub(in crate::runtime) mod connect;
pub(in crate::runtime) mod consumed;
pub(in crate::runtime) mod defaults;
pub(crate) mod embedded;
pub(in crate::runtime) mod errors;
pub(in crate::runtime) mod fetch_queue;
pub(in crate::runtime) mod oauth;
pub(in crate::runtime) mod payloads;
pub(crate) mod protocol;
pub(in crate::runtime) mod redact;
pub(in crate::runtime) mod watermarks;
