//! Configuration from the property names of Confluent's clients.
//!
//! | property | meaning | default |
//! |---|---|---|
//! | `schema.registry.url` | comma-separated base URLs (e.g. `http://localhost:8081`, or Apicurio's `http://localhost:8080/apis/ccompat/v7`) | required |
//! | `basic.auth.credentials.source` | `USER_INFO` (from `basic.auth.user.info`) or `URL` (the `user:password@` of the URL) | none |
//! | `basic.auth.user.info` | `user:password` | none |
//! | `schema.registry.request.timeout.ms` | whole-request timeout | 10000 |
//! | `schema.registry.connect.timeout.ms` | connect timeout | 5000 |
//! | `max.retries` | retries after a transport error or a 5xx answer | 3 |
//! | `retries.wait.ms` | first back-off; doubles per retry | 100 |
//! | `retries.max.wait.ms` | back-off ceiling | 2000 |
//! | `schema.registry.ssl.ca.location` | PEM file of the CA certificates to trust for `https://` URLs, instead of the public roots | public roots |
//! | `schema.registry.ssl.certificate.location`, `schema.registry.ssl.key.location` | PEM files of the client certificate (chain) and its private key, for registries that require TLS client authentication | none |
//! | `latest.cache.ttl.sec` | how long `use.latest.version` trusts a fetched latest version; `-1` forever | -1 |
//! | `auto.register.schemas` | register the serde's schema on first use | true |
//! | `use.latest.version` | write with the subject's latest schema instead | false |
//! | `key.subject.name.strategy` / `value.subject.name.strategy` | `TopicNameStrategy`, `RecordNameStrategy`, `TopicRecordNameStrategy` (short or Java class names) | `TopicNameStrategy` |
//!
//! Every property may also carry the `schema.registry.` prefix the Java client accepts for
//! some of them (`schema.registry.basic.auth.user.info`). Properties this crate does not know
//! are ignored, so one map can hold the Kafka client's properties too. For that reason the
//! TLS files are read only under their `schema.registry.` names: a bare `ssl.ca.location`
//! is the broker connection's.

use std::path::PathBuf;
use std::time::Duration;

use crate::error::RegistryError;

/// The settings of a [`SchemaRegistryClient`](crate::SchemaRegistryClient). Its `Debug`
/// output shows the basic-auth user but never the password.
#[derive(Clone, PartialEq, Eq)]
pub struct RegistryConfig {
    /// Base URLs of the registry; a request that fails in transport moves on to the next.
    pub urls: Vec<String>,
    /// `user` and `password` for HTTP basic authentication.
    pub basic_auth: Option<(String, String)>,
    /// Timeout of a whole request (connect, send, answer).
    pub request_timeout: Duration,
    /// Timeout of establishing a connection.
    pub connect_timeout: Duration,
    /// Retries after a transport error or a 5xx answer; a request is tried at most
    /// `max_retries + 1` times.
    pub max_retries: u32,
    /// Back-off before the first retry; doubles per retry up to `retry_max_wait`.
    pub retry_wait: Duration,
    /// The longest back-off between two attempts.
    pub retry_max_wait: Duration,
    /// How long a fetched latest version of a subject is reused; `None` forever.
    pub latest_cache_ttl: Option<Duration>,
    /// PEM file of the CA certificates trusted for `https://` URLs; `None`: the public
    /// roots (Mozilla's list).
    pub ssl_ca_location: Option<PathBuf>,
    /// PEM files of a client certificate chain and its private key (TLS client
    /// authentication); both or neither.
    pub ssl_client_cert: Option<(PathBuf, PathBuf)>,
}

impl std::fmt::Debug for RegistryConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryConfig")
            .field("urls", &self.urls)
            .field(
                "basic_auth",
                &self.basic_auth.as_ref().map(|(user, _)| (user, "<redacted>")),
            )
            .field("request_timeout", &self.request_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("max_retries", &self.max_retries)
            .field("retry_wait", &self.retry_wait)
            .field("retry_max_wait", &self.retry_max_wait)
            .field("latest_cache_ttl", &self.latest_cache_ttl)
            .field("ssl_ca_location", &self.ssl_ca_location)
            .field("ssl_client_cert", &self.ssl_client_cert)
            .finish()
    }
}

impl RegistryConfig {
    /// Settings for a registry at `url` (one URL or a comma-separated list), with the defaults
    /// of the table in the [module docs](self).
    pub fn new(url: &str) -> Self {
        Self {
            urls: split_urls(url),
            basic_auth: None,
            request_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(5),
            max_retries: 3,
            retry_wait: Duration::from_millis(100),
            retry_max_wait: Duration::from_secs(2),
            latest_cache_ttl: None,
            ssl_ca_location: None,
            ssl_client_cert: None,
        }
    }

