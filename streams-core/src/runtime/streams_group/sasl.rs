//! SASL authentication of a streams-group connection, as Kafka's clients do it:
//! `SaslHandshake` (v1) names the mechanism, then `SaslAuthenticate` requests carry the
//! mechanism's messages (rsasl computes them for PLAIN and SCRAM-SHA-256/512; OAUTHBEARER's
//! one message is [`oauth`]'s).
//!
//! Invariants: a connection authenticates right after `ApiVersions` (the one request a
//! broker answers before); when the broker gives the session a lifetime (KIP-368,
//! `connections.max.reauth.ms`), [`authenticate`] returns when to authenticate again (at
//! 85% of it, as the Java client does), and the connection does so before its next request.
//! Errors name the broker, mechanism and user, never the password.

use std::time::{Duration, Instant, SystemTime};

use kafka_protocol::messages::{
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use rsasl::prelude::{Mechname, SASLClient, SASLConfig};

use crate::model::error::StreamsError;
use crate::runtime::streams_group::oauth;
use crate::runtime::streams_group::security::{Sasl, Secret};

/// The connection an authentication runs on (`wire::Conn`).
pub(crate) trait SaslExchange {
    /// The broker's address, for errors.
    fn addr(&self) -> &str;
    /// The highest version of API `key` both sides speak within `ours`.
    fn version(&self, key: i16, ours: (i16, i16)) -> Option<i16>;
    /// Sends a `SaslHandshake` request.
    fn handshake(
        &mut self,
        req: &SaslHandshakeRequest,
        version: i16,
    ) -> Result<SaslHandshakeResponse, StreamsError>;
    /// Sends a `SaslAuthenticate` request.
    fn authenticate(
        &mut self,
        req: &SaslAuthenticateRequest,
        version: i16,
    ) -> Result<SaslAuthenticateResponse, StreamsError>;
}

/// `UNSUPPORTED_SASL_MECHANISM`.
const UNSUPPORTED_MECHANISM: i16 = 33;

/// Authenticates `conn` with `sasl`; returns when the session must be renewed, if the
/// broker limits its lifetime.
pub(crate) fn authenticate(
    conn: &mut impl SaslExchange,
    sasl: &Sasl,
) -> Result<Option<Instant>, StreamsError> {
    let started = Instant::now();
    let addr = conn.addr().to_owned();
    let refused = |message: String| StreamsError::Authentication {
        message: format!(
            "{addr} with sasl.mechanism={} as user `{}`: {message}",
            sasl.mechanism.name(),
            sasl.username
        ),
    };
    let Some(handshake_version) = conn.version(17, (1, 1)) else {
        return Err(refused("the broker offers no SaslHandshake v1".into()));
    };
    let Some(auth_version) = conn.version(36, (0, 2)) else {
        return Err(refused("the broker offers no SaslAuthenticate".into()));
    };
    let mut handshake = SaslHandshakeRequest::default();
    handshake.mechanism = StrBytes::from_static_str(sasl.mechanism.name());
    let resp = conn.handshake(&handshake, handshake_version)?;
    match resp.error_code {
        0 => {}
        UNSUPPORTED_MECHANISM => {
            let offered: Vec<&str> = resp.mechanisms.iter().map(|m| m.as_str()).collect();
            return Err(refused(format!(
                "the listener does not enable this mechanism (it offers {})",
                offered.join(", ")
            )));
        }
        code => return Err(refused(format!("SaslHandshake error {code}"))),
    }

    let lifetime_ms = match &sasl.secret {
        Secret::Password(password) => {
            let config = SASLConfig::with_credentials(None, sasl.username.clone(), password.clone())
                .map_err(|e| refused(e.to_string()))?;
            let mechname =
                Mechname::parse(sasl.mechanism.name().as_bytes()).map_err(|e| refused(e.to_string()))?;
            let mut session = SASLClient::new(config)
                .start_suggested(&[mechname])
                .map_err(|e| refused(e.to_string()))?;
            let mut input: Option<bytes::Bytes> = None;
            let mut lifetime_ms = 0;
            loop {
                let mut out = Vec::new();
                let state = session
                    .step(input.as_deref(), &mut out)
                    .map_err(|e| refused(e.to_string()))?;
                if state.has_sent_message() {
                    let resp = send(conn, out, auth_version, &refused)?;
                    lifetime_ms = resp.session_lifetime_ms;
                    input = Some(resp.auth_bytes);
                }
                if state.is_finished() {
                    break lifetime_ms;
                }
            }
        }
        Secret::UnsecuredJwt(jwt) => bearer(
            conn,
            jwt.client_message(SystemTime::now()),
            auth_version,
            &refused,
        )?,
        Secret::Token(tokens) => {
            let token = tokens
                .token()
                .map_err(|m| refused(format!("no token from the provider: {m}")))?;
            let message = oauth::client_message(token.value(), token.extensions());
            bearer(conn, message, auth_version, &refused)?
        }
    };
    tracing::debug!(
        broker = conn.addr(),
        mechanism = sasl.mechanism.name(),
        lifetime_ms,
        "authenticated"
    );
    Ok(renew_at(started, lifetime_ms))
}

/// Sends the OAUTHBEARER `message` and returns the session's lifetime (ms); a token the
/// broker refuses is an error saying why (its JSON error challenge, RFC 7628 §3.2.2, which
/// the client acknowledges before the server fails the exchange).
fn bearer(
    conn: &mut impl SaslExchange,
    message: Vec<u8>,
    auth_version: i16,
    refused: &impl Fn(String) -> StreamsError,
) -> Result<i64, StreamsError> {
    let resp = send(conn, message, auth_version, refused)?;
    if !resp.auth_bytes.is_empty() {
        let why = String::from_utf8_lossy(&resp.auth_bytes).into_owned();
        let _ = send(conn, oauth::ERROR_ACK.to_vec(), auth_version, refused);
        return Err(refused(format!("the token was refused: {why}")));
    }
    Ok(resp.session_lifetime_ms)
}

/// Sends one `SaslAuthenticate` request carrying `bytes`; a response with an error is
/// `refused`.
fn send(
    conn: &mut impl SaslExchange,
    bytes: Vec<u8>,
    version: i16,
    refused: &impl Fn(String) -> StreamsError,
) -> Result<SaslAuthenticateResponse, StreamsError> {
    let mut req = SaslAuthenticateRequest::default();
    req.auth_bytes = bytes.into();
    let resp = conn.authenticate(&req, version)?;
    if resp.error_code != 0 {
        let why = resp
            .error_message
            .as_ref()
            .map(|m| m.to_string())
            .unwrap_or_default();
        return Err(refused(format!("error {}: {why}", resp.error_code)));
    }
    Ok(resp)
}

/// When a session of `lifetime_ms` (0: unlimited) authenticated at `started` is renewed.
pub(crate) fn renew_at(started: Instant, lifetime_ms: i64) -> Option<Instant> {
    (lifetime_ms > 0).then(|| started + Duration::from_millis(lifetime_ms as u64 * 85 / 100))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limited_session_is_renewed_at_85_percent_of_its_lifetime() {
        let t = Instant::now();
        assert_eq!(renew_at(t, 0), None);
        assert_eq!(renew_at(t, -1), None);
        assert_eq!(renew_at(t, 10_000), Some(t + Duration::from_millis(8_500)));
    }
}
