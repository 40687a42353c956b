//! Java's OAUTHBEARER login settings, as this framework takes them.
//!
//! A Kafka Streams application configures OAUTHBEARER with a JAAS entry of
//! `OAuthBearerLoginModule`, and for tokens from an identity provider Kafka's
//! `OAuthBearerLoginCallbackHandler` with `sasl.oauthbearer.token.endpoint.url`. They become
//! librdkafka's names, which the rest of the configuration reads:
//!
//! | JAAS option of `OAuthBearerLoginModule` | becomes |
//! |---|---|
//! | `clientId`, `clientSecret`, `scope` | `sasl.oauthbearer.method=oidc`, `sasl.oauthbearer.client.id`, `.client.secret`, `.scope` (served by `oidc.rs`) |
//! | `extension_<name>=<value>` | `sasl.oauthbearer.extensions` (`<name>=<value>,...`) |
//! | `unsecuredLoginStringClaim_sub` | `enable.sasl.oauthbearer.unsecure.jwt=true` and `sasl.oauthbearer.config=principal=<sub>` |
//! | `unsecuredLoginLifetimeSeconds`, `unsecuredLoginExtension_<name>` | `lifeSeconds=`, `extension_<name>=` in `sasl.oauthbearer.config` |
//!
//! `sasl.login.callback.handler.class` naming Kafka's `OAuthBearerLoginCallbackHandler` is
//! taken out (the framework is that handler); any other class is refused, naming the property:
//! its token source goes to `StreamsConfigBuilder::oauth_bearer_token_provider`. Errors never
//! quote the JAAS text: it holds the client secret.

use std::collections::BTreeMap;

use super::invalid;
use super::jaas::JaasEntry;
use crate::model::error::StreamsError;

/// Kafka's OAUTHBEARER login module.
pub(super) const MODULE: &str = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule";

const CALLBACK: &str = "sasl.login.callback.handler.class";

/// Kafka's login callback handler of the OIDC source, under its names before and since
/// Apache Kafka 3.4.
const HANDLERS: [&str; 2] = [
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
];

/// Sets the librdkafka properties of `entry`, an `OAuthBearerLoginModule` entry of scope
/// `prefix`.
pub(super) fn translate(
    prefix: &str,
    entry: &JaasEntry,
    props: &mut BTreeMap<String, String>,
) -> Result<(), StreamsError> {
    let jaas = format!("{prefix}sasl.jaas.config");
    let mut set = |key: &str, value: String| {
        if props.contains_key(key) {
            return Err(invalid(
                &jaas,
                format!("set either `{jaas}` or `{prefix}{key}`, not both"),
            ));
        }
        props.insert(key.to_owned(), value);
        Ok(())
    };
    let named = |start: &str| -> Vec<(String, String)> {
        entry
            .options
            .iter()
            .filter_map(|(k, v)| k.strip_prefix(start).map(|name| (name.to_owned(), v.clone())))
            .collect()
    };
    if let Some(sub) = entry.option("unsecuredLoginStringClaim_sub") {
        let mut config = format!("principal={sub}");
        if let Some(life) = entry.option("unsecuredLoginLifetimeSeconds") {
            config.push_str(&format!(" lifeSeconds={life}"));
        }
        for (name, value) in named("unsecuredLoginExtension_") {
            config.push_str(&format!(" extension_{name}={value}"));
        }
        set("enable.sasl.oauthbearer.unsecure.jwt", "true".into())?;
        return set("sasl.oauthbearer.config", config);
    }
    let Some(client_id) = entry.option("clientId") else {
        return Err(invalid(
            &jaas,
            "an `OAuthBearerLoginModule` entry needs `clientId` and `clientSecret` (tokens from \
             sasl.oauthbearer.token.endpoint.url) or `unsecuredLoginStringClaim_sub` (unsecured JWTs)",
        ));
    };
    let secret = entry
        .option("clientSecret")
        .ok_or_else(|| invalid(&jaas, "the JAAS configuration has no `clientSecret` option"))?;
    set("sasl.oauthbearer.method", "oidc".into())?;
    set("sasl.oauthbearer.client.id", client_id.to_owned())?;
    set("sasl.oauthbearer.client.secret", secret.to_owned())?;
    if let Some(scope) = entry.option("scope") {
        set("sasl.oauthbearer.scope", scope.to_owned())?;
    }
    let extensions: Vec<String> = named("extension_")
        .into_iter()
        .map(|(name, value)| format!("{name}={value}"))
        .collect();
    if !extensions.is_empty() {
        set("sasl.oauthbearer.extensions", extensions.join(","))?;
    }
    Ok(())
}

