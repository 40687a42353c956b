//! Integration tests against a real Confluent-compatible registry, and cross-checks with
//! Confluent's Python client.
//!
//! The registry's URL comes from `STREAMS_TEST_SCHEMA_REGISTRY` (what
//! `scripts/schema-registry.sh start` prints); without it the tests print a message and pass,
//! unless `STREAMS_REQUIRE_SCHEMA_REGISTRY=1`, which makes them fail. The cross-checks get
//! their Python environment from `scripts/schema-registry.sh python`.

mod common;

use serde::{Deserialize, Serialize};
use serde_json::json;
use streams_serde_registry::apache_avro::types::Value;
use streams_serde_registry::{
    AvroSerde, GenericAvroSerde, RecordPart, RegistryConfig, RegistryError, RegistrySerdeError,
    SchemaRegistryClient, SerdeConfig, SubjectNameStrategy, wire,
};
use streams_state::Serde;

use common::{client, frames, hex, python, registry, run_python, unique};

const V1: &str = r#"{"type":"record","name":"User","namespace":"streams.test","fields":[{"name":"name","type":"string"},{"name":"favorite","type":["null","long"],"default":null}]}"#;
/// V1 plus a field with a default: a backward-compatible evolution.
const V2: &str = r#"{"type":"record","name":"User","namespace":"streams.test","fields":[{"name":"name","type":"string"},{"name":"favorite","type":["null","long"],"default":null},{"name":"age","type":"int","default":42}]}"#;
/// V1 plus a field without a default: not backward compatible.
const V3_INCOMPATIBLE: &str = r#"{"type":"record","name":"User","namespace":"streams.test","fields":[{"name":"name","type":"string"},{"name":"favorite","type":["null","long"],"default":null},{"name":"email","type":"string"}]}"#;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct UserV1 {
    name: String,
    favorite: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct UserV2 {
    name: String,
    favorite: Option<i64>,
    age: i32,
}

fn user(name: &str, favorite: Option<i64>) -> UserV1 {
    UserV1 {
        name: name.into(),
        favorite,
    }
}

#[test]
fn avro_round_trip_costs_one_request_per_schema_id() {
    let Some(url) = registry("avro_round_trip_costs_one_request_per_schema_id") else {
        return;
    };
    let topic = unique("rt");
    let writer_client = client(&url);
    let serde = AvroSerde::<UserV1>::new(
        writer_client.clone(),
        SerdeConfig::default(),
        &topic,
        RecordPart::Value,
        V1,
    )
    .unwrap();
    assert_eq!(serde.subject().unwrap(), format!("{topic}-value"));
    let users = [user("ann", Some(7)), user("bob", None), user("cé", Some(-1))];
    let frames: Vec<Vec<u8>> = users.iter().map(|u| serde.serialize(u).unwrap()).collect();
    assert_eq!(
        writer_client.http_requests(),
        1,
        "one registration for three records"
    );
    let (id, _) = wire::split(&frames[0]).unwrap();
    assert!(frames.iter().all(|f| wire::split(f).unwrap().0 == id));

    let reader_client = client(&url);
    let reader = AvroSerde::<UserV1>::new(
        reader_client.clone(),
        SerdeConfig::default(),
        &topic,
        RecordPart::Value,
        V1,
    )
    .unwrap();
    for (frame, u) in frames.iter().zip(&users) {
        assert_eq!(&reader.deserialize(frame).unwrap(), u);
    }
    assert_eq!(
        reader_client.http_requests(),
        1,
        "one schema fetch for three records of one id"
    );
    // Another serde on the same client shares the cache.
    let generic = GenericAvroSerde::new(
        reader_client.clone(),
        SerdeConfig::default(),
        &topic,
        RecordPart::Value,
        None,
    )
    .unwrap();
    generic.deserialize(&frames[0]).unwrap();
    assert_eq!(reader_client.http_requests(), 1);
    assert_eq!(reader_client.schema_by_id(id).unwrap().id, id);
}

