//! The Java clients' security properties, as librdkafka takes them.
//!
//! A Kafka Streams application's properties file configures TLS and SASL the Java way:
//! `sasl.jaas.config`, trust and key stores. librdkafka has no JAAS and reads certificates
//! as PEM (or a PKCS#12 key store), so each client scope's properties are rewritten here,
//! once, when the configuration is built:
//!
//! | Java property | becomes |
//! |---|---|
//! | `sasl.jaas.config` with `PlainLoginModule` or `ScramLoginModule` | `sasl.username`, `sasl.password` |
//! | `ssl.truststore.location` with `ssl.truststore.type=PEM` | `ssl.ca.location` |
//! | `ssl.truststore.certificates` | `ssl.ca.pem` |
//! | `ssl.keystore.location` with `ssl.keystore.type=PEM` | `ssl.certificate.location` and `ssl.key.location` |
//! | `ssl.keystore.type=PKCS12` | nothing: librdkafka's `ssl.keystore.location` is PKCS#12 |
//! | `ssl.keystore.key`, `ssl.keystore.certificate.chain` | `ssl.key.pem`, `ssl.certificate.pem` |
//! | `ssl.endpoint.identification.algorithm=` (empty) | `none` |
//!
//! What librdkafka cannot do is refused, naming the property and what to use instead: a
//! JKS or PKCS#12 trust store, a JKS key store, another JAAS login module. Error messages
//! name properties, never their values: most of these hold secrets.

use std::collections::BTreeMap;

use super::invalid;
use super::jaas::{JaasEntry, parse_jaas};
use crate::model::error::StreamsError;

const JAAS: &str = "sasl.jaas.config";
const PLAIN_MODULE: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";
const SCRAM_MODULE: &str = "org.apache.kafka.common.security.scram.ScramLoginModule";

/// Rewrites the Java security properties among one client scope's `props` (prefix
/// stripped; `prefix` names them in errors).
pub(super) fn translate(prefix: &str, props: &mut BTreeMap<String, String>) -> Result<(), StreamsError> {
    let name = |key: &str| format!("{prefix}{key}");
    if let Some(jaas) = props.remove(JAAS) {
        let entry = parse_jaas(&jaas).map_err(|m| invalid(&name(JAAS), m))?;
        if entry.module == super::jaas_oauth::MODULE {
            super::jaas_oauth::translate(prefix, &entry, props)?;
            return finish(prefix, props);
        }
        let (username, password) = jaas_credentials(&entry).map_err(|m| invalid(&name(JAAS), m))?;
        for key in ["sasl.username", "sasl.password"] {
            if props.contains_key(key) {
                return Err(invalid(
                    &name(JAAS),
                    format!("set either `{JAAS}` or `{}`, not both", name(key)),
                ));
            }
        }
        props.insert("sasl.username".into(), username);
        props.insert("sasl.password".into(), password);
    }
    finish(prefix, props)
}

/// The properties besides the JAAS configuration: Java's OAuth login callback handler, the
/// trust and key stores, the PEM texts, the endpoint identification.
fn finish(prefix: &str, props: &mut BTreeMap<String, String>) -> Result<(), StreamsError> {
    super::jaas_oauth::callback_handler(prefix, props)?;
    truststore(prefix, props)?;
    keystore(prefix, props)?;
    for (java, librdkafka) in [
        ("ssl.truststore.certificates", "ssl.ca.pem"),
        ("ssl.keystore.key", "ssl.key.pem"),
        ("ssl.keystore.certificate.chain", "ssl.certificate.pem"),
    ] {
        rename(prefix, props, java, librdkafka)?;
    }
    if let Some(v) = props.get_mut("ssl.endpoint.identification.algorithm") {
        if v.is_empty() {
            "none".clone_into(v);
        } else {
            *v = v.to_ascii_lowercase();
        }
    }
    Ok(())
}

