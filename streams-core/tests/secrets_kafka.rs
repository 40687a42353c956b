//! Secrets never leak: an exactly-once application runs over SASL_SSL with a JAAS
//! configuration, key and store passwords and a client secret configured, librdkafka
//! logging at debug level, once with the consumer group protocols and once with the
//! streams protocol (whose own client authenticates through rsasl), and once more with
//! OAUTHBEARER tokens from the application's provider; then configurations with secrets are refused in every way the
//! framework refuses them. Every log line (a `tracing` subscriber writing to a buffer, with
//! librdkafka's lines the runtime forwards), every `Debug` and `Display` of the
//! configuration, every error, the topology's description and the `/metrics` page are
//! searched for each secret value.
//!
//! One test per process: the subscriber is global. It needs the test broker's secure
//! listener (see `security_kafka.rs`).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, UNIX_EPOCH};

use streams_core::config::OAuthBearerToken;
use streams_core::{GroupProtocol, KafkaStreams, StreamsConfig, StreamsError};
use streams_test_utils::kafka::acl;
use streams_test_utils::kafka::secure::{self, STREAMS, SecureKafka};
use streams_test_utils::kafka::{self, ConsumeUntil, DEFAULT_TIMEOUT};

mod common;

use common::{count_topology, produce_words};

/// The secrets configured, each distinct and found nowhere else.
const KEY_PASSWORD: &str = "key-pw-3b8e1f0c";
const KEYSTORE_PASSWORD: &str = "keystore-pw-a9c2d4e7";
const TRUSTSTORE_PASSWORD: &str = "truststore-pw-5f7e0b13";
const CLIENT_SECRET: &str = "client-secret-8d6c3a92";
/// librdkafka's own OAUTHBEARER settings (unsecured tokens), with a secret extension.
const OAUTH_CONFIG: &str = "principal=streams extension_token=oauth-token-4c1d7e58";
const KEY_PEM: &str =
    "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC-pem-2e4f6a71\n-----END PRIVATE KEY-----";
const WRONG_PASSWORD: &str = "wrong-pw-61d0c8e2";
/// The `jti` claim of the provider's tokens: each token's text contains it.
const TOKEN_ID: &str = "jti-provided-7e3a90c4";
/// An extension value the provider's tokens carry (the test broker accepts any).
const TOKEN_EXTENSION: &str = "ext-provided-15b6d2f8";
const TYPO_PASSWORD: &str = "typo-pw-0a7b3c95";

/// Everything written to the log, whatever the thread.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(PoisonError::into_inner)).into_owned()
    }
}

/// When the provider's token expires (2100-01-01), so that its text is always the same.
const TOKEN_EXP: u64 = 4_102_444_800;

/// The provider's token text: an unsecured JWT for `STREAMS` (the test broker's validator
/// takes it), a secret like a password.
fn provided_jwt() -> String {
    common::unsecured_jwt(
        &serde_json::json!({ "sub": STREAMS.name, "iat": 1_700_000_000, "exp": TOKEN_EXP, "jti": TOKEN_ID }),
    )
}

/// The provider's token.
fn provided_token() -> Result<OAuthBearerToken, String> {
    let expires = UNIX_EPOCH + Duration::from_secs(TOKEN_EXP);
    Ok(OAuthBearerToken::new(provided_jwt(), STREAMS.name, expires)
        .with_extension("traceId", TOKEN_EXTENSION))
}

/// The body of `GET /metrics` at `address`.
fn scrape(address: std::net::SocketAddr) -> String {
    let mut stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut page = String::new();
    stream.read_to_string(&mut page).unwrap();
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    page
}

/// Runs the count application of `props` (with OAUTHBEARER tokens from a provider when
/// `tokens`) until every one of `keys` keys is counted twice in `output`; what it shows of
/// itself goes to `shown`.
fn run_counting(
    broker: &SecureKafka,
    props: &[(&str, &str)],
    tokens: bool,
    io: (&str, &str),
    keys: usize,
    shown: &mut Vec<String>,
) {
    let (input, output) = io;
    let mut config = StreamsConfig::from_properties(props.to_vec()).unwrap();
    if tokens {
        config = config
            .to_builder()
            .oauth_bearer_token_provider(provided_token)
            .build()
            .unwrap();
    }
    shown.push(format!("{config:?}"));
    shown.push(format!("{config}"));
    shown.push(format!("{:?}", config.to_builder()));
    assert!(
        format!("{config}").contains("sasl.password = ********"),
        "{config}"
    );
    let topology = count_topology(input, output);
    shown.push(topology.describe().to_string());
    let mut app = KafkaStreams::new(topology, config).unwrap();
    kafka::start_running(&mut app, Duration::from_secs(60));
    if props.contains(&("group.protocol", "streams")) {
        assert_eq!(app.group_protocol(), Some(GroupProtocol::Streams));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let done = kafka::consume_all(
            &broker.plaintext_bootstrap,
            output,
            ConsumeUntil::Idle(Duration::ZERO),
            DEFAULT_TIMEOUT,
            true,
        )
        .unwrap()
        .iter()
        .filter(|r| r.value.as_deref() == Some(&2u64.to_be_bytes()[..]))
        .count();
        if done == keys {
            break;
        }
        assert!(Instant::now() < deadline, "{done} of {keys} keys counted");
        std::thread::sleep(Duration::from_millis(200));
    }
    shown.push(scrape(app.metrics_address().expect("metrics served")));
    shown.push(app.metrics().encode());
    assert!(app.close(Duration::from_secs(60)));
}

