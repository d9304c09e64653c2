//! The on-disk engine on fjall (an LSM tree).
//!
//! Two keyspaces, written together in one atomic batch per operation:
//! - `meta`: key -> metadata record (version, tag, algorithm, value length and CRC), and a
//!   value of at most [`INLINE_VALUE_MAX`] bytes in the record itself: a small value costs one
//!   LSM entry and a get one lookup. Records stay small, so metadata-only reads and key ranges
//!   touch few blocks.
//! - `data`: key -> values over [`INLINE_VALUE_MAX`] and under the value log's threshold, with
//!   key-value separation: values over 4 KiB live in blob files and compaction moves only
//!   pointers (such a value is written twice: the journal, then a blob file).
//! - the value log (`crate::value_log`): values of at least [`FjallOptions::log_threshold`]
//!   bytes, written once, appended to a segment; `meta`'s record points to it. Garbage
//!   collection (`gc`) copies what is still live out of segments that are mostly garbage.
//!
//! All writes go through one writer thread that takes whatever requests are queued, checks
//! versions against the store plus the writes earlier in the same group (so a versioned put is
//! a real compare-and-swap), commits the group as one fjall batch (one journal write), and, if
//! any request of the group needs durability, runs one fdatasync for all of them: LevelDB-style
//! write grouping and group commit in one place. Readers never wait for the writer.
//!
//! Here: the engine and its reads. Beside it: `store` (the database, its flushes and write
//! buffer), `writer` (the writer thread and group commit), `staging` (a request's changes,
//! kept aside until the write rules of `crate::rules` pass), `healing` (recovery from a full
//! disk, erase through an aside directory), `usage` (disk accounting), `recovery` (the
//! journal check's judge of unsynced pointers) and `gc` (the value log's collector).

use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use fjall::Readable;
use parking_lot::{Mutex, RwLock};

use crate::record::{self, Placement};
use crate::{Engine, Entry, Error, KeyRange, Meta, Result, WriteRequest};

mod gc;
mod healing;
mod recovery;
mod staging;
mod store;
#[cfg(test)]
mod tests;
mod usage;
mod writer;

use healing::remove_aside;
use store::{Store, FLUSH_WAIT_LIMIT};
use writer::{fail_group, write_loop};

/// Most requests the writer applies as one group (a group takes whole submissions, so it may
/// exceed this and [`MAX_GROUP_BYTES`] by the last one).
const MAX_GROUP_REQUESTS: usize = 1024;
/// Most value bytes the writer applies as one group (bounds the latency of a group).
const MAX_GROUP_BYTES: usize = 32 * 1024 * 1024;

/// Largest value kept inside its metadata record (larger ones go to the `data` keyspace).
/// Large enough for ACT's 1536-byte records (a get of one reads one block, not two), small
/// enough that a key range of 200 keys reads at most ~400 KiB of records.
pub const INLINE_VALUE_MAX: usize = 2048;

/// Tunables of the on-disk engine.
#[derive(Debug, Clone)]
pub struct FjallOptions {
    pub path: PathBuf,
    /// Block cache size in bytes.
    pub cache_size: u64,
    /// Values at least this large go to blob files.
    pub blob_threshold: u32,
    /// Bytes a keyspace's memtable holds before it is sealed and flushed to a table.
    pub memtable_size: u64,
    /// How many memtables' worth all memtables together (active and sealed, waiting for
    /// their flush) may hold before the writer waits for flushes; at least
    /// [`MIN_WRITE_BUFFER_MEMTABLES`].
    pub write_buffer_memtables: u64,
    /// Whether journals damaged where they had been made durable are salvaged (their intact
    /// batches kept, the damage dropped and recorded) rather than refused (`journal_check`).
    pub salvage_journal: bool,
    /// Values at least this large are written once, to the value log (at least
    /// [`INLINE_VALUE_MAX`] + 1).
    pub log_threshold: usize,
    /// Bytes a value log segment grows to before the next one is started.
    pub log_segment_bytes: u64,
    /// Synced bytes of each value log segment kept in the page cache, newest first; older
    /// ones are dropped from it (`value_log::CACHED_TAIL_BYTES`; 0 drops all once synced, at
    /// least `log_segment_bytes` leaves them all to the kernel).
    pub log_cached_tail: u64,
    /// Garbage collection takes a segment once at least this share of it is garbage.
    pub gc_garbage_ratio: f64,
    /// Most bytes per second garbage collection copies (0: none; it still deletes segments
    /// that hold nothing live).
    pub gc_bytes_per_sec: u64,
}

