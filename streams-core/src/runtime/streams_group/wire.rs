//! A blocking connection to one broker: framing, correlation ids, API version negotiation,
//! and finding the group coordinator.
//!
//! Invariants:
//! - requests and responses alternate on a connection (no pipelining), so every response
//!   must carry the correlation id of the request just sent; any other id, a short read or
//!   a timeout poisons the connection ([`Conn::send`] fails and the caller drops it);
//! - the broker's API versions are read once when connecting; [`Conn::version`] gives the
//!   highest version both sides speak, or `None` when there is none;
//! - a connection is TLS-wrapped and SASL-authenticated as [`Security`] says before
//!   [`Conn::connect`] returns; a session the broker limits (KIP-368) is authenticated
//!   again before the first request after [`sasl::renew_at`](super::sasl::renew_at).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use kafka_protocol::messages::{
    ApiVersionsRequest, ApiVersionsResponse, DescribeClusterRequest, DescribeClusterResponse,
    FindCoordinatorRequest, FindCoordinatorResponse, GroupId, IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse, ListOffsetsRequest, ListOffsetsResponse, MetadataRequest,
    MetadataResponse, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse,
    RequestHeader, ResponseHeader, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};

use crate::model::error::StreamsError;
use crate::runtime::streams_group::responses::Response;
use crate::runtime::streams_group::sasl;
use crate::runtime::streams_group::security::{Sasl, Security, Stream};

/// The largest response we accept (a heartbeat's endpoint map of a large group fits).
const MAX_RESPONSE: usize = 64 << 20;

/// A Kafka client error of this module.
pub(crate) fn kafka(message: String, retriable: bool) -> StreamsError {
    StreamsError::Kafka { message, retriable }
}

/// A request this client sends with the generated messages, and its response (decoded by
/// [`Response`], not by `kafka_protocol`, whose decoders allocate whatever a count read off
/// the wire asks for).
pub(crate) trait Api: Encodable + HeaderVersion {
    /// The API key.
    const KEY: i16;
    /// The response message.
    type Response: Response;
}

macro_rules! api {
    ($($req:ty => $resp:ty, $key:expr;)*) => {
        $(impl Api for $req {
            const KEY: i16 = $key;
            type Response = $resp;
        })*
    };
}

api! {
    DescribeClusterRequest => DescribeClusterResponse, 60;
    OffsetCommitRequest => OffsetCommitResponse, 8;
    OffsetFetchRequest => OffsetFetchResponse, 9;
    MetadataRequest => MetadataResponse, 3;
    ListOffsetsRequest => ListOffsetsResponse, 2;
    FindCoordinatorRequest => FindCoordinatorResponse, 10;
    ApiVersionsRequest => ApiVersionsResponse, 18;
    IncrementalAlterConfigsRequest => IncrementalAlterConfigsResponse, 44;
    SaslHandshakeRequest => SaslHandshakeResponse, 17;
    SaslAuthenticateRequest => SaslAuthenticateResponse, 36;
}

/// One broker connection.
pub(crate) struct Conn {
    stream: Stream,
    addr: String,
    client_id: String,
    correlation: i32,
    /// The broker's version range per API key.
    versions: BTreeMap<i16, (i16, i16)>,
    /// The credentials, and when the broker wants them again (KIP-368).
    sasl: Option<Sasl>,
    renew_at: Option<Instant>,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Conn({})", self.addr)
    }
}

impl Conn {
    /// Connects to `addr` (`host:port`) and reads its API versions; `timeout` bounds the
    /// connect and every later read and write.
    pub(crate) fn connect(
        addr: &str,
        client_id: &str,
        timeout: Duration,
        security: &Security,
    ) -> Result<Conn, StreamsError> {
        let fail = |e: std::io::Error| kafka(format!("connecting to {addr}: {e}"), true);
        let sock = addr
            .to_socket_addrs()
            .map_err(fail)?
            .next()
            .ok_or_else(|| kafka(format!("{addr} resolves to no address"), true))?;
        let stream = TcpStream::connect_timeout(&sock, timeout).map_err(fail)?;
        stream.set_read_timeout(Some(timeout)).map_err(fail)?;
        stream.set_write_timeout(Some(timeout)).map_err(fail)?;
        stream.set_nodelay(true).map_err(fail)?;
        let stream = security.open(stream, host_of(addr), addr)?;
        let mut conn = Conn {
            stream,
            addr: addr.to_owned(),
            client_id: client_id.to_owned(),
            correlation: 0,
            versions: BTreeMap::new(),
            sasl: None,
            renew_at: None,
        };
        let mut req = ApiVersionsRequest::default();
        req.client_software_name = StrBytes::from_static_str("streams-rs");
        req.client_software_version = StrBytes::from_static_str(env!("CARGO_PKG_VERSION"));
        let resp = conn.send(&req, 3)?;
        if resp.error_code != 0 {
            return Err(kafka(
                format!("ApiVersions on {addr}: error {}", resp.error_code),
                false,
            ));
        }
        conn.versions = resp
            .api_keys
            .iter()
            .map(|k| (k.api_key, (k.min_version, k.max_version)))
            .collect();
        if let Some(credentials) = security.sasl() {
            conn.renew_at = sasl::authenticate(&mut conn, credentials)?;
            conn.sasl = Some(credentials.clone());
        }
        Ok(conn)
    }

