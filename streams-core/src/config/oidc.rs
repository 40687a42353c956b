//! librdkafka's OIDC token source (`sasl.oauthbearer.method=oidc`), served by the framework.
//!
//! librdkafka fetches OAUTHBEARER tokens from an identity provider itself only when it is
//! built with libcurl, which this build leaves out. The same properties therefore make a
//! token provider here ([`OAuthBearerTokenProvider`], the one
//! [`StreamsConfigBuilder::oauth_bearer_token_provider`] takes): the OAuth 2 client
//! credentials grant (RFC 6749 §4.4) against `sasl.oauthbearer.token.endpoint.url`, with
//! `sasl.oauthbearer.client.id` and `sasl.oauthbearer.client.secret` as HTTP Basic
//! credentials, `sasl.oauthbearer.scope` if set, and the SASL extensions of
//! `sasl.oauthbearer.extensions` (`key=value,...`). As librdkafka does, the token must be a
//! JWT whose `sub` claim is the principal and whose `exp` claim is its expiry (the response's
//! `expires_in` serves where `exp` is missing). `https.ca.location` names the PEM file of the
//! CAs the endpoint's certificate is checked against (otherwise the Mozilla roots).
//!
//! The properties are taken out of the client properties (librdkafka never sees them) and
//! must be set unprefixed: every client shares the token. Invariants: the client secret and
//! the tokens appear in no error and no log line; errors name the property or the endpoint's
//! answer (its status and OAuth `error` code).
//!
//! [`StreamsConfigBuilder::oauth_bearer_token_provider`]: super::StreamsConfigBuilder::oauth_bearer_token_provider

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};

use super::{OAuthBearerToken, OAuthBearerTokenProvider, Scope, invalid};
use crate::model::error::StreamsError;

const METHOD: &str = "sasl.oauthbearer.method";
const ENDPOINT: &str = "sasl.oauthbearer.token.endpoint.url";
const CLIENT_ID: &str = "sasl.oauthbearer.client.id";
const CLIENT_SECRET: &str = "sasl.oauthbearer.client.secret";
const SCOPE: &str = "sasl.oauthbearer.scope";
const EXTENSIONS: &str = "sasl.oauthbearer.extensions";
const CA: &str = "https.ca.location";

/// Every property of the OIDC source.
const ALL: [&str; 7] = [METHOD, ENDPOINT, CLIENT_ID, CLIENT_SECRET, SCOPE, EXTENSIONS, CA];

/// How long a token request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Whether `originals` choose the OIDC source.
pub(super) fn configured(originals: &BTreeMap<String, String>) -> bool {
    originals
        .get(METHOD)
        .is_some_and(|m| m.eq_ignore_ascii_case("oidc"))
}

/// The token provider of `sasl.oauthbearer.method=oidc`, its properties taken out of
/// `client`; `None` where the method is not set.
///
/// # Errors
/// [`StreamsError::Config`] naming a property: a prefixed OIDC property, a missing one, an
/// extension without `=`, an unreadable CA file.
pub(super) fn provider(
    client: &mut BTreeMap<Scope, BTreeMap<String, String>>,
) -> Result<Option<OAuthBearerTokenProvider>, StreamsError> {
    for (scope, props) in client.iter() {
        if *scope == Scope::Common {
            continue;
        }
        if let Some(key) = ALL.iter().find(|k| props.contains_key(**k)) {
            return Err(invalid(
                &format!("{}{key}", scope.prefix()),
                format!("set `{key}` unprefixed: every client presents the same OIDC token"),
            ));
        }
    }
    let Some(common) = client.get_mut(&Scope::Common) else {
        return Ok(None);
    };
    if !common.get(METHOD).is_some_and(|m| m.eq_ignore_ascii_case("oidc")) {
        return Ok(None);
    }
    let mut take = |key: &str| common.remove(key).filter(|v| !v.is_empty());
    let _ = take(METHOD);
    let required = |v: Option<String>, key: &str| {
        v.ok_or_else(|| invalid(key, "required by sasl.oauthbearer.method=oidc"))
    };
    let endpoint = required(take(ENDPOINT), ENDPOINT)?;
    let client_id = required(take(CLIENT_ID), CLIENT_ID)?;
    let client_secret = required(take(CLIENT_SECRET), CLIENT_SECRET)?;
    let scope = take(SCOPE);
    let extensions = match take(EXTENSIONS) {
        Some(text) => parse_extensions(&text)?,
        None => Vec::new(),
    };
    let ca = take(CA);
    if !endpoint.starts_with("https://") && !endpoint.starts_with("http://") {
        return Err(invalid(ENDPOINT, "must be an http:// or https:// URL"));
    }
    let agent = agent(ca.as_deref())?;
    let source = ClientCredentials {
        endpoint,
        authorization: format!(
            "Basic {}",
            STANDARD.encode(format!("{client_id}:{client_secret}"))
        ),
        body: match &scope {
            Some(s) => format!("grant_type=client_credentials&scope={}", form_encode(s)),
            None => "grant_type=client_credentials".to_owned(),
        },
        extensions,
        agent,
    };
    Ok(Some(OAuthBearerTokenProvider::new(move || source.fetch())))
}

