//! A blocking client of the Confluent Schema Registry REST API, with caches.
//!
//! Each schema id costs at most one HTTP request per client (and its clones): schemas by id
//! never change, so they are cached for the life of the process. Registrations and lookups
//! are cached per subject and schema text; latest versions for `latest.cache.ttl.sec`.
//! Transport errors and 5xx answers are retried with exponential back-off, up to
//! `max.retries` times, moving on to the next URL of `schema.registry.url`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use base64::Engine as _;

use crate::config::RegistryConfig;
use crate::error::RegistryError;

mod body;
mod tls;
mod types;

use body::{
    ErrorResponse, Failure, IdResponse, Refusal, SchemaRequest, SchemaResponse, VersionResponse,
    encode_segment, json_body, parse, truncate,
};
pub use types::{RegisteredSchema, SchemaReference, SchemaType, SubjectVersion};

/// The content type of the registry's API.
const CONTENT_TYPE: &str = "application/vnd.schemaregistry.v1+json";

/// A client of a Confluent-compatible schema registry. Cheap to clone; clones share the
/// connection pool and the caches.
#[derive(Clone)]
pub struct SchemaRegistryClient {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for SchemaRegistryClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchemaRegistryClient")
            .field("urls", &self.inner.config.urls)
            .field("basic_auth", &self.inner.auth_header.as_ref().map(|_| "<set>"))
            .finish_non_exhaustive()
    }
}

type Slot<T> = Arc<Mutex<Option<T>>>;

struct Inner {
    config: RegistryConfig,
    agent: ureq::Agent,
    auth_header: Option<String>,
    next_url: AtomicUsize,
    requests: AtomicU64,
    by_id: Mutex<HashMap<u32, Slot<Arc<RegisteredSchema>>>>,
    ids: Mutex<HashMap<SchemaKey, Slot<u32>>>,
    lookups: Mutex<HashMap<SchemaKey, Slot<SubjectVersion>>>,
    latest: Mutex<HashMap<String, (Instant, SubjectVersion)>>,
}

/// A schema under a subject, as the caches of registrations and lookups key it.
type SchemaKey = (String, SchemaType, String, Vec<SchemaReference>);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs `fetch` once per key: concurrent callers for the same key wait for the first;
/// failures are not cached.
fn once<K, T>(
    map: &Mutex<HashMap<K, Slot<T>>>,
    key: K,
    fetch: impl FnOnce() -> Result<T, RegistryError>,
) -> Result<T, RegistryError>
where
    K: std::hash::Hash + Eq,
    T: Clone,
{
    let slot = Arc::clone(lock(map).entry(key).or_default());
    let mut guard = lock(&slot);
    if let Some(value) = guard.as_ref() {
        return Ok(value.clone());
    }
    let value = fetch()?;
    *guard = Some(value.clone());
    Ok(value)
}

