// Copyright (c) 2024-present, fjall-rs
// This source code is licensed under both the Apache 2.0 and MIT License
// (found in the LICENSE-* files in the repository)

use std::sync::{atomic::AtomicBool, Arc};

/// Spindle: besides the flag, whether a full disk (ENOSPC) caused it, which (unlike a failed
/// fsync, after which the page cache may have dropped data) reopening the database recovers.
#[derive(Clone, Debug, Default)]
pub struct PoisonSignal(Arc<AtomicBool>, Arc<AtomicBool>);

impl PoisonSignal {
    pub fn is_poisoned(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Acquire)
    }

    pub fn poison(&self) {
        self.0.store(true, std::sync::atomic::Ordering::Release);
    }

    /// Poisons because of `error`, remembering whether the disk was full.
    pub fn poison_by(&self, error: &crate::Error) {
        if is_storage_full(error) {
            self.1.store(true, std::sync::atomic::Ordering::Release);
        }
        self.poison();
    }

    /// Poisons because of an I/O `error`, remembering whether the disk was full.
    pub fn poison_by_io(&self, error: &std::io::Error) {
        if is_io_storage_full(error) {
            self.1.store(true, std::sync::atomic::Ordering::Release);
        }
        self.poison();
    }

    /// Whether the poison came from a full disk (and only from that).
    pub fn by_full_disk(&self) -> bool {
        self.is_poisoned() && self.1.load(std::sync::atomic::Ordering::Acquire)
    }
}

/// Spindle: whether `error` is ENOSPC.
pub fn is_storage_full(error: &crate::Error) -> bool {
    let io = match error {
        crate::Error::Io(io) | crate::Error::Storage(lsm_tree::Error::Io(io)) => io,
        _ => return false,
    };
    is_io_storage_full(io)
}

fn is_io_storage_full(io: &std::io::Error) -> bool {
    io.kind() == std::io::ErrorKind::StorageFull || io.raw_os_error() == Some(28)
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
