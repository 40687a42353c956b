//! Validation: from the raw properties to a [`StreamsConfig`].

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use strsim::levenshtein;

use super::{ProcessingGuarantee, Scope, StreamsConfig, invalid, keys};
use crate::model::RecordingLevel;
use crate::model::error::StreamsError;
use crate::model::handlers::ErrorHandling;

/// The property value naming `handling`.
pub(super) fn handling_name(handling: ErrorHandling) -> &'static str {
    match handling {
        ErrorHandling::LogAndContinue => "log_and_continue",
        ErrorHandling::LogAndFail => "log_and_fail",
        ErrorHandling::DeadLetterQueue => "dead_letter_queue",
    }
}

/// Validates `originals` (trimmed keys and values). `state_dir`, when given, replaces
/// `state.dir` (the builder's typed path, which need not be UTF-8).
pub(super) fn validate(
    originals: BTreeMap<String, String>,
    state_dir: Option<PathBuf>,
) -> Result<StreamsConfig, StreamsError> {
    let mut client: BTreeMap<Scope, BTreeMap<String, String>> = BTreeMap::new();
    let mut ignored = BTreeSet::new();
    for (key, value) in &originals {
        match classify(key)? {
            Class::Streams => {}
            Class::Unsupported => {
                tracing::warn!(property = %key, "ignoring a Kafka Streams property this framework does not support");
                ignored.insert(key.clone());
            }
            Class::Client(scope, name) => {
                client
                    .entry(scope)
                    .or_default()
                    .insert(name.to_owned(), value.clone());
            }
        }
    }

    // The Java clients' TLS and SASL properties, as librdkafka takes them.
    for (scope, props) in &mut client {
        super::security::translate(scope.prefix(), props)?;
    }

    let get = |key: &str| originals.get(key).map(String::as_str);
    // The value of the first of `names` that is set, and the name it was set under.
    let first = |names: &[&'static str]| names.iter().find_map(|&n| get(n).map(|v| (n, v)));

    let application_id = application_id(get(keys::APPLICATION_ID))?;
    let bootstrap_servers = get(keys::BOOTSTRAP_SERVERS)
        .map(|v| non_empty(keys::BOOTSTRAP_SERVERS, v))
        .transpose()?;
    let num_stream_threads = match get(keys::NUM_STREAM_THREADS) {
        Some(v) => to_usize(keys::NUM_STREAM_THREADS, integer(keys::NUM_STREAM_THREADS, v, 1)?)?,
        None => StreamsConfig::DEFAULT_NUM_STREAM_THREADS,
    };
    let processing_guarantee = match get(keys::PROCESSING_GUARANTEE) {
        Some(v) => v.parse()?,
        None => ProcessingGuarantee::default(),
    };
    let commit_interval = match get(keys::COMMIT_INTERVAL_MS) {
        Some(v) => millis(keys::COMMIT_INTERVAL_MS, v)?,
        None => processing_guarantee.default_commit_interval(),
    };
    let state_dir = match (state_dir, get(keys::STATE_DIR)) {
        (Some(path), _) if path.as_os_str().is_empty() => {
            return Err(invalid(keys::STATE_DIR, "must not be empty"));
        }
        (Some(path), _) => path,
        (None, Some(v)) => PathBuf::from(non_empty(keys::STATE_DIR, v)?),
        (None, None) => std::env::temp_dir().join("streams-rs"),
    };
    let cache_max_bytes = match first(&[keys::STATESTORE_CACHE_MAX_BYTES, keys::CACHE_MAX_BYTES_BUFFERING]) {
        Some((key, v)) => {
            if key == keys::CACHE_MAX_BYTES_BUFFERING {
                tracing::warn!(
                    "`{key}` is deprecated; use `{}`",
                    keys::STATESTORE_CACHE_MAX_BYTES
                );
            }
            to_usize(key, integer(key, v, 0)?)?
        }
        None => StreamsConfig::DEFAULT_CACHE_MAX_BYTES,
    };
    let handler = |names: &[&'static str]| -> Result<(ErrorHandling, &'static str), StreamsError> {
        match first(names) {
            Some((key, v)) => Ok((parse_handler(key, v)?, key)),
            None => Ok((ErrorHandling::default(), names[0])),
        }
    };
    let deserialization = handler(&[
        keys::DESERIALIZATION_EXCEPTION_HANDLER,
        keys::DEFAULT_DESERIALIZATION_EXCEPTION_HANDLER,
    ])?;
    let processing = handler(&[keys::PROCESSING_EXCEPTION_HANDLER])?;
    let production = handler(&[
        keys::PRODUCTION_EXCEPTION_HANDLER,
        keys::DEFAULT_PRODUCTION_EXCEPTION_HANDLER,
    ])?;
    let dead_letter_topic = get(keys::DEAD_LETTER_QUEUE_TOPIC_NAME)
        .map(|v| topic_name(keys::DEAD_LETTER_QUEUE_TOPIC_NAME, v))
        .transpose()?;
    if dead_letter_topic.is_none() {
        for (handling, key) in [deserialization, processing, production] {
            if handling == ErrorHandling::DeadLetterQueue {
                return Err(invalid(
                    key,
                    format!(
                        "`dead_letter_queue` needs a dead-letter topic: set `{}`",
                        keys::DEAD_LETTER_QUEUE_TOPIC_NAME
                    ),
                ));
            }
        }
    }
    let metrics_address = get(keys::METRICS_ADDRESS)
        .map(|v| {
            v.parse::<SocketAddr>().map_err(|e| {
                invalid(
                    keys::METRICS_ADDRESS,
                    format!("`{v}` is not a socket address such as 127.0.0.1:9464 ({e})"),
                )
            })
        })
        .transpose()?;
    let application_server = get(keys::APPLICATION_SERVER)
        .map(|v| application_server(v).map_err(|m| invalid(keys::APPLICATION_SERVER, m)))
        .transpose()?;
    let recording_level = match get(keys::METRICS_RECORDING_LEVEL) {
        Some(v) => match v.to_ascii_uppercase().as_str() {
            "INFO" => RecordingLevel::Info,
            "DEBUG" | "TRACE" => RecordingLevel::Debug,
            _ => {
                return Err(invalid(
                    keys::METRICS_RECORDING_LEVEL,
                    format!("`{v}` is not one of INFO, DEBUG, TRACE"),
                ));
            }
        },
        None => RecordingLevel::Info,
    };
    let poll_interval = match get(keys::POLL_MS) {
        Some(v) => millis(keys::POLL_MS, v)?,
        None => Duration::from_millis(StreamsConfig::DEFAULT_POLL_MS),
    };
    let repartition_purge_interval = match get(keys::REPARTITION_PURGE_INTERVAL_MS) {
        Some(v) => millis(keys::REPARTITION_PURGE_INTERVAL_MS, v)?,
        None => Duration::from_millis(StreamsConfig::DEFAULT_REPARTITION_PURGE_INTERVAL_MS),
    };
    let max_poll_records = max_poll_records(get(keys::MAX_POLL_RECORDS), &mut client)?;
    let max_task_idle = match get(keys::MAX_TASK_IDLE_MS) {
        Some(v) => match integer(keys::MAX_TASK_IDLE_MS, v, -1)? {
            -1 => None,
            ms => Some(Duration::from_millis(ms.unsigned_abs())),
        },
        None => Some(Duration::ZERO),
    };
    let num_standby_replicas = match get(keys::NUM_STANDBY_REPLICAS) {
        Some(v) => to_usize(
            keys::NUM_STANDBY_REPLICAS,
            integer(keys::NUM_STANDBY_REPLICAS, v, 0)?,
        )?,
        None => 0,
    };
    assignment_strategy(&client, num_standby_replicas)?;
    // librdkafka knows no `streams` protocol: the runtime's own group member implements it,
    // and no client is given the setting.
    let mut streams_protocol = false;
    for scope in [Scope::Common, Scope::Consumer, Scope::MainConsumer] {
        if let Some(props) = client.get_mut(&scope)
            && props
                .get("group.protocol")
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("streams"))
        {
            props.remove("group.protocol");
            streams_protocol = true;
        }
    }
    let replication_factor = match get(keys::REPLICATION_FACTOR) {
        Some(v) => match integer(keys::REPLICATION_FACTOR, v, i64::MIN)? {
            -1 => -1,
            n if n >= 1 => i32::try_from(n).map_err(|_| invalid(keys::REPLICATION_FACTOR, "is too large"))?,
            n => {
                return Err(invalid(
                    keys::REPLICATION_FACTOR,
                    format!("must be -1 (the broker's default) or at least 1, got {n}"),
                ));
            }
        },
        None => StreamsConfig::DEFAULT_REPLICATION_FACTOR,
    };
    let bytes = |key: &str, default: usize| match get(key) {
        Some(v) => to_usize(key, integer(key, v, 1)?),
        None => Ok(default),
    };
    let rocksdb_block_cache_bytes = bytes(
        keys::ROCKSDB_BLOCK_CACHE_BYTES,
        StreamsConfig::DEFAULT_ROCKSDB_BLOCK_CACHE_BYTES,
    )?;
    let rocksdb_write_buffer_bytes = bytes(
        keys::ROCKSDB_WRITE_BUFFER_BYTES,
        StreamsConfig::DEFAULT_ROCKSDB_WRITE_BUFFER_BYTES,
    )?;
    if rocksdb_write_buffer_bytes > rocksdb_block_cache_bytes {
        // The memtables are charged to the block cache: they cannot have more than all of it.
        let key = if get(keys::ROCKSDB_WRITE_BUFFER_BYTES).is_some() {
            keys::ROCKSDB_WRITE_BUFFER_BYTES
        } else {
            keys::ROCKSDB_BLOCK_CACHE_BYTES
        };
        return Err(invalid(
            key,
            format!(
                "`{}` ({rocksdb_write_buffer_bytes}) must not exceed `{}` ({rocksdb_block_cache_bytes}): \
                 the memtables are charged to the block cache",
                keys::ROCKSDB_WRITE_BUFFER_BYTES,
                keys::ROCKSDB_BLOCK_CACHE_BYTES
            ),
        ));
    }

    let config = StreamsConfig {
        application_id,
        bootstrap_servers,
        num_stream_threads,
        processing_guarantee,
        commit_interval,
        state_dir,
        cache_max_bytes,
        deserialization_handler: deserialization.0,
        processing_handler: processing.0,
        production_handler: production.0,
        dead_letter_topic,
        metrics_address,
        application_server,
        recording_level,
        poll_interval,
        repartition_purge_interval,
        max_poll_records,
        max_task_idle,
        replication_factor,
        num_standby_replicas,
        streams_protocol,
        rocksdb_block_cache_bytes,
        rocksdb_write_buffer_bytes,
        rocksdb_config_setter: None,
        oauth_bearer_token_provider: super::oidc::provider(&mut client)?,
        client,
        ignored,
        originals,
    };
    if config.oauth_bearer_token_provider.is_some() {
        super::oauth::check(&config)?;
    }
    Ok(config)
}

