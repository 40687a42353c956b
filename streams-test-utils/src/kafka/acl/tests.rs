//! Unit tests of the ACL requests' field encoding and of the ACLs Kafka Streams documents.

use super::wire::{Reader, put_compact_string, put_uvarint};
use super::{AclBinding, Operation, PatternType, ResourceType, streams_application};

#[test]
fn varints_and_compact_strings_round_trip() {
    let mut out = Vec::new();
    put_uvarint(&mut out, 300);
    put_compact_string(&mut out, Some("topic"));
    put_compact_string(&mut out, None);
    let mut r = Reader::new(&out);
    assert_eq!(r.uvarint().unwrap(), 300);
    assert_eq!(r.compact_string().unwrap().as_deref(), Some("topic"));
    assert_eq!(r.compact_string().unwrap(), None);
    assert!(r.i8().is_err(), "nothing left");
}

#[test]
fn the_documented_set_covers_internal_topics_group_transactions_input_and_output() {
    let acls = streams_application("User:s", "app", &["in"], &["out"], true);
    let has = |t, name: &str, p, op| acls.contains(&AclBinding::new(t, name, p, "User:s", op));
    assert!(has(
        ResourceType::Topic,
        "app",
        PatternType::Prefixed,
        Operation::Create
    ));
    assert!(has(
        ResourceType::Group,
        "app",
        PatternType::Prefixed,
        Operation::Read
    ));
    assert!(has(
        ResourceType::TransactionalId,
        "app",
        PatternType::Prefixed,
        Operation::Write
    ));
    assert!(has(
        ResourceType::Topic,
        "in",
        PatternType::Literal,
        Operation::Read
    ));
    assert!(has(
        ResourceType::Topic,
        "out",
        PatternType::Literal,
        Operation::Write
    ));
    assert_eq!(acls.len(), 6 + 2 + 2 + 1 + 1);
    assert_eq!(
        streams_application("User:s", "app", &["in"], &["out"], false).len(),
        10
    );
}