/// Values from this size on go to the value log by default: below it the journal's second
/// copy costs less than a second file write per value (docs/design/storage.md).
pub const DEFAULT_LOG_THRESHOLD: usize = 64 * 1024;
/// Default value log segment size.
pub const DEFAULT_LOG_SEGMENT_BYTES: u64 = 256 * 1024 * 1024;
/// Default garbage share that makes a segment worth collecting (Badger's and Titan's 0.5).
pub const DEFAULT_GC_GARBAGE_RATIO: f64 = 0.5;
/// Default copy rate of garbage collection: a tenth of this machine's sustained sequential
/// write rate, so clients keep most of the disk.
pub const DEFAULT_GC_BYTES_PER_SEC: u64 = 128 * 1024 * 1024;

/// The write-buffer cap's floor, in memtables: both keyspaces' active memtables plus one
/// being flushed, so that waiting for flushes can always end.
pub const MIN_WRITE_BUFFER_MEMTABLES: u64 = 3;
/// The default cap, in memtables.
pub const DEFAULT_WRITE_BUFFER_MEMTABLES: u64 = 4;

impl FjallOptions {
    pub fn new(path: impl AsRef<Path>) -> Self {
        FjallOptions {
            path: path.as_ref().to_path_buf(),
            cache_size: 64 * 1024 * 1024,
            blob_threshold: 4096,
            memtable_size: 64 * 1024 * 1024,
            write_buffer_memtables: DEFAULT_WRITE_BUFFER_MEMTABLES,
            salvage_journal: false,
            log_threshold: DEFAULT_LOG_THRESHOLD,
            log_segment_bytes: DEFAULT_LOG_SEGMENT_BYTES,
            log_cached_tail: crate::value_log::CACHED_TAIL_BYTES,
            gc_garbage_ratio: DEFAULT_GC_GARBAGE_RATIO,
            gc_bytes_per_sec: DEFAULT_GC_BYTES_PER_SEC,
        }
    }
}

pub struct FjallEngine {
    shared: Arc<Shared>,
    /// Sender to the writer thread, of requests in submission order; dropped (closing the
    /// queue) when the engine drops.
    queue: Mutex<Option<std::sync::mpsc::Sender<Vec<WriteRequest>>>>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    collector: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// What readers and the writer thread share: the open store, which the writer replaces when it
/// reopens the database after a storage failure, and counters that outlive such a reopening.
struct Shared {
    options: FjallOptions,
    /// `None` only while the writer reopens the database.
    slot: RwLock<Option<Arc<Store>>>,
    counters: Arc<Counters>,
    /// Set when the writer panicked: fjall's state after a panic in its write path is
    /// unknown, so the store takes no more writes until the drive is restarted.
    halted: Mutex<Option<Error>>,
    /// What the journals' check at open found worth telling (`journal_check`).
    notices: Vec<String>,
    /// Garbage collection's state, and its wake-up and stop signals.
    gc: gc::Control,
}

#[derive(Default)]
struct Counters {
    /// Times the writer waited for flushes because the memtables were over the cap.
    write_buffer_waits: std::sync::atomic::AtomicU64,
    /// Journal syncs run since open (one per group that needed durability).
    syncs: std::sync::atomic::AtomicU64,
    /// Times the database was reopened after a storage failure.
    reopenings: std::sync::atomic::AtomicU64,
    /// The store's size on disk as last read, answered while the store is being reopened.
    usage: std::sync::atomic::AtomicU64,
}

impl FjallEngine {
    pub fn open(options: FjallOptions) -> Result<Arc<Self>> {
        crate::dirsync::create_dir_all(&options.path)?;
        // An erase interrupted after moving the old store aside.
        remove_aside(&options.path);
        let counters = Arc::new(Counters::default());
        let (store, notices) = Store::open(&options, counters.clone(), options.salvage_journal)?;
        let store = Arc::new(store);
        let shared = Arc::new(Shared { options, slot: RwLock::new(Some(store)), counters, halted: Mutex::new(None), notices, gc: gc::Control::default() });
        let (tx, rx) = std::sync::mpsc::channel();
        let writer_shared = shared.clone();
        let writer = std::thread::Builder::new().name("spindle-writer".into()).spawn(move || write_loop(&writer_shared, rx))?;
        let gc_shared = shared.clone();
        let collector = std::thread::Builder::new().name("spindle-vlog-gc".into()).spawn(move || gc::run(&gc_shared))?;
        Ok(Arc::new(FjallEngine { shared, queue: Mutex::new(Some(tx)), writer: Mutex::new(Some(writer)), collector: Mutex::new(Some(collector)) }))
    }

