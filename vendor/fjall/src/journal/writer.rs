// Copyright (c) 2024-present, fjall-rs
// This source code is licensed under both the Apache 2.0 and MIT License
// (found in the LICENSE-* files in the repository)

use super::entry::{serialize_marker_item, Entry};
use crate::{
    batch::item::Item as BatchItem, file::fsync_directory, journal::recovery::JournalId,
    keyspace::InternalKeyspaceId,
};
use lsm_tree::{CompressionType, SeqNo, ValueType};
use std::{
    fs::{File, OpenOptions},
    hash::Hasher,
    io::{BufWriter, Seek, Write},
    path::{Path, PathBuf},
};

// TODO: this should be a database configuration
pub const PRE_ALLOCATED_BYTES: u64 = 64 * 1_024 * 1_024;

/// The journal's write buffer unless the database is configured otherwise
/// (`Config::journal_buffer_size`).
pub const JOURNAL_BUFFER_BYTES: usize = 8 * 1_024;

/// Spindle: what the database runs before it makes the journal durable
/// (`Config::before_journal_sync`). A failure stops that sync as the sync's own would.
pub type JournalSyncHook = std::sync::Arc<dyn Fn() -> std::io::Result<()> + Send + Sync>;

pub struct Writer {
    pub(crate) path: PathBuf,
    file: BufWriter<File>,
    buf: Vec<u8>,
    is_buffer_dirty: bool,

    compression: CompressionType,
    compression_threshold: usize,

    /// Capacity of `file`'s buffer (`set_buffer_size`).
    buffer_size: usize,

    /// Spindle: the offset just past the last sync claim queued (`audit`), so a sync with
    /// nothing new written queues none.
    claimed: u64,

    /// Spindle: run before every sync of this journal (`Config::before_journal_sync`).
    before_sync: Option<JournalSyncHook>,

    /// Spindle: the handle `Journal::persist` syncs through outside the journal lock, opened
    /// once per journal file (`flush_for_persist`).
    persist_handle: Option<std::sync::Arc<File>>,
}

/// The persist mode allows setting the durability guarantee of previous writes
#[derive(Copy, Clone, Debug, Eq, PartialEq)]
pub enum PersistMode {
    /// Flushes data to OS buffers. This allows the OS to write out data in case of an
    /// application crash.
    ///
    /// When this function returns, data is **not** guaranteed to be persisted in case
    /// of a power loss event or OS crash.
    Buffer,

    /// Flushes data using `fdatasync`.
    ///
    /// Use if you know that `fdatasync` is sufficient for your file system and/or operating system.
    SyncData,

    /// Flushes data + metadata using `fsync`.
    SyncAll,
}

impl Writer {
    /// Spindle: drops what the buffer holds of a write that failed (a full disk, say), so
    /// that no later flush (a worker's before a memtable flush, the one on drop) completes a
    /// batch on disk that its caller was told failed. Acknowledged batches are never in the
    /// buffer: every commit flushes it to the OS before it returns.
    fn discard_buffer(&mut self) {
        // A failed write may have left part of itself in the file: no later claim may call
        // it durable (see `write_sync_claim`). The database is stopped after such a failure,
        // and the next writer (after recovery cuts the part off) claims afresh.
        self.claimed = u64::MAX;
        match self.file.get_ref().try_clone() {
            Ok(file) => {
                let failed = std::mem::replace(&mut self.file, BufWriter::with_capacity(self.buffer_size, file));
                let (_file, _discarded) = failed.into_parts();
                self.is_buffer_dirty = false;
            }
            Err(e) => log::error!("Could not discard the journal buffer of a failed write: {e:?}"),
        }
    }

    /// Spindle: `result` of a write, with the buffer discarded if it failed.
    fn discarding_on_error<T, E>(&mut self, result: Result<T, E>) -> Result<T, E> {
        if result.is_err() {
            self.discard_buffer();
        }
        result
    }

    /// Spindle: what the buffer holds, not yet handed to the OS.
    #[cfg(test)]
    pub(crate) fn buffered(&self) -> &[u8] {
        self.file.buffer()
    }

