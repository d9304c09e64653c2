//! The value log on disk: what a crash leaves of it, garbage collection under writes, churn,
//! damage and erase.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use spindle_engine::testing::copy_dir;
use spindle_engine::{Check, Engine, Error, FjallEngine, FjallOptions, Meta, WriteOp, WriteRequest};

const KIB: usize = 1024;

fn meta(version: &str) -> Meta {
    Meta { version: Bytes::from(version.to_owned()), ..Meta::default() }
}

/// A value that names its key and serial, so a value read back says whose it is.
fn value(key: &str, serial: u64, len: usize) -> Bytes {
    let mut v: Vec<u8> = (0..len).map(|i| (i as u64).wrapping_mul(31).wrapping_add(serial) as u8).collect();
    let head = format!("{key}/{serial}/");
    v[..head.len()].copy_from_slice(head.as_bytes());
    Bytes::from(v)
}

fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir.join("values"))
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "vlog")).collect())
        .unwrap_or_default();
    found.sort();
    found
}

fn put(engine: &FjallEngine, key: &str, value: Bytes, version: &str, sync: bool) {
    let (tx, rx) = std::sync::mpsc::channel();
    let op = WriteOp::Put { key: Bytes::from(key.to_owned()), value, meta: meta(version), check: Check::Force };
    engine.submit(WriteRequest { op, sync, on_applied: None, on_done: Box::new(move |r| drop(tx.send(r))) });
    rx.recv().unwrap().unwrap();
}

/// A power cut can keep journal records the OS wrote back and lose the logged values they
/// point to (the log is synced only before the journal is). Recovery must then end the
/// journal before the first such record, as if the cut had come earlier: the key keeps its
/// durable value, and nothing after that record is half there.
#[test]
fn a_pointer_whose_value_a_crash_lost_ends_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let engine = FjallEngine::open(FjallOptions::new(dir.path())).unwrap();
    put(&engine, "a", value("a", 1, 100 * KIB), "1", true);
    let segment = segments(dir.path()).pop().expect("a segment");
    let synced_len = std::fs::metadata(&segment).unwrap().len();
    // Unsynced: an overwrite of a, a new large b, then a small c after them.
    put(&engine, "a", value("a", 2, 100 * KIB), "2", false);
    put(&engine, "b", value("b", 1, 100 * KIB), "1", false);
    put(&engine, "c", Bytes::from_static(b"small"), "1", false);

    // The disk as a cut could leave it: every journal write there, the log's unsynced tail not.
    let cut = tempfile::tempdir().unwrap();
    copy_dir(dir.path(), cut.path()).unwrap();
    let cut_segment = cut.path().join("values").join(segment.file_name().unwrap());
    std::fs::OpenOptions::new().write(true).open(&cut_segment).unwrap().set_len(synced_len).unwrap();
    // And as it could leave it with the tail written back too.
    let whole = tempfile::tempdir().unwrap();
    copy_dir(dir.path(), whole.path()).unwrap();
    drop(engine);

    let recovered = FjallEngine::open(FjallOptions::new(cut.path())).unwrap();
    let a = recovered.get(b"a").unwrap().expect("a's durable value");
    assert_eq!((a.value, a.meta.version), (value("a", 1, 100 * KIB), Bytes::from("1")));
    assert_eq!(recovered.get(b"b").unwrap(), None, "b's value was lost");
    assert_eq!(recovered.get(b"c").unwrap(), None, "c came after the record that ended the journal");
    assert!(recovered.notices().iter().any(|n| n.contains("unsynced")), "{:?}", recovered.notices());
    // The store goes on: a new value for b lands and survives a reopen.
    put(&recovered, "b", value("b", 2, 100 * KIB), "2", true);
    drop(recovered);
    let reopened = FjallEngine::open(FjallOptions::new(cut.path())).unwrap();
    assert_eq!(reopened.get(b"b").unwrap().unwrap().value, value("b", 2, 100 * KIB));
    assert_eq!(reopened.get(b"a").unwrap().unwrap().meta.version, Bytes::from("1"));

    let kept = FjallEngine::open(FjallOptions::new(whole.path())).unwrap();
    assert_eq!(kept.get(b"a").unwrap().unwrap().value, value("a", 2, 100 * KIB));
    assert_eq!(kept.get(b"b").unwrap().unwrap().value, value("b", 1, 100 * KIB));
    assert_eq!(&kept.get(b"c").unwrap().unwrap().value[..], b"small");
}

