//! SASL/OAUTHBEARER (RFC 7628, Kafka's KIP-255) for the streams-group connection: the
//! token it presents and the one message that carries it.
//!
//! The token is librdkafka's *unsecured JWT* (`enable.sasl.oauthbearer.unsecure.jwt=true`),
//! made from the same `sasl.oauthbearer.config` text, so the group client presents the
//! identity the application's librdkafka clients present:
//! `principal=<name> [principalClaimName=sub] [scope=a,b] [scopeClaimName=scope]
//! [lifeSeconds=3600] [extension_<name>=<value>]...`, separated by spaces. Kafka's default
//! server-side validator accepts such tokens (header `{"alg":"none"}`, no signature), for
//! development and test clusters.
//!
//! Tokens from the application's provider ([`OAuthBearerTokenProvider`]) go in the same
//! message ([`client_message`]).
//!
//! [`OAuthBearerTokenProvider`]: crate::config::OAuthBearerTokenProvider
//!
//! Invariants: a fresh token (new `iat` and `exp`) for every authentication, so a session
//! renewed under KIP-368 never presents an expired one; the config text, which may carry
//! secrets in extensions, never appears in an error (errors name the key at fault).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// How an unsecured JWT is made (from `sasl.oauthbearer.config`).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct UnsecuredJwt {
    principal_claim: String,
    principal: String,
    scope_claim: String,
    scope: Vec<String>,
    life: Duration,
    extensions: Vec<(String, String)>,
}

impl std::fmt::Debug for UnsecuredJwt {
    /// The principal only: extensions may carry secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "UnsecuredJwt(`{}`)", self.principal)
    }
}

impl UnsecuredJwt {
    /// Reads librdkafka's `sasl.oauthbearer.config` for unsecured JWTs; the error says
    /// what is wrong without repeating any value.
    pub(crate) fn from_config(text: &str) -> Result<UnsecuredJwt, String> {
        let mut jwt = UnsecuredJwt {
            principal_claim: "sub".into(),
            principal: String::new(),
            scope_claim: "scope".into(),
            scope: Vec::new(),
            life: Duration::from_secs(3600),
            extensions: Vec::new(),
        };
        for item in text.split_whitespace() {
            let Some((key, value)) = item.split_once('=') else {
                return Err(format!("`{}` is not key=value", key_of(item)));
            };
            match key {
                "principal" => jwt.principal = value.to_owned(),
                "principalClaimName" => jwt.principal_claim = value.to_owned(),
                "scopeClaimName" => jwt.scope_claim = value.to_owned(),
                "scope" => {
                    jwt.scope = value
                        .split(',')
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned)
                        .collect()
                }
                "lifeSeconds" => match value.parse::<u64>() {
                    Ok(s) if s > 0 => jwt.life = Duration::from_secs(s),
                    _ => return Err("lifeSeconds is not a positive number of seconds".into()),
                },
                _ => match key.strip_prefix("extension_") {
                    // RFC 7628: extension keys are letters; `auth` is the token's own.
                    Some(name)
                        if !name.is_empty()
                            && name.bytes().all(|b| b.is_ascii_alphabetic())
                            && name != "auth" =>
                    {
                        if value.bytes().any(|b| !(0x21..=0x7e).contains(&b)) {
                            return Err(format!(
                                "extension_{name} has a value that is not printable ASCII"
                            ));
                        }
                        jwt.extensions.push((name.to_owned(), value.to_owned()));
                    }
                    Some(_) => {
                        return Err(format!(
                            "`{key}` is not a valid extension (letters only, not auth)"
                        ));
                    }
                    None => return Err(format!("unknown key `{key}`")),
                },
            }
        }
        for (name, value) in [
            ("principal", &jwt.principal),
            ("principalClaimName", &jwt.principal_claim),
            ("scopeClaimName", &jwt.scope_claim),
        ] {
            if value.is_empty() {
                return Err(format!("{name} is required and must not be empty"));
            }
        }
        Ok(jwt)
    }

    /// The principal the token names (for errors and logs).
    pub(crate) fn principal(&self) -> &str {
        &self.principal
    }

    /// A token issued at `now`: `header.claims.` with header `{"alg":"none"}`.
    pub(crate) fn token(&self, now: SystemTime) -> String {
        let iat = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let mut claims = serde_json::Map::new();
        claims.insert(self.principal_claim.clone(), self.principal.clone().into());
        claims.insert("iat".into(), iat.into());
        claims.insert("exp".into(), (iat + self.life.as_secs()).into());
        if !self.scope.is_empty() {
            claims.insert(self.scope_claim.clone(), self.scope.clone().into());
        }
        let claims = serde_json::Value::Object(claims).to_string();
        format!(
            "{}.{}.",
            URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#),
            URL_SAFE_NO_PAD.encode(claims)
        )
    }

    /// The client's first (and only) OAUTHBEARER message, with a token issued at `now`
    /// ([`client_message`]).
    pub(crate) fn client_message(&self, now: SystemTime) -> Vec<u8> {
        client_message(&self.token(now), &self.extensions)
    }
}