    pub(crate) fn write_raw(
        &mut self,
        keyspace_id: InternalKeyspaceId,
        key: &[u8],
        value: &[u8],
        value_type: ValueType,
        seqno: u64,
    ) -> crate::Result<usize> {
        let result = self.write_raw_unguarded(keyspace_id, key, value, value_type, seqno);
        self.discarding_on_error(result)
    }

    pub(crate) fn write_clear(&mut self, keyspace_id: InternalKeyspaceId, seqno: SeqNo) -> crate::Result<usize> {
        let result = self.write_clear_unguarded(keyspace_id, seqno);
        self.discarding_on_error(result)
    }

    pub fn write_batch<'a>(
        &mut self,
        items: impl Iterator<Item = &'a BatchItem>,
        batch_size: usize,
        seqno: SeqNo,
    ) -> crate::Result<usize> {
        let result = self.write_batch_unguarded(items, batch_size, seqno);
        self.discarding_on_error(result)
    }

    pub(crate) fn persist(&mut self, mode: PersistMode) -> std::io::Result<()> {
        let result = self.persist_unguarded(mode);
        self.discarding_on_error(result)
    }

    /// Spindle: what a sync made outside the lock failed: the buffer is discarded and no
    /// later claim trusts what was written (as a failed `persist` does).
    pub(crate) fn failed_sync(&mut self, error: std::io::Error) -> std::io::Error {
        self.discard_buffer();
        error
    }

    pub fn set_compression(&mut self, comp: CompressionType, threshold: usize) {
        self.compression = comp;
        self.compression_threshold = threshold;
    }

    /// Sizes the write buffer: a batch reaches the OS in writes of up to `bytes` (it is still
    /// flushed at the end of every batch). Takes effect while nothing is buffered, as when a
    /// journal is opened; later rotations keep it.
    pub fn set_buffer_size(&mut self, bytes: usize) -> std::io::Result<()> {
        if self.file.buffer().is_empty() {
            let file = self.file.get_ref().try_clone()?;
            let old = std::mem::replace(&mut self.file, BufWriter::with_capacity(bytes, file));
            drop(old.into_parts());
        }
        self.buffer_size = bytes;
        Ok(())
    }

    /// Spindle: sets what runs before every sync of this journal; rotations keep it.
    pub fn set_before_sync(&mut self, hook: Option<JournalSyncHook>) {
        self.before_sync = hook;
    }

    /// Spindle: runs the hook set by [`Self::set_before_sync`], if any.
    pub(crate) fn run_before_sync(&self) -> std::io::Result<()> {
        self.before_sync.as_ref().map_or(Ok(()), |hook| hook())
    }

    /// Spindle: the hook, for a caller that syncs through [`Self::flush_for_sync`]'s handle
    /// after releasing the journal lock and must run it first.
    pub(crate) fn before_sync_hook(&self) -> Option<JournalSyncHook> {
        self.before_sync.clone()
    }

    pub fn pos(&mut self) -> crate::Result<u64> {
        self.file.stream_position().map_err(Into::into)
    }

    pub fn len(&self) -> crate::Result<u64> {
        Ok(self.file.get_ref().metadata()?.len())
    }

    pub fn rotate(&mut self) -> crate::Result<(PathBuf, PathBuf)> {
        self.persist(PersistMode::SyncAll)?;

        log::debug!(
            "Sealing active journal at {}, len={}B",
            self.path.display(),
            self.path
                .metadata()
                .inspect_err(|e| {
                    log::error!(
                        "Failed to get file metadata of journal file at {}: {e:?}",
                        self.path.display()
                    );
                })?
                .len(),
        );

        let prev_path = self.path.clone();
        // Spindle: the next journal's name comes from `next_path`, shared with `rotate_into`.
        let new_path = self.next_path()?;
        let folder = new_path.parent().expect("should have parent").to_path_buf();
        log::debug!("Rotating active journal to {}", new_path.display());

        let comp = self.compression;
        let compt = self.compression_threshold;
        let buffer_size = self.buffer_size;
        let before_sync = self.before_sync.take();
        *self = Self::create_new(new_path.clone())?;
        self.set_compression(comp, compt);
        self.set_buffer_size(buffer_size)?;
        self.before_sync = before_sync;

        // IMPORTANT: fsync folder on Unix
        fsync_directory(&folder)?;

        Ok((prev_path, new_path))
    }

    /// The compression settings a rotation must carry over to the next journal.
    #[cfg(test)]
    pub(crate) fn compression_settings(&self) -> (CompressionType, usize) {
        (self.compression, self.compression_threshold)
    }

    /// Spindle: the path the next rotation continues in (the active journal's id + 1).
    pub(crate) fn next_path(&self) -> crate::Result<PathBuf> {
        let folder = self.path.parent().expect("should have parent");
        let journal_id = self
            .path
            .file_name()
            .and_then(|name| name.to_str())
            .and_then(|name| name.strip_suffix(".jnl"))
            .and_then(|id| id.parse::<JournalId>().ok())
            .ok_or_else(|| {
                log::error!("Invalid journal file name: {}", self.path.display());
                crate::Error::JournalRecovery(crate::JournalRecoveryError::InvalidFileName)
            })?;
        Ok(folder.join(format!("{}.jnl", journal_id + 1)))
    }

    /// Spindle: seals the active journal and continues in `next`, which
    /// [`PreparedJournal::create`] made durable (file and directory entry) beforehand, outside
    /// the journal lock. Upstream's `rotate` does three fsyncs here, under the lock every write
    /// needs; this does one, of whatever was written since the caller last synced the active
    /// journal (the caller syncs the bulk of it outside the lock first). As in `rotate`, the
    /// sealed journal is durable before anything is written to the next one.
    pub(crate) fn rotate_into(&mut self, next: PreparedJournal) -> crate::Result<(PathBuf, PathBuf)> {
        let expected = self.next_path()?;
        if next.path != expected {
            log::error!(
                "Prepared journal {} does not follow the active journal {}",
                next.path.display(),
                self.path.display(),
            );
            return Err(crate::Error::JournalRecovery(
                crate::JournalRecoveryError::InvalidFileName,
            ));
        }

        self.persist(PersistMode::SyncAll)?;
        log::debug!(
            "Sealing active journal at {}, rotating to prepared {}",
            self.path.display(),
            next.path.display(),
        );

        let prev_path = self.path.clone();
        let new_path = next.path.clone();
        let (comp, compt) = (self.compression, self.compression_threshold);
        *self = Self {
            path: next.path,
            file: BufWriter::with_capacity(self.buffer_size, next.file),
            buf: Vec::new(),
            is_buffer_dirty: false,
            compression: comp,
            compression_threshold: compt,
            buffer_size: self.buffer_size,
            claimed: 0,
            before_sync: self.before_sync.take(),
            persist_handle: None,
        };
        Ok((prev_path, new_path))
    }

    pub fn create_new<P: Into<PathBuf>>(path: P) -> crate::Result<Self> {
        let path = path.into();

        let file = File::create_new(&path).inspect_err(|e| {
            log::error!("Failed to create journal file at {}: {e:?}", path.display());
        })?;

        file.set_len(PRE_ALLOCATED_BYTES).inspect_err(|e| {
            log::error!(
                "Failed to set journal file size to {PRE_ALLOCATED_BYTES}B at {}: {e:?}",
                path.display(),
            );
        })?;

        file.sync_all().inspect_err(|e| {
            log::error!("Failed to fsync journal file at {}: {e:?}", path.display());
        })?;

        Ok(Self {
            path,
            file: BufWriter::with_capacity(JOURNAL_BUFFER_BYTES, file),
            buf: Vec::new(),
            is_buffer_dirty: false,
            compression: CompressionType::None,
            compression_threshold: 0,
            buffer_size: JOURNAL_BUFFER_BYTES,
            claimed: 0,
            before_sync: None,
            persist_handle: None,
        })
    }

    pub fn from_file<P: AsRef<Path>>(path: P) -> crate::Result<Self> {
        let path = path.as_ref();

        if !path.try_exists()? {
            let file = OpenOptions::new()
                .create_new(true)
                .write(true)
                .open(path)
                .inspect_err(|e| {
                    log::error!("Failed to create journal file at {}: {e:?}", path.display());
                })?;

            file.set_len(PRE_ALLOCATED_BYTES).inspect_err(|e| {
                log::error!(
                    "Failed to set journal file size to {PRE_ALLOCATED_BYTES}B at {}: {e:?}",
                    path.display(),
                );
            })?;

            file.sync_all().inspect_err(|e| {
                log::error!("Failed to fsync journal file at {}: {e:?}", path.display());
            })?;

            return Ok(Self {
                path: path.into(),
                file: BufWriter::with_capacity(JOURNAL_BUFFER_BYTES, file),
                buf: Vec::new(),
                is_buffer_dirty: false,
                compression: CompressionType::None,
                compression_threshold: 0,
                buffer_size: JOURNAL_BUFFER_BYTES,
                claimed: 0,
                before_sync: None,
                persist_handle: None,
            });
        }

        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .inspect_err(|e| {
                log::error!("Failed to open journal file at {}: {e:?}", path.display());
            })?;

        Ok(Self {
            path: path.into(),
            file: BufWriter::with_capacity(JOURNAL_BUFFER_BYTES, file),
            buf: Vec::new(),
            is_buffer_dirty: false,
            compression: CompressionType::None,
            compression_threshold: 0,
            buffer_size: JOURNAL_BUFFER_BYTES,
            claimed: 0,
            before_sync: None,
            persist_handle: None,
        })
    }

    /// Persists the journal file.
    /// Spindle: hands buffered writes to the OS and returns a second handle to the journal
    /// file, so the caller can fsync what was written so far after releasing the journal
    /// lock, which every write needs. The handle is a new open of the file, not a duplicate
    /// of the writer's descriptor: Linux reports a write-back error once per open file, and a
    /// shared one would let this sync consume an error the writer's own next sync (a
    /// client's WRITETHROUGH) must see.
    pub(crate) fn flush_for_sync(&mut self) -> std::io::Result<File> {
        self.persist(PersistMode::Buffer)?;
        OpenOptions::new().write(true).open(&self.path)
    }

    /// Spindle: hands buffered writes to the OS and returns the handle `Journal::persist`
    /// syncs through after releasing the lock: opened once per journal file, not per sync (a
    /// client's WRITETHROUGH group must not pay an open and a close). Its own open file, like
    /// `flush_for_sync`'s: write-back errors reach it whatever another handle saw.
    pub(crate) fn flush_for_persist(&mut self) -> std::io::Result<std::sync::Arc<File>> {
        self.persist(PersistMode::Buffer)?;
        if let Some(handle) = &self.persist_handle {
            return Ok(handle.clone());
        }
        let handle = std::sync::Arc::new(OpenOptions::new().write(true).open(&self.path)?);
        self.persist_handle = Some(handle.clone());
        Ok(handle)
    }

    fn persist_unguarded(&mut self, mode: PersistMode) -> std::io::Result<()> {
        log::trace!(
            "Persisting journal at {} with mode={mode:?}",
            self.path.display(),
        );

        if self.is_buffer_dirty {
            self.file.flush().inspect_err(|e| {
                log::error!(
                    "Failed to flush journal IO buffers at {}: {e:?}",
                    self.path.display(),
                );
            })?;
            self.is_buffer_dirty = false;
        }

        // Spindle: what must be durable before the journal is (`Config::before_journal_sync`).
        if mode != PersistMode::Buffer {
            self.run_before_sync().map_err(crate::poison::sync_failure)?;
        }

        // Spindle: a failed sync is reported as such (`sync_failure`), never as the full disk
        // its OS error may name: that is what a reopening may heal, and this is not.
        match mode {
            PersistMode::SyncAll => self.file.get_mut().sync_all().inspect_err(|e| {
                log::error!(
                    "Failed to fsync journal file at {}: {e:?}",
                    self.path.display(),
                );
            }).map_err(crate::poison::sync_failure),
            PersistMode::SyncData => self.file.get_mut().sync_data().inspect_err(|e| {
                log::error!(
                    "Failed to fsyncdata journal file at {}: {e:?}",
                    self.path.display(),
                );
            }).map_err(crate::poison::sync_failure),
            PersistMode::Buffer => return Ok(()),
        }?;
        self.write_sync_claim()
    }

    /// Spindle: after a sync, writes a claim that everything written so far is durable (see
    /// `audit`). It is handed to the OS at once (a crash right after the sync must not lose
    /// it) and synced with the next sync; it costs a small write, never a sync.
    fn write_sync_claim(&mut self) -> std::io::Result<()> {
        let synced = self.file.stream_position()?;
        self.claim_synced(synced)
    }

    /// Spindle: writes a claim that `[0, synced)` of this journal is durable (a sync made
    /// through a second handle, outside the journal lock: `Journal::persist`).
    pub(crate) fn claim_synced(&mut self, synced: u64) -> std::io::Result<()> {
        if synced <= self.claimed {
            return Ok(());
        }
        self.buf.clear();
        super::audit::encode_claim(synced, &mut self.buf).map_err(std::io::Error::other)?;
        let start = self.file.stream_position()?;
        let written = self.file.write_all(&self.buf).and_then(|()| self.file.flush());
        let len = self.buf.len() as u64;
        self.buf.clear();
        match written {
            Ok(()) => {
                self.claimed = start + len;
                Ok(())
            }
            Err(e) => {
                // Without the claim the synced data is only unproven, but a claim cut short
                // would read as damage below the next one: take back what reached the file.
                log::warn!("Could not write a sync claim to {}: {e:?}", self.path.display());
                self.discard_buffer();
                let file = self.file.get_mut();
                file.set_len(start)?;
                file.seek(std::io::SeekFrom::Start(start))?;
                Ok(())
            }
        }
    }

    /// Writes a batch start marker to the journal
    fn write_start(&mut self, item_count: u32, seqno: SeqNo) -> Result<usize, crate::Error> {
        debug_assert!(self.buf.is_empty());

        Entry::Start { item_count, seqno }.encode_into(&mut self.buf)?;

        self.file.write_all(&self.buf)?;

        Ok(self.buf.len())
    }

    /// Writes a batch end marker to the journal
    fn write_end(&mut self, checksum: u64) -> Result<usize, crate::Error> {
        debug_assert!(self.buf.is_empty());

        Entry::End(checksum).encode_into(&mut self.buf)?;

        self.file.write_all(&self.buf)?;

        Ok(self.buf.len())
    }

    fn write_raw_unguarded(
        &mut self,
        keyspace_id: InternalKeyspaceId,
        key: &[u8],
        value: &[u8],
        value_type: ValueType,
        seqno: u64,
    ) -> crate::Result<usize> {
        self.is_buffer_dirty = true;

        let mut hasher = xxhash_rust::xxh3::Xxh3::default();
        let mut byte_count = 0;

        self.buf.clear();
        byte_count += self.write_start(1, seqno)?;
        self.buf.clear();

        serialize_marker_item(
            &mut self.buf,
            keyspace_id,
            key,
            value,
            value_type,
            if self.compression_threshold > 0 && value.len() >= self.compression_threshold {
                self.compression
            } else {
                CompressionType::None
            },
        )?;

        self.file.write_all(&self.buf)?;

        hasher.update(&self.buf);
        byte_count += self.buf.len();

        self.buf.clear();
        let checksum = hasher.finish();
        byte_count += self.write_end(checksum)?;

        Ok(byte_count)
    }

    fn write_clear_unguarded(
        &mut self,
        keyspace_id: InternalKeyspaceId,
        seqno: SeqNo,
    ) -> crate::Result<usize> {
        self.is_buffer_dirty = true;

        let mut hasher = xxhash_rust::xxh3::Xxh3::default();
        let mut byte_count = 0;

        self.buf.clear();
        byte_count += self.write_start(1, seqno)?;
        self.buf.clear();

        Entry::Clear { keyspace_id }.encode_into(&mut self.buf)?;
        self.file.write_all(&self.buf)?;
        hasher.update(&self.buf);
        byte_count += self.buf.len();

        self.buf.clear();
        let checksum = hasher.finish();
        byte_count += self.write_end(checksum)?;

        Ok(byte_count)
    }

    fn write_batch_unguarded<'a>(
        &mut self,
        items: impl Iterator<Item = &'a BatchItem>,
        batch_size: usize,
        seqno: SeqNo,
    ) -> crate::Result<usize> {
        if batch_size == 0 {
            return Ok(0);
        }

        self.is_buffer_dirty = true;

        self.buf.clear();

        // NOTE: entries.len() is surely never > u32::MAX
        #[expect(clippy::cast_possible_truncation)]
        let item_count = batch_size as u32;

        let mut hasher = xxhash_rust::xxh3::Xxh3::default();
        let mut byte_count = 0;

        byte_count += self.write_start(item_count, seqno)?;
        self.buf.clear();

        for item in items {
            debug_assert!(self.buf.is_empty());

            serialize_marker_item(
                &mut self.buf,
                item.keyspace.id,
                &item.key,
                &item.value,
                item.value_type,
                if self.compression_threshold > 0 && item.value.len() >= self.compression_threshold
                {
                    self.compression
                } else {
                    CompressionType::None
                },
            )?;

            self.file.write_all(&self.buf)?;

            hasher.update(&self.buf);
            byte_count += self.buf.len();

            self.buf.clear();
        }

        let checksum = hasher.finish();
        byte_count += self.write_end(checksum)?;

        Ok(byte_count)
    }
}

