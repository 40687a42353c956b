//! How a configuration shows itself: `Display` and `Debug` list every effective value
//! (defaults included), then the client pass-through properties, with every secret value
//! masked; [`is_secret`] says which properties hold secrets.

use std::collections::BTreeMap;
use std::fmt;

use super::{StreamsConfig, keys, parse};

impl StreamsConfig {
    /// The typed values as (property, display value) pairs.
    fn effective(&self) -> Vec<(&'static str, String)> {
        let opt = |v: Option<String>, unset: &str| v.unwrap_or_else(|| unset.to_owned());
        vec![
            (keys::APPLICATION_ID, self.application_id.clone()),
            (
                keys::BOOTSTRAP_SERVERS,
                opt(self.bootstrap_servers.clone(), "<unset>"),
            ),
            (keys::NUM_STREAM_THREADS, self.num_stream_threads.to_string()),
            (keys::PROCESSING_GUARANTEE, self.processing_guarantee.to_string()),
            (
                keys::COMMIT_INTERVAL_MS,
                self.commit_interval.as_millis().to_string(),
            ),
            (keys::STATE_DIR, self.state_dir.display().to_string()),
            (keys::STATESTORE_CACHE_MAX_BYTES, self.cache_max_bytes.to_string()),
            (
                keys::DESERIALIZATION_EXCEPTION_HANDLER,
                parse::handling_name(self.deserialization_handler).into(),
            ),
            (
                keys::PROCESSING_EXCEPTION_HANDLER,
                parse::handling_name(self.processing_handler).into(),
            ),
            (
                keys::PRODUCTION_EXCEPTION_HANDLER,
                parse::handling_name(self.production_handler).into(),
            ),
            (
                keys::DEAD_LETTER_QUEUE_TOPIC_NAME,
                opt(self.dead_letter_topic.clone(), "<unset>"),
            ),
            (
                keys::METRICS_ADDRESS,
                opt(self.metrics_address.map(|a| a.to_string()), "<unset>"),
            ),
            (
                keys::APPLICATION_SERVER,
                opt(self.application_server.clone(), "<unset>"),
            ),
            (
                keys::METRICS_RECORDING_LEVEL,
                format!("{:?}", self.recording_level).to_ascii_uppercase(),
            ),
            (keys::POLL_MS, self.poll_interval.as_millis().to_string()),
            (
                keys::REPARTITION_PURGE_INTERVAL_MS,
                self.repartition_purge_interval.as_millis().to_string(),
            ),
            (keys::MAX_POLL_RECORDS, self.max_poll_records.to_string()),
            (
                keys::MAX_TASK_IDLE_MS,
                self.max_task_idle
                    .map_or("-1".to_owned(), |d| d.as_millis().to_string()),
            ),
            (keys::REPLICATION_FACTOR, self.replication_factor.to_string()),
            (keys::NUM_STANDBY_REPLICAS, self.num_standby_replicas.to_string()),
            (
                keys::ROCKSDB_BLOCK_CACHE_BYTES,
                self.rocksdb_block_cache_bytes.to_string(),
            ),
            (
                keys::ROCKSDB_WRITE_BUFFER_BYTES,
                self.rocksdb_write_buffer_bytes.to_string(),
            ),
        ]
    }

    /// The pass-through properties with their prefixes restored, secrets masked.
    fn client_display(&self) -> impl Iterator<Item = (String, &str)> {
        self.client.iter().flat_map(|(scope, props)| {
            props
                .iter()
                .map(move |(k, v)| (format!("{}{k}", scope.prefix()), mask(k, v)))
        })
    }
}

/// What a secret value is shown as.
pub(crate) const MASK: &str = "********";

/// Whether the property `key` (with or without a client prefix) holds a secret: a password
/// or passphrase (`sasl.password`, `ssl.key.password`, `ssl.keystore.password`,
/// `ssl.truststore.password`, ..., and misspellings such as `sasl.passwd`: any name with
/// `pass` or `pwd` in it), a client secret (`sasl.oauthbearer.client.secret`), a
/// JAAS configuration (`sasl.jaas.config`), a private key (`ssl.key.pem`,
/// `ssl.keystore.key`, `sasl.oauthbearer.assertion.private.key.pem`), librdkafka's
/// `sasl.oauthbearer.config`, or credentials (`basic.auth.user.info`). Such values are
/// masked in `Display` and `Debug`, and the runtime masks them in its logs and errors.
pub fn is_secret(key: &str) -> bool {
    const SECRET: [&str; 11] = [
        "pass",
        "pwd",
        "secret",
        "jaas",
        "sasl.oauthbearer.config",
        "key.pem",
        "private.key",
        "keystore.key",
        "ssl_key",
        "user.info",
        "credentials",
    ];
    let key = key.to_ascii_lowercase();
    SECRET.iter().any(|s| key.contains(s))
}

/// `value`, or `********` when `key` names a secret.
pub(super) fn mask<'a>(key: &str, value: &'a str) -> &'a str {
    if is_secret(key) { MASK } else { value }
}

impl fmt::Display for StreamsConfig {
    /// One `key = value` line per effective property: the streams properties (defaults
    /// included), then the client pass-through properties, then ignored ones as comments.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (key, value) in self.effective() {
            writeln!(f, "{key} = {value}")?;
        }
        for (key, value) in self.client_display() {
            writeln!(f, "{key} = {value}")?;
        }
        for key in &self.ignored {
            writeln!(f, "# ignored (not supported): {key}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for StreamsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("StreamsConfig");
        for (key, value) in self.effective() {
            s.field(key, &value);
        }
        let client: BTreeMap<String, &str> = self.client_display().collect();
        s.field("client", &client)
            .field("ignored", &self.ignored)
            .field("rocksdb_config_setter", &self.rocksdb_config_setter)
            .field("oauth_bearer_token_provider", &self.oauth_bearer_token_provider)
            .finish()
    }
}
