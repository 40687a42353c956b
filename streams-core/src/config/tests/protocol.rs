//! The group protocols, and the partition assignment each of them allows.

use super::{fails_on, with_app};

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
