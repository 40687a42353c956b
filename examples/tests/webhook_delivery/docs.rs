//! The topologies docs/examples.md shows, against the code's.

use std::time::Duration;

use streams_examples::retry::{RetryOptions, production_ladder};
use streams_examples::webhooks::{WEB_HOOK_REQUESTS, WebHookTopics, delivery_topology, topology};

/// docs/examples.md shows the join's and the delivery's topologies exactly as
/// `describe()` prints them.
#[test]
fn docs_show_the_current_webhook_topology() {
    let docs = std::fs::read_to_string(
        std::path::PathBuf::from(
            std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
        )
        .join("../docs/examples.md"),
    )
    .unwrap();
    let join = topology(&WebHookTopics::default())
        .unwrap()
        .describe()
        .to_string();
    assert!(
        docs.contains(join.trim_end()),
        "update docs/examples.md with:\n{join}"
    );
    let delivery = delivery_topology(
        &production_ladder(WEB_HOOK_REQUESTS),
        Duration::from_secs(10),
        &RetryOptions::new(),
    )
    .unwrap()
    .describe()
    .to_string();
    assert!(
        docs.contains(delivery.trim_end()),
        "update docs/examples.md with:\n{delivery}"
    );
}
