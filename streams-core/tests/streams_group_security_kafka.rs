//! An application under the streams rebalance protocol (`group.protocol=streams`) on the
//! test broker's SASL_SSL listener, with only the ACLs it documents: the group's members
//! connect with TLS and SCRAM-SHA-512 like the application's other clients, hold standby
//! tasks, and a task that moves to its standby is not restored from the changelog's start.
//! Every count is checked exactly once (exactly-once). A second test runs the application
//! with OAUTHBEARER instead (unsecured JWTs naming the same user, whose sessions the broker
//! limits to 4 s), every client of it, the group's members included; a third with tokens
//! from the application's provider, which expire while the application runs. Test data goes in and
//! out through the PLAINTEXT listener. Skipped without the secure listener unless `STREAMS_REQUIRE_KAFKA=1`.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use streams_core::config::OAuthBearerToken;
use streams_core::{GroupProtocol, KafkaStreams, State, StreamsConfig};
use streams_test_utils::kafka::acl::{self, AclBinding};
use streams_test_utils::kafka::secure::{self, STREAMS, SecureKafka};
use streams_test_utils::kafka::{self, DEFAULT_TIMEOUT};

mod common;

use common::{committed_counts, count_topology, metric, produce_words};

const KEYS: usize = 200;

/// How the application authenticates as `STREAMS`.
#[derive(Clone)]
enum Login {
    Scram,
    /// An unsecured JWT naming the user, made by librdkafka and by the group's members.
    OAuthBearer,
    /// Tokens from the application's provider: unsecured JWTs naming the user that expire
    /// [`TOKEN_LIFE`] after they are made; the counter counts the provider's calls.
    Provider(&'static AtomicUsize),
    /// librdkafka's OIDC properties, with this token endpoint.
    Oidc(String),
}

/// How long the provider's tokens are valid: less than the test runs, so every client must
/// be given new ones, and longer than the broker's sessions (4 s), so each is checked at a
/// re-authentication before it expires.
const TOKEN_LIFE: Duration = Duration::from_secs(10);

/// An unsecured JWT (header `{"alg":"none"}`, no signature) for `STREAMS`, which the test
/// broker's default validator accepts until it expires.
fn unsecured_token() -> Result<OAuthBearerToken, String> {
    let iat = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let exp = iat + TOKEN_LIFE.as_secs();
    let jwt = common::unsecured_jwt(&serde_json::json!({ "sub": STREAMS.name, "iat": iat, "exp": exp }));
    Ok(OAuthBearerToken::new(
        jwt,
        STREAMS.name,
        UNIX_EPOCH + Duration::from_secs(exp),
    ))
}

fn config(broker: &SecureKafka, app: &str, state_dir: &Path, login: &Login) -> StreamsConfig {
    let standbys = [("group.protocol", "streams"), ("num.standby.replicas", "1")];
    let mut props = common::secure_app_props(broker, app, state_dir, &standbys);
    match login {
        Login::Scram => props.extend(broker.client_properties(&STREAMS, "SCRAM-SHA-512")),
        Login::OAuthBearer => props.extend(
            broker
                .client_properties(&STREAMS, "OAUTHBEARER")
                .into_iter()
                .filter(|(k, _)| !k.starts_with("sasl.username") && !k.starts_with("sasl.password"))
                .chain([
                    ("enable.sasl.oauthbearer.unsecure.jwt".into(), "true".into()),
                    (
                        "sasl.oauthbearer.config".into(),
                        format!("principal={}", STREAMS.name),
                    ),
                ]),
        ),
        Login::Oidc(endpoint) => props.extend(
            [
                ("security.protocol", "SASL_SSL"),
                ("sasl.mechanism", "OAUTHBEARER"),
                ("ssl.ca.location", &broker.ca_location.display().to_string()),
                ("sasl.oauthbearer.method", "oidc"),
                ("sasl.oauthbearer.token.endpoint.url", endpoint),
                ("sasl.oauthbearer.client.id", "streams-app"),
                ("sasl.oauthbearer.client.secret", "oidc-secret"),
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned())),
        ),
        Login::Provider(calls) => {
            let calls: &'static AtomicUsize = calls;
            props.extend(
                broker
                    .client_properties(&STREAMS, "OAUTHBEARER")
                    .into_iter()
                    .filter(|(k, _)| !k.starts_with("sasl.username") && !k.starts_with("sasl.password")),
            );
            return StreamsConfig::from_properties(props)
                .unwrap()
                .to_builder()
                .oauth_bearer_token_provider(move || {
                    calls.fetch_add(1, Ordering::SeqCst);
                    unsecured_token()
                })
                .build()
                .unwrap();
        }
    }
    StreamsConfig::from_properties(props).unwrap()
}