/// `max.poll.records`, from the streams property or the (main) consumer's, which win; the
/// name is taken out of the client properties, since librdkafka has no such property. The
/// restore and global consumers read in batches of their own, so it is refused there.
fn max_poll_records(
    streams: Option<&str>,
    client: &mut BTreeMap<Scope, BTreeMap<String, String>>,
) -> Result<usize, StreamsError> {
    const NAME: &str = "max.poll.records";
    let mut value = streams.map(|v| (keys::MAX_POLL_RECORDS.to_owned(), v.to_owned()));
    for scope in [Scope::Common, Scope::Consumer, Scope::MainConsumer] {
        if let Some(v) = client.get_mut(&scope).and_then(|m| m.remove(NAME)) {
            value = Some((format!("{}{NAME}", scope.prefix()), v));
        }
    }
    for scope in [
        Scope::RestoreConsumer,
        Scope::GlobalConsumer,
        Scope::Producer,
        Scope::Admin,
    ] {
        if client.get(&scope).is_some_and(|m| m.contains_key(NAME)) {
            return Err(invalid(
                &format!("{}{NAME}", scope.prefix()),
                "only the stream threads' main consumer takes `max.poll.records`",
            ));
        }
    }
    match value {
        Some((key, v)) => to_usize(&key, integer(&key, &v, 1)?),
        None => Ok(StreamsConfig::DEFAULT_MAX_POLL_RECORDS),
    }
}

