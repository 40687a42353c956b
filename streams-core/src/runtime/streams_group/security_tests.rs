//! The streams-group client's security settings: what each property does, what is refused
//! (naming the property, never a secret), and TLS handshakes against a local rustls server
//! with certificates made per test (`streams_test_utils::tls`).

use std::collections::BTreeMap;
use std::net::{TcpListener, TcpStream};

use streams_test_utils::tls::TestCerts;

use super::*;
use crate::config::tests::map as props;

/// The property a config error names.
fn refused(pairs: &[(&str, &str)]) -> (String, String) {
    match Security::from_props(&props(pairs)) {
        Err(StreamsError::Config { property, message }) => (property, message),
        other => panic!("expected a config error, got {other:?}"),
    }
}

const SASL: [(&str, &str); 4] = [
    ("security.protocol", "SASL_PLAINTEXT"),
    ("sasl.mechanism", "SCRAM-SHA-512"),
    ("sasl.username", "streams"),
    ("sasl.password", "s3cret-pw"),
];

#[test]
fn plaintext_is_the_default() {
    let s = Security::from_props(&BTreeMap::new()).unwrap();
    assert!(s.tls.is_none() && s.sasl.is_none());
    let s = Security::from_props(&props(&[("security.protocol", "plaintext")])).unwrap();
    assert!(s.tls.is_none() && s.sasl.is_none());
}

#[test]
fn each_protocol_sets_tls_and_sasl() {
    let s = Security::from_props(&props(&SASL)).unwrap();
    assert!(s.tls.is_none());
    let sasl = s.sasl().unwrap();
    assert_eq!(
        (sasl.mechanism, sasl.username.as_str()),
        (Mechanism::ScramSha512, "streams")
    );
    let s = Security::from_props(&props(&[("security.protocol", "ssl")])).unwrap();
    assert!(s.tls.is_some() && s.sasl.is_none());
    let mut p = SASL.to_vec();
    p[0] = ("security.protocol", "SASL_SSL");
    p[1] = ("sasl.mechanisms", "plain");
    let s = Security::from_props(&props(&p)).unwrap();
    assert!(s.tls.is_some());
    assert_eq!(s.sasl().unwrap().mechanism, Mechanism::Plain);
}

/// OAUTHBEARER: unsecured JWTs from `sasl.oauthbearer.config`, as librdkafka makes them;
/// any other token source is refused, naming the property.
#[test]
fn oauthbearer_presents_an_unsecured_jwt_only() {
    let oauth = [
        ("security.protocol", "SASL_SSL"),
        ("sasl.mechanism", "OAUTHBEARER"),
        ("enable.sasl.oauthbearer.unsecure.jwt", "true"),
        (
            "sasl.oauthbearer.config",
            "principal=admin extension_k=hidden-ext",
        ),
    ];
    let s = Security::from_props(&props(&oauth)).unwrap();
    let sasl = s.sasl().unwrap();
    assert_eq!(
        (sasl.mechanism, sasl.username.as_str()),
        (Mechanism::OAuthBearer, "admin")
    );
    assert!(matches!(sasl.secret, Secret::UnsecuredJwt(_)));
    assert!(!format!("{s:?}").contains("hidden-ext"));
    assert_eq!(refused(&oauth[..3]).0, "sasl.oauthbearer.config");
    assert_eq!(refused(&oauth[..2]).0, "enable.sasl.oauthbearer.unsecure.jwt");
    let mut p = oauth.to_vec();
    p[2] = ("enable.sasl.oauthbearer.unsecure.jwt", "false");
    assert_eq!(refused(&p).0, "enable.sasl.oauthbearer.unsecure.jwt");
    let mut p = oauth.to_vec();
    p.push(("sasl.oauthbearer.method", "oidc"));
    assert_eq!(refused(&p).0, "sasl.oauthbearer.method");
    let mut p = oauth.to_vec();
    p[3] = ("sasl.oauthbearer.config", "principal=admin lifeSeconds=never");
    let (property, message) = refused(&p);
    assert_eq!(property, "sasl.oauthbearer.config");
    assert!(
        message.contains("lifeSeconds") && !message.contains("never"),
        "{message}"
    );
}

#[test]
fn debug_output_names_no_secret() {
    let s = Security::from_props(&props(&SASL)).unwrap();
    let shown = format!("{s:?} {:?}", s.sasl());
    assert!(!shown.contains("s3cret-pw"), "{shown}");
    assert!(
        shown.contains("SCRAM-SHA-512") && shown.contains("streams"),
        "{shown}"
    );
}

#[test]
fn what_this_client_cannot_do_is_refused_naming_the_property() {
    assert_eq!(refused(&[("security.protocol", "TLS")]).0, "security.protocol");
    // librdkafka's and Java's default mechanism is GSSAPI.
    let (property, message) = refused(&[("security.protocol", "SASL_SSL")]);
    assert_eq!(property, "sasl.mechanism");
    assert!(message.contains("GSSAPI"), "{message}");
    let mut p = SASL.to_vec();
    p[1] = ("sasl.mechanism", "GSSAPI");
    assert_eq!(refused(&p).0, "sasl.mechanism");
    assert_eq!(refused(&SASL[..3]).0, "sasl.password");
    let ssl = ("security.protocol", "SSL");
    assert_eq!(
        refused(&[ssl, ("ssl.keystore.location", "/k.p12")]).0,
        "ssl.keystore.location"
    );
    let key = ("ssl.key.location", "/k.pem");
    assert_eq!(
        refused(&[ssl, key, ("ssl.key.password", "x")]).0,
        "ssl.key.password"
    );
    // A key password without a key is unused, as librdkafka lets it be.
    Security::from_props(&props(&[ssl, ("ssl.key.password", "x")])).unwrap();
    let (property, message) = refused(&[ssl, ("ssl.ca.location", "/no/such/ca.pem")]);
    assert_eq!(property, "ssl.ca.location");
    assert!(message.contains("/no/such/ca.pem"), "{message}");
    let both = [ssl, ("ssl.ca.location", "/a.pem"), ("ssl.ca.pem", "x")];
    assert_eq!(refused(&both).0, "ssl.ca.location");
    assert_eq!(refused(&[ssl, ("ssl.ca.pem", "not pem")]).0, "ssl.ca.pem");
}

