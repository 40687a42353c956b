//! OAUTHBEARER tokens from the application: Kafka's `sasl.login.callback.handler.class`,
//! librdkafka's `oauthbearer_token_refresh_cb`.
//!
//! A cluster that authenticates with OAuth 2 tokens from an identity provider (or tokens the
//! application signs itself) needs the application to fetch them. A function given to
//! [`StreamsConfigBuilder::oauth_bearer_token_provider`] is called for a token when the
//! first client connects and again before each token expires; every client of the
//! application presents the token it returns, the librdkafka clients and the streams-group
//! members alike, and renews its sessions with it when the broker asks (KIP-368).
//!
//! Invariants: the provider is called from the runtime's own threads, never from a stream
//! thread's record loop; one token serves every client until 80% of its life has passed
//! (clones of a configuration share it), so the identity provider sees one request per
//! token life, not one per client; the token's value and extension values never appear in
//! `Debug` output, logs or errors.
//!
//! [`StreamsConfigBuilder::oauth_bearer_token_provider`]: super::StreamsConfigBuilder::oauth_bearer_token_provider

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use super::{StreamsConfig, invalid};
use crate::model::error::StreamsError;

/// A token to present with SASL/OAUTHBEARER: its value (a JWT, as a rule), the principal it
/// names, when it expires and the SASL extensions (KIP-342) to send with it.
#[derive(Clone, PartialEq, Eq)]
pub struct OAuthBearerToken {
    value: String,
    principal: String,
    expires_at: SystemTime,
    extensions: Vec<(String, String)>,
}

impl OAuthBearerToken {
    /// A token `value` naming `principal`, valid until `expires_at`.
    pub fn new(value: impl Into<String>, principal: impl Into<String>, expires_at: SystemTime) -> Self {
        Self {
            value: value.into(),
            principal: principal.into(),
            expires_at,
            extensions: Vec::new(),
        }
    }

    /// The token with the SASL extension `key=value` added (KIP-342), e.g. a logical
    /// cluster or an identity pool id a managed service asks for.
    pub fn with_extension(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.extensions.push((key.into(), value.into()));
        self
    }

    /// The token as the broker receives it.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// The principal the token names.
    pub fn principal(&self) -> &str {
        &self.principal
    }

    /// When the token expires.
    pub fn expires_at(&self) -> SystemTime {
        self.expires_at
    }

    /// The SASL extensions sent with the token.
    pub fn extensions(&self) -> &[(String, String)] {
        &self.extensions
    }
}

impl fmt::Debug for OAuthBearerToken {
    /// The principal, the expiry and the extensions' keys: never the value or an
    /// extension's value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys: Vec<&str> = self.extensions.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("OAuthBearerToken")
            .field("principal", &self.principal)
            .field("expires_at", &self.expires_at)
            .field("extensions", &keys)
            .finish_non_exhaustive()
    }
}

/// The provider's function type.
type ProviderFn = dyn Fn() -> Result<OAuthBearerToken, String> + Send + Sync;

/// The application's source of OAUTHBEARER tokens, with the token it last returned.
///
/// Two providers are equal when they are the same function object (a configuration and
/// its clones compare equal).
#[derive(Clone)]
pub struct OAuthBearerTokenProvider(Arc<Shared>);

struct Shared {
    fetch: Box<ProviderFn>,
    /// The token last fetched, and when.
    current: Mutex<Option<(OAuthBearerToken, SystemTime)>>,
}

/// The part of a token's life after which a new token is fetched (librdkafka's and Kafka's
/// clients refresh at 80% too).
const REFRESH_AT: f64 = 0.8;

impl OAuthBearerTokenProvider {
    /// A provider calling `f` for each new token; `f`'s error message is reported as an
    /// authentication failure (it must not contain secrets).
    pub fn new(f: impl Fn() -> Result<OAuthBearerToken, String> + Send + Sync + 'static) -> Self {
        Self(Arc::new(Shared {
            fetch: Box::new(f),
            current: Mutex::new(None),
        }))
    }