/// The main consumer's group protocol and what goes with it. The classic and consumer
/// protocols assign with `range`, which keeps co-partitioned topics together; another
/// strategy would break joins and aggregations silently, so it is refused. With
/// `group.protocol=consumer` (KIP-848) the broker assigns (`group.remote.assignor`) and
/// owns the session timeout and heartbeat interval, which librdkafka then refuses to take.
/// With `group.protocol=streams` (KIP-1071) the broker assigns tasks, standbys included;
/// the session timeout and heartbeat interval become the group's settings. Standby
/// replicas need the streams protocol.
fn assignment_strategy(
    client: &BTreeMap<Scope, BTreeMap<String, String>>,
    num_standby_replicas: usize,
) -> Result<(), StreamsError> {
    const MAIN: [Scope; 3] = [Scope::Common, Scope::Consumer, Scope::MainConsumer];
    // The main consumer's value of `name` (the most specific scope wins), with the name
    // it was set under.
    let effective = |name: &str| {
        MAIN.iter().rev().find_map(|scope| {
            client
                .get(scope)
                .and_then(|m| m.get(name))
                .map(|v| (format!("{}{name}", scope.prefix()), v.trim().to_owned()))
        })
    };
    let protocol = effective("group.protocol");
    if let Some((key, v)) = &protocol
        && !["classic", "consumer", "streams"]
            .iter()
            .any(|p| v.eq_ignore_ascii_case(p))
    {
        return Err(invalid(
            key,
            format!("`{v}` is not one of classic, consumer, streams"),
        ));
    }
    let is = |p: &str| protocol.as_ref().is_some_and(|(_, v)| v.eq_ignore_ascii_case(p));
    if num_standby_replicas > 0
        && let Some((key, v)) = protocol.as_ref().filter(|_| !is("streams"))
    {
        return Err(invalid(
            keys::NUM_STANDBY_REPLICAS,
            format!(
                "standby replicas need group.protocol=streams, where the broker places them; \
                 `{key}` is `{v}`"
            ),
        ));
    }
    let not_range = |key: String, v: String| {
        invalid(
            &key,
            format!(
                "`{v}` is not supported: stream threads assign partitions with `range`, which keeps \
                 co-partitioned topics on the same task"
            ),
        )
    };
    for name in ["partition.assignment.strategy", "group.remote.assignor"] {
        if let Some((key, v)) = effective(name) {
            if is("streams") || num_standby_replicas > 0 {
                return Err(invalid(
                    &key,
                    "not taken with group.protocol=streams: the broker assigns the tasks",
                ));
            }
            if v != "range" {
                return Err(not_range(key, v));
            }
        }
    }
    if is("consumer") {
        for name in [
            "session.timeout.ms",
            "heartbeat.interval.ms",
            "partition.assignment.strategy",
        ] {
            if let Some((key, _)) = effective(name) {
                return Err(invalid(
                    &key,
                    "not taken with group.protocol=consumer: the broker sets it (group.consumer.session.timeout.ms, \
                     group.consumer.heartbeat.interval.ms; the assignor is group.remote.assignor=range)",
                ));
            }
        }
    }
    Ok(())
}

