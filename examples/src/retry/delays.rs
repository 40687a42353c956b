//! The ladder's delays as text: `250ms`, `5s`, `30m`, `1h`, `2d` (a bare number is
//! milliseconds), and comma-separated lists of them (`5m,30m,1h`), for command lines.

use std::time::Duration;

use crate::ExampleError;

/// Parses a duration such as `250ms`, `5s`, `30m`, `1h` or `2d` (a bare number is
/// milliseconds).
pub fn parse_duration(text: &str) -> Result<Duration, ExampleError> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| ExampleError::Other(format!("not a duration: {text:?}")))?;
    let ms = match unit.trim() {
        "" | "ms" => 1,
        "s" => 1_000,
        "m" | "min" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        other => {
            return Err(ExampleError::Other(format!(
                "unknown duration unit {other:?} in {text:?}"
            )));
        }
    };
    Ok(Duration::from_millis(n.saturating_mul(ms)))
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
        assert_eq!(parse_delays("5m, 30m,1h").unwrap().len(), 3);
    }
}
