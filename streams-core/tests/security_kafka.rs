//! The runtime against the test broker's secure listener (SASL_SSL with SCRAM-SHA-512 or
//! PLAIN, TLS with the broker's own CA, the standard authorizer): an exactly-once
//! application with only the ACLs Kafka Streams documents; clear, bounded failures for a
//! missing ACL, a wrong password and an untrusted broker certificate.
//!
//! Test data goes in and out through the PLAINTEXT listener (a super user); the applications
//! connect as `streams`, which may do only what each test grants it. Every test uses a fresh
//! application id and fresh topics. `scripts/test.sh` provides the secure listener; without it
//! the tests say they were skipped, or fail under `STREAMS_REQUIRE_KAFKA=1`.

use std::path::Path;
use std::time::{Duration, Instant};

use streams_core::{KafkaStreams, State, StreamsConfig, StreamsError};
use streams_test_utils::kafka::acl::{self, AclBinding};
use streams_test_utils::kafka::secure::{self, NO_ACLS, STREAMS, SecureKafka, User};
use streams_test_utils::kafka::{self, DEFAULT_TIMEOUT};

mod common;

use common::{committed_counts, count_topology, produce_words};

/// How long a misconfigured application may take to say so.
const FAIL_WITHIN: Duration = Duration::from_secs(30);

fn logs() {
    common::init_tracing();
}

/// An application of `app` connecting to the secure listener as `user`.
fn config(
    broker: &SecureKafka,
    user: &User,
    app: &str,
    state_dir: &Path,
    extra: &[(&str, &str)],
) -> StreamsConfig {
    let mut props = common::secure_app_props(broker, app, state_dir, &[]);
    props.extend(broker.client_properties(user, "SCRAM-SHA-512"));
    props.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    StreamsConfig::from_properties(props).unwrap()
}

/// Fresh input and output topics (4 partitions) with `records` rounds of `keys` keys in the
/// input.
fn topics(broker: &SecureKafka, keys: usize, rounds: usize) -> (String, String) {
    let input = kafka::unique_name("secure-words");
    let output = kafka::unique_name("secure-counts");
    kafka::create_topic(&broker.plaintext_bootstrap, &input, 4, &[]).unwrap();
    kafka::create_topic(&broker.plaintext_bootstrap, &output, 4, &[]).unwrap();
    produce_words(&broker.plaintext_bootstrap, &input, keys, rounds, "a");
    (input, output)
}

