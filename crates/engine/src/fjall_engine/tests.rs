//! Unit tests of the on-disk engine's parts.

use super::healing::*;
use super::store::*;
use super::*;
use crate::{Check, Meta, WriteOp};
use proptest::prelude::*;
use std::path::Path;
use std::collections::BTreeMap;

/// The wait MEDIAOPTIMIZE and a secure erase use for flushes ends: at once when a storage
/// failure stopped them (NoSpace for a full disk), and at its deadline when they never
/// finish (review H2: fjall's own wait spun for ever once a failed flush had stopped the
/// workers, holding the store so that the full-disk reopen could not close it).
#[test]
fn the_wait_for_flushes_is_bounded() {
    use std::time::{Duration, Instant};
    let far = Instant::now() + Duration::from_secs(3600);
    let poll = Duration::from_millis(1);
    assert_eq!(wait_for_flushes(far, poll, || Flushes::Stopped(true)), Err(Error::NoSpace));
    assert!(matches!(wait_for_flushes(far, poll, || Flushes::Stopped(false)), Err(Error::Unavailable(_))));
    let mut polls = 0;
    let stops_later = wait_for_flushes(far, poll, || {
        polls += 1;
        if polls < 5 { Flushes::Pending } else { Flushes::Stopped(true) }
    });
    assert_eq!(stops_later, Err(Error::NoSpace));
    let started = Instant::now();
    let never = wait_for_flushes(started + Duration::from_millis(50), poll, || Flushes::Pending);
    assert!(matches!(never, Err(Error::Unavailable(_))), "{never:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(wait_for_flushes(far, poll, || Flushes::Done), Ok(()));
}

/// MEDIAOPTIMIZE's flush of both keyspaces finishes on a working store, and leaves no
/// sealed memtable behind.
#[test]
fn compact_flushes_every_memtable() {
    let dir = tempfile::tempdir().unwrap();
    let engine = FjallEngine::open(FjallOptions::new(dir.path())).unwrap();
    for i in 0..50u32 {
        engine.put(format!("k{i}").as_bytes(), Bytes::from(vec![1u8; 5000]), Meta::default(), Check::Force).unwrap();
    }
    engine.compact().unwrap();
    let store = engine.store().unwrap();
    assert_eq!(store.meta.sealed_memtable_count() + store.data.sealed_memtable_count(), 0);
    drop(store);
    assert_eq!(engine.get(b"k7").unwrap().unwrap().value.len(), 5000);
}

/// An erase of a stopped store that died after moving the old directory aside (and
/// before deleting it) is finished by the next open; the store opens empty and works.
#[test]
fn an_interrupted_erase_is_finished_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("engine");
    let aside = aside_path(&path);
    assert_eq!(aside, dir.path().join(".engine.spindle-erasing"));
    std::fs::create_dir_all(aside.join("blobs")).unwrap();
    std::fs::write(aside.join("blobs/1"), b"old data").unwrap();
    let engine = FjallEngine::open(FjallOptions::new(&path)).unwrap();
    assert!(!aside.exists(), "the erased store was left behind");
    assert_eq!(engine.approximate_len(), 0);
}

