//! The value log: large values written once, appended to segment files beside the LSM tree,
//! which holds only a pointer to each (WiscKey's key-value separation, with Badger's and
//! Titan's segmented log and garbage collection; docs/design.md says why).
//!
//! Durability rests on one order: a value reaches the OS before the journal record pointing
//! to it (the writer flushes its appender before committing a group), and the log is synced
//! before the journal ever is ([`ValueLog::sync`] runs as fjall's `before_journal_sync`:
//! client syncs, rotations, the sync before every flush). So every pointer the journal made
//! durable, and every pointer in a table, names durable bytes. A pointer in the journal's
//! unsynced tail may outlive its value in a power cut; the journal check before recovery
//! ends the journal before the first such record (`fjall_engine::recovery`).
//!
//! This module knows files only: segments, appenders, reads, syncs and per-segment figures.
//! Which records are live is the index's to say (`fjall_engine::gc`).

pub mod format;

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;

pub use format::Pointer;
use format::{RecordHead, SEGMENT_HEADER_LEN};

use crate::{Error, Result};

/// The folder of the value log, inside the store's.
pub const FOLDER: &str = "values";
/// The file naming the fjall keyspace whose records hold the log's pointers.
const INDEX_KEYSPACE_FILE: &str = "index-keyspace";
/// An appender's write buffer: small records are gathered, large ones go straight through.
const APPEND_BUFFER_BYTES: usize = 256 * 1024;
/// Most segment files kept open for reads at once.
const OPEN_FILES_MAX: usize = 256;
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

/// What the log knows of one segment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SegmentFigures {
    /// Bytes in the file (its header and every record appended, live or not).
    pub bytes: u64,
    /// Bytes of records the index points to: exact from a census on, then kept by the writer
    /// (an estimate: a forced small put over a logged value is not seen until the next census).
    pub live: u64,
    /// Whether `live` comes from a census (or the segment was written since the log opened).
    pub censused: bool,
    /// Damage was found in it: it is not collected (its values answer PERM_DATA_ERROR).
    pub damaged: bool,
}

/// The log's figures, for GETLOG.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogFigures {
    pub segments: u64,
    pub disk_bytes: u64,
    pub live_bytes: u64,
    /// Bytes garbage collection has copied, and segments it has deleted, since open.
    pub gc_bytes_copied: u64,
    pub gc_segments_deleted: u64,
}

/// An open segment being appended to (the writer's, or garbage collection's).
pub struct Appender {
    id: u32,
    file: BufWriter<File>,
    /// A second handle on the file, for syncs from other threads.
    sync_handle: Arc<File>,
    /// Where the next record goes (records in the buffer included).
    len: u64,
    /// Where the file ended at the last successful [`ValueLog::flush`]: a failed write or
    /// flush takes the file back here, dropping every record appended since.
    flushed: u64,
    /// Where the last range the disk was asked to start writing ended (`WRITE_BEHIND_BYTES`).
    behind: u64,
    /// The log's erase count when this appender was made (see [`ValueLog::erases`]).
    epoch: u64,
    /// Its file could not be taken back after a failure: the next append starts a new one.
    broken: bool,
}

impl Appender {
    pub fn id(&self) -> u32 {
        self.id
    }
}

/// Segments with bytes handed to the OS and not yet synced, and whether the folder has new
/// entries not yet synced.
#[derive(Default)]
struct Dirty {
    files: HashMap<u32, Handed>,
    folder: bool,
}

/// A segment with bytes handed to the OS: a handle to sync it with, how far it reaches, and
/// whether it is sealed (nothing more will be appended: none of it needs to stay cached).
struct Handed {
    file: Arc<File>,
    upto: u64,
    sealed: bool,
}

pub struct ValueLog {
    dir: PathBuf,
    segment_max: u64,
    /// Synced bytes of a segment kept in the page cache, newest first (`CACHED_TAIL_BYTES`).
    cached_tail: u64,
    /// The writer's appender.
    pub(crate) active: Mutex<Option<Appender>>,
    figures: Mutex<BTreeMap<u32, SegmentFigures>>,
    open_files: Mutex<HashMap<u32, Arc<File>>>,
    dirty: Mutex<Dirty>,
    /// Where each segment's pages may still be cached from (`CACHED_TAIL_BYTES`).
    cached_from: Mutex<HashMap<u32, u64>>,
    /// Held through a whole sync: a second sync must not return while the first is still
    /// making durable what it took from `dirty`. Holds the first sync failure, if one failed:
    /// every later sync fails with it (see `sync`).
    syncing: Mutex<Option<String>>,
    /// Readers hold it shared from the index snapshot that gave them a pointer until they have
    /// read the value; a segment is deleted under it held exclusively. A collected segment's
    /// records already point elsewhere, so only a reader whose snapshot is older than that
    /// move can still hold a pointer into it, and the deletion waits for it.
    gate: parking_lot::RwLock<()>,
    next_id: std::sync::atomic::AtomicU32,
    erases: std::sync::atomic::AtomicU64,
    gc_bytes_copied: std::sync::atomic::AtomicU64,
    gc_segments_deleted: std::sync::atomic::AtomicU64,
}