/// Waits until every one of `keys` keys has reached `expected` in `output`; then checks that
/// each key's counts only ever went up (a record processed twice would repeat or skip one).
fn wait_for_counts(broker: &SecureKafka, output: &str, keys: usize, expected: u64) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let counts = committed_counts(&broker.plaintext_bootstrap, output);
        let done = counts.len() == keys && counts.values().all(|c| c.last() == Some(&expected));
        if done {
            for (key, c) in &counts {
                assert!(
                    c.windows(2).all(|w| w[0] < w[1]),
                    "{key}: counts not strictly increasing: {c:?}"
                );
            }
            return;
        }
        assert!(
            Instant::now() < deadline,
            "counts not reached: {} keys of {keys}, sample {:?}",
            counts.len(),
            counts.iter().take(3).collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Starts `app` and waits until it runs.
fn run(app: &mut KafkaStreams) {
    kafka::start_running(app, Duration::from_secs(60));
}

#[test]
fn acls_are_created_and_listed() {
    let Some(broker) = secure::require_secure_kafka("acls_are_created_and_listed") else {
        return;
    };
    let topic = kafka::unique_name("acl-listed");
    let bindings = [
        AclBinding::topic_literal(&STREAMS.principal(), &topic, acl::Operation::Read),
        AclBinding::prefixed(
            acl::ResourceType::Group,
            &STREAMS.principal(),
            &topic,
            acl::Operation::Describe,
        ),
    ];
    acl::create_acls(&broker.plaintext_bootstrap, &bindings, DEFAULT_TIMEOUT).unwrap();
    let listed = acl::describe_acls(&broker.plaintext_bootstrap, DEFAULT_TIMEOUT).unwrap();
    for b in &bindings {
        assert!(listed.contains(b), "{b} not listed");
    }
}

/// Exactly-once over SASL_SSL with the documented ACLs and nothing more: every record is
/// counted once, through a restore from the changelog after the state is wiped. The
/// principal may not describe the broker's configuration, so the threads join with the
/// classic group protocol.
#[test]
fn exactly_once_over_sasl_ssl_with_only_the_documented_acls() {
    exactly_once_with_documented_acls("exactly_once_over_sasl_ssl_with_only_the_documented_acls", &[]);
}

/// The same with the consumer group protocol of KIP-848, which needs no other ACL.
#[test]
fn exactly_once_over_sasl_ssl_with_the_consumer_group_protocol() {
    exactly_once_with_documented_acls(
        "exactly_once_over_sasl_ssl_with_the_consumer_group_protocol",
        &[("group.protocol", "consumer")],
    );
}

fn exactly_once_with_documented_acls(test: &str, extra: &[(&str, &str)]) {
    let Some(broker) = secure::require_secure_kafka(test) else {
        return;
    };
    logs();
    const KEYS: usize = 200;
    let app_id = kafka::unique_name("secure-eos");
    let (input, output) = topics(&broker, KEYS, 5);
    let acls = acl::streams_application(&STREAMS.principal(), &app_id, &[&input], &[&output], true);
    acl::create_acls(&broker.plaintext_bootstrap, &acls, DEFAULT_TIMEOUT).unwrap();

    let state = tempfile::tempdir().unwrap();
    let mut app = KafkaStreams::new(
        count_topology(&input, &output),
        config(&broker, &STREAMS, &app_id, state.path(), extra),
    )
    .unwrap();
    run(&mut app);
    wait_for_counts(&broker, &output, KEYS, 5);
    assert!(app.close(Duration::from_secs(60)));
    assert_eq!(app.state(), State::NotRunning);

    // A new instance without local state restores the counts from the changelog (the
    // restore consumer reads it over SASL_SSL too), then counts five more rounds.
    let state = tempfile::tempdir().unwrap();
    produce_words(&broker.plaintext_bootstrap, &input, KEYS, 5, "b");
    let mut app = KafkaStreams::new(
        count_topology(&input, &output),
        config(&broker, &STREAMS, &app_id, state.path(), extra),
    )
    .unwrap();
    run(&mut app);
    wait_for_counts(&broker, &output, KEYS, 10);
    assert!(app.close(Duration::from_secs(60)));
    assert_eq!(app.state(), State::NotRunning);
}

/// Runs the count application of a fresh application id as `user` with the documented
/// ACLs minus those `drop` rejects (and `extra` ones added), and returns how it failed:
/// `start` refusing, or a stream thread's error once the application is in `Error`; the
/// error must be [`StreamsError::Authorization`], except a refused write of an output
/// record, which the production handler reports. Fails the test when the application
/// neither fails nor stops within [`FAIL_WITHIN`].
fn failure(
    test: &str,
    user: &User,
    drop: impl Fn(&AclBinding) -> bool,
    extra: impl Fn(&str, &str, &str) -> Vec<AclBinding>,
) -> Option<(String, Duration)> {
    let broker = secure::require_secure_kafka(test)?;
    logs();
    let app_id = kafka::unique_name("secure-denied");
    let (input, output) = topics(&broker, 10, 1);
    let mut acls: Vec<AclBinding> =
        acl::streams_application(&user.principal(), &app_id, &[&input], &[&output], true)
            .into_iter()
            .filter(|b| !drop(b))
            .collect();
    acls.extend(extra(&app_id, &input, &output));
    acl::create_acls(&broker.plaintext_bootstrap, &acls, DEFAULT_TIMEOUT).unwrap();
    let state = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let mut app = KafkaStreams::new(
        count_topology(&input, &output),
        config(&broker, user, &app_id, state.path(), &[]),
    )
    .unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(None::<String>));
    let store = seen.clone();
    app.set_uncaught_error_handler(move |e: &StreamsError| {
        let denied = matches!(
            e,
            StreamsError::Authorization { .. } | StreamsError::Production { .. }
        );
        store
            .lock()
            .unwrap()
            .get_or_insert_with(|| format!("{}{e}", if denied { "" } else { "UNTYPED " }));
        streams_core::ThreadFailureResponse::ShutdownClient
    });
    if let Err(e) = app.start() {
        assert!(matches!(e, StreamsError::Authorization { .. }), "{test}: {e:?}");
        return Some((e.to_string(), started.elapsed()));
    }
    let failed = app.wait_for_state(State::Error, FAIL_WITHIN);
    let took = started.elapsed();
    app.close(Duration::from_secs(30));
    assert!(
        failed,
        "{test}: still {:?} after {FAIL_WITHIN:?}: no error reported",
        app.state()
    );
    let error = seen
        .lock()
        .unwrap()
        .clone()
        .expect("the error handler saw the error");
    assert!(!error.starts_with("UNTYPED"), "{test}: {error}");
    Some((error, took))
}