/// The value log failing to read while recovery judges the journal's unsynced records is not
/// a lost value: the open is refused and nothing is cut, so once the log reads again every
/// write is there. (Judged as a lost value, the first unsynced record and all after it would
/// be dropped for good.)
#[test]
fn a_log_that_fails_to_read_at_open_refuses_the_open_and_cuts_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let engine = FjallEngine::open(FjallOptions::new(dir.path())).unwrap();
    put(&engine, "a", value("a", 1, 100 * KIB), "1", true);
    put(&engine, "a", value("a", 2, 100 * KIB), "2", false);
    put(&engine, "b", value("b", 1, 100 * KIB), "1", false);
    put(&engine, "c", Bytes::from_static(b"small"), "1", false);
    let segment = segments(dir.path()).pop().expect("a segment");
    // What a crash could leave with every write already written back by the OS.
    let crashed = tempfile::tempdir().unwrap();
    copy_dir(dir.path(), crashed.path()).unwrap();
    drop(engine);

    // The segment cannot be read: a directory in its place, whose reads fail with EISDIR.
    let in_place = crashed.path().join("values").join(segment.file_name().unwrap());
    let aside = crashed.path().join("segment-aside");
    std::fs::rename(&in_place, &aside).unwrap();
    std::fs::create_dir(&in_place).unwrap();
    let refused = FjallEngine::open(FjallOptions::new(crashed.path())).err().expect("the open is refused");
    assert!(refused.to_string().contains("could not be read"), "{refused}");

    // The disk reads again: every write, unsynced ones included, is there.
    std::fs::remove_dir(&in_place).unwrap();
    std::fs::rename(&aside, &in_place).unwrap();
    let recovered = FjallEngine::open(FjallOptions::new(crashed.path())).unwrap();
    assert_eq!(recovered.get(b"a").unwrap().unwrap().value, value("a", 2, 100 * KIB));
    assert_eq!(recovered.get(b"b").unwrap().unwrap().value, value("b", 1, 100 * KIB));
    assert_eq!(&recovered.get(b"c").unwrap().unwrap().value[..], b"small");
}

fn gc_options(dir: &Path) -> FjallOptions {
    FjallOptions {
        log_threshold: 8 * KIB,
        log_segment_bytes: 256 * KIB as u64,
        gc_garbage_ratio: 0.3,
        gc_bytes_per_sec: 0,
        ..FjallOptions::new(dir)
    }
}

/// Garbage collection moves values while clients overwrite, delete and read the same keys:
/// no read ever returns a value other than the one its version names, and the final state is
/// every last write.
#[test]
fn collection_under_concurrent_writes_keeps_every_last_write() {
    const KEYS: u64 = 64;
    const WRITERS: u64 = 2;
    const ROUNDS: u64 = 12;
    let dir = tempfile::tempdir().unwrap();
    let engine = FjallEngine::open(gc_options(dir.path())).unwrap();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let collector = {
        let (engine, done) = (engine.clone(), done.clone());
        std::thread::spawn(move || {
            let mut passes = 0;
            while !done.load(std::sync::atomic::Ordering::Acquire) {
                engine.compact().unwrap();
                passes += 1;
            }
            passes
        })
    };
    let reader = {
        let (engine, done) = (engine.clone(), done.clone());
        std::thread::spawn(move || {
            let mut reads = 0u64;
            while !done.load(std::sync::atomic::Ordering::Acquire) {
                for k in 0..KEYS {
                    let key = format!("key{k:03}");
                    if let Some(entry) = engine.get(key.as_bytes()).unwrap() {
                        let serial: u64 = std::str::from_utf8(&entry.meta.version).unwrap().parse().unwrap();
                        assert!(entry.value == value(&key, serial, entry.value.len()), "{key}: value is not version {serial}'s");
                        reads += 1;
                    }
                }
            }
            reads
        })
    };
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let engine = engine.clone();
            std::thread::spawn(move || {
                let mut last = BTreeMap::new();
                for round in 0..ROUNDS {
                    for k in (w..KEYS).step_by(WRITERS as usize) {
                        let key = format!("key{k:03}");
                        let serial = round * 1000 + k;
                        if (round + k) % 7 == 3 {
                            engine.delete(key.as_bytes(), Check::Force).unwrap();
                            last.insert(key, None);
                        } else {
                            let len = 8 * KIB + ((round * 13 + k) as usize % 5) * 3 * KIB;
                            engine.put(key.as_bytes(), value(&key, serial, len), meta(&serial.to_string()), Check::Force).unwrap();
                            last.insert(key, Some((serial, len)));
                        }
                    }
                }
                last
            })
        })
        .collect();
    let mut model = BTreeMap::new();
    for w in writers {
        model.extend(w.join().unwrap());
    }
    done.store(true, std::sync::atomic::Ordering::Release);
    assert!(collector.join().unwrap() > 0);
    assert!(reader.join().unwrap() > 0);
    engine.compact().unwrap();
    let check = |engine: &FjallEngine| {
        for (key, last) in &model {
            let got = engine.get(key.as_bytes()).unwrap();
            match last {
                None => assert_eq!(got, None, "{key} was deleted"),
                Some((serial, len)) => assert!(got.unwrap().value == value(key, *serial, *len), "{key} lost its last write"),
            }
        }
    };
    check(&engine);
    let figures = engine.value_log().unwrap();
    assert!(figures.gc_segments_deleted > 0, "{figures:?}");
    assert!(figures.live_bytes * 10 >= figures.disk_bytes * 9, "after a full collection the log is live data: {figures:?}");
    engine.sync().unwrap();
    drop(engine);
    let engine = FjallEngine::open(gc_options(dir.path())).unwrap();
    check(&engine);
}

