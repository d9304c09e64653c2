//! The value log: large values written once, appended to segment files beside the LSM tree,
//! which holds only a pointer to each (WiscKey's key-value separation, with Badger's and
//! Titan's segmented log and garbage collection; docs/design/storage.md says why).
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
//!
//! One file per idea: `format` the bytes on disk, `append` the appenders, `sync` the syncs and
//! the page cache, `read` reads of a value, `scan` segments read record by record, `figures`
//! the per-segment figures, `remove` segment deletion.

mod direct;
pub mod format;
mod append;
mod figures;
mod read;
mod remove;
mod scan;
mod sync;

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

pub use append::Appender;
pub use figures::{LogFigures, SegmentFigures};
pub use format::Pointer;
use format::SEGMENT_HEADER_LEN;
pub use scan::{Reading, ScannedRecord, SegmentScan};
use sync::Dirty;
pub use sync::{CACHED_TAIL_BYTES, WRITE_BEHIND_BYTES};

use crate::{Error, Result};

/// The folder of the value log, inside the store's.
pub const FOLDER: &str = "values";
/// The file naming the fjall keyspace whose records hold the log's pointers.
const INDEX_KEYSPACE_FILE: &str = "index-keyspace";

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
    /// Segments below this id were found at open: the page cache is not counted on to hold
    /// them (0 when every segment is kept cached).
    found_below: u32,
    direct: direct::DirectFiles,
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
            found_below: if cached_tail < segment_max { next } else { 0 },
            direct: direct::DirectFiles::default(),
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
}
