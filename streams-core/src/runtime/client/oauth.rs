//! OAUTHBEARER tokens from the application's provider, handed to librdkafka clients.
//!
//! rust-rdkafka asks a client's context for a token only when something polls the client's
//! main queue, which the runtime's admin and metadata clients never do; librdkafka cannot
//! be given a refresh callback through rust-rdkafka. So each client made while a
//! [`OAuthBearerTokenProvider`] is configured is wrapped in an [`Authenticated`] client: it
//! gives librdkafka the provider's token right after the client is made (before any
//! connection of it reaches the SASL handshake, which follows TCP and TLS), and a small
//! thread of its own gives it the next token before 80% of the current one's life has
//! passed. Clients share the provider's current token, so the provider is called once per
//! token life, not once per client.
//!
//! Invariants: the refresh thread uses the client's handle only while the [`Authenticated`]
//! value that owns both is alive: the thread is stopped and joined before the client is
//! dropped (field order). A failed refresh keeps the current token while it is valid and
//! retries; once it has expired, librdkafka is told (`set_token_failure`), so the client
//! reports an authentication error instead of waiting silently. Token values never reach a
//! log line or an error.

use std::ffi::{CString, c_char};
use std::ops::Deref;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rdkafka::admin::AdminClient;
use rdkafka::bindings as rdsys;
use rdkafka::client::{ClientContext, NativeClient};
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::producer::{BaseProducer, Producer, ProducerContext, ThreadedProducer};

use crate::config::{OAuthBearerToken, OAuthBearerTokenProvider};
use crate::model::error::StreamsError;

/// How long a failed refresh waits before the next try, at most.
const RETRY_MAX: Duration = Duration::from_secs(10);

/// A librdkafka client whose native handle can be given tokens.
pub(crate) trait NativeHandle {
    /// The client's native handle.
    fn native(&self) -> &NativeClient;
}

impl<C: ConsumerContext> NativeHandle for BaseConsumer<C> {
    fn native(&self) -> &NativeClient {
        self.client().native_client()
    }
}

impl<C: ProducerContext> NativeHandle for BaseProducer<C> {
    fn native(&self) -> &NativeClient {
        self.client().native_client()
    }
}

impl<C: ProducerContext + 'static> NativeHandle for ThreadedProducer<C> {
    fn native(&self) -> &NativeClient {
        self.client().native_client()
    }
}

impl<C: ClientContext> NativeHandle for AdminClient<C> {
    fn native(&self) -> &NativeClient {
        self.inner().native_client()
    }
}

/// A client and, when the application has a token provider, the thread that keeps its
/// token fresh. Dereferences to the client.
pub(crate) struct Authenticated<C> {
    /// Declared before `client`: stopped and joined before the client is destroyed.
    _refresh: Option<TokenRefresh>,
    client: C,
}

impl<C: NativeHandle> Authenticated<C> {
    /// `client`, given `provider`'s token now and kept supplied with fresh ones (named
    /// `name` in errors and thread names); `client` alone without a provider.
    ///
    /// # Errors
    /// [`StreamsError::Authentication`] when the provider gives no token, or one librdkafka
    /// refuses (an extension name it does not allow, for instance).
    pub(crate) fn new(
        client: C,
        provider: Option<&OAuthBearerTokenProvider>,
        name: &str,
    ) -> Result<Self, StreamsError> {
        let refresh = match provider {
            Some(p) => Some(TokenRefresh::start(p.clone(), client.native(), name)?),
            None => None,
        };
        Ok(Self {
            _refresh: refresh,
            client,
        })
    }
}

impl<C> Authenticated<C> {
    /// Whether a thread keeps the client's token fresh.
    #[cfg(test)]
    pub(crate) fn has_refresh(&self) -> bool {
        self._refresh.is_some()
    }
}

impl<C> Deref for Authenticated<C> {
    type Target = C;

    fn deref(&self) -> &C {
        &self.client
    }
}

/// A client's native handle, moved to its refresh thread.
struct Handle(*mut rdsys::rd_kafka_t);

// SAFETY: librdkafka's handles may be used from any thread; `rd_kafka_oauthbearer_set_token`
// and `rd_kafka_oauthbearer_set_token_failure` take the handle's own lock. The handle
// outlives the thread (see `Authenticated`).
#[allow(unsafe_code)]
unsafe impl Send for Handle {}

