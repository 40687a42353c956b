//! Which properties reach which client: routing by prefix, unknown and unsupported
//! streams properties that reach none, and `max.poll.records`, which is the loop's.

use super::{config, fails_on, map, with_app};
use crate::config::StreamsConfig;

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
        for key in crate::config::keys::STREAMS
            .iter()
            .filter(|&&k| k != "bootstrap.servers")
        {
            assert!(!props.contains_key(*key), "{key} leaked");
        }
    }
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
