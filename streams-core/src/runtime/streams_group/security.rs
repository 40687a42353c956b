//! How the streams-group client reaches a broker: PLAINTEXT, TLS (rustls) and SASL, from
//! the same `security.protocol`, `ssl.*` and `sasl.*` properties the application's
//! librdkafka clients take (after [`config::security`](crate::config) has rewritten the
//! Java ones).
//!
//! | property | here |
//! |---|---|
//! | `security.protocol` | `PLAINTEXT`, `SSL`, `SASL_PLAINTEXT`, `SASL_SSL` |
//! | `ssl.ca.location` / `ssl.ca.pem` | the CAs trusted (PEM file, directory of PEM files, or text); without either, the Mozilla roots of `webpki-roots` |
//! | `ssl.certificate.location` / `.pem`, `ssl.key.location` / `.pem` | the client certificate chain and its unencrypted key (PEM) |
//! | `ssl.endpoint.identification.algorithm` | `https` (the default) checks the broker's name; `none` only its chain |
//! | `enable.ssl.certificate.verification=false` | trusts any certificate (tests only) |
//! | `sasl.mechanism(s)`, `sasl.username`, `sasl.password` | `PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512` (rsasl) |
//! | `sasl.mechanism=OAUTHBEARER`, `enable.sasl.oauthbearer.unsecure.jwt=true`, `sasl.oauthbearer.config` | unsecured JWTs, as librdkafka makes them ([`oauth`](super::oauth)) |
//!
//! What this client cannot do is refused when the application starts, naming the property:
//! a PKCS#12 key store, an encrypted key, `GSSAPI`. Tokens from the application's provider
//! (`StreamsConfigBuilder::oauth_bearer_token_provider`, or the one the OIDC properties make)
//! are presented as they are. Invariants: no secret
//! (password, key) appears in `Debug` output or in an error; a TLS connection has finished
//! its handshake before [`Security::open`] returns, so a certificate problem is a
//! [`StreamsError::Tls`] naming the broker, not a later read error.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    ClientConfig, ClientConnection, DigitallySignedStruct, RootCertStore, SignatureScheme, StreamOwned,
};

use crate::config::{OAuthBearerTokenProvider, invalid};
use crate::model::error::StreamsError;
use crate::runtime::streams_group::oauth::UnsecuredJwt;

/// A SASL mechanism this client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mechanism {
    Plain,
    ScramSha256,
    ScramSha512,
    OAuthBearer,
}

impl Mechanism {
    /// The name Kafka and SASL give it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::ScramSha256 => "SCRAM-SHA-256",
            Mechanism::ScramSha512 => "SCRAM-SHA-512",
            Mechanism::OAuthBearer => "OAUTHBEARER",
        }
    }
}

/// SASL credentials. `Debug` shows the mechanism and user, never the password.
#[derive(Clone)]
pub(crate) struct Sasl {
    pub mechanism: Mechanism,
    /// The user (OAUTHBEARER: the token's principal).
    pub username: String,
    pub secret: Secret,
}

/// What proves the user's identity.
#[derive(Clone)]
pub(crate) enum Secret {
    /// PLAIN and SCRAM.
    Password(String),
    /// OAUTHBEARER: an unsecured JWT made anew for each authentication.
    UnsecuredJwt(UnsecuredJwt),
    /// OAUTHBEARER: the application's provider's current token at each authentication.
    Token(OAuthBearerTokenProvider),
}

impl std::fmt::Debug for Sasl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Sasl({} as `{}`)", self.mechanism.name(), self.username)
    }
}

/// How to connect: TLS or not, SASL or not. `Debug` names no secret.
#[derive(Clone, Default)]
pub(crate) struct Security {
    tls: Option<Arc<ClientConfig>>,
    sasl: Option<Sasl>,
}

impl std::fmt::Debug for Security {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Security")
            .field("tls", &self.tls.is_some())
            .field("sasl", &self.sasl)
            .finish()
    }
}

