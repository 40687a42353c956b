//! The Avro record of the side-by-side `avro` workload and of the `avro_serde` bench: a
//! 10-field schema, its `serde` type and the one value the workload's input carries.

/// The record's schema; also `benches/java`'s, the same text character for character (the
/// registry gives a different text another id, and the side-by-side output check compares
/// bytes).
pub const SCHEMA: &str = concat!(
    r#"{"type":"record","name":"Event","namespace":"bench","fields":["#,
    r#"{"name":"id","type":"long"},{"name":"user","type":"string"},"#,
    r#"{"name":"item","type":"string"},{"name":"category","type":"string"},"#,
    r#"{"name":"price","type":"double"},{"name":"quantity","type":"int"},"#,
    r#"{"name":"ts","type":"long"},{"name":"country","type":"string"},"#,
    r#"{"name":"gift","type":"boolean"},{"name":"note","type":"string"}]}"#
);

/// [`SCHEMA`] as a `serde` type.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Event {
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

impl Event {
    /// The one value every record of the `avro` workload's input carries (87 bytes framed).
    pub fn sample() -> Self {
        Self {
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
}
