//! The streams group client over the test broker's SASL_SSL listener (TLS with the broker's
//! own CA; SCRAM-SHA-512, PLAIN and OAUTHBEARER): members join, split the tasks, hold
//! standbys and fail over as they do on PLAINTEXT; a wrong password, a refused token, an
//! untrusted certificate and a mechanism the listener does not enable are typed errors that
//! name what is wrong and no secret.
//! Skipped without the secure listener unless `STREAMS_REQUIRE_KAFKA=1`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use streams_test_utils::kafka;
use streams_test_utils::kafka::secure::{self, ADMIN, STREAMS, SecureKafka, User};

use super::kafka_tests::{Player, SETTLE, settings, tasks, until};
use super::security::Security;
use super::wire::{Conn, KnownBrokers};
use crate::model::error::StreamsError;
use crate::runtime::streams_group::MemberSettings;

/// The secure broker, a fresh group and its 4-partition source topic.
fn fresh(test: &str) -> Option<(SecureKafka, String, String)> {
    let broker = secure::require_secure_kafka(test)?;
    let group = kafka::unique_name(test);
    let topic = format!("{group}-in");
    kafka::create_topic(&broker.plaintext_bootstrap, &topic, 4, &[]).expect("create the source topic");
    kafka::wait_for_topic(&broker.plaintext_bootstrap, &topic, 4, Duration::from_secs(30))
        .expect("topic visible");
    Some((broker, group, topic))
}

/// A member's settings for the secure listener, as `user` with `mechanism`, with the
/// client properties `props` changed by `change`.
fn secure_settings(
    broker: &SecureKafka,
    (group, topic, process): (&str, &str, &str),
    user: &User,
    mechanism: &str,
    change: impl FnOnce(&mut BTreeMap<String, String>),
) -> Result<MemberSettings, StreamsError> {
    let mut props: BTreeMap<String, String> = broker.client_properties(user, mechanism).into_iter().collect();
    change(&mut props);
    let mut s = settings(&broker.bootstrap, group, topic, process, 1);
    s.known = Arc::new(KnownBrokers::new(Security::from_props(&props)?));
    Ok(s)
}

/// The first member of a group, joined with [`secure_settings`], once it holds every task.
fn join_alone(
    broker: &SecureKafka,
    member: (&str, &str, &str),
    user: &User,
    mechanism: &str,
    change: impl FnOnce(&mut BTreeMap<String, String>),
) -> Player {
    let mut a = Player::join(secure_settings(broker, member, user, mechanism, change).unwrap());
    until(&mut [&mut a], SETTLE, |p| p[0].owns.active == tasks(0..4));
    a
}

#[test]
fn members_split_hold_standbys_and_fail_over_over_sasl_ssl() {
    let Some((broker, group, topic)) = fresh("sg_secure_members") else {
        return;
    };
    let member = (&*group, &*topic, "process-a");
    let mut a = join_alone(&broker, member, &ADMIN, "SCRAM-SHA-512", |_| {});
    let b_settings = secure_settings(&broker, (&group, &topic, "process-b"), &ADMIN, "PLAIN", |_| {});
    let mut b = Player::join(b_settings.unwrap());
    let split = until(&mut [&mut a, &mut b], SETTLE, |p| {
        let (a, b) = (&p[0].owns, &p[1].owns);
        a.active.len() == 2 && b.active.len() == 2 && a.standby == b.active && b.standby == a.active
    });
    eprintln!("over SASL_SSL: split 2/2 with standbys in {split:?}");

    // B crashes; A takes B's tasks, whose standbys it holds, after the session timeout.
    b.member.crash();
    let failover = until(&mut [&mut a], SETTLE, |p| p[0].owns.active == tasks(0..4));
    eprintln!("over SASL_SSL: failover after a crash in {failover:?}");
    assert_eq!(a.lost, 0);
    a.member.leave(Duration::from_secs(10));
}

/// Client properties for OAUTHBEARER with an unsecured JWT made from `config`.
fn oauth(config: &str) -> impl FnOnce(&mut BTreeMap<String, String>) + '_ {
    move |p| {
        p.remove("sasl.username");
        p.remove("sasl.password");
        p.insert("enable.sasl.oauthbearer.unsecure.jwt".into(), "true".into());
        p.insert("sasl.oauthbearer.config".into(), config.into());
    }
}

#[test]
fn a_member_authenticated_with_an_unsecured_jwt_joins_and_takes_every_task() {
    let Some((broker, group, topic)) = fresh("sg_secure_oauth") else {
        return;
    };
    let member = (&*group, &*topic, "process-a");
    let jwt = oauth("principal=admin scope=streams extension_traceId=t1");
    let a = join_alone(&broker, member, &ADMIN, "OAUTHBEARER", jwt);
    a.member.leave(Duration::from_secs(10));

    // A token the validator refuses (its principal is not in the `sub` claim): a typed
    // error naming the principal and the broker's reason.
    let e = join_error(secure_settings(
        &broker,
        (&group, &topic, "process-b"),
        &ADMIN,
        "OAUTHBEARER",
        oauth("principal=admin principalClaimName=user"),
    ));
    let message = authentication_message(&e);
    assert!(
        message.contains("sasl.mechanism=OAUTHBEARER as user `admin`") && message.contains("refused"),
        "{message}"
    );
}

