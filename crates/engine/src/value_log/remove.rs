//! Segment deletion: a collected segment, or every one (an erase), once readers holding a
//! pointer into it are done.

use super::{segment_id, ValueLog};
use crate::Result;

impl ValueLog {
    /// Held by a reader from taking the index snapshot that names a pointer until the value is
    /// read (`gate`): no segment is deleted meanwhile.
    pub fn reading(&self) -> parking_lot::RwLockReadGuard<'_, ()> {
        self.gate.read()
    }

    /// Deletes a collected segment (nothing points to it any more, durably).
    pub fn remove(&self, id: u32) -> Result<()> {
        // Readers whose snapshot still names this segment finish first.
        let _quiet = self.gate.write();
        self.open_files.lock().remove(&id);
        self.direct.forget(id);
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

    /// Deletes every segment (an erase, once the cleared index is durable). Appenders made
    /// before it start new segments at their next append.
    pub fn remove_all(&self) -> Result<()> {
        let _quiet = self.gate.write();
        self.erases.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.active.lock().take();
        self.figures.lock().clear();
        self.open_files.lock().clear();
        self.direct.forget_all();
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
}
