//! Spindle's storage engine: a persistent, sorted, crash-safe key-value store with the
//! per-entry metadata Kinetic needs (version, tag, algorithm), compare-and-swap writes applied
//! in order by one writer, and group-committed durability. Knows nothing about the wire protocol.
//!
//! Two implementations sit behind [`Engine`]: [`FjallEngine`] (on disk, the product) and
//! [`MemEngine`] (in memory, for tests and for measuring the protocol path alone).

// Unsafe only at system calls libc has no safe wrapper for, each allowed where it stands.
#![deny(unsafe_code)]
// No `unwrap`/`expect` outside tests: a failure that can happen is a typed error, and an
// invariant that cannot fail says why at an `#[allow]`. Tests, benches and doctests may unwrap.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod dirsync;
mod error;
mod fjall_engine;
pub mod journal_check;
pub mod fs_space;
pub mod limits;
mod mem_engine;
pub mod record;
mod rules;
mod types;
pub mod value_log;
mod write;

pub use error::{Error, Result};
pub use limits::KEY_SIZE_MAX;
pub use fjall_engine::{
    FjallEngine, FjallOptions, DEFAULT_GC_BYTES_PER_SEC, INLINE_VALUE_MAX, DEFAULT_GC_GARBAGE_RATIO, DEFAULT_LOG_SEGMENT_BYTES, DEFAULT_LOG_THRESHOLD,
    DEFAULT_WRITE_BUFFER_MEMTABLES, MIN_WRITE_BUFFER_MEMTABLES,
};
pub use write::{Callback, WriteOp, WriteRequest};
pub use mem_engine::MemEngine;
pub use types::{Check, Entry, KeyRange, Meta};

/// Helpers for tests of code above the engine.
#[doc(hidden)]
#[allow(clippy::unwrap_used, clippy::expect_used, reason = "test support, for tests and fuzz targets: a failed setup is the test failing")]
pub mod testing {
    use std::os::unix::io::AsRawFd;
    use std::path::{Path, PathBuf};
    use std::sync::OnceLock;

    use crate::{Check, Engine, FjallEngine, FjallOptions, KeyRange, Meta, WriteOp, WriteRequest};