    /// Settings from client properties (see the [module docs](self)).
    pub fn from_properties<K, V>(props: impl IntoIterator<Item = (K, V)>) -> Result<Self, RegistryError>
    where
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let props = Props::collect(props);
        let url = props
            .get("schema.registry.url")
            .ok_or_else(|| RegistryError::Config {
                property: "schema.registry.url".into(),
                message: "required".into(),
            })?;
        let mut config = Self::new(url);
        if config.urls.is_empty() {
            return Err(config_error("schema.registry.url", "no URL given"));
        }
        let source = props
            .get("basic.auth.credentials.source")
            .map(str::to_ascii_uppercase);
        match source.as_deref() {
            None | Some("USER_INFO") => {
                if let Some(info) = props.get("basic.auth.user.info") {
                    config.basic_auth = Some(split_user_info(info, "basic.auth.user.info")?);
                } else if source.is_some() {
                    return Err(config_error(
                        "basic.auth.user.info",
                        "required when basic.auth.credentials.source is USER_INFO",
                    ));
                }
            }
            Some("URL") => {
                let mut auth = None;
                for url in &mut config.urls {
                    if let Some((user_info, bare)) = take_url_user_info(url) {
                        auth = Some(split_user_info(&user_info, "schema.registry.url")?);
                        *url = bare;
                    }
                }
                config.basic_auth = Some(auth.ok_or_else(|| {
                    config_error(
                        "schema.registry.url",
                        "basic.auth.credentials.source is URL but the URL has no user:password@",
                    )
                })?);
            }
            Some(other) => {
                return Err(config_error(
                    "basic.auth.credentials.source",
                    &format!("`{other}` is not supported (USER_INFO or URL)"),
                ));
            }
        }
        if let Some(ms) = props.number("schema.registry.request.timeout.ms")? {
            config.request_timeout = Duration::from_millis(ms);
        }
        if let Some(ms) = props.number("schema.registry.connect.timeout.ms")? {
            config.connect_timeout = Duration::from_millis(ms);
        }
        if let Some(n) = props.number("max.retries")? {
            config.max_retries = u32::try_from(n).map_err(|_| config_error("max.retries", "too large"))?;
        }
        if let Some(ms) = props.number("retries.wait.ms")? {
            config.retry_wait = Duration::from_millis(ms);
        }
        if let Some(ms) = props.number("retries.max.wait.ms")? {
            config.retry_max_wait = Duration::from_millis(ms);
        }
        if let Some(ttl) = props.get("latest.cache.ttl.sec") {
            let ttl: i64 = ttl
                .trim()
                .parse()
                .map_err(|_| config_error("latest.cache.ttl.sec", "not an integer"))?;
            config.latest_cache_ttl = u64::try_from(ttl).ok().map(Duration::from_secs);
        }
        config.ssl_ca_location = props.get(SSL_CA).map(PathBuf::from);
        config.ssl_client_cert = match (props.get(SSL_CERTIFICATE), props.get(SSL_KEY)) {
            (None, None) => None,
            (Some(cert), Some(key)) => Some((PathBuf::from(cert), PathBuf::from(key))),
            (Some(_), None) => {
                return Err(config_error(SSL_KEY, &format!("required with {SSL_CERTIFICATE}")));
            }
            (None, Some(_)) => {
                return Err(config_error(SSL_CERTIFICATE, &format!("required with {SSL_KEY}")));
            }
        };
        Ok(config)
    }
}

/// The trusted CAs' property.
pub(crate) const SSL_CA: &str = "schema.registry.ssl.ca.location";
/// The client certificate's property.
pub(crate) const SSL_CERTIFICATE: &str = "schema.registry.ssl.certificate.location";
/// The client key's property.
pub(crate) const SSL_KEY: &str = "schema.registry.ssl.key.location";

/// Whether a serde writes a record's key or its value (the topic name strategy's subject
/// suffix, and which `*.subject.name.strategy` property applies).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecordPart {
    /// The record's key: subject `<topic>-key`.
    Key,
    /// The record's value: subject `<topic>-value`.
    Value,
}

/// How a serializer names the subject it registers or looks up its schema under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SubjectNameStrategy {
    /// `<topic>-key` or `<topic>-value` (Confluent's `TopicNameStrategy`).
    #[default]
    Topic,
    /// The record's fully qualified name (`RecordNameStrategy`).
    Record,
    /// `<topic>-<fully qualified record name>` (`TopicRecordNameStrategy`).
    TopicRecord,
}

