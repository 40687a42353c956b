//! The examples' zero-setup schema registry: Apicurio Registry (Confluent-compatible API)
//! that `scripts/schema-registry.sh` runs on 127.0.0.1, as [`local_kafka`](crate::local_kafka)
//! does for the broker.
//!
//! [`registry_or_local`] runs `bash scripts/schema-registry.sh start` from the checkout the
//! binary was built in when no URL is given: a registry already running is used as it is;
//! otherwise it is started (the first start fetches it from Maven Central). Its storage is
//! in memory, so schemas last as long as it runs. Stop it with
//! `bash scripts/schema-registry.sh stop`.

use std::io::{BufRead, BufReader};

use crate::ExampleError;

/// The line `scripts/schema-registry.sh start` ends with, before the URL.
pub const LISTENING_PREFIX: &str = "schema registry listening on ";

/// The registry URL an example uses: `arg` (its `--schema-registry-url`) when given,
/// otherwise the local registry's, started if need be and announced in one line on stderr.
pub fn registry_or_local(arg: Option<String>) -> Result<String, ExampleError> {
    if let Some(url) = arg {
        return Ok(url);
    }
    let script = crate::local_kafka::script_path().with_file_name("schema-registry.sh");
    if !script.is_file() {
        return Err(ExampleError::Other(format!(
            "no --schema-registry-url given, and the local registry's script {} does not exist: \
             pass --schema-registry-url URL",
            script.display()
        )));
    }
    let (mut child, stdout) = crate::local_kafka::spawn_script(&script, "start")?;
    let mut url = None;
    for line in BufReader::new(stdout).lines() {
        if let Some(u) = line?.strip_prefix(LISTENING_PREFIX) {
            url = Some(u.trim().to_owned());
        }
    }
    let status = child.wait()?;
    match url {
        Some(url) if status.success() => {
            eprintln!("schema registry at {url}; stop it with: bash scripts/schema-registry.sh stop");
            Ok(url)
        }
        _ => Err(ExampleError::Other(format!(
            "could not start the local schema registry: `bash {} start` failed ({status}; its messages \
             are above); or pass --schema-registry-url URL",
            script.display()
        ))),
    }
}