/// A panic on the writer thread (here a callback's; in the field, one of fjall's
/// assertions) answers every request of its group with an error and stops the store's
/// writes with a clear one; nothing is left waiting. Without the catch, the writer thread
/// died with the group's callbacks, and their clients waited for ever.
#[test]
fn a_panic_in_the_writer_answers_every_request_and_stops_writes() {
    let dir = tempfile::tempdir().unwrap();
    let engine = FjallEngine::open(FjallOptions::new(dir.path())).unwrap();
    engine.put(b"before", Bytes::from_static(b"v"), Meta::default(), Check::Force).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let request = |key: &'static [u8], panics: bool| {
        let tx = tx.clone();
        let op = WriteOp::Put { key: Bytes::from_static(key), value: Bytes::from_static(b"v"), meta: Meta::default(), check: Check::Force };
        let on_applied: Option<crate::Callback> = panics.then(|| Box::new(|_| panic!("injected")) as crate::Callback);
        WriteRequest { op, sync: true, on_applied, on_done: Box::new(move |r| drop(tx.send((key, r)))) }
    };
    engine.submit_all(vec![request(b"a", true), request(b"b", false)]);
    drop(tx);
    let mut answers: Vec<_> = (0..2).map(|_| rx.recv_timeout(std::time::Duration::from_secs(10)).expect("an answer")).collect();
    answers.sort_by_key(|(k, _)| *k);
    for (key, result) in &answers {
        assert!(matches!(result, Err(Error::Stopped(m)) if m.contains("injected")), "{key:?}: {result:?}");
    }
    // Later writes are refused at once, saying why; reads go on.
    let later = engine.put(b"c", Bytes::from_static(b"v"), Meta::default(), Check::Force);
    assert!(matches!(&later, Err(Error::Stopped(m)) if m.contains("restart")), "{later:?}");
    assert!(engine.get(b"before").unwrap().is_some());
}

/// Keys the data keyspace holds a value for.
fn data_keys(engine: &FjallEngine) -> Vec<Bytes> {
    engine.store().unwrap().data.iter().map(|g| Bytes::from(g.key().unwrap())).collect()
}

#[derive(Debug, Clone)]
enum Step {
    Put { key: u8, len: usize, force: bool },
    Delete { key: u8, force: bool },
    /// Several puts of one key in one atomic batch (one writer group).
    Batch { key: u8, lens: Vec<usize> },
    /// Several forced puts (`Some(len)`) and deletes (`None`) of one key submitted together,
    /// as separate requests the writer applies as one group.
    Group { key: u8, ops: Vec<Option<usize>> },
    /// Both keyspaces' memtables flushed to tables, so that tables and their filters
    /// answer later steps.
    Flush,
    /// MEDIAOPTIMIZE: compactions, and the value log collected of all its garbage.
    Collect,
}

/// Values from this size on go to the value log in these tests.
const LOG_AT: usize = 3 * INLINE_VALUE_MAX;

fn len() -> impl Strategy<Value = usize> {
    prop_oneof![
        Just(0),
        1..=INLINE_VALUE_MAX,
        Just(INLINE_VALUE_MAX + 1),
        (INLINE_VALUE_MAX + 1)..LOG_AT,
        Just(LOG_AT),
        LOG_AT..(LOG_AT + 4096)
    ]
}

/// Small segments, so that the log starts new ones and collects them within a test.
fn logged_options(dir: &Path) -> FjallOptions {
    FjallOptions { log_threshold: LOG_AT, log_segment_bytes: 24 * 1024, ..FjallOptions::new(dir) }
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0u8..6, len(), any::<bool>()).prop_map(|(key, len, force)| Step::Put { key, len, force }),
        (0u8..6, any::<bool>()).prop_map(|(key, force)| Step::Delete { key, force }),
        (0u8..6, proptest::collection::vec(len(), 1..4)).prop_map(|(key, lens)| Step::Batch { key, lens }),
        (0u8..6, proptest::collection::vec(proptest::option::of(len()), 2..5)).prop_map(|(key, ops)| Step::Group { key, ops }),
        Just(Step::Flush),
        Just(Step::Collect),
    ]
}

/// Keys whose record points into the value log.
fn logged_keys(engine: &FjallEngine) -> Vec<Bytes> {
    let store = engine.store().unwrap();
    store
        .meta
        .iter()
        .filter_map(|g| {
            let (k, v) = g.into_inner().unwrap();
            matches!(record::decode(v.into()).unwrap().1, Placement::Logged(_)).then(|| Bytes::from(k))
        })
        .collect()
}

