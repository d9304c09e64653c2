//! The on-disk engine on fjall (an LSM tree).
//!
//! Two keyspaces, written together in one atomic batch per operation:
//! - `meta`: key -> metadata record (version, tag, algorithm, value length and CRC), and a
//!   value of at most [`INLINE_VALUE_MAX`] bytes in the record itself: a small value costs one
//!   LSM entry and a get one lookup. Records stay small, so metadata-only reads and key ranges
//!   touch few blocks.
//! - `data`: key -> larger values, with key-value separation: values over the threshold live in
//!   blob files and compaction moves only pointers, so a 1 MiB value is written once (plus the
//!   journal) instead of once per LSM level.
//!
//! All writes go through one writer thread that takes whatever requests are queued, checks
//! versions against the store plus the writes earlier in the same group (so a versioned put is
//! a real compare-and-swap), commits the group as one fjall batch (one journal write), and, if
//! any request of the group needs durability, runs one fdatasync for all of them: LevelDB-style
//! write grouping and group commit in one place. Readers never wait for the writer.

use std::collections::HashMap;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use fjall::{CompressionType, Database, Keyspace, KeyspaceCreateOptions, KvSeparationOptions, PersistMode, Readable};
use parking_lot::{Mutex, RwLock};

use crate::record::{self, Placement};
use crate::{Check, Engine, Entry, Error, KeyRange, Meta, Result, WriteOp, WriteRequest};

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
}

/// The write-buffer cap's floor, in memtables: both keyspaces' active memtables plus one
/// being flushed, so that waiting for flushes can always end.
pub const MIN_WRITE_BUFFER_MEMTABLES: u64 = 3;
/// The default cap, in memtables.
pub const DEFAULT_WRITE_BUFFER_MEMTABLES: u64 = 4;
/// How long the writer sleeps between looks at the write buffer while it is over the cap.
const WRITE_BUFFER_POLL: std::time::Duration = std::time::Duration::from_millis(1);
/// Longest MEDIAOPTIMIZE or a secure erase waits for the memtables it sealed to be flushed.
const FLUSH_WAIT_LIMIT: std::time::Duration = std::time::Duration::from_secs(120);
/// How often that wait looks.
const FLUSH_POLL: std::time::Duration = std::time::Duration::from_millis(10);
/// How long the writer waits for flushes that free nothing before it stops waiting: a 64 MiB
/// flush takes well under a second on a working disk.
const WRITE_BUFFER_STALL_LIMIT: std::time::Duration = std::time::Duration::from_secs(2);

impl FjallOptions {
    pub fn new(path: impl AsRef<Path>) -> Self {
        FjallOptions {
            path: path.as_ref().to_path_buf(),
            cache_size: 64 * 1024 * 1024,
            blob_threshold: 4096,
            memtable_size: 64 * 1024 * 1024,
            write_buffer_memtables: DEFAULT_WRITE_BUFFER_MEMTABLES,
            salvage_journal: false,
        }
    }
}

pub struct FjallEngine {
    shared: Arc<Shared>,
    /// Sender to the writer thread, of requests in submission order; dropped (closing the
    /// queue) when the engine drops.
    queue: Mutex<Option<std::sync::mpsc::Sender<Vec<WriteRequest>>>>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
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

/// The database and its keyspaces.
struct Store {
    db: Database,
    meta: Keyspace,
    data: Keyspace,
    /// Bytes of [`FjallOptions::write_buffer_memtables`].
    write_buffer_cap: u64,
    counters: Arc<Counters>,
}

impl FjallEngine {
    pub fn open(options: FjallOptions) -> Result<Arc<Self>> {
        crate::dirsync::create_dir_all(&options.path)?;
        // An erase interrupted after moving the old store aside.
        remove_aside(&options.path);
        let counters = Arc::new(Counters::default());
        let notices = crate::journal_check::check(&options.path, options.salvage_journal)?;
        let store = Arc::new(Store::open(&options, counters.clone())?);
        let shared = Arc::new(Shared { options, slot: RwLock::new(Some(store)), counters, halted: Mutex::new(None), notices });
        let (tx, rx) = std::sync::mpsc::channel();
        let writer_shared = shared.clone();
        let writer = std::thread::Builder::new().name("spindle-writer".into()).spawn(move || write_loop(&writer_shared, rx))?;
        Ok(Arc::new(FjallEngine { shared, queue: Mutex::new(Some(tx)), writer: Mutex::new(Some(writer)) }))
    }

    /// The open store, for one operation.
    fn store(&self) -> Result<Arc<Store>> {
        self.shared.store()
    }

    /// Reads the entry for a metadata record already found in `snapshot`.
    fn entry_at(store: &Store, snapshot: &fjall::Snapshot, key: Bytes, raw_meta: Bytes) -> Result<Entry> {
        let (meta, placement) = record::decode(raw_meta)?;
        let value: Bytes = match placement {
            Placement::Inline(value) => value,
            Placement::Separate if meta.value_len == 0 => Bytes::new(),
            Placement::Separate => snapshot
                .get(&store.data, &key)?
                .ok_or_else(|| Error::Corrupt(format!("value missing for key of {} bytes", key.len())))?
                .into(),
        };
        if value.len() != meta.value_len as usize {
            return Err(Error::Corrupt(format!("value is {} bytes, metadata says {}", value.len(), meta.value_len)));
        }
        Ok(Entry { key, meta, value })
    }