fn none(_: &str, _: &str, _: &str) -> Vec<AclBinding> {
    Vec::new()
}

#[test]
fn a_principal_without_acls_is_refused_naming_the_input_topic() {
    let Some((error, took)) = failure(
        "a_principal_without_acls_is_refused_naming_the_input_topic",
        &NO_ACLS,
        |_| true,
        none,
    ) else {
        return;
    };
    eprintln!("no ACLs ({took:?}): {error}");
    assert!(error.contains("secure-words"), "{error}");
}

#[test]
fn without_read_on_the_input_topic_the_thread_fails_naming_it() {
    let Some((error, took)) = failure(
        "without_read_on_the_input_topic_the_thread_fails_naming_it",
        &STREAMS,
        |b| b.name.starts_with("secure-words"),
        |_, input, _| {
            vec![AclBinding::topic_literal(
                &STREAMS.principal(),
                input,
                acl::Operation::Describe,
            )]
        },
    ) else {
        return;
    };
    eprintln!("no READ on input ({took:?}): {error}");
    assert!(error.contains("secure-words"), "{error}");
}

#[test]
fn without_write_on_the_output_topic_the_thread_fails_naming_it() {
    let Some((error, took)) = failure(
        "without_write_on_the_output_topic_the_thread_fails_naming_it",
        &STREAMS,
        |b| b.name.starts_with("secure-counts"),
        none,
    ) else {
        return;
    };
    eprintln!("no WRITE on output ({took:?}): {error}");
    assert!(error.contains("secure-counts"), "{error}");
}

#[test]
fn without_the_group_acls_the_thread_fails_naming_the_group() {
    let Some((error, took)) = failure(
        "without_the_group_acls_the_thread_fails_naming_the_group",
        &STREAMS,
        |b| b.resource_type == acl::ResourceType::Group,
        none,
    ) else {
        return;
    };
    eprintln!("no group ACLs ({took:?}): {error}");
    assert!(error.contains("secure-denied"), "{error}");
}

#[test]
fn without_the_transactional_id_acls_start_fails_naming_the_transactional_id() {
    let Some((error, took)) = failure(
        "without_the_transactional_id_acls_start_fails_naming_the_transactional_id",
        &STREAMS,
        |b| b.resource_type == acl::ResourceType::TransactionalId,
        none,
    ) else {
        return;
    };
    eprintln!("no transactional id ACLs ({took:?}): {error}");
    assert!(error.contains("secure-denied"), "{error}");
}

#[test]
fn without_create_on_internal_topics_start_fails_naming_the_changelog() {
    let Some((error, took)) = failure(
        "without_create_on_internal_topics_start_fails_naming_the_changelog",
        &STREAMS,
        |b| b.operation == acl::Operation::Create,
        none,
    ) else {
        return;
    };
    eprintln!("no CREATE on internal topics ({took:?}): {error}");
    assert!(error.contains("-counts-changelog"), "{error}");
}