#[test]
fn a_key_that_is_not_pem_is_refused_without_its_value() {
    let pki = pki();
    let (property, message) = refused(&[
        ("security.protocol", "SSL"),
        ("ssl.certificate.pem", &pki.client_pem),
        ("ssl.key.pem", "very-secret-key-material"),
    ]);
    assert_eq!(property, "ssl.key.pem");
    assert!(!message.contains("very-secret"), "{message}");
    let (property, _) = refused(&[
        ("security.protocol", "SSL"),
        ("ssl.certificate.pem", &pki.client_pem),
    ]);
    assert_eq!(property, "ssl.key.location");
}

/// A CA with a server certificate for `localhost` only and a client certificate.
fn pki() -> TestCerts {
    TestCerts::new("localhost")
}

/// A TLS server on 127.0.0.1 that completes one handshake (requiring a client certificate
/// of the CA when `client_auth`) and then echoes one byte; its address.
fn serve_once(pki: &TestCerts, client_auth: bool) -> String {
    let config = pki.server_config(client_auth);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        if let Ok((tcp, _)) = listener.accept() {
            let conn = rustls::ServerConnection::new(config).unwrap();
            let mut tls = StreamOwned::new(conn, tcp);
            let mut byte = [0u8; 1];
            if tls.read_exact(&mut byte).is_ok() {
                let _ = tls.write_all(&byte);
                let _ = tls.flush();
            }
        }
    });
    addr
}

/// Connects to a fresh server as `host` with `extra` TLS properties, and exchanges a byte.
fn handshake(
    pki: &TestCerts,
    client_auth: bool,
    host: &str,
    extra: &[(&str, &str)],
) -> Result<(), StreamsError> {
    let addr = serve_once(pki, client_auth);
    let mut p = props(&[("security.protocol", "SSL")]);
    p.extend(props(extra));
    let security = Security::from_props(&p)?;
    let tcp = TcpStream::connect(&addr).unwrap();
    tcp.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let mut stream = security.open(tcp, host, &addr)?;
    stream.write_all(b"x").unwrap();
    stream.flush().unwrap();
    let mut byte = [0u8; 1];
    stream.read_exact(&mut byte).map_err(|e| StreamsError::Tls {
        message: e.to_string(),
    })?;
    assert_eq!(&byte, b"x");
    Ok(())
}

fn tls_message(r: Result<(), StreamsError>) -> String {
    match r {
        Err(StreamsError::Tls { message }) => message,
        other => panic!("expected a TLS error, got {other:?}"),
    }
}

#[test]
fn the_broker_certificate_is_checked_against_the_configured_ca_and_name() {
    let pki = pki();
    let ca = ("ssl.ca.pem", pki.ca_pem.as_str());
    handshake(&pki, false, "localhost", &[ca]).unwrap();
    // The certificate names localhost only.
    let message = tls_message(handshake(&pki, false, "127.0.0.1", &[ca]));
    assert!(
        message.contains("127.0.0.1:") && message.contains("not valid for name"),
        "{message}"
    );
    // `none` checks the chain but not the name.
    handshake(
        &pki,
        false,
        "127.0.0.1",
        &[ca, ("ssl.endpoint.identification.algorithm", "none")],
    )
    .unwrap();
    // Another CA: refused even without the name check.
    let other = ("ssl.ca.pem", pki.other_ca_pem.as_str());
    let message = tls_message(handshake(
        &pki,
        false,
        "localhost",
        &[other, ("ssl.endpoint.identification.algorithm", "none")],
    ));
    assert!(message.contains("UnknownIssuer"), "{message}");
    // The public roots do not know the test CA either.
    assert!(tls_message(handshake(&pki, false, "localhost", &[])).contains("UnknownIssuer"));
    // Verification off trusts anything.
    handshake(
        &pki,
        false,
        "127.0.0.1",
        &[other, ("enable.ssl.certificate.verification", "false")],
    )
    .unwrap();
}

#[test]
fn a_ca_file_or_directory_and_a_client_certificate_from_files_are_used() {
    let pki = pki();
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).display().to_string();
    std::fs::create_dir(dir.path().join("cas")).unwrap();
    std::fs::write(path("cas/other.pem"), &pki.other_ca_pem).unwrap();
    std::fs::write(path("cas/ca.pem"), &pki.ca_pem).unwrap();
    std::fs::write(path("client.pem"), &pki.client_pem).unwrap();
    std::fs::write(path("client.key"), &pki.client_key_pem).unwrap();
    let (ca_dir, cert, key) = (path("cas"), path("client.pem"), path("client.key"));
    handshake(
        &pki,
        true,
        "localhost",
        &[
            ("ssl.ca.location", &ca_dir),
            ("ssl.certificate.location", &cert),
            ("ssl.key.location", &key),
        ],
    )
    .unwrap();
    let ca_file = path("cas/ca.pem");
    handshake(&pki, false, "localhost", &[("ssl.ca.location", &ca_file)]).unwrap();
}
