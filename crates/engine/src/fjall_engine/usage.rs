//! Disk accounting: how many bytes the store occupies, as the drive's capacity checks and
//! GETLOG need it on every put.

use super::Shared;

/// The store's size on disk. Read from figures fjall keeps in memory, so admitting a put
/// costs no walk of the directory and no lock a write takes: the tables' and blob files' sizes
/// in each tree's current version, and what the memtables hold, which is what the journals
/// hold until it is flushed, and the value log's segments. (Journals are preallocated sparse: their apparent size would call
/// an empty drive 64 MiB full.) A flushed journal is counted until its memtables are dropped.
/// While the store is being reopened, the last figure read.
pub(super) fn disk_usage(shared: &Shared) -> u64 {
    let usage = &shared.counters.usage;
    match shared.store() {
        Ok(store) => {
            let now = store.meta.disk_space() + store.data.disk_space() + store.db.write_buffer_size() + store.log.disk_bytes();
            usage.store(now, std::sync::atomic::Ordering::Relaxed);
            now
        }
        Err(_) => usage.load(std::sync::atomic::Ordering::Relaxed),
    }
}