impl SchemaRegistryClient {
    /// A client with these settings. Makes no request.
    pub fn new(config: RegistryConfig) -> Result<Self, RegistryError> {
        if config.urls.is_empty() {
            return Err(RegistryError::Config {
                property: "schema.registry.url".into(),
                message: "no URL given".into(),
            });
        }
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(config.request_timeout))
            .timeout_connect(Some(config.connect_timeout))
            .http_status_as_error(false)
            .tls_config(tls::tls_config(&config)?)
            .build()
            .into();
        let auth_header = config.basic_auth.as_ref().map(|(user, password)| {
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
            )
        });
        Ok(Self {
            inner: Arc::new(Inner {
                config,
                agent,
                auth_header,
                next_url: AtomicUsize::new(0),
                requests: AtomicU64::new(0),
                by_id: Mutex::default(),
                ids: Mutex::default(),
                lookups: Mutex::default(),
                latest: Mutex::default(),
            }),
        })
    }

    /// A client configured from properties (see [`RegistryConfig::from_properties`]).
    pub fn from_properties<K, V>(props: impl IntoIterator<Item = (K, V)>) -> Result<Self, RegistryError>
    where
        K: AsRef<str>,
        V: AsRef<str>,
    {
        Self::new(RegistryConfig::from_properties(props)?)
    }

    /// The client's settings.
    pub fn config(&self) -> &RegistryConfig {
        &self.inner.config
    }

    /// How many HTTP requests this client (and its clones) has made, retries included.
    pub fn http_requests(&self) -> u64 {
        self.inner.requests.load(Ordering::Relaxed)
    }

    /// Registers `schema` under `subject` (a new version, or the existing one when the
    /// subject already has this schema) and returns its id. Cached per subject and schema.
    ///
    /// Fails with [`RegistryError::IncompatibleSchema`] when the subject's compatibility
    /// level forbids it, with the registry's message.
    pub fn register(
        &self,
        subject: &str,
        schema_type: SchemaType,
        schema: &str,
    ) -> Result<u32, RegistryError> {
        self.register_with_references(subject, schema_type, schema, &[])
    }

    /// [`register`](Self::register) for a schema that refers to other registered schemas
    /// (a Protobuf schema's imports), each named by subject and version.
    pub fn register_with_references(
        &self,
        subject: &str,
        schema_type: SchemaType,
        schema: &str,
        references: &[SchemaReference],
    ) -> Result<u32, RegistryError> {
        let path = format!("/subjects/{}/versions", encode_segment(subject));
        let schema_ref = (subject, schema_type, schema, references);
        let read = |body: &str| Ok(parse::<IdResponse>(body)?.id);
        self.post_schema(&self.inner.ids, &path, schema_ref, read, |r| match r.status {
            409 => RegistryError::IncompatibleSchema {
                subject: subject.to_owned(),
                message: r.message,
            },
            422 => RegistryError::InvalidSchema {
                subject: subject.to_owned(),
                message: r.message,
            },
            _ => r.into_http(),
        })
    }

    /// The version of `subject` that holds `schema`, without registering it. Cached.
    ///
    /// Fails with [`RegistryError::SchemaNotRegistered`] when the subject does not hold it
    /// (or does not exist).
    pub fn lookup(
        &self,
        subject: &str,
        schema_type: SchemaType,
        schema: &str,
    ) -> Result<SubjectVersion, RegistryError> {
        self.lookup_with_references(subject, schema_type, schema, &[])
    }

    /// [`lookup`](Self::lookup) for a schema that refers to other registered schemas.
    pub fn lookup_with_references(
        &self,
        subject: &str,
        schema_type: SchemaType,
        schema: &str,
        references: &[SchemaReference],
    ) -> Result<SubjectVersion, RegistryError> {
        let path = format!("/subjects/{}", encode_segment(subject));
        let schema_ref = (subject, schema_type, schema, references);
        let read = |body: &str| {
            let mut version = parse::<VersionResponse>(body)?;
            // Some registries omit the type of a JSON or Protobuf lookup.
            if version.schema_type.is_none() {
                version.schema_type = Some(schema_type.as_str().to_owned());
            }
            version.into_version()
        };
        self.post_schema(&self.inner.lookups, &path, schema_ref, read, |r| match r.status {
            404 => RegistryError::SchemaNotRegistered {
                subject: subject.to_owned(),
                message: r.message,
            },
            _ => r.into_http(),
        })
    }

    /// Posts a schema (subject, type, text, references) to `path` once per schema, caching
    /// in `cache` what `read` makes of the answer's body; a refusal is the error `refused`
    /// makes of it. A failure is not cached.
    fn post_schema<T: Clone>(
        &self,
        cache: &Mutex<HashMap<SchemaKey, Slot<T>>>,
        path: &str,
        (subject, schema_type, schema, references): (&str, SchemaType, &str, &[SchemaReference]),
        read: impl FnOnce(&str) -> Result<T, RegistryError>,
        refused: impl FnOnce(Refusal) -> RegistryError,
    ) -> Result<T, RegistryError> {
        let key = (
            subject.to_owned(),
            schema_type,
            schema.to_owned(),
            references.to_vec(),
        );
        once(cache, key, || {
            let body = SchemaRequest::body(schema_type, schema, references)?;
            match self.request("POST", path, Some(&body)) {
                Ok(body) => read(&body),
                Err(Failure::Fatal(e)) => Err(e),
                Err(Failure::Refused(r)) => Err(refused(r)),
            }
        })
    }

    /// The schema with this id, which must be of type `expected` (what a serde of that
    /// format can read); as [`schema_by_id`](Self::schema_by_id) otherwise.
    pub(crate) fn schema_of_type(
        &self,
        id: u32,
        expected: SchemaType,
    ) -> Result<Arc<RegisteredSchema>, crate::error::RegistrySerdeError> {
        let registered = self.schema_by_id(id)?;
        if registered.schema_type != expected {
            return Err(crate::error::RegistrySerdeError::SchemaType {
                id,
                expected: expected.as_str(),
                actual: registered.schema_type.as_str().to_owned(),
            });
        }
        Ok(registered)
    }

    /// The schema with this id. One request per id and process; cached for good.
    ///
    /// Fails with [`RegistryError::UnknownSchemaId`] when the registry has no such schema.
    pub fn schema_by_id(&self, id: u32) -> Result<Arc<RegisteredSchema>, RegistryError> {
        once(&self.inner.by_id, id, || {
            match self.request("GET", &format!("/schemas/ids/{id}"), None) {
                Ok(body) => {
                    let r: SchemaResponse = parse(&body)?;
                    Ok(Arc::new(RegisteredSchema {
                        id,
                        schema_type: SchemaType::parse(r.schema_type.as_deref())?,
                        schema: r.schema,
                        references: r.references,
                    }))
                }
                Err(Failure::Fatal(e)) => Err(e),
                Err(Failure::Refused(r)) if r.status == 404 => Err(RegistryError::UnknownSchemaId { id }),
                Err(Failure::Refused(r)) => Err(r.into_http()),
            }
        })
    }

    /// The latest version of `subject`; reused for `latest.cache.ttl.sec`.
    ///
    /// Fails with [`RegistryError::SubjectNotFound`] when the subject does not exist.
    pub fn latest_version(&self, subject: &str) -> Result<SubjectVersion, RegistryError> {
        let ttl = self.inner.config.latest_cache_ttl;
        if let Some((at, version)) = lock(&self.inner.latest).get(subject)
            && ttl.is_none_or(|ttl| at.elapsed() < ttl)
        {
            return Ok(version.clone());
        }
        let path = format!("/subjects/{}/versions/latest", encode_segment(subject));
        let version = match self.request("GET", &path, None) {
            Ok(body) => parse::<VersionResponse>(&body)?.into_version()?,
            Err(Failure::Fatal(e)) => return Err(e),
            Err(Failure::Refused(r)) if r.status == 404 => {
                return Err(RegistryError::SubjectNotFound {
                    subject: subject.to_owned(),
                });
            }
            Err(Failure::Refused(r)) => return Err(r.into_http()),
        };
        lock(&self.inner.latest).insert(subject.to_owned(), (Instant::now(), version.clone()));
        Ok(version)
    }

    /// Sets the compatibility level (`BACKWARD`, `FORWARD`, `FULL`, `NONE`, ...) of
    /// `subject`, or the registry's global level when `subject` is `None`. Not cached.
    pub fn set_compatibility(&self, subject: Option<&str>, level: &str) -> Result<(), RegistryError> {
        let path = match subject {
            Some(s) => format!("/config/{}", encode_segment(s)),
            None => "/config".to_owned(),
        };
        let body = json_body(&serde_json::json!({ "compatibility": level }))?;
        match self.request("PUT", &path, Some(&body)) {
            Ok(_) => Ok(()),
            Err(Failure::Fatal(e)) => Err(e),
            Err(Failure::Refused(r)) => Err(r.into_http()),
        }
    }

    /// One request with retries. `Ok` holds the body of a 2xx answer.
    fn request(&self, method: &str, path: &str, body: Option<&str>) -> Result<String, Failure> {
        let config = &self.inner.config;
        let attempts = config.max_retries.saturating_add(1);
        let mut wait = config.retry_wait;
        let mut last = String::new();
        for attempt in 1..=attempts {
            if attempt > 1 {
                std::thread::sleep(wait);
                wait = (wait * 2).min(config.retry_max_wait);
            }
            let index = self.inner.next_url.load(Ordering::Relaxed) % config.urls.len();
            let url = format!("{}{path}", config.urls[index]);
            self.inner.requests.fetch_add(1, Ordering::Relaxed);
            match self.send(method, &url, body) {
                Ok((status, text)) if (200..300).contains(&status) => return Ok(text),
                Ok((status, text)) => {
                    let (error_code, message) = match serde_json::from_str::<ErrorResponse>(&text) {
                        Ok(ErrorResponse { error_code, message }) => (
                            error_code.unwrap_or(i64::from(status)),
                            message.unwrap_or_else(|| truncate(&text).to_owned()),
                        ),
                        Err(_) => (i64::from(status), truncate(&text).to_owned()),
                    };
                    if status < 500 {
                        return Err(Failure::Refused(Refusal {
                            status,
                            error_code,
                            message,
                        }));
                    }
                    last = format!("{method} {url}: {status} (error code {error_code}): {message}");
                }
                Err(e) => {
                    last = format!("{method} {url}: {e}");
                    self.inner.next_url.fetch_add(1, Ordering::Relaxed);
                }
            }
            tracing::debug!(attempt, attempts, error = %last, "schema registry request failed");
        }
        Err(Failure::Fatal(RegistryError::Unreachable {
            attempts,
            message: last,
        }))
    }

    fn send(&self, method: &str, url: &str, body: Option<&str>) -> Result<(u16, String), ureq::Error> {
        let agent = &self.inner.agent;
        let auth = self.inner.auth_header.as_deref();
        let body = body.unwrap_or_default();
        let response = match method {
            "GET" => with_auth(agent.get(url), auth)
                .header("Accept", CONTENT_TYPE)
                .call(),
            "PUT" => with_auth(agent.put(url), auth)
                .header("Accept", CONTENT_TYPE)
                .content_type(CONTENT_TYPE)
                .send(body),
            _ => with_auth(agent.post(url), auth)
                .header("Accept", CONTENT_TYPE)
                .content_type(CONTENT_TYPE)
                .send(body),
        }?;
        let status = response.status().as_u16();
        let text = response.into_body().read_to_string()?;
        Ok((status, text))
    }
}