/// Waits until `done` holds for `app`, or fails naming `what`.
fn wait(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !done() {
        assert!(Instant::now() < deadline, "not reached: {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Every key's committed counts end at `expected`; each count of a key appears once.
fn counts_reach(broker: &SecureKafka, output: &str, expected: u64) -> bool {
    let counts = committed_counts(&broker.plaintext_bootstrap, output);
    let done = counts.len() == KEYS && counts.values().all(|c| c.last() == Some(&expected));
    if done {
        for (key, c) in &counts {
            assert!(c.windows(2).all(|w| w[0] < w[1]), "{key}: counts {c:?}");
        }
    }
    done
}

fn start(
    broker: &SecureKafka,
    app_id: &str,
    topics: (&str, &str),
    state: &Path,
    login: Login,
) -> KafkaStreams {
    let (input, output) = topics;
    let config = config(broker, app_id, state, &login);
    let mut app = KafkaStreams::new(count_topology(input, output), config).unwrap();
    kafka::start_running(&mut app, Duration::from_secs(90));
    assert_eq!(app.group_protocol(), Some(GroupProtocol::Streams));
    app
}

/// A fresh application id `<prefix>` with its 4-partition input and output topics (`-words`,
/// `-counts`), `rounds` words per key already in the input, and the documented ACLs of
/// `STREAMS` for it, with the group's configs: the members set the group's standby count
/// (`streams.num.standby.replicas`) before joining.
fn prepare(broker: &SecureKafka, prefix: &str, rounds: usize) -> (String, String, String) {
    let app_id = kafka::unique_name(prefix);
    let input = kafka::unique_name(&format!("{prefix}-words"));
    let output = kafka::unique_name(&format!("{prefix}-counts"));
    kafka::create_topic(&broker.plaintext_bootstrap, &input, 4, &[]).unwrap();
    kafka::create_topic(&broker.plaintext_bootstrap, &output, 4, &[]).unwrap();
    produce_words(&broker.plaintext_bootstrap, &input, KEYS, rounds, "a");
    let principal = STREAMS.principal();
    let mut acls = acl::streams_application(&principal, &app_id, &[&input], &[&output], true);
    acls.extend(
        [acl::Operation::AlterConfigs, acl::Operation::DescribeConfigs]
            .map(|op| AclBinding::prefixed(acl::ResourceType::Group, &principal, &app_id, op)),
    );
    acl::create_acls(&broker.plaintext_bootstrap, &acls, DEFAULT_TIMEOUT).unwrap();
    (app_id, input, output)
}

#[test]
fn an_application_authenticated_with_unsecured_jwts_counts_every_key_once() {
    let Some(broker) = secure::require_secure_kafka("an_application_authenticated_with_unsecured_jwts")
    else {
        return;
    };
    let (app_id, input, output) = prepare(&broker, "secure-oauth", 3);
    let state = tempfile::tempdir().unwrap();
    let mut app = start(
        &broker,
        &app_id,
        (&input, &output),
        state.path(),
        Login::OAuthBearer,
    );
    wait("three counts per key", || counts_reach(&broker, &output, 3));
    // Longer than a session (4 s): every client authenticates again on its connections.
    std::thread::sleep(Duration::from_secs(5));
    produce_words(&broker.plaintext_bootstrap, &input, KEYS, 3, "b");
    wait("six counts per key", || counts_reach(&broker, &output, 6));
    assert_eq!(app.state(), State::Running);
    assert!(app.close(Duration::from_secs(60)));
}

/// Every client of the application, the group's members included, presents the tokens of
/// the application's provider and is given new ones before they expire: the application
/// counts across three token lives, in which the broker checks each client's token at
/// every re-authentication (4 s), and the provider is called once per token life, not
/// once per client.
#[test]
fn an_application_authenticated_with_a_token_provider_outlives_its_tokens() {
    let Some(broker) = secure::require_secure_kafka("an_application_authenticated_with_a_token_provider")
    else {
        return;
    };
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    outlives_its_tokens(&broker, "secure-token", Login::Provider(&CALLS), &CALLS);
}

/// The same with librdkafka's OIDC properties (`sasl.oauthbearer.method=oidc`), which the
/// framework serves itself: tokens from a client credentials grant against a local token
/// endpoint.
#[test]
fn an_application_authenticated_by_an_oidc_token_endpoint_outlives_its_tokens() {
    let Some(broker) = secure::require_secure_kafka("an_application_authenticated_by_an_oidc_token_endpoint")
    else {
        return;
    };
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    let endpoint = token_endpoint(&CALLS);
    outlives_its_tokens(&broker, "secure-oidc", Login::Oidc(endpoint), &CALLS);
}

/// A token endpoint on localhost answering every client credentials request of
/// `streams-app:oidc-secret` with an unsecured JWT for `STREAMS`; `calls` counts them.
fn token_endpoint(calls: &'static AtomicUsize) -> String {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/token", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let mut stream = stream.unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let (mut head, mut length) = (String::new(), 0);
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap();
                }
                head.push_str(&line);
            }
            let mut form = vec![0; length];
            let _ = reader.read_exact(&mut form);
            // `streams-app:oidc-secret`, base64.
            let (status, body) = if head.contains("Basic c3RyZWFtcy1hcHA6b2lkYy1zZWNyZXQ=")
                && form.starts_with(b"grant_type=client_credentials")
            {
                calls.fetch_add(1, Ordering::SeqCst);
                let token = unsecured_token().unwrap();
                let body = serde_json::json!({ "access_token": token.value(), "token_type": "bearer" });
                (200, body.to_string())
            } else {
                (401, r#"{"error":"invalid_client"}"#.to_owned())
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    url
}

/// Runs the application with `login` across three token lives; `calls` counts the tokens
/// made.
fn outlives_its_tokens(broker: &SecureKafka, prefix: &str, login: Login, calls: &AtomicUsize) {
    let (app_id, input, output) = prepare(broker, prefix, 3);
    let state = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let broker = broker.clone();
    let mut app = start(&broker, &app_id, (&input, &output), state.path(), login);
    wait("three counts per key", || counts_reach(&broker, &output, 3));
    // The first token has expired, and the second, well before this ends.
    std::thread::sleep((TOKEN_LIFE * 2).saturating_sub(started.elapsed()) + Duration::from_secs(2));
    produce_words(&broker.plaintext_bootstrap, &input, KEYS, 3, "b");
    wait("six counts per key", || counts_reach(&broker, &output, 6));
    assert_eq!(app.state(), State::Running);
    let lives = started.elapsed().as_secs_f64() / (TOKEN_LIFE.as_secs_f64() * 0.8);
    let calls = calls.load(Ordering::SeqCst);
    eprintln!("{calls} tokens in {:.1} s", started.elapsed().as_secs_f64());
    assert!(calls >= 3, "{calls} tokens: the clients were not given new ones");
    assert!(
        (calls as f64) <= lives.ceil() + 2.0,
        "{calls} tokens in {lives:.1} refresh periods: fetched per client, not shared"
    );
    assert!(app.close(Duration::from_secs(60)));
}

#[test]
fn standbys_over_sasl_ssl_take_their_tasks_over_without_a_full_restore() {
    let Some(broker) =
        secure::require_secure_kafka("standbys_over_sasl_ssl_take_their_tasks_over_without_a_full_restore")
    else {
        return;
    };
    common::init_tracing();
    let (app_id, input, output) = prepare(&broker, "secure-sg", 5);

    let (state_a, state_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut a = start(&broker, &app_id, (&input, &output), state_a.path(), Login::Scram);
    wait("five counts per key", || counts_reach(&broker, &output, 5));
    let mut b = start(&broker, &app_id, (&input, &output), state_b.path(), Login::Scram);
    // The coordinator, reached over SASL_SSL, gives each instance the other's tasks as
    // standbys, and A's standbys read B's changelog.
    wait("standbys on both instances", || {
        metric(&a, "streams_thread_standby_tasks", "") > 0.0
            && metric(&b, "streams_thread_standby_tasks", "") > 0.0
    });
    produce_words(&broker.plaintext_bootstrap, &input, KEYS, 5, "b");
    wait("ten counts per key", || counts_reach(&broker, &output, 10));
    // A's standbys have read what B committed (B processes nothing more).
    wait("A's standbys caught up with B's changelog", || {
        metric(&a, "streams_task_standby_records_total", "") > 0.0
            && metric(&a, "streams_task_standby_lag_records", "") == 0.0
    });
    let restored_before = metric(&a, "streams_task_restore_records_total", "");

    // B leaves; A takes B's tasks over from its standbys and counts five more rounds.
    assert!(b.close(Duration::from_secs(60)));
    // B leaves the offset sums of its active and standby tasks on disk, which a restarted
    // B would report to the coordinator.
    assert_eq!(
        offset_sums(&state_b.path().join(&app_id)).len(),
        4,
        "B's tasks on disk"
    );
    produce_words(&broker.plaintext_bootstrap, &input, KEYS, 5, "c");
    wait("fifteen counts per key", || counts_reach(&broker, &output, 15));
    let restored = metric(&a, "streams_task_restore_records_total", "") - restored_before;
    eprintln!("A restored {restored} changelog records when B left");
    // Without the standbys A restores B's tasks from its checkpoint of before B joined:
    // the second round's update of each of B's ~100 keys (94 in a run without standbys).
    assert!(
        restored <= (KEYS / 10) as f64,
        "A restored {restored} records: its standbys were not used"
    );
    assert!(a.close(Duration::from_secs(60)));
    assert_eq!(a.state(), State::NotRunning);
    assert_eq!(
        offset_sums(&state_a.path().join(&app_id)).len(),
        4,
        "A's tasks on disk"
    );
}

/// The positive offset sums found in the task directories under `app_dir`.
fn offset_sums(app_dir: &Path) -> Vec<(String, i64)> {
    let mut sums = Vec::new();
    for entry in std::fs::read_dir(app_dir).unwrap().flatten() {
        if let Ok(text) = std::fs::read_to_string(entry.path().join(".offset-sum")) {
            let sum: i64 = text.trim().parse().unwrap();
            if sum > 0 {
                sums.push((entry.file_name().to_string_lossy().into_owned(), sum));
            }
        }
    }
    sums
}
