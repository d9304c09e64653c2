//! Appenders: the open segment a record is appended to, flushed to the OS before the journal
//! names it, taken back on a failure, sealed when full.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::Arc;

use super::figures::SegmentFigures;
use super::format::{self, Pointer, SEGMENT_HEADER_LEN};
use super::sync::{advise, Handed, Pages, WRITE_BEHIND_BYTES};
use super::ValueLog;
use crate::{Error, Result};

/// An appender's write buffer: small records are gathered, large ones go straight through.
const APPEND_BUFFER_BYTES: usize = 256 * 1024;

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

impl ValueLog {
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

    /// The segments appenders write to now, never collected or censused.
    pub(super) fn appending(&self) -> Vec<u32> {
        self.active.lock().as_ref().map(Appender::id).into_iter().collect()
    }

    /// Seals the writer's segment: the next append starts a new one, so that this one can be
    /// collected.
    pub fn seal_active(&self) -> Result<()> {
        if let Some(mut app) = self.active.lock().take() {
            self.seal(&mut app)?;
        }
        Ok(())
    }

    /// Whether `appender` was made before the last erase.
    pub fn is_stale(&self, appender: &Appender) -> bool {
        appender.epoch != self.erases()
    }
}