impl SubjectNameStrategy {
    /// Parses a strategy: its short name (`TopicNameStrategy`, `topic`, `record`,
    /// `topic_record`, ...) or its Java class name.
    pub fn parse(name: &str) -> Option<Self> {
        let short = name
            .rsplit('.')
            .next()
            .unwrap_or(name)
            .to_ascii_lowercase()
            .replace(['_', '-'], "");
        match short.as_str() {
            "topicnamestrategy" | "topic" => Some(Self::Topic),
            "recordnamestrategy" | "record" => Some(Self::Record),
            "topicrecordnamestrategy" | "topicrecord" => Some(Self::TopicRecord),
            _ => None,
        }
    }

    /// The subject for a record of `topic`, key or value, whose schema's fully qualified
    /// record name is `record_name` (needed by the record strategies only).
    pub fn subject(self, topic: &str, part: RecordPart, record_name: Option<&str>) -> Result<String, String> {
        let name = || {
            record_name.ok_or_else(|| {
                format!(
                    "{self:?} needs a named record schema (an Avro record, or a JSON schema with a title)"
                )
            })
        };
        Ok(match self {
            Self::Topic => match part {
                RecordPart::Key => format!("{topic}-key"),
                RecordPart::Value => format!("{topic}-value"),
            },
            Self::Record => name()?.to_owned(),
            Self::TopicRecord => format!("{topic}-{}", name()?),
        })
    }
}

/// The settings of one serde (a key serde or a value serde).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SerdeConfig {
    /// Register the serde's schema under its subject on first use (otherwise look it up,
    /// and fail when it is not registered).
    pub auto_register_schemas: bool,
    /// Serialize with the subject's latest registered schema rather than the serde's own.
    pub use_latest_version: bool,
    /// How the subject is named.
    pub subject_name_strategy: SubjectNameStrategy,
    /// JSON Schema serdes validate each value against its schema, when writing (the
    /// serde's schema) and when reading (the record's writer schema), and refuse one that
    /// does not conform (`json.fail.invalid.schema`). Other serdes ignore it.
    pub json_fail_invalid_schema: bool,
}

impl Default for SerdeConfig {
    fn default() -> Self {
        Self {
            auto_register_schemas: true,
            use_latest_version: false,
            subject_name_strategy: SubjectNameStrategy::Topic,
            json_fail_invalid_schema: false,
        }
    }
}

impl SerdeConfig {
    /// Settings from client properties, for a key serde or a value serde (which picks
    /// `key.subject.name.strategy` or `value.subject.name.strategy`).
    pub fn from_properties<K, V>(
        props: impl IntoIterator<Item = (K, V)>,
        part: RecordPart,
    ) -> Result<Self, RegistryError>
    where
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let props = Props::collect(props);
        let mut config = Self::default();
        if let Some(v) = props.boolean("auto.register.schemas")? {
            config.auto_register_schemas = v;
        }
        if let Some(v) = props.boolean("use.latest.version")? {
            config.use_latest_version = v;
        }
        if let Some(v) = props.boolean("json.fail.invalid.schema")? {
            config.json_fail_invalid_schema = v;
        }
        let property = match part {
            RecordPart::Key => "key.subject.name.strategy",
            RecordPart::Value => "value.subject.name.strategy",
        };
        if let Some(name) = props.get(property) {
            config.subject_name_strategy = SubjectNameStrategy::parse(name)
                .ok_or_else(|| config_error(property, &format!("unknown subject name strategy `{name}`")))?;
        }
        Ok(config)
    }
}

struct Props(Vec<(String, String)>);

impl Props {
    fn collect<K: AsRef<str>, V: AsRef<str>>(props: impl IntoIterator<Item = (K, V)>) -> Self {
        Self(
            props
                .into_iter()
                .map(|(k, v)| (k.as_ref().to_owned(), v.as_ref().to_owned()))
                .collect(),
        )
    }

    /// The value of `name`, or of `schema.registry.<name>`; the last one given wins.
    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| k == name || k.strip_prefix("schema.registry.") == Some(name))
            .map(|(_, v)| v.as_str())
    }

    fn number(&self, name: &str) -> Result<Option<u64>, RegistryError> {
        self.get(name)
            .map(|v| {
                v.trim()
                    .parse()
                    .map_err(|_| config_error(name, &format!("`{v}` is not a non-negative integer")))
            })
            .transpose()
    }

    fn boolean(&self, name: &str) -> Result<Option<bool>, RegistryError> {
        self.get(name)
            .map(|v| match v.trim().to_ascii_lowercase().as_str() {
                "true" => Ok(true),
                "false" => Ok(false),
                _ => Err(config_error(name, &format!("`{v}` is not true or false"))),
            })
            .transpose()
    }
}

