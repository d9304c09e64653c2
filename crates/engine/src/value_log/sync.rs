//! Syncs and the page cache: what was handed to the OS is made durable before every journal
//! sync, written behind as it comes, and dropped from the cache once synced.

use std::collections::HashMap;
use std::fs::File;
use std::sync::Arc;

use super::ValueLog;

/// Bytes handed to the OS after which the disk is asked to start writing them (write-behind,
/// as RocksDB's `bytes_per_sync`). Left to the kernel, dirty pages wait for the next sync,
/// which then writes all of them while the disk had idled: with large values streaming in,
/// each FLUSHALLDATA wrote the hundred MiB behind it, and the disk worked only during syncs.
pub const WRITE_BEHIND_BYTES: u64 = 1024 * 1024;
/// Durable bytes of a segment kept in the page cache, newest first; older ones are dropped
/// from it once synced (drop-behind). Large values streaming through the cache would evict
/// the tables and index blocks every request reads, and each would take a fresh page where
/// a dropped one can be taken again (on this project's VMs a page touched first costs
/// microseconds: writes ran at a third of the speed). The newest values stay cached for the
/// reads that follow writes most often. The default of `FjallOptions::log_cached_tail`.
pub const CACHED_TAIL_BYTES: u64 = 64 * 1024 * 1024;
/// A multiple of every page size Linux runs with (4, 16 and 64 KiB).
const PAGE_ALIGN: u64 = 64 * 1024;

/// Segments with bytes handed to the OS and not yet synced, and whether the folder has new
/// entries not yet synced.
#[derive(Default)]
pub(super) struct Dirty {
    pub(super) files: HashMap<u32, Handed>,
    pub(super) folder: bool,
}

/// A segment with bytes handed to the OS: a handle to sync it with, how far it reaches, and
/// whether it is sealed (nothing more will be appended: none of it needs to stay cached).
pub(super) struct Handed {
    pub(super) file: Arc<File>,
    pub(super) upto: u64,
    pub(super) sealed: bool,
}

/// Advice to the kernel about a range of a segment's pages; where the system has no such
/// call, or it fails, nothing changes but speed.
#[derive(Clone, Copy)]
pub(super) enum Pages {
    /// Start writing them to the disk, without waiting: the next sync then waits only for
    /// what is still in flight.
    StartWriting,
    /// Drop them from the page cache (those still dirty or being written stay).
    Drop,
    /// No read-ahead through this handle: what it reads is all it needs.
    Random,
}

pub(super) fn advise(file: &File, offset: u64, len: u64, advice: Pages) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let (Ok(offset), Ok(len)) = (libc::off64_t::try_from(offset), libc::off64_t::try_from(len)) else { return };
        let fd = file.as_raw_fd();
        // SAFETY: plain system calls on a descriptor that stays open for them.
        #[allow(unsafe_code, reason = "sync_file_range and posix_fadvise have no safe wrappers")]
        let _ = unsafe {
            match advice {
                Pages::StartWriting => libc::sync_file_range(fd, offset, len, libc::SYNC_FILE_RANGE_WRITE),
                Pages::Drop => libc::posix_fadvise64(fd, offset, len, libc::POSIX_FADV_DONTNEED),
                Pages::Random => libc::posix_fadvise64(fd, offset, len, libc::POSIX_FADV_RANDOM),
            }
        };
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (file, offset, len, advice);
}

impl ValueLog {
    /// Makes every byte handed to the OS so far durable: the segments written since the last
    /// sync, then the folder if segments were created. Runs before every journal sync.
    ///
    /// Once a sync has failed, every later one fails the same way, until the store is opened
    /// again: Linux reports a failed writeback once per file, and marks the pages it could not
    /// write clean, so a second fdatasync would succeed over bytes that never reached the disk
    /// and the journal would then claim them. (Through the journal's hook a failure already
    /// stops the database; the collector's own syncs only reported it.)
    pub fn sync(&self) -> std::io::Result<()> {
        let mut failed = self.syncing.lock();
        if let Some(first) = &*failed {
            return Err(std::io::Error::other(format!("an earlier sync of the value log failed ({first}); reopen the store")));
        }
        let taken = std::mem::take(&mut *self.dirty.lock());
        let mut result = Ok(());
        for (id, handed) in &taken.files {
            result = result.and_then(|()| handed.file.sync_data());
            if result.is_ok() {
                self.drop_behind(*id, handed);
            }
        }
        if taken.folder {
            result = result.and_then(|()| crate::dirsync::sync_dir(&self.dir));
        }
        if let Err(e) = &result {
            *failed = Some(e.to_string());
            // Still owed, should the failure ever be cleared.
            let mut dirty = self.dirty.lock();
            dirty.folder |= taken.folder;
            for (id, handed) in taken.files {
                dirty.files.entry(id).or_insert(handed);
            }
        }
        result
    }

    /// Drops a synced segment's pages from the page cache but for its newest `cached_tail`
    /// bytes, or all of them once it is sealed (unless the tail covers whole segments); from a
    /// page boundary: the kernel keeps a page only partly advised, and the next call would
    /// start past it.
    fn drop_behind(&self, id: u32, synced: &Handed) {
        let tail = if synced.sealed && self.cached_tail < self.segment_max { 0 } else { self.cached_tail };
        let keep_from = synced.upto.saturating_sub(tail) / PAGE_ALIGN * PAGE_ALIGN;
        // A segment removed meanwhile has nothing left to drop.
        if keep_from == 0 || !self.figures.lock().contains_key(&id) {
            return;
        }
        let mut cached_from = self.cached_from.lock();
        let from = cached_from.get(&id).copied().unwrap_or(0);
        if keep_from > from {
            advise(&synced.file, from, keep_from - from, Pages::Drop);
            cached_from.insert(id, keep_from);
        }
    }
}
