// Copyright (c) 2024-present, fjall-rs
// This source code is licensed under both the Apache 2.0 and MIT License
// (found in the LICENSE-* files in the repository)

pub mod audit;
pub mod batch_reader;
pub mod entry;
pub mod error;
pub mod manager;
pub mod reader;
mod recovery;
pub mod writer;

#[cfg(test)]
mod test;

use self::writer::PersistMode;
use crate::file::fsync_directory;
use batch_reader::JournalBatchReader;
use lsm_tree::CompressionType;
use reader::JournalReader;
use recovery::{recover_journals, RecoveryResult};
use std::{
    path::{Path, PathBuf},
    sync::{Mutex, MutexGuard},
};
use writer::Writer;

pub struct Journal {
    writer: Mutex<Writer>,
    /// Spindle: held from the start of a rotation (outside the writer lock) to its end, so
    /// that two flush workers never prepare and rotate into the same next journal.
    rotation: Mutex<()>,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}",
            self.path()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|_| String::from("<failed to read path>"))
        )
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        log::trace!("Dropping journal, trying to flush");

        match self.persist(PersistMode::SyncAll) {
            Ok(()) => {
                log::trace!("Flushed journal successfully");
            }
            Err(e) => {
                log::error!("Flush error on drop: {e:?}");
            }
        }

        #[cfg(feature = "__internal_whitebox")]
        crate::drop::decrement_drop_counter();
    }
}

impl Journal {
    pub fn with_compression(self, comp: CompressionType, threshold: usize) -> Self {
        {
            let mut writer = self.writer.lock().expect("lock is poisoned");
            writer.set_compression(comp, threshold);
        }
        self
    }

    /// The journal with a write buffer of `bytes` (`Writer::set_buffer_size`).
    pub fn with_buffer_size(self, bytes: usize) -> crate::Result<Self> {
        self.get_writer()?.set_buffer_size(bytes)?;
        Ok(self)
    }

    /// Spindle: the journal with `hook` run before every sync (`Writer::set_before_sync`).
    pub fn with_before_sync(self, hook: Option<writer::JournalSyncHook>) -> crate::Result<Self> {
        self.get_writer()?.set_before_sync(hook);
        Ok(self)
    }

    fn from_file<P: AsRef<Path>>(path: P) -> crate::Result<Self> {
        Ok(Self {
            writer: Mutex::new(Writer::from_file(path)?),
            rotation: Mutex::new(()),
        })
    }

    pub fn create_new<P: AsRef<Path>>(path: P) -> crate::Result<Self> {
        let path = path.as_ref();
        log::trace!("Creating new journal at {}", path.display());

        let folder = path.parent().expect("parent should exist");

        std::fs::create_dir_all(folder).inspect_err(|e| {
            log::error!(
                "Failed to create journal folder at {}: {e:?}",
                path.display(),
            );
        })?;

        let writer = Writer::create_new(path)?;

        // IMPORTANT: fsync folder on Unix
        fsync_directory(folder)?;

        #[cfg(feature = "__internal_whitebox")]
        crate::drop::increment_drop_counter();

        Ok(Self {
            writer: Mutex::new(writer),
            rotation: Mutex::new(()),
        })
    }

    /// Hands out write access to the journal.
    ///
    /// # Errors
    ///
    /// Returns an error if the journal writer is poisoned.
    pub(crate) fn get_writer(&self) -> crate::Result<MutexGuard<'_, Writer>> {
        self.writer.lock().map_err(|_| crate::Error::Poisoned)
    }

    /// Spindle: the right to rotate the journal, if no other worker is rotating it now.
    pub(crate) fn try_lock_rotation(&self) -> Option<MutexGuard<'_, ()>> {
        match self.rotation.try_lock() {
            Ok(guard) => Some(guard),
            Err(std::sync::TryLockError::WouldBlock) => None,
            // Only a panic mid-rotation poisons it; the next rotation starts afresh.
            Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
        }
    }

    pub fn path(&self) -> crate::Result<PathBuf> {
        Ok(self.get_writer()?.path.clone())
    }

    pub fn get_reader(&self) -> crate::Result<JournalBatchReader> {
        let raw_reader = JournalReader::new(self.path()?)?;
        Ok(JournalBatchReader::new(raw_reader))
    }

    /// Persists the journal.
    ///
    /// Spindle: a sync runs the `before_journal_sync` hook and fsyncs outside the journal
    /// lock, which every write needs: under it, what is buffered is handed to the OS and the
    /// offset reached noted; after the fsync, a claim of that offset is written (`audit`).
    /// Records written meanwhile may be synced too, but are not claimed, so recovery judges
    /// them as unsynced. (Under the lock, a hook that syncs a large value log held every
    /// write back for as long: the 200+ ms tail of 1 MiB puts, docs/performance.md.)
    pub fn persist(&self, mode: PersistMode) -> crate::Result<()> {
        if mode == PersistMode::Buffer {
            return self.get_writer()?.persist(mode).map_err(Into::into);
        }
        let (handle, path, synced, hook) = {
            let mut journal_writer = self.get_writer()?;
            let handle = journal_writer.flush_for_persist()?;
            let synced = journal_writer.pos()?;
            (handle, journal_writer.path.clone(), synced, journal_writer.before_sync_hook())
        };
        let result = hook
            .map_or(Ok(()), |hook| hook())
            .and_then(|()| match mode {
                PersistMode::SyncAll => handle.sync_all(),
                PersistMode::SyncData | PersistMode::Buffer => handle.sync_data(),
            })
            .map_err(crate::poison::sync_failure);
        let mut journal_writer = self.get_writer()?;
        match result {
            // A rotation meanwhile sealed (and synced whole) the journal synced here.
            Ok(()) if journal_writer.path != path => Ok(()),
            Ok(()) => journal_writer.claim_synced(synced).map_err(Into::into),
            Err(e) => Err(journal_writer.failed_sync(e).into()),
        }
    }

    pub fn recover<P: AsRef<Path>>(
        path: P,
        compression: CompressionType,
        compression_threshold: usize,
    ) -> crate::Result<RecoveryResult> {
        recover_journals(path, compression, compression_threshold)
    }
}
