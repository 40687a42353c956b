//! Secrets never leave the process in text the runtime writes.
//!
//! The configuration masks secret properties in its own `Display` and `Debug` (see
//! [`crate::config::is_secret`]); this module covers what the runtime cannot format itself:
//! librdkafka's log lines and error strings, which it forwards to `tracing` and into
//! [`StreamsError`](crate::StreamsError) messages. Each application registers the values
//! of its secret properties for as long as it exists ([`Registration`]), and [`redact`]
//! replaces every occurrence of a registered value with `********`.
//!
//! Values shorter than [`MIN_LEN`] characters are not registered: masking every `ab` in every
//! log line would garble the logs without protecting a password that short.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use crate::config::MASK;

/// The shortest value that is masked.
pub(crate) const MIN_LEN: usize = 4;

/// The registered secret values, each with the number of registrations holding it.
static SECRETS: Mutex<BTreeMap<String, usize>> = Mutex::new(BTreeMap::new());

/// Keeps secret values registered until dropped.
#[derive(Debug, Default)]
pub(crate) struct Registration(Vec<String>);

/// Registers `values` for [`redact`] until the returned registration drops.
pub(crate) fn register(values: impl IntoIterator<Item = String>) -> Registration {
    let values: Vec<String> = values
        .into_iter()
        .filter(|v| v.chars().count() >= MIN_LEN)
        .collect();
    if !values.is_empty() {
        let mut secrets = SECRETS.lock().unwrap_or_else(PoisonError::into_inner);
        for v in &values {
            *secrets.entry(v.clone()).or_insert(0) += 1;
        }
    }
    Registration(values)
}

impl Drop for Registration {
    fn drop(&mut self) {
        if self.0.is_empty() {
            return;
        }
        let mut secrets = SECRETS.lock().unwrap_or_else(PoisonError::into_inner);
        for v in &self.0 {
            if let Some(n) = secrets.get_mut(v) {
                *n -= 1;
                if *n == 0 {
                    secrets.remove(v);
                }
            }
        }
    }
}

/// `text` with every registered secret value replaced by `********` (longest first, so a
/// secret containing another is masked whole).
pub(crate) fn redact(text: &str) -> Cow<'_, str> {
    let secrets = SECRETS.lock().unwrap_or_else(PoisonError::into_inner);
    if secrets.is_empty() || !secrets.keys().any(|s| text.contains(s.as_str())) {
        return Cow::Borrowed(text);
    }
    let mut by_length: Vec<&String> = secrets.keys().collect();
    by_length.sort_by_key(|s| std::cmp::Reverse(s.len()));
    let mut out = text.to_owned();
    for s in by_length {
        if out.contains(s.as_str()) {
            out = out.replace(s.as_str(), MASK);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_values_are_masked_until_the_registration_drops() {
        let secret = "redact-test-Zq81-secret";
        assert_eq!(redact(&format!("x {secret} y")), format!("x {secret} y"));
        let a = register([secret.to_owned(), "ab".to_owned()]);
        let b = register([secret.to_owned()]);
        assert_eq!(redact(&format!("x {secret} y {secret}")), "x ******** y ********");
        assert_eq!(redact("grab a cab"), "grab a cab", "too short to register");
        drop(a);
        assert_eq!(redact(secret), MASK, "still held by the second registration");
        drop(b);
        assert_eq!(redact(secret), secret);
    }

    #[test]
    fn forwarded_log_lines_and_kafka_errors_are_masked() {
        #[derive(Clone, Default)]
        struct Buffer(std::sync::Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Buffer {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_writer(move || writer.clone())
            .finish();
        let secret = "redact-forward-pw-77e1";
        let _r = register([secret.to_owned()]);
        let error = tracing::subscriber::with_default(subscriber, || {
            crate::runtime::client::client_log::forward_log(
                "client",
                rdkafka::config::RDKafkaLogLevel::Warning,
                "SASL",
                &format!("echoing password {secret}"),
            );
            crate::runtime::client::errors::kafka_err("connect", format!("refused {secret}"))
        });
        let logged = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
        assert!(
            logged.contains("echoing password ********") && !logged.contains(secret),
            "{logged}"
        );
        assert_eq!(error.to_string(), "kafka: connect: refused ********");
    }

    #[test]
    fn the_longest_secret_is_masked_first() {
        let _r = register(["redact-pw-1".to_owned(), "redact-pw-1-and-more".to_owned()]);
        assert_eq!(redact("[redact-pw-1-and-more]"), "[********]");
    }
}
