//! Window and session stores through the Processor API in the test driver: a processor
//! opens them with `ctx.window_store` / `ctx.session_store`, the driver reads them with
//! `window_store` / `session_store`, retention hides old windows, and asking with the
//! wrong kind of store is a typed error.

mod common;

use std::time::Duration;

use common::{MINUTE, PerMinute};
use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::state::StoreError;
use streams_core::{
    ProcessResult, Processor, ProcessorContext, Record, SessionStore, SinkConfig, SourceConfig, Stores,
    Topology, Windowed,
};
use streams_test_utils::{DriverConfig, TopologyTestDriver};

const GAP: i64 = 5 * MINUTE;

/// Counts clicks per session (inactivity gap of 5 minutes) and, as [`PerMinute`], per key
/// in tumbling one-minute windows; forwards `"key@window start"` with the window's count.
struct Clicks {
    per_minute: PerMinute,
    sessions: SessionStore<StringSerde, U64Serde>,
}

impl Processor<String, String, String, u64> for Clicks {
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, u64>,
        r: Record<String, String>,
    ) -> ProcessResult {
        // Merge every session within the gap of this click into one.
        let reader = self.sessions.read()?;
        let found: Vec<(Windowed<String>, u64)> = reader
            .find_sessions(&r.key, r.timestamp - GAP, r.timestamp + GAP)?
            .collect::<Result<_, _>>()?;
        drop(reader);
        let mut merged = Windowed {
            key: r.key.clone(),
            start: r.timestamp,
            end: r.timestamp,
        };
        let mut count = 1;
        for (s, c) in found {
            merged.start = merged.start.min(s.start);
            merged.end = merged.end.max(s.end);
            count += c;
            self.sessions.remove(&s)?;
        }
        self.sessions.put(&merged, &count)?;
        self.per_minute.process(ctx, r)
    }
}

fn topology() -> Topology {
    let mut b = Topology::builder();
    let clicks = b.source("clicks", SourceConfig::new(["clicks"], StringSerde, StringSerde));
    let windows = b.store(Stores::in_memory_window_store(
        "click-windows",
        Duration::from_secs(600),
        Duration::from_secs(60),
        false,
        StringSerde,
        U64Serde,
    ));
    let sessions = b.store(Stores::persistent_session_store(
        "click-sessions",
        Duration::from_secs(3600),
        StringSerde,
        U64Serde,
    ));
    let count = b.processor("count", [&clicks], {
        let (windows, sessions) = (windows.clone(), sessions.clone());
        move |ctx| {
            Ok(Clicks {
                per_minute: PerMinute {
                    windows: ctx.store(&windows)?,
                },
                sessions: ctx.store(&sessions)?,
            })
        }
    });
    b.connect(&count, &windows).connect(&count, &sessions);
    b.sink(
        "out",
        SinkConfig::topic("counts", StringSerde, U64Serde),
        [&count],
    );
    b.build().unwrap()
}

#[test]
fn a_processor_counts_in_windows_and_sessions() {
    let driver = TopologyTestDriver::new(topology(), DriverConfig::default()).unwrap();
    let input = driver.input_topic("clicks", StringSerde, StringSerde);
    let output = driver.output_topic("counts", StringSerde, U64Serde);
    let clicks = [
        ("ann", 0),
        ("ann", 30_000),
        ("bob", 61_000),
        ("ann", 90_000),
        ("ann", 20 * MINUTE),
    ];
    for (k, t) in clicks {
        input.pipe_at(k.into(), "c".into(), t).unwrap();
    }
    let got: Vec<(String, u64)> = output.read_key_values().unwrap();
    let want: Vec<(String, u64)> = [
        ("ann@0", 1),
        ("ann@0", 2),
        ("bob@60000", 1),
        ("ann@60000", 1),
        ("ann@1200000", 1),
    ]
    .into_iter()
    .map(|(k, n)| (k.to_owned(), n))
    .collect();
    assert_eq!(got, want);

    let windows = driver
        .window_store::<StringSerde, U64Serde>("click-windows")
        .unwrap();
    let reader = windows.read().unwrap();
    // Stream time 20 min, retention 10 min: the windows of the first minutes are gone.
    let ann: Vec<(i64, u64)> = reader
        .fetch_range(&"ann".to_owned(), i64::MIN, i64::MAX)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(ann, vec![(20 * MINUTE, 1)]);
    let all: Vec<(Windowed<String>, u64)> = reader.all().unwrap().collect::<Result<_, _>>().unwrap();
    let ann_window = Windowed {
        key: "ann".to_owned(),
        start: 20 * MINUTE,
        end: 21 * MINUTE,
    };
    assert_eq!(all, vec![(ann_window, 1)]);
    drop(reader);

    let sessions = driver
        .session_store::<StringSerde, U64Serde>("click-sessions")
        .unwrap();
    let reader = sessions.read().unwrap();
    let ann: Vec<(Windowed<String>, u64)> = reader
        .fetch(&"ann".to_owned())
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let s = |start, end| Windowed {
        key: "ann".to_owned(),
        start,
        end,
    };
    assert_eq!(ann, vec![(s(0, 90_000), 3), (s(20 * MINUTE, 20 * MINUTE), 1)]);

    assert!(matches!(
        driver.window_store::<StringSerde, U64Serde>("click-sessions"),
        Err(StoreError::WrongType { .. })
    ));
    assert!(matches!(
        driver.kv_store::<StringSerde, U64Serde>("click-windows"),
        Err(StoreError::WrongType { .. })
    ));
}