/// Moves `from`'s value to `to`; both set is an error.
fn rename(
    prefix: &str,
    props: &mut BTreeMap<String, String>,
    from: &str,
    to: &str,
) -> Result<(), StreamsError> {
    let Some(value) = props.remove(from) else {
        return Ok(());
    };
    if props.contains_key(to) {
        return Err(invalid(
            &format!("{prefix}{from}"),
            format!("set either `{prefix}{from}` or `{prefix}{to}`, not both"),
        ));
    }
    props.insert(to.to_owned(), value);
    Ok(())
}

/// `ssl.truststore.*`: a PEM file becomes `ssl.ca.location`; other stores are refused.
fn truststore(prefix: &str, props: &mut BTreeMap<String, String>) -> Result<(), StreamsError> {
    let kind = props.remove("ssl.truststore.type");
    let Some(location) = props.remove("ssl.truststore.location") else {
        for key in ["ssl.truststore.password"] {
            if props.remove(key).is_some() {
                tracing::warn!(property = %format!("{prefix}{key}"), "ignored: no ssl.truststore.location is set");
            }
        }
        return Ok(());
    };
    // A PEM trust store has no password.
    props.remove("ssl.truststore.password");
    if !kind.as_deref().is_some_and(|k| k.eq_ignore_ascii_case("PEM")) {
        return Err(invalid(
            &format!("{prefix}ssl.truststore.location"),
            format!(
                "librdkafka reads trusted CA certificates as PEM, not from a {} trust store: set \
                 `{prefix}ssl.ca.location` to a PEM file (`keytool -exportcert -rfc -keystore <trust store> \
                 -alias <CA> -file ca.pem`), or `{prefix}ssl.truststore.type=PEM` if the file is PEM already",
                kind.as_deref().unwrap_or("JKS")
            ),
        ));
    }
    props.insert("ssl.truststore.location".into(), location);
    rename(prefix, props, "ssl.truststore.location", "ssl.ca.location")
}

/// `ssl.keystore.type`: PKCS#12 is librdkafka's own key store; a PEM file holds the key and
/// the certificate chain; JKS is refused.
fn keystore(prefix: &str, props: &mut BTreeMap<String, String>) -> Result<(), StreamsError> {
    let Some(kind) = props.remove("ssl.keystore.type") else {
        return Ok(());
    };
    if kind.eq_ignore_ascii_case("PKCS12") {
        return Ok(());
    }
    if kind.eq_ignore_ascii_case("PEM") {
        // The key's own password, if any, is `ssl.key.password`, as in Java.
        props.remove("ssl.keystore.password");
        if let Some(location) = props.remove("ssl.keystore.location") {
            for key in ["ssl.certificate.location", "ssl.key.location"] {
                if props.contains_key(key) {
                    return Err(invalid(
                        &format!("{prefix}ssl.keystore.location"),
                        format!("set either `{prefix}ssl.keystore.location` or `{prefix}{key}`, not both"),
                    ));
                }
            }
            props.insert("ssl.certificate.location".into(), location.clone());
            props.insert("ssl.key.location".into(), location);
        }
        return Ok(());
    }
    Err(invalid(
        &format!("{prefix}ssl.keystore.type"),
        format!(
            "`{kind}` key stores are not supported: librdkafka reads PKCS#12 (`keytool -importkeystore \
             -srckeystore <store> -destkeystore store.p12 -deststoretype PKCS12`) or PEM \
             (`{prefix}ssl.key.location`, `{prefix}ssl.certificate.location`)"
        ),
    ))
}

