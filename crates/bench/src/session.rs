//! One session with a bench target: the trait every measured system is driven through
//! (the targets themselves are in `target`).

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use spindle_client::Synchronization;

/// A store operation's outcome; errors are the target's own words.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, String>> + Send + 'a>>;

/// One session with a target.
pub trait Store: Send + Sync {
    /// Stores `value` under `key` unconditionally. WRITETHROUGH and FLUSH return once the write
    /// is durable; WRITEBACK once the target has it.
    fn put(&self, key: Bytes, value: Bytes, sync: Synchronization) -> StoreFuture<'_, ()>;
    /// The value under `key`, if any.
    fn get(&self, key: Bytes) -> StoreFuture<'_, Option<Bytes>>;
    /// Up to `count` keys from `start` (inclusive) upwards, in key order.
    fn scan(&self, start: Bytes, count: usize) -> StoreFuture<'_, Vec<Bytes>>;
    /// Makes every earlier acknowledged write durable (FLUSHALLDATA for a drive).
    fn flush(&self) -> StoreFuture<'_, ()>;
    /// What the target says it is: product, version, configuration (for results files).
    fn describe(&self) -> StoreFuture<'_, serde_json::Value>;
}