#[test]
fn avro_schema_evolution_both_directions() {
    let Some(url) = registry("avro_schema_evolution_both_directions") else {
        return;
    };
    let topic = unique("evo");
    let c = client(&url);
    let v1 =
        AvroSerde::<UserV1>::new(c.clone(), SerdeConfig::default(), &topic, RecordPart::Value, V1).unwrap();
    let old = v1.serialize(&user("old", Some(1))).unwrap();
    c.set_compatibility(Some(&v1.subject().unwrap()), "BACKWARD")
        .unwrap();
    let v2 =
        AvroSerde::<UserV2>::new(c.clone(), SerdeConfig::default(), &topic, RecordPart::Value, V2).unwrap();
    let new = v2
        .serialize(&UserV2 {
            name: "new".into(),
            favorite: None,
            age: 30,
        })
        .unwrap();
    assert_ne!(wire::split(&old).unwrap().0, wire::split(&new).unwrap().0);
    // Old record, new reader: the added field takes its default.
    assert_eq!(
        v2.deserialize(&old).unwrap(),
        UserV2 {
            name: "old".into(),
            favorite: Some(1),
            age: 42
        }
    );
    // New record, old reader: the added field is skipped.
    assert_eq!(v1.deserialize(&new).unwrap(), user("new", None));
    // The generic serde without a schema reads each record as written.
    let generic =
        GenericAvroSerde::new(c.clone(), SerdeConfig::default(), &topic, RecordPart::Value, None).unwrap();
    let Value::Record(fields) = generic.deserialize(&new).unwrap() else {
        panic!("not a record")
    };
    assert_eq!(fields.len(), 3);
    assert!(!generic.writer_schema(&old).unwrap().text().contains("age"));
    // The subject's latest version is V2.
    assert!(
        c.latest_version(&format!("{topic}-value"))
            .unwrap()
            .schema
            .schema
            .contains("age")
    );
}

#[test]
fn incompatible_schema_is_refused_with_the_registrys_message() {
    let Some(url) = registry("incompatible_schema_is_refused_with_the_registrys_message") else {
        return;
    };
    let topic = unique("incompat");
    let c = client(&url);
    let v1 =
        AvroSerde::<UserV1>::new(c.clone(), SerdeConfig::default(), &topic, RecordPart::Value, V1).unwrap();
    v1.serialize(&user("a", None)).unwrap();
    c.set_compatibility(Some(&v1.subject().unwrap()), "BACKWARD")
        .unwrap();
    let v3 = GenericAvroSerde::new(
        c,
        SerdeConfig::default(),
        &topic,
        RecordPart::Value,
        Some(V3_INCOMPATIBLE),
    )
    .unwrap();
    let value = Value::Record(vec![
        ("name".into(), Value::String("a".into())),
        ("favorite".into(), Value::Union(0, Box::new(Value::Null))),
        ("email".into(), Value::String("a@b".into())),
    ]);
    let mut out = Vec::new();
    let e = v3.try_serialize_into(&value, &mut out).unwrap_err();
    match e {
        RegistrySerdeError::Registry(RegistryError::IncompatibleSchema { subject, message }) => {
            assert_eq!(subject, format!("{topic}-value"));
            assert!(!message.is_empty());
        }
        other => panic!("expected IncompatibleSchema, got {other:?}"),
    }
    assert!(out.is_empty());
    // Through the Serde trait the error keeps its text.
    let e = v3.serialize(&value).unwrap_err();
    assert!(e.message.contains("incompatible"), "{}", e.message);
}

#[test]
fn unknown_schema_id_and_truncated_payload() {
    let Some(url) = registry("unknown_schema_id_and_truncated_payload") else {
        return;
    };
    let topic = unique("unknown");
    let serde = AvroSerde::<UserV1>::new(
        client(&url),
        SerdeConfig::default(),
        &topic,
        RecordPart::Value,
        V1,
    )
    .unwrap();
    let e = serde
        .try_deserialize(&wire::frame(2_000_000_000, b"\x06abc\x00"))
        .unwrap_err();
    assert_eq!(
        e,
        RegistrySerdeError::Registry(RegistryError::UnknownSchemaId { id: 2_000_000_000 })
    );
    // A bad header (magic byte, length) fails before any request: the avro module's unit
    // tests check it without a registry. A truncated payload of a known id:
    let good = serde.serialize(&user("truncated", Some(5))).unwrap();
    let e = serde.try_deserialize(&good[..good.len() - 1]).unwrap_err();
    assert!(matches!(e, RegistrySerdeError::Decode { .. }), "{e:?}");
}

