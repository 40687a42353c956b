//! The Protobuf serde against a real registry, and cross-checked with Confluent's Python
//! client (see `tests/common`).

mod common;

use prost::Message as _;
use serde_json::json;
use streams_serde_registry::{
    ProtobufSchema, ProtobufSerde, RecordPart, RegistryError, RegistrySerdeError, SchemaReference,
    SchemaRegistryClient, SchemaType, SerdeConfig, wire,
};
use streams_state::Serde;

use common::{client, frames, hex, python, registry, run_python, unique};

const MONEY: &str = r#"syntax = "proto3";
package common;
message Money {
  string currency = 1;
  int64 cents = 2;
}
"#;

const ORDER_V1: &str = r#"syntax = "proto3";
package shop;
import "common/money.proto";
message Customer {
  string name = 1;
}
message Order {
  string id = 1;
  common.Money total = 2;
  message Line {
    string sku = 1;
    int32 quantity = 2;
  }
  repeated Line lines = 3;
  Customer customer = 4;
}
"#;

/// V1 plus a field: a backward-compatible evolution.
fn order_v2() -> String {
    ORDER_V1.replace(
        "  Customer customer = 4;\n}",
        "  Customer customer = 4;\n  string note = 5;\n}",
    )
}

#[derive(Clone, PartialEq, prost::Message)]
struct Money {
    #[prost(string, tag = "1")]
    currency: String,
    #[prost(int64, tag = "2")]
    cents: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Customer {
    #[prost(string, tag = "1")]
    name: String,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Line {
    #[prost(string, tag = "1")]
    sku: String,
    #[prost(int32, tag = "2")]
    quantity: i32,
}

/// The message `shop.Order` of [`ORDER_V1`] as the struct `$name`, with the fields `$added`
/// of a later version (as [`order_v2`] adds them to the schema).
macro_rules! order_message {
    ($name:ident { $($added:tt)* }) => {
        #[derive(Clone, PartialEq, prost::Message)]
        struct $name {
            #[prost(string, tag = "1")]
            id: String,
            #[prost(message, optional, tag = "2")]
            total: Option<Money>,
            #[prost(message, repeated, tag = "3")]
            lines: Vec<Line>,
            #[prost(message, optional, tag = "4")]
            customer: Option<Customer>,
            $($added)*
        }
    };
}

order_message!(Order {});
order_message!(OrderV2 {
    #[prost(string, tag = "5")]
    note: String,
});

fn order(id: &str, cents: i64) -> Order {
    Order {
        id: id.into(),
        total: Some(Money {
            currency: "EUR".into(),
            cents,
        }),
        lines: vec![
            Line {
                sku: "book".into(),
                quantity: 2,
            },
            Line {
                sku: "pen".into(),
                quantity: -1,
            },
        ],
        customer: Some(Customer { name: "Ada".into() }),
    }
}

fn schema(text: &str) -> ProtobufSchema {
    let money = ProtobufSchema::parse("common/money.proto", MONEY).expect("money.proto");
    ProtobufSchema::parse("shop/order.proto", text)
        .expect("order.proto")
        .with_import(money)
        .expect("import")
}

fn serde<M: prost::Message + Default>(
    url: &str,
    topic: &str,
    text: &str,
    message: &str,
    config: SerdeConfig,
) -> ProtobufSerde<M> {
    try_serde(client(url), topic, text, message, config).expect("serde")
}

/// A value serde of `message` in the order file `text`, through `client`.
fn try_serde<M: prost::Message + Default>(
    client: SchemaRegistryClient,
    topic: &str,
    text: &str,
    message: &str,
    config: SerdeConfig,
) -> Result<ProtobufSerde<M>, RegistrySerdeError> {
    ProtobufSerde::new(client, config, topic, RecordPart::Value, schema(text), message)
}

#[test]
fn protobuf_round_trip_with_references_and_message_indexes() {
    let Some(url) = registry("protobuf_round_trip_with_references_and_message_indexes") else {
        return;
    };
    let topic = unique("proto");
    let orders = serde::<Order>(&url, &topic, ORDER_V1, "shop.Order", SerdeConfig::default());
    let o = order("o-1", 1999);
    let framed = orders.serialize(&o).unwrap();
    let (id, payload) = wire::split(&framed).unwrap();
    // Order is the file's second message: indexes [1], written as count 1 then 1 (zigzag).
    assert_eq!(&payload[..2], &[2, 2]);
    assert_eq!(&payload[2..], o.encode_to_vec().as_slice());
    assert_eq!(orders.deserialize(&framed).unwrap(), o);

    // Registered as a .proto schema that names its import as a reference.
    let c = client(&url);
    let registered = c.schema_by_id(id).unwrap();
    assert_eq!(registered.schema_type, SchemaType::Protobuf);
    assert_eq!(registered.schema, ORDER_V1);
    let money = c.latest_version("common/money.proto").unwrap();
    assert_eq!(
        registered.references,
        [SchemaReference {
            name: "common/money.proto".into(),
            subject: "common/money.proto".into(),
            version: money.version,
        }]
    );

    // A nested message ([1, 0]) and the first one ([0], one zero byte), on other topics.
    let lines = serde::<Line>(
        &url,
        &unique("proto-line"),
        ORDER_V1,
        "shop.Order.Line",
        SerdeConfig::default(),
    );
    let line = Line {
        sku: "x".into(),
        quantity: 3,
    };
    let line_frame = lines.serialize(&line).unwrap();
    assert_eq!(&line_frame[5..8], &[4, 2, 0]);
    assert_eq!(lines.deserialize(&line_frame).unwrap(), line);
    let customers = serde::<Customer>(
        &url,
        &unique("proto-cust"),
        ORDER_V1,
        "shop.Customer",
        SerdeConfig::default(),
    );
    let customer_frame = customers.serialize(&Customer { name: "Bo".into() }).unwrap();
    assert_eq!(customer_frame[5], 0);

    // A record of another message is refused, naming both; never decoded as the wrong type.
    let e = orders.try_deserialize(&line_frame).unwrap_err();
    assert!(
        matches!(&e, RegistrySerdeError::WrongMessage { expected, actual, .. }
            if expected == "shop.Order" && actual == "shop.Order.Line"),
        "{e:?}"
    );
    let mut bad_index = framed.clone();
    bad_index[6] = 8; // index 4: no such message
    let e = orders.try_deserialize(&bad_index).unwrap_err();
    assert!(matches!(e, RegistrySerdeError::WrongMessage { .. }), "{e:?}");
    let e = orders.try_deserialize(&framed[..6]).unwrap_err();
    assert!(
        matches!(
            e,
            RegistrySerdeError::Wire(streams_serde_registry::WireError::MessageIndexes { .. })
        ),
        "{e:?}"
    );
    let e = orders.try_deserialize(&wire::frame(999_999, &[0])).unwrap_err();
    assert!(
        matches!(
            e,
            RegistrySerdeError::Registry(RegistryError::UnknownSchemaId { id: 999_999 })
        ),
        "{e:?}"
    );

    // The writer schema is fetched once per id: a fresh serde costs one lookup per new id.
    let c2 = client(&url);
    let reader =
        try_serde::<Order>(c2.clone(), &topic, ORDER_V1, "shop.Order", SerdeConfig::default()).unwrap();
    for _ in 0..100 {
        assert_eq!(reader.deserialize(&framed).unwrap(), o);
    }
    assert_eq!(c2.http_requests(), 1);
}

#[test]
fn protobuf_evolution_and_lookup() {
    let Some(url) = registry("protobuf_evolution_and_lookup") else {
        return;
    };
    let topic = unique("proto-evo");
    let v1 = serde::<Order>(&url, &topic, ORDER_V1, "shop.Order", SerdeConfig::default());
    let v2 = serde::<OrderV2>(&url, &topic, &order_v2(), "shop.Order", SerdeConfig::default());
    let old = order("old", 5);
    let old_frame = v1.serialize(&old).unwrap();
    let new = OrderV2 {
        id: "new".into(),
        total: None,
        lines: vec![],
        customer: None,
        note: "gift".into(),
    };
    let new_frame = v2.serialize(&new).unwrap();
    assert_ne!(old_frame[1..5], new_frame[1..5], "v2 is a new schema id");
    // New reads old (the added field is empty), old reads new (the added field is skipped).
    let read = v2.deserialize(&old_frame).unwrap();
    assert_eq!(
        (read.id.as_str(), read.note.as_str(), read.lines.len()),
        ("old", "", 2)
    );
    assert_eq!(v1.deserialize(&new_frame).unwrap().id, "new");

    // Without auto-registration, a registered schema is looked up and an unknown one refused.
    let lookup = SerdeConfig {
        auto_register_schemas: false,
        ..SerdeConfig::default()
    };
    let looked_up = serde::<Order>(&url, &topic, ORDER_V1, "shop.Order", lookup.clone());
    assert_eq!(looked_up.serialize(&old).unwrap(), old_frame);
    let other = serde::<Order>(&url, &unique("proto-none"), ORDER_V1, "shop.Order", lookup);
    let e = other.try_serialize_into(&old, &mut Vec::new()).unwrap_err();
    assert!(
        matches!(
            e,
            RegistrySerdeError::Registry(RegistryError::SchemaNotRegistered { .. })
        ),
        "{e:?}"
    );
    // With use.latest.version, v1's serde writes with v2's id.
    let latest = SerdeConfig {
        auto_register_schemas: false,
        use_latest_version: true,
        ..SerdeConfig::default()
    };
    let v1_latest = serde::<Order>(&url, &topic, ORDER_V1, "shop.Order", latest);
    assert_eq!(v1_latest.serialize(&old).unwrap()[1..5], new_frame[1..5]);

    // A schema that declares no such message is refused at construction.
    let e = try_serde::<Order>(
        client(&url),
        &topic,
        ORDER_V1,
        "shop.Invoice",
        SerdeConfig::default(),
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("declares no message `shop.Invoice`"),
        "{e}"
    );
}

/// The files as resolved descriptors (what `protoc` makes), hex-encoded, imports first.
///
/// Python's serializer registers the imported file under its import path as subject, as a
/// serialized descriptor: another text than the `.proto` our serdes register under
/// `common/money.proto`. So Python's copy is imported as `py/money.proto`.
fn descriptors(order_text: &str) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("py")).unwrap();
    std::fs::create_dir_all(dir.path().join("shop")).unwrap();
    std::fs::write(dir.path().join("py/money.proto"), MONEY).unwrap();
    let order_text = order_text.replace("common/money.proto", "py/money.proto");
    std::fs::write(dir.path().join("shop/order.proto"), order_text).unwrap();
    let set = protox::compile(["shop/order.proto"], [dir.path()]).expect("compile");
    set.file.iter().map(|f| hex(&f.encode_to_vec())).collect()
}

