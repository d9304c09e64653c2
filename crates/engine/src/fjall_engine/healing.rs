//! Recovery from a full disk: reopening a stopped database once the disk has room, and erasing
//! one through an aside directory.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::store::Store;
use super::Shared;
use crate::{Error, Result};

/// Free bytes the filesystem must have, beyond what the memtables hold, before the writer
/// reopens a database that a full disk stopped: enough for the journal and the flushes that
/// follow recovery not to fail again at once.
pub(super) const REOPEN_FREE_MARGIN: u64 = 16 * 1024 * 1024;
/// How soon the writer first tries to reopen a stopped database once the disk has room; each
/// failed attempt doubles it, up to [`REOPEN_RETRY_MAX`].
pub(super) const REOPEN_RETRY: std::time::Duration = std::time::Duration::from_secs(1);
pub(super) const REOPEN_RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(30);
/// How long a reopening waits for readers still using the stopped database.
pub(super) const REOPEN_DRAIN_LIMIT: std::time::Duration = std::time::Duration::from_secs(5);

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
pub(super) struct Healing {
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
    pub(super) fn waiting(shared: &Shared) -> bool {
        if shared.halted.lock().is_some() {
            return false;
        }
        shared.store().map_or(true, |store| store.db.is_stopped_by_full_disk())
    }

    pub(super) fn retry_in(&self) -> std::time::Duration {
        self.not_before.saturating_duration_since(std::time::Instant::now()).max(REOPEN_RETRY)
    }

    /// The store to apply the next group to, reopened first if a full disk stopped it.
    pub(super) fn store(&mut self, shared: &Shared) -> Result<Arc<Store>> {
        if let Some(halted) = shared.halted.lock().clone() {
            return Err(halted);
        }
        let held = match shared.store() {
            Ok(store) if !store.db.is_poisoned() => return Ok(store),
            Ok(store) if !store.db.is_stopped_by_full_disk() => {
                return Err(Error::Stopped("a storage failure (not a full disk) stopped writes; check the disk and restart the drive".into()))
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
pub(super) fn reopen(shared: &Shared) -> Result<Arc<Store>> {
    tracing::warn!("a full disk stopped the database; reopening it");
    close(shared)?;
    open_into_slot(shared)
}

/// Erases a store a full disk stopped: closes it, moves its directory aside in one rename,
/// deletes it there (which frees the space) and starts an empty store in its place. A crash
/// or a failure in between leaves the old files only under the aside name, deleted at the
/// next open or erase; never a half-deleted store that a reopening would half-recover.
pub(super) fn erase_stopped(shared: &Shared) -> Result<()> {
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
pub(super) fn aside_path(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    path.with_file_name(format!(".{name}.spindle-erasing"))
}

/// Deletes what an erase moved aside, if anything.
pub(super) fn remove_aside(path: &Path) {
    let aside = aside_path(path);
    if aside.exists() {
        if let Err(e) = std::fs::remove_dir_all(&aside) {
            tracing::warn!("could not delete the erased store at {}: {e}", aside.display());
        }
    }
}

/// Takes the store out of the slot and closes it, once no reader uses it any more (at most
/// [`REOPEN_DRAIN_LIMIT`]; the store goes back otherwise). Readers meanwhile get Unavailable.
pub(super) fn close(shared: &Shared) -> Result<()> {
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
pub(super) fn open_into_slot(shared: &Shared) -> Result<Arc<Store>> {
    // A write the full disk cut short is a torn tail: cut it, so that a record there which
    // decodes but fails its checksum cannot stop the reopening.
    let (store, _notices) = Store::open(&shared.options, shared.counters.clone(), false)?;
    let store = Arc::new(store);
    *shared.slot.write() = Some(store.clone());
    shared.counters.reopenings.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    tracing::info!("database open again after a full disk");
    Ok(store)
}
