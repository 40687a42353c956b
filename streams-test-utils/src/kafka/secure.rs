//! The test broker's secure listener: SASL_SSL (TLS, SCRAM-SHA-512 or PLAIN) with ACLs.
//!
//! `scripts/kafka.sh` gives the broker a SASL_SSL listener next to its PLAINTEXT one, a CA and
//! broker certificate it generates, three users and the standard authorizer (see
//! `docs/kafka-for-tests.md`, "Secure mode"). `scripts/test.sh` exports where it is:
//!
//! - [`SECURE_BOOTSTRAP_ENV`] (`STREAMS_TEST_SECURE_BOOTSTRAP`): the SASL_SSL listener,
//!   e.g. `127.0.0.1:9094`;
//! - [`SECURE_CA_ENV`] (`STREAMS_TEST_SECURE_CA`): the PEM file of the CA that signed the
//!   broker's certificate (`other-ca.pem` beside it is a CA that signed nothing).
//!
//! Every secure test starts with [`require_secure_kafka`]. Test data goes in and out through
//! the PLAINTEXT listener ([`SecureKafka::plaintext_bootstrap`]), whose principal is a super
//! user; the application under test connects to the SASL_SSL one as [`STREAMS`], which may do
//! only what the test grants it with [`acl::create_acls`](super::acl::create_acls).
//!
//! ```no_run
//! use streams_test_utils::kafka::secure::{self, STREAMS};
//!
//! let Some(broker) = secure::require_secure_kafka("my_secure_test") else {
//!     return;
//! };
//! let props = broker.client_properties(&STREAMS, "SCRAM-SHA-512");
//! assert!(props.iter().any(|(k, v)| k == "security.protocol" && v == "SASL_SSL"));
//! ```

use std::io::Write as _;
use std::net::{TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use rdkafka::ClientConfig;

use super::{BOOTSTRAP_ENV, REQUIRE_KAFKA_ENV, kafka_bootstrap, kafka_required};

/// Environment variable holding the test broker's SASL_SSL listener (`host:port`).
pub const SECURE_BOOTSTRAP_ENV: &str = "STREAMS_TEST_SECURE_BOOTSTRAP";

/// Environment variable holding the path of the PEM certificate of the test broker's CA.
pub const SECURE_CA_ENV: &str = "STREAMS_TEST_SECURE_CA";

/// A user of the test broker's SASL_SSL listener (SCRAM-SHA-512 and PLAIN), as
/// `scripts/kafka.sh` creates it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct User {
    /// The user name; the principal is `User:<name>`.
    pub name: &'static str,
    /// The password.
    pub password: &'static str,
}

impl User {
    /// The principal ACLs name: `User:<name>`.
    pub fn principal(&self) -> String {
        format!("User:{}", self.name)
    }
}

/// A super user.
pub const ADMIN: User = User {
    name: "admin",
    password: "admin-pw-7c2b9a",
};

/// The applications' user: no ACLs but the ones tests grant.
pub const STREAMS: User = User {
    name: "streams",
    password: "streams-pw-4f9c1e",
};

/// A user no test grants anything.
pub const NO_ACLS: User = User {
    name: "no-acls",
    password: "no-acls-pw-d03e58",
};

/// Where the test broker's secure listener is, and what its clients trust.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecureKafka {
    /// The SASL_SSL listener.
    pub bootstrap: String,
    /// The PLAINTEXT listener of the same broker ([`BOOTSTRAP_ENV`]): its principal is a
    /// super user, for test data and ACLs.
    pub plaintext_bootstrap: String,
    /// The PEM certificate of the CA that signed the broker's certificate.
    pub ca_location: PathBuf,
    /// The PEM certificate of another CA, which did not sign the broker's certificate.
    pub other_ca_location: PathBuf,
}

impl SecureKafka {
    /// The client properties of a SASL_SSL connection as `user` with `mechanism`
    /// (`SCRAM-SHA-512` or `PLAIN`), trusting the broker's CA.
    pub fn client_properties(&self, user: &User, mechanism: &str) -> Vec<(String, String)> {
        [
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", mechanism),
            ("sasl.username", user.name),
            ("sasl.password", user.password),
            ("ssl.ca.location", &self.ca_location.display().to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
    }

    /// [`SecureKafka::client_properties`] with SCRAM-SHA-512 and `bootstrap.servers`, as an
    /// rdkafka configuration.
    pub fn client_config(&self, user: &User) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &self.bootstrap);
        for (k, v) in self.client_properties(user, "SCRAM-SHA-512") {
            config.set(k, v);
        }
        config
    }
}

/// The first line of every test of the secure listener: like
/// [`require_kafka`](super::require_kafka), it returns the broker when [`BOOTSTRAP_ENV`],
/// [`SECURE_BOOTSTRAP_ENV`] and [`SECURE_CA_ENV`] are set, the CA file exists and the
/// secure listener accepts connections; otherwise it prints `SKIPPED <test>: ...` and
/// returns `None`.
///
/// # Panics
///
/// When [`REQUIRE_KAFKA_ENV`] is `1` and the secure listener is not configured or not
/// reachable: the message says why (for instance, a broker started by an older
/// `scripts/kafka.sh`, which has no secure listener).
pub fn require_secure_kafka(test: &str) -> Option<SecureKafka> {
    match secure_kafka() {
        Ok(broker) => Some(broker),
        Err(why) => {
            if kafka_required() {
                panic!("{test}: {REQUIRE_KAFKA_ENV}=1 but {why}");
            }
            let mut stderr = std::io::stderr().lock();
            let _ = writeln!(stderr, "SKIPPED {test}: {why}");
            None
        }
    }
}

fn env(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

fn secure_kafka() -> Result<SecureKafka, String> {
    let hint = "run `bash scripts/test.sh`, or take them from the `kafka secure listener on ADDRESS ca FILE` \
                line of `bash scripts/kafka.sh ensure`";
    let Some(plaintext_bootstrap) = kafka_bootstrap() else {
        return Err(format!("no Kafka broker: {BOOTSTRAP_ENV} is not set ({hint})"));
    };
    let (Some(bootstrap), Some(ca)) = (env(SECURE_BOOTSTRAP_ENV), env(SECURE_CA_ENV)) else {
        return Err(format!(
            "no secure Kafka listener: {SECURE_BOOTSTRAP_ENV} and {SECURE_CA_ENV} must both be set ({hint})"
        ));
    };
    let ca_location = PathBuf::from(ca);
    if !ca_location.is_file() {
        return Err(format!(
            "{SECURE_CA_ENV} names {}, which is not a file",
            ca_location.display()
        ));
    }
    let other_ca_location = ca_location.with_file_name("other-ca.pem");
    let reachable = bootstrap
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .is_some_and(|a| TcpStream::connect_timeout(&a, Duration::from_secs(2)).is_ok());
    if !reachable {
        return Err(format!(
            "nothing accepts connections at {SECURE_BOOTSTRAP_ENV}={bootstrap}: a broker started by an \
             older scripts/kafka.sh has no secure listener (`bash scripts/kafka.sh restart` adds it)"
        ));
    }
    Ok(SecureKafka {
        bootstrap,
        plaintext_bootstrap,
        ca_location,
        other_ca_location,
    })
}