    /// The token to present now: the last one while less than 80% of its life (from when it
    /// was fetched) has passed, otherwise a new one from the provider's function.
    ///
    /// # Errors
    /// The function's error, or a token that has already expired.
    pub(crate) fn token(&self) -> Result<OAuthBearerToken, String> {
        let now = SystemTime::now();
        let mut current = self.0.current.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((token, fetched)) = current.as_ref()
            && now < refresh_after(token, *fetched)
        {
            return Ok(token.clone());
        }
        let token = (self.0.fetch)()?;
        if token.expires_at <= now {
            return Err(format!(
                "the provider returned a token for `{}` that has already expired",
                token.principal
            ));
        }
        *current = Some((token.clone(), now));
        Ok(token)
    }

    /// How long until `token`, presented now, is due to be replaced (at least 1 s).
    pub(crate) fn refresh_in(&self, token: &OAuthBearerToken) -> Duration {
        let now = SystemTime::now();
        let fetched = self
            .0
            .current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .filter(|(t, _)| t == token)
            .map_or(now, |(_, at)| *at);
        refresh_after(token, fetched)
            .duration_since(now)
            .unwrap_or_default()
            .max(Duration::from_secs(1))
    }
}

/// When a token fetched at `fetched` is due to be replaced.
fn refresh_after(token: &OAuthBearerToken, fetched: SystemTime) -> SystemTime {
    let life = token.expires_at.duration_since(fetched).unwrap_or_default();
    fetched + life.mul_f64(REFRESH_AT)
}

impl PartialEq for OAuthBearerTokenProvider {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for OAuthBearerTokenProvider {}

impl fmt::Debug for OAuthBearerTokenProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OAuthBearerTokenProvider(..)")
    }
}