/// Overwriting every key three times leaves three quarters of the log garbage; the
/// background collector, unprompted, brings live data back to at least half the log.
#[test]
fn after_churn_the_background_collector_brings_live_data_to_half_the_log() {
    const KEYS: u64 = 48;
    let dir = tempfile::tempdir().unwrap();
    let options = |dir: &Path| FjallOptions { gc_garbage_ratio: 0.5, gc_bytes_per_sec: 64 << 20, ..gc_options(dir) };
    let engine = FjallEngine::open(options(dir.path())).unwrap();
    for round in 0..4 {
        for k in 0..KEYS {
            let key = format!("churn{k:03}");
            engine.put(key.as_bytes(), value(&key, round, 32 * KIB), meta(&round.to_string()), Check::Force).unwrap();
        }
    }
    let before = engine.value_log().unwrap();
    assert!(before.live_bytes * 3 < before.disk_bytes, "churn left most of the log garbage: {before:?}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut now = engine.value_log().unwrap();
    while (now.live_bytes as f64) < 0.5 * now.disk_bytes as f64 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
        now = engine.value_log().unwrap();
    }
    assert!(now.live_bytes as f64 >= 0.5 * now.disk_bytes as f64, "live / disk stayed under 0.5: {now:?}");
    // The collector may be between an append and its flush: compare once the two agree, or
    // fail with what they were after 5 s.
    let on_disk = || segments(dir.path()).iter().map(|p| std::fs::metadata(p).unwrap().len()).sum::<u64>();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while on_disk() != engine.value_log().unwrap().disk_bytes && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(on_disk(), engine.value_log().unwrap().disk_bytes, "the figures are the files");
    for k in 0..KEYS {
        let key = format!("churn{k:03}");
        assert!(engine.get(key.as_bytes()).unwrap().unwrap().value == value(&key, 3, 32 * KIB));
    }
    // After a restart the census finds the same: nothing to collect, nothing lost.
    drop(engine);
    let engine = FjallEngine::open(options(dir.path())).unwrap();
    engine.compact().unwrap();
    let after = engine.value_log().unwrap();
    assert!(after.live_bytes as f64 >= 0.9 * after.disk_bytes as f64, "{after:?}");
}