/// The client's first (and only) OAUTHBEARER message presenting `token` with `extensions`:
/// the GS2 header `n,,`, then `auth=Bearer <token>` and each extension, each followed by
/// `\x01`, and a final `\x01`.
pub(crate) fn client_message(token: &str, extensions: &[(String, String)]) -> Vec<u8> {
    let mut m = format!("n,,\x01auth=Bearer {token}\x01");
    for (k, v) in extensions {
        m.push_str(&format!("{k}={v}\x01"));
    }
    m.push('\x01');
    m.into_bytes()
}

/// The key of a `key=value` item, or a stand-in that repeats no value.
fn key_of(item: &str) -> &str {
    if item.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') && item.len() <= 32 {
        item
    } else {
        "an item"
    }
}

/// The client's reply to a server's error challenge (RFC 7628 §3.2.3): a lone `\x01`,
/// after which the server fails the authentication.
pub(crate) const ERROR_ACK: &[u8] = b"\x01";

#[cfg(test)]
mod tests {
    use super::*;

    fn claims_of(token: &str) -> serde_json::Value {
        let parts: Vec<&str> = token.split('.').collect();
        assert_eq!(parts.len(), 3, "{token}");
        assert_eq!(parts[2], "", "an unsecured JWT has no signature");
        assert_eq!(URL_SAFE_NO_PAD.decode(parts[0]).unwrap(), br#"{"alg":"none"}"#);
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap()
    }

    #[test]
    fn a_token_carries_the_principal_its_life_and_its_scope() {
        let jwt = UnsecuredJwt::from_config("principal=admin scope=read,write lifeSeconds=60").unwrap();
        let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let c = claims_of(&jwt.token(now));
        assert_eq!(c["sub"], "admin");
        assert_eq!(c["iat"], 1_700_000_000);
        assert_eq!(c["exp"], 1_700_000_060);
        assert_eq!(c["scope"], serde_json::json!(["read", "write"]));
        let named = UnsecuredJwt::from_config(
            " principalClaimName=user  principal=bob\tscopeClaimName=roles scope=x",
        )
        .unwrap();
        let c = claims_of(&named.token(now));
        assert_eq!(
            (c["user"].as_str(), c["roles"].clone()),
            (Some("bob"), serde_json::json!(["x"]))
        );
        assert_eq!(c["exp"], 1_700_003_600, "an hour by default");
        assert!(c.get("sub").is_none());
    }

    #[test]
    fn the_message_is_the_gs2_header_the_token_and_the_extensions() {
        let jwt = UnsecuredJwt::from_config("principal=admin extension_traceId=abc extension_x=1").unwrap();
        let now = SystemTime::now();
        let m = String::from_utf8(jwt.client_message(now)).unwrap();
        assert_eq!(
            m,
            format!(
                "n,,\x01auth=Bearer {}\x01traceId=abc\x01x=1\x01\x01",
                jwt.token(now)
            )
        );
    }

    #[test]
    fn a_bad_config_is_refused_without_its_values() {
        for (text, says) in [
            ("", "principal is required"),
            ("scope=a", "principal is required"),
            ("principal=a lifeSeconds=0", "lifeSeconds"),
            ("principal=a lifeSeconds=soon", "lifeSeconds"),
            ("principal=a colour=blue", "unknown key `colour`"),
            ("principal=a extension_auth=x", "not a valid extension"),
            ("principal=a extension_b4d=x", "not a valid extension"),
            ("principal=a secret-token-without-equals", "an item"),
            (
                "principal=a principalClaimName=",
                "principalClaimName is required",
            ),
        ] {
            let e = UnsecuredJwt::from_config(text).unwrap_err();
            assert!(e.contains(says), "{text:?}: {e}");
            assert!(!e.contains("blue") && !e.contains("secret-token"), "{e}");
        }
        let jwt = UnsecuredJwt::from_config("principal=a extension_key=hidden-value").unwrap();
        assert!(!format!("{jwt:?}").contains("hidden-value"));
    }
}
