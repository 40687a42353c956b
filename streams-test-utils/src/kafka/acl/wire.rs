//! The wire side of the ACL requests: one connection to a broker, sending one request at a
//! time in `kafka_protocol`'s generated messages (the same crate the runtime's own client
//! encodes its requests with, so the Kafka protocol is written down once, there).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use kafka_protocol::messages::{RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};

use crate::kafka::{TestKafkaError, TestResult};

/// The version of both requests: the first flexible one, which every broker from Apache
/// Kafka 2.4 to 4.x serves.
pub(super) const VERSION: i16 = 2;
/// The largest response accepted.
const MAX_RESPONSE: usize = 16 * 1024 * 1024;

/// One connection to a broker, sending requests one at a time.
pub(super) struct Connection {
    stream: TcpStream,
    address: SocketAddr,
}

impl Connection {
    pub(super) fn open(bootstrap: &str, timeout: Duration) -> TestResult<Self> {
        let first = bootstrap.split(',').next().unwrap_or_default().trim();
        let address = first
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(|| TestKafkaError::Failed {
                what: "ACL request".into(),
                detail: format!("`{first}` is not a host:port address"),
            })?;
        let io = |e: std::io::Error| TestKafkaError::Failed {
            what: format!("ACL request to {address}"),
            detail: e.to_string(),
        };
        let stream = TcpStream::connect_timeout(&address, timeout).map_err(io)?;
        stream.set_read_timeout(Some(timeout)).map_err(io)?;
        stream.set_write_timeout(Some(timeout)).map_err(io)?;
        Ok(Self { stream, address })
    }

    /// Sends `request` (API `api_key`, version [`VERSION`]) and decodes its response.
    pub(super) fn call<Req, Resp>(&mut self, api_key: i16, request: &Req) -> TestResult<Resp>
    where
        Req: Encodable + HeaderVersion,
        Resp: Decodable + HeaderVersion,
    {
        static CORRELATION: AtomicI32 = AtomicI32::new(1);
        let correlation = CORRELATION.fetch_add(1, Ordering::Relaxed);
        let failed = |detail: String| TestKafkaError::Failed {
            what: format!("ACL request (API key {api_key}) to {}", self.address),
            detail,
        };
        let mut header = RequestHeader::default();
        header.request_api_key = api_key;
        header.request_api_version = VERSION;
        header.correlation_id = correlation;
        header.client_id = Some(StrBytes::from_static_str("streams-test-acl"));
        let mut frame = BytesMut::new();
        frame.extend_from_slice(&[0; 4]);
        header
            .encode(&mut frame, Req::header_version(VERSION))
            .and_then(|()| request.encode(&mut frame, VERSION))
            .map_err(|e| failed(format!("encoding: {e}")))?;
        let size = i32::try_from(frame.len() - 4).unwrap_or(i32::MAX);
        frame[..4].copy_from_slice(&size.to_be_bytes());
        let io = |e: std::io::Error| failed(e.to_string());
        self.stream.write_all(&frame).map_err(io)?;
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size).map_err(io)?;
        let size = usize::try_from(i32::from_be_bytes(size)).unwrap_or(0);
        if !(5..=MAX_RESPONSE).contains(&size) {
            return Err(failed(format!("response of {size} bytes")));
        }
        let mut response = vec![0u8; size];
        self.stream.read_exact(&mut response).map_err(io)?;
        let mut body = bytes::Bytes::from(response);
        let header = ResponseHeader::decode(&mut body, Resp::header_version(VERSION))
            .map_err(|e| failed(format!("decoding the response header: {e}")))?;
        if header.correlation_id != correlation {
            return Err(failed(format!(
                "answer to request {}, expected {correlation}",
                header.correlation_id
            )));
        }
        let decoded =
            Resp::decode(&mut body, VERSION).map_err(|e| failed(format!("decoding the response: {e}")))?;
        if body.has_remaining() {
            return Err(failed(format!("{} bytes after the response", body.remaining())));
        }
        Ok(decoded)
    }
}