/// Advice to the kernel about a range of a segment's pages; where the system has no such
/// call, or it fails, nothing changes but speed.
#[derive(Clone, Copy)]
enum Pages {
    /// Start writing them to the disk, without waiting: the next sync then waits only for
    /// what is still in flight.
    StartWriting,
    /// Drop them from the page cache (those still dirty or being written stay).
    Drop,
}

fn advise(file: &File, offset: u64, len: u64, advice: Pages) {
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
            }
        };
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (file, offset, len, advice);
}

fn segment_name(id: u32) -> String {
    format!("{id:08}.vlog")
}

fn segment_id(path: &Path) -> Option<u32> {
    path.file_name()?.to_str()?.strip_suffix(".vlog")?.parse().ok()
}

impl ValueLog {
    /// Opens the log in `dir` (created, durably, if missing), with segments of up to
    /// `segment_max` bytes, keeping the newest `cached_tail` synced bytes of each in the page
    /// cache. Segments found are sealed; their live bytes are unknown until a census.
    pub fn open(dir: &Path, segment_max: u64, cached_tail: u64) -> Result<ValueLog> {
        crate::dirsync::create_dir_all(dir)?;
        let mut figures = BTreeMap::new();
        for dirent in std::fs::read_dir(dir)? {
            let path = dirent?.path();
            let Some(id) = segment_id(&path) else { continue };
            let bytes = std::fs::metadata(&path)?.len();
            figures.insert(id, SegmentFigures { bytes, live: bytes, censused: false, damaged: false });
        }
        let next = figures.keys().next_back().map_or(1, |id| id + 1);
        Ok(ValueLog {
            cached_tail,
            dir: dir.to_path_buf(),
            segment_max: segment_max.max(SEGMENT_HEADER_LEN + 1),
            active: Mutex::new(None),
            figures: Mutex::new(figures),
            open_files: Mutex::new(HashMap::new()),
            dirty: Mutex::new(Dirty::default()),
            cached_from: Mutex::new(HashMap::new()),
            syncing: Mutex::new(None),
            gate: parking_lot::RwLock::new(()),
            next_id: std::sync::atomic::AtomicU32::new(next),
            erases: std::sync::atomic::AtomicU64::new(0),
            gc_bytes_copied: std::sync::atomic::AtomicU64::new(0),
            gc_segments_deleted: std::sync::atomic::AtomicU64::new(0),
        })
    }

    fn path(&self, id: u32) -> PathBuf {
        self.dir.join(segment_name(id))
    }