/// The thread keeping one client's token fresh; stopped and joined on drop.
struct TokenRefresh {
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl TokenRefresh {
    fn start(
        provider: OAuthBearerTokenProvider,
        native: &NativeClient,
        name: &str,
    ) -> Result<Self, StreamsError> {
        let handle = Handle(native.ptr());
        let token = provider.token().map_err(|m| failed(name, &m))?;
        set_token(&handle, &token).map_err(|m| failed(name, &m))?;
        let (stop, stopped) = channel();
        let client = name.to_owned();
        let thread = std::thread::Builder::new()
            .name(format!("{name}-oauth"))
            .spawn(move || refresh_loop(&provider, &handle, token, &stopped, &client))
            .map_err(|e| StreamsError::Usage(format!("spawn the token refresh thread of {name}: {e}")))?;
        Ok(Self {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for TokenRefresh {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn failed(client: &str, message: &str) -> StreamsError {
    StreamsError::Authentication {
        message: format!("{client}: no OAUTHBEARER token: {message}"),
    }
}

/// Gives `handle` a new token before each one is due, until `stopped` says stop.
fn refresh_loop(
    provider: &OAuthBearerTokenProvider,
    handle: &Handle,
    mut token: OAuthBearerToken,
    stopped: &Receiver<()>,
    client: &str,
) {
    let mut wait = provider.refresh_in(&token);
    loop {
        match stopped.recv_timeout(wait) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
        }
        match provider.token().and_then(|t| set_token(handle, &t).map(|()| t)) {
            Ok(t) => {
                token = t;
                wait = provider.refresh_in(&token);
            }
            Err(message) => {
                let left = token
                    .expires_at()
                    .duration_since(SystemTime::now())
                    .unwrap_or_default();
                tracing::warn!(client, error = %message, left_s = left.as_secs(), "OAUTHBEARER token refresh failed");
                if left.is_zero() {
                    set_failure(handle, &message);
                }
                wait = (left / 2).clamp(Duration::from_secs(1), RETRY_MAX);
            }
        }
    }
}

/// Gives librdkafka `token` for every new authentication of `handle`'s connections.
#[allow(unsafe_code)]
fn set_token(handle: &Handle, token: &OAuthBearerToken) -> Result<(), String> {
    check(token)?;
    let nul = |what: &str| format!("the token's {what} contains a NUL byte");
    let value = CString::new(token.value()).map_err(|_| nul("value"))?;
    let principal = CString::new(token.principal()).map_err(|_| nul("principal"))?;
    let mut extensions = Vec::with_capacity(token.extensions().len() * 2);
    for (k, v) in token.extensions() {
        extensions.push(CString::new(k.as_str()).map_err(|_| nul("extension name"))?);
        extensions.push(CString::new(v.as_str()).map_err(|_| nul("extension value"))?);
    }
    let mut pointers: Vec<*const c_char> = extensions.iter().map(|c| c.as_ptr()).collect();
    let expires_ms = token
        .expires_at()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let mut errstr = [0 as c_char; 512];
    // SAFETY: the handle is alive (see `Handle`); every string is NUL-terminated and
    // outlives the call, which copies them; `pointers` holds `pointers.len()` valid
    // pointers; `errstr` is writable for its length, which is passed.
    let err = unsafe {
        rdsys::rd_kafka_oauthbearer_set_token(
            handle.0,
            value.as_ptr(),
            expires_ms,
            principal.as_ptr(),
            pointers.as_mut_ptr(),
            pointers.len(),
            errstr.as_mut_ptr(),
            errstr.len(),
        )
    };
    if err == rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
        return Ok(());
    }
    // SAFETY: librdkafka wrote a NUL-terminated message into `errstr` (zeroed before).
    let message = unsafe { std::ffi::CStr::from_ptr(errstr.as_ptr()) };
    // What remains after `check` is a lifetime in the past or a client of another
    // mechanism: librdkafka's message quotes no value then.
    Err(format!(
        "librdkafka refused the token: {}",
        message.to_string_lossy()
    ))
}

/// What librdkafka would refuse with a message quoting the value (the token itself, or an
/// extension's value), refused here without it: values of visible ASCII characters, spaces,
/// tabs, CR and LF (RFC 7628); extension names of letters, other than `auth`.
fn check(token: &OAuthBearerToken) -> Result<(), String> {
    let text = |s: &str| {
        s.bytes()
            .all(|b| (0x21..=0x7e).contains(&b) || b" \t\r\n".contains(&b))
    };
    if token.value().is_empty() || !text(token.value()) {
        return Err("the token is empty or has characters other than visible ASCII".into());
    }
    for (key, value) in token.extensions() {
        if key.is_empty() || key == "auth" || !key.bytes().all(|b| b.is_ascii_alphabetic()) {
            return Err(format!(
                "the extension name `{key}` is not letters only, or is `auth`"
            ));
        }
        if !text(value) {
            return Err(format!(
                "the value of extension `{key}` has characters other than visible ASCII"
            ));
        }
    }
    Ok(())
}

/// Tells librdkafka that no token can be had: the client reports `message` as an
/// authentication error.
#[allow(unsafe_code)]
fn set_failure(handle: &Handle, message: &str) {
    let text = CString::new(message.replace('\0', " ")).unwrap_or_default();
    // SAFETY: the handle is alive (see `Handle`); `text` is NUL-terminated and outlives the
    // call, which copies it.
    unsafe {
        rdsys::rd_kafka_oauthbearer_set_token_failure(handle.0, text.as_ptr());
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use rdkafka::ClientConfig;

    use super::*;

    fn oauth_consumer() -> BaseConsumer {
        ClientConfig::new()
            .set("bootstrap.servers", "127.0.0.1:1")
            .set("security.protocol", "SASL_PLAINTEXT")
            .set("sasl.mechanism", "OAUTHBEARER")
            .create()
            .unwrap()
    }

    /// The client gets a token at once and a fresh one before each is due; the thread
    /// stops with the client.
    #[test]
    fn the_client_is_given_a_token_and_fresh_ones() {
        let calls = Arc::new(AtomicUsize::new(0));
        let seen = calls.clone();
        let provider = OAuthBearerTokenProvider::new(move || {
            seen.fetch_add(1, Ordering::SeqCst);
            let expires = SystemTime::now() + Duration::from_millis(1500);
            Ok(OAuthBearerToken::new("header.claims.", "app", expires).with_extension("traceId", "abc"))
        });
        let client = Authenticated::new(oauth_consumer(), Some(&provider), "test consumer").unwrap();
        assert!(client.has_refresh());
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        // Due after 1.2 s, waited for at least 1 s.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while calls.load(Ordering::SeqCst) < 3 {
            assert!(std::time::Instant::now() < deadline, "no refresh");
            std::thread::sleep(Duration::from_millis(50));
        }
        drop(client);
        let after = calls.load(Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(1500));
        assert_eq!(
            calls.load(Ordering::SeqCst),
            after,
            "the thread stopped with the client"
        );
    }

    /// A token librdkafka refuses, and a provider that fails, are authentication errors
    /// naming the client, not the token.
    #[test]
    fn refused_tokens_are_authentication_errors() {
        let bad_extension = OAuthBearerTokenProvider::new(|| {
            let expires = SystemTime::now() + Duration::from_secs(60);
            Ok(OAuthBearerToken::new("secret-value", "app", expires).with_extension("auth", "x"))
        });
        let Err(e) = Authenticated::new(oauth_consumer(), Some(&bad_extension), "restore consumer") else {
            panic!("an extension named `auth` is refused");
        };
        let text = e.to_string();
        assert!(matches!(e, StreamsError::Authentication { .. }), "{e:?}");
        assert!(
            text.contains("restore consumer") && !text.contains("secret-value"),
            "{text}"
        );

        let bad_value = OAuthBearerTokenProvider::new(|| {
            let expires = SystemTime::now() + Duration::from_secs(60);
            Ok(OAuthBearerToken::new("secret\u{7f}value", "app", expires))
        });
        let Err(e) = Authenticated::new(oauth_consumer(), Some(&bad_value), "producer") else {
            panic!("a token librdkafka cannot send is refused");
        };
        assert!(!e.to_string().contains("secret"), "{e}");

        let down = OAuthBearerTokenProvider::new(|| Err("the identity provider is down".into()));
        let Err(e) = Authenticated::new(oauth_consumer(), Some(&down), "admin client") else {
            panic!("no token, no client");
        };
        assert!(e.to_string().contains("identity provider is down"), "{e}");
    }

    /// Without a provider the client is only wrapped.
    #[test]
    fn without_a_provider_nothing_runs() {
        let client = Authenticated::new(oauth_consumer(), None, "c").unwrap();
        assert!(!client.has_refresh());
    }
}
