//! The registry client over `https://`: a CA of the application's own
//! (`schema.registry.ssl.ca.location`) and TLS client authentication
//! (`schema.registry.ssl.certificate.location` / `.key.location`), against a local TLS
//! server that answers like a registry. Certificates are made for each test
//! (`streams_test_utils::tls`).

use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;

use streams_serde_registry::{RegistryError, SchemaRegistryClient, SchemaType};
use streams_test_utils::tls::TestCerts;

/// A test CA with a server certificate for 127.0.0.1 and a client certificate, as PEM files.
struct Pki {
    dir: tempfile::TempDir,
    certs: TestCerts,
}

impl Pki {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let certs = TestCerts::new("127.0.0.1");
        let write = |name: &str, pem: &str| std::fs::write(dir.path().join(name), pem).unwrap();
        write("ca.pem", &certs.ca_pem);
        write("client.pem", &certs.client_pem);
        write("client.key", &certs.client_key_pem);
        // A CA that signed nothing here.
        write("other-ca.pem", &certs.other_ca_pem);
        Self { dir, certs }
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }
}

/// Serves `/schemas/ids/<n>` (the Avro schema `"long"`) over TLS on 127.0.0.1 until the
/// test ends, requiring a client certificate signed by the CA when `client_auth`. Returns
/// the registry URL.
fn serve(pki: &Pki, client_auth: bool) -> String {
    let config = pki.certs.server_config(client_auth);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("https://127.0.0.1:{}", listener.local_addr().unwrap().port());
    std::thread::spawn(move || {
        for tcp in listener.incoming().flatten() {
            let conn = rustls::ServerConnection::new(Arc::clone(&config)).unwrap();
            let mut tls = rustls::StreamOwned::new(conn, tcp);
            // A refused handshake or a closed connection ends this exchange only.
            let mut request = Vec::new();
            let mut buf = [0u8; 1024];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match tls.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            if request.starts_with(b"GET /schemas/ids/") {
                let body = r#"{"schema":"\"long\"","schemaType":"AVRO"}"#;
                let _ = write!(
                    tls,
                    "HTTP/1.1 200 OK\r\ncontent-type: application/vnd.schemaregistry.v1+json\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = tls.flush();
                tls.conn.send_close_notify();
                let _ = tls.flush();
            }
        }
    });
    url
}

fn client(url: &str, extra: &[(&str, String)]) -> Result<SchemaRegistryClient, RegistryError> {
    let mut props = vec![
        ("schema.registry.url", url.to_owned()),
        ("max.retries", "0".to_owned()),
    ];
    props.extend(extra.iter().map(|(k, v)| (*k, v.clone())));
    SchemaRegistryClient::from_properties(props)
}

fn unreachable(result: Result<impl std::fmt::Debug, RegistryError>) -> String {
    match result {
        Err(RegistryError::Unreachable { message, .. }) => message,
        other => panic!("expected the registry to be unreachable, got {other:?}"),
    }
}

#[test]
fn https_with_the_applications_own_ca() {
    let pki = Pki::new();
    let url = serve(&pki, false);
    let trusted = client(&url, &[("schema.registry.ssl.ca.location", pki.path("ca.pem"))]).unwrap();
    let schema = trusted.schema_by_id(1).unwrap();
    assert_eq!(
        (schema.schema_type, schema.schema.as_str()),
        (SchemaType::Avro, r#""long""#)
    );

    // The public roots do not know the test CA, nor does another CA: the server is refused.
    let message = unreachable(client(&url, &[]).unwrap().schema_by_id(1));
    assert!(message.to_lowercase().contains("certificate"), "{message}");
    let other = client(
        &url,
        &[("schema.registry.ssl.ca.location", pki.path("other-ca.pem"))],
    )
    .unwrap();
    let message = unreachable(other.schema_by_id(1));
    assert!(message.to_lowercase().contains("certificate"), "{message}");
    // A bare `ssl.ca.location` is the broker connection's, not the registry's.
    let bare = client(&url, &[("ssl.ca.location", pki.path("ca.pem"))]).unwrap();
    unreachable(bare.schema_by_id(1));
}

#[test]
fn client_certificate_when_the_registry_requires_one() {
    let pki = Pki::new();
    let url = serve(&pki, true);
    let ca = ("schema.registry.ssl.ca.location", pki.path("ca.pem"));
    let with_cert = client(
        &url,
        &[
            ca.clone(),
            ("schema.registry.ssl.certificate.location", pki.path("client.pem")),
            ("schema.registry.ssl.key.location", pki.path("client.key")),
        ],
    )
    .unwrap();
    assert_eq!(with_cert.schema_by_id(7).unwrap().id, 7);
    // Without a client certificate the server ends the handshake.
    unreachable(client(&url, &[ca]).unwrap().schema_by_id(7));
}

#[test]
fn tls_files_are_checked_when_the_client_is_made() {
    let pki = Pki::new();
    let config_error = |extra: &[(&str, String)]| match client("https://127.0.0.1:1", extra) {
        Err(RegistryError::Config { property, message }) => (property, message),
        other => panic!("expected a config error, got {other:?}"),
    };
    let (property, message) = config_error(&[("schema.registry.ssl.ca.location", pki.path("missing.pem"))]);
    assert_eq!(property, "schema.registry.ssl.ca.location");
    assert!(message.contains("missing.pem"), "{message}");
    let (property, message) = config_error(&[("schema.registry.ssl.ca.location", pki.path("client.key"))]);
    assert_eq!(property, "schema.registry.ssl.ca.location");
    assert!(message.contains("no PEM certificate"), "{message}");
    let (property, _) = config_error(&[("schema.registry.ssl.certificate.location", pki.path("client.pem"))]);
    assert_eq!(property, "schema.registry.ssl.key.location");
    let (property, message) = config_error(&[
        ("schema.registry.ssl.certificate.location", pki.path("client.pem")),
        ("schema.registry.ssl.key.location", pki.path("ca.pem")),
    ]);
    assert_eq!(property, "schema.registry.ssl.key.location");
    assert!(message.contains("no PEM private key"), "{message}");
    assert!(Path::new(&pki.path("ca.pem")).is_file());
}