    /// Authenticates again if the broker's session lifetime says so.
    fn renew_if_due(&mut self) -> Result<(), StreamsError> {
        if self.renew_at.is_none_or(|at| Instant::now() < at) {
            return Ok(());
        }
        // Taken out while renewing, so the renewal's own requests do not renew.
        let Some(credentials) = self.sasl.take() else {
            return Ok(());
        };
        let renewed = sasl::authenticate(self, &credentials);
        self.sasl = Some(credentials);
        self.renew_at = renewed?;
        Ok(())
    }

    /// When the session is to be authenticated again (KIP-368), if the broker limits it.
    #[cfg(test)]
    pub(crate) fn renew_at(&self) -> Option<Instant> {
        self.renew_at
    }

    /// The address connected to.
    pub(crate) fn addr(&self) -> &str {
        &self.addr
    }

    /// The highest version of API `key` both the broker and our `ours` range speak.
    pub(crate) fn version(&self, key: i16, ours: (i16, i16)) -> Option<i16> {
        let &(min, max) = self.versions.get(&key)?;
        let v = max.min(ours.1);
        (v >= min.max(ours.0)).then_some(v)
    }

    /// Sends the body `body` of API `key` version `version` with request header version
    /// `header`, and returns the response body (after a response header of version
    /// `response_header`).
    pub(crate) fn round_trip(
        &mut self,
        key: i16,
        version: i16,
        header: i16,
        response_header: i16,
        body: &[u8],
    ) -> Result<bytes::Bytes, StreamsError> {
        self.renew_if_due()?;
        let err = |what: &str, e: &dyn std::fmt::Display| kafka(format!("{what} {}: {e}", self.addr), true);
        self.correlation = self.correlation.wrapping_add(1);
        let mut h = RequestHeader::default();
        h.request_api_key = key;
        h.request_api_version = version;
        h.correlation_id = self.correlation;
        h.client_id = Some(StrBytes::from_string(self.client_id.clone()));
        let mut frame = BytesMut::with_capacity(body.len() + 64);
        frame.extend_from_slice(&[0; 4]);
        h.encode(&mut frame, header)
            .map_err(|e| err("encoding a request header for", &e))?;
        frame.extend_from_slice(body);
        let len = (frame.len() - 4) as i32;
        frame[..4].copy_from_slice(&len.to_be_bytes());
        self.stream.write_all(&frame).map_err(|e| err("writing to", &e))?;
        let mut size = [0u8; 4];
        self.stream
            .read_exact(&mut size)
            .map_err(|e| err("reading from", &e))?;
        let size = i32::from_be_bytes(size);
        if size < 4 || size as usize > MAX_RESPONSE {
            return Err(err("response size from", &size));
        }
        // Memory grows with the bytes that arrive, not with the size the peer announced.
        let mut buf = Vec::new();
        (&mut self.stream)
            .take(size as u64)
            .read_to_end(&mut buf)
            .map_err(|e| err("reading from", &e))?;
        if buf.len() != size as usize {
            return Err(err(
                "short response from",
                &format!("{} of {size} bytes", buf.len()),
            ));
        }
        let mut buf = bytes::Bytes::from(buf);
        let rh = ResponseHeader::decode(&mut buf, response_header)
            .map_err(|e| err("decoding a response header from", &e))?;
        if rh.correlation_id != self.correlation {
            return Err(err(
                "correlation id mismatch from",
                &format!("{} (expected {})", rh.correlation_id, self.correlation),
            ));
        }
        Ok(buf)
    }

