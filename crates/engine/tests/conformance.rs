//! The same behaviour tests against both engines, plus restart tests for the on-disk one.

use std::sync::Arc;

use bytes::Bytes;
use spindle_engine::{Check, Engine, Error, FjallEngine, FjallOptions, KeyRange, MemEngine, Meta};

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

fn meta(version: &str) -> Meta {
    Meta { version: b(version), tag: b("tag"), algorithm: Some(1), ..Meta::default() }
}

fn engines() -> Vec<(Arc<dyn Engine>, Option<tempfile::TempDir>)> {
    let dir = tempfile::tempdir().unwrap();
    let fjall: Arc<dyn Engine> = FjallEngine::open(FjallOptions::new(dir.path())).unwrap();
    vec![(MemEngine::new(), None), (fjall, Some(dir))]
}

fn range(start: &str, end: Option<&str>, reverse: bool, max: usize) -> KeyRange {
    KeyRange { start: b(start), start_inclusive: true, end: end.map(b), end_inclusive: true, reverse, max }
}

#[test]
fn put_get_versions_and_deletes() {
    for (e, _dir) in engines() {
        assert_eq!(e.get(b"k").unwrap(), None);
        // A new key with an expected version is a mismatch; without one it is created.
        assert_eq!(e.put(b"k", b("v1"), meta("1"), Check::Version(b("x"))), Err(Error::VersionMismatch));
        e.put(b"k", b("v1"), meta("1"), Check::Version(Bytes::new())).unwrap();
        let got = e.get(b"k").unwrap().unwrap();
        assert_eq!((got.value, got.meta.version, got.meta.tag, got.meta.algorithm), (b("v1"), b("1"), b("tag"), Some(1)));
        // Compare-and-swap.
        assert_eq!(e.put(b"k", b("v2"), meta("2"), Check::Version(Bytes::new())), Err(Error::VersionMismatch));
        e.put(b"k", b("v2"), meta("2"), Check::Version(b("1"))).unwrap();
        e.put(b"k", b("v3"), meta("3"), Check::Force).unwrap();
        let m = e.get_meta(b"k").unwrap().unwrap();
        assert_eq!((m.version, m.value_len), (b("3"), 2));
        // Empty values are values.
        e.put(b"k", Bytes::new(), meta("4"), Check::Force).unwrap();
        assert_eq!(e.get(b"k").unwrap().unwrap().value, Bytes::new());
        // Deletes.
        assert_eq!(e.delete(b"k", Check::Version(b("3"))), Err(Error::VersionMismatch));
        e.delete(b"k", Check::Version(b("4"))).unwrap();
        assert_eq!(e.delete(b"k", Check::Version(Bytes::new())), Err(Error::NotFound));
        e.delete(b"k", Check::Force).unwrap();
        assert_eq!(e.get(b"k").unwrap(), None);
        e.sync().unwrap();
    }
}

#[test]
fn neighbours_and_ranges_sort_as_unsigned_bytes() {
    for (e, _dir) in engines() {
        for k in ["a", "ab", "b", "\u{7f}", "c"] {
            e.put(k.as_bytes(), b(k), Meta::default(), Check::Force).unwrap();
        }
        e.put(&[0xff], b("ff"), Meta::default(), Check::Force).unwrap();
        assert_eq!(e.next(b"a").unwrap().unwrap().key, b("ab"));
        assert_eq!(e.next(b"c").unwrap().unwrap().key, Bytes::from_static(&[0x7f]));
        assert_eq!(e.next(&[0x7f]).unwrap().unwrap().key, Bytes::from_static(&[0xff]));
        assert_eq!(e.next(&[0xff]).unwrap(), None);
        assert_eq!(e.previous(b"ab").unwrap().unwrap().value, b("a"));
        assert_eq!(e.previous(b"a").unwrap(), None);
        assert_eq!(e.keys(&range("a", Some("b"), false, 10)).unwrap(), vec![b("a"), b("ab"), b("b")]);
        assert_eq!(e.keys(&range("a", Some("c"), true, 2)).unwrap(), vec![b("c"), b("b")]);
        let mut exclusive = range("a", Some("b"), false, 10);
        exclusive.start_inclusive = false;
        exclusive.end_inclusive = false;
        assert_eq!(e.keys(&exclusive).unwrap(), vec![b("ab")]);
        assert_eq!(e.keys(&range("c", Some("a"), false, 10)).unwrap(), Vec::<Bytes>::new());
        let mut open_end = range("c", None, false, 10);
        open_end.end = None;
        assert_eq!(e.keys(&open_end).unwrap().len(), 3);
    }
}

