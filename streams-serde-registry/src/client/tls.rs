//! The client's TLS settings: trusted CAs and a client certificate from PEM files.

use crate::config::RegistryConfig;
use crate::error::RegistryError;

/// The TLS settings of `config`: its trusted CAs and client certificate, read now so that a
/// missing or unreadable file fails the client's construction, naming the property.
pub(super) fn tls_config(config: &RegistryConfig) -> Result<ureq::tls::TlsConfig, RegistryError> {
    use crate::config::{SSL_CA, SSL_CERTIFICATE, SSL_KEY};
    use ureq::tls::{Certificate, ClientCert, PemItem, PrivateKey, RootCerts, TlsConfig};

    let read = |path: &std::path::Path, property: &str| {
        std::fs::read(path).map_err(|e| RegistryError::Config {
            property: property.to_owned(),
            message: format!("cannot read {}: {e}", path.display()),
        })
    };
    let certificates =
        |path: &std::path::Path, property: &str| -> Result<Vec<Certificate<'static>>, RegistryError> {
            let pem = read(path, property)?;
            let certs: Vec<Certificate<'static>> = ureq::tls::parse_pem(&pem)
                .filter_map(|item| match item {
                    Ok(PemItem::Certificate(c)) => Some(c),
                    _ => None,
                })
                .collect();
            if certs.is_empty() {
                return Err(RegistryError::Config {
                    property: property.to_owned(),
                    message: format!("no PEM certificate in {}", path.display()),
                });
            }
            Ok(certs)
        };
    let mut tls = TlsConfig::builder();
    if let Some(path) = &config.ssl_ca_location {
        tls = tls.root_certs(RootCerts::new_with_certs(&certificates(path, SSL_CA)?));
    }
    if let Some((cert, key)) = &config.ssl_client_cert {
        let chain = certificates(cert, SSL_CERTIFICATE)?;
        let key = PrivateKey::from_pem(&read(key, SSL_KEY)?).map_err(|e| RegistryError::Config {
            property: SSL_KEY.to_owned(),
            message: format!("no PEM private key in {}: {e}", key.display()),
        })?;
        tls = tls.client_cert(Some(ClientCert::new_with_certs(&chain, key)));
    }
    Ok(tls.build())
}
