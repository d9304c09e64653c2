//! The on-disk engine under constant memtable rotation, flushes and compactions.
//!
//! Spindle's lsm-tree (vendor/lsm-tree) persists a new version manifest before taking the
//! version lock and rebases it onto memtables sealed meanwhile. If that rebase lost a sealed
//! memtable, or released one that was not flushed, acknowledged writes would vanish from
//! reads until a restart replayed the journal; this test reads every acknowledged key back
//! while versions change under it, then again after reopening.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

mod support;

use bytes::Bytes;
use spindle_engine::{Check, Engine, FjallEngine, FjallOptions, Meta};

const KEYS: usize = 2_000;

fn key(i: usize) -> Vec<u8> {
    format!("churn-{i:06}").into_bytes()
}

/// Alternately small (inline) and large (blob file) values, each naming its key.
fn value(i: usize) -> Bytes {
    let len = if i.is_multiple_of(2) { 100 } else { 5_000 };
    let stamp = (i as u32).to_le_bytes();
    Bytes::from((0..len).map(|n| stamp[n % 4] ^ (n as u8)).collect::<Vec<u8>>())
}

fn options(dir: &std::path::Path) -> FjallOptions {
    // Tiny memtables: a rotation, a flush and a version change every few dozen puts.
    FjallOptions { memtable_size: 64 * 1024, ..FjallOptions::new(dir) }
}

fn check(engine: &FjallEngine, i: usize) {
    let entry = engine.get(&key(i)).unwrap().unwrap_or_else(|| panic!("acknowledged key {i} is missing"));
    assert_eq!(entry.value, value(i), "key {i} has the wrong value");
    assert_eq!(entry.meta.version, Bytes::from(i.to_string()));
}

#[test]
fn acknowledged_writes_stay_readable_while_versions_change() {
    let dir = tempfile::tempdir().unwrap();
    let engine = FjallEngine::open(options(dir.path())).unwrap();
    let acknowledged = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicBool::new(false));

    let readers: Vec<_> = (0..2)
        .map(|seed| {
            let (engine, acknowledged, done) = (engine.clone(), acknowledged.clone(), done.clone());
            std::thread::spawn(move || {
                let mut reads = 0u64;
                let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ seed;
                while !done.load(Ordering::Acquire) {
                    let upto = acknowledged.load(Ordering::Acquire);
                    if upto == 0 {
                        std::thread::yield_now();
                        continue;
                    }
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    // Most reads on the newest keys, which live in memtables being sealed.
                    let i = if x.is_multiple_of(2) { upto - 1 - (x as usize / 2) % upto.min(64) } else { x as usize % upto };
                    check(&engine, i);
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    let compactor = {
        let (engine, done) = (engine.clone(), done.clone());
        std::thread::spawn(move || {
            let mut rounds = 0u64;
            while !done.load(Ordering::Acquire) {
                engine.compact().unwrap();
                rounds += 1;
            }
            rounds
        })
    };

    for i in 0..KEYS {
        let meta = Meta { version: Bytes::from(i.to_string()), ..Meta::default() };
        engine.put(&key(i), value(i), meta, Check::Force).unwrap();
        acknowledged.store(i + 1, Ordering::Release);
    }
    done.store(true, Ordering::Release);
    let reads: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    let compactions = compactor.join().unwrap();
    assert!(reads > 0 && compactions > 0, "reads {reads}, compactions {compactions}");

    support::check_before_and_after_reopen(engine, KEYS, options, dir.path(), check);
}