#[test]
fn secrets_never_leak_into_logs_debug_errors_descriptions_or_metrics() {
    let Some(broker) =
        secure::require_secure_kafka("secrets_never_leak_into_logs_debug_errors_descriptions_or_metrics")
    else {
        return;
    };
    let captured = Captured::default();
    let writer = captured.clone();
    tracing::subscriber::set_global_default(
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new("debug"))
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish(),
    )
    .expect("the only subscriber of this test binary");
    // What the test itself shows of the framework's text: searched along with the log.
    let mut shown: Vec<String> = Vec::new();

    // An exactly-once application over SASL_SSL: the password in a Java JAAS
    // configuration, more secrets beside it, librdkafka's security and configuration
    // debugging on.
    const KEYS: usize = 20;
    let input = kafka::unique_name("secrets-in");
    kafka::create_topic(&broker.plaintext_bootstrap, &input, 2, &[]).unwrap();
    produce_words(&broker.plaintext_bootstrap, &input, KEYS, 2, "a");
    let jaas = format!(
        r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="{}" password="{}";"#,
        STREAMS.name, STREAMS.password
    );
    let ca = broker.ca_location.display().to_string();
    let mut output = String::new();
    // The third run takes its tokens from a provider (OAUTHBEARER) instead of the password.
    for (group_protocol, tokens) in [(None, false), (Some("streams"), false), (Some("streams"), true)] {
        let app_id = kafka::unique_name("secrets");
        output = kafka::unique_name("secrets-out");
        kafka::create_topic(&broker.plaintext_bootstrap, &output, 2, &[]).unwrap();
        let acls = acl::streams_application(&STREAMS.principal(), &app_id, &[&input], &[&output], true);
        acl::create_acls(&broker.plaintext_bootstrap, &acls, DEFAULT_TIMEOUT).unwrap();
        let state = tempfile::tempdir().unwrap();
        let dir = state.path().display().to_string();
        let mut props: Vec<(&str, &str)> = vec![
            ("application.id", &app_id),
            ("bootstrap.servers", &broker.bootstrap),
            ("state.dir", &dir),
            ("processing.guarantee", "exactly_once_v2"),
            ("commit.interval.ms", "200"),
            ("metrics.address", "127.0.0.1:0"),
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            ("sasl.jaas.config", &jaas),
            ("ssl.ca.location", &ca),
            ("ssl.key.password", KEY_PASSWORD),
            ("producer.ssl.keystore.password", KEYSTORE_PASSWORD),
            ("ssl.truststore.password", TRUSTSTORE_PASSWORD),
            ("sasl.oauthbearer.config", OAUTH_CONFIG),
            ("debug", "security,conf,broker,generic"),
        ];
        props.extend(group_protocol.map(|p| ("group.protocol", p)));
        if tokens {
            props.retain(|(k, _)| *k != "sasl.mechanism");
            props.push(("sasl.mechanism", "OAUTHBEARER"));
        }
        run_counting(&broker, &props, tokens, (&input, &output), KEYS, &mut shown);
    }
    // Refusals: configurations that quote secrets in the wrong places.
    let base = |extra: &[(&'static str, &'static str)]| -> Vec<(&'static str, &'static str)> {
        let mut p = vec![
            ("application.id", "secrets-refused"),
            ("bootstrap.servers", "127.0.0.1:1"),
            ("ssl.key.pem", KEY_PEM),
            ("sasl.password", WRONG_PASSWORD),
        ];
        p.extend_from_slice(extra);
        p
    };
    let refused = [
        base(&[("num.stream.threads", "0")]),
        base(&[(
            "admin.sasl.jaas.config",
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientSecret=\"client-secret-8d6c3a92\";",
        )]),
        base(&[(
            "sasl.jaas.config",
            "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"client-secret-8d6c3a92\";",
        )]),
        base(&[
            ("ssl.truststore.location", "/etc/kafka/truststore.jks"),
            ("ssl.truststore.password", TRUSTSTORE_PASSWORD),
        ]),
        base(&[
            ("ssl.keystore.type", "JKS"),
            ("ssl.keystore.password", KEYSTORE_PASSWORD),
        ]),
    ];
    for props in refused {
        let e = StreamsConfig::from_properties(props.clone()).unwrap_err();
        shown.push(format!("{e}"));
        shown.push(format!("{e:?}"));
        shown.push(format!("{:?}", StreamsConfig::builder().set_all(props)));
    }
    // Refused by librdkafka when the application is constructed: an unknown (misspelt)
    // property, a value out of range, an OIDC secret (this build has no OIDC), beside
    // the secrets.
    for extra in [
        [
            ("producer.sasl.passwrd", TYPO_PASSWORD),
            ("ssl.key.password", KEY_PASSWORD),
        ],
        [
            ("security.protocol", "SASL_TLS"),
            ("ssl.key.password", KEY_PASSWORD),
        ],
        [
            ("sasl.oauthbearer.client.secret", CLIENT_SECRET),
            ("ssl.key.password", KEY_PASSWORD),
        ],
    ] {
        let config = StreamsConfig::from_properties(base(&extra)).unwrap();
        shown.push(format!("{config:?}"));
        let e = KafkaStreams::new(count_topology(&input, &output), config)
            .err()
            .expect("refused");
        shown.push(format!("{e}"));
        shown.push(format!("{e:?}"));
    }
    // Refused when the clients are made or connect: a private key that is no key, a broker
    // certificate the configured CA did not sign, a wrong password.
    let failing: [Vec<(&str, String)>; 3] = [
        vec![
            ("ssl.key.pem", KEY_PEM.into()),
            ("ssl.certificate.location", ca.clone()),
            ("sasl.password", STREAMS.password.into()),
        ],
        vec![
            ("ssl.ca.location", broker.other_ca_location.display().to_string()),
            ("sasl.password", STREAMS.password.into()),
        ],
        vec![("sasl.password", WRONG_PASSWORD.into())],
    ];
    for extra in failing {
        let state = tempfile::tempdir().unwrap();
        let mut props: Vec<(&str, String)> = vec![
            ("application.id", kafka::unique_name("secrets-failing")),
            ("bootstrap.servers", broker.bootstrap.clone()),
            ("state.dir", state.path().display().to_string()),
            ("security.protocol", "SASL_SSL".into()),
            ("sasl.mechanism", "SCRAM-SHA-512".into()),
            ("sasl.username", STREAMS.name.into()),
            ("ssl.ca.location", ca.clone()),
            ("ssl.key.password", KEY_PASSWORD.into()),
            ("sasl.oauthbearer.config", OAUTH_CONFIG.into()),
            ("debug", "security,conf,broker".into()),
        ];
        props.retain(|(k, _)| !extra.iter().any(|(e, _)| e == k));
        props.extend(extra);
        let config = StreamsConfig::from_properties(props).unwrap();
        let mut app = KafkaStreams::new(count_topology(&input, &output), config).unwrap();
        let e = app.start().expect_err("start must fail");
        shown.push(format!("{e}"));
        shown.push(format!("{e:?}"));
    }
    // The OIDC source (the framework fetches the tokens) with a token endpoint that is down:
    // `start` fails with an authentication error that quotes no secret.
    let state = tempfile::tempdir().unwrap();
    let oidc = StreamsConfig::from_properties([
        ("application.id", kafka::unique_name("secrets-oidc").as_str()),
        ("bootstrap.servers", &broker.bootstrap),
        ("state.dir", &state.path().display().to_string()),
        ("security.protocol", "SASL_SSL"),
        ("sasl.mechanism", "OAUTHBEARER"),
        ("ssl.ca.location", &ca),
        ("sasl.oauthbearer.method", "oidc"),
        ("sasl.oauthbearer.token.endpoint.url", "http://127.0.0.1:1/token"),
        ("sasl.oauthbearer.client.id", STREAMS.name),
        ("sasl.oauthbearer.client.secret", CLIENT_SECRET),
    ])
    .unwrap();
    shown.push(format!("{oidc:?}"));
    shown.push(format!("{oidc}"));
    let mut app = KafkaStreams::new(count_topology(&input, &output), oidc).unwrap();
    let e = app.start().expect_err("no token, no start");
    assert!(matches!(e, StreamsError::Authentication { .. }), "{e:?}");
    shown.push(format!("{e}"));
    shown.push(format!("{e:?}"));

    let log = captured.text();
    assert!(log.contains("librdkafka"), "librdkafka's lines are captured");
    assert!(log.contains("SASL"), "librdkafka's security lines are captured");
    assert!(
        log.contains("streams_group::sasl") && log.contains("authenticated"),
        "the streams-group client's authentication lines are captured"
    );
    let text = format!("{log}\n{}", shown.join("\n"));
    let mut leaked = Vec::new();
    for secret in [
        STREAMS.password,
        KEY_PASSWORD,
        KEYSTORE_PASSWORD,
        TRUSTSTORE_PASSWORD,
        CLIENT_SECRET,
        "oauth-token-4c1d7e58",
        provided_jwt().as_str(),
        TOKEN_EXTENSION,
        KEY_PEM,
        "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC-pem-2e4f6a71",
        WRONG_PASSWORD,
        TYPO_PASSWORD,
        &jaas,
    ] {
        if let Some(at) = text.find(secret) {
            let from = text[..at].rfind('\n').map_or(0, |n| n + 1);
            let to = text[at..].find('\n').map_or(text.len(), |n| at + n);
            leaked.push(format!("{secret:?} in: {}", &text[from..to]));
        }
    }
    assert!(leaked.is_empty(), "secrets leaked:\n{}", leaked.join("\n"));
    eprintln!(
        "searched {} bytes of log and {} texts shown by the framework",
        log.len(),
        shown.len()
    );
}