fn with_auth<B>(request: ureq::RequestBuilder<B>, auth: Option<&str>) -> ureq::RequestBuilder<B> {
    match auth {
        Some(value) => request.header("Authorization", value),
        None => request,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn encodes_subjects() {
        assert_eq!(encode_segment("orders-value"), "orders-value");
        assert_eq!(encode_segment("a b/c"), "a%20b%2Fc");
    }

    /// A loopback HTTP server answering each connection with the next of `answers`
    /// (status, body), recording the requests it read.
    fn scripted(answers: Vec<(u16, &'static str)>) -> (String, std::thread::JoinHandle<Vec<String>>) {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let handle = std::thread::spawn(move || {
            let mut requests = Vec::new();
            for (status, body) in answers {
                let (mut stream, _) = listener.accept().unwrap();
                // The head, then as many body bytes as it announces.
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                loop {
                    let n = stream.read(&mut buf).unwrap();
                    request.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&request).into_owned();
                    let Some(head_end) = text.find("\r\n\r\n") else {
                        continue;
                    };
                    let length = text[..head_end]
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().to_owned())
                        })
                        .and_then(|v| v.parse::<usize>().ok())
                        .unwrap_or(0);
                    if n == 0 || request.len() >= head_end + 4 + length {
                        break;
                    }
                }
                requests.push(String::from_utf8_lossy(&request).into_owned());
                let response = format!(
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                stream.write_all(response.as_bytes()).unwrap();
            }
            requests
        });
        (url, handle)
    }

    fn quick(url: &str, max_retries: u32) -> SchemaRegistryClient {
        let mut config = RegistryConfig::from_properties([
            ("schema.registry.url", url),
            ("basic.auth.credentials.source", "USER_INFO"),
            ("basic.auth.user.info", "alice:s3cret"),
        ])
        .unwrap();
        config.max_retries = max_retries;
        config.retry_wait = Duration::from_millis(1);
        SchemaRegistryClient::new(config).unwrap()
    }

    #[test]
    fn server_errors_are_retried_then_cached() {
        let (url, server) = scripted(vec![
            (503, r#"{"error_code":50302,"message":"busy"}"#),
            (200, r#"{"schema":"\"long\""}"#),
        ]);
        let client = quick(&url, 3);
        let schema = client.schema_by_id(5).unwrap();
        assert_eq!(
            (schema.id, schema.schema_type, schema.schema.as_str()),
            (5, SchemaType::Avro, "\"long\"")
        );
        // Cached: no third request (the server would not answer it).
        assert_eq!(client.schema_by_id(5).unwrap(), schema);
        assert_eq!(client.http_requests(), 2);
        let requests = server.join().unwrap();
        assert!(requests[0].starts_with("GET /schemas/ids/5 "), "{}", requests[0]);
        // Basic authentication: base64("alice:s3cret").
        assert!(
            requests.iter().all(|r| r.contains("YWxpY2U6czNjcmV0")),
            "{requests:?}"
        );
    }

    #[test]
    fn server_errors_exhaust_the_retries() {
        let (url, server) = scripted(vec![(500, r#"{"error_code":50001,"message":"store down"}"#); 2]);
        let client = quick(&url, 1);
        let e = client.register("s", SchemaType::Json, "{}").unwrap_err();
        match e {
            RegistryError::Unreachable { attempts, message } => {
                assert_eq!(attempts, 2);
                assert!(message.contains("store down"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        let requests = server.join().unwrap();
        assert!(requests[1].contains(r#""schemaType":"JSON""#), "{}", requests[1]);
    }

    #[test]
    fn client_errors_are_not_retried() {
        let (url, server) = scripted(vec![(401, r#"{"error_code":401,"message":"Unauthorized"}"#)]);
        let client = quick(&url, 3);
        let e = client.latest_version("s").unwrap_err();
        assert_eq!(
            e,
            RegistryError::Http {
                status: 401,
                error_code: 401,
                message: "Unauthorized".into()
            }
        );
        assert_eq!(client.http_requests(), 1);
        server.join().unwrap();
    }

    #[test]
    fn unreachable_after_retries() {
        // Port 9 (discard) on loopback: nothing listens there in the test environment.
        let mut config = RegistryConfig::new("http://127.0.0.1:9");
        config.max_retries = 2;
        config.retry_wait = Duration::from_millis(1);
        let client = SchemaRegistryClient::new(config).unwrap();
        let e = client.schema_by_id(1).unwrap_err();
        assert!(matches!(e, RegistryError::Unreachable { attempts: 3, .. }), "{e}");
        assert_eq!(client.http_requests(), 3);
        // Failures are not cached: the next call asks again.
        assert!(client.schema_by_id(1).is_err());
        assert_eq!(client.http_requests(), 6);
    }
}