#[test]
fn lookup_without_auto_registration() {
    let Some(url) = registry("lookup_without_auto_registration") else {
        return;
    };
    let topic = unique("lookup");
    let c = client(&url);
    let no_register = SerdeConfig {
        auto_register_schemas: false,
        ..SerdeConfig::default()
    };
    let lookup =
        AvroSerde::<UserV1>::new(c.clone(), no_register.clone(), &topic, RecordPart::Key, V1).unwrap();
    let e = lookup
        .try_serialize_into(&user("k", None), &mut Vec::new())
        .unwrap_err();
    assert!(
        matches!(
            e,
            RegistrySerdeError::Registry(RegistryError::SchemaNotRegistered { .. })
        ),
        "{e:?}"
    );
    let id = c
        .register(
            &format!("{topic}-key"),
            streams_serde_registry::SchemaType::Avro,
            V1,
        )
        .unwrap();
    let lookup = AvroSerde::<UserV1>::new(c, no_register, &topic, RecordPart::Key, V1).unwrap();
    let framed = lookup.serialize(&user("k", None)).unwrap();
    assert_eq!(wire::split(&framed).unwrap().0, id);
}

#[test]
fn use_latest_version_and_record_name_strategies() {
    let Some(url) = registry("use_latest_version_and_record_name_strategies") else {
        return;
    };
    let topic = unique("latest");
    let c = client(&url);
    // TopicRecordNameStrategy: subject <topic>-<record name>.
    let config = SerdeConfig::from_properties(
        [(
            "value.subject.name.strategy",
            "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy",
        )],
        RecordPart::Value,
    )
    .unwrap();
    let v2 = AvroSerde::<UserV2>::new(c.clone(), config.clone(), &topic, RecordPart::Value, V2).unwrap();
    assert_eq!(v2.subject().unwrap(), format!("{topic}-streams.test.User"));
    v2.serialize(&UserV2 {
        name: "x".into(),
        favorite: None,
        age: 1,
    })
    .unwrap();
    // An application still on V1 writes with the subject's latest schema, V2: the new field
    // gets its default on the way.
    let latest = SerdeConfig {
        use_latest_version: true,
        auto_register_schemas: false,
        ..config
    };
    let v1_latest = AvroSerde::<UserV1>::new(c.clone(), latest, &topic, RecordPart::Value, V1).unwrap();
    let framed = v1_latest.serialize(&user("y", Some(2))).unwrap();
    let generic =
        GenericAvroSerde::new(c.clone(), SerdeConfig::default(), &topic, RecordPart::Value, None).unwrap();
    assert!(generic.writer_schema(&framed).unwrap().text().contains("age"));
    let back =
        AvroSerde::<UserV2>::new(c.clone(), SerdeConfig::default(), &topic, RecordPart::Value, V2).unwrap();
    assert_eq!(back.deserialize(&framed).unwrap().age, 42);
    // RecordNameStrategy: the subject is the record's full name.
    let record = SerdeConfig {
        subject_name_strategy: SubjectNameStrategy::Record,
        ..SerdeConfig::default()
    };
    let named = format!(
        r#"{{"type":"record","name":"{}","namespace":"streams.test","fields":[{{"name":"n","type":"long"}}]}}"#,
        unique("R").replace('-', "_")
    );
    let by_record =
        GenericAvroSerde::new(c.clone(), record, &topic, RecordPart::Value, Some(&named)).unwrap();
    let framed = by_record
        .serialize(&Value::Record(vec![("n".into(), Value::Long(9))]))
        .unwrap();
    let subject = format!(
        "streams.test.{}",
        serde_json::from_str::<serde_json::Value>(&named).unwrap()["name"]
            .as_str()
            .unwrap()
    );
    assert_eq!(
        c.latest_version(&subject).unwrap().schema.id,
        wire::split(&framed).unwrap().0
    );
}

#[test]
fn basic_auth_credentials_are_accepted() {
    let Some(url) = registry("basic_auth_credentials_are_accepted") else {
        return;
    };
    // The test registry does not check credentials; this checks that a client configured
    // with them works end to end (the header is sent on every request).
    let c = SchemaRegistryClient::from_properties([
        ("schema.registry.url", url.as_str()),
        ("basic.auth.credentials.source", "USER_INFO"),
        ("basic.auth.user.info", "user:secret"),
    ])
    .unwrap();
    assert!(format!("{c:?}").contains("<set>") && !format!("{c:?}").contains("secret"));
    let topic = unique("auth");
    let serde = AvroSerde::<UserV1>::new(c, SerdeConfig::default(), &topic, RecordPart::Value, V1).unwrap();
    let u = user("auth", None);
    assert_eq!(serde.deserialize(&serde.serialize(&u).unwrap()).unwrap(), u);
}