/// What a property is.
enum Class<'a> {
    /// Interpreted by [`StreamsConfig`] itself.
    Streams,
    /// A Kafka Streams property this framework does not implement.
    Unsupported,
    /// A client property, for the clients of the scope, named as given (prefix stripped).
    Client(Scope, &'a str),
}

fn classify(key: &str) -> Result<Class<'_>, StreamsError> {
    if key.is_empty() {
        return Err(invalid(key, "empty property name"));
    }
    if keys::STREAMS.contains(&key) {
        return Ok(Class::Streams);
    }
    if keys::UNSUPPORTED.contains(&key) {
        return Ok(Class::Unsupported);
    }
    if key.starts_with(keys::ROCKSDB_PREFIX) {
        // No client has RocksDB properties: an unknown one is a typo, never passed on.
        let hint = suggestion_among(
            key,
            &[keys::ROCKSDB_BLOCK_CACHE_BYTES, keys::ROCKSDB_WRITE_BUFFER_BYTES],
            6,
        )
        .map(|k| format!("did you mean `{k}`? "))
        .unwrap_or_default();
        return Err(invalid(
            key,
            format!(
                "unknown property; {hint}the RocksDB properties are `{}` and `{}`",
                keys::ROCKSDB_BLOCK_CACHE_BYTES,
                keys::ROCKSDB_WRITE_BUFFER_BYTES
            ),
        ));
    }
    for scope in Scope::PREFIXED {
        if let Some(name) = key.strip_prefix(scope.prefix()) {
            if name.is_empty() {
                return Err(invalid(
                    key,
                    "a client prefix must be followed by a property name",
                ));
            }
            return Ok(Class::Client(scope, name));
        }
    }
    if key.contains('.') {
        // A near miss of a streams property is a typo, not a client property.
        return match suggestion(key, 2) {
            Some(known) => Err(invalid(key, format!("unknown property; did you mean `{known}`?"))),
            None => Ok(Class::Client(Scope::Common, key)),
        };
    }
    if keys::DOTLESS_CLIENT.contains(&key) {
        return Ok(Class::Client(Scope::Common, key));
    }
    let hint = suggestion(key, 3)
        .map(|k| format!("; did you mean `{k}`?"))
        .unwrap_or_default();
    Err(invalid(
        key,
        format!(
            "unknown property{hint} (streams and client property names contain dots, except the client \
             properties {})",
            keys::DOTLESS_CLIENT.join(", ")
        ),
    ))
}

