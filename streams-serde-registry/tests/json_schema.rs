//! The JSON Schema serde against a real registry: round trips, validation
//! (`json.fail.invalid.schema`), and a cross-check with Confluent's Python client (see
//! `tests/common`).

mod common;

use serde::{Deserialize, Serialize};
use serde_json::json;
use streams_serde_registry::{AvroSerde, JsonSchemaSerde, RecordPart, RegistrySerdeError, SerdeConfig, wire};
use streams_state::Serde;

use common::{client, frames, hex, python, registry, run_python, unique};

const JSON_SCHEMA: &str = r#"{"$schema":"http://json-schema.org/draft-07/schema#","title":"Order","type":"object","properties":{"id":{"type":"integer"},"item":{"type":"string"},"qty":{"type":"integer"}},"required":["id","item"]}"#;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Order {
    id: i64,
    item: String,
    qty: i64,
}

#[test]
fn json_schema_round_trip() {
    let Some(url) = registry("json_schema_round_trip") else {
        return;
    };
    let topic = unique("json");
    let c = client(&url);
    let serde = JsonSchemaSerde::<Order>::new(
        c.clone(),
        SerdeConfig::default(),
        &topic,
        RecordPart::Value,
        JSON_SCHEMA,
    )
    .unwrap();
    let order = Order {
        id: 1,
        item: "book".into(),
        qty: 2,
    };
    let framed = serde.serialize(&order).unwrap();
    assert_eq!(&framed[5..], br#"{"id":1,"item":"book","qty":2}"#);
    assert_eq!(serde.deserialize(&framed).unwrap(), order);
    let (id, _) = wire::split(&framed).unwrap();
    assert_eq!(
        c.schema_by_id(id).unwrap().schema_type,
        streams_serde_registry::SchemaType::Json
    );
    // An Avro schema's id is refused by the JSON serde, and the other way round.
    let avro = AvroSerde::<i64>::new(
        c.clone(),
        SerdeConfig::default(),
        unique("json-avro"),
        RecordPart::Value,
        r#""long""#,
    )
    .unwrap();
    let avro_frame = avro.serialize(&7).unwrap();
    assert!(matches!(
        serde.try_deserialize(&avro_frame).unwrap_err(),
        RegistrySerdeError::SchemaType { expected: "JSON", .. }
    ));
    assert!(matches!(
        avro.try_deserialize(&framed).unwrap_err(),
        RegistrySerdeError::SchemaType { expected: "AVRO", .. }
    ));
}

#[test]
fn json_schema_matches_confluent_python() {
    let test = "json_schema_matches_confluent_python";
    let Some(url) = registry(test) else { return };
    let Some(py) = python(test) else { return };
    let topic = unique("py-json");
    let c = client(&url);
    let orders = [
        Order {
            id: 1,
            item: "book".into(),
            qty: 2,
        },
        Order {
            id: -7,
            item: "ünïcode \"quoted\"".into(),
            qty: 0,
        },
    ];
    let from_python = frames(&run_python(
        &py,
        json!({"op": "serialize", "format": "json", "url": url, "topic": topic, "schema": JSON_SCHEMA,
               "records": orders}),
    ));
    let serde =
        JsonSchemaSerde::<Order>::new(c, SerdeConfig::default(), &topic, RecordPart::Value, JSON_SCHEMA)
            .unwrap();
    for (frame, o) in from_python.iter().zip(&orders) {
        assert_eq!(&serde.deserialize(frame).unwrap(), o);
        assert_eq!(
            hex(&serde.serialize(o).unwrap()),
            hex(frame),
            "same bytes as Python's"
        );
    }
    let ours: Vec<String> = orders.iter().map(|o| hex(&serde.serialize(o).unwrap())).collect();
    let back = run_python(
        &py,
        json!({"op": "deserialize", "format": "json", "url": url, "topic": topic, "schema": null, "frames": ours}),
    );
    assert_eq!(back["records"], serde_json::to_value(&orders).unwrap());
}

#[test]
fn json_schema_validation_refuses_invalid_values_both_ways() {
    let Some(url) = registry("json_schema_validation_refuses_invalid_values_both_ways") else {
        return;
    };
    const POSITIVE_QTY: &str = r#"{"$schema":"http://json-schema.org/draft-07/schema#","title":"Order","type":"object","properties":{"id":{"type":"integer"},"item":{"type":"string"},"qty":{"type":"integer","minimum":1}},"required":["id","item"]}"#;
    let topic = unique("json-valid");
    let validating = SerdeConfig {
        json_fail_invalid_schema: true,
        ..SerdeConfig::default()
    };
    let checked = JsonSchemaSerde::<Order>::new(
        client(&url),
        validating.clone(),
        &topic,
        RecordPart::Value,
        POSITIVE_QTY,
    )
    .unwrap();
    let good = Order {
        id: 1,
        item: "book".into(),
        qty: 2,
    };
    let framed = checked.serialize(&good).unwrap();
    assert_eq!(checked.deserialize(&framed).unwrap(), good);
    // Writing: refused, naming where, and nothing left in the buffer.
    let mut out = b"kept".to_vec();
    let e = checked
        .try_serialize_into(
            &Order {
                qty: 0,
                ..good.clone()
            },
            &mut out,
        )
        .unwrap_err();
    assert!(
        matches!(&e, RegistrySerdeError::Invalid { id: None, message } if message.starts_with("at /qty")),
        "{e:?}"
    );
    assert_eq!(out, b"kept");
    // Reading: a value another writer framed with the same schema's id is checked against it.
    let unchecked = JsonSchemaSerde::<serde_json::Value>::new(
        client(&url),
        SerdeConfig::default(),
        &topic,
        RecordPart::Value,
        POSITIVE_QTY,
    )
    .unwrap();
    for (bad, case) in [
        (json!({"id": 2, "item": "pen", "qty": 0}), "/qty"),
        (json!({"id": 3, "qty": 1}), "required"),
    ] {
        let frame = unchecked.serialize(&bad).unwrap();
        let e = checked.try_deserialize(&frame).unwrap_err();
        assert!(
            matches!(&e, RegistrySerdeError::Invalid { id: Some(_), message } if message.contains(case)),
            "{case}: {e:?}"
        );
    }
    // An invalid schema is refused at construction when values are to be validated.
    let e = JsonSchemaSerde::<Order>::new(
        client(&url),
        validating,
        &topic,
        RecordPart::Value,
        r#"{"type":"object","properties":{"id":{"type":"no-such-type"}}}"#,
    )
    .unwrap_err();
    assert!(
        matches!(e, RegistrySerdeError::Schema { format: "JSON", .. }),
        "{e:?}"
    );
}