fn prop<'a>(props: &'a BTreeMap<String, String>, key: &str) -> Option<&'a str> {
    props.get(key).map(|v| v.trim()).filter(|v| !v.is_empty())
}

impl Security {
    /// [`Security::with_tokens`] without a token provider.
    #[cfg(test)]
    pub(crate) fn from_props(props: &BTreeMap<String, String>) -> Result<Security, StreamsError> {
        Self::with_tokens(props, None)
    }

    /// The security of client properties `props` (librdkafka names), OAUTHBEARER presenting
    /// `tokens`' tokens when the application has a provider; a property this client cannot
    /// honour is a [`StreamsError::Config`] naming it.
    pub(crate) fn with_tokens(
        props: &BTreeMap<String, String>,
        tokens: Option<&OAuthBearerTokenProvider>,
    ) -> Result<Security, StreamsError> {
        let protocol = prop(props, "security.protocol")
            .unwrap_or("PLAINTEXT")
            .to_ascii_uppercase();
        let (tls, sasl) = match protocol.as_str() {
            "PLAINTEXT" => (false, false),
            "SSL" => (true, false),
            "SASL_PLAINTEXT" => (false, true),
            "SASL_SSL" => (true, true),
            other => {
                return Err(invalid(
                    "security.protocol",
                    format!("`{other}` is not PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"),
                ));
            }
        };
        Ok(Security {
            tls: if tls {
                Some(Arc::new(tls_config(props)?))
            } else {
                None
            },
            sasl: if sasl { Some(sasl_of(props, tokens)?) } else { None },
        })
    }

    /// The SASL credentials, if the connection authenticates.
    pub(crate) fn sasl(&self) -> Option<&Sasl> {
        self.sasl.as_ref()
    }

    /// Wraps the connected `tcp` to `host` in TLS when configured, the handshake done.
    pub(crate) fn open(&self, tcp: TcpStream, host: &str, addr: &str) -> Result<Stream, StreamsError> {
        let Some(config) = &self.tls else {
            return Ok(Stream::Plain(tcp));
        };
        let tls_error = |message: String| StreamsError::Tls {
            message: format!("{addr}: {message}"),
        };
        let name = ServerName::try_from(host.to_owned())
            .map_err(|e| tls_error(format!("`{host}` is not a valid server name: {e}")))?;
        let conn = ClientConnection::new(config.clone(), name).map_err(|e| tls_error(e.to_string()))?;
        let mut stream = StreamOwned::new(conn, tcp);
        while stream.conn.is_handshaking() {
            stream.conn.complete_io(&mut stream.sock).map_err(|e| {
                // rustls reports a refused certificate as an InvalidData I/O error.
                match e
                    .get_ref()
                    .and_then(|inner| inner.downcast_ref::<rustls::Error>())
                {
                    Some(tls) => tls_error(tls.to_string()),
                    None => StreamsError::Kafka {
                        message: format!("TLS handshake with {addr}: {e}"),
                        retriable: true,
                    },
                }
            })?;
        }
        Ok(Stream::Tls(Box::new(stream)))
    }
}

/// A connection's byte stream.
pub(crate) enum Stream {
    Plain(TcpStream),
    Tls(Box<StreamOwned<ClientConnection, TcpStream>>),
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Stream::Plain(s) => s.flush(),
            Stream::Tls(s) => s.flush(),
        }
    }
}

