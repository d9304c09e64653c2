//! Capacity: the nominal size of the drive and how full it is, from the filesystem under the
//! data directory or from a configured quota, and the admission check that turns "almost full"
//! into NO_SPACE before the engine ever sees ENOSPC.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// How long a statvfs/disk-usage reading is reused.
const REFRESH: Duration = Duration::from_millis(200);

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CapacityReport {
    pub nominal_bytes: u64,
    pub used_bytes: u64,
    pub portion_full: f32,
}

pub struct Capacity {
    data_dir: PathBuf,
    quota: Option<u64>,
    reserved: u64,
    /// Bytes admitted since the last refresh: accounted before the engine's own figure moves.
    admitted_since_refresh: AtomicU64,
    cached: Mutex<Option<(Instant, FsFigures)>>,
}

#[derive(Debug, Clone, Copy)]
struct FsFigures {
    total: u64,
    available: u64,
    engine_used: u64,
}

impl Capacity {
    pub fn new(data_dir: &Path, quota: Option<u64>, reserved: u64) -> Self {
        Capacity {
            data_dir: data_dir.to_path_buf(),
            quota,
            reserved,
            admitted_since_refresh: AtomicU64::new(0),
            cached: Mutex::new(None),
        }
    }

    /// The filesystem's figures and the engine's usage, read at most every [`REFRESH`]. The
    /// lock every PUT takes is held only to look at the cache, never across the reading:
    /// `engine_used` is a figure the engine keeps in memory, and statvfs may still wait for
    /// the filesystem.
    fn figures(&self, engine_used: impl FnOnce() -> u64) -> FsFigures {
        if let Some((at, f)) = *self.cached.lock() {
            if at.elapsed() < REFRESH {
                return f;
            }
        }
        let (total, available) = spindle_engine::fs_space::statvfs(&self.data_dir).unwrap_or((0, 0));
        let f = FsFigures { total, available, engine_used: engine_used() };
        *self.cached.lock() = Some((Instant::now(), f));
        self.admitted_since_refresh.store(0, Ordering::Relaxed);
        f
    }

    /// Forgets the cached figures: after an erase or a MEDIAOPTIMIZE has freed space, the next
    /// write must not be refused on figures read before it.
    pub fn invalidate(&self) {
        *self.cached.lock() = None;
        self.admitted_since_refresh.store(0, Ordering::Relaxed);
    }

    /// Whether a write of `bytes` may proceed.
    pub fn admit(&self, bytes: u64, engine_used: impl FnOnce() -> u64) -> bool {
        let f = self.figures(engine_used);
        let pending = self.admitted_since_refresh.fetch_add(bytes, Ordering::Relaxed) + bytes;
        if let Some(quota) = self.quota {
            if f.engine_used + pending > quota {
                self.admitted_since_refresh.fetch_sub(bytes, Ordering::Relaxed);
                return false;
            }
        }
        if f.total > 0 && f.available < pending + self.reserved {
            self.admitted_since_refresh.fetch_sub(bytes, Ordering::Relaxed);
            return false;
        }
        true
    }

    pub fn report(&self, engine_used: impl FnOnce() -> u64) -> CapacityReport {
        // A report is read by people and tools after writes they just made: the engine's figure
        // is kept in memory and cheap, so it is read now, never from the admission cache.
        let used = engine_used();
        let f = FsFigures { engine_used: used, ..self.figures(|| used) };
        let (nominal, used) = match self.quota {
            Some(q) => (q, f.engine_used),
            None => (f.total, f.total.saturating_sub(f.available)),
        };
        let portion_full = if nominal == 0 { 0.0 } else { (used as f64 / nominal as f64).min(1.0) as f32 };
        CapacityReport { nominal_bytes: nominal, used_bytes: used, portion_full }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quota_refuses_what_would_not_fit() {
        let dir = std::env::temp_dir();
        let c = Capacity::new(&dir, Some(1000), 0);
        assert!(c.admit(600, || 0));
        assert!(!c.admit(600, || 0), "600 + 600 exceeds the quota of 1000");
        assert!(c.admit(400, || 0));
        let r = c.report(|| 0);
        assert_eq!(r.nominal_bytes, 1000);
    }

    #[test]
    fn filesystem_figures_are_real() {
        let c = Capacity::new(&std::env::temp_dir(), None, 0);
        let r = c.report(|| 0);
        assert!(r.nominal_bytes > 0);
        assert!((0.0..=1.0).contains(&r.portion_full));
    }
}