/// The user name and password of a `PlainLoginModule` or `ScramLoginModule` JAAS
/// configuration. Errors never quote the text: it holds the password.
fn jaas_credentials(entry: &JaasEntry) -> Result<(String, String), String> {
    if entry.module != PLAIN_MODULE && entry.module != SCRAM_MODULE {
        return Err(format!(
            "the login module `{}` has no librdkafka equivalent here: `{PLAIN_MODULE}` and `{SCRAM_MODULE}` \
             become `sasl.username`/`sasl.password`, `OAuthBearerLoginModule` the OIDC or unsecured-JWT \
             properties; for GSSAPI use librdkafka's `sasl.kerberos.*` properties",
            entry.module
        ));
    }
    let option = |name: &str| {
        entry
            .option(name)
            .map(str::to_owned)
            .ok_or_else(|| format!("the JAAS configuration has no `{name}` option"))
    };
    Ok((option("username")?, option("password")?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::map as props;

    #[test]
    fn plain_and_scram_become_username_and_password() {
        let mut p = props(&[(
            JAAS,
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="s3cret";"#,
        )]);
        translate("", &mut p).unwrap();
        assert_eq!(p, props(&[("sasl.username", "u"), ("sasl.password", "s3cret")]));

        let mut p = props(&[
            (
                JAAS,
                r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="s3cret";"#,
            ),
            ("sasl.password", "other"),
        ]);
        let e = translate("producer.", &mut p).unwrap_err().to_string();
        assert!(
            e.contains("producer.sasl.jaas.config") && !e.contains("s3cret"),
            "{e}"
        );
    }

    #[test]
    fn errors_about_a_jaas_configuration_never_quote_it() {
        for text in [
            r#"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientSecret="s3cret";"#,
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required password="s3cret";"#,
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required password="s3cret"#,
            r#"org.apache.kafka.common.security.plain.PlainLoginModule password="s3cret";"#,
        ] {
            let e = translate("", &mut props(&[(JAAS, text)]))
                .unwrap_err()
                .to_string();
            assert!(e.contains(JAAS) && !e.contains("s3cret"), "{e}");
        }
    }

    #[test]
    fn stores_become_pem_locations_or_are_refused() {
        let mut p = props(&[
            ("ssl.truststore.location", "/ca.pem"),
            ("ssl.truststore.type", "PEM"),
            ("ssl.truststore.password", "x"),
            ("ssl.keystore.location", "/client.p12"),
            ("ssl.keystore.type", "PKCS12"),
            ("ssl.keystore.password", "k"),
        ]);
        translate("", &mut p).unwrap();
        assert_eq!(
            p,
            props(&[
                ("ssl.ca.location", "/ca.pem"),
                ("ssl.keystore.location", "/client.p12"),
                ("ssl.keystore.password", "k")
            ])
        );

        let mut p = props(&[
            ("ssl.keystore.location", "/client.pem"),
            ("ssl.keystore.type", "pem"),
        ]);
        translate("", &mut p).unwrap();
        assert_eq!(
            p,
            props(&[
                ("ssl.certificate.location", "/client.pem"),
                ("ssl.key.location", "/client.pem")
            ])
        );

        let e = translate(
            "",
            &mut props(&[
                ("ssl.truststore.location", "/t.jks"),
                ("ssl.truststore.password", "s3cret"),
            ]),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("ssl.truststore.location") && e.contains("ssl.ca.location"),
            "{e}"
        );
        assert!(!e.contains("s3cret"), "{e}");
        let e = translate("", &mut props(&[("ssl.keystore.type", "JKS")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("ssl.keystore.type"), "{e}");

        let mut p = props(&[("ssl.keystore.key", "KEY"), ("ssl.truststore.certificates", "CA")]);
        translate("", &mut p).unwrap();
        assert_eq!(p, props(&[("ssl.key.pem", "KEY"), ("ssl.ca.pem", "CA")]));
        assert!(translate("", &mut props(&[("ssl.keystore.key", "a"), ("ssl.key.pem", "b")])).is_err());
    }

    #[test]
    fn an_empty_endpoint_identification_algorithm_is_none() {
        let mut p = props(&[("ssl.endpoint.identification.algorithm", "")]);
        translate("", &mut p).unwrap();
        assert_eq!(p["ssl.endpoint.identification.algorithm"], "none");
        let mut p = props(&[("ssl.endpoint.identification.algorithm", "HTTPS")]);
        translate("", &mut p).unwrap();
        assert_eq!(p["ssl.endpoint.identification.algorithm"], "https");
    }
}
