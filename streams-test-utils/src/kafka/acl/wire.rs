//! The wire side of the ACL requests: one connection to a broker sending flexible-version
//! requests, and the encoding and decoding of their fields.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use crate::kafka::{TestKafkaError, TestResult};

/// The version of both requests: the first flexible one.
const VERSION: i16 = 2;
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

    /// Sends a request (flexible header, version [`VERSION`]) and returns the response body.
    pub(super) fn call(&mut self, api_key: i16, body: &[u8]) -> TestResult<Vec<u8>> {
        static CORRELATION: AtomicI32 = AtomicI32::new(1);
        let correlation = CORRELATION.fetch_add(1, Ordering::Relaxed);
        let client_id = b"streams-test-acl";
        let mut request = Vec::with_capacity(body.len() + 40);
        request.extend(api_key.to_be_bytes());
        request.extend(VERSION.to_be_bytes());
        request.extend(correlation.to_be_bytes());
        request.extend((client_id.len() as i16).to_be_bytes());
        request.extend(client_id);
        request.push(0); // header tagged fields
        request.extend(body);
        let io = |e: std::io::Error| TestKafkaError::Failed {
            what: format!("ACL request (API key {api_key}) to {}", self.address),
            detail: e.to_string(),
        };
        let size = i32::try_from(request.len()).unwrap_or(i32::MAX);
        self.stream.write_all(&size.to_be_bytes()).map_err(io)?;
        self.stream.write_all(&request).map_err(io)?;
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size).map_err(io)?;
        let size = usize::try_from(i32::from_be_bytes(size)).unwrap_or(0);
        if !(5..=MAX_RESPONSE).contains(&size) {
            return Err(TestKafkaError::Failed {
                what: format!("ACL request (API key {api_key}) to {}", self.address),
                detail: format!("response of {size} bytes"),
            });
        }
        let mut response = vec![0u8; size];
        self.stream.read_exact(&mut response).map_err(io)?;
        let mut r = Reader::new(&response);
        let answered = r.i32()?;
        if answered != correlation {
            return Err(TestKafkaError::Failed {
                what: format!("ACL request (API key {api_key}) to {}", self.address),
                detail: format!("answer to request {answered}, expected {correlation}"),
            });
        }
        r.skip_tagged()?;
        Ok(response[r.at..].to_vec())
    }
}

pub(super) fn put_uvarint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub(super) fn put_compact_string(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => {
            put_uvarint(out, s.len() as u64 + 1);
            out.extend(s.as_bytes());
        }
        None => put_uvarint(out, 0),
    }
}

/// Reads a response body.
pub(super) struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub(super) fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, at: 0 }
    }

    fn take(&mut self, n: usize) -> TestResult<&'a [u8]> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let Some(end) = end else {
            return Err(TestKafkaError::Failed {
                what: "ACL response".into(),
                detail: format!("truncated at byte {} of {}", self.at, self.bytes.len()),
            });
        };
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }

    pub(super) fn i8(&mut self) -> TestResult<i8> {
        Ok(self.take(1)?[0] as i8)
    }

    pub(super) fn i16(&mut self) -> TestResult<i16> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    pub(super) fn i32(&mut self) -> TestResult<i32> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(super) fn uvarint(&mut self) -> TestResult<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.take(1)?[0];
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(TestKafkaError::Failed {
            what: "ACL response".into(),
            detail: "malformed varint".into(),
        })
    }

    /// A compact array's length (a null array reads as empty).
    pub(super) fn compact_len(&mut self) -> TestResult<usize> {
        Ok(usize::try_from(self.uvarint()?.saturating_sub(1)).unwrap_or(0))
    }

    pub(super) fn compact_string(&mut self) -> TestResult<Option<String>> {
        match self.uvarint()? {
            0 => Ok(None),
            n => {
                let len = usize::try_from(n - 1).unwrap_or(usize::MAX);
                Ok(Some(String::from_utf8_lossy(self.take(len)?).into_owned()))
            }
        }
    }

    pub(super) fn skip_tagged(&mut self) -> TestResult<()> {
        for _ in 0..self.uvarint()? {
            let _tag = self.uvarint()?;
            let size = usize::try_from(self.uvarint()?).unwrap_or(usize::MAX);
            self.take(size)?;
        }
        Ok(())
    }
}
