//! The database and its two keyspaces: opening it, waiting for its flushes, and the write
//! buffer's cap.

use std::sync::Arc;

use fjall::{CompressionType, Database, Keyspace, KeyspaceCreateOptions, KvSeparationOptions};

use super::{Counters, FjallOptions, MIN_WRITE_BUFFER_MEMTABLES};
use crate::record::{self, Placement};
use crate::value_log::{Pointer, ValueLog};
use crate::{Error, Meta, Result};

/// How long the writer sleeps between looks at the write buffer while it is over the cap.
pub(super) const WRITE_BUFFER_POLL: std::time::Duration = std::time::Duration::from_millis(1);
/// Longest MEDIAOPTIMIZE or a secure erase waits for the memtables it sealed to be flushed.
pub(super) const FLUSH_WAIT_LIMIT: std::time::Duration = std::time::Duration::from_secs(120);
/// How often that wait looks.
pub(super) const FLUSH_POLL: std::time::Duration = std::time::Duration::from_millis(10);
/// How long the writer waits for flushes that free nothing before it stops waiting: a 64 MiB
/// flush takes well under a second on a working disk.
pub(super) const WRITE_BUFFER_STALL_LIMIT: std::time::Duration = std::time::Duration::from_secs(2);

/// The journal's write buffer (fjall's default is 8 KiB). A group of 4 KiB puts went to the OS
/// in a write per ~8 KiB, and each write ending inside a new page-cache page made ext4 zero the
/// rest of that page first; with 256 KiB a group goes out in a few large writes (the drive's CPU
/// per 4 KiB put fell from 19-23 to 15-18 µs, docs/performance.md).
pub(super) const JOURNAL_BUFFER_BYTES: usize = 256 * 1024;
/// The same for the blob files a flush or compaction writes (lsm-tree's default is 8 KiB too).
pub(super) const BLOB_WRITE_BUFFER_BYTES: usize = 256 * 1024;

/// The database and its keyspaces.
pub(super) struct Store {
    pub(super) db: Database,
    pub(super) meta: Keyspace,
    pub(super) data: Keyspace,
    /// Bytes of [`FjallOptions::write_buffer_memtables`].
    pub(super) write_buffer_cap: u64,
    pub(super) counters: Arc<Counters>,
    /// Where values of at least [`Self::log_threshold`] bytes are written.
    pub(super) log: Arc<ValueLog>,
    pub(super) log_threshold: usize,
    /// Held while writes are decided and committed: by the writer for each group, by garbage
    /// collection while it moves pointers (a pointer it checked must not change before its
    /// commit).
    pub(super) apply_lock: parking_lot::Mutex<()>,
}

/// Where the flushes of sealed memtables stand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Flushes {
    /// None is left.
    Done,
    Pending,
    /// A storage failure stopped the database (its flush workers with it): they never will be
    /// (`true`: a full disk).
    Stopped(bool),
}

/// Polls `flushes` every `poll` until they are done, a storage failure stops them or
/// `deadline` passes: never longer. (fjall's `rotate_memtable_and_wait` waits with no bound,
/// for ever once a failed flush has stopped the workers.)
pub(super) fn wait_for_flushes(deadline: std::time::Instant, poll: std::time::Duration, mut flushes: impl FnMut() -> Flushes) -> Result<()> {
    loop {
        match flushes() {
            Flushes::Done => return Ok(()),
            Flushes::Stopped(full_disk) => return Err(stopped_error(full_disk)),
            Flushes::Pending if std::time::Instant::now() >= deadline => {
                return Err(Error::Unavailable("the memtables' flushes did not finish in time; try again later".into()));
            }
            Flushes::Pending => std::thread::sleep(poll),
        }
    }
}

/// What a store stopped by a storage failure answers (`full_disk`: by ENOSPC).
pub(super) fn stopped_error(full_disk: bool) -> Error {
    if full_disk {
        Error::NoSpace
    } else {
        Error::poisoned()
    }
}

impl Store {
    /// An error if a storage failure stopped the database (NoSpace for a full disk).
    pub(super) fn stopped(&self) -> Result<()> {
        self.stop_cause().map_or(Ok(()), |full_disk| Err(stopped_error(full_disk)))
    }

    /// Whether a storage failure stopped the database, and if so whether a full disk alone did.
    pub(super) fn stop_cause(&self) -> Option<bool> {
        self.db.is_poisoned().then(|| self.db.is_stopped_by_full_disk())
    }

    /// Seals both keyspaces' active memtables and waits, at most `limit`, until every sealed
    /// memtable is flushed to tables; NoSpace or Unavailable if a storage failure stops the
    /// flushes, Unavailable if they take longer.
    pub(super) fn flush_memtables(&self, limit: std::time::Duration) -> Result<()> {
        self.stopped()?;
        for keyspace in [&self.meta, &self.data] {
            keyspace.rotate_memtable()?;
        }
        let deadline = std::time::Instant::now() + limit;
        wait_for_flushes(deadline, FLUSH_POLL, || {
            if let Some(full_disk) = self.stop_cause() {
                Flushes::Stopped(full_disk)
            } else if self.meta.sealed_memtable_count() + self.data.sealed_memtable_count() == 0 {
                Flushes::Done
            } else {
                Flushes::Pending
            }
        })
    }

