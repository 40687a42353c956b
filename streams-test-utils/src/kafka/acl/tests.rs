//! Unit tests of the ACL requests' encoding and of the ACLs Kafka Streams documents.

use kafka_protocol::messages::CreateAclsRequest;
use kafka_protocol::protocol::Encodable;

use super::wire::VERSION;
use super::{AclBinding, Operation, PatternType, ResourceType, creation, describe_all, streams_application};

#[test]
fn a_create_request_carries_kafkas_codes_in_version_2_layout() {
    let mut request = CreateAclsRequest::default();
    request.creations = vec![creation(&AclBinding::topic_literal(
        "User:a",
        "t",
        Operation::Read,
    ))];
    let mut out = bytes::BytesMut::new();
    request.encode(&mut out, VERSION).unwrap();
    let mut expected = vec![2u8]; // one creation (compact array: length + 1)
    expected.push(2); // resource type TOPIC
    expected.extend([2, b't']); // compact string "t"
    expected.push(3); // pattern type LITERAL
    expected.push(7); // compact string "User:a"
    expected.extend(b"User:a");
    expected.extend([2, b'*']); // any host
    expected.push(3); // operation READ
    expected.push(3); // permission ALLOW
    expected.push(0); // the creation's tagged fields
    expected.push(0); // the request's tagged fields
    assert_eq!(&out[..], &expected[..]);
}

#[test]
fn a_describe_request_filters_on_nothing() {
    let mut out = bytes::BytesMut::new();
    describe_all().encode(&mut out, VERSION).unwrap();
    // ANY resource type, null name, ANY pattern, null principal and host, ANY operation
    // and permission, no tagged fields.
    assert_eq!(&out[..], &[1, 0, 1, 0, 0, 1, 1, 0]);
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