/// At-least-once with PLAIN: the producers are idempotent, and WRITE on the topics is all
/// they need (no IDEMPOTENT_WRITE on the cluster, no transactional id).
#[test]
fn at_least_once_over_sasl_plain_with_the_documented_acls() {
    let Some(broker) = secure::require_secure_kafka("at_least_once_over_sasl_plain_with_the_documented_acls")
    else {
        return;
    };
    logs();
    const KEYS: usize = 50;
    let app_id = kafka::unique_name("secure-alos");
    let (input, output) = topics(&broker, KEYS, 3);
    let acls = acl::streams_application(&STREAMS.principal(), &app_id, &[&input], &[&output], false);
    acl::create_acls(&broker.plaintext_bootstrap, &acls, DEFAULT_TIMEOUT).unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut props: Vec<(String, String)> = vec![
        ("application.id".into(), app_id.clone()),
        ("bootstrap.servers".into(), broker.bootstrap.clone()),
        ("state.dir".into(), state.path().display().to_string()),
        ("commit.interval.ms".into(), "200".into()),
    ];
    props.extend(broker.client_properties(&STREAMS, "PLAIN"));
    let mut app = KafkaStreams::new(
        count_topology(&input, &output),
        StreamsConfig::from_properties(props).unwrap(),
    )
    .unwrap();
    run(&mut app);
    wait_for_counts(&broker, &output, KEYS, 3);
    assert!(app.close(Duration::from_secs(60)));
}

/// `start` with `user`'s name and `password` and the CA file `ca`: how it failed, and when.
fn start_failure(
    broker: &SecureKafka,
    user: &str,
    password: &str,
    mechanism: &str,
    ca: &Path,
) -> (StreamsError, Duration) {
    let input = kafka::unique_name("secure-words");
    kafka::create_topic(&broker.plaintext_bootstrap, &input, 1, &[]).unwrap();
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().display().to_string();
    let ca = ca.display().to_string();
    let config = StreamsConfig::from_properties([
        ("application.id", kafka::unique_name("secure-refused").as_str()),
        ("bootstrap.servers", broker.bootstrap.as_str()),
        ("state.dir", &dir),
        ("security.protocol", "SASL_SSL"),
        ("sasl.mechanism", mechanism),
        ("sasl.username", user),
        ("sasl.password", password),
        ("ssl.ca.location", &ca),
    ])
    .unwrap();
    let mut app = KafkaStreams::new(count_topology(&input, "unused-output"), config).unwrap();
    let started = Instant::now();
    let e = app.start().expect_err("start must fail");
    (e, started.elapsed())
}

#[test]
fn a_wrong_password_is_an_authentication_error_within_seconds() {
    let Some(broker) =
        secure::require_secure_kafka("a_wrong_password_is_an_authentication_error_within_seconds")
    else {
        return;
    };
    logs();
    for mechanism in ["SCRAM-SHA-512", "PLAIN"] {
        let (e, took) = start_failure(
            &broker,
            STREAMS.name,
            "not-the-password-71c3",
            mechanism,
            &broker.ca_location,
        );
        eprintln!("wrong {mechanism} password ({took:?}): {e}");
        assert!(
            matches!(e, StreamsError::Authentication { .. }),
            "{mechanism}: {e:?}"
        );
        let message = e.to_string();
        assert!(
            message.contains(&format!("sasl.mechanism={mechanism} as user `streams`")),
            "{e}"
        );
        assert!(message.contains("Authentication failed"), "{e}");
        assert!(!e.to_string().contains("not-the-password-71c3"), "{e}");
        assert!(took < Duration::from_secs(10), "{mechanism}: took {took:?}");
    }
    let (e, took) = start_failure(
        &broker,
        "nobody",
        "any-password-5e2a",
        "SCRAM-SHA-512",
        &broker.ca_location,
    );
    eprintln!("unknown user ({took:?}): {e}");
    assert!(matches!(e, StreamsError::Authentication { .. }), "{e:?}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

#[test]
fn a_broker_certificate_not_signed_by_the_configured_ca_is_a_tls_error() {
    let Some(broker) =
        secure::require_secure_kafka("a_broker_certificate_not_signed_by_the_configured_ca_is_a_tls_error")
    else {
        return;
    };
    logs();
    let (e, took) = start_failure(
        &broker,
        STREAMS.name,
        STREAMS.password,
        "SCRAM-SHA-512",
        &broker.other_ca_location,
    );
    eprintln!("untrusted broker certificate ({took:?}): {e}");
    assert!(matches!(e, StreamsError::Tls { .. }), "{e:?}");
    assert!(e.to_string().contains("certificate verify failed"), "{e}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
}
