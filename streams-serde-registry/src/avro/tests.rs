//! The Avro serdes without a registry: bad frames, unreachable registries, and the direct
//! path against apache-avro's.

use std::time::Duration;

use streams_state::Serde;

use super::*;
use crate::config::RegistryConfig;
use crate::error::{RegistryError, WireError};

const SCHEMA: &str = r#"{"type":"record","name":"P","fields":[{"name":"x","type":"long"}]}"#;

#[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
struct P {
    x: i64,
}

/// A client of a registry that is not there, failing fast.
fn nowhere() -> SchemaRegistryClient {
    let mut config = RegistryConfig::new("http://127.0.0.1:9");
    config.max_retries = 1;
    config.retry_wait = Duration::from_millis(1);
    SchemaRegistryClient::new(config).unwrap()
}

#[test]
fn bad_frames_fail_before_any_request() {
    let client = nowhere();
    let serde = AvroSerde::<P>::new(
        client.clone(),
        SerdeConfig::default(),
        "t",
        RecordPart::Value,
        SCHEMA,
    )
    .unwrap();
    assert_eq!(
        serde.try_deserialize(b"\x07\x00\x00\x00\x01\x02").unwrap_err(),
        RegistrySerdeError::Wire(WireError::UnknownMagicByte { byte: 7 })
    );
    assert_eq!(
        serde.try_deserialize(b"").unwrap_err(),
        RegistrySerdeError::Wire(WireError::TooShort { len: 0 })
    );
    let e = Serde::deserialize(&serde, b"\x00\x01").unwrap_err();
    assert_eq!(e.serde, "AvroSerde");
    assert!(e.message.contains("too short"), "{}", e.message);
    assert_eq!(client.http_requests(), 0);
}

#[test]
fn unreachable_registry_is_named() {
    let serde =
        AvroSerde::<P>::new(nowhere(), SerdeConfig::default(), "t", RecordPart::Value, SCHEMA).unwrap();
    let e = serde
        .try_serialize_into(&P { x: 1 }, &mut Vec::new())
        .unwrap_err();
    assert!(
        matches!(
            e,
            RegistrySerdeError::Registry(RegistryError::Unreachable { attempts: 2, .. })
        ),
        "{e:?}"
    );
    let e = serde.try_deserialize(&wire::frame(1, b"\x02")).unwrap_err();
    assert!(
        matches!(e, RegistrySerdeError::Registry(RegistryError::Unreachable { .. })),
        "{e:?}"
    );
}