/// A logged value damaged on the medium answers PERM_DATA_ERROR (Corrupt); a collection of
/// everything (MEDIAOPTIMIZE) succeeds, keeps the damaged segment, and the other values are
/// unharmed.
#[test]
fn a_damaged_logged_value_is_reported_and_its_segment_kept() {
    let dir = tempfile::tempdir().unwrap();
    let engine = FjallEngine::open(gc_options(dir.path())).unwrap();
    for k in 0..6 {
        put(&engine, &format!("d{k}"), value("d", k, 20 * KIB), "1", true);
    }
    // Garbage in the same segment, so that it is collected.
    engine.delete(b"d0", Check::Force).unwrap();
    engine.sync().unwrap();
    let segment = segments(dir.path()).pop().unwrap();
    let bytes = std::fs::read(&segment).unwrap();
    let head = b"d/3/";
    let at = bytes.windows(head.len()).position(|w| w == head).expect("d3's value") + 1000;
    let file = std::fs::OpenOptions::new().write(true).open(&segment).unwrap();
    std::os::unix::fs::FileExt::write_at(&file, &[bytes[at] ^ 0x5a], at as u64).unwrap();
    drop(file);
    assert!(matches!(engine.get(b"d3"), Err(Error::Corrupt { .. })), "{:?}", engine.get(b"d3").map(|e| e.map(|e| e.key)));
    engine.compact().unwrap();
    assert!(engine.value_log().unwrap().gc_bytes_copied > 0, "the collection copied nothing before the damage");
    assert!(segment.exists(), "a damaged segment is kept");
    assert!(matches!(engine.get(b"d3"), Err(Error::Corrupt { .. })));
    for k in [1, 2, 4, 5] {
        assert!(engine.get(format!("d{k}").as_bytes()).unwrap().unwrap().value == value("d", k, 20 * KIB));
    }
}

/// A segment cut short inside a value (a file truncated behind the drive's back) answers
/// Corrupt for that value, not a short or padded one; values before the cut are unharmed.
#[test]
fn a_value_cut_short_by_a_truncated_segment_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let engine = FjallEngine::open(gc_options(dir.path())).unwrap();
    for k in 0..4 {
        put(&engine, &format!("t{k}"), value("t", k, 20 * KIB), "1", true);
    }
    let segment = segments(dir.path()).pop().unwrap();
    let bytes = std::fs::read(&segment).unwrap();
    let head = b"t/3/";
    let cut = bytes.windows(head.len()).position(|w| w == head).expect("t3's value") + 1000;
    std::fs::OpenOptions::new().write(true).open(&segment).unwrap().set_len(cut as u64).unwrap();
    match engine.get(b"t3") {
        Err(Error::Corrupt { .. }) => {}
        other => panic!("t3 after the cut: {:?}", other.map(|e| e.map(|e| e.value.len()))),
    }
    for k in 0..3 {
        assert!(engine.get(format!("t{k}").as_bytes()).unwrap().unwrap().value == value("t", k, 20 * KIB));
    }
}

/// An erase deletes every segment once the cleared index is durable; the store goes on.
#[test]
fn an_erase_deletes_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let engine = FjallEngine::open(gc_options(dir.path())).unwrap();
    for k in 0..40 {
        put(&engine, &format!("e{k}"), value("e", k, 16 * KIB), "1", false);
    }
    assert!(!segments(dir.path()).is_empty());
    engine.submit_and_wait(WriteOp::Erase { secure: true }, true).unwrap();
    assert!(segments(dir.path()).is_empty(), "{:?}", segments(dir.path()));
    assert_eq!(engine.get(b"e1").unwrap(), None);
    put(&engine, "e1", value("e", 99, 16 * KIB), "2", true);
    drop(engine);
    let engine = FjallEngine::open(gc_options(dir.path())).unwrap();
    assert_eq!(engine.get(b"e1").unwrap().unwrap().value, value("e", 99, 16 * KIB));
    assert_eq!(engine.get(b"e2").unwrap(), None);
}

/// A batch that logs a key's value and replaces it (or deletes the key) in the same request
/// counts the first record as garbage at once, not only at the next census.
#[test]
fn a_value_replaced_within_its_own_batch_is_garbage_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let engine = FjallEngine::open(gc_options(dir.path())).unwrap();
    let op = |k: &str, n: u64| WriteOp::Put { key: Bytes::from(k.to_owned()), value: value(k, n, 20 * KIB), meta: meta("1"), check: Check::Force };
    let record = (18 + 2 + 20 * KIB) as u64;
    engine.submit_and_wait(WriteOp::Batch(vec![op("b1", 1), op("b1", 2)]), true).unwrap();
    assert_eq!(engine.value_log().unwrap().live_bytes, record, "one of two records is live");
    let delete = WriteOp::Delete { key: Bytes::from_static(b"b2"), check: Check::Force };
    engine.submit_and_wait(WriteOp::Batch(vec![op("b2", 1), delete]), true).unwrap();
    assert_eq!(engine.value_log().unwrap().live_bytes, record, "a value deleted in its own batch is not live");
    assert!(engine.get(b"b1").unwrap().unwrap().value == value("b1", 2, 20 * KIB));
    assert_eq!(engine.get(b"b2").unwrap(), None);
}