    /// The id of the fjall keyspace holding the pointers, as recorded by
    /// [`Self::record_index_keyspace`]; `None` for a log no pointer was ever written for.
    pub fn index_keyspace(&self) -> Result<Option<u64>> {
        match std::fs::read_to_string(self.dir.join(INDEX_KEYSPACE_FILE)) {
            Ok(text) => text.trim().parse().map(Some).map_err(|_| Error::corrupt(format!("{INDEX_KEYSPACE_FILE}: not a keyspace id"))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Records, durably and before any value is appended, which keyspace holds the pointers.
    pub fn record_index_keyspace(&self, id: u64) -> Result<()> {
        if self.index_keyspace()? != Some(id) {
            crate::dirsync::write_atomically(&self.dir.join(INDEX_KEYSPACE_FILE), format!("{id}\n").as_bytes(), 0o644)?;
        }
        Ok(())
    }

    /// A new segment to append to: created with its header, its folder entry synced with the
    /// log's next sync (before any pointer to it can be durable).
    pub fn new_appender(&self) -> Result<Appender> {
        let id = self.next_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = self.path(id);
        let mut file = std::fs::OpenOptions::new().create_new(true).read(true).append(true).open(&path)?;
        if let Err(e) = file.write_all(&format::segment_header(id)).and_then(|()| file.try_clone()) {
            // A full disk must not leave a file per refused put behind.
            drop(file);
            let _ = std::fs::remove_file(&path);
            return Err(e.into());
        }
        let sync_handle = Arc::new(file.try_clone()?);
        {
            let mut dirty = self.dirty.lock();
            dirty.folder = true;
            dirty.files.insert(id, Handed { file: sync_handle.clone(), upto: SEGMENT_HEADER_LEN, sealed: false });
        }
        self.figures.lock().insert(id, SegmentFigures { bytes: SEGMENT_HEADER_LEN, live: 0, censused: true, damaged: false });
        Ok(Appender {
            id,
            file: BufWriter::with_capacity(APPEND_BUFFER_BYTES, file),
            sync_handle,
            len: SEGMENT_HEADER_LEN,
            flushed: SEGMENT_HEADER_LEN,
            behind: 0,
            epoch: self.erases(),
            broken: false,
        })
    }

    /// Appends a record to `appender`'s segment, or to a new one when it is full (the full one
    /// handed to the OS first). The record may sit in the appender's buffer until
    /// [`Self::flush`]. On a failure every record appended since the last flush is dropped
    /// from the file and from the figures: a caller flushes after each request, so those are
    /// the failing request's own.
    pub fn append(&self, appender: &mut Option<Appender>, key: &[u8], value: &[u8], value_crc: u32) -> Result<Pointer> {
        let value_len = u32::try_from(value.len()).map_err(|_| Error::Invalid("a value over 4 GiB".into()))?;
        let len = format::record_len(key.len(), value_len);
        if let Some(app) = appender.as_mut() {
            let full = app.len > SEGMENT_HEADER_LEN && app.len + len > self.segment_max;
            // A segment an erase deleted, or one that could not be taken back, is dropped.
            if app.broken || self.is_stale(app) {
                *appender = None;
            } else if full {
                self.seal(app)?;
                *appender = None;
            }
        }
        let app = match appender {
            Some(app) => app,
            None => appender.insert(self.new_appender()?),
        };
        let pointer = Pointer { segment: app.id, offset: app.len };
        let head = format::record_head(key, value_len, value_crc);
        if let Err(e) = app.file.write_all(&head).and_then(|()| app.file.write_all(value)) {
            self.rewind(app);
            return Err(e.into());
        }
        app.len += len;
        self.account_bytes(app.id, len, len);
        Ok(pointer)
    }

    /// Drops what `appender` took since its last flush: a request that failed after appending
    /// (its records must not reach the file with a later request's flush).
    pub fn abandon(&self, appender: &mut Appender) {
        if appender.len != appender.flushed {
            self.rewind(appender);
        }
    }

    /// Takes `appender`'s file back to where it ended at the last flush, dropping the buffer
    /// and the records appended since (from the figures too).
    fn rewind(&self, appender: &mut Appender) {
        let dropped = appender.len - appender.flushed;
        if let Some(f) = self.figures.lock().get_mut(&appender.id) {
            f.bytes -= dropped.min(f.bytes);
            f.live -= dropped.min(f.live);
        }
        appender.len = appender.flushed;
        let rewound = appender.file.get_ref().try_clone().and_then(|file| {
            let failed = std::mem::replace(&mut appender.file, BufWriter::with_capacity(APPEND_BUFFER_BYTES, file));
            let (file, _discarded) = failed.into_parts();
            file.set_len(appender.flushed)
        });
        if let Err(e) = rewound {
            tracing::warn!("value log segment {}: could not drop a failed write ({e}); starting another", appender.id);
            appender.broken = true;
        }
    }

    fn account_bytes(&self, id: u32, bytes: u64, live: u64) {
        if let Some(f) = self.figures.lock().get_mut(&id) {
            f.bytes += bytes;
            f.live += live;
        }
    }

    /// Hands what `appender` buffers to the OS and marks its segment for the next sync. The
    /// writer calls it before committing pointers to the journal.
    pub fn flush(&self, appender: &mut Appender) -> Result<()> {
        if let Err(e) = appender.file.flush() {
            self.rewind(appender);
            return Err(e.into());
        }
        appender.flushed = appender.len;
        let handed = Handed { file: appender.sync_handle.clone(), upto: appender.flushed, sealed: false };
        self.dirty.lock().files.entry(appender.id).and_modify(|h| h.upto = h.upto.max(handed.upto)).or_insert(handed);
        if appender.flushed.saturating_sub(appender.behind) >= WRITE_BEHIND_BYTES {
            advise(&appender.sync_handle, appender.behind, appender.flushed - appender.behind, Pages::StartWriting);
            appender.behind = appender.flushed;
        }
        Ok(())
    }

    /// Hands the last of a segment to the OS: after its next sync, none of it stays cached.
    fn seal(&self, appender: &mut Appender) -> Result<()> {
        self.flush(appender)?;
        if let Some(handed) = self.dirty.lock().files.get_mut(&appender.id) {
            handed.sealed = true;
        }
        Ok(())
    }

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

    /// Opens segment `id` for reading; `None` if it is gone.
    fn open_segment(&self, id: u32) -> Result<Option<File>> {
        match File::open(self.path(id)) {
            Ok(f) => Ok(Some(f)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// A read handle on segment `id`, or `None` if it is gone (collected since the pointer
    /// was read).
    fn file(&self, id: u32) -> Result<Option<Arc<File>>> {
        if let Some(file) = self.open_files.lock().get(&id) {
            return Ok(Some(file.clone()));
        }
        let Some(file) = self.open_segment(id)? else { return Ok(None) };
        let file = Arc::new(file);
        let mut open = self.open_files.lock();
        if open.len() >= OPEN_FILES_MAX {
            open.clear();
        }
        open.insert(id, file.clone());
        Ok(Some(file))
    }

    /// Reads the value of the record at `pointer` under a key of `key_len` bytes and checks it
    /// against the length and CRC-32C its metadata gives: `None` if the segment is gone (the
    /// value moved: read the key again), Corrupt if the bytes are not the value written.
    pub fn read(&self, pointer: Pointer, key_len: usize, value_len: u32, value_crc: u32) -> Result<Option<Bytes>> {
        let Some(file) = self.file(pointer.segment)? else { return Ok(None) };
        let value = match read_fresh_at(&file, value_len as usize, format::value_offset(pointer, key_len)) {
            Ok(v) => v,
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                return Err(Error::corrupt(format!("value log segment {} ends inside a value at {}", pointer.segment, pointer.offset)))
            }
            Err(e) => return Err(e.into()),
        };
        if crc32c::crc32c(&value) != value_crc {
            return Err(Error::corrupt(format!("value log segment {}: the value at {} fails its checksum", pointer.segment, pointer.offset)));
        }
        Ok(Some(value.into()))
    }

    /// Whether the record at `pointer` is there whole, under `key`, with a value of this
    /// length and CRC-32C: what recovery asks of a pointer the journal had not made durable.
    /// An error when the log cannot be read, which says nothing either way.
    pub fn holds(&self, pointer: Pointer, key: &[u8], value_len: u32, value_crc: u32) -> Result<bool> {
        let Some(file) = self.file(pointer.segment)? else { return Ok(false) };
        let mut head = vec![0u8; format::RECORD_HEAD_LEN + key.len()];
        match file.read_exact_at(&mut head, pointer.offset) {
            Ok(()) => {}
            // The file ends before the record: a crash lost its bytes.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(false),
            // Anything else is the disk failing to read, which says nothing of the bytes.
            Err(e) => return Err(e.into()),
        }
        let Some((crc, found)) = format::decode_head(&head) else { return Ok(false) };
        let expected = RecordHead { key_len: key.len(), value_len, value_crc };
        if found != expected || !format::head_checks(crc, &found, key) || head[format::RECORD_HEAD_LEN..] != *key {
            return Ok(false);
        }
        match self.read(pointer, key.len(), value_len, value_crc) {
            Ok(Some(_)) => Ok(true),
            Ok(None) | Err(Error::Corrupt { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Counts a record no longer pointed to as garbage in its segment's figures.
    pub fn garbage(&self, pointer: Pointer, record_len: u64) {
        if let Some(f) = self.figures.lock().get_mut(&pointer.segment) {
            f.live = f.live.saturating_sub(record_len);
        }
    }

    /// A record garbage collection moved away from `from` (its copy was counted live when
    /// appended).
    pub fn relocated(&self, from: Pointer, record_len: u64) {
        self.garbage(from, record_len);
        self.gc_bytes_copied.fetch_add(record_len, std::sync::atomic::Ordering::Relaxed);
    }

    /// The segments appenders write to now, never collected or censused.
    fn appending(&self) -> Vec<u32> {
        self.active.lock().as_ref().map(Appender::id).into_iter().collect()
    }

    /// Sets a segment's live bytes from a census.
    pub fn set_census(&self, id: u32, live: u64, damaged: bool) {
        if let Some(f) = self.figures.lock().get_mut(&id) {
            f.live = live.min(f.bytes);
            f.censused = true;
            f.damaged |= damaged;
        }
    }

    /// Forgets every segment's live bytes, so that each is censused again (MEDIAOPTIMIZE: the
    /// garbage forced small puts leave is found only so).
    pub fn forget_census(&self) {
        for f in self.figures.lock().values_mut() {
            f.censused = false;
        }
    }

    /// A sealed segment never censused, if there is one.
    pub fn uncensused(&self, skip: &[u32]) -> Option<u32> {
        let appending = self.appending();
        self.figures.lock().iter().find(|(id, f)| !f.censused && !appending.contains(id) && !skip.contains(id)).map(|(id, _)| *id)
    }

    /// Sealed, undamaged segments whose garbage is at least `ratio` of their bytes (with any
    /// garbage at all when `ratio` is 0), most garbage first.
    pub fn victims(&self, ratio: f64, skip: &[u32]) -> Vec<u32> {
        let appending = self.appending();
        let figures = self.figures.lock();
        let mut found: Vec<(u64, u32)> = figures
            .iter()
            .filter(|(id, f)| f.censused && !f.damaged && !appending.contains(id) && !skip.contains(id))
            .filter_map(|(id, f)| {
                // The header is no garbage; a segment nothing lives in goes whatever its size.
                let garbage = f.bytes.saturating_sub(f.live + SEGMENT_HEADER_LEN);
                let enough = f.live == 0 || if ratio <= 0.0 { garbage > 0 } else { garbage as f64 >= ratio * f.bytes as f64 };
                enough.then_some((garbage, *id))
            })
            .collect();
        found.sort_unstable_by(|a, b| b.cmp(a));
        found.into_iter().map(|(_, id)| id).collect()
    }

    /// Deletes a collected segment (nothing points to it any more, durably).
    /// Held by a reader from taking the index snapshot that names a pointer until the value is
    /// read (`gate`): no segment is deleted meanwhile.
    pub fn reading(&self) -> parking_lot::RwLockReadGuard<'_, ()> {
        self.gate.read()
    }

    pub fn remove(&self, id: u32) -> Result<()> {
        // Readers whose snapshot still names this segment finish first.
        let _quiet = self.gate.write();
        self.open_files.lock().remove(&id);
        self.dirty.lock().files.remove(&id);
        self.cached_from.lock().remove(&id);
        self.figures.lock().remove(&id);
        match std::fs::remove_file(self.path(id)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
        self.gc_segments_deleted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Seals the writer's segment: the next append starts a new one, so that this one can be
    /// collected.
    pub fn seal_active(&self) -> Result<()> {
        if let Some(mut app) = self.active.lock().take() {
            self.seal(&mut app)?;
        }
        Ok(())
    }

    /// Deletes every segment (an erase, once the cleared index is durable). Appenders made
    /// before it start new segments at their next append.
    pub fn remove_all(&self) -> Result<()> {
        let _quiet = self.gate.write();
        self.erases.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.active.lock().take();
        self.figures.lock().clear();
        self.open_files.lock().clear();
        self.dirty.lock().files.clear();
        self.cached_from.lock().clear();
        // Every segment on disk, those a collector created since the figures were read too.
        for dirent in std::fs::read_dir(&self.dir)? {
            let path = dirent?.path();
            if segment_id(&path).is_some() {
                std::fs::remove_file(&path)?;
            }
        }
        crate::dirsync::sync_dir(&self.dir)?;
        Ok(())
    }

    /// How many erases the log has seen: an appender or a collection begun before one is stale.
    pub fn erases(&self) -> u64 {
        self.erases.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Whether `appender` was made before the last erase.
    pub fn is_stale(&self, appender: &Appender) -> bool {
        appender.epoch != self.erases()
    }

    /// One segment's figures.
    pub fn segment(&self, id: u32) -> Option<SegmentFigures> {
        self.figures.lock().get(&id).cloned()
    }

    /// Bytes the log occupies on disk.
    pub fn disk_bytes(&self) -> u64 {
        self.figures.lock().values().map(|f| f.bytes).sum()
    }

    pub fn figures(&self) -> LogFigures {
        let figures = self.figures.lock();
        LogFigures {
            segments: figures.len() as u64,
            disk_bytes: figures.values().map(|f| f.bytes).sum(),
            live_bytes: figures.values().map(|f| f.live).sum(),
            gc_bytes_copied: self.gc_bytes_copied.load(std::sync::atomic::Ordering::Relaxed),
            gc_segments_deleted: self.gc_segments_deleted.load(std::sync::atomic::Ordering::Relaxed),
        }
    }

    /// Reads segment `id` record by record, for a census or a collection.
    pub fn scan(&self, id: u32) -> Result<Option<SegmentScan>> {
        let Some(file) = self.open_segment(id)? else { return Ok(None) };
        let len = file.metadata()?.len();
        let mut reader = std::io::BufReader::with_capacity(1 << 20, file);
        let mut header = [0u8; SEGMENT_HEADER_LEN as usize];
        let header_ok = reader.read_exact(&mut header).is_ok() && format::is_segment_header(&header, id);
        Ok(Some(SegmentScan { reader, at: SEGMENT_HEADER_LEN, len, damaged: !header_ok && len > 0, done: !header_ok }))
    }
}

/// A segment read from the start, one record at a time. It stops at the first record that
/// does not read whole: the end of the file, or damage ([`SegmentScan::damaged`]).
pub struct SegmentScan {
    reader: std::io::BufReader<File>,
    at: u64,
    len: u64,
    /// The scan stopped at bytes that are not an intact record, before the end of the file.
    pub damaged: bool,
    done: bool,
}

/// One record found by a scan: where, its key, its header; its value is read or skipped next.
pub struct ScannedRecord {
    pub offset: u64,
    pub key: Bytes,
    pub head: RecordHead,
}

impl SegmentScan {
    /// The next record's header and key, or `None` at the end (or damage). The caller then
    /// reads its value with [`Self::value`] or passes it with [`Self::skip`].
    pub fn next_record(&mut self) -> Result<Option<ScannedRecord>> {
        if self.done || self.at >= self.len {
            return Ok(None);
        }
        let mut fixed = [0u8; format::RECORD_HEAD_LEN];
        let stop = |scan: &mut Self| {
            scan.done = true;
            scan.damaged = true;
            Ok(None)
        };
        if self.reader.read_exact(&mut fixed).is_err() {
            return stop(self);
        }
        let Some((crc, head)) = format::decode_head(&fixed) else { return stop(self) };
        let mut key = vec![0u8; head.key_len];
        if self.reader.read_exact(&mut key).is_err() || !format::head_checks(crc, &head, &key) {
            return stop(self);
        }
        if self.at + head.record_len() > self.len {
            return stop(self);
        }
        let offset = self.at;
        self.at += head.record_len();
        Ok(Some(ScannedRecord { offset, key: key.into(), head }))
    }

    /// The value of the record [`Self::next_record`] returned, checked against its CRC.
    pub fn value(&mut self, record: &ScannedRecord) -> Result<Option<Bytes>> {
        let len = record.head.value_len as usize;
        // Read into capacity std fills without zeroing it first (as `read_fresh_at` below).
        let mut value = Vec::with_capacity(len);
        (&mut self.reader).take(len as u64).read_to_end(&mut value)?;
        if value.len() != len {
            return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into());
        }
        if crc32c::crc32c(&value) != record.head.value_crc {
            self.done = true;
            self.damaged = true;
            return Ok(None);
        }
        Ok(Some(value.into()))
    }

    /// Passes over the value of the record [`Self::next_record`] returned.
    pub fn skip(&mut self, record: &ScannedRecord) -> Result<()> {
        self.reader.seek_relative(i64::from(record.head.value_len))?;
        Ok(())
    }
}

/// `len` bytes of `file` at `offset`, read into a buffer the kernel fills without its being
/// zeroed first: serving 1 MiB values, zeroing each fresh buffer (`vec![0; len]`) cost about a
/// quarter of a drive's CPU. `UnexpectedEof` if the file ends before `len` bytes.
fn read_fresh_at(file: &File, len: usize, offset: u64) -> std::io::Result<Vec<u8>> {
    let mut buf = Vec::with_capacity(len);
    while buf.len() < len {
        let at = offset + buf.len() as u64;
        match rustix::io::pread(file, rustix::buffer::spare_capacity(&mut buf), at) {
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    // The allocator may have given more capacity than asked, and the read filled it.
    buf.truncate(len);
    Ok(buf)
}