    /// A directory of this process's own under the system's temporary directory, named
    /// `{prefix}-{pid}`, for state a test process keeps until it ends (nothing removes it
    /// then): each call first removes those its earlier processes left, by their pids no longer
    /// running, so that runs do not pile them up.
    pub fn process_temp_dir(prefix: &str) -> PathBuf {
        let tmp = std::env::temp_dir();
        let gone = |name: &str| -> bool {
            let pid = name.strip_prefix(prefix).and_then(|rest| rest.strip_prefix('-')).and_then(|pid| pid.parse::<u32>().ok());
            pid.is_some_and(|pid| pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists())
        };
        for entry in std::fs::read_dir(&tmp).into_iter().flatten().flatten() {
            if entry.file_name().to_str().is_some_and(gone) {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
        tmp.join(format!("{prefix}-{}", std::process::id()))
    }

    /// A store with a few writes in its journal (none flushed to tables), made once per
    /// process: the template that [`journal_recovery`] puts damaged journals into.
    fn journal_template() -> &'static (PathBuf, Vec<u8>) {
        static TEMPLATE: OnceLock<(PathBuf, Vec<u8>)> = OnceLock::new();
        TEMPLATE.get_or_init(|| {
            let dir = process_temp_dir("spindle-journal-template");
            let _ = std::fs::remove_dir_all(&dir);
            let engine = FjallEngine::open(FjallOptions::new(&dir)).expect("template store");
            for i in 0u32..40 {
                let (tx, rx) = std::sync::mpsc::channel();
                let value = bytes::Bytes::from(vec![i as u8; (i as usize % 5) * 300]);
                let op = WriteOp::Put { key: format!("key{i:03}").into_bytes().into(), value, meta: Meta::default(), check: Check::Force };
                engine.submit(WriteRequest { op, sync: i % 4 == 0, on_applied: None, on_done: Box::new(move |r| drop(tx.send(r))) });
                rx.recv().expect("answer").expect("template write");
            }
            drop(engine);
            let journal = active_journal(&dir).expect("the template has a journal");
            let bytes = std::fs::read(&journal).expect("read the journal");
            (dir, bytes)
        })
    }

    /// The journal file with the highest number in a store's directory.
    fn active_journal(dir: &Path) -> Option<PathBuf> {
        std::fs::read_dir(dir)
            .ok()?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter_map(|p| {
                let n: u64 = p.file_name()?.to_str()?.strip_suffix(".jnl")?.parse().ok()?;
                Some((n, p))
            })
            .max_by_key(|(n, _)| *n)
            .map(|(_, p)| p)
    }

    /// A real journal of a few writes, as recovery finds it after a clean stop: the seed the
    /// `journal` fuzz target mutates.
    pub fn sample_journal() -> Vec<u8> {
        journal_template().1.clone()
    }

    /// Opens a copy of the template store whose journal holds `journal` instead of its own,
    /// and if that is refused, a second copy with a salvage. Either may open or be refused,
    /// but never panic, and a store that opens must answer a full key range and a read of
    /// every key in it. Returns whether the first opened. The fuzz target `journal` and the
    /// corpus replay run this.
    pub fn journal_recovery(journal: &[u8]) -> bool {
        if journal_recovered_keys(journal, false).is_some() {
            return true;
        }
        let _ = journal_recovered_keys(journal, true);
        false
    }

    /// Opens a copy of the template store whose journal holds `journal`, salvaging or not;
    /// returns the keys the opened store reads back (`None` when it did not open).
    pub fn journal_recovered_keys(journal: &[u8], salvage: bool) -> Option<Vec<bytes::Bytes>> {
        let (template, _) = journal_template();
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("spindle-journal-case-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        copy_dir(template, &dir).expect("copy the template store");
        let target = active_journal(&dir).expect("the copy has a journal");
        std::fs::write(&target, journal).expect("write the journal");
        let options = FjallOptions { salvage_journal: salvage, ..FjallOptions::new(&dir) };
        let readable = FjallEngine::open(options).ok().map(|engine| {
            let all = KeyRange { start: bytes::Bytes::new(), start_inclusive: true, end: None, end_inclusive: false, reverse: false, max: 1000 };
            let keys = engine.keys(&all).expect("a store that opens answers a range");
            keys.into_iter().filter(|key| matches!(engine.get(key), Ok(Some(_)))).collect()
        });
        let _ = std::fs::remove_dir_all(&dir);
        readable
    }

    /// Copies a directory tree (a store, to open or damage the copy).
    pub fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(to)?;
        for entry in std::fs::read_dir(from)? {
            let entry = entry?;
            let target = to.join(entry.file_name());
            if entry.file_type()?.is_dir() {
                copy_dir(&entry.path(), &target)?;
            } else {
                std::fs::copy(entry.path(), target)?;
            }
        }
        Ok(())
    }

    /// Drops every file under `dir` from the page cache (synced first: only clean pages go),
    /// so that the next reads of a store under `dir` have to go to the disk. No effect on a
    /// tmpfs, where the page cache is the storage.
    pub fn evict_page_cache(dir: &Path) -> std::io::Result<()> {
        for entry in std::fs::read_dir(dir)? {
            let path = entry?.path();
            if path.is_dir() {
                evict_page_cache(&path)?;
            } else {
                // A file an old version's collection deletes meanwhile has nothing to evict.
                let file = match std::fs::File::open(&path) {
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                    file => file?,
                };
                file.sync_all()?;
                // SAFETY: advice on a descriptor that stays open for the call.
                #[allow(unsafe_code, reason = "posix_fadvise has no safe wrapper")]
                let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
                if rc != 0 {
                    return Err(std::io::Error::from_raw_os_error(rc));
                }
            }
        }
        Ok(())
    }
}

/// While a value of this type lives, reads *on this thread* are served only from memory (the
/// engine's caches and the operating system's page cache); a read that would wait for the disk
/// fails at once with [`Error::WouldBlock`] instead. A server answering reads on its async
/// runtime tries them inline under this guard and runs the few that fail on a thread of their
/// own, so a slow disk read never stalls the other requests that runtime serves. Where the
/// system cannot tell (not Linux, or a filesystem without `RWF_NOWAIT`), reads block as usual.
#[must_use = "reads are limited to memory only while the guard lives"]
pub struct CachedReadsOnly {
    _guard: lsm_tree::file::CachedReadsOnly,
    previous: bool,
}

thread_local! {
    /// Whether this thread's value log reads are limited to memory (`CachedReadsOnly`; the
    /// tables' reads have the same flag inside lsm-tree).
    static CACHED_READS_ONLY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

impl CachedReadsOnly {
    pub fn new() -> Self {
        CachedReadsOnly { _guard: lsm_tree::file::CachedReadsOnly::new(), previous: CACHED_READS_ONLY.with(|f| f.replace(true)) }
    }
}

impl Drop for CachedReadsOnly {
    fn drop(&mut self) {
        CACHED_READS_ONLY.with(|f| f.set(self.previous));
    }
}

/// Whether reads on this thread must not wait for the disk (a [`CachedReadsOnly`] lives).
pub(crate) fn cached_reads_only() -> bool {
    CACHED_READS_ONLY.with(std::cell::Cell::get)
}

impl Default for CachedReadsOnly {
    fn default() -> Self {
        Self::new()
    }
}

/// A sorted key-value store with Kinetic semantics.
///
/// Keys sort as unsigned bytes. Writes are submitted to a single writer that applies them in
/// order; a write is visible to readers once applied, and a `sync` request is acknowledged once
/// everything applied before it is on stable storage.
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
    /// Queues a write. Writes are applied in submission order; `on_applied` runs once the
    /// write is visible to readers, `on_done` once it is acknowledged: right after applying, or
    /// for `sync` requests after everything applied so far is durable (group commit: one sync
    /// for every request queued meanwhile). Callbacks run on an engine thread: keep them short.
    fn submit(&self, request: WriteRequest);
    /// Queues several writes, in order, as [`Engine::submit`] would one by one (an engine may
    /// hand them to its writer at once: one wake-up for a connection's burst of requests).
    fn submit_all(&self, requests: Vec<WriteRequest>) {
        for request in requests {
            self.submit(request);
        }
    }

    /// Blocking put: stores `value` under `key` if `check` passes against the stored version.
    fn put(&self, key: &[u8], value: bytes::Bytes, meta: Meta, check: Check) -> Result<()> {
        let key = bytes::Bytes::copy_from_slice(key);
        self.submit_and_wait(WriteOp::Put { key, value, meta, check }, false)
    }
    /// Blocking delete. A forced delete of a missing key succeeds; an unforced one fails with
    /// [`Error::NotFound`].
    fn delete(&self, key: &[u8], check: Check) -> Result<()> {
        let key = bytes::Bytes::copy_from_slice(key);
        self.submit_and_wait(WriteOp::Delete { key, check }, false)
    }
    /// Blocks until every write applied so far is durable.
    fn sync(&self) -> Result<()> {
        self.submit_and_wait(WriteOp::Flush, true)
    }
    #[doc(hidden)]
    fn submit_and_wait(&self, op: WriteOp, sync: bool) -> Result<()> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.submit(WriteRequest {
            op,
            sync,
            on_applied: None,
            on_done: Box::new(move |r| {
                let _ = tx.send(r);
            }),
        });
        rx.recv().map_err(|_| Error::Internal("the writer dropped a request without answering it"))?
    }
    /// Compacts the keys in `range` (the whole store for an unbounded range).
    fn compact(&self) -> Result<()>;
    /// Bytes the store occupies on disk (0 in memory).
    fn disk_usage(&self) -> u64;
    /// Number of entries (approximate on disk).
    fn approximate_len(&self) -> u64;
    /// Times since start the store stopped taking writes on a storage failure (a flush that
    /// met a full disk) and recovered by reopening itself.
    fn recoveries(&self) -> u64 {
        0
    }
    /// The value log's figures (segments, bytes on disk and live, garbage collection), for an
    /// engine that has one.
    fn value_log(&self) -> Option<value_log::LogFigures> {
        None
    }

    /// What the store found at open worth telling the operator (a salvaged or cut journal).
    fn notices(&self) -> Vec<String> {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_process_temp_dir_clears_what_ended_processes_left_and_nothing_else() {
        let prefix = "spindle-temp-dir-test";
        // A pid no process has: the highest the kernel hands out is below pid_max.
        let max: u32 = std::fs::read_to_string("/proc/sys/kernel/pid_max").ok().and_then(|s| s.trim().parse().ok()).unwrap_or(4_194_304);
        let ended = std::env::temp_dir().join(format!("{prefix}-{max}"));
        let other = std::env::temp_dir().join(format!("{prefix}x-{max}"));
        let running = std::env::temp_dir().join(format!("{prefix}-1"));
        for d in [&ended, &other, &running] {
            std::fs::create_dir_all(d.join("inside")).unwrap();
        }
        let mine = super::testing::process_temp_dir(prefix);
        assert_eq!(mine, std::env::temp_dir().join(format!("{prefix}-{}", std::process::id())));
        assert!(!ended.exists(), "left by a process that has ended");
        assert!(other.exists() && running.exists(), "another prefix, or a process still running (pid 1)");
        for d in [&other, &running] {
            std::fs::remove_dir_all(d).unwrap();
        }
    }
}