/// The store matches `model`, the data keyspace holds exactly the large values under the
/// log's threshold (none left behind by a small or logged value or a delete, none missing),
/// and exactly the values from the threshold on are in the log.
fn check(engine: &FjallEngine, model: &BTreeMap<Bytes, (Bytes, Bytes)>) -> std::result::Result<(), TestCaseError> {
    for k in 0u8..6 {
        let key = Bytes::from(vec![k]);
        let got = engine.get(&key).unwrap().map(|e| (e.value, e.meta.version));
        prop_assert_eq!(got, model.get(&key).cloned());
    }
    let large: Vec<Bytes> = model.iter().filter(|(_, (v, _))| v.len() > INLINE_VALUE_MAX && v.len() < LOG_AT).map(|(k, _)| k.clone()).collect();
    prop_assert_eq!(data_keys(engine), large);
    let logged: Vec<Bytes> = model.iter().filter(|(_, (v, _))| v.len() >= LOG_AT).map(|(k, _)| k.clone()).collect();
    prop_assert_eq!(logged_keys(engine), logged);
    Ok(())
}

/// After a collection of everything, the log holds the live values and nothing else: no
/// segment but their records and headers.
fn check_collected(engine: &FjallEngine, model: &BTreeMap<Bytes, (Bytes, Bytes)>) -> std::result::Result<(), TestCaseError> {
    let live: u64 = model
        .iter()
        .filter(|(_, (v, _))| v.len() >= LOG_AT)
        .map(|(k, (v, _))| crate::value_log::format::record_len(k.len(), v.len() as u32))
        .sum();
    let figures = engine.store().unwrap().log.figures();
    prop_assert_eq!(figures.live_bytes, live);
    prop_assert_eq!(figures.disk_bytes, live + figures.segments * crate::value_log::format::SEGMENT_HEADER_LEN);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Values move between the record, the data keyspace and the value log as their size
    /// changes, with forced and versioned writes, deletes and batches, collections of the
    /// log, before and after a reopen.
    #[test]
    fn values_live_where_their_size_puts_them(steps in proptest::collection::vec(step(), 1..40)) {
        let dir = tempfile::tempdir().unwrap();
        let engine = FjallEngine::open(logged_options(dir.path())).unwrap();
        let mut model: BTreeMap<Bytes, (Bytes, Bytes)> = BTreeMap::new();
        let mut serial = 0u32;
        let mut value = |len: usize| {
            serial += 1;
            (Bytes::from(vec![serial as u8; len]), Bytes::from(serial.to_string()))
        };
        for step in steps {
            match step {
                Step::Put { key, len, force } => {
                    let key = Bytes::from(vec![key]);
                    let (v, version) = value(len);
                    let stored = model.get(&key).map(|(_, ver)| ver.clone()).unwrap_or_default();
                    let check = if force { Check::Force } else { Check::Version(stored) };
                    engine.put(&key, v.clone(), Meta { version: version.clone(), ..Meta::default() }, check).unwrap();
                    model.insert(key, (v, version));
                }
                Step::Delete { key, force } => {
                    let key = Bytes::from(vec![key]);
                    let check = if force { Check::Force } else { Check::Version(model.get(&key).map(|(_, v)| v.clone()).unwrap_or_default()) };
                    let result = engine.delete(&key, check);
                    prop_assert_eq!(result.is_ok(), force || model.contains_key(&key));
                    model.remove(&key);
                }
                Step::Batch { key, lens } => {
                    let key = Bytes::from(vec![key]);
                    let mut ops = Vec::new();
                    for len in lens {
                        let (v, version) = value(len);
                        ops.push(WriteOp::Put { key: key.clone(), value: v.clone(), meta: Meta { version: version.clone(), ..Meta::default() }, check: Check::Force });
                        model.insert(key.clone(), (v, version));
                    }
                    engine.submit_and_wait(WriteOp::Batch(ops), false).unwrap();
                }
                Step::Group { key, ops } => {
                    let key = Bytes::from(vec![key]);
                    let (tx, rx) = std::sync::mpsc::channel();
                    let mut requests = Vec::new();
                    for op in ops {
                        let op = match op {
                            Some(len) => {
                                let (v, version) = value(len);
                                model.insert(key.clone(), (v.clone(), version.clone()));
                                WriteOp::Put { key: key.clone(), value: v, meta: Meta { version, ..Meta::default() }, check: Check::Force }
                            }
                            None => {
                                model.remove(&key);
                                WriteOp::Delete { key: key.clone(), check: Check::Force }
                            }
                        };
                        let tx = tx.clone();
                        requests.push(WriteRequest { op, sync: false, on_applied: None, on_done: Box::new(move |r| { let _ = tx.send(r); }) });
                    }
                    let count = requests.len();
                    engine.submit_all(requests);
                    for _ in 0..count {
                        rx.recv().unwrap().unwrap();
                    }
                }
                Step::Flush => {
                    engine.store().unwrap().meta.rotate_memtable_and_wait().unwrap();
                    engine.store().unwrap().data.rotate_memtable_and_wait().unwrap();
                }
                Step::Collect => {
                    engine.compact().unwrap();
                    check_collected(&engine, &model)?;
                }
            }
            check(&engine, &model)?;
        }
        engine.sync().unwrap();
        drop(engine);
        let engine = FjallEngine::open(logged_options(dir.path())).unwrap();
        check(&engine, &model)?;
        engine.compact().unwrap();
        check_collected(&engine, &model)?;
        check(&engine, &model)?;
    }
}

