//! Reads under `CachedReadsOnly`: served from memory, or refused with `WouldBlock` when they
//! would wait for the disk, and never wrong.

use std::path::Path;

use bytes::Bytes;
use spindle_engine::{CachedReadsOnly, Check, Engine, Error, FjallEngine, FjallOptions, Meta};

const KEYS: usize = 400;

fn key(i: usize) -> Vec<u8> {
    format!("cold-{i:05}").into_bytes()
}

/// Small values (in tables) and large ones (in blob files), each naming its key.
fn value(i: usize) -> Bytes {
    let len = if i.is_multiple_of(2) { 200 } else { 9_000 };
    Bytes::from((0..len).map(|n| (i as u8).wrapping_mul(31) ^ (n as u8)).collect::<Vec<u8>>())
}

fn options(dir: &Path) -> FjallOptions {
    // Small memtables, so the data is in tables and blob files rather than in a memtable.
    FjallOptions { memtable_size: 64 * 1024, ..FjallOptions::new(dir) }
}

#[test]
fn cold_reads_are_refused_not_waited_for_and_warm_reads_are_served() {
    // Under the target directory, not /tmp: a tmpfs keeps everything in memory, and the point
    // here is data that is only on disk.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    {
        let engine = FjallEngine::open(options(dir.path())).unwrap();
        for i in 0..KEYS {
            let meta = Meta { version: Bytes::from(i.to_string()), ..Meta::default() };
            engine.put(&key(i), value(i), meta, Check::Force).unwrap();
        }
        engine.sync().unwrap();
        engine.compact().unwrap();
    }
    // A fresh engine (empty block cache) over files that are only on disk.
    let engine = FjallEngine::open(options(dir.path())).unwrap();

    let (mut refused, mut served) = (0, 0);
    for i in 0..KEYS / 2 {
        // Emptied before every key: a probe that misses still starts the kernel reading ahead,
        // and where the disk answers at once the same probe may find its block there; the
        // read-ahead could then bring in the whole of a small table for the keys after it.
        spindle_engine::testing::evict_page_cache(dir.path()).unwrap();
        let cached_only = CachedReadsOnly::new();
        match engine.get(&key(i)) {
            Err(Error::WouldBlock) => refused += 1,
            Ok(Some(entry)) => {
                assert_eq!(entry.value, value(i));
                served += 1;
            }
            other => panic!("key {i}: {other:?}"),
        }
        drop(cached_only);
        // Without the guard the same read waits for the disk and succeeds.
        let entry = engine.get(&key(i)).unwrap().unwrap();
        assert_eq!(entry.value, value(i));
        assert_eq!(entry.meta.version, Bytes::from(i.to_string()));
        // Now it is in memory: served under the guard too.
        let _cached_only = CachedReadsOnly::new();
        assert_eq!(engine.get(&key(i)).unwrap().unwrap().value, value(i));
    }
    // Keys share blocks the engine's own cache keeps, and a probe can be served by the read
    // it started (above), so some cold keys are served; not all of them.
    assert!(refused > 0, "no read was refused ({served} served) from a page cache emptied before each");

    // The guard is per thread and ends with its scope: other reads block as usual.
    spindle_engine::testing::evict_page_cache(dir.path()).unwrap();
    let reader = std::thread::spawn({
        let engine = engine.clone();
        move || engine.get(&key(KEYS - 1)).unwrap().unwrap().value
    });
    let _cached_only = CachedReadsOnly::new();
    assert_eq!(reader.join().unwrap(), value(KEYS - 1));
}

/// Values in the value log the page cache no longer holds are refused under the guard (a
/// small one unless the read its probe starts is done at once); a large one read a second
/// time without it is kept in the cache, a small one from the first.
#[test]
fn logged_values_not_in_memory_are_refused_not_waited_for() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let logged = |i: usize| {
        let len = if i.is_multiple_of(2) { 512 * 1024 } else { 20 * 1024 };
        Bytes::from((0..len).map(|n| (i as u8).wrapping_mul(17) ^ (n as u8)).collect::<Vec<u8>>())
    };
    // Every value of 16 KiB or more logged; nothing kept cached behind the writes.
    let options = FjallOptions { log_threshold: 16 * 1024, log_cached_tail: 0, ..FjallOptions::new(dir.path()) };
    let engine = FjallEngine::open(options).unwrap();
    for i in 0..16 {
        engine.put(&key(i), logged(i), Meta::default(), Check::Force).unwrap();
    }
    // The drop behind the writes stops at a 64 KiB boundary: a value after the ones read puts
    // them all below it.
    engine.put(b"filler", logged(0), Meta::default(), Check::Force).unwrap();
    engine.sync().unwrap();
    spindle_engine::testing::evict_page_cache(dir.path()).unwrap();
    // A large value the cache dropped is refused without a probe. A small one is probed
    // without waiting (RWF_NOWAIT), and a probe that misses still starts the kernel reading
    // the value in: where the disk answers at once, the same probe may find it there and be
    // served (on this project's machines, all eight at times): refused or right.
    for i in 0..16 {
        let _cached_only = CachedReadsOnly::new();
        match engine.get(&key(i)) {
            Err(Error::WouldBlock) => {}
            Ok(Some(entry)) if i % 2 == 1 => assert_eq!(entry.value, logged(i), "key {i}"),
            other => panic!("key {i} read under the guard from a cache that was emptied: {other:?}"),
        }
    }
    // Probed often enough, a small one is refused: its probe does not wait for the disk.
    let refused_small = (0..50).any(|_| {
        spindle_engine::testing::evict_page_cache(dir.path()).unwrap();
        let _cached_only = CachedReadsOnly::new();
        matches!(engine.get(&key(1)), Err(Error::WouldBlock))
    });
    assert!(refused_small, "a small value was served 50 times from a cache emptied before each");
    let large = (0..16).filter(|i| i % 2 == 0);
    let get = |i: usize| engine.get(&key(i)).unwrap().unwrap().value;
    // Read once, a large value is read past the cache (`value_log.rs` checks that its pages
    // stay out of memory); read a second time, through the cache, and kept there.
    for i in large.clone() {
        assert_eq!(get(i), logged(i), "key {i}");
    }
    for i in large {
        assert_eq!(get(i), logged(i), "key {i}");
        let _cached_only = CachedReadsOnly::new();
        assert_eq!(engine.get(&key(i)).unwrap().unwrap().value, logged(i), "key {i}, read twice, not served from memory");
    }
    // A small one is read through the cache at once.
    for i in (0..16).filter(|i| i % 2 == 1) {
        assert_eq!(get(i), logged(i), "key {i}");
        let _cached_only = CachedReadsOnly::new();
        assert_eq!(engine.get(&key(i)).unwrap().unwrap().value, logged(i), "key {i}, read once, not served from memory");
    }
}
