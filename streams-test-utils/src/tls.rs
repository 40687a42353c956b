//! Certificates for tests of TLS connections, made for each test: a CA, a server
//! certificate and a client certificate it signed, and a CA that signed none of them; and
//! the configuration of a test server presenting the server certificate.

use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// A fresh test CA with a server and a client certificate, and another CA.
pub struct TestCerts {
    /// The CA's certificate, PEM.
    pub ca_pem: String,
    /// The CA's certificate, DER.
    pub ca_der: Vec<u8>,
    /// The server's certificate (for the name given to [`TestCerts::new`]), DER.
    pub server_der: Vec<u8>,
    /// The server's private key, PKCS #8 DER.
    pub server_key_der: Vec<u8>,
    /// The client's certificate (for the name `client`), PEM.
    pub client_pem: String,
    /// The client's private key, PEM.
    pub client_key_pem: String,
    /// The certificate of a CA that signed nothing here, PEM.
    pub other_ca_pem: String,
}

impl TestCerts {
    /// New certificates, the server's for `server_name` (a host name or an IP address).
    ///
    /// # Panics
    ///
    /// If a key or a certificate cannot be made.
    pub fn new(server_name: &str) -> Self {
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
        let leaf = |name: &str| {
            let key = KeyPair::generate().unwrap();
            let cert = CertificateParams::new(vec![name.to_owned()])
                .unwrap()
                .signed_by(&key, &ca)
                .unwrap();
            (cert, key)
        };
        let (server_cert, server_key) = leaf(server_name);
        let (client_cert, client_key) = leaf("client");
        let mut other_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        other_params
            .distinguished_name
            .push(DnType::CommonName, "another CA");
        let other = CertifiedIssuer::self_signed(other_params, KeyPair::generate().unwrap()).unwrap();
        Self {
            ca_pem: ca.pem(),
            ca_der: ca.der().to_vec(),
            server_der: server_cert.der().to_vec(),
            server_key_der: server_key.serialize_der(),
            client_pem: client_cert.pem(),
            client_key_pem: client_key.serialize_pem(),
            other_ca_pem: other.pem(),
        }
    }

    /// A TLS server's configuration presenting the server certificate; with `client_auth`
    /// it requires a client certificate signed by the CA.
    ///
    /// # Panics
    ///
    /// If rustls refuses the certificates.
    pub fn server_config(&self, client_auth: bool) -> Arc<rustls::ServerConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .unwrap();
        let builder = if client_auth {
            let mut roots = rustls::RootCertStore::empty();
            roots.add(CertificateDer::from(self.ca_der.clone())).unwrap();
            let verifier =
                rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                    .build()
                    .unwrap();
            builder.with_client_cert_verifier(verifier)
        } else {
            builder.with_no_client_auth()
        };
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.server_key_der.clone()));
        let chain = vec![CertificateDer::from(self.server_der.clone())];
        Arc::new(builder.with_single_cert(chain, key).unwrap())
    }
}
