//! The on-disk engine across journal rotations.
//!
//! fjall starts a new journal file once the active one passes 64 MB, at the next memtable
//! flush. Spindle's fjall (vendor/fjall) syncs the old journal and prepares the new one before
//! taking the journal lock, and under it only syncs what was written meanwhile and switches
//! files. If that lost the writes made between the two steps, or left a journal the recovery
//! does not read, acknowledged writes would be missing here, before or after reopening.

mod support;

use bytes::Bytes;
use spindle_engine::{Check, Engine, FjallEngine, FjallOptions, Meta};

/// Enough 1 MiB values for the journal to pass 64 MB three times.
const KEYS: usize = 200;
const VALUE_LEN: usize = 1024 * 1024;

fn key(i: usize) -> Vec<u8> {
    format!("rotation-{i:04}").into_bytes()
}

/// A 1 MiB pattern with the key's number in its first and last bytes (built once: the test
/// runs unoptimised in the suite).
fn value(i: usize) -> Bytes {
    static PATTERN: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    let mut v = PATTERN.get_or_init(|| (0..VALUE_LEN).map(|n| (n % 251) as u8).collect()).clone();
    v[..8].copy_from_slice(&(i as u64).to_le_bytes());
    v[VALUE_LEN - 8..].copy_from_slice(&(i as u64).to_be_bytes());
    Bytes::from(v)
}

fn options(dir: &std::path::Path) -> FjallOptions {
    // Memtables of 8 MiB: a flush, and so a chance to rotate, every eight puts. The values go
    // through the journal (not the value log) so that it fills.
    FjallOptions { memtable_size: 8 * 1024 * 1024, log_threshold: usize::MAX, ..FjallOptions::new(dir) }
}

fn check(engine: &FjallEngine, i: usize) {
    let entry = engine.get(&key(i)).unwrap().unwrap_or_else(|| panic!("acknowledged key {i} is missing"));
    assert!(entry.value == value(i), "key {i} has the wrong value");
    assert_eq!(entry.meta.version, Bytes::from(i.to_string()));
}

/// The highest journal number in the database directory (fjall names journals `N.jnl`).
fn newest_journal(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().to_str()?.strip_suffix(".jnl")?.parse().ok())
        .max()
        .expect("a journal")
}

#[test]
fn acknowledged_writes_survive_journal_rotations() {
    let dir = tempfile::tempdir().unwrap();
    let engine = FjallEngine::open(options(dir.path())).unwrap();
    for i in 0..KEYS {
        let meta = Meta { version: Bytes::from(i.to_string()), ..Meta::default() };
        engine.put(&key(i), value(i), meta, Check::Force).unwrap();
        if i % 16 == 0 {
            check(&engine, i / 2);
        }
    }
    // Flushes run on fjall's workers; wait for the rotations they make.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while newest_journal(dir.path()) < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // 2.jnl is prepared only once 1.jnl is the active journal: at least one rotation is
    // complete and a second at least under way.
    let rotated_to = newest_journal(dir.path());
    assert!(rotated_to >= 2, "200 MiB of writes rotated the journal only to {rotated_to}.jnl");
    let engine = support::check_before_and_after_reopen(engine, KEYS, options, dir.path(), check);
    // Writes after recovery go on in the newest journal.
    let meta = Meta { version: Bytes::from("again"), ..Meta::default() };
    engine.put(&key(0), value(1), meta, Check::Force).unwrap();
    assert!(engine.get(&key(0)).unwrap().unwrap().value == value(1));
}
