//! Spindle's storage engine: a persistent, sorted, crash-safe key-value store with the
//! per-entry metadata Kinetic needs (version, tag, algorithm), compare-and-swap writes and
//! group-committed durability. Knows nothing about the wire protocol.
//!
//! Two implementations sit behind [`Engine`]: [`FjallEngine`] (on disk, the product) and
//! [`MemEngine`] (in memory, for tests and for measuring the protocol path alone).

mod error;
mod fjall_engine;
mod group_commit;
mod mem_engine;
pub mod record;
mod types;

pub use error::{Error, Result};
pub use fjall_engine::{FjallEngine, FjallOptions};
pub use group_commit::DurableCallback;
pub use mem_engine::MemEngine;
pub use types::{Check, Entry, KeyRange, Meta};

/// A sorted key-value store with Kinetic semantics.
///
/// Keys sort as unsigned bytes. Writes are visible to readers as soon as the call returns
/// (acknowledged "once buffered"); [`Engine::when_durable`] reports when everything written
/// before it is on stable storage.
pub trait Engine: Send + Sync + 'static {
    /// The entry under `key` with its value.
    fn get(&self, key: &[u8]) -> Result<Option<Entry>>;
    /// The metadata under `key`, without reading the value.
    fn get_meta(&self, key: &[u8]) -> Result<Option<Meta>>;
    /// The first entry whose key sorts strictly after `key`.
    fn next(&self, key: &[u8]) -> Result<Option<Entry>>;
    /// The last entry whose key sorts strictly before `key`.
    fn previous(&self, key: &[u8]) -> Result<Option<Entry>>;
    /// Keys in `range`, in order (reverse order if asked), at most `range.max` of them.
    fn keys(&self, range: &KeyRange) -> Result<Vec<bytes::Bytes>>;
    /// Stores `value` under `key` if `check` passes against the stored version; atomic
    /// against every other write to the same key.
    fn put(&self, key: &[u8], value: bytes::Bytes, meta: Meta, check: Check) -> Result<()>;
    /// Removes `key` if `check` passes. A forced delete of a missing key succeeds; an
    /// unforced one fails with [`Error::NotFound`].
    fn delete(&self, key: &[u8], check: Check) -> Result<()>;
    /// Calls `done` once every write that returned before this call is durable. Concurrent
    /// callers share one sync (group commit). `done` runs on an engine thread: keep it short.
    fn when_durable(&self, done: DurableCallback);
    /// Blocking form of [`Engine::when_durable`].
    fn sync(&self) -> Result<()> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.when_durable(Box::new(move |r| {
            let _ = tx.send(r);
        }));
        rx.recv().map_err(|_| Error::Io("sync thread stopped".into()))?
    }
    /// Compacts the keys in `range` (the whole store for an unbounded range).
    fn compact(&self) -> Result<()>;
    /// Bytes the store occupies on disk (0 in memory).
    fn disk_usage(&self) -> u64;
    /// Number of entries (approximate on disk).
    fn approximate_len(&self) -> u64;
}
