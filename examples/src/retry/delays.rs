//! The ladder's delays as text: `250ms`, `5s`, `30m`, `1h`, `2d`, and comma-separated
//! lists of them (`5m,30m,1h`), for command lines; and the production ladder's delays.
//!
//! Parsing is [`humantime::parse_duration`] (so `1h 30m`, `1.5s` and the long unit names
//! are accepted too), with one addition kept from the ladder's own syntax: a bare number is
//! milliseconds (humantime asks for a unit).

use std::time::Duration;

use streams_dsl::retry::RetryLadder;

use crate::ExampleError;

/// The production ladder's delays, from the seed article: retries after 5 minutes, 30
/// minutes and 1 hour.
pub const PRODUCTION_DELAYS: [Duration; 3] = [
    Duration::from_secs(300),
    Duration::from_secs(1800),
    Duration::from_secs(3600),
];

/// The production ladder for `source` ([`PRODUCTION_DELAYS`]).
pub fn production_ladder(source: impl Into<String>) -> RetryLadder {
    RetryLadder::new(source, &PRODUCTION_DELAYS)
}

/// Parses a duration such as `250ms`, `5s`, `30m`, `1h` or `2d` (a bare number is
/// milliseconds); see the [module docs](self).
pub fn parse_duration(text: &str) -> Result<Duration, ExampleError> {
    let text = text.trim();
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return text
            .parse()
            .map(Duration::from_millis)
            .map_err(|_| ExampleError::Other(format!("duration out of range: {text:?}")));
    }
    humantime::parse_duration(text)
        .map_err(|e| ExampleError::Other(format!("not a duration: {text:?} ({e})")))
}

/// Parses a comma-separated list of durations (`5m,30m,1h`), see [`parse_duration`].
pub fn parse_delays(text: &str) -> Result<Vec<Duration>, ExampleError> {
    text.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(parse_duration)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("250").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("m").is_err());
        assert_eq!(parse_delays("5m, 30m,1h").unwrap(), PRODUCTION_DELAYS);
        let p = production_ladder("web_hook_requests");
        assert_eq!(p.steps()[2].delay, Duration::from_secs(3600));
        assert_eq!(p.steps()[2].topic, "web_hook_requests-retry-3");
    }

    #[test]
    fn every_form_the_ladder_accepted_still_parses() {
        for (text, ms) in [
            ("5s", 5_000),
            ("5min", 300_000),
            ("2d", 172_800_000),
            (" 1s ", 1_000),
            ("250 ms", 250),
            ("0", 0),
        ] {
            assert_eq!(parse_duration(text).unwrap(), Duration::from_millis(ms), "{text}");
        }
        assert_eq!(
            parse_delays("200ms,500ms,1s").unwrap(),
            [200, 500, 1_000].map(Duration::from_millis)
        );
        assert_eq!(parse_duration("1h 30m").unwrap(), Duration::from_secs(5_400));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1_500));
        assert!(parse_duration("").is_err());
        assert!(parse_duration("-5s").is_err());
        assert!(parse_duration("99999999999999999999999").is_err());
    }
}