/// `key=value,...`; the error names the property, never a value.
fn parse_extensions(text: &str) -> Result<Vec<(String, String)>, StreamsError> {
    text.split(',')
        .filter(|item| !item.trim().is_empty())
        .map(|item| match item.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_owned(), v.trim().to_owned())),
            _ => Err(invalid(
                EXTENSIONS,
                "each extension is `key=value`, separated by commas",
            )),
        })
        .collect()
}

/// The HTTP client of the token requests, trusting the CAs of `ca` (a PEM file) if given.
fn agent(ca: Option<&str>) -> Result<ureq::Agent, StreamsError> {
    let mut tls = ureq::tls::TlsConfig::builder();
    if let Some(path) = ca {
        let pem = std::fs::read(path).map_err(|e| invalid(CA, format!("cannot read {path}: {e}")))?;
        let certs: Vec<ureq::tls::Certificate<'static>> = ureq::tls::parse_pem(&pem)
            .filter_map(|item| match item {
                Ok(ureq::tls::PemItem::Certificate(c)) => Some(c),
                _ => None,
            })
            .collect();
        if certs.is_empty() {
            return Err(invalid(CA, format!("no PEM certificate in {path}")));
        }
        tls = tls.root_certs(ureq::tls::RootCerts::new_with_certs(&certs));
    }
    Ok(ureq::Agent::config_builder()
        .timeout_global(Some(REQUEST_TIMEOUT))
        .http_status_as_error(false)
        .tls_config(tls.build())
        .build()
        .into())
}

/// The client credentials grant against one endpoint.
struct ClientCredentials {
    endpoint: String,
    /// `Basic <client id:client secret>`.
    authorization: String,
    /// The form body: the grant type and the scope.
    body: String,
    extensions: Vec<(String, String)>,
    agent: ureq::Agent,
}

impl ClientCredentials {
    /// A new token from the endpoint; the error says what failed, without the secret or
    /// the token.
    fn fetch(&self) -> Result<OAuthBearerToken, String> {
        let at = &self.endpoint;
        let response = self
            .agent
            .post(at)
            .header("Authorization", &self.authorization)
            .header("Accept", "application/json")
            .content_type("application/x-www-form-urlencoded")
            .send(&self.body)
            .map_err(|e| format!("token request to {at} failed: {e}"))?;
        let status = response.status().as_u16();
        let text = response
            .into_body()
            .read_to_string()
            .map_err(|e| format!("token response of {at} unreadable: {e}"))?;
        let json: serde_json::Value = serde_json::from_str(&text).unwrap_or(serde_json::Value::Null);
        if status != 200 {
            let code = json
                .get("error")
                .and_then(|e| e.as_str())
                .unwrap_or("no OAuth error code");
            return Err(format!("{at} answered HTTP {status} ({code})"));
        }
        let access = json
            .get("access_token")
            .and_then(|t| t.as_str())
            .ok_or_else(|| format!("{at} answered without an access_token"))?;
        let expires_in = json.get("expires_in").and_then(serde_json::Value::as_u64);
        let (principal, exp) = claims(access).map_err(|m| format!("the token of {at} {m}"))?;
        let expires_at = match (exp, expires_in) {
            (Some(exp), _) => UNIX_EPOCH + Duration::from_secs(exp),
            (None, Some(secs)) => SystemTime::now() + Duration::from_secs(secs),
            (None, None) => return Err(format!("the token of {at} has no `exp` claim and no expires_in")),
        };
        let mut token = OAuthBearerToken::new(access, principal, expires_at);
        for (k, v) in &self.extensions {
            token = token.with_extension(k, v);
        }
        Ok(token)
    }
}

/// The `sub` and `exp` claims of JWT `token`; the error never quotes the token.
fn claims(token: &str) -> Result<(String, Option<u64>), String> {
    let payload = token.split('.').nth(1).ok_or("is not a JWT (no payload part)")?;
    let bytes = URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .map_err(|_| "is not a JWT (its payload is not base64url)")?;
    let json: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|_| "is not a JWT (its payload is not JSON)")?;
    let sub = json
        .get("sub")
        .and_then(|s| s.as_str())
        .filter(|s| !s.is_empty())
        .ok_or("has no `sub` claim (the principal)")?;
    let exp = json.get("exp").and_then(|e| e.as_f64()).map(|e| e as u64);
    Ok((sub.to_owned(), exp))
}

/// `text` as an `application/x-www-form-urlencoded` value.
fn form_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'*' => out.push(b as char),
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
#[path = "oidc_tests.rs"]
mod tests;