#[test]
fn invalid_schemas_and_subjects() {
    let e =
        AvroSerde::<P>::new(nowhere(), SerdeConfig::default(), "t", RecordPart::Value, "{nope").unwrap_err();
    assert!(
        matches!(e, RegistrySerdeError::Schema { format: "AVRO", .. }),
        "{e:?}"
    );
    let record = SerdeConfig {
        subject_name_strategy: crate::SubjectNameStrategy::Record,
        ..SerdeConfig::default()
    };
    let serde = AvroSerde::<i64>::new(nowhere(), record, "t", RecordPart::Key, r#""long""#).unwrap();
    assert!(matches!(serde.subject(), Err(RegistrySerdeError::Subject(_))));
    let generic =
        GenericAvroSerde::new(nowhere(), SerdeConfig::default(), "t", RecordPart::Value, None).unwrap();
    assert!(matches!(
        generic.try_serialize_into(&Value::Long(1), &mut Vec::new()),
        Err(RegistrySerdeError::Encode(_))
    ));
}

/// A schema of every Avro type a `serde` struct maps to: primitives, a nullable union, an
/// enum, an array, a map, a nested record, the same record again by name, and bytes.
const RICH: &str = r#"{"type":"record","name":"Rich","namespace":"t","fields":[
  {"name":"b","type":"boolean"},{"name":"i","type":"int"},{"name":"l","type":"long"},
  {"name":"f","type":"float"},{"name":"d","type":"double"},{"name":"s","type":"string"},
  {"name":"opt","type":["null","string"],"default":null},
  {"name":"color","type":{"type":"enum","name":"Color","symbols":["RED","GREEN","BLUE"]}},
  {"name":"tags","type":{"type":"array","items":"string"}},
  {"name":"attrs","type":{"type":"map","values":"long"}},
  {"name":"inner","type":{"type":"record","name":"Inner","fields":[
    {"name":"x","type":"int"},{"name":"y","type":["null","double"],"default":null}]}},
  {"name":"more","type":{"type":"array","items":"Inner"}},
  {"name":"raw","type":"bytes"}]}"#;

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
enum Color {
    #[serde(rename = "RED")]
    Red,
    #[serde(rename = "GREEN")]
    Green,
    #[serde(rename = "BLUE")]
    Blue,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct Inner {
    x: i32,
    y: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct Rich {
    b: bool,
    i: i32,
    l: i64,
    f: f32,
    d: f64,
    s: String,
    opt: Option<String>,
    color: Color,
    tags: Vec<String>,
    attrs: std::collections::BTreeMap<String, i64>,
    inner: Inner,
    more: Vec<Inner>,
    #[serde(with = "apache_avro::serde_avro_bytes")]
    raw: Vec<u8>,
}

fn rich() -> impl proptest::strategy::Strategy<Value = Rich> {
    use proptest::prelude::*;
    let inner = (any::<i32>(), proptest::option::of(-1e12f64..1e12)).prop_map(|(x, y)| Inner { x, y });
    let color = prop_oneof![Just(Color::Red), Just(Color::Green), Just(Color::Blue)];
    (
        (
            any::<bool>(),
            any::<i32>(),
            any::<i64>(),
            -1e6f32..1e6,
            -1e300f64..1e300,
        ),
        (".{0,12}", proptest::option::of(".{0,8}"), color),
        (
            proptest::collection::vec(".{0,6}", 0..4),
            // At most one entry: apache-avro's `Value` keeps a map in a `HashMap`, so it writes
            // the entries of a larger map in another order than the direct path (both valid).
            proptest::collection::btree_map(".{0,6}", any::<i64>(), 0..2),
        ),
        (
            inner.clone(),
            proptest::collection::vec(inner, 0..3),
            proptest::collection::vec(any::<u8>(), 0..16),
        ),
    )
        .prop_map(
            |((b, i, l, f, d), (s, opt, color), (tags, attrs), (inner, more, raw))| Rich {
                b,
                i,
                l,
                f,
                d,
                s,
                opt,
                color,
                tags,
                attrs,
                inner,
                more,
                raw,
            },
        )
}

proptest::proptest! {
    /// The direct path writes the bytes apache-avro's path writes, and each path reads
    /// what the other wrote back to the same value.
    #[test]
    fn direct_path_agrees_with_apache_avro(value in rich()) {
        let schema = AvroSchema::parse(RICH).unwrap();
        let mut direct = Vec::new();
        proptest::prop_assert!(schema.encode_direct(&value, &mut direct));
        let mut through_value = Vec::new();
        schema.encode_value(apache_avro::to_value(&value).unwrap(), &mut through_value).unwrap();
        proptest::prop_assert_eq!(&direct, &through_value);

        let (read, rest) = schema.decode_direct::<Rich>(&through_value).unwrap();
        proptest::prop_assert_eq!((&read, rest), (&value, 0));
        let tree = apache_avro::from_avro_datum(schema.schema(), &mut direct.as_slice(), None).unwrap();
        proptest::prop_assert_eq!(apache_avro::from_value::<Rich>(&tree).unwrap(), value);
    }
}

#[test]
fn direct_path_leaves_to_apache_avro_what_it_refuses() {
    // A struct without the schema's defaulted field: the direct path refuses it and leaves
    // `out` as it was; apache-avro's path writes the default.
    let schema = AvroSchema::parse(
        r#"{"type":"record","name":"P","fields":[{"name":"x","type":"long"},{"name":"y","type":"int","default":7}]}"#,
    )
    .unwrap();
    let mut out = vec![9];
    assert!(!schema.encode_direct(&P { x: 1 }, &mut out));
    assert_eq!(out, [9]);
    schema
        .encode_value(apache_avro::to_value(P { x: 1 }).unwrap(), &mut out)
        .unwrap();
    assert_eq!(out, [9, 2, 14]);
    // Bytes after the value are counted, not dropped.
    assert_eq!(
        schema
            .decode_direct::<P>(&[2, 14, 0])
            .map(|(p, rest)| (p.x, rest)),
        Some((1, 1))
    );
    // A truncated record is refused.
    assert!(schema.decode_direct::<P>(&[2]).is_none());
}

#[test]
fn same_schema_is_the_same_json() {
    let a = AvroSchema::parse(SCHEMA).unwrap();
    let spaced = AvroSchema::parse(
        r#"{ "name": "P", "type": "record", "fields": [ {"type": "long", "name": "x"} ] }"#,
    )
    .unwrap();
    assert!(a.same_json(&spaced));
    let doc =
        AvroSchema::parse(r#"{"type":"record","name":"P","doc":"d","fields":[{"name":"x","type":"long"}]}"#)
            .unwrap();
    assert!(!a.same_json(&doc), "any difference takes the resolving path");
}