/// Which pages of `path` are in the page cache (mincore over a read-only mapping).
fn resident_pages(path: &Path) -> Vec<bool> {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::open(path).unwrap();
    let len = file.metadata().unwrap().len() as usize;
    // SAFETY: a read-only mapping of a file nobody truncates meanwhile, unmapped before
    // return; mincore writes one byte per page into a vector of that many.
    #[allow(unsafe_code, reason = "mmap and mincore have no safe wrapper")]
    unsafe {
        let page = libc::sysconf(libc::_SC_PAGESIZE) as usize;
        let addr = libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, file.as_raw_fd(), 0);
        assert_ne!(addr, libc::MAP_FAILED, "mmap {}", path.display());
        let mut pages = vec![0u8; len.div_ceil(page)];
        let rc = libc::mincore(addr, len, pages.as_mut_ptr());
        libc::munmap(addr, len);
        assert_eq!(rc, 0, "mincore: {}", std::io::Error::last_os_error());
        pages.iter().map(|p| p & 1 == 1).collect()
    }
}

/// The one segment under `dir`: residency of its pages, its length and bytes per page.
fn one_segment_pages(dir: &Path) -> (Vec<bool>, usize, usize) {
    let segment = segments(dir);
    assert_eq!(segment.len(), 1, "one segment: {segment:?}");
    let pages = resident_pages(&segment[0]);
    let len = std::fs::metadata(&segment[0]).unwrap().len() as usize;
    let per_page = len.div_ceil(pages.len());
    (pages, len, per_page)
}

fn share_resident(pages: &[bool]) -> f64 {
    pages.iter().filter(|p| **p).count() as f64 / pages.len().max(1) as f64
}

/// Puts `count` values of `len` bytes, each synced (`sync_each`) or written back and synced
/// at the end.
fn put_big_values(options: FjallOptions, count: usize, len: usize, sync_each: bool) -> Arc<FjallEngine> {
    let engine = FjallEngine::open(options).unwrap();
    for i in 0..count {
        put(&engine, &format!("big-{i:04}"), value("big", i as u64, len), "v1", sync_each);
    }
    engine.sync().unwrap();
    engine
}

/// Puts `count` values of 1 MiB, written back, then syncs; returns the engine, the residency
/// of its one segment's pages and how many bytes each stands for.
fn synced_big_values(dir: &Path, cached_tail: u64, count: usize) -> (Arc<FjallEngine>, Vec<bool>, usize, usize) {
    let engine = put_big_values(FjallOptions { log_cached_tail: cached_tail, ..FjallOptions::new(dir) }, count, 1024 * KIB, false);
    let (pages, len, per_page) = one_segment_pages(dir);
    (engine, pages, len, per_page)
}

