//! The reference `docs/configuration.md` against the code: every property, and its examples.

use std::time::Duration;

use crate::config::StreamsConfig;

/// `docs/configuration.md` documents every streams property, and its example file loads.
#[test]
fn the_reference_matches_the_code() {
    let doc = include_str!("../../../../docs/configuration.md");
    let table = doc
        .split("## Streams properties")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .unwrap();
    let documented: Vec<&str> = table
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .collect();
    assert_eq!(documented.len(), 22, "{documented:?}");
    for key in crate::config::keys::STREAMS {
        // The deprecated names are mentioned in their successors' rows.
        assert!(
            documented.contains(key) || table.contains(&format!("`{key}`")),
            "{key} is not documented"
        );
    }
    for name in &documented {
        assert!(
            crate::config::keys::STREAMS.contains(name),
            "{name} is documented but unknown"
        );
    }
    let examples: Vec<&str> = doc
        .split("```properties\n")
        .skip(1)
        .filter_map(|s| s.split("```").next())
        .collect();
    let example = |id: &str| {
        let text = examples
            .iter()
            .find(|e| e.contains(&format!("application.id = {id}\n")))
            .unwrap_or_else(|| panic!("no example of {id}"));
        StreamsConfig::from_properties_str(text).unwrap()
    };
    // The SASL_SSL example of the security section.
    let c = example("orders-enricher");
    for props in [
        c.main_consumer_properties(),
        c.restore_consumer_properties(),
        c.global_consumer_properties(),
        c.producer_properties(),
        c.admin_properties(),
    ] {
        assert_eq!(props["security.protocol"], "SASL_SSL");
        assert_eq!(props["sasl.mechanism"], "SCRAM-SHA-512");
        assert_eq!(props["ssl.ca.location"], "/etc/kafka/tls/ca.pem");
    }
    assert!(c.to_string().contains("sasl.password = ********"), "{c}");

    let c = example("word-count");
    assert_eq!(c.application_id(), "word-count");
    assert!(c.is_exactly_once());
    assert_eq!(c.commit_interval(), Duration::from_millis(100));
    assert_eq!(c.consumer_properties()["session.timeout.ms"], "10000");
    assert_eq!(c.producer_properties()["sasl.mechanism"], "PLAIN");
    assert!(!c.producer_properties().contains_key("session.timeout.ms"));
}