fn config_error(property: &str, message: &str) -> RegistryError {
    RegistryError::Config {
        property: property.into(),
        message: message.into(),
    }
}

fn split_urls(urls: &str) -> Vec<String> {
    urls.split(',')
        .map(|u| u.trim().trim_end_matches('/').to_owned())
        .filter(|u| !u.is_empty())
        .collect()
}

fn split_user_info(info: &str, property: &str) -> Result<(String, String), RegistryError> {
    info.split_once(':')
        .map(|(u, p)| (u.to_owned(), p.to_owned()))
        .ok_or_else(|| config_error(property, "user info must be user:password"))
}

/// `http://user:pw@host/x` -> (`user:pw`, `http://host/x`).
fn take_url_user_info(url: &str) -> Option<(String, String)> {
    let (scheme, rest) = url.split_once("://")?;
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (user_info, host) = rest[..authority_end].rsplit_once('@')?;
    Some((
        user_info.to_owned(),
        format!("{scheme}://{host}{}", &rest[authority_end..]),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_properties() {
        let c = RegistryConfig::from_properties([
            ("schema.registry.url", "http://a:1/, http://b:2"),
            ("basic.auth.credentials.source", "USER_INFO"),
            ("schema.registry.basic.auth.user.info", "me:se:cret"),
            ("max.retries", "5"),
            ("bootstrap.servers", "ignored:9092"),
        ])
        .unwrap();
        assert_eq!(c.urls, ["http://a:1", "http://b:2"]);
        assert_eq!(c.basic_auth, Some(("me".into(), "se:cret".into())));
        assert_eq!(c.max_retries, 5);
    }

    #[test]
    fn url_credentials() {
        let c = RegistryConfig::from_properties([
            (
                "schema.registry.url",
                "https://u:s3cret-pw@host:8081/apis/ccompat/v7",
            ),
            ("basic.auth.credentials.source", "URL"),
        ])
        .unwrap();
        assert_eq!(c.urls, ["https://host:8081/apis/ccompat/v7"]);
        assert_eq!(c.basic_auth, Some(("u".into(), "s3cret-pw".into())));
        let shown = format!("{c:?}");
        assert!(shown.contains("\"u\"") && !shown.contains("s3cret"), "{shown}");
    }

    #[test]
    fn config_errors_name_the_property() {
        let e = RegistryConfig::from_properties([("x", "y")]).unwrap_err();
        assert!(matches!(e, RegistryError::Config { ref property, .. } if property == "schema.registry.url"));
        let e =
            RegistryConfig::from_properties([("schema.registry.url", "http://a"), ("max.retries", "many")])
                .unwrap_err();
        assert!(matches!(e, RegistryError::Config { ref property, .. } if property == "max.retries"));
        let e = SerdeConfig::from_properties([("value.subject.name.strategy", "Nope")], RecordPart::Value)
            .unwrap_err();
        assert!(e.to_string().contains("value.subject.name.strategy"));
    }

    #[test]
    fn serde_properties() {
        let props = [
            ("auto.register.schemas", "false"),
            ("use.latest.version", "true"),
            (
                "value.subject.name.strategy",
                "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy",
            ),
        ];
        let v = SerdeConfig::from_properties(props, RecordPart::Value).unwrap();
        assert!(!v.auto_register_schemas && v.use_latest_version && !v.json_fail_invalid_schema);
        assert_eq!(v.subject_name_strategy, SubjectNameStrategy::TopicRecord);
        let k = SerdeConfig::from_properties(props, RecordPart::Key).unwrap();
        assert_eq!(k.subject_name_strategy, SubjectNameStrategy::Topic);
        let j =
            SerdeConfig::from_properties([("json.fail.invalid.schema", "true")], RecordPart::Value).unwrap();
        assert!(j.json_fail_invalid_schema);
        let e = SerdeConfig::from_properties([("json.fail.invalid.schema", "yes please")], RecordPart::Value)
            .unwrap_err();
        assert!(e.to_string().contains("json.fail.invalid.schema"), "{e}");
    }

    #[test]
    fn subjects() {
        use SubjectNameStrategy::*;
        assert_eq!(Topic.subject("t", RecordPart::Key, None).unwrap(), "t-key");
        assert_eq!(
            Topic.subject("t", RecordPart::Value, Some("a.B")).unwrap(),
            "t-value"
        );
        assert_eq!(
            Record.subject("t", RecordPart::Value, Some("a.B")).unwrap(),
            "a.B"
        );
        assert_eq!(
            TopicRecord.subject("t", RecordPart::Key, Some("a.B")).unwrap(),
            "t-a.B"
        );
        assert!(Record.subject("t", RecordPart::Value, None).is_err());
    }
}
