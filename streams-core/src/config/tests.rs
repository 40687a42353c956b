use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::{ProcessingGuarantee, StreamsConfig, file};
use crate::model::error::StreamsError;
use crate::model::handlers::ErrorHandling;

fn config(props: &[(&str, &str)]) -> Result<StreamsConfig, StreamsError> {
    StreamsConfig::from_properties(props.iter().copied())
}

fn with_app(props: &[(&str, &str)]) -> Result<StreamsConfig, StreamsError> {
    let mut all = vec![("application.id", "app")];
    all.extend_from_slice(props);
    config(&all)
}

/// Asserts that `result` is a config error naming `property`; returns its message.
#[track_caller]
fn fails_on(result: Result<StreamsConfig, StreamsError>, property: &str) -> String {
    match result {
        Err(StreamsError::Config { property: p, message }) => {
            assert_eq!(p, property, "wrong property; message: {message}");
            message
        }
        Err(other) => panic!("expected a config error on `{property}`, got {other}"),
        Ok(c) => panic!("expected a config error on `{property}`, got a config:\n{c}"),
    }
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn defaults() {
    let c = with_app(&[]).unwrap();
    assert_eq!(c.application_id(), "app");
    assert_eq!(c.bootstrap_servers(), None);
    assert_eq!(c.num_stream_threads(), 1);
    assert_eq!(c.processing_guarantee(), ProcessingGuarantee::AtLeastOnce);
    assert!(!c.is_exactly_once());
    assert_eq!(c.commit_interval(), Duration::from_millis(30_000));
    assert_eq!(c.state_dir(), std::env::temp_dir().join("streams-rs"));
    assert_eq!(
        c.application_state_dir(),
        std::env::temp_dir().join("streams-rs").join("app")
    );
    assert_eq!(c.cache_max_bytes(), 10_485_760);
    assert_eq!(
        c.cache_max_bytes(),
        streams_state::StoreBuildContext::DEFAULT_CACHE_MAX_BYTES
    );
    assert_eq!(c.deserialization_exception_handler(), ErrorHandling::LogAndFail);
    assert_eq!(c.processing_exception_handler(), ErrorHandling::LogAndFail);
    assert_eq!(c.production_exception_handler(), ErrorHandling::LogAndFail);
    assert_eq!(c.dead_letter_queue_topic(), None);
    assert_eq!(c.metrics_address(), None);
    assert_eq!(c.poll_interval(), Duration::from_millis(100));
    assert_eq!(c.replication_factor(), -1);
    assert_eq!(c.ignored_properties().count(), 0);
    assert!(c.consumer_properties().is_empty());
    assert!(c.producer_properties().is_empty());
    assert!(c.admin_properties().is_empty());
    let policy = c.error_policy();
    assert_eq!(policy.deserialization, ErrorHandling::LogAndFail);
    assert_eq!(policy.dead_letter_topic, None);
}

#[test]
fn every_typed_value_parses() {
    let c = with_app(&[
        ("bootstrap.servers", "broker-1:9092,broker-2:9092"),
        ("num.stream.threads", "4"),
        ("processing.guarantee", "exactly_once_v2"),
        ("commit.interval.ms", "250"),
        ("state.dir", "/var/lib/streams"),
        ("statestore.cache.max.bytes", "0"),
        ("deserialization.exception.handler", "log_and_continue"),
        ("processing.exception.handler", "dead_letter_queue"),
        (
            "production.exception.handler",
            "org.apache.kafka.streams.errors.DefaultProductionExceptionHandler",
        ),
        ("errors.dead.letter.queue.topic.name", "app-dlq"),
        ("metrics.address", "127.0.0.1:9464"),
        ("poll.ms", "0"),
        ("replication.factor", "3"),
    ])
    .unwrap();
    assert_eq!(c.bootstrap_servers(), Some("broker-1:9092,broker-2:9092"));
    assert_eq!(c.num_stream_threads(), 4);
    assert!(c.is_exactly_once());
    assert_eq!(c.commit_interval(), Duration::from_millis(250));
    assert_eq!(c.state_dir(), PathBuf::from("/var/lib/streams"));
    assert_eq!(c.cache_max_bytes(), 0);
    let policy = c.error_policy();
    assert_eq!(policy.deserialization, ErrorHandling::LogAndContinue);
    assert_eq!(policy.processing, ErrorHandling::DeadLetterQueue);
    assert_eq!(policy.production, ErrorHandling::LogAndFail);
    assert_eq!(policy.dead_letter_topic.as_deref(), Some("app-dlq"));
    assert_eq!(
        c.metrics_address(),
        Some("127.0.0.1:9464".parse::<SocketAddr>().unwrap())
    );
    assert_eq!(c.poll_interval(), Duration::ZERO);
    assert_eq!(c.replication_factor(), 3);
    // bootstrap.servers reaches every client; no other streams property does.
    let expected = map(&[("bootstrap.servers", "broker-1:9092,broker-2:9092")]);
    assert_eq!(c.consumer_properties(), expected);
    assert_eq!(c.producer_properties(), expected);
    assert_eq!(c.admin_properties(), expected);
}

#[test]
fn application_id_is_required_and_checked() {
    let m = fails_on(config(&[("num.stream.threads", "2")]), "application.id");
    assert!(m.contains("required"), "{m}");
    fails_on(config(&[("application.id", "")]), "application.id");
    fails_on(config(&[("application.id", "   ")]), "application.id");
    let m = fails_on(config(&[("application.id", "my app")]), "application.id");
    assert!(m.contains("` `"), "{m}");
    fails_on(config(&[("application.id", "app/1")]), "application.id");
    fails_on(config(&[("application.id", "appé")]), "application.id");
    assert_eq!(
        config(&[("application.id", "My_app-1.0")])
            .unwrap()
            .application_id(),
        "My_app-1.0"
    );
}

#[test]
fn num_stream_threads_is_checked() {
    let m = fails_on(with_app(&[("num.stream.threads", "0")]), "num.stream.threads");
    assert!(m.contains("at least 1"), "{m}");
    let m = fails_on(with_app(&[("num.stream.threads", "abc")]), "num.stream.threads");
    assert!(m.contains("`abc` is not an integer"), "{m}");
    fails_on(with_app(&[("num.stream.threads", "-2")]), "num.stream.threads");
    fails_on(with_app(&[("num.stream.threads", "")]), "num.stream.threads");
    fails_on(
        with_app(&[("num.stream.threads", "99999999999999999999999")]),
        "num.stream.threads",
    );
}

#[test]
fn processing_guarantee_is_checked() {
    let m = fails_on(
        with_app(&[("processing.guarantee", "bogus")]),
        "processing.guarantee",
    );
    assert!(m.contains("bogus") && m.contains("exactly_once_v2"), "{m}");
    for retired in ["exactly_once", "exactly_once_beta"] {
        let m = fails_on(
            with_app(&[("processing.guarantee", retired)]),
            "processing.guarantee",
        );
        assert!(m.contains("use `exactly_once_v2`"), "{m}");
    }
    assert_eq!(
        "at_least_once".parse::<ProcessingGuarantee>().unwrap(),
        ProcessingGuarantee::AtLeastOnce
    );
    assert_eq!(ProcessingGuarantee::ExactlyOnceV2.to_string(), "exactly_once_v2");
}

#[test]
fn commit_interval_defaults_with_the_guarantee_unless_set() {
    let eos = [("processing.guarantee", "exactly_once_v2")];
    assert_eq!(
        with_app(&eos).unwrap().commit_interval(),
        Duration::from_millis(100)
    );
    let explicit = [
        ("processing.guarantee", "exactly_once_v2"),
        ("commit.interval.ms", "30000"),
    ];
    assert_eq!(
        with_app(&explicit).unwrap().commit_interval(),
        Duration::from_millis(30_000)
    );
    let alo = [
        ("processing.guarantee", "at_least_once"),
        ("commit.interval.ms", "0"),
    ];
    assert_eq!(with_app(&alo).unwrap().commit_interval(), Duration::ZERO);
    // Through the builder too: an explicit interval survives switching to exactly-once.
    let c = StreamsConfig::builder()
        .application_id("app")
        .commit_interval(Duration::from_secs(5))
        .processing_guarantee(ProcessingGuarantee::ExactlyOnceV2)
        .build()
        .unwrap();
    assert_eq!(c.commit_interval(), Duration::from_secs(5));
    let c = StreamsConfig::builder()
        .application_id("app")
        .processing_guarantee(ProcessingGuarantee::ExactlyOnceV2)
        .build()
        .unwrap();
    assert_eq!(c.commit_interval(), Duration::from_millis(100));
}

#[test]
fn durations_are_non_negative_integers() {
    let m = fails_on(with_app(&[("commit.interval.ms", "-1")]), "commit.interval.ms");
    assert!(m.contains("at least 0"), "{m}");
    fails_on(with_app(&[("commit.interval.ms", "1.5")]), "commit.interval.ms");
    fails_on(with_app(&[("poll.ms", "-5")]), "poll.ms");
    fails_on(with_app(&[("poll.ms", "soon")]), "poll.ms");
}

#[test]
fn cache_size_accepts_the_deprecated_name() {
    let c = with_app(&[("cache.max.bytes.buffering", "1024")]).unwrap();
    assert_eq!(c.cache_max_bytes(), 1024);
    let both = [
        ("cache.max.bytes.buffering", "1024"),
        ("statestore.cache.max.bytes", "2048"),
    ];
    assert_eq!(with_app(&both).unwrap().cache_max_bytes(), 2048);
    fails_on(
        with_app(&[("cache.max.bytes.buffering", "-1")]),
        "cache.max.bytes.buffering",
    );
    fails_on(
        with_app(&[("statestore.cache.max.bytes", "lots")]),
        "statestore.cache.max.bytes",
    );
    // Neither reaches a client.
    assert!(with_app(&both).unwrap().consumer_properties().is_empty());
}

#[test]
fn handlers_are_checked() {
    for key in [
        "deserialization.exception.handler",
        "default.deserialization.exception.handler",
        "processing.exception.handler",
        "production.exception.handler",
        "default.production.exception.handler",
    ] {
        let m = fails_on(with_app(&[(key, "bogus")]), key);
        assert!(m.contains("`bogus`") && m.contains("log_and_continue"), "{m}");
        let m = fails_on(with_app(&[(key, "dead_letter_queue")]), key);
        let dlq = with_app(&[
            (key, "dead_letter_queue"),
            ("errors.dead.letter.queue.topic.name", "dlq"),
        ]);
        assert!(m.contains("errors.dead.letter.queue.topic.name"), "{m}");
        assert!(dlq.is_ok(), "{key}: {dlq:?}");
        if key.contains("production") {
            // Under exactly-once too: the refused record's transaction is aborted and the
            // record dead-lettered when its input is processed again.
            let eos = with_app(&[
                (key, "dead_letter_queue"),
                ("errors.dead.letter.queue.topic.name", "dlq"),
                ("processing.guarantee", "exactly_once_v2"),
            ]);
            assert!(eos.is_ok(), "{key}: {eos:?}");
        }
    }
    // Kafka Streams' class names, with or without their package.
    let c = with_app(&[
        (
            "default.deserialization.exception.handler",
            "org.apache.kafka.streams.errors.LogAndContinueExceptionHandler",
        ),
        (
            "processing.exception.handler",
            "LogAndContinueProcessingExceptionHandler",
        ),
        ("production.exception.handler", "LogAndFailExceptionHandler"),
    ])
    .unwrap();
    assert_eq!(
        c.deserialization_exception_handler(),
        ErrorHandling::LogAndContinue
    );
    assert_eq!(c.processing_exception_handler(), ErrorHandling::LogAndContinue);
    assert_eq!(c.production_exception_handler(), ErrorHandling::LogAndFail);
    // The new name wins over the deprecated one.
    let c = with_app(&[
        ("default.deserialization.exception.handler", "log_and_continue"),
        ("deserialization.exception.handler", "log_and_fail"),
    ])
    .unwrap();
    assert_eq!(c.deserialization_exception_handler(), ErrorHandling::LogAndFail);
    // A dead-letter topic without a dead-letter handler is allowed.
    assert!(with_app(&[("errors.dead.letter.queue.topic.name", "dlq")]).is_ok());
    fails_on(
        with_app(&[("errors.dead.letter.queue.topic.name", "bad topic")]),
        "errors.dead.letter.queue.topic.name",
    );
    fails_on(
        with_app(&[("errors.dead.letter.queue.topic.name", "")]),
        "errors.dead.letter.queue.topic.name",
    );
}

#[test]
fn metrics_address_must_be_a_socket_address() {
    for bad in ["localhost", "127.0.0.1", "127.0.0.1:99999", "9464", ""] {
        let m = fails_on(with_app(&[("metrics.address", bad)]), "metrics.address");
        assert!(m.contains("socket address"), "{m}");
    }
    let c = with_app(&[("metrics.address", "[::1]:9464")]).unwrap();
    assert_eq!(c.metrics_address().unwrap().port(), 9464);
}

#[test]
fn replication_factor_is_minus_one_or_positive() {
    assert_eq!(
        with_app(&[("replication.factor", "-1")])
            .unwrap()
            .replication_factor(),
        -1
    );
    assert_eq!(
        with_app(&[("replication.factor", "1")])
            .unwrap()
            .replication_factor(),
        1
    );
    for bad in ["0", "-2", "x", "3000000000"] {
        fails_on(with_app(&[("replication.factor", bad)]), "replication.factor");
    }
}

#[test]
fn other_empty_values_fail() {
    fails_on(with_app(&[("bootstrap.servers", "")]), "bootstrap.servers");
    fails_on(with_app(&[("state.dir", " ")]), "state.dir");
    let empty = StreamsConfig::builder()
        .application_id("app")
        .state_dir("")
        .build();
    fails_on(empty, "state.dir");
}

#[test]
fn unknown_dotless_keys_are_typos() {
    let m = fails_on(with_app(&[("applicationid", "x")]), "applicationid");
    assert!(m.contains("did you mean `application.id`"), "{m}");
    let m = fails_on(with_app(&[("numstreamthreads", "2")]), "numstreamthreads");
    assert!(m.contains("num.stream.threads"), "{m}");
    let m = fails_on(with_app(&[("frobnicate", "1")]), "frobnicate");
    assert!(!m.contains("did you mean"), "{m}");
    // Near misses of dotted streams properties are typos too, not client properties.
    let m = fails_on(with_app(&[("num.stream.thread", "2")]), "num.stream.thread");
    assert!(m.contains("did you mean `num.stream.threads`"), "{m}");
    fails_on(with_app(&[("comit.interval.ms", "2")]), "comit.interval.ms");
    // The dotless client properties pass.
    let c = with_app(&[("acks", "all"), ("debug", "broker")]).unwrap();
    assert_eq!(
        c.producer_properties(),
        map(&[("acks", "all"), ("debug", "broker")])
    );
    fails_on(with_app(&[("consumer.", "x")]), "consumer.");
    fails_on(config(&[("", "x"), ("application.id", "app")]), "");
}

#[test]
fn unsupported_streams_properties_are_ignored_not_passed() {
    let c = with_app(&[
        ("max.warmup.replicas", "1"),
        ("default.key.serde", "Serdes$StringSerde"),
    ])
    .unwrap();
    assert_eq!(
        c.ignored_properties().collect::<Vec<_>>(),
        ["default.key.serde", "max.warmup.replicas"]
    );
    assert!(c.consumer_properties().is_empty());
    assert!(c.producer_properties().is_empty());
    assert!(c.admin_properties().is_empty());
}

#[test]
fn client_properties_route_by_prefix_and_prefixed_wins() {
    let c = with_app(&[
        ("bootstrap.servers", "b:9092"),
        ("session.timeout.ms", "6000"),
        ("max.poll.interval.ms", "300000"),
        ("client.rack", "rack-a"),
        ("consumer.session.timeout.ms", "10000"),
        ("consumer.fetch.wait.max.ms", "50"),
        ("main.consumer.fetch.wait.max.ms", "70"),
        ("restore.consumer.fetch.max.bytes", "1000"),
        ("producer.linger.ms", "5"),
        ("producer.client.rack", "rack-b"),
        ("admin.request.timeout.ms", "1000"),
        ("admin.bootstrap.servers", "admin:9092"),
        ("num.stream.threads", "3"),
        ("processing.guarantee", "exactly_once_v2"),
    ])
    .unwrap();
    assert_eq!(
        c.consumer_properties(),
        map(&[
            ("bootstrap.servers", "b:9092"),
            ("client.rack", "rack-a"),
            ("fetch.wait.max.ms", "50"),
            ("max.poll.interval.ms", "300000"),
            ("session.timeout.ms", "10000"),
        ])
    );
    assert_eq!(c.main_consumer_properties()["fetch.wait.max.ms"], "70");
    assert_eq!(c.main_consumer_properties()["session.timeout.ms"], "10000");
    assert_eq!(c.restore_consumer_properties()["fetch.wait.max.ms"], "50");
    assert_eq!(c.restore_consumer_properties()["fetch.max.bytes"], "1000");
    assert!(!c.main_consumer_properties().contains_key("fetch.max.bytes"));
    assert_eq!(c.global_consumer_properties(), c.consumer_properties());
    assert_eq!(
        c.producer_properties(),
        map(&[
            ("bootstrap.servers", "b:9092"),
            ("client.rack", "rack-b"),
            ("linger.ms", "5"),
            ("max.poll.interval.ms", "300000"),
            ("session.timeout.ms", "6000"),
        ])
    );
    assert_eq!(
        c.admin_properties(),
        map(&[
            ("bootstrap.servers", "admin:9092"),
            ("client.rack", "rack-a"),
            ("max.poll.interval.ms", "300000"),
            ("request.timeout.ms", "1000"),
            ("session.timeout.ms", "6000"),
        ])
    );
    // No streams property leaks into any client.
    for props in [
        c.consumer_properties(),
        c.producer_properties(),
        c.admin_properties(),
    ] {
        for key in super::keys::STREAMS.iter().filter(|&&k| k != "bootstrap.servers") {
            assert!(!props.contains_key(*key), "{key} leaked");
        }
    }
}

#[test]
fn builder_sets_typed_values_and_client_properties() {
    let c = StreamsConfig::builder()
        .application_id("orders")
        .bootstrap_servers("localhost:9092")
        .num_stream_threads(2)
        .state_dir("/data/streams")
        .cache_max_bytes(1 << 20)
        .deserialization_exception_handler(ErrorHandling::LogAndContinue)
        .production_exception_handler(ErrorHandling::LogAndContinue)
        .processing_exception_handler(ErrorHandling::DeadLetterQueue)
        .dead_letter_queue_topic("orders-dlq")
        .metrics_address("0.0.0.0:9464".parse().unwrap())
        .poll_interval(Duration::from_millis(20))
        .replication_factor(3)
        .set("session.timeout.ms", "6000")
        .consumer_property("fetch.wait.max.ms", "10")
        .producer_property("linger.ms", "1")
        .admin_property("request.timeout.ms", "500")
        .build()
        .unwrap();
    assert_eq!(c.num_stream_threads(), 2);
    assert_eq!(c.state_dir(), PathBuf::from("/data/streams"));
    assert_eq!(c.cache_max_bytes(), 1 << 20);
    assert_eq!(c.production_exception_handler(), ErrorHandling::LogAndContinue);
    assert_eq!(c.processing_exception_handler(), ErrorHandling::DeadLetterQueue);
    assert_eq!(c.poll_interval(), Duration::from_millis(20));
    assert_eq!(c.consumer_properties()["fetch.wait.max.ms"], "10");
    assert_eq!(c.consumer_properties()["session.timeout.ms"], "6000");
    assert_eq!(c.producer_properties()["linger.ms"], "1");
    assert_eq!(c.admin_properties()["request.timeout.ms"], "500");
    assert!(!c.consumer_properties().contains_key("linger.ms"));

    // to_builder round-trips and allows changes.
    assert_eq!(c.to_builder().build().unwrap(), c);
    let more = c.to_builder().num_stream_threads(8).build().unwrap();
    assert_eq!(more.num_stream_threads(), 8);
    assert_eq!(more.state_dir(), c.state_dir());

    // The builder's policy setter.
    let policy = c.error_policy();
    let again = StreamsConfig::builder()
        .application_id("x")
        .error_policy(&policy)
        .build()
        .unwrap();
    assert_eq!(again.error_policy().processing, ErrorHandling::DeadLetterQueue);
    assert_eq!(again.error_policy().production, ErrorHandling::LogAndContinue);
    assert_eq!(again.dead_letter_queue_topic(), Some("orders-dlq"));

    fails_on(StreamsConfig::builder().build(), "application.id");
    fails_on(
        StreamsConfig::builder()
            .application_id("a")
            .num_stream_threads(0)
            .build(),
        "num.stream.threads",
    );
    fails_on(
        StreamsConfig::builder()
            .application_id("a")
            .set("aplication.id", "b")
            .build(),
        "aplication.id",
    );
}

#[test]
fn later_pairs_override_earlier_ones_and_values_are_trimmed() {
    let c = config(&[
        (" application.id ", " a "),
        ("num.stream.threads", "1"),
        ("num.stream.threads", " 3 "),
    ])
    .unwrap();
    assert_eq!(c.application_id(), "a");
    assert_eq!(c.num_stream_threads(), 3);
}

const FILE: &str = r"# A streams application
! also a comment
   # an indented comment

application.id = word-count
bootstrap.servers:localhost:9092
num.stream.threads   4
processing.guarantee=exactly_once_v2
state.dir = /tmp/wc   
consumer.fetch.wait.max.ms: 100
producer.client.id = wc\
                     -producer
sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required \
    username=user password=secret;
my.escaped\ key\=x = a\tb\u00e9
";

#[test]
fn properties_file_syntax() {
    let entries = file::parse(FILE, "line ").unwrap();
    let pairs: Vec<(&str, &str)> = entries
        .iter()
        .map(|e| (e.key.as_str(), e.value.as_str()))
        .collect();
    assert_eq!(
        pairs,
        [
            ("application.id", "word-count"),
            ("bootstrap.servers", "localhost:9092"),
            ("num.stream.threads", "4"),
            ("processing.guarantee", "exactly_once_v2"),
            // As in Java, a value keeps its trailing whitespace; `from_properties` trims it.
            ("state.dir", "/tmp/wc   "),
            ("consumer.fetch.wait.max.ms", "100"),
            ("producer.client.id", "wc-producer"),
            (
                "sasl.jaas.config",
                "org.apache.kafka.common.security.plain.PlainLoginModule required username=user password=secret;"
            ),
            ("my.escaped key=x", "a\tb\u{e9}"),
        ]
    );
    assert_eq!(entries[0].line, 5);
    assert_eq!(entries[7].line, 13);

    let more = file::parse(
        "a.b=\\ x\\ \nc.d = \\uD83D\\uDE00\r\nempty.value\ntrailing=x\\",
        "line ",
    )
    .unwrap();
    let pairs: Vec<(&str, &str)> = more.iter().map(|e| (e.key.as_str(), e.value.as_str())).collect();
    assert_eq!(
        pairs,
        [
            ("a.b", " x "),
            ("c.d", "😀"),
            ("empty.value", ""),
            ("trailing", "x")
        ]
    );

    for bad in ["a.b=\\u12", "a.b=\\uZZZZ", "a.b=\\uD83Dx", "a.b=\\uDE00"] {
        let err = file::parse(bad, "line ").unwrap_err();
        assert!(
            matches!(&err, StreamsError::Config { property, message }
            if property == "a.b" && message.starts_with("line 1:")),
            "{bad}: {err}"
        );
    }
    let err = file::parse("# ok\n\n  x.y : \\u00e9\\\n  \\uD83D", "app.properties:").unwrap_err();
    assert!(
        matches!(&err, StreamsError::Config { property, message }
        if property == "x.y" && message.starts_with("app.properties:3:")),
        "{err}"
    );
}

#[test]
fn properties_continuations_and_unicode_escapes() {
    let text = "# a comment is not unescaped: C:\\users\\me \\uZZZZ \\\n\
                a.b = one, \\\n\
                \t  two\\\n\
                , three\r\n\
                ! a comment line ending in a backslash does not continue \\\r\
                c\\u00e9.d\\u0020e : caf\\u00E9 \\u2603 \\uD83D\\uDE00\\\\u0041\n\
                f.g=h\\\n\
                # not a comment: this line continues f.g\n\
                last=x\\";
    let entries = file::parse(text, "line ").unwrap();
    let got: Vec<(&str, &str, usize)> = entries
        .iter()
        .map(|e| (e.key.as_str(), e.value.as_str(), e.line))
        .collect();
    assert_eq!(
        got,
        [
            ("a.b", "one, two, three", 2),
            ("c\u{e9}.d e", "caf\u{e9} \u{2603} \u{1F600}\\u0041", 6),
            ("f.g", "h# not a comment: this line continues f.g", 7),
            ("last", "x", 9),
        ]
    );
}

#[test]
fn from_properties_str_and_file() {
    let c = StreamsConfig::from_properties_str(FILE).unwrap();
    assert_eq!(c.application_id(), "word-count");
    assert_eq!(c.bootstrap_servers(), Some("localhost:9092"));
    assert_eq!(c.num_stream_threads(), 4);
    assert!(c.is_exactly_once());
    assert_eq!(c.commit_interval(), Duration::from_millis(100));
    assert_eq!(c.state_dir(), PathBuf::from("/tmp/wc"));
    assert_eq!(c.consumer_properties()["fetch.wait.max.ms"], "100");
    assert_eq!(c.producer_properties()["client.id"], "wc-producer");
    // The Java JAAS configuration reaches the clients as librdkafka's properties.
    assert_eq!(c.admin_properties()["sasl.username"], "user");
    assert_eq!(c.admin_properties()["sasl.password"], "secret");
    assert!(!c.admin_properties().contains_key("sasl.jaas.config"));

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.properties");
    std::fs::write(&path, FILE).unwrap();
    assert_eq!(StreamsConfig::from_file(&path).unwrap(), c);

    std::fs::write(&path, "application.id=a\n\n# threads\nnum.stream.threads=0\n").unwrap();
    let m = fails_on(StreamsConfig::from_file(&path), "num.stream.threads");
    assert!(m.ends_with(&format!("(at {}:4)", path.display())), "{m}");

    let missing = dir.path().join("missing.properties");
    let m = fails_on(StreamsConfig::from_file(&missing), &missing.display().to_string());
    assert!(m.contains("cannot read"), "{m}");

    let m = fails_on(
        StreamsConfig::from_properties_str("application.id=a\napplicationid=b"),
        "applicationid",
    );
    assert!(m.ends_with("(at line 2)"), "{m}");
}

#[test]
fn display_lists_effective_values_and_masks_secrets() {
    let c = with_app(&[
        ("processing.guarantee", "exactly_once_v2"),
        ("sasl.password", "hunter2"),
        ("producer.ssl.key.password", "hunter3"),
        ("consumer.fetch.wait.max.ms", "5"),
        ("max.warmup.replicas", "1"),
        ("num.standby.replicas", "1"),
    ])
    .unwrap();
    let shown = c.to_string();
    for line in [
        "application.id = app",
        "bootstrap.servers = <unset>",
        "num.stream.threads = 1",
        "processing.guarantee = exactly_once_v2",
        "commit.interval.ms = 100",
        "statestore.cache.max.bytes = 10485760",
        "deserialization.exception.handler = log_and_fail",
        "poll.ms = 100",
        "replication.factor = -1",
        "consumer.fetch.wait.max.ms = 5",
        "sasl.password = ********",
        "producer.ssl.key.password = ********",
        "num.standby.replicas = 1",
        "# ignored (not supported): max.warmup.replicas",
    ] {
        assert!(shown.lines().any(|l| l == line), "missing `{line}` in\n{shown}");
    }
    let debug = format!("{c:?}");
    assert!(
        debug.contains("commit.interval.ms") && debug.contains("fetch.wait.max.ms"),
        "{debug}"
    );
    for shown in [shown, debug, format!("{:?}", c.to_builder())] {
        assert!(!shown.contains("hunter"), "{shown}");
    }
}

/// `docs/configuration.md` documents every streams property, and its example file loads.
#[test]
fn the_reference_matches_the_code() {
    let doc = include_str!("../../../docs/configuration.md");
    let table = doc
        .split("## Streams properties")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .unwrap();
    let documented: Vec<&str> = table
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .collect();
    assert_eq!(documented.len(), 20, "{documented:?}");
    for key in super::keys::STREAMS {
        // The deprecated names are mentioned in their successors' rows.
        assert!(
            documented.contains(key) || table.contains(&format!("`{key}`")),
            "{key} is not documented"
        );
    }
    for name in &documented {
        assert!(
            super::keys::STREAMS.contains(name),
            "{name} is documented but unknown"
        );
    }
    let examples: Vec<&str> = doc
        .split("```properties\n")
        .skip(1)
        .filter_map(|s| s.split("```").next())
        .collect();
    let example = |id: &str| {
        let text = examples
            .iter()
            .find(|e| e.contains(&format!("application.id = {id}\n")))
            .unwrap_or_else(|| panic!("no example of {id}"));
        StreamsConfig::from_properties_str(text).unwrap()
    };
    // The SASL_SSL example of the security section.
    let c = example("orders-enricher");
    for props in [
        c.main_consumer_properties(),
        c.restore_consumer_properties(),
        c.global_consumer_properties(),
        c.producer_properties(),
        c.admin_properties(),
    ] {
        assert_eq!(props["security.protocol"], "SASL_SSL");
        assert_eq!(props["sasl.mechanism"], "SCRAM-SHA-512");
        assert_eq!(props["ssl.ca.location"], "/etc/kafka/tls/ca.pem");
    }
    assert!(c.to_string().contains("sasl.password = ********"), "{c}");

    let c = example("word-count");
    assert_eq!(c.application_id(), "word-count");
    assert!(c.is_exactly_once());
    assert_eq!(c.commit_interval(), Duration::from_millis(100));
    assert_eq!(c.consumer_properties()["session.timeout.ms"], "10000");
    assert_eq!(c.producer_properties()["sasl.mechanism"], "PLAIN");
    assert!(!c.producer_properties().contains_key("session.timeout.ms"));
}

#[test]
fn max_poll_records_is_the_loops_not_a_client_property() {
    let c = with_app(&[]).unwrap();
    assert_eq!(c.max_poll_records(), StreamsConfig::DEFAULT_MAX_POLL_RECORDS);
    let c = with_app(&[("max.poll.records", "200")]).unwrap();
    assert_eq!(c.max_poll_records(), 200);
    // The consumer's and then the main consumer's win, and no client sees the name.
    let c = with_app(&[
        ("max.poll.records", "200"),
        ("consumer.max.poll.records", "300"),
        ("main.consumer.max.poll.records", "400"),
    ])
    .unwrap();
    assert_eq!(c.max_poll_records(), 400);
    for props in [
        c.consumer_properties(),
        c.main_consumer_properties(),
        c.restore_consumer_properties(),
    ] {
        assert!(!props.contains_key("max.poll.records"), "{props:?}");
    }
    let c = with_app(&[("consumer.max.poll.records", "300")]).unwrap();
    assert_eq!(c.max_poll_records(), 300);
    let e = with_app(&[("consumer.max.poll.records", "0")]).unwrap_err();
    assert!(e.to_string().contains("consumer.max.poll.records"), "{e}");
    let e = with_app(&[("restore.consumer.max.poll.records", "10")]).unwrap_err();
    assert!(e.to_string().contains("restore.consumer.max.poll.records"), "{e}");
}

#[test]
fn an_assignment_strategy_other_than_range_is_refused() {
    assert!(with_app(&[("consumer.partition.assignment.strategy", "range")]).is_ok());
    for key in [
        "partition.assignment.strategy",
        "consumer.partition.assignment.strategy",
        "main.consumer.partition.assignment.strategy",
    ] {
        let e = with_app(&[(key, "cooperative-sticky")]).unwrap_err();
        assert!(
            e.to_string().contains(key) && e.to_string().contains("range"),
            "{e}"
        );
    }
}

#[test]
fn the_consumer_protocol_takes_range_and_no_client_side_timeouts() {
    assert!(with_app(&[("main.consumer.group.protocol", "consumer")]).is_ok());
    assert!(
        with_app(&[
            ("consumer.group.protocol", "consumer"),
            ("consumer.group.remote.assignor", "range")
        ])
        .is_ok()
    );
    let e = with_app(&[("consumer.group.remote.assignor", "uniform")]).unwrap_err();
    assert!(e.to_string().contains("consumer.group.remote.assignor"), "{e}");
    for key in ["consumer.session.timeout.ms", "heartbeat.interval.ms"] {
        let e = with_app(&[("main.consumer.group.protocol", "consumer"), (key, "6000")]).unwrap_err();
        assert!(
            e.to_string().contains(key) && e.to_string().contains("broker"),
            "{e}"
        );
    }
    // The classic protocol takes them.
    assert!(with_app(&[("consumer.session.timeout.ms", "6000")]).is_ok());
}

#[test]
fn rocksdb_memory_is_configured_and_checked() {
    let c = with_app(&[]).unwrap();
    assert_eq!(c.rocksdb_block_cache_bytes(), 64 << 20);
    assert_eq!(c.rocksdb_write_buffer_bytes(), 32 << 20);
    let c = with_app(&[
        ("rocksdb.block.cache.bytes", "268435456"),
        ("rocksdb.write.buffer.bytes", "67108864"),
    ])
    .unwrap();
    assert_eq!(c.rocksdb_block_cache_bytes(), 256 << 20);
    assert_eq!(c.rocksdb_write_buffer_bytes(), 64 << 20);
    let resources = c.rocksdb_resources();
    assert_eq!(resources.block_cache_bytes(), 256 << 20);
    assert_eq!(resources.write_buffer_bytes(), 64 << 20);
    let shown = c.to_string();
    assert!(shown.contains("rocksdb.block.cache.bytes = 268435456"), "{shown}");
    assert!(shown.contains("rocksdb.write.buffer.bytes = 67108864"), "{shown}");
    // Never a client property.
    assert!(c.consumer_properties().is_empty() && c.producer_properties().is_empty());

    let b = StreamsConfig::builder()
        .application_id("app")
        .rocksdb_block_cache_bytes(1 << 20)
        .rocksdb_write_buffer_bytes(1 << 19)
        .build()
        .unwrap();
    assert_eq!(
        (b.rocksdb_block_cache_bytes(), b.rocksdb_write_buffer_bytes()),
        (1 << 20, 1 << 19)
    );

    for bad in ["0", "-1", "lots", ""] {
        fails_on(
            with_app(&[("rocksdb.block.cache.bytes", bad)]),
            "rocksdb.block.cache.bytes",
        );
        fails_on(
            with_app(&[("rocksdb.write.buffer.bytes", bad)]),
            "rocksdb.write.buffer.bytes",
        );
    }
    // The memtables are charged to the block cache: they cannot outgrow it.
    let m = fails_on(
        with_app(&[("rocksdb.write.buffer.bytes", "134217728")]),
        "rocksdb.write.buffer.bytes",
    );
    assert!(m.contains("rocksdb.block.cache.bytes"), "{m}");
    fails_on(
        with_app(&[("rocksdb.block.cache.bytes", "1048576")]),
        "rocksdb.block.cache.bytes",
    );
}

#[test]
fn unknown_rocksdb_properties_are_typos() {
    let m = fails_on(
        with_app(&[("rocksdb.block.cache.size", "1")]),
        "rocksdb.block.cache.size",
    );
    assert!(m.contains("did you mean `rocksdb.block.cache.bytes`"), "{m}");
    let m = fails_on(
        with_app(&[("rocksdb.write_buffer_bytes", "1")]),
        "rocksdb.write_buffer_bytes",
    );
    assert!(m.contains("did you mean `rocksdb.write.buffer.bytes`"), "{m}");
    let m = fails_on(
        with_app(&[("rocksdb.max.open.files", "1")]),
        "rocksdb.max.open.files",
    );
    assert!(!m.contains("did you mean"), "{m}");
    assert!(m.contains("rocksdb.block.cache.bytes"), "{m}");
    // Near misses outside the prefix are caught as before.
    let m = fails_on(
        with_app(&[("rockdb.block.cache.bytes", "1")]),
        "rockdb.block.cache.bytes",
    );
    assert!(m.contains("did you mean `rocksdb.block.cache.bytes`"), "{m}");
    // The unsupported setter is still ignored, not an error.
    let c = with_app(&[("rocksdb.config.setter", "com.example.Setter")]).unwrap();
    assert_eq!(
        c.ignored_properties().collect::<Vec<_>>(),
        ["rocksdb.config.setter"]
    );
}

#[test]
fn application_server_is_an_endpoint_host_colon_port() {
    let c = with_app(&[("application.server", "orders-1.internal:8080")]).unwrap();
    assert_eq!(c.application_server(), Some("orders-1.internal:8080"));
    assert_eq!(with_app(&[]).unwrap().application_server(), None);
    for bad in ["orders-1", ":8080", "host:0", "host:http", "a b:1"] {
        let m = fails_on(with_app(&[("application.server", bad)]), "application.server");
        assert!(m.contains("host:port"), "{bad}: {m}");
    }
}

#[test]
fn group_protocol_is_one_of_three_and_standbys_need_streams() {
    let c = with_app(&[("group.protocol", "streams")]).unwrap();
    assert!(c.streams_protocol());
    // librdkafka has no such protocol: no client is given it.
    assert!(!c.main_consumer_properties().contains_key("group.protocol"));
    assert!(!c.producer_properties().contains_key("group.protocol"));
    assert!(
        !with_app(&[("group.protocol", "consumer")])
            .unwrap()
            .streams_protocol()
    );
    assert!(with_app(&[("main.consumer.group.protocol", "CLASSIC")]).is_ok());
    fails_on(with_app(&[("group.protocol", "stream")]), "group.protocol");
    fails_on(
        with_app(&[("consumer.group.protocol", "kip848")]),
        "consumer.group.protocol",
    );
    // Standbys select the streams protocol unless another one is set.
    let c = with_app(&[("num.standby.replicas", "1")]).unwrap();
    assert_eq!(c.num_standby_replicas(), 1);
    assert!(with_app(&[("num.standby.replicas", "1"), ("group.protocol", "streams")]).is_ok());
    fails_on(
        with_app(&[("num.standby.replicas", "1"), ("group.protocol", "consumer")]),
        "num.standby.replicas",
    );
    fails_on(
        with_app(&[("num.standby.replicas", "-1")]),
        "num.standby.replicas",
    );
    // The broker assigns tasks under the streams protocol: no client-side assignor.
    fails_on(
        with_app(&[
            ("group.protocol", "streams"),
            ("partition.assignment.strategy", "range"),
        ]),
        "partition.assignment.strategy",
    );
    // The session timeout becomes the group's setting.
    assert!(with_app(&[("group.protocol", "streams"), ("session.timeout.ms", "6000")]).is_ok());
}
