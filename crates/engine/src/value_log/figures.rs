//! Per-segment figures: bytes and live bytes (from the census on), damage, and what garbage
//! collection asks of them (segments to census, victims) and GETLOG reports.

use super::format::{Pointer, SEGMENT_HEADER_LEN};
use super::ValueLog;

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
    /// Values read past the page cache since open (`direct`).
    pub direct_reads: u64,
}

impl ValueLog {
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
            direct_reads: self.direct.reads(),
        }
    }
}