fn order_json(o: &Order) -> serde_json::Value {
    let money = o.total.as_ref().unwrap();
    json!({
        "id": o.id,
        "total": {"currency": money.currency, "cents": money.cents.to_string()},
        "lines": o.lines.iter().map(|l| json!({"sku": l.sku, "quantity": l.quantity})).collect::<Vec<_>>(),
        "customer": {"name": o.customer.as_ref().unwrap().name},
    })
}

#[test]
fn protobuf_matches_confluent_python_byte_for_byte() {
    let test = "protobuf_matches_confluent_python_byte_for_byte";
    let Some(url) = registry(test) else { return };
    let Some(py) = python(test) else { return };
    let ours_topic = unique("proto-ours");
    let py_topic = unique("py-proto");
    let v1 = serde::<Order>(&url, &ours_topic, ORDER_V1, "shop.Order", SerdeConfig::default());
    let orders = [order("a", 1), order("ünïcode", -70_000_000_000)];
    let ours: Vec<Vec<u8>> = orders.iter().map(|o| v1.serialize(o).unwrap()).collect();

    // Python registers its own schema (a serialized descriptor, with the import registered
    // as a reference the same way) on its topic: after the schema id, the same bytes as
    // ours, message indexes included; and we read its records through its schema.
    let from_python = frames(&run_python(
        &py,
        json!({"op": "serialize", "format": "protobuf", "url": url, "topic": py_topic,
               "files": descriptors(ORDER_V1), "message": "shop.Order",
               "records": orders.iter().map(order_json).collect::<Vec<_>>()}),
    ));
    for ((theirs, ours), o) in from_python.iter().zip(&ours).zip(&orders) {
        assert_eq!(
            hex(&theirs[5..]),
            hex(&ours[5..]),
            "same bytes as Python's after the id"
        );
        assert_eq!(&v1.deserialize(theirs).unwrap(), o);
    }
    // Python reads ours, with the older and the newer message class.
    for (text, newer) in [(ORDER_V1.to_owned(), false), (order_v2(), true)] {
        let back = run_python(
            &py,
            json!({"op": "deserialize", "format": "protobuf", "url": url, "topic": ours_topic,
                   "files": descriptors(&text), "message": "shop.Order",
                   "frames": ours.iter().map(|f| hex(f)).collect::<Vec<_>>()}),
        );
        let mut expected: Vec<serde_json::Value> = orders.iter().map(order_json).collect();
        if newer {
            for e in &mut expected {
                e["note"] = json!("");
            }
        }
        assert_eq!(back["records"], json!(expected), "Python reads our records");
    }
    // Python writes with the newer class; we read it with the older and the newer message.
    let mut newer = order_json(&orders[0]);
    newer["note"] = json!("gift");
    let from_python = frames(&run_python(
        &py,
        json!({"op": "serialize", "format": "protobuf", "url": url, "topic": unique("py-proto-v2"),
               "files": descriptors(&order_v2()), "message": "shop.Order", "records": [newer]}),
    ));
    assert_eq!(v1.deserialize(&from_python[0]).unwrap(), orders[0]);
    let v2 = serde::<OrderV2>(
        &url,
        &ours_topic,
        &order_v2(),
        "shop.Order",
        SerdeConfig::default(),
    );
    assert_eq!(v2.deserialize(&from_python[0]).unwrap().note, "gift");
}