    /// The open store, for one operation.
    fn store(&self) -> Result<Arc<Store>> {
        self.shared.store()
    }

    /// Reads the entry for a metadata record already found in `snapshot`; `None` if its value
    /// was in a value log segment collected since (read the key again: its record moved).
    fn entry_at(store: &Store, snapshot: &fjall::Snapshot, key: Bytes, raw_meta: Bytes) -> Result<Option<Entry>> {
        let (meta, placement) = record::decode(raw_meta)?;
        let value: Bytes = match placement {
            Placement::Inline(value) => value,
            Placement::Separate if meta.value_len == 0 => Bytes::new(),
            Placement::Separate => snapshot
                .get(&store.data, &key)?
                .ok_or_else(|| Error::corrupt(format!("value missing for key of {} bytes", key.len())))?
                .into(),
            Placement::Logged(pointer) => match store.log.read(pointer, key.len(), meta.value_len, meta.value_crc)? {
                Some(value) => value,
                None => return Ok(None),
            },
        };
        if value.len() != meta.value_len as usize {
            return Err(Error::corrupt(format!("value is {} bytes, metadata says {}", value.len(), meta.value_len)));
        }
        Ok(Some(Entry { key, meta, value }))
    }

    /// Runs `read` over a fresh snapshot, holding the value log's reading gate from before the
    /// snapshot until the value is read, so that the segment its pointer names cannot be
    /// collected in between (a collector deletes a segment only after every record pointing
    /// to it was moved, and waits for readers of older snapshots). A value still missing is
    /// looked for again on a fresh snapshot; a third miss is damage.
    fn settled<T>(&self, mut read: impl FnMut(&Store, &fjall::Snapshot) -> Result<Option<Option<T>>>) -> Result<Option<T>> {
        for _ in 0..READ_TRIES {
            let store = self.store()?;
            let _reading = store.log.reading();
            let snapshot = store.db.snapshot();
            match read(&store, &snapshot)? {
                Some(found) => return Ok(found),
                None => continue,
            }
        }
        Err(Error::corrupt("a value log segment the index points to is missing"))
    }