/// Spindle: the next journal, created, preallocated and made durable together with its
/// directory entry before the rotation that switches to it, so that none of that I/O happens
/// under the journal lock.
pub(crate) struct PreparedJournal {
    path: PathBuf,
    file: File,
}

impl PreparedJournal {
    /// Creates the journal at `path` (from [`Writer::next_path`]). Rotations are serialised
    /// (`Journal::try_lock_rotation`), and recovery makes the highest-numbered journal the
    /// active one, so a file already at `path` can only be one an earlier attempt prepared and
    /// then failed to rotate into (a failed worker also fails the database, so in practice
    /// only a test retries): it is reused if nothing has been written to it.
    pub(crate) fn create(path: PathBuf) -> crate::Result<Self> {
        let folder = path.parent().expect("should have parent").to_path_buf();
        let file = match File::create_new(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let file = OpenOptions::new().read(true).write(true).open(&path)?;
                if !Self::is_unused(&file)? {
                    log::error!("Next journal {} exists and is not empty", path.display());
                    return Err(crate::Error::JournalRecovery(
                        crate::JournalRecoveryError::InvalidFileName,
                    ));
                }
                file
            }
            Err(e) => {
                log::error!("Failed to create journal file at {}: {e:?}", path.display());
                return Err(e.into());
            }
        };
        file.set_len(PRE_ALLOCATED_BYTES)?;
        file.sync_all().inspect_err(|e| {
            log::error!("Failed to fsync journal file at {}: {e:?}", path.display());
        })?;
        fsync_directory(&folder)?;
        Ok(Self { path, file })
    }

    /// Whether `file` is a journal nothing has been written to: empty (its preallocation
    /// failed) or preallocated with zeros at its start. The file's cursor is left at 0, where
    /// the writer continues.
    fn is_unused(file: &File) -> std::io::Result<bool> {
        match file.metadata()?.len() {
            0 => return Ok(true),
            PRE_ALLOCATED_BYTES => {}
            _ => return Ok(false),
        }
        let mut head = [0u8; 4096];
        #[cfg(unix)]
        let n = std::os::unix::fs::FileExt::read_at(file, &mut head, 0)?;
        #[cfg(not(unix))]
        let n = {
            use std::io::{Read, SeekFrom};
            let mut cursor = file;
            let n = cursor.read(&mut head)?;
            cursor.seek(SeekFrom::Start(0))?;
            n
        };
        Ok(head[..n].iter().all(|&b| b == 0))
    }
}