fn sasl_of(
    props: &BTreeMap<String, String>,
    tokens: Option<&OAuthBearerTokenProvider>,
) -> Result<Sasl, StreamsError> {
    let (key, mechanism) = match (prop(props, "sasl.mechanism"), prop(props, "sasl.mechanisms")) {
        (Some(m), _) => ("sasl.mechanism", m),
        (None, Some(m)) => ("sasl.mechanisms", m),
        // librdkafka's and Java's default.
        (None, None) => ("sasl.mechanism", "GSSAPI"),
    };
    let mechanism = match mechanism.to_ascii_uppercase().as_str() {
        "PLAIN" => Mechanism::Plain,
        "SCRAM-SHA-256" => Mechanism::ScramSha256,
        "SCRAM-SHA-512" => Mechanism::ScramSha512,
        "OAUTHBEARER" => {
            if let Some(tokens) = tokens {
                // The configuration checked that no other token source is set.
                return Ok(Sasl {
                    mechanism: Mechanism::OAuthBearer,
                    username: "the token provider's principal".into(),
                    secret: Secret::Token(tokens.clone()),
                });
            }
            return oauth_of(props);
        }
        other => {
            return Err(invalid(
                key,
                format!(
                    "group.protocol=streams authenticates with PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 \
                     or OAUTHBEARER, not {other}; use one of them, or group.protocol=consumer"
                ),
            ));
        }
    };
    let need = |key: &str| {
        props
            .get(key)
            .cloned()
            .ok_or_else(|| invalid(key, format!("required by sasl.mechanism={}", mechanism.name())))
    };
    Ok(Sasl {
        mechanism,
        username: need("sasl.username")?,
        secret: Secret::Password(need("sasl.password")?),
    })
}

/// OAUTHBEARER credentials: librdkafka's unsecured JWT, the one token source this client
/// has.
fn oauth_of(props: &BTreeMap<String, String>) -> Result<Sasl, StreamsError> {
    if let Some(method) = prop(props, "sasl.oauthbearer.method")
        && !method.eq_ignore_ascii_case("default")
    {
        return Err(invalid(
            "sasl.oauthbearer.method",
            format!(
                "group.protocol=streams does not fetch OAUTHBEARER tokens ({method}); it presents \
                 unsecured JWTs (enable.sasl.oauthbearer.unsecure.jwt=true) only: use \
                 group.protocol=consumer with this token source"
            ),
        ));
    }
    let unsecured = prop(props, "enable.sasl.oauthbearer.unsecure.jwt");
    if !unsecured.is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return Err(invalid(
            "enable.sasl.oauthbearer.unsecure.jwt",
            "group.protocol=streams presents OAUTHBEARER tokens as unsecured JWTs only: set it to \
             true, with the principal in sasl.oauthbearer.config, or use group.protocol=consumer",
        ));
    }
    let config = prop(props, "sasl.oauthbearer.config").ok_or_else(|| {
        invalid(
            "sasl.oauthbearer.config",
            "required by enable.sasl.oauthbearer.unsecure.jwt=true (principal=<name> ...)",
        )
    })?;
    let jwt = UnsecuredJwt::from_config(config).map_err(|m| invalid("sasl.oauthbearer.config", m))?;
    Ok(Sasl {
        mechanism: Mechanism::OAuthBearer,
        username: jwt.principal().to_owned(),
        secret: Secret::UnsecuredJwt(jwt),
    })
}

/// Refuses the TLS properties this client cannot honour.
fn refuse_unsupported(props: &BTreeMap<String, String>) -> Result<(), StreamsError> {
    if prop(props, "ssl.keystore.location").is_some() {
        return Err(invalid(
            "ssl.keystore.location",
            "group.protocol=streams reads the client certificate and key as PEM; \
             set ssl.certificate.location and ssl.key.location (or ssl.keystore.type=PEM)",
        ));
    }
    let key = prop(props, "ssl.key.location").or(prop(props, "ssl.key.pem"));
    if key.is_some() && prop(props, "ssl.key.password").is_some() {
        return Err(invalid(
            "ssl.key.password",
            "group.protocol=streams reads unencrypted private keys only; \
             decrypt the key (openssl pkcs8 -nocrypt) or use group.protocol=consumer",
        ));
    }
    Ok(())
}

/// Certificates of PEM text `pem` (`what` names its origin in errors).
fn certs_of(pem: &[u8], property: &str) -> Result<Vec<CertificateDer<'static>>, StreamsError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(property, format!("not PEM certificates: {e}")))?;
    if certs.is_empty() {
        return Err(invalid(property, "holds no PEM certificate"));
    }
    Ok(certs)
}