    fn neighbour(&self, key: &[u8], forward: bool) -> Result<Option<Entry>> {
        // A key over the engine's limit is cut to it (`limits::bound_key` says why that is exact).
        let (bound, cut) = crate::limits::bound_key(key);
        self.settled(|store, snapshot| {
            let found = if forward {
                snapshot.range::<&[u8], _>(&store.meta, (Bound::Excluded(bound), Bound::Unbounded)).next()
            } else {
                let upper = if cut { Bound::Included(bound) } else { Bound::Excluded(bound) };
                snapshot.range::<&[u8], _>(&store.meta, (Bound::Unbounded, upper)).next_back()
            };
            match found {
                None => Ok(Some(None)),
                Some(guard) => {
                    let (k, v) = guard.into_inner()?;
                    Ok(Self::entry_at(store, snapshot, k.into(), v.into())?.map(Some))
                }
            }
        })
    }
}

/// How many times a read looks for a value that moved (see `FjallEngine::settled`).
const READ_TRIES: usize = 3;

impl FjallEngine {
    /// Journal syncs since open: with group commit, far fewer than durable writes.
    pub fn sync_count(&self) -> u64 {
        self.shared.counters.syncs.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Write groups held back since open because the memtables were over the write-buffer cap.
    pub fn write_buffer_waits(&self) -> u64 {
        self.shared.counters.write_buffer_waits.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Bytes the memtables hold now (active and sealed, both keyspaces).
    pub fn write_buffer_bytes(&self) -> u64 {
        self.store().map_or(0, |store| store.db.write_buffer_size())
    }
}

impl Engine for FjallEngine {
    fn get(&self, key: &[u8]) -> Result<Option<Entry>> {
        if key.len() > crate::KEY_SIZE_MAX {
            return Ok(None);
        }
        self.settled(|store, snapshot| match snapshot.get(&store.meta, key)? {
            None => Ok(Some(None)),
            Some(raw) => Ok(Self::entry_at(store, snapshot, Bytes::copy_from_slice(key), raw.into())?.map(Some)),
        })
    }

    fn get_meta(&self, key: &[u8]) -> Result<Option<Meta>> {
        // Through a snapshot: a keyspace's own reads see a batch's entries as the writer inserts
        // them, before the batch is published, so they could see half of one.
        if key.len() > crate::KEY_SIZE_MAX {
            return Ok(None);
        }
        let store = self.store()?;
        let snapshot = store.db.snapshot();
        snapshot.get(&store.meta, key)?.map(|raw| record::decode(raw.into()).map(|(meta, _)| meta)).transpose()
    }

    fn next(&self, key: &[u8]) -> Result<Option<Entry>> {
        self.neighbour(key, true)
    }

    fn previous(&self, key: &[u8]) -> Result<Option<Entry>> {
        self.neighbour(key, false)
    }

    fn keys(&self, range: &KeyRange) -> Result<Vec<Bytes>> {
        let Some(bounds) = range.bounds().filter(|_| range.max > 0) else { return Ok(Vec::new()) };
        // Through a snapshot, like `get_meta`: never half of a batch.
        let store = self.store()?;
        let snapshot = store.db.snapshot();
        let iter = snapshot.range::<&[u8], _>(&store.meta, bounds);
        let collect = |guards: &mut dyn Iterator<Item = fjall::Guard>| -> Result<Vec<Bytes>> {
            guards.take(range.max).map(|guard| Ok(guard.key()?.into())).collect()
        };
        if range.reverse {
            collect(&mut iter.rev())
        } else {
            collect(&mut { iter })
        }
    }

    fn submit(&self, request: WriteRequest) {
        self.submit_all(vec![request]);
    }

    fn submit_all(&self, requests: Vec<WriteRequest>) {
        if requests.is_empty() {
            return;
        }
        let rejected = match self.queue.lock().as_ref() {
            Some(queue) => queue.send(requests).err().map(|e| e.0),
            None => Some(requests),
        };
        if let Some(rejected) = rejected {
            fail_group(rejected, &Error::Stopped("the engine is shutting down".into()));
        }
    }

    fn compact(&self) -> Result<()> {
        // Also what gives a full drive its space back after deletes: the journal keeps every
        // write made to it (deleted or not) until it is sealed at 64 MB and its memtables are
        // flushed, which on a small disk may never happen. So the journal is sealed now, the
        // memtables flushed (which deletes the sealed journal), and both keyspaces compacted,
        // which drops deleted entries and the blob files nothing points to any more.
        // A store a storage failure stopped (a full disk, say) is not touched: its flush
        // workers are gone, and the writer must be able to close it to reopen it.
        let store = self.store()?;
        store.stopped()?;
        store.db.rotate_journal()?;
        store.flush_memtables(FLUSH_WAIT_LIMIT)?;
        store.db.drop_flushed_journals()?;
        store.meta.major_compact()?;
        // Twice for the values: the first pass drops the deleted entries and so finds the
        // blob values nothing points to any more, the second drops the blob files that hold
        // only those.
        store.data.major_compact()?;
        store.data.major_compact()?;
        // And the value log: every segment with garbage in it, the active one sealed first.
        gc::collect_all(&self.shared, &store)?;
        // The files only older versions name are deleted when those versions go; without
        // this, that waits for later writes, which a full disk refuses.
        for keyspace in [&store.meta, &store.data] {
            keyspace.drop_old_versions()?;
        }
        Ok(())
    }

    fn disk_usage(&self) -> u64 {
        usage::disk_usage(&self.shared)
    }

    fn approximate_len(&self) -> u64 {
        self.store().map_or(0, |store| store.meta.approximate_len() as u64)
    }

    fn recoveries(&self) -> u64 {
        self.shared.counters.reopenings.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn notices(&self) -> Vec<String> {
        self.shared.notices.clone()
    }

    fn value_log(&self) -> Option<crate::value_log::LogFigures> {
        self.store().ok().map(|store| store.log.figures())
    }
}

impl Drop for FjallEngine {
    fn drop(&mut self) {
        self.shared.gc.stop();
        if let Some(collector) = self.collector.lock().take() {
            let _ = collector.join();
        }
        // Closing the queue lets the writer finish what is queued and exit.
        self.queue.lock().take();
        if let Some(writer) = self.writer.lock().take() {
            let _ = writer.join();
        }
    }
}

impl Shared {
    fn store(&self) -> Result<Arc<Store>> {
        self.slot.read().clone().ok_or_else(|| Error::Unavailable("the store is being reopened after a storage failure".into()))
    }
}