#[test]
fn exactly_one_of_racing_compare_and_swaps_wins() {
    for (e, _dir) in engines() {
        e.put(b"race", b("0"), meta("0"), Check::Force).unwrap();
        for round in 0..50u32 {
            let current = round.to_string();
            let winners: usize = std::thread::scope(|s| {
                let handles: Vec<_> = (0..4)
                    .map(|t| {
                        let e = e.clone();
                        let current = current.clone();
                        s.spawn(move || {
                            let next = format!("{}-{t}", round + 1);
                            e.put(b"race", b(&next), meta(&next), Check::Version(b(&current))).is_ok() as usize
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).sum()
            });
            assert_eq!(winners, 1, "round {round}");
            let stored = e.get_meta(b"race").unwrap().unwrap().version;
            e.put(b"race", b("x"), meta(&(round + 1).to_string()), Check::Version(stored)).unwrap();
        }
    }
}

#[test]
fn synced_data_survives_reopen_including_large_values() {
    let dir = tempfile::tempdir().unwrap();
    let big = Bytes::from(vec![7u8; 1024 * 1024]);
    {
        let e = FjallEngine::open(FjallOptions::new(dir.path())).unwrap();
        e.put(b"big", big.clone(), meta("1"), Check::Force).unwrap();
        e.put(b"small", b("s"), meta("2"), Check::Force).unwrap();
        e.put(b"gone", b("g"), meta("3"), Check::Force).unwrap();
        e.delete(b"gone", Check::Force).unwrap();
        e.sync().unwrap();
    }
    let e = FjallEngine::open(FjallOptions::new(dir.path())).unwrap();
    assert_eq!(e.get(b"big").unwrap().unwrap().value, big);
    assert_eq!(e.get(b"small").unwrap().unwrap().meta.version, b("2"));
    assert_eq!(e.get(b"gone").unwrap(), None);
    e.compact().unwrap();
    assert_eq!(e.get(b"big").unwrap().unwrap().value, big);
    assert!(e.disk_usage() > 0);
}

#[test]
fn compare_and_swaps_queued_together_see_each_other() {
    // Submitted back to back without waiting, these land in one writer group: the second must
    // be checked against the first, not against the store.
    for (e, _dir) in engines() {
        let (tx, rx) = std::sync::mpsc::channel();
        for (i, expected) in ["", "", "1"].iter().enumerate() {
            let tx = tx.clone();
            e.submit(spindle_engine::WriteRequest {
                op: spindle_engine::WriteOp::Put { key: b("cas"), value: b("v"), meta: meta(&(i + 1).to_string()), check: Check::Version(b(expected)) },
                sync: false,
                on_applied: None,
                on_done: Box::new(move |r| tx.send((i, r)).unwrap()),
            });
        }
        let mut results: Vec<_> = (0..3).map(|_| rx.recv().unwrap()).collect();
        results.sort_by_key(|(i, _)| *i);
        assert_eq!(results.iter().map(|(_, r)| r.clone()).collect::<Vec<_>>(), vec![Ok(()), Err(Error::VersionMismatch), Ok(())]);
        assert_eq!(e.get_meta(b"cas").unwrap().unwrap().version, b("3"));
    }
}

#[test]
fn concurrent_sync_writes_share_fsyncs() {
    let dir = tempfile::tempdir().unwrap();
    let e = FjallEngine::open(FjallOptions::new(dir.path())).unwrap();
    let writers = 32;
    std::thread::scope(|s| {
        for t in 0..writers {
            let e = e.clone();
            s.spawn(move || {
                for i in 0..20 {
                    let (tx, rx) = std::sync::mpsc::channel();
                    e.submit(spindle_engine::WriteRequest {
                        op: spindle_engine::WriteOp::Put { key: b(&format!("{t}-{i}")), value: b("v"), meta: Meta::default(), check: Check::Force },
                        sync: true,
                        on_applied: None,
                        on_done: Box::new(move |r| tx.send(r).unwrap()),
                    });
                    rx.recv().unwrap().unwrap();
                }
            });
        }
    });
    let syncs = e.sync_count();
    assert!(syncs < (writers * 20) as u64 / 2, "{syncs} fsyncs for {} acknowledged sync writes", writers * 20);
}

fn submit_wait(e: &Arc<dyn Engine>, op: spindle_engine::WriteOp) -> Result<(), Error> {
    let (tx, rx) = std::sync::mpsc::channel();
    e.submit(spindle_engine::WriteRequest { op, sync: true, on_applied: None, on_done: Box::new(move |r| tx.send(r).unwrap()) });
    rx.recv().unwrap()
}

#[test]
fn batches_apply_all_or_nothing() {
    use spindle_engine::WriteOp::{Batch, Delete, Put};
    for (e, _dir) in engines() {
        e.put(b"old", b("o"), meta("1"), Check::Force).unwrap();
        let put = |k: &str, v: &str, check| Put { key: b(k), value: b(v), meta: meta(v), check };
        // The third operation fails: nothing of the batch is applied.
        let failing = Batch(vec![put("a", "1", Check::Force), Delete { key: b("old"), check: Check::Force }, put("b", "1", Check::Version(b("x")))]);
        match submit_wait(&e, failing) {
            Err(Error::BatchFailed { index, cause }) => assert_eq!((index, *cause), (2, Error::VersionMismatch)),
            other => panic!("{other:?}"),
        }
        assert_eq!(e.get(b"a").unwrap(), None);
        assert!(e.get(b"old").unwrap().is_some());
        // Checks see the batch's own earlier operations.
        let chained = Batch(vec![put("a", "1", Check::Version(Bytes::new())), put("a", "2", Check::Version(b("1"))), Delete { key: b("old"), check: Check::Version(b("1")) }]);
        submit_wait(&e, chained).unwrap();
        assert_eq!(e.get(b"a").unwrap().unwrap().value, b("2"));
        assert_eq!(e.get(b"old").unwrap(), None);
    }
}

/// Commits 300 batches (`batch(round)`) while another thread runs `check` over and over; the
/// writing starts only once the reader runs, so the two really overlap.
fn check_while_batches_commit(e: &Arc<dyn Engine>, batch: impl Fn(u32) -> Vec<spindle_engine::WriteOp>, check: impl Fn(&dyn Engine) + Sync) {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let stop = AtomicBool::new(false);
    let checks_done = AtomicUsize::new(0);
    std::thread::scope(|s| {
        let reader = s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                check(e.as_ref());
                checks_done.fetch_add(1, Ordering::Relaxed);
            }
        });
        // A check that fails at once ends the reader: then stop waiting and let join report it.
        while checks_done.load(Ordering::Relaxed) == 0 && !reader.is_finished() {
            std::thread::yield_now();
        }
        for round in 0..300u32 {
            submit_wait(e, spindle_engine::WriteOp::Batch(batch(round))).unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        reader.join().unwrap();
    });
}

#[test]
fn readers_never_see_half_a_batch() {
    use spindle_engine::WriteOp::Put;
    for (e, _dir) in engines() {
        // Each batch writes round r under x1..x4 in that order. Reading x1 and then x4: if
        // batches are atomic, x4 can never be behind x1.
        let batch = |round: u32| {
            let v = b(&round.to_string());
            ["x1", "x2", "x3", "x4"].iter().map(|k| Put { key: b(k), value: v.clone(), meta: Meta::default(), check: Check::Force }).collect()
        };
        check_while_batches_commit(&e, batch, |e| {
            let round = |k: &[u8]| e.get(k).unwrap().map(|x| String::from_utf8(x.value.to_vec()).unwrap().parse::<u32>().unwrap());
            let first = round(b"x1");
            let last = round(b"x4");
            assert!(last >= first, "saw x1 at {first:?} but x4 at {last:?}");
        });
    }
}

/// The other reads see batches whole too: a metadata read of the first and then the last key
/// of a batch, and a key range over keys a batch creates or removes together.
#[test]
fn metadata_reads_and_ranges_never_see_half_a_batch() {
    use spindle_engine::WriteOp::{Delete, Put};
    for (e, _dir) in engines() {
        let batch = |round: u32| {
            let version = b(&format!("{round:05}"));
            let versioned = ["m1", "m2", "m3", "m4"].map(|k| Put { key: b(k), value: b("v"), meta: Meta { version: version.clone(), ..Meta::default() }, check: Check::Force });
            let toggled = ["t1", "t2", "t3", "t4"].map(|k| match round % 2 {
                0 => Put { key: b(k), value: b("v"), meta: Meta::default(), check: Check::Force },
                _ => Delete { key: b(k), check: Check::Force },
            });
            versioned.into_iter().chain(toggled).collect()
        };
        check_while_batches_commit(&e, batch, |e| {
            let version = |k: &[u8]| e.get_meta(k).unwrap().map(|m| m.version);
            let first = version(b"m1");
            let last = version(b"m4");
            assert!(last >= first, "saw m1 at {first:?} but m4 at {last:?}");
            let present = e.keys(&range("t", Some("u"), false, 10)).unwrap().len();
            assert!(present == 0 || present == 4, "a range saw {present} of a batch's 4 keys");
        });
    }
}

#[test]
fn erase_removes_everything_and_the_store_keeps_working() {
    for secure in [false, true] {
        for (e, dir) in engines() {
            for i in 0..50 {
                e.put(format!("e{i}").as_bytes(), Bytes::from(vec![1u8; 10_000]), meta("1"), Check::Force).unwrap();
            }
            submit_wait(&e, spindle_engine::WriteOp::Erase { secure }).unwrap();
            assert_eq!(e.get(b"e1").unwrap(), None);
            assert_eq!(e.next(b"").unwrap(), None);
            e.put(b"after", b("x"), meta("1"), Check::Force).unwrap();
            assert_eq!(e.get(b"after").unwrap().unwrap().value, b("x"));
            if let Some(dir) = dir {
                // Reopening sees the erase too.
                drop(e);
                let reopened = FjallEngine::open(FjallOptions::new(dir.path())).unwrap();
                assert_eq!(reopened.get(b"e2").unwrap(), None);
                assert!(reopened.get(b"after").unwrap().is_some());
            }
        }
    }
}