/// The PEM bytes of a `<name>.location` / `<name>.pem` pair (a directory location: every
/// file in it, as librdkafka's `ssl.ca.location` allows).
fn pem_of(props: &BTreeMap<String, String>, name: &str) -> Result<Option<(Vec<u8>, String)>, StreamsError> {
    let (location, text) = (format!("{name}.location"), format!("{name}.pem"));
    match (prop(props, &location), prop(props, &text)) {
        (Some(_), Some(_)) => Err(invalid(
            &location,
            format!("set either `{location}` or `{text}`, not both"),
        )),
        (None, Some(pem)) => Ok(Some((pem.as_bytes().to_vec(), text))),
        (Some(path), None) => {
            let read_err = |e: std::io::Error| invalid(&location, format!("cannot read `{path}`: {e}"));
            let meta = std::fs::metadata(path).map_err(read_err)?;
            if !meta.is_dir() {
                return Ok(Some((std::fs::read(path).map_err(read_err)?, location)));
            }
            let mut all = Vec::new();
            let mut entries: Vec<_> = std::fs::read_dir(path)
                .map_err(read_err)?
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .collect();
            entries.sort();
            for p in entries {
                all.extend(std::fs::read(&p).map_err(read_err)?);
                all.push(b'\n');
            }
            Ok(Some((all, location)))
        }
        (None, None) => Ok(None),
    }
}

fn tls_config(props: &BTreeMap<String, String>) -> Result<ClientConfig, StreamsError> {
    refuse_unsupported(props)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    match pem_of(props, "ssl.ca")? {
        Some((pem, property)) => {
            for cert in certs_of(&pem, &property)? {
                roots
                    .add(cert)
                    .map_err(|e| invalid(&property, format!("not a usable CA certificate: {e}")))?;
            }
        }
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
    }
    let verify = !matches!(
        prop(props, "enable.ssl.certificate.verification")
            .map(str::to_ascii_lowercase)
            .as_deref(),
        Some("false")
    );
    let check_name = !matches!(
        prop(props, "ssl.endpoint.identification.algorithm")
            .map(str::to_ascii_lowercase)
            .as_deref(),
        Some("none")
    );
    let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| invalid("ssl.ca.location", e.to_string()))?;
    let verifier: Arc<dyn ServerCertVerifier> = match (verify, check_name) {
        (true, true) => webpki,
        (chain, _) => Arc::new(Relaxed { webpki, chain }),
    };
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid("security.protocol", e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let cert = pem_of(props, "ssl.certificate")?;
    let key = pem_of(props, "ssl.key")?;
    match (cert, key) {
        (None, None) => Ok(builder.with_no_client_auth()),
        (Some(_), None) => Err(invalid(
            "ssl.key.location",
            "required with ssl.certificate.location",
        )),
        (None, Some(_)) => Err(invalid(
            "ssl.certificate.location",
            "required with ssl.key.location",
        )),
        (Some((cert, cert_prop)), Some((key, key_prop))) => {
            let chain = certs_of(&cert, &cert_prop)?;
            // The error names the property only: its value is secret.
            let key = PrivateKeyDer::from_pem_slice(&key)
                .map_err(|_| invalid(&key_prop, "holds no unencrypted PEM private key"))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| invalid(&key_prop, format!("does not fit the certificate: {e}")))
        }
    }
}

/// The broker certificate checks `webpki` relaxed: without the name check
/// (`ssl.endpoint.identification.algorithm=none`), or without any check of the certificate
/// (`enable.ssl.certificate.verification=false`). The handshake's signatures are checked
/// either way.
#[derive(Debug)]
struct Relaxed {
    webpki: Arc<WebPkiServerVerifier>,
    /// Whether the chain is checked against the trusted CAs.
    chain: bool,
}

impl ServerCertVerifier for Relaxed {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if !self.chain {
            return Ok(ServerCertVerified::assertion());
        }
        match self
            .webpki
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForName
                | rustls::CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

#[cfg(test)]
#[path = "security_tests.rs"]
mod tests;