#[test]
fn registry_errors_on_a_wrong_path_are_not_retried() {
    let Some(url) = registry("registry_errors_on_a_wrong_path_are_not_retried") else {
        return;
    };
    let mut config = RegistryConfig::new(&url);
    config.max_retries = 5;
    let c = SchemaRegistryClient::new(config).unwrap();
    let e = c.latest_version(&unique("no-such-subject")).unwrap_err();
    assert!(matches!(e, RegistryError::SubjectNotFound { .. }), "{e:?}");
    assert_eq!(c.http_requests(), 1, "a 404 is an answer, not retried");
}

// ---- Cross-checks with Confluent's Python client ----

#[test]
fn avro_matches_confluent_python_byte_for_byte_with_evolution() {
    let test = "avro_matches_confluent_python_byte_for_byte_with_evolution";
    let Some(url) = registry(test) else { return };
    let Some(py) = python(test) else { return };
    let topic = unique("py-avro");
    let c = client(&url);
    let users = [
        user("ann", Some(7)),
        user("bob", None),
        user("Zoë ✓", Some(i64::MIN)),
    ];

    // Python writes V1 (registering it) ...
    let from_python = frames(&run_python(
        &py,
        json!({"op": "serialize", "format": "avro", "url": url, "topic": topic, "schema": V1,
               "records": users}),
    ));
    // ... we read it into V1 and into V2 (the added field takes its default) ...
    let v1 =
        AvroSerde::<UserV1>::new(c.clone(), SerdeConfig::default(), &topic, RecordPart::Value, V1).unwrap();
    let v2 =
        AvroSerde::<UserV2>::new(c.clone(), SerdeConfig::default(), &topic, RecordPart::Value, V2).unwrap();
    for (frame, u) in from_python.iter().zip(&users) {
        assert_eq!(&v1.deserialize(frame).unwrap(), u);
        assert_eq!(v2.deserialize(frame).unwrap().age, 42);
    }
    // ... and our V1 bytes equal Python's, header (same schema, same id) and payload.
    for (frame, u) in from_python.iter().zip(&users) {
        assert_eq!(hex(&v1.serialize(u).unwrap()), hex(frame));
    }

    // We write V2 (a new version of the subject); Python reads it with the V1 reader schema
    // (the new field dropped) and with the writer schema (the new field present).
    c.set_compatibility(Some(&format!("{topic}-value")), "BACKWARD")
        .unwrap();
    let new_users = [
        UserV2 {
            name: "cy".into(),
            favorite: Some(3),
            age: 33,
        },
        UserV2 {
            name: "di".into(),
            favorite: None,
            age: -4,
        },
    ];
    let ours: Vec<String> = new_users.iter().map(|u| hex(&v2.serialize(u).unwrap())).collect();
    let as_v1 = run_python(
        &py,
        json!({"op": "deserialize", "format": "avro", "url": url, "topic": topic, "schema": V1, "frames": ours}),
    );
    assert_eq!(
        as_v1["records"],
        json!([{"name": "cy", "favorite": 3}, {"name": "di", "favorite": null}])
    );
    let as_written = run_python(
        &py,
        json!({"op": "deserialize", "format": "avro", "url": url, "topic": topic, "schema": null, "frames": ours}),
    );
    assert_eq!(as_written["records"], serde_json::to_value(&new_users).unwrap());

    // Python writes V2 too: the same bytes as ours, and our V1 reader drops the field.
    let py_v2 = frames(&run_python(
        &py,
        json!({"op": "serialize", "format": "avro", "url": url, "topic": topic, "schema": V2,
               "records": new_users}),
    ));
    for ((frame, ours), u) in py_v2.iter().zip(&ours).zip(&new_users) {
        assert_eq!(&hex(frame), ours);
        assert_eq!(v1.deserialize(frame).unwrap(), user(&u.name, u.favorite));
    }
}