/// The streams property closest to `key`, if within `max` edits (ignoring `.`, `_`, `-` and
/// case, or not).
fn suggestion(key: &str, max: usize) -> Option<&'static str> {
    let known: Vec<&'static str> = keys::STREAMS.iter().chain(keys::UNSUPPORTED).copied().collect();
    suggestion_among(key, &known, max)
}

/// The property of `known` closest to `key`, if within `max` edits (ignoring `.`, `_`, `-`
/// and case, or not).
fn suggestion_among(key: &str, known: &[&'static str], max: usize) -> Option<&'static str> {
    let squash = |s: &str| -> String {
        s.chars()
            .filter(|c| !matches!(c, '.' | '_' | '-'))
            .map(|c| c.to_ascii_lowercase())
            .collect()
    };
    let squashed = squash(key);
    known
        .iter()
        .map(|&known| {
            (
                known,
                levenshtein(key, known).min(levenshtein(&squashed, &squash(known))),
            )
        })
        .filter(|&(_, d)| d <= max)
        .min_by_key(|&(_, d)| d)
        .map(|(known, _)| known)
}

fn non_empty(property: &str, value: &str) -> Result<String, StreamsError> {
    if value.is_empty() {
        return Err(invalid(
            property,
            "must not be empty (omit the property to use the default)",
        ));
    }
    Ok(value.to_owned())
}

fn application_id(value: Option<&str>) -> Result<String, StreamsError> {
    let key = keys::APPLICATION_ID;
    let value = value.ok_or_else(|| invalid(key, "is required"))?;
    if value.is_empty() {
        return Err(invalid(key, "must not be empty"));
    }
    if let Some(c) = value.chars().find(|&c| !is_name_char(c)) {
        return Err(invalid(
            key,
            format!("`{value}` contains `{c}`; only ASCII letters, digits, `.`, `_` and `-` are allowed"),
        ));
    }
    Ok(value.to_owned())
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
}

/// A Kafka topic name: 1 to 249 of `[A-Za-z0-9._-]`, not `.` or `..`.
fn topic_name(property: &str, value: &str) -> Result<String, StreamsError> {
    if value.is_empty() {
        return Err(invalid(property, "must not be empty"));
    }
    if value == "." || value == ".." {
        return Err(invalid(property, format!("`{value}` is not a valid topic name")));
    }
    if value.len() > 249 {
        return Err(invalid(property, "a topic name has at most 249 characters"));
    }
    if let Some(c) = value.chars().find(|&c| !is_name_char(c)) {
        return Err(invalid(
            property,
            format!(
                "topic name `{value}` contains `{c}`; only ASCII letters, digits, `.`, `_` and `-` are allowed"
            ),
        ));
    }
    Ok(value.to_owned())
}

/// An integer of at least `min`.
fn integer(property: &str, value: &str, min: i64) -> Result<i64, StreamsError> {
    let n: i64 = value
        .parse()
        .map_err(|_| invalid(property, format!("`{value}` is not an integer")))?;
    if n < min {
        return Err(invalid(property, format!("must be at least {min}, got {n}")));
    }
    Ok(n)
}

fn to_usize(property: &str, n: i64) -> Result<usize, StreamsError> {
    usize::try_from(n).map_err(|_| invalid(property, format!("{n} is out of range")))
}

/// A non-negative number of milliseconds.
fn millis(property: &str, value: &str) -> Result<Duration, StreamsError> {
    let ms = integer(property, value, 0)?;
    // `ms` >= 0, so the conversion cannot fail.
    Ok(Duration::from_millis(u64::try_from(ms).unwrap_or_default()))
}

/// Kafka Streams' package of its built-in handlers, accepted before their class names.
const HANDLER_PACKAGE: &str = "org.apache.kafka.streams.errors.";

/// An exception handler: `log_and_continue`, `log_and_fail`, `dead_letter_queue` or a Kafka
/// Streams built-in handler class name, with or without its package.
fn parse_handler(property: &str, value: &str) -> Result<ErrorHandling, StreamsError> {
    let name = value.strip_prefix(HANDLER_PACKAGE).unwrap_or(value);
    let name = match name {
        "DefaultProductionExceptionHandler" | "LogAndFailProcessingExceptionHandler" => "log_and_fail",
        "LogAndContinueProcessingExceptionHandler" => "log_and_continue",
        other => other,
    };
    ErrorHandling::parse(name).ok_or_else(|| {
        invalid(
            property,
            format!("`{value}` is not one of `log_and_continue`, `log_and_fail`, `dead_letter_queue`"),
        )
    })
}

/// `application.server`: `host:port` with a non-empty host and a port above 0.
fn application_server(v: &str) -> Result<String, String> {
    let v = v.trim();
    let usage = || format!("`{v}` is not an endpoint such as orders-1.internal:8080 (host:port)");
    let (host, port) = v.rsplit_once(':').ok_or_else(usage)?;
    match port.parse::<u16>() {
        Ok(p) if p > 0 && !host.is_empty() && !host.contains(char::is_whitespace) => Ok(v.to_owned()),
        _ => Err(usage()),
    }
}