/// Takes out Java's `sasl.login.callback.handler.class` where it names Kafka's OIDC handler;
/// refuses any other.
pub(super) fn callback_handler(
    prefix: &str,
    props: &mut BTreeMap<String, String>,
) -> Result<(), StreamsError> {
    match props.remove(CALLBACK) {
        Some(class) if !HANDLERS.contains(&class.trim()) => Err(invalid(
            &format!("{prefix}{CALLBACK}"),
            format!(
                "only Kafka's `OAuthBearerLoginCallbackHandler` (tokens from \
                 sasl.oauthbearer.token.endpoint.url) has an equivalent here, not `{class}`: give \
                 another token source to StreamsConfigBuilder::oauth_bearer_token_provider"
            ),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::jaas::parse_jaas;
    use crate::config::tests::map as props;

    /// What the configuration does with one scope's properties: the JAAS entry, then the
    /// callback handler.
    fn translate_scope(prefix: &str, props: &mut BTreeMap<String, String>) -> Result<(), StreamsError> {
        if let Some(text) = props.remove(JAAS) {
            let entry = parse_jaas(&text).map_err(|m| invalid(JAAS, m))?;
            translate(prefix, &entry, props)?;
        }
        callback_handler(prefix, props)
    }

    const JAAS: &str = "sasl.jaas.config";

    #[test]
    fn client_credentials_become_the_oidc_properties() {
        let mut p = props(&[
            (
                JAAS,
                r#"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="app" clientSecret="s3cret" scope="kafka" extension_logicalCluster="lkc-1" extension_identityPoolId="pool-2";"#,
            ),
            (CALLBACK, HANDLERS[1]),
            ("sasl.oauthbearer.token.endpoint.url", "https://idp/token"),
        ]);
        translate_scope("", &mut p).unwrap();
        assert_eq!(
            p,
            props(&[
                ("sasl.oauthbearer.method", "oidc"),
                ("sasl.oauthbearer.client.id", "app"),
                ("sasl.oauthbearer.client.secret", "s3cret"),
                ("sasl.oauthbearer.scope", "kafka"),
                (
                    "sasl.oauthbearer.extensions",
                    "logicalCluster=lkc-1,identityPoolId=pool-2"
                ),
                ("sasl.oauthbearer.token.endpoint.url", "https://idp/token"),
            ])
        );
    }

    #[test]
    fn unsecured_logins_become_unsecured_jwts() {
        let mut p = props(&[(
            JAAS,
            r#"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="alice" unsecuredLoginLifetimeSeconds="60" unsecuredLoginExtension_traceId="x";"#,
        )]);
        translate_scope("", &mut p).unwrap();
        assert_eq!(
            p,
            props(&[
                ("enable.sasl.oauthbearer.unsecure.jwt", "true"),
                (
                    "sasl.oauthbearer.config",
                    "principal=alice lifeSeconds=60 extension_traceId=x"
                ),
            ])
        );
    }

    /// Refused, naming the property and quoting no secret: an entry without a client id or
    /// a subject, one without the secret, a property set both ways, another handler class.
    #[test]
    fn incomplete_or_conflicting_settings_are_refused() {
        let module = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required";
        for (extra, property) in [
            (
                vec![(JAAS, format!(r#"{module} clientSecret="s3cret";"#))],
                "admin.sasl.jaas.config",
            ),
            (
                vec![(JAAS, format!(r#"{module} clientId="app";"#))],
                "admin.sasl.jaas.config",
            ),
            (
                vec![
                    (JAAS, format!(r#"{module} clientId="app" clientSecret="s3cret";"#)),
                    ("sasl.oauthbearer.client.id", "other".into()),
                ],
                "admin.sasl.jaas.config",
            ),
            (
                vec![(CALLBACK, "com.example.MyHandler".into())],
                "admin.sasl.login.callback.handler.class",
            ),
        ] {
            let pairs: Vec<(&str, &str)> = extra.iter().map(|(k, v)| (*k, v.as_str())).collect();
            match translate_scope("admin.", &mut props(&pairs)) {
                Err(StreamsError::Config { property: p, message }) => {
                    assert_eq!(p, property, "{message}");
                    assert!(!message.contains("s3cret"), "{message}");
                }
                other => panic!("{other:?}"),
            }
        }
    }
}