/// With a token provider, every client authenticates with OAUTHBEARER and takes its tokens
/// from the provider alone; the error names the first property that says otherwise.
pub(super) fn check(config: &StreamsConfig) -> Result<(), StreamsError> {
    let scopes = [
        config.main_consumer_properties(),
        config.restore_consumer_properties(),
        config.global_consumer_properties(),
        config.producer_properties(),
        config.admin_properties(),
    ];
    for props in &scopes {
        let get = |key: &str| props.get(key).map(|v| v.trim().to_ascii_lowercase());
        let (key, mechanism) = match (get("sasl.mechanism"), get("sasl.mechanisms")) {
            (Some(m), _) => ("sasl.mechanism", Some(m)),
            (None, Some(m)) => ("sasl.mechanisms", Some(m)),
            (None, None) => ("sasl.mechanism", None),
        };
        if mechanism.as_deref() != Some("oauthbearer") {
            return Err(invalid(
                key,
                "an OAUTHBEARER token provider is set: every client must use \
                 sasl.mechanism=OAUTHBEARER",
            ));
        }
        if get("enable.sasl.oauthbearer.unsecure.jwt").as_deref() == Some("true") {
            return Err(invalid(
                "enable.sasl.oauthbearer.unsecure.jwt",
                "an OAUTHBEARER token provider is set: the clients present its tokens, not \
                 unsecured JWTs; remove this property",
            ));
        }
        if get("sasl.oauthbearer.method").is_some_and(|m| m != "default") {
            return Err(invalid(
                "sasl.oauthbearer.method",
                "an OAUTHBEARER token provider is set: the clients present its tokens, not \
                 librdkafka's own OIDC ones; remove this property",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn counting(life: Duration) -> (OAuthBearerTokenProvider, Arc<AtomicUsize>) {
        let calls = Arc::new(AtomicUsize::new(0));
        let seen = calls.clone();
        let provider = OAuthBearerTokenProvider::new(move || {
            let n = seen.fetch_add(1, Ordering::SeqCst);
            Ok(OAuthBearerToken::new(
                format!("secret-{n}"),
                "app",
                SystemTime::now() + life,
            ))
        });
        (provider, calls)
    }

    /// One token serves every caller until 80% of its life has passed; clones share it.
    #[test]
    fn a_token_is_reused_until_it_is_due() {
        let (provider, calls) = counting(Duration::from_secs(3600));
        let first = provider.token().unwrap();
        assert_eq!(provider.clone().token().unwrap(), first);
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        let due = provider.refresh_in(&first);
        assert!(
            due > Duration::from_secs(2870) && due <= Duration::from_secs(2880),
            "{due:?}"
        );

        let (short, calls) = counting(Duration::from_millis(50));
        let first = short.token().unwrap();
        assert_eq!(
            short.refresh_in(&first),
            Duration::from_secs(1),
            "at least a second"
        );
        std::thread::sleep(Duration::from_millis(45));
        assert_ne!(short.token().unwrap(), first, "past 80% of its life");
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    /// The function's error, and an expired token, are errors; nothing is cached.
    #[test]
    fn errors_and_expired_tokens_are_refused() {
        let failing = OAuthBearerTokenProvider::new(|| Err("the identity provider is down".into()));
        assert_eq!(failing.token().unwrap_err(), "the identity provider is down");
        let expired = OAuthBearerTokenProvider::new(|| {
            Ok(OAuthBearerToken::new(
                "v",
                "app",
                SystemTime::now() - Duration::from_secs(1),
            ))
        });
        assert!(expired.token().unwrap_err().contains("already expired"));
    }

    /// `Debug` shows neither the token nor an extension's value.
    #[test]
    fn debug_hides_the_token_and_extension_values() {
        let token = OAuthBearerToken::new("eyJ-secret", "app", SystemTime::UNIX_EPOCH)
            .with_extension("logicalCluster", "lkc-hidden");
        let shown = format!("{token:?}");
        assert!(
            shown.contains("app") && shown.contains("logicalCluster"),
            "{shown}"
        );
        assert!(!shown.contains("secret") && !shown.contains("hidden"), "{shown}");
        assert_eq!(token.extensions()[0].1, "lkc-hidden");
    }

    /// A provider with another token source, or clients of another mechanism, is refused
    /// naming the property; `to_builder` keeps the provider.
    #[test]
    fn the_builder_refuses_other_token_sources() {
        use crate::config::{StreamsConfig, StreamsConfigBuilder};
        use crate::model::error::StreamsError;
        let base = || {
            StreamsConfig::builder()
                .application_id("a")
                .bootstrap_servers("b:9092")
                .set("security.protocol", "SASL_SSL")
        };
        let token = || {
            Ok(OAuthBearerToken::new(
                "v",
                "app",
                SystemTime::now() + Duration::from_secs(60),
            ))
        };
        let refused = |b: StreamsConfigBuilder| match b.oauth_bearer_token_provider(token).build() {
            Err(StreamsError::Config { property, .. }) => property,
            other => panic!("{other:?}"),
        };
        let oauth = || base().set("sasl.mechanism", "OAUTHBEARER");
        assert_eq!(refused(base()), "sasl.mechanism");
        assert_eq!(refused(base().set("sasl.mechanism", "PLAIN")), "sasl.mechanism");
        assert_eq!(
            refused(oauth().set("producer.sasl.mechanism", "PLAIN")),
            "sasl.mechanism"
        );
        assert_eq!(
            refused(oauth().set("enable.sasl.oauthbearer.unsecure.jwt", "true")),
            "enable.sasl.oauthbearer.unsecure.jwt"
        );
        let config = oauth().oauth_bearer_token_provider(token).build().unwrap();
        assert!(config.oauth_bearer_token_provider().is_some());
        let copy = config.to_builder().build().unwrap();
        assert_eq!(
            copy.oauth_bearer_token_provider(),
            config.oauth_bearer_token_provider()
        );
    }
}