    /// Sends `req` at `version` and decodes its response.
    pub(crate) fn send<R: Api>(&mut self, req: &R, version: i16) -> Result<R::Response, StreamsError> {
        let mut body = BytesMut::new();
        req.encode(&mut body, version)
            .map_err(|e| kafka(format!("encoding API {} v{version}: {e}", R::KEY), false))?;
        let header = R::header_version(version);
        let response_header = <R::Response as HeaderVersion>::header_version(version);
        let body = self.round_trip(R::KEY, version, header, response_header, &body)?;
        let mut buf = &body[..];
        let resp = R::Response::decode_body(&mut buf, version).map_err(|e| {
            kafka(
                format!("decoding API {} v{version} from {}: {e}", R::KEY, self.addr),
                true,
            )
        })?;
        if !buf.is_empty() {
            tracing::debug!(api = R::KEY, left = buf.len(), "response longer than its schema");
        }
        Ok(resp)
    }
}

impl sasl::SaslExchange for Conn {
    fn addr(&self) -> &str {
        &self.addr
    }

    fn version(&self, key: i16, ours: (i16, i16)) -> Option<i16> {
        Conn::version(self, key, ours)
    }

    fn handshake(
        &mut self,
        req: &SaslHandshakeRequest,
        version: i16,
    ) -> Result<SaslHandshakeResponse, StreamsError> {
        self.send(req, version)
    }

    fn authenticate(
        &mut self,
        req: &SaslAuthenticateRequest,
        version: i16,
    ) -> Result<SaslAuthenticateResponse, StreamsError> {
        self.send(req, version)
    }
}

/// The addresses of a `bootstrap.servers` list (comma-separated `host:port`s, each
/// perhaps with a `<protocol>://` prefix).
fn bootstrap_list(bootstrap: &str) -> Vec<String> {
    bootstrap
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(|a| a.split_once("://").map_or(a, |(_, rest)| rest).to_owned())
        .collect()
}

/// The host of `host:port` (`[v6]:port` too), as TLS checks it against the certificate.
fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
}

/// Connects to the first address of `addrs` that answers; `failed` hears of each that did
/// not.
fn connect_first(
    addrs: Vec<String>,
    security: &Security,
    client_id: &str,
    timeout: Duration,
    mut failed: impl FnMut(&str),
) -> Result<Conn, StreamsError> {
    let mut last = kafka(
        format!("no broker to connect to (tried {})", addrs.join(", ")),
        false,
    );
    for addr in &addrs {
        match Conn::connect(addr, client_id, timeout, security) {
            Ok(c) => return Ok(c),
            Err(e) => {
                failed(addr);
                last = e;
            }
        }
    }
    Err(last)
}

/// The brokers a streams-group client reaches the cluster through: the ones the cluster
/// listed at the last connection (`DescribeCluster`), then the bootstrap list. So a
/// coordinator lookup still works while every bootstrap broker is down or hung, as
/// librdkafka's clients do with the brokers of their metadata. A broker that did not
/// answer moves to the back of the list. Every connection is made with the one
/// [`Security`] given at construction.
#[derive(Debug, Default)]
pub(crate) struct KnownBrokers {
    learned: std::sync::Mutex<Vec<String>>,
    security: Security,
}

impl KnownBrokers {
    /// No broker learned yet; connections made with `security`.
    pub(crate) fn new(security: Security) -> KnownBrokers {
        KnownBrokers {
            learned: Default::default(),
            security,
        }
    }

    /// Connects to `addr` itself.
    pub(crate) fn connect_to(
        &self,
        addr: &str,
        client_id: &str,
        timeout: Duration,
    ) -> Result<Conn, StreamsError> {
        Conn::connect(addr, client_id, timeout, &self.security)
    }

