//! What an Avro value costs through `streams-serde-registry`'s `AvroSerde`: serializing,
//! deserializing, and both (what a map topology pays per record), for the 10-field record
//! of the side-by-side `avro` workload.
//!
//! The serde talks to a loopback stand-in registry that answers a registration with id 1
//! and id 1 with the schema; after the first call each serde answers from its cache, so
//! what is measured is the encoding alone.
//!
//! Run: `cargo bench -p streams-benches --bench avro_serde`.

use std::hint::black_box;
use std::io::{Read, Write};

use criterion::{Criterion, criterion_group, criterion_main};
use streams_serde_registry::{AvroSerde, RecordPart, SchemaRegistryClient, SerdeConfig};

const SCHEMA: &str = r#"{"type":"record","name":"Event","namespace":"bench","fields":[
  {"name":"id","type":"long"},{"name":"user","type":"string"},{"name":"item","type":"string"},
  {"name":"category","type":"string"},{"name":"price","type":"double"},{"name":"quantity","type":"int"},
  {"name":"ts","type":"long"},{"name":"country","type":"string"},{"name":"gift","type":"boolean"},
  {"name":"note","type":"string"}]}"#;

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct Event {
    id: i64,
    user: String,
    item: String,
    category: String,
    price: f64,
    quantity: i32,
    ts: i64,
    country: String,
    gift: bool,
    note: String,
}

/// A loopback registry: every POST is answered `{"id":1}`, every GET with `SCHEMA`.
fn stand_in_registry() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    let url = format!("http://{}", listener.local_addr().expect("local address"));
    let schema = serde_json::json!({ "schema": SCHEMA }).to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = Vec::new();
            let mut buf = [0u8; 4096];
            // The head, then as many body bytes as it announces.
            while let Ok(n) = stream.read(&mut buf) {
                request.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&request);
                let Some(head_end) = text.find("\r\n\r\n") else {
                    if n == 0 {
                        break;
                    }
                    continue;
                };
                let length = text[..head_end]
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().to_owned())
                    })
                    .and_then(|v| v.parse::<usize>().ok())
                    .unwrap_or(0);
                if n == 0 || request.len() >= head_end + 4 + length {
                    break;
                }
            }
            let body = if request.starts_with(b"POST") {
                r#"{"id":1}"#
            } else {
                schema.as_str()
            };
            let response = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes());
        }
    });
    url
}

fn event() -> Event {
    Event {
        id: 1_234_567_890,
        user: "user-00042".into(),
        item: "item-31337".into(),
        category: "books".into(),
        price: 19.99,
        quantity: 3,
        ts: 1_764_000_000_000,
        country: "DE".into(),
        gift: true,
        note: "leave at the door, ring twice".into(),
    }
}

fn avro(c: &mut Criterion) {
    let url = stand_in_registry();
    let client =
        SchemaRegistryClient::from_properties([("schema.registry.url", url.as_str())]).expect("client");
    let serde = AvroSerde::<Event>::new(
        client,
        SerdeConfig::default(),
        "events",
        RecordPart::Value,
        SCHEMA,
    )
    .expect("serde");
    let value = event();
    let mut out = Vec::new();
    serde.try_serialize_into(&value, &mut out).expect("serialize");
    let bytes = out.clone();
    assert_eq!(serde.try_deserialize(&bytes).expect("deserialize"), value);

    let mut group = c.benchmark_group("avro_10_fields");
    group.bench_function("serialize", |b| {
        b.iter(|| {
            out.clear();
            serde
                .try_serialize_into(black_box(&value), &mut out)
                .expect("serialize");
            black_box(out.len())
        })
    });
    group.bench_function("deserialize", |b| {
        b.iter(|| black_box(serde.try_deserialize(black_box(&bytes)).expect("deserialize")))
    });
    group.bench_function("deserialize+serialize", |b| {
        b.iter(|| {
            let v = serde.try_deserialize(black_box(&bytes)).expect("deserialize");
            out.clear();
            serde.try_serialize_into(&v, &mut out).expect("serialize");
            black_box(out.len())
        })
    });
    group.finish();
}

criterion_group!(benches, avro);
criterion_main!(benches);