/// The message of `e`, an authentication error.
fn authentication_message(e: &StreamsError) -> &str {
    match e {
        StreamsError::Authentication { message } => message,
        _ => panic!("expected an authentication error, got {e:?}"),
    }
}

/// The error `StreamsMember::join` gives with `settings`.
fn join_error(settings: Result<MemberSettings, StreamsError>) -> StreamsError {
    match settings.and_then(Player::try_join) {
        Ok(_) => panic!("joined"),
        Err(e) => e,
    }
}

/// The secure broker, and the error the first member of a fresh group for `test` gets
/// joining as `user` with `mechanism`, its properties changed by `change`; `None` without
/// the secure listener.
fn refused(
    test: &str,
    user: &User,
    mechanism: &str,
    change: impl FnOnce(&SecureKafka, &mut BTreeMap<String, String>),
) -> Option<(SecureKafka, StreamsError)> {
    let (broker, group, topic) = fresh(test)?;
    let member = (&*group, &*topic, "process-a");
    let e = join_error(secure_settings(&broker, member, user, mechanism, |p| {
        change(&broker, p)
    }));
    Some((broker, e))
}

#[test]
fn a_wrong_password_is_an_authentication_error_naming_user_and_mechanism() {
    let Some((broker, e)) = refused("sg_secure_wrong_password", &STREAMS, "SCRAM-SHA-512", |_, p| {
        p.insert("sasl.password".into(), "wrong-pw-51e0".into());
    }) else {
        return;
    };
    let message = authentication_message(&e);
    assert!(
        message.contains("sasl.mechanism=SCRAM-SHA-512 as user `streams`")
            && message.contains(&broker.bootstrap),
        "{message}"
    );
    assert!(!format!("{e:?} {e}").contains("wrong-pw-51e0"), "{e:?}");
}

#[test]
fn a_mechanism_the_listener_does_not_enable_is_named_with_the_ones_it_does() {
    let Some((_broker, e)) = refused("sg_secure_mechanism", &STREAMS, "SCRAM-SHA-256", |_, _| {}) else {
        return;
    };
    let message = authentication_message(&e);
    assert!(
        message.contains("SCRAM-SHA-512") && message.contains("PLAIN"),
        "{message}"
    );
}

#[test]
fn a_broker_certificate_not_signed_by_the_configured_ca_is_a_tls_error() {
    let untrusted = |broker: &SecureKafka, p: &mut BTreeMap<String, String>| {
        let other_ca = broker.other_ca_location.display().to_string();
        p.insert("ssl.ca.location".into(), other_ca);
    };
    let Some((broker, e)) = refused("sg_secure_untrusted", &STREAMS, "SCRAM-SHA-512", untrusted) else {
        return;
    };
    let StreamsError::Tls { message } = &e else {
        panic!("expected a TLS error, got {e:?}");
    };
    assert!(
        message.contains(&broker.bootstrap) && message.contains("UnknownIssuer"),
        "{message}"
    );
}

#[test]
fn a_session_the_broker_limits_is_authenticated_again_on_the_same_connection() {
    let Some(broker) = secure::require_secure_kafka("sg_secure_reauth") else {
        return;
    };
    let connect = |mechanism: &str| {
        let mut props: BTreeMap<String, String> =
            broker.client_properties(&ADMIN, mechanism).into_iter().collect();
        if mechanism == "OAUTHBEARER" {
            oauth("principal=admin")(&mut props);
        }
        let security = Security::from_props(&props).unwrap();
        Conn::connect(&broker.bootstrap, "reauth", Duration::from_secs(10), &security).unwrap()
    };
    // scripts/kafka.sh limits PLAIN and OAUTHBEARER sessions to 4 s and SCRAM-SHA-512 ones
    // not at all.
    const LIFETIME: Duration = Duration::from_secs(4);
    assert_eq!(connect("SCRAM-SHA-512").renew_at(), None);
    for mechanism in ["PLAIN", "OAUTHBEARER"] {
        let mut conn = connect(mechanism);
        let first = conn.renew_at().expect("the broker limits the session");
        assert!(
            first <= Instant::now() + LIFETIME,
            "{mechanism}: renewed after the session's end"
        );
        // Each request comes after the session has ended: the broker closes a connection
        // used so, unless the client has authenticated again first (OAUTHBEARER: with a
        // fresh token).
        for round in 0..2 {
            let due = conn.renew_at().unwrap();
            std::thread::sleep(LIFETIME + Duration::from_millis(500));
            let brokers = super::wire::describe_brokers(&mut conn).unwrap_or_else(|e| {
                panic!("{mechanism} round {round}: a request after the session's end failed: {e}")
            });
            assert!(!brokers.is_empty());
            assert!(
                conn.renew_at().unwrap() > due,
                "{mechanism} round {round}: not renewed"
            );
        }
    }
}