    /// Connects to the first broker that answers: a learned one, else one of `bootstrap`;
    /// then learns the cluster's brokers through it (a failure to is only logged).
    pub(crate) fn connect(
        &self,
        bootstrap: &str,
        client_id: &str,
        timeout: Duration,
    ) -> Result<Conn, StreamsError> {
        let addrs = self.addresses(bootstrap);
        let mut conn = connect_first(addrs, &self.security, client_id, timeout, |addr| {
            let mut learned = self.learned();
            if let Some(i) = learned.iter().position(|a| a == addr) {
                let a = learned.remove(i);
                learned.push(a);
            }
        })?;
        match describe_brokers(&mut conn) {
            Ok(brokers) if !brokers.is_empty() => *self.learned() = brokers,
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(broker = conn.addr(), error = %e, "could not list the cluster's brokers")
            }
        }
        Ok(conn)
    }

    /// Every broker known: the ones learned (see [`connect`](Self::connect)), then those of
    /// `bootstrap` not among them.
    pub(crate) fn addresses(&self, bootstrap: &str) -> Vec<String> {
        let mut addrs = self.learned().clone();
        for a in bootstrap_list(bootstrap) {
            if !addrs.contains(&a) {
                addrs.push(a);
            }
        }
        addrs
    }

    /// Whether brokers were learned from the cluster.
    pub(crate) fn has_learned(&self) -> bool {
        !self.learned().is_empty()
    }

    fn learned(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        self.learned.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The `host:port` of every unfenced broker of the cluster, as `conn`'s broker lists them.
pub(crate) fn describe_brokers(conn: &mut Conn) -> Result<Vec<String>, StreamsError> {
    let version = conn.version(60, (0, 2)).ok_or_else(|| {
        kafka(
            format!("{} offers no DescribeCluster version we speak", conn.addr),
            false,
        )
    })?;
    let mut req = DescribeClusterRequest::default();
    req.endpoint_type = 1; // brokers, not controllers
    let resp = conn.send(&req, version)?;
    if resp.error_code != 0 {
        return Err(kafka(format!("DescribeCluster: error {}", resp.error_code), true));
    }
    Ok(resp
        .brokers
        .iter()
        .filter(|b| !b.is_fenced)
        .map(|b| format!("{}:{}", b.host.as_str(), b.port))
        .collect())
}

/// Error codes that mean "ask again for the coordinator".
pub(crate) fn coordinator_moved(code: i16) -> bool {
    // COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
    matches!(code, 14..=16)
}

/// A connection to the coordinator of `group`, found through a broker of `known` (or of
/// `bootstrap_servers`).
pub(crate) fn find_coordinator(
    known: &KnownBrokers,
    bootstrap_servers: &str,
    group: &str,
    client_id: &str,
    timeout: Duration,
) -> Result<Conn, StreamsError> {
    let mut conn = known.connect(bootstrap_servers, client_id, timeout)?;
    let version = conn.version(10, (0, 6)).ok_or_else(|| {
        kafka(
            format!("{} offers no FindCoordinator version we speak", conn.addr),
            false,
        )
    })?;
    let mut req = FindCoordinatorRequest::default();
    if version >= 4 {
        req.coordinator_keys = vec![StrBytes::from_string(group.to_owned())];
    } else {
        req.key = StrBytes::from_string(group.to_owned());
    }
    let resp = conn.send(&req, version)?;
    let (code, message, host, port) = match resp.coordinators.first() {
        Some(c) if version >= 4 => (c.error_code, c.error_message.clone(), c.host.clone(), c.port),
        _ => (
            resp.error_code,
            resp.error_message.clone(),
            resp.host.clone(),
            resp.port,
        ),
    };
    if code != 0 {
        let why = message.map(|m| m.to_string()).unwrap_or_default();
        return Err(match code {
            30 => StreamsError::Authorization {
                resource: format!("group `{group}`"),
                message: format!("finding its coordinator: {why} (grant DESCRIBE and READ on the group)"),
            },
            _ => kafka(
                format!("FindCoordinator for group `{group}`: error {code} {why}"),
                true,
            ),
        });
    }
    let addr = format!("{host}:{port}");
    if addr == conn.addr {
        return Ok(conn);
    }
    known.connect_to(&addr, client_id, timeout)
}

/// The group id as the generated messages want it.
pub(crate) fn group_id(group: &str) -> GroupId {
    GroupId(StrBytes::from_string(group.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bootstrap_addresses_lose_their_protocol_prefix() {
        assert_eq!(
            bootstrap_list(" PLAINTEXT://a:9092, SASL_SSL://b:9094,,c:1 "),
            ["a:9092", "b:9094", "c:1"]
        );
    }

    #[test]
    fn the_host_of_an_address_is_what_tls_checks() {
        assert_eq!(host_of("broker-1.example.com:9094"), "broker-1.example.com");
        assert_eq!(host_of("127.0.0.1:9094"), "127.0.0.1");
        assert_eq!(host_of("[::1]:9094"), "::1");
    }
}
