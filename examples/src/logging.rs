//! The examples' log output: `tracing` lines on stderr (stdout carries the programs'
//! results), filtered by `RUST_LOG` (default `warn`).

/// Installs the examples' `tracing` subscriber; call once, first thing in `main`.
pub fn init_logging() {
    tracing_subscriber::fmt()
        .with_env_filter(std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .init();
}
