// Copyright (c) 2024-present, fjall-rs
// This source code is licensed under both the Apache 2.0 and MIT License
// (found in the LICENSE-* files in the repository)

use std::sync::{
    atomic::{AtomicBool, AtomicU8, Ordering},
    Arc,
};

/// Spindle: why the database was poisoned. Ordered: a later cause never lowers an earlier one,
/// so one failure that is not a full disk keeps the database stopped for good.
const CAUSE_NONE: u8 = 0;
const CAUSE_FULL_DISK: u8 = 1;
const CAUSE_OTHER: u8 = 2;

/// Spindle: besides the flag, whether only a full disk (ENOSPC on a write) caused it, which
/// reopening the database recovers from, unlike a failed fsync (the page cache may have dropped
/// data that a later sync would not report) or a panic.
#[derive(Clone, Debug, Default)]
pub struct PoisonSignal(Arc<AtomicBool>, Arc<AtomicU8>);

impl PoisonSignal {
    pub fn is_poisoned(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    /// Poisons for a cause that is not a full disk.
    pub fn poison(&self) {
        self.poison_for(CAUSE_OTHER);
    }

    fn poison_for(&self, cause: u8) {
        self.1.fetch_max(cause, Ordering::AcqRel);
        self.0.store(true, Ordering::Release);
    }

    /// Poisons because of `error`, remembering whether the disk was full.
    pub fn poison_by(&self, error: &crate::Error) {
        self.poison_for(cause_of(error));
    }

    /// Poisons because of an I/O `error` of a write, remembering whether the disk was full.
    pub fn poison_by_io(&self, error: &std::io::Error) {
        self.poison_for(cause_of_io(error));
    }

    /// Poisons because of an LSM-tree `error`, remembering whether the disk was full.
    pub fn poison_by_lsm(&self, error: &lsm_tree::Error) {
        self.poison_for(match error {
            lsm_tree::Error::Io(io) => cause_of_io(io),
            _ => CAUSE_OTHER,
        });
    }

    /// Whether a full disk, and nothing else, caused the poison.
    pub fn by_full_disk(&self) -> bool {
        self.is_poisoned() && self.1.load(Ordering::Acquire) == CAUSE_FULL_DISK
    }
}

fn cause_of(error: &crate::Error) -> u8 {
    match error {
        crate::Error::Io(io) | crate::Error::Storage(lsm_tree::Error::Io(io)) => cause_of_io(io),
        _ => CAUSE_OTHER,
    }
}

/// ENOSPC is a full disk. Failed syncs never count as one: `Writer::persist` and the workers'
/// journal syncs hand them on as `io::Error::other`, without the OS error code.
fn cause_of_io(io: &std::io::Error) -> u8 {
    if io.kind() == std::io::ErrorKind::StorageFull || io.raw_os_error() == Some(28) {
        CAUSE_FULL_DISK
    } else {
        CAUSE_OTHER
    }
}

/// Spindle: marks an fsync's failure as one (whatever its OS error): it must never pass for
/// a full disk, which a reopening recovers from.
pub fn sync_failure(error: std::io::Error) -> std::io::Error {
    std::io::Error::other(format!("fsync failed: {error}"))
}

/// RAII guard to catch panics in background workers and poison a database
#[derive(Clone)]
pub struct PoisonDart(PoisonSignal);

impl PoisonDart {
    pub fn new(signal: PoisonSignal) -> Self {
        Self(signal)
    }

    pub fn poison(&self) {
        self.0.poison();
    }

    pub fn poison_by(&self, error: &crate::Error) {
        self.0.poison_by(error);
    }
}

impl Drop for PoisonDart {
    fn drop(&mut self) {
        if std::thread::panicking() {
            log::error!("Poisoning database because of panic in background worker");
            self.poison();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enospc() -> std::io::Error {
        std::io::Error::from_raw_os_error(28)
    }

    /// Spindle: only ENOSPC on a write, and nothing else, counts as a full disk.
    #[test]
    fn only_a_full_disk_alone_is_a_full_disk() {
        let full = PoisonSignal::default();
        assert!(!full.by_full_disk());
        full.poison_by_io(&enospc());
        assert!(full.is_poisoned() && full.by_full_disk());
        // Anything worse later keeps it stopped for good.
        full.poison_by_io(&std::io::Error::from_raw_os_error(5));
        assert!(!full.by_full_disk());
        full.poison_by_io(&enospc());
        assert!(!full.by_full_disk());

        // A failed fsync is never a full disk, whatever its OS error.
        let synced = PoisonSignal::default();
        synced.poison_by_io(&sync_failure(enospc()));
        assert!(synced.is_poisoned() && !synced.by_full_disk());

        let panicked = PoisonSignal::default();
        panicked.poison();
        assert!(!panicked.by_full_disk());

        let lsm = PoisonSignal::default();
        lsm.poison_by_lsm(&lsm_tree::Error::Io(enospc()));
        assert!(lsm.by_full_disk());
    }
}