#[test]
fn synced_values_leave_the_page_cache_but_for_the_newest() {
    // Under the target directory, not /tmp: on a tmpfs the page cache is the storage.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let tail = spindle_engine::value_log::CACHED_TAIL_BYTES as usize;
    let count = 2 * tail / (1024 * KIB) + 16;
    let (engine, pages, len, per_page) = synced_big_values(dir.path(), tail as u64, count);
    // What is older than the cached tail (less a value's width of slack at the edge) is gone
    // from memory; the newest half of the tail is still there.
    let old = &pages[..(len - tail - 1024 * KIB) / per_page];
    let newest = &pages[(len - tail / 2) / per_page..];
    assert!(share_resident(old) < 0.05, "{:.2} of the synced older pages still cached", share_resident(old));
    assert!(share_resident(newest) > 0.9, "only {:.2} of the newest pages cached", share_resident(newest));
    // Dropped pages read back from the disk, past the page cache: they stay out of it.
    let read_all = |engine: &FjallEngine| {
        for i in 0..count {
            let entry = engine.get(format!("big-{i:04}").as_bytes()).unwrap().unwrap();
            assert_eq!(entry.value, value("big", i as u64, 1024 * KIB), "value {i}");
        }
    };
    read_all(&engine);
    let (pages, _, _) = one_segment_pages(dir.path());
    let old = &pages[..(len - tail - 1024 * KIB) / per_page];
    assert!(share_resident(old) < 0.05, "reading the older values brought {:.2} of their pages back", share_resident(old));
    assert!(engine.value_log().unwrap().direct_reads > 0, "no value was read past the page cache");
    // A segment found at open is not counted on to be cached: read past the cache whole.
    drop(engine);
    let segment = &segments(dir.path())[0];
    drop_from_page_cache(segment);
    let engine = FjallEngine::open(FjallOptions { log_cached_tail: tail as u64, ..FjallOptions::new(dir.path()) }).unwrap();
    read_all(&engine);
    let pages = resident_pages(segment);
    assert!(share_resident(&pages) < 0.05, "reading after a reopen brought {:.2} of the pages back", share_resident(&pages));
    // A census (MEDIAOPTIMIZE takes one of every segment; nothing here is garbage, so nothing
    // is collected) reads records' heads, not their values.
    drop_from_page_cache(segment);
    engine.compact().unwrap();
    let pages = resident_pages(segment);
    assert!(share_resident(&pages) < 0.05, "a census brought {:.2} of the pages into the cache", share_resident(&pages));
    read_all(&engine);
}

/// Asks the kernel to drop `path`'s pages from the page cache.
fn drop_from_page_cache(path: &Path) {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::open(path).unwrap();
    // SAFETY: advice on a descriptor open for the call.
    #[allow(unsafe_code, reason = "posix_fadvise has no safe wrapper")]
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert_eq!(rc, 0);
}

#[test]
fn a_drive_may_keep_every_synced_value_cached() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    // Twice the default tail: with the default, the older half would be dropped.
    let count = 2 * spindle_engine::value_log::CACHED_TAIL_BYTES as usize / (1024 * KIB) + 16;
    let (_engine, pages, _, _) = synced_big_values(dir.path(), u64::MAX, count);
    assert!(share_resident(&pages) > 0.9, "only {:.2} of the pages cached", share_resident(&pages));
}

#[test]
fn values_synced_one_by_one_leave_the_page_cache_too() {
    // Each put synced on its own: every sync drops only what the one before kept, from a page
    // boundary, so nothing is left behind between the drops.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let tail = 4 * 1024 * KIB;
    // Not a multiple of a page: a drop that started mid-page would leave that page cached on
    // every sync, 4 % of these bytes.
    let len = 100 * KIB;
    let count = 3 * tail / len;
    let options = FjallOptions { log_cached_tail: tail as u64, ..FjallOptions::new(dir.path()) };
    let _engine = put_big_values(options, count, len, true);
    let (pages, size, per_page) = one_segment_pages(dir.path());
    let old = &pages[..(size - tail - 128 * KIB) / per_page];
    assert!(share_resident(old) < 0.02, "{:.2} of the synced older pages still cached", share_resident(old));
}

#[test]
fn a_full_segment_leaves_the_page_cache_whole_once_synced() {
    // Segments of 8 MiB, a tail of 4 MiB: the sealed segments are dropped whole, the one
    // being written keeps its tail. (A tail of a whole segment or more keeps everything.)
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let options = FjallOptions { log_segment_bytes: 8 * 1024 * 1024, log_cached_tail: 4 * 1024 * 1024, ..FjallOptions::new(dir.path()) };
    let _engine = put_big_values(options, 28, 1024 * KIB, false);
    let mut found = segments(dir.path());
    assert!(found.len() >= 4, "segments: {found:?}");
    let active = found.pop().unwrap();
    for sealed in &found {
        let pages = resident_pages(sealed);
        assert!(share_resident(&pages) < 0.05, "{}: {:.2} cached", sealed.display(), share_resident(&pages));
    }
    let pages = resident_pages(&active);
    let newest = &pages[pages.len() - pages.len() / 4..];
    assert!(share_resident(newest) > 0.9, "the segment being written: only {:.2} of its newest pages cached", share_resident(newest));
}
