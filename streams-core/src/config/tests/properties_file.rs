//! Java `.properties` files: their syntax, and configurations read from text and from files.

use std::path::PathBuf;
use std::time::Duration;

use super::fails_on;
use crate::config::{StreamsConfig, file};
use crate::model::error::StreamsError;

const FILE: &str = r"# A streams application
! also a comment
   # an indented comment

application.id = word-count
bootstrap.servers:localhost:9092
num.stream.threads   4
processing.guarantee=exactly_once_v2
state.dir = /tmp/wc   
consumer.fetch.wait.max.ms: 100
producer.client.id = wc\
                     -producer
sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required \
    username=user password=secret;
my.escaped\ key\=x = a\tb\u00e9
";

#[test]
fn properties_file_syntax() {
    let entries = file::parse(FILE, "line ").unwrap();
    let pairs: Vec<(&str, &str)> = entries
        .iter()
        .map(|e| (e.key.as_str(), e.value.as_str()))
        .collect();
    assert_eq!(
        pairs,
        [
            ("application.id", "word-count"),
            ("bootstrap.servers", "localhost:9092"),
            ("num.stream.threads", "4"),
            ("processing.guarantee", "exactly_once_v2"),
            // As in Java, a value keeps its trailing whitespace; `from_properties` trims it.
            ("state.dir", "/tmp/wc   "),
            ("consumer.fetch.wait.max.ms", "100"),
            ("producer.client.id", "wc-producer"),
            (
                "sasl.jaas.config",
                "org.apache.kafka.common.security.plain.PlainLoginModule required username=user password=secret;"
            ),
            ("my.escaped key=x", "a\tb\u{e9}"),
        ]
    );
    assert_eq!(entries[0].line, 5);
    assert_eq!(entries[7].line, 13);

    let more = file::parse(
        "a.b=\\ x\\ \nc.d = \\uD83D\\uDE00\r\nempty.value\ntrailing=x\\",
        "line ",
    )
    .unwrap();
    let pairs: Vec<(&str, &str)> = more.iter().map(|e| (e.key.as_str(), e.value.as_str())).collect();
    assert_eq!(
        pairs,
        [
            ("a.b", " x "),
            ("c.d", "😀"),
            ("empty.value", ""),
            ("trailing", "x")
        ]
    );

    for bad in ["a.b=\\u12", "a.b=\\uZZZZ", "a.b=\\uD83Dx", "a.b=\\uDE00"] {
        let err = file::parse(bad, "line ").unwrap_err();
        assert!(
            matches!(&err, StreamsError::Config { property, message }
            if property == "a.b" && message.starts_with("line 1:")),
            "{bad}: {err}"
        );
    }
    let err = file::parse("# ok\n\n  x.y : \\u00e9\\\n  \\uD83D", "app.properties:").unwrap_err();
    assert!(
        matches!(&err, StreamsError::Config { property, message }
        if property == "x.y" && message.starts_with("app.properties:3:")),
        "{err}"
    );
}

#[test]
fn properties_continuations_and_unicode_escapes() {
    let text = "# a comment is not unescaped: C:\\users\\me \\uZZZZ \\\n\
                a.b = one, \\\n\
                \t  two\\\n\
                , three\r\n\
                ! a comment line ending in a backslash does not continue \\\r\
                c\\u00e9.d\\u0020e : caf\\u00E9 \\u2603 \\uD83D\\uDE00\\\\u0041\n\
                f.g=h\\\n\
                # not a comment: this line continues f.g\n\
                last=x\\";
    let entries = file::parse(text, "line ").unwrap();
    let got: Vec<(&str, &str, usize)> = entries
        .iter()
        .map(|e| (e.key.as_str(), e.value.as_str(), e.line))
        .collect();
    assert_eq!(
        got,
        [
            ("a.b", "one, two, three", 2),
            ("c\u{e9}.d e", "caf\u{e9} \u{2603} \u{1F600}\\u0041", 6),
            ("f.g", "h# not a comment: this line continues f.g", 7),
            ("last", "x", 9),
        ]
    );
}

#[test]
fn from_properties_str_and_file() {
    let c = StreamsConfig::from_properties_str(FILE).unwrap();
    assert_eq!(c.application_id(), "word-count");
    assert_eq!(c.bootstrap_servers(), Some("localhost:9092"));
    assert_eq!(c.num_stream_threads(), 4);
    assert!(c.is_exactly_once());
    assert_eq!(c.commit_interval(), Duration::from_millis(100));
    assert_eq!(c.state_dir(), PathBuf::from("/tmp/wc"));
    assert_eq!(c.consumer_properties()["fetch.wait.max.ms"], "100");
    assert_eq!(c.producer_properties()["client.id"], "wc-producer");
    // The Java JAAS configuration reaches the clients as librdkafka's properties.
    assert_eq!(c.admin_properties()["sasl.username"], "user");
    assert_eq!(c.admin_properties()["sasl.password"], "secret");
    assert!(!c.admin_properties().contains_key("sasl.jaas.config"));

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.properties");
    std::fs::write(&path, FILE).unwrap();
    assert_eq!(StreamsConfig::from_file(&path).unwrap(), c);

    std::fs::write(&path, "application.id=a\n\n# threads\nnum.stream.threads=0\n").unwrap();
    let m = fails_on(StreamsConfig::from_file(&path), "num.stream.threads");
    assert!(m.ends_with(&format!("(at {}:4)", path.display())), "{m}");

    let missing = dir.path().join("missing.properties");
    let m = fails_on(StreamsConfig::from_file(&missing), &missing.display().to_string());
    assert!(m.contains("cannot read"), "{m}");

    let m = fails_on(
        StreamsConfig::from_properties_str("application.id=a\napplicationid=b"),
        "applicationid",
    );
    assert!(m.ends_with("(at line 2)"), "{m}");
}
