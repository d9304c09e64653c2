//! The on-disk engine on fjall (an LSM tree).
//!
//! Two keyspaces, written together in one atomic batch per operation:
//! - `meta`: key -> metadata record (version, tag, algorithm, value length and CRC). Small, so
//!   metadata-only reads and key ranges never touch values.
//! - `data`: key -> value, with key-value separation: values over the threshold live in blob
//!   files and compaction moves only pointers, so a 1 MiB value is written once (plus the
//!   journal) instead of once per LSM level.
//!
//! Writes to one key are serialised by a striped lock held across read-check-write, which is
//! what makes a versioned put a real compare-and-swap.

use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use fjall::{Database, Keyspace, KeyspaceCreateOptions, KvSeparationOptions, PersistMode, Readable};
use parking_lot::Mutex;

use crate::group_commit::{DurableCallback, GroupCommit};
use crate::{record, Check, Engine, Entry, Error, KeyRange, Meta, Result};

/// Number of write locks; keys hash onto them.
const WRITE_STRIPES: usize = 1024;

/// Tunables of the on-disk engine.
#[derive(Debug, Clone)]
pub struct FjallOptions {
    pub path: PathBuf,
    /// Block cache size in bytes.
    pub cache_size: u64,
    /// Values at least this large go to blob files.
    pub blob_threshold: u32,
}

impl FjallOptions {
    pub fn new(path: impl AsRef<Path>) -> Self {
        FjallOptions { path: path.as_ref().to_path_buf(), cache_size: 64 * 1024 * 1024, blob_threshold: 4096 }
    }
}

pub struct FjallEngine {
    path: PathBuf,
    db: Database,
    meta: Keyspace,
    data: Keyspace,
    stripes: Box<[Mutex<()>]>,
    group_commit: GroupCommit,
}

impl FjallEngine {
    pub fn open(options: FjallOptions) -> Result<Arc<Self>> {
        std::fs::create_dir_all(&options.path)?;
        let db = Database::builder(&options.path).cache_size(options.cache_size).open()?;
        let meta = db.keyspace("meta", KeyspaceCreateOptions::default)?;
        let threshold = options.blob_threshold;
        let data = db.keyspace("data", move || {
            KeyspaceCreateOptions::default()
                .with_kv_separation(Some(KvSeparationOptions::default().separation_threshold(threshold)))
        })?;
        let syncing_db = db.clone();
        let group_commit = GroupCommit::start(
            "spindle-sync",
            Box::new(move || syncing_db.persist(PersistMode::SyncData).map_err(Error::from)),
        )?;
        let stripes = (0..WRITE_STRIPES).map(|_| Mutex::new(())).collect();
        Ok(Arc::new(FjallEngine { path: options.path, db, meta, data, stripes, group_commit }))
    }

    fn stripe(&self, key: &[u8]) -> &Mutex<()> {
        let hash = BuildHasherDefault::<DefaultHasher>::default().hash_one(key);
        &self.stripes[(hash as usize) % WRITE_STRIPES]
    }

    fn stored_meta(&self, key: &[u8]) -> Result<Option<Meta>> {
        self.meta.get(key)?.map(|raw| record::decode(raw.into())).transpose()
    }

    /// Reads the entry for a metadata record already found in `snapshot`.
    fn entry_at(&self, snapshot: &fjall::Snapshot, key: Bytes, raw_meta: Bytes) -> Result<Entry> {
        let meta = record::decode(raw_meta)?;
        let value: Bytes = if meta.value_len == 0 {
            Bytes::new()
        } else {
            snapshot
                .get(&self.data, &key)?
                .ok_or_else(|| Error::Corrupt(format!("value missing for key of {} bytes", key.len())))?
                .into()
        };
        if value.len() != meta.value_len as usize {
            return Err(Error::Corrupt(format!("value is {} bytes, metadata says {}", value.len(), meta.value_len)));
        }
        Ok(Entry { key, meta, value })
    }

