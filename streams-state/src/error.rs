//! Errors of the state stores.

use std::path::PathBuf;

/// What went wrong in a state store.
///
/// Every variant names the store, so an error surfacing through a processor says which
/// store failed. The enum is `#[non_exhaustive]`: match the variants you handle and keep a
/// catch-all arm.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// RocksDB reported an error.
    #[error("store `{store}`: RocksDB error: {source}")]
    RocksDb {
        /// The store's name.
        store: String,
        /// RocksDB's own error.
        #[source]
        source: rocksdb::Error,
    },
    /// The store was used after `close`, or before it was opened.
    #[error("store `{store}` is closed")]
    Closed {
        /// The store's name.
        store: String,
    },
    /// The store's directory is held by another process or store instance.
    #[error("store `{store}`: state directory {path} is locked by another instance")]
    Locked {
        /// The store's name.
        store: String,
        /// The locked directory.
        path: PathBuf,
    },
    /// The store's files could not be read as a store.
    #[error("store `{store}`: corrupt state in {path}: {message}")]
    Corrupt {
        /// The store's name.
        store: String,
        /// The directory holding the corrupt files.
        path: PathBuf,
        /// What was found wrong.
        message: String,
    },
    /// A file-system operation failed.
    #[error("store `{store}`: i/o error on {path}: {source}")]
    Io {
        /// The store's name.
        store: String,
        /// The path the operation was on.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A key or value could not be serialized or deserialized.
    #[error("store `{store}`: {source}")]
    Serde {
        /// The store's name.
        store: String,
        /// The serde's error.
        #[source]
        source: SerdeError,
    },
    /// Writing to the store's changelog failed.
    #[error("store `{store}`: changelog write failed: {message}")]
    Changelog {
        /// The store's name.
        store: String,
        /// The changelog sink's description of the failure.
        message: String,
    },
    /// The store is borrowed in a way that forbids this access, e.g. a write while an
    /// iterator over the same store is open.
    #[error("store `{store}`: {message}")]
    Borrowed {
        /// The store's name.
        store: String,
        /// Which access conflicted.
        message: String,
    },
    /// A processor asked for a store that is not connected to it.
    #[error(
        "store `{store}` is not connected to processor `{processor}`; connect it with TopologyBuilder::connect (or add_state_store / connect_processor_and_state_stores)"
    )]
    NotConnected {
        /// The store's name.
        store: String,
        /// The processor that asked.
        processor: String,
    },
    /// No store of that name is where it was looked for.
    #[error("store `{store}`: not found {place}")]
    NotFound {
        /// The store's name.
        store: String,
        /// Where it was looked for.
        place: String,
    },
    /// The store was asked for with types or a kind it was not built with.
    #[error("store `{store}`: {message}")]
    WrongType {
        /// The store's name.
        store: String,
        /// Which types were asked for and which the store has.
        message: String,
    },
}

impl StoreError {
    /// Whether the store's files were found corrupt: unreadable at open
    /// ([`StoreError::Corrupt`]), or a RocksDB read or write that found a corrupt block
    /// (a checksum mismatch). The changelog holds the state: the store can be rebuilt.
    pub fn is_corruption(&self) -> bool {
        match self {
            Self::Corrupt { .. } => true,
            Self::RocksDb { source, .. } => source.kind() == rocksdb::ErrorKind::Corruption,
            _ => false,
        }
    }
}

/// A serializer or deserializer failed. Carried as a value, never a panic.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{serde}: {message}")]
pub struct SerdeError {
    /// The serde that failed (its type name).
    pub serde: &'static str,
    /// What was wrong with the input.
    pub message: String,
}

impl SerdeError {
    /// A new error of the serde `serde` saying `message`.
    pub fn new(serde: &'static str, message: impl Into<String>) -> Self {
        Self {
            serde,
            message: message.into(),
        }
    }
}

/// The result type of store operations.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;