    /// Opens the store: the value log, the journals' check (refusing, or with `salvage`
    /// salvaging, damage where they had been made durable; ending them before any unsynced
    /// record whose logged value a crash lost), then the database, which syncs the value log
    /// before every journal sync. Returns the check's notices with it.
    pub(super) fn open(options: &FjallOptions, counters: Arc<Counters>, salvage: bool) -> Result<(Store, Vec<String>)> {
        let log = Arc::new(ValueLog::open(&options.path.join(crate::value_log::FOLDER), options.log_segment_bytes, options.log_cached_tail)?);
        let index = log.index_keyspace()?;
        let mut judge = super::recovery::Judge::new(&log, index);
        let notices = crate::journal_check::check(&options.path, salvage, &mut |writes| judge.judge(writes))?;
        if let Some(e) = judge.failure {
            return Err(Error::Stopped(format!(
                "the value log could not be read to check the journal's unsynced records ({e}); nothing was cut for it, \
                 and the next start checks them again"
            )));
        }
        let hook_log = log.clone();
        // Values are written as the client sent them, in the journal as in the blob files
        // below: a drive's values are opaque and often compressed or encrypted already, and
        // LZ4 (fjall's default for values of 4 KiB and more) cost the single writer thread
        // CPU on every such put for nothing.
        let db = Database::builder(&options.path)
            .cache_size(options.cache_size)
            .journal_compression(CompressionType::None)
            .journal_buffer_size(JOURNAL_BUFFER_BYTES)
            .before_journal_sync(Arc::new(move || hook_log.sync()))
            .open()?;
        let memtable_size = options.memtable_size;
        let meta = db.keyspace("meta", || KeyspaceCreateOptions::default().max_memtable_size(memtable_size))?;
        let threshold = options.blob_threshold;
        // Blob files, too, hold values uncompressed (read back without decompressing).
        let data = db.keyspace("data", move || {
            KeyspaceCreateOptions::default().max_memtable_size(memtable_size).with_kv_separation(Some(
                KvSeparationOptions::default()
                    .separation_threshold(threshold)
                    .compression(CompressionType::None)
                    .write_buffer_size(BLOB_WRITE_BUFFER_BYTES),
            ))
        })?;
        log.record_index_keyspace(meta.id())?;
        let write_buffer_cap = options.write_buffer_memtables.max(MIN_WRITE_BUFFER_MEMTABLES) * memtable_size;
        let log_threshold = options.log_threshold.max(super::INLINE_VALUE_MAX + 1);
        Ok((Store { db, meta, data, write_buffer_cap, counters, log, log_threshold, apply_lock: parking_lot::Mutex::new(()) }, notices))
    }

    /// Waits, while the memtables hold more than the cap, for sealed ones to be flushed.
    ///
    /// fjall bounds each keyspace to four sealed memtables but not their sum, and a stream of
    /// 1 MiB values outruns the flushes to blob files: memtables of values piled up to 1.5 GiB
    /// resident. Waiting here holds every write to the rate the disk absorbs them, as a real
    /// drive's write buffer does. Only sealed memtables shrink the total when flushed, so with
    /// none left the writer goes on (the cap's floor keeps that to the active memtables).
    /// Nor does it wait on flushes that make no progress for [`WRITE_BUFFER_STALL_LIMIT`]
    /// (failing on a full disk, say): the writes then go on to succeed or fail on their own
    /// rather than hang.
    pub(super) fn wait_for_write_buffer(&self) {
        let mut waited = false;
        let mut lowest = u64::MAX;
        let mut lowest_at = std::time::Instant::now();
        loop {
            let held = self.db.write_buffer_size();
            if held <= self.write_buffer_cap {
                break;
            }
            if self.meta.sealed_memtable_count() + self.data.sealed_memtable_count() == 0 && !self.seal_overgrown_memtables() {
                break;
            }
            if held < lowest {
                (lowest, lowest_at) = (held, std::time::Instant::now());
            } else if lowest_at.elapsed() >= WRITE_BUFFER_STALL_LIMIT {
                break;
            }
            waited = true;
            std::thread::sleep(WRITE_BUFFER_POLL);
        }
        if waited {
            self.counters.write_buffer_waits.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Seals the active memtables that have outgrown their size, when the rotation their
    /// writes requested is still waiting for a busy worker. Returns whether one was sealed.
    pub(super) fn seal_overgrown_memtables(&self) -> bool {
        let mut sealed = false;
        for keyspace in [&self.meta, &self.data] {
            let (size, max) = keyspace.active_memtable_fill();
            if size > max {
                // A failed rotation leaves nothing to wait for: the writes go on.
                sealed |= keyspace.rotate_memtable().unwrap_or(false);
            }
        }
        sealed
    }

    /// What the store holds for `key`, read as the writer thread sees it: everything it has
    /// applied (only readers on other threads need a snapshot).
    pub(super) fn stored(&self, key: &[u8]) -> Result<Option<Known>> {
        let Some(raw) = self.meta.get(key)? else { return Ok(None) };
        let (meta, placement) = record::decode(raw.into())?;
        let logged = match placement {
            Placement::Logged(pointer) => Some(pointer),
            Placement::Inline(_) | Placement::Separate => None,
        };
        Ok(Some(Known { in_data: placement.in_data(&meta), logged, meta }))
    }

    /// Syncs the journal twice: the first makes every write so far durable, the second the
    /// sync claim the first wrote after itself, so that recovery never reads those writes as
    /// an unsynced tail. Needed before deleting value log segments that older records (now
    /// replaced, durably) pointed to: an unsynced record pointing to a segment that is gone
    /// would end the journal there.
    pub(super) fn persist_proven(&self) -> Result<()> {
        self.db.persist(fjall::PersistMode::SyncData)?;
        self.db.persist(fjall::PersistMode::SyncData)?;
        Ok(())
    }
}

/// A key's metadata as the writer knows it, and where its value is: in the data keyspace, in
/// the value log, or in the record.
#[derive(Clone)]
pub(super) struct Known {
    pub(super) meta: Meta,
    pub(super) in_data: bool,
    pub(super) logged: Option<Pointer>,
}