    fn neighbour(&self, key: &[u8], forward: bool) -> Result<Option<Entry>> {
        let snapshot = self.db.snapshot();
        let found = if forward {
            snapshot.range::<&[u8], _>(&self.meta, (Bound::Excluded(key), Bound::Unbounded)).next()
        } else {
            snapshot.range::<&[u8], _>(&self.meta, (Bound::Unbounded, Bound::Excluded(key))).next_back()
        };
        match found {
            None => Ok(None),
            Some(guard) => {
                let (k, v) = guard.into_inner()?;
                self.entry_at(&snapshot, k.into(), v.into()).map(Some)
            }
        }
    }
}

impl Engine for FjallEngine {
    fn get(&self, key: &[u8]) -> Result<Option<Entry>> {
        let snapshot = self.db.snapshot();
        match snapshot.get(&self.meta, key)? {
            None => Ok(None),
            Some(raw) => self.entry_at(&snapshot, Bytes::copy_from_slice(key), raw.into()).map(Some),
        }
    }

    fn get_meta(&self, key: &[u8]) -> Result<Option<Meta>> {
        self.stored_meta(key)
    }

    fn next(&self, key: &[u8]) -> Result<Option<Entry>> {
        self.neighbour(key, true)
    }

    fn previous(&self, key: &[u8]) -> Result<Option<Entry>> {
        self.neighbour(key, false)
    }

    fn keys(&self, range: &KeyRange) -> Result<Vec<Bytes>> {
        if range.is_empty() || range.max == 0 {
            return Ok(Vec::new());
        }
        let iter = self.meta.range::<&[u8], _>(range.bounds());
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

    fn put(&self, key: &[u8], value: Bytes, mut meta: Meta, check: Check) -> Result<()> {
        meta.value_len = u32::try_from(value.len()).map_err(|_| Error::Io("value over 4 GiB".into()))?;
        meta.value_crc = crc32c::crc32c(&value);
        let record = record::encode(&meta)?;

        let _guard = self.stripe(key).lock();
        let stored = self.stored_meta(key)?;
        if !check.passes(stored.as_ref().map(|m| &m.version[..])) {
            return Err(Error::VersionMismatch);
        }
        let mut batch = self.db.batch();
        batch.insert(&self.meta, key, record);
        if !value.is_empty() {
            batch.insert(&self.data, key, value);
        } else if stored.is_some_and(|m| m.value_len > 0) {
            batch.remove(&self.data, key);
        }
        batch.commit()?;
        Ok(())
    }

    fn delete(&self, key: &[u8], check: Check) -> Result<()> {
        let _guard = self.stripe(key).lock();
        let stored = match self.stored_meta(key)? {
            Some(m) => m,
            None if check == Check::Force => return Ok(()),
            None => return Err(Error::NotFound),
        };
        if !check.passes(Some(&stored.version)) {
            return Err(Error::VersionMismatch);
        }
        let mut batch = self.db.batch();
        batch.remove(&self.meta, key);
        if stored.value_len > 0 {
            batch.remove(&self.data, key);
        }
        batch.commit()?;
        Ok(())
    }

    fn when_durable(&self, done: DurableCallback) {
        self.group_commit.register(done);
    }

    fn compact(&self) -> Result<()> {
        self.meta.major_compact()?;
        self.data.major_compact()?;
        Ok(())
    }

    fn disk_usage(&self) -> u64 {
        // Blocks actually allocated, not apparent sizes: the journal is created sparse at its
        // full size, and counting that would call an empty drive 64 MiB full.
        allocated_bytes(&self.path)
    }

    fn approximate_len(&self) -> u64 {
        self.meta.approximate_len() as u64
    }
}

/// Bytes allocated on disk under `dir` (like `du`), following no symlinks.
fn allocated_bytes(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => allocated_bytes(&e.path()),
            Ok(m) => m.blocks() * 512,
            Err(_) => 0,
        })
        .sum()
}