    fn neighbour(&self, key: &[u8], forward: bool) -> Result<Option<Entry>> {
        let store = self.store()?;
        let snapshot = store.db.snapshot();
        // A key over the engine's limit is cut to it (`limits::bound_key` says why that is exact).
        let (bound, cut) = crate::limits::bound_key(key);
        let found = if forward {
            snapshot.range::<&[u8], _>(&store.meta, (Bound::Excluded(bound), Bound::Unbounded)).next()
        } else {
            let upper = if cut { Bound::Included(bound) } else { Bound::Excluded(bound) };
            snapshot.range::<&[u8], _>(&store.meta, (Bound::Unbounded, upper)).next_back()
        };
        match found {
            None => Ok(None),
            Some(guard) => {
                let (k, v) = guard.into_inner()?;
                Self::entry_at(&store, &snapshot, k.into(), v.into()).map(Some)
            }
        }
    }
}

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
        let store = self.store()?;
        let snapshot = store.db.snapshot();
        match snapshot.get(&store.meta, key)? {
            None => Ok(None),
            Some(raw) => Self::entry_at(&store, &snapshot, Bytes::copy_from_slice(key), raw.into()).map(Some),
        }
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
        let mut keys = Vec::with_capacity(range.max.min(256));
        let mut push = |guard: fjall::Guard| -> Result<bool> {
            keys.push(guard.key()?.into());
            Ok(keys.len() < range.max)
        };
        if range.reverse {
            for guard in iter.rev() {
                if !push(guard)? {
                    break;
                }
            }
        } else {
            for guard in iter {
                if !push(guard)? {
                    break;
                }
            }
        }
        Ok(keys)
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
            fail_group(rejected, &Error::Io("engine is shutting down".into()));
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
        // The files only older versions name are deleted when those versions go; without
        // this, that waits for later writes, which a full disk refuses.
        for keyspace in [&store.meta, &store.data] {
            keyspace.drop_old_versions()?;
        }
        Ok(())
    }

    fn disk_usage(&self) -> u64 {
        // Figures fjall keeps in memory, so admitting a put costs no walk of the directory and
        // no lock a write takes: the tables' and blob files' sizes in each tree's current
        // version, and what the memtables hold, which is what the journals hold until it is
        // flushed. (Journals are preallocated sparse: their apparent size would call an empty
        // drive 64 MiB full.) A flushed journal is counted until its memtables are dropped.
        let usage = &self.shared.counters.usage;
        match self.store() {
            Ok(store) => {
                let now = store.meta.disk_space() + store.data.disk_space() + store.db.write_buffer_size();
                usage.store(now, std::sync::atomic::Ordering::Relaxed);
                now
            }
            Err(_) => usage.load(std::sync::atomic::Ordering::Relaxed),
        }
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
}

