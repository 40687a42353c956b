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
use std::io::{BufRead, BufReader, Read, Write};

use criterion::{Criterion, criterion_group, criterion_main};
use streams_benches::avro::{Event, SCHEMA};
use streams_serde_registry::{AvroSerde, RecordPart, SchemaRegistryClient, SerdeConfig};

/// A loopback registry: every POST is answered `{"id":1}`, every GET with `SCHEMA`.
fn stand_in_registry() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    let url = format!("http://{}", listener.local_addr().expect("local address"));
    let schema = serde_json::json!({ "schema": SCHEMA }).to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let _ = answer(stream, &schema);
        }
    });
    url
}

/// Reads one request (its head line by line, then the body it announces) and answers it.
fn answer(stream: std::net::TcpStream, schema: &str) -> std::io::Result<()> {
    let mut reader = BufReader::new(&stream);
    let (mut line, mut first, mut length) = (String::new(), String::new(), 0usize);
    while reader.read_line(&mut line)? > 2 {
        if first.is_empty() {
            first = line.clone();
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
        line.clear();
    }
    reader.read_exact(&mut vec![0; length])?;
    let body = if first.starts_with("POST") {
        r#"{"id":1}"#
    } else {
        schema
    };
    write!(
        &stream,
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
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
    let value = Event::sample();
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