#[test]
fn records_of_the_first_format_are_read_and_replaced_cleanly() {
    // A store as earlier releases left it: every value in the data keyspace, even small
    // ones, and format-1 records.
    let dir = tempfile::tempdir().unwrap();
    let engine = FjallEngine::open(FjallOptions::new(dir.path())).unwrap();
    let meta = |v: &'static [u8], len: usize| Meta { version: Bytes::from_static(v), value_len: len as u32, ..Meta::default() };
    for (key, value) in [(&b"a"[..], &b"small"[..]), (b"b", b"other")] {
        engine.store().unwrap().meta.insert(key, record::encode(&meta(b"1", value.len()), None).unwrap()).unwrap();
        engine.store().unwrap().data.insert(key, value).unwrap();
    }
    assert_eq!(engine.get(b"a").unwrap().unwrap().value, Bytes::from_static(b"small"));
    // Small puts replace the old values and deletes remove them, versioned or forced (a
    // forced put asks the data keyspace, having read no record): none leaves one behind.
    engine.put(b"a", Bytes::from_static(b"new"), meta(b"2", 0), Check::Version(Bytes::from_static(b"1"))).unwrap();
    engine.delete(b"b", Check::Version(Bytes::from_static(b"1"))).unwrap();
    for (key, value) in [(&b"c"[..], &b"forced-put"[..]), (b"d", b"forced-delete")] {
        engine.store().unwrap().meta.insert(key, record::encode(&meta(b"1", value.len()), None).unwrap()).unwrap();
        engine.store().unwrap().data.insert(key, value).unwrap();
    }
    engine.store().unwrap().data.rotate_memtable_and_wait().unwrap();
    engine.put(b"c", Bytes::from_static(b"small"), meta(b"2", 0), Check::Force).unwrap();
    engine.delete(b"d", Check::Force).unwrap();
    assert_eq!(engine.get(b"a").unwrap().unwrap().value, Bytes::from_static(b"new"));
    assert_eq!(engine.get(b"b").unwrap(), None);
    assert_eq!(engine.get(b"c").unwrap().unwrap().value, Bytes::from_static(b"small"));
    assert_eq!(engine.get(b"d").unwrap(), None);
    assert!(data_keys(&engine).is_empty());
}
