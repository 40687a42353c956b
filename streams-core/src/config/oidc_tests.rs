use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::thread::JoinHandle;

use super::*;
use crate::config::StreamsConfig;

/// A token endpoint answering one request with `status` and `body`; the join handle gives
/// the request it received (head and body).
fn endpoint(status: u16, body: String) -> (String, JoinHandle<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/oauth2/token", listener.local_addr().unwrap());
    let handle = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut request = String::new();
        let mut length = 0;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().unwrap();
            }
            request.push_str(&line);
            if line == "\r\n" {
                break;
            }
        }
        let mut form = vec![0; length];
        reader.read_exact(&mut form).unwrap();
        request.push_str(&String::from_utf8(form).unwrap());
        let mut stream = stream;
        write!(
            stream,
            "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        request
    });
    (url, handle)
}

fn jwt(claims: &serde_json::Value) -> String {
    format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    )
}

fn oidc_config(url: &str, extra: &[(&str, &str)]) -> Result<StreamsConfig, StreamsError> {
    let mut props = vec![
        ("application.id", "app"),
        ("security.protocol", "SASL_SSL"),
        ("sasl.mechanism", "OAUTHBEARER"),
        (METHOD, "OIDC"),
        (ENDPOINT, url),
        (CLIENT_ID, "streams-app"),
        (CLIENT_SECRET, "oidc-secret-5e2a"),
    ];
    props.extend_from_slice(extra);
    StreamsConfig::from_properties(props)
}

/// The properties make a provider that asks the endpoint with the client's credentials and
/// scope, reads the principal and expiry from the token, and adds the extensions; no client
/// sees the properties.
#[test]
fn the_properties_make_a_provider_of_the_endpoints_tokens() {
    let token = jwt(&serde_json::json!({ "sub": "streams", "exp": 4_102_444_800_u64 }));
    let (url, request) = endpoint(
        200,
        serde_json::json!({ "access_token": token, "token_type": "bearer", "expires_in": 60 }).to_string(),
    );
    let config = oidc_config(
        &url,
        &[
            (SCOPE, "kafka read:all"),
            (EXTENSIONS, "logicalCluster=lkc-1, identityPoolId=pool-2"),
        ],
    )
    .unwrap();
    for props in [
        config.main_consumer_properties(),
        config.producer_properties(),
        config.admin_properties(),
    ] {
        assert!(
            props.keys().all(|k| !k.starts_with("sasl.oauthbearer")),
            "{props:?}"
        );
        assert_eq!(props["sasl.mechanism"], "OAUTHBEARER");
    }
    let got = config.oauth_bearer_token_provider().unwrap().token().unwrap();
    assert_eq!(got.value(), token);
    assert_eq!(got.principal(), "streams");
    assert_eq!(got.expires_at(), UNIX_EPOCH + Duration::from_secs(4_102_444_800));
    assert_eq!(
        got.extensions(),
        [
            ("logicalCluster".to_owned(), "lkc-1".to_owned()),
            ("identityPoolId".to_owned(), "pool-2".to_owned())
        ]
    );
    let request = request.join().unwrap();
    assert!(request.starts_with("POST /oauth2/token "), "{request}");
    let basic = STANDARD.encode("streams-app:oidc-secret-5e2a");
    assert!(
        request.contains(&format!("authorization: Basic {basic}\r\n"))
            || request.contains(&format!("Authorization: Basic {basic}\r\n")),
        "{request}"
    );
    assert!(
        request.ends_with("grant_type=client_credentials&scope=kafka+read%3Aall"),
        "{request}"
    );
}