impl Drop for FjallEngine {
    fn drop(&mut self) {
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

/// Where the flushes of sealed memtables stand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flushes {
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
fn wait_for_flushes(deadline: std::time::Instant, poll: std::time::Duration, mut flushes: impl FnMut() -> Flushes) -> Result<()> {
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
fn stopped_error(full_disk: bool) -> Error {
    if full_disk {
        Error::NoSpace
    } else {
        Error::Unavailable("a storage failure stopped writes; the store is reopened once the disk has room".into())
    }
}

impl Store {
    /// An error if a storage failure stopped the database (NoSpace for a full disk).
    fn stopped(&self) -> Result<()> {
        self.stop_cause().map_or(Ok(()), |full_disk| Err(stopped_error(full_disk)))
    }

    /// Whether a storage failure stopped the database, and if so whether a full disk alone did.
    fn stop_cause(&self) -> Option<bool> {
        self.db.is_poisoned().then(|| self.db.is_stopped_by_full_disk())
    }

    /// Seals both keyspaces' active memtables and waits, at most `limit`, until every sealed
    /// memtable is flushed to tables; NoSpace or Unavailable if a storage failure stops the
    /// flushes, Unavailable if they take longer.
    fn flush_memtables(&self, limit: std::time::Duration) -> Result<()> {
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

    fn open(options: &FjallOptions, counters: Arc<Counters>) -> Result<Store> {
        // Values are written as the client sent them, in the journal as in the blob files
        // below: a drive's values are opaque and often compressed or encrypted already, and
        // LZ4 (fjall's default for values of 4 KiB and more) cost the single writer thread
        // CPU on every such put for nothing.
        let db = Database::builder(&options.path)
            .cache_size(options.cache_size)
            .journal_compression(CompressionType::None)
            .open()?;
        let memtable_size = options.memtable_size;
        let meta = db.keyspace("meta", || KeyspaceCreateOptions::default().max_memtable_size(memtable_size))?;
        let threshold = options.blob_threshold;
        // Blob files, too, hold values uncompressed (read back without decompressing).
        let data = db.keyspace("data", move || {
            KeyspaceCreateOptions::default().max_memtable_size(memtable_size).with_kv_separation(Some(
                KvSeparationOptions::default().separation_threshold(threshold).compression(CompressionType::None),
            ))
        })?;
        let write_buffer_cap = options.write_buffer_memtables.max(MIN_WRITE_BUFFER_MEMTABLES) * memtable_size;
        Ok(Store { db, meta, data, write_buffer_cap, counters })
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
    fn wait_for_write_buffer(&self) {
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
    fn seal_overgrown_memtables(&self) -> bool {
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
    fn stored(&self, key: &[u8]) -> Result<Option<Known>> {
        let Some(raw) = self.meta.get(key)? else { return Ok(None) };
        let (meta, placement) = record::decode(raw.into())?;
        Ok(Some(Known { in_data: placement.in_data(&meta), meta }))
    }
}

/// The writer thread: groups queued requests, applies them, commits, syncs, answers.
fn write_loop(shared: &Shared, queue: std::sync::mpsc::Receiver<Vec<WriteRequest>>) {
    let mut healing = Healing::default();
    while let Some(mut group) = next_submission(shared, &queue, &mut healing) {
        // Whole submissions join the group, so it may end a little over the limits.
        let mut bytes: usize = group.iter().map(|r| r.op.footprint()).sum();
        while group.len() < MAX_GROUP_REQUESTS && bytes < MAX_GROUP_BYTES {
            match queue.try_recv() {
                Ok(more) => {
                    bytes += more.iter().map(|r| r.op.footprint()).sum::<usize>();
                    group.extend(more);
                }
                Err(_) => break,
            }
        }
        match healing.store(shared) {
            Ok(store) => {
                store.wait_for_write_buffer();
                run_group(shared, &store, group);
            }
            Err(e) => refuse_group(shared, group, &e),
        }
    }
}

/// The next submission, or `None` once the queue is closed. While a full disk keeps the store
/// stopped, the writer also wakes on its own to try reopening it, so that reads come back even
/// if no write arrives.
fn next_submission(
    shared: &Shared,
    queue: &std::sync::mpsc::Receiver<Vec<WriteRequest>>,
    healing: &mut Healing,
) -> Option<Vec<WriteRequest>> {
    loop {
        if !Healing::waiting(shared) {
            return queue.recv().ok();
        }
        match queue.recv_timeout(healing.retry_in()) {
            Ok(group) => return Some(group),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => drop(healing.store(shared)),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return None,
        }
    }
}

/// Answers a group the store cannot take now with `error`, except an erase: a full disk must
/// not keep a drive from being erased, the usual way to empty it. The requests before the
/// erase get `error`, the erase replaces the stopped store with an empty one, and the requests
/// after it go to that.
fn refuse_group(shared: &Shared, mut group: Vec<WriteRequest>, error: &Error) {
    let erase_at = group.iter().position(|r| matches!(r.op, WriteOp::Erase { .. }));
    let Some(at) = erase_at.filter(|_| Healing::waiting(shared)) else {
        return fail_group(group, error);
    };
    let mut rest = group.split_off(at);
    let erase_request = rest.remove(0);
    fail_group(group, error);
    erase_request.finish(erase_stopped(shared));
    match shared.store() {
        Ok(store) => {
            store.wait_for_write_buffer();
            run_group(shared, &store, rest);
        }
        Err(e) => fail_group(rest, &e),
    }
}

/// Answers every request of `group` with `error`; nothing of it was applied.
fn fail_group(group: Vec<WriteRequest>, error: &Error) {
    for request in group {
        request.finish(Err(error.clone()));
    }
}

/// Free bytes the filesystem must have, beyond what the memtables hold, before the writer
/// reopens a database that a full disk stopped: enough for the journal and the flushes that
/// follow recovery not to fail again at once.
const REOPEN_FREE_MARGIN: u64 = 16 * 1024 * 1024;
/// How soon the writer first tries to reopen a stopped database once the disk has room; each
/// failed attempt doubles it, up to [`REOPEN_RETRY_MAX`].
const REOPEN_RETRY: std::time::Duration = std::time::Duration::from_secs(1);
const REOPEN_RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(30);
/// How long a reopening waits for readers still using the stopped database.
const REOPEN_DRAIN_LIMIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The writer's recovery from a full disk.
///
/// fjall stops taking writes for good (it is "poisoned") when a journal write or sync fails or
/// a background worker fails, typically a memtable flush that met a full disk. Reads go on.
/// When the cause was ENOSPC, the journals hold every acknowledged write and nothing of a
/// failed one (the vendored fjall discards a failed batch's buffered bytes), so reopening the
/// database recovers exactly what a restart would. While the filesystem lacks room to flush
/// what the memtables hold, the writer answers writes NO_SPACE; then it reopens the database
/// and goes on. Any other cause (a failed fsync: the kernel may have dropped the unsynced
/// pages, and a later sync would succeed without them) stays a stop: writes fail until the
/// drive is restarted by someone who has looked at the disk.
struct Healing {
    /// No reopening before this.
    not_before: std::time::Instant,
    /// The wait after the next failed attempt.
    backoff: std::time::Duration,
}

impl Default for Healing {
    fn default() -> Self {
        Healing { not_before: std::time::Instant::now(), backoff: REOPEN_RETRY }
    }
}

impl Healing {
    /// Whether the store is stopped by a full disk (or closed by a failed reopening): the
    /// writer should try again on its own.
    fn waiting(shared: &Shared) -> bool {
        if shared.halted.lock().is_some() {
            return false;
        }
        shared.store().map_or(true, |store| store.db.is_stopped_by_full_disk())
    }

    fn retry_in(&self) -> std::time::Duration {
        self.not_before.saturating_duration_since(std::time::Instant::now()).max(REOPEN_RETRY)
    }

    /// The store to apply the next group to, reopened first if a full disk stopped it.
    fn store(&mut self, shared: &Shared) -> Result<Arc<Store>> {
        if let Some(halted) = shared.halted.lock().clone() {
            return Err(halted);
        }
        let held = match shared.store() {
            Ok(store) if !store.db.is_poisoned() => return Ok(store),
            Ok(store) if !store.db.is_stopped_by_full_disk() => {
                return Err(Error::Io("a storage failure (not a full disk) stopped writes; check the disk and restart the drive".into()))
            }
            Ok(store) => store.db.write_buffer_size(),
            Err(_) => 0,
        };
        if crate::fs_space::statvfs(&shared.options.path).is_some_and(|(_, free)| free < held + REOPEN_FREE_MARGIN) {
            return Err(Error::NoSpace);
        }
        if std::time::Instant::now() < self.not_before {
            return Err(Error::Unavailable("a full disk stopped writes; the store is being reopened".into()));
        }
        match reopen(shared) {
            Ok(store) => {
                self.backoff = REOPEN_RETRY;
                Ok(store)
            }
            Err(e) => {
                tracing::warn!("reopening the store failed: {e}; next try in {:?}", self.backoff);
                self.not_before = std::time::Instant::now() + self.backoff;
                self.backoff = (self.backoff * 2).min(REOPEN_RETRY_MAX);
                Err(e)
            }
        }
    }
}

/// Closes the stopped database, once no reader uses it any more, and opens it again.
fn reopen(shared: &Shared) -> Result<Arc<Store>> {
    tracing::warn!("a full disk stopped the database; reopening it");
    close(shared)?;
    open_into_slot(shared)
}

/// Erases a store a full disk stopped: closes it, moves its directory aside in one rename,
/// deletes it there (which frees the space) and starts an empty store in its place. A crash
/// or a failure in between leaves the old files only under the aside name, deleted at the
/// next open or erase; never a half-deleted store that a reopening would half-recover.
fn erase_stopped(shared: &Shared) -> Result<()> {
    tracing::warn!("erasing a store that a full disk stopped");
    close(shared)?;
    // A leftover of an earlier erase first: a rename onto it would fail.
    remove_aside(&shared.options.path);
    if shared.options.path.exists() {
        std::fs::rename(&shared.options.path, aside_path(&shared.options.path))?;
        // Durable before the erase is acknowledged: a power cut must not bring the old store
        // back under its own name.
        crate::dirsync::sync_parent(&shared.options.path)?;
        remove_aside(&shared.options.path);
    }
    crate::dirsync::create_dir_all(&shared.options.path)?;
    open_into_slot(shared).map(drop)
}

/// Where an erase moves a stopped store's directory before deleting it: beside it, under a
/// hidden name no one else would give a directory (the next open deletes what it finds there).
fn aside_path(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    path.with_file_name(format!(".{name}.spindle-erasing"))
}

/// Deletes what an erase moved aside, if anything.
fn remove_aside(path: &Path) {
    let aside = aside_path(path);
    if aside.exists() {
        if let Err(e) = std::fs::remove_dir_all(&aside) {
            tracing::warn!("could not delete the erased store at {}: {e}", aside.display());
        }
    }
}

/// Takes the store out of the slot and closes it, once no reader uses it any more (at most
/// [`REOPEN_DRAIN_LIMIT`]; the store goes back otherwise). Readers meanwhile get Unavailable.
fn close(shared: &Shared) -> Result<()> {
    // Taken into a local first: the slot's write lock must not be held while draining.
    let taken = shared.slot.write().take();
    let Some(mut old) = taken else { return Ok(()) };
    // Readers clone the store for one operation at a time: wait for those in flight.
    let started = std::time::Instant::now();
    loop {
        match Arc::try_unwrap(old) {
            // Dropping it closes the database: its workers stop and its lock file is released.
            Ok(store) => {
                drop(store);
                return Ok(());
            }
            Err(still_shared) if started.elapsed() >= REOPEN_DRAIN_LIMIT => {
                *shared.slot.write() = Some(still_shared);
                return Err(Error::Unavailable("a full disk stopped writes; the store is still in use".into()));
            }
            Err(still_shared) => {
                old = still_shared;
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
    }
}

/// Opens the database and puts it in the (empty) slot.
fn open_into_slot(shared: &Shared) -> Result<Arc<Store>> {
    // A write the full disk cut short is a torn tail: cut it, so that a record there which
    // decodes but fails its checksum cannot stop the reopening.
    crate::journal_check::check(&shared.options.path, false)?;
    let store = Arc::new(Store::open(&shared.options, shared.counters.clone())?);
    *shared.slot.write() = Some(store.clone());
    shared.counters.reopenings.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    tracing::info!("database open again after a full disk");
    Ok(store)
}

/// Applies a group and answers it. A panic while applying it (a bug, or an assertion in fjall
/// meeting something the checks before it missed) must not leave requests unanswered, which
/// would hang their clients: every request not answered yet gets an error saying so, and the
/// store takes no more writes, since fjall's state after a panic in its write path is unknown.
fn run_group(shared: &Shared, store: &Store, group: Vec<WriteRequest>) {
    let mut slots: Vec<Option<WriteRequest>> = group.into_iter().map(Some).collect();
    let applied = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| apply_group(store, &mut slots)));
    if let Err(panic) = applied {
        let error = Error::Io(format!(
            "the engine's writer failed ({}); the store takes no more writes: restart the drive",
            panic_message(&*panic)
        ));
        tracing::error!("{error}");
        *shared.halted.lock() = Some(error.clone());
        for request in slots.iter_mut().filter_map(Option::take) {
            // A callback that panics again must not keep the others from their answers.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| request.finish(Err(error.clone()))));
        }
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic.downcast_ref::<&str>().copied().or_else(|| panic.downcast_ref::<String>().map(String::as_str)).unwrap_or("a panic")
}

/// Applies a group, with erases as barriers: the writes before an erase are committed first,
/// the erase runs alone, then the writes after it. A request's slot is emptied when it has
/// been answered.
fn apply_group(store: &Store, slots: &mut [Option<WriteRequest>]) {
    let mut start = 0;
    for at in 0..slots.len() {
        let Some(WriteOp::Erase { secure }) = slots.get(at).and_then(Option::as_ref).map(|r| &r.op) else { continue };
        let secure = *secure;
        if let Some(before) = slots.get_mut(start..at).filter(|s| !s.is_empty()) {
            apply_writes(store, before);
        }
        let result = erase(store, secure);
        if let Some(request) = slots.get_mut(at).and_then(Option::take) {
            request.finish(result);
        }
        start = at + 1;
    }
    if let Some(rest) = slots.get_mut(start..).filter(|s| !s.is_empty()) {
        apply_writes(store, rest);
    }
}

fn erase(store: &Store, secure: bool) -> Result<()> {
    store.meta.clear()?;
    store.data.clear()?;
    store.db.persist(PersistMode::SyncData)?;
    if secure {
        // Flush what the journal holds into (empty) tables and compact, so fjall drops every
        // table and blob file that held the old data, and the old journals with them.
        store.flush_memtables(FLUSH_WAIT_LIMIT)?;
        for ks in [&store.meta, &store.data] {
            ks.major_compact()?;
        }
        store.db.persist(PersistMode::SyncAll)?;
    }
    Ok(())
}

fn apply_writes(store: &Store, slots: &mut [Option<WriteRequest>]) {
    // What this group has already written, so later requests check against it.
    let mut written: HashMap<Bytes, Option<Known>> = HashMap::new();
    let mut batch = store.db.batch();
    let mut results: Vec<Result<()>> = Vec::with_capacity(slots.len());
    for slot in slots.iter() {
        let Some(request) = slot else {
            results.push(Ok(()));
            continue;
        };
        let mut staged = Staged::default();
        // Keys fjall would assert on are refused here, before they reach it.
        let result = crate::limits::check_op(&request.op).and_then(|()| staged.op(store, &written, &request.op));
        if result.is_ok() {
            staged.apply_to(store, &mut batch, &mut written);
        }
        results.push(result);
    }
    if !batch.is_empty() {
        if let Err(e) = batch.commit() {
            let e = Error::from(e);
            for r in results.iter_mut().filter(|r| r.is_ok()) {
                *r = Err(e.clone());
            }
        }
    }
    let mut waiting = false;
    for (slot, result) in slots.iter_mut().zip(&results) {
        let Some(request) = slot else { continue };
        if let Some(applied) = request.on_applied.take() {
            applied(result.clone());
        }
        if request.sync {
            waiting = true;
        } else if let Some(request) = slot.take() {
            request.finish(result.clone());
        }
    }
    if waiting {
        let synced = store.db.persist(PersistMode::SyncData).map_err(Error::from);
        store.counters.syncs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        for (slot, result) in slots.iter_mut().zip(results) {
            if let Some(request) = slot.take() {
                request.finish(result.and(synced.clone()));
            }
        }
    }
}

/// One change to a keyspace.
enum Effect {
    Insert { data: bool, key: Bytes, value: Bytes },
    Remove { data: bool, key: Bytes },
}

/// A key's metadata as the writer knows it, and whether the data keyspace holds its value.
#[derive(Clone)]
struct Known {
    meta: Meta,
    in_data: bool,
}

/// The changes one request would make, kept aside until the whole request has passed its
/// checks (a failed batch must leave nothing in the group's fjall batch).
#[derive(Default)]
struct Staged {
    effects: Vec<Effect>,
    /// Metadata after this request, in order (`None`: deleted).
    written: Vec<(Bytes, Option<Known>)>,
}

impl Staged {
    /// The metadata `key` has after this request's earlier operations, the group's earlier
    /// requests, or in the store.
    fn current(&self, store: &Store, group: &HashMap<Bytes, Option<Known>>, key: &Bytes) -> Result<Option<Known>> {
        match self.written_earlier(group, key) {
            Some(known) => Ok(known.clone()),
            None => store.stored(key),
        }
    }

    /// What this request's earlier operations or the group's earlier requests left under
    /// `key` (`Some(None)`: deleted), if they touched it.
    fn written_earlier<'a>(&'a self, group: &'a HashMap<Bytes, Option<Known>>, key: &Bytes) -> Option<&'a Option<Known>> {
        self.written.iter().rev().find(|(k, _)| k == key).map(|(_, m)| m).or_else(|| group.get(key))
    }

    /// Whether the data keyspace may hold a value for `key`, for a forced small put, which has
    /// not read the key's record. The data keyspace's memtables and its tables' filters answer
    /// without reading a block: where values are small it holds few keys, and where a large
    /// value is overwritten by a small one the answer is a filter's "maybe" and a tombstone,
    /// not a lookup (a false "maybe" costs only a tombstone).
    fn may_hold_value(&self, store: &Store, group: &HashMap<Bytes, Option<Known>>, key: &Bytes) -> Result<bool> {
        match self.written_earlier(group, key) {
            Some(known) => Ok(known.as_ref().is_some_and(|m| m.in_data)),
            None => Ok(store.data.may_contain_key(key)?),
        }
    }

    fn op(&mut self, store: &Store, group: &HashMap<Bytes, Option<Known>>, op: &WriteOp) -> Result<()> {
        match op {
            WriteOp::Put { key, value, meta, check } => {
                let mut meta = meta.clone();
                meta.value_len = u32::try_from(value.len()).map_err(|_| Error::Io("value over 4 GiB".into()))?;
                meta.value_crc = crc32c::crc32c(value);
                // A forced put needs nothing from the stored entry: it is not read.
                let stored = if *check == Check::Force { None } else { self.current(store, group, key)? };
                if !check.passes(stored.as_ref().map(|m| &m.meta.version[..])) {
                    return Err(Error::VersionMismatch);
                }
                let inline = value.len() <= INLINE_VALUE_MAX;
                let record = record::encode(&meta, inline.then_some(&value[..]))?;
                self.effects.push(Effect::Insert { data: false, key: key.clone(), value: record });
                if !inline {
                    self.effects.push(Effect::Insert { data: true, key: key.clone(), value: value.clone() });
                } else if match &stored {
                    Some(m) => m.in_data,
                    None => *check == Check::Force && self.may_hold_value(store, group, key)?,
                } {
                    // An earlier large value must not be left behind in the data keyspace.
                    self.effects.push(Effect::Remove { data: true, key: key.clone() });
                }
                self.written.push((key.clone(), Some(Known { meta, in_data: !inline })));
                Ok(())
            }
            WriteOp::Delete { key, check } => {
                let stored = match self.current(store, group, key)? {
                    Some(m) => m,
                    None if *check == Check::Force => return Ok(()),
                    None => return Err(Error::NotFound),
                };
                if !check.passes(Some(&stored.meta.version)) {
                    return Err(Error::VersionMismatch);
                }
                self.effects.push(Effect::Remove { data: false, key: key.clone() });
                if stored.in_data {
                    self.effects.push(Effect::Remove { data: true, key: key.clone() });
                }
                self.written.push((key.clone(), None));
                Ok(())
            }
            WriteOp::Flush => Ok(()),
            WriteOp::Erase { .. } => Err(Error::Io("an erase is never staged with writes".into())),
            WriteOp::Batch(ops) => {
                for (index, op) in ops.iter().enumerate() {
                    if matches!(op, WriteOp::Batch(_) | WriteOp::Flush | WriteOp::Erase { .. }) {
                        return Err(Error::BatchFailed { index, cause: Box::new(Error::Io("only puts and deletes batch".into())) });
                    }
                    self.op(store, group, op).map_err(|cause| Error::BatchFailed { index, cause: Box::new(cause) })?;
                }
                Ok(())
            }
        }
    }

    fn apply_to(self, store: &Store, batch: &mut fjall::OwnedWriteBatch, group: &mut HashMap<Bytes, Option<Known>>) {
        for effect in self.effects {
            match effect {
                Effect::Insert { data, key, value } => batch.insert(if data { &store.data } else { &store.meta }, key, value),
                Effect::Remove { data, key } => batch.remove(if data { &store.data } else { &store.meta }, key),
            }
        }
        group.extend(self.written);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// The wait MEDIAOPTIMIZE and a secure erase use for flushes ends: at once when a storage
    /// failure stopped them (NoSpace for a full disk), and at its deadline when they never
    /// finish (review H2: fjall's own wait spun for ever once a failed flush had stopped the
    /// workers, holding the store so that the full-disk reopen could not close it).
    #[test]
    fn the_wait_for_flushes_is_bounded() {
        use std::time::{Duration, Instant};
        let far = Instant::now() + Duration::from_secs(3600);
        let poll = Duration::from_millis(1);
        assert_eq!(wait_for_flushes(far, poll, || Flushes::Stopped(true)), Err(Error::NoSpace));
        assert!(matches!(wait_for_flushes(far, poll, || Flushes::Stopped(false)), Err(Error::Unavailable(_))));
        let mut polls = 0;
        let stops_later = wait_for_flushes(far, poll, || {
            polls += 1;
            if polls < 5 { Flushes::Pending } else { Flushes::Stopped(true) }
        });
        assert_eq!(stops_later, Err(Error::NoSpace));
        let started = Instant::now();
        let never = wait_for_flushes(started + Duration::from_millis(50), poll, || Flushes::Pending);
        assert!(matches!(never, Err(Error::Unavailable(_))), "{never:?}");
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(wait_for_flushes(far, poll, || Flushes::Done), Ok(()));
    }

    /// MEDIAOPTIMIZE's flush of both keyspaces finishes on a working store, and leaves no
    /// sealed memtable behind.
    #[test]
    fn compact_flushes_every_memtable() {
        let dir = tempfile::tempdir().unwrap();
        let engine = FjallEngine::open(FjallOptions::new(dir.path())).unwrap();
        for i in 0..50u32 {
            engine.put(format!("k{i}").as_bytes(), Bytes::from(vec![1u8; 5000]), Meta::default(), Check::Force).unwrap();
        }
        engine.compact().unwrap();
        let store = engine.store().unwrap();
        assert_eq!(store.meta.sealed_memtable_count() + store.data.sealed_memtable_count(), 0);
        drop(store);
        assert_eq!(engine.get(b"k7").unwrap().unwrap().value.len(), 5000);
    }

    /// An erase of a stopped store that died after moving the old directory aside (and
    /// before deleting it) is finished by the next open; the store opens empty and works.
    #[test]
    fn an_interrupted_erase_is_finished_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("engine");
        let aside = aside_path(&path);
        assert_eq!(aside, dir.path().join(".engine.spindle-erasing"));
        std::fs::create_dir_all(aside.join("blobs")).unwrap();
        std::fs::write(aside.join("blobs/1"), b"old data").unwrap();
        let engine = FjallEngine::open(FjallOptions::new(&path)).unwrap();
        assert!(!aside.exists(), "the erased store was left behind");
        assert_eq!(engine.approximate_len(), 0);
    }

    /// A panic on the writer thread (here a callback's; in the field, one of fjall's
    /// assertions) answers every request of its group with an error and stops the store's
    /// writes with a clear one; nothing is left waiting. Without the catch, the writer thread
    /// died with the group's callbacks, and their clients waited for ever.
    #[test]
    fn a_panic_in_the_writer_answers_every_request_and_stops_writes() {
        let dir = tempfile::tempdir().unwrap();
        let engine = FjallEngine::open(FjallOptions::new(dir.path())).unwrap();
        engine.put(b"before", Bytes::from_static(b"v"), Meta::default(), Check::Force).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let request = |key: &'static [u8], panics: bool| {
            let tx = tx.clone();
            let op = WriteOp::Put { key: Bytes::from_static(key), value: Bytes::from_static(b"v"), meta: Meta::default(), check: Check::Force };
            let on_applied: Option<crate::Callback> = panics.then(|| Box::new(|_| panic!("injected")) as crate::Callback);
            WriteRequest { op, sync: true, on_applied, on_done: Box::new(move |r| drop(tx.send((key, r)))) }
        };
        engine.submit_all(vec![request(b"a", true), request(b"b", false)]);
        drop(tx);
        let mut answers: Vec<_> = (0..2).map(|_| rx.recv_timeout(std::time::Duration::from_secs(10)).expect("an answer")).collect();
        answers.sort_by_key(|(k, _)| *k);
        for (key, result) in &answers {
            assert!(matches!(result, Err(Error::Io(m)) if m.contains("injected")), "{key:?}: {result:?}");
        }
        // Later writes are refused at once, saying why; reads go on.
        let later = engine.put(b"c", Bytes::from_static(b"v"), Meta::default(), Check::Force);
        assert!(matches!(&later, Err(Error::Io(m)) if m.contains("restart")), "{later:?}");
        assert!(engine.get(b"before").unwrap().is_some());
    }

    /// Keys the data keyspace holds a value for.
    fn data_keys(engine: &FjallEngine) -> Vec<Bytes> {
        engine.store().unwrap().data.iter().map(|g| Bytes::from(g.key().unwrap())).collect()
    }

    #[derive(Debug, Clone)]
    enum Step {
        Put { key: u8, len: usize, force: bool },
        Delete { key: u8, force: bool },
        /// Several puts of one key in one atomic batch (one writer group).
        Batch { key: u8, lens: Vec<usize> },
        /// Several forced puts (`Some(len)`) and deletes (`None`) of one key submitted together,
        /// as separate requests the writer applies as one group.
        Group { key: u8, ops: Vec<Option<usize>> },
        /// Both keyspaces' memtables flushed to tables, so that tables and their filters
        /// answer later steps.
        Flush,
    }

    fn len() -> impl Strategy<Value = usize> {
        prop_oneof![Just(0), 1..=INLINE_VALUE_MAX, Just(INLINE_VALUE_MAX + 1), (INLINE_VALUE_MAX + 1)..(3 * INLINE_VALUE_MAX)]
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (0u8..6, len(), any::<bool>()).prop_map(|(key, len, force)| Step::Put { key, len, force }),
            (0u8..6, any::<bool>()).prop_map(|(key, force)| Step::Delete { key, force }),
            (0u8..6, proptest::collection::vec(len(), 1..4)).prop_map(|(key, lens)| Step::Batch { key, lens }),
            (0u8..6, proptest::collection::vec(proptest::option::of(len()), 2..5)).prop_map(|(key, ops)| Step::Group { key, ops }),
            Just(Step::Flush),
        ]
    }

    /// The store matches `model` and the data keyspace holds exactly the large values: none
    /// left behind by a small value or a delete, none missing.
    fn check(engine: &FjallEngine, model: &BTreeMap<Bytes, (Bytes, Bytes)>) -> std::result::Result<(), TestCaseError> {
        for k in 0u8..6 {
            let key = Bytes::from(vec![k]);
            let got = engine.get(&key).unwrap().map(|e| (e.value, e.meta.version));
            prop_assert_eq!(got, model.get(&key).cloned());
        }
        let large: Vec<Bytes> = model.iter().filter(|(_, (v, _))| v.len() > INLINE_VALUE_MAX).map(|(k, _)| k.clone()).collect();
        prop_assert_eq!(data_keys(engine), large);
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        /// Values move between the record and the data keyspace as their size changes, with
        /// forced and versioned writes, deletes and batches, before and after a reopen.
        #[test]
        fn values_live_where_their_size_puts_them(steps in proptest::collection::vec(step(), 1..40)) {
            let dir = tempfile::tempdir().unwrap();
            let engine = FjallEngine::open(FjallOptions::new(dir.path())).unwrap();
            let mut model: BTreeMap<Bytes, (Bytes, Bytes)> = BTreeMap::new();
            let mut serial = 0u32;
            let mut value = |len: usize| {
                serial += 1;
                (Bytes::from(vec![serial as u8; len]), Bytes::from(serial.to_string()))
            };
            for step in steps {
                match step {
                    Step::Put { key, len, force } => {
                        let key = Bytes::from(vec![key]);
                        let (v, version) = value(len);
                        let stored = model.get(&key).map(|(_, ver)| ver.clone()).unwrap_or_default();
                        let check = if force { Check::Force } else { Check::Version(stored) };
                        engine.put(&key, v.clone(), Meta { version: version.clone(), ..Meta::default() }, check).unwrap();
                        model.insert(key, (v, version));
                    }
                    Step::Delete { key, force } => {
                        let key = Bytes::from(vec![key]);
                        let check = if force { Check::Force } else { Check::Version(model.get(&key).map(|(_, v)| v.clone()).unwrap_or_default()) };
                        let result = engine.delete(&key, check);
                        prop_assert_eq!(result.is_ok(), force || model.contains_key(&key));
                        model.remove(&key);
                    }
                    Step::Batch { key, lens } => {
                        let key = Bytes::from(vec![key]);
                        let mut ops = Vec::new();
                        for len in lens {
                            let (v, version) = value(len);
                            ops.push(WriteOp::Put { key: key.clone(), value: v.clone(), meta: Meta { version: version.clone(), ..Meta::default() }, check: Check::Force });
                            model.insert(key.clone(), (v, version));
                        }
                        engine.submit_and_wait(WriteOp::Batch(ops), false).unwrap();
                    }
                    Step::Group { key, ops } => {
                        let key = Bytes::from(vec![key]);
                        let (tx, rx) = std::sync::mpsc::channel();
                        let mut requests = Vec::new();
                        for op in ops {
                            let op = match op {
                                Some(len) => {
                                    let (v, version) = value(len);
                                    model.insert(key.clone(), (v.clone(), version.clone()));
                                    WriteOp::Put { key: key.clone(), value: v, meta: Meta { version, ..Meta::default() }, check: Check::Force }
                                }
                                None => {
                                    model.remove(&key);
                                    WriteOp::Delete { key: key.clone(), check: Check::Force }
                                }
                            };
                            let tx = tx.clone();
                            requests.push(WriteRequest { op, sync: false, on_applied: None, on_done: Box::new(move |r| { let _ = tx.send(r); }) });
                        }
                        let count = requests.len();
                        engine.submit_all(requests);
                        for _ in 0..count {
                            rx.recv().unwrap().unwrap();
                        }
                    }
                    Step::Flush => {
                        engine.store().unwrap().meta.rotate_memtable_and_wait().unwrap();
                        engine.store().unwrap().data.rotate_memtable_and_wait().unwrap();
                    }
                }
                check(&engine, &model)?;
            }
            engine.sync().unwrap();
            drop(engine);
            let engine = FjallEngine::open(FjallOptions::new(dir.path())).unwrap();
            check(&engine, &model)?;
        }
    }

    #[test]
    fn records_of_the_first_format_are_read_and_replaced_cleanly() {
        // A store as earlier releases left it: every value in the data keyspace, even small
        // ones, and format-1 records.
        let dir = tempfile::tempdir().unwrap();
        let engine = FjallEngine::open(FjallOptions::new(dir.path())).unwrap();
        let meta = |v: &'static [u8], len: usize| Meta { version: Bytes::from_static(v), value_len: len as u32, ..Meta::default() };
        for (key, value) in [(&b"a"[..], &b"small"[..]), (b"b", b"other")] {
            engine.store().unwrap().meta.insert(key, record::encode(&meta(b"1", value.len()), None).unwrap()).unwrap();
            engine.store().unwrap().data.insert(key, value).unwrap();
        }
        assert_eq!(engine.get(b"a").unwrap().unwrap().value, Bytes::from_static(b"small"));
        // Small puts replace the old values and deletes remove them, versioned or forced (a
        // forced put asks the data keyspace, having read no record): none leaves one behind.
        engine.put(b"a", Bytes::from_static(b"new"), meta(b"2", 0), Check::Version(Bytes::from_static(b"1"))).unwrap();
        engine.delete(b"b", Check::Version(Bytes::from_static(b"1"))).unwrap();
        for (key, value) in [(&b"c"[..], &b"forced-put"[..]), (b"d", b"forced-delete")] {
            engine.store().unwrap().meta.insert(key, record::encode(&meta(b"1", value.len()), None).unwrap()).unwrap();
            engine.store().unwrap().data.insert(key, value).unwrap();
        }
        engine.store().unwrap().data.rotate_memtable_and_wait().unwrap();
        engine.put(b"c", Bytes::from_static(b"small"), meta(b"2", 0), Check::Force).unwrap();
        engine.delete(b"d", Check::Force).unwrap();
        assert_eq!(engine.get(b"a").unwrap().unwrap().value, Bytes::from_static(b"new"));
        assert_eq!(engine.get(b"b").unwrap(), None);
        assert_eq!(engine.get(b"c").unwrap().unwrap().value, Bytes::from_static(b"small"));
        assert_eq!(engine.get(b"d").unwrap(), None);
        assert!(data_keys(&engine).is_empty());
    }
}