/// An error answer, a token that is no JWT, and one without a principal are errors that
/// name the endpoint and never quote the secret or the token.
#[test]
fn bad_answers_are_errors_without_secrets() {
    let e = answer(
        401,
        r#"{"error":"invalid_client","error_description":"bad secret"}"#,
    )
    .unwrap_err();
    assert!(
        e.contains("HTTP 401") && e.contains("invalid_client") && e.contains("/oauth2/token"),
        "{e}"
    );
    assert!(!e.contains("oidc-secret"), "{e}");

    let e = answer(200, r#"{"access_token":"opaque-token-value"}"#).unwrap_err();
    assert!(
        e.contains("is not a JWT") && !e.contains("opaque-token-value"),
        "{e}"
    );

    let nameless = jwt(&serde_json::json!({ "exp": 4_102_444_800_u64 }));
    let e = answer(200, &serde_json::json!({ "access_token": nameless }).to_string()).unwrap_err();
    assert!(e.contains("no `sub` claim") && !e.contains(&nameless), "{e}");

    // `expires_in` serves where the token has no `exp`.
    let no_exp = jwt(&serde_json::json!({ "sub": "streams" }));
    let got = answer(
        200,
        &serde_json::json!({ "access_token": no_exp, "expires_in": 300 }).to_string(),
    )
    .unwrap();
    let left = got.expires_at().duration_since(SystemTime::now()).unwrap();
    assert!(
        left > Duration::from_secs(290) && left <= Duration::from_secs(300),
        "{left:?}"
    );
}

/// The token (or the error) of an endpoint answering `status` and `body`.
fn answer(status: u16, body: &str) -> Result<OAuthBearerToken, String> {
    let (url, _) = endpoint(status, body.to_owned());
    oidc_config(&url, &[])
        .unwrap()
        .oauth_bearer_token_provider()
        .unwrap()
        .token()
}

/// Refused at construction, naming the property: a prefixed OIDC property, a missing one,
/// a malformed extension, a URL that is not HTTP, unsecured JWTs beside it, another
/// provider beside it.
#[test]
fn bad_settings_are_refused_naming_the_property() {
    let refused = |r: Result<StreamsConfig, StreamsError>| match r {
        Err(StreamsError::Config { property, message }) => {
            assert!(!message.contains("oidc-secret"), "{message}");
            property
        }
        other => panic!("{other:?}"),
    };
    let url = "https://idp.example.com/token";
    assert_eq!(
        refused(oidc_config(url, &[("producer.sasl.oauthbearer.scope", "x")])),
        "producer.sasl.oauthbearer.scope"
    );
    assert_eq!(refused(oidc_config(url, &[(CLIENT_SECRET, "")])), CLIENT_SECRET);
    assert_eq!(refused(oidc_config(url, &[(EXTENSIONS, "novalue")])), EXTENSIONS);
    assert_eq!(refused(oidc_config("idp.example.com/token", &[])), ENDPOINT);
    assert_eq!(refused(oidc_config(url, &[(CA, "/no/such/ca.pem")])), CA);
    assert_eq!(
        refused(oidc_config(
            url,
            &[("enable.sasl.oauthbearer.unsecure.jwt", "true")]
        )),
        "enable.sasl.oauthbearer.unsecure.jwt"
    );
    let both = oidc_config(url, &[])
        .unwrap()
        .to_builder()
        .oauth_bearer_token_provider(|| Err("unused".into()));
    assert_eq!(refused(both.build()), METHOD);
}

#[test]
fn form_values_are_encoded() {
    assert_eq!(form_encode("a b:c/d~é"), "a+b%3Ac%2Fd%7E%C3%A9");
}

/// A Kafka Streams application's OAuth login (Kafka's `OAuthBearerLoginModule` and
/// `OAuthBearerLoginCallbackHandler`) makes the same provider.
#[test]
fn java_login_properties_make_the_same_provider() {
    let token = jwt(&serde_json::json!({ "sub": "streams", "exp": 4_102_444_800_u64 }));
    let (url, request) = endpoint(200, serde_json::json!({ "access_token": token }).to_string());
    let config = StreamsConfig::from_properties([
        ("application.id", "app"),
        ("security.protocol", "SASL_SSL"),
        ("sasl.mechanism", "OAUTHBEARER"),
        (
            "sasl.login.callback.handler.class",
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
        ),
        (ENDPOINT, &url),
        (
            "sasl.jaas.config",
            r#"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="streams-app" clientSecret="oidc-secret-5e2a" scope="kafka";"#,
        ),
    ])
    .unwrap();
    assert!(
        config
            .consumer_properties()
            .keys()
            .all(|k| !k.starts_with("sasl.oauthbearer") && !k.starts_with("sasl.login"))
    );
    let got = config.oauth_bearer_token_provider().unwrap().token().unwrap();
    assert_eq!(got.principal(), "streams");
    let request = request.join().unwrap();
    assert!(
        request.contains(&STANDARD.encode("streams-app:oidc-secret-5e2a")),
        "{request}"
    );
    assert!(
        request.ends_with("grant_type=client_credentials&scope=kafka"),
        "{request}"
    );
}
