//! The engine's boundary (hardening issue, items 14 and 16): keys fjall would assert on are
//! refused, never passed on, and reads with such keys answer as if the key were absent; the
//! store's size on disk is a figure the engine keeps, not a walk of its directory.

use bytes::Bytes;
use spindle_engine::{Check, Engine, Error, FjallEngine, FjallOptions, KeyRange, Meta, KEY_SIZE_MAX};

/// A key one byte over fjall's limit used to panic the writer thread (fjall asserts), after
/// which every write failed. Now it is refused, and the store goes on.
#[test]
fn keys_over_the_engines_limit_are_refused_and_the_store_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let engine = FjallEngine::open(FjallOptions::new(dir.path())).unwrap();
    let longest = vec![b'k'; KEY_SIZE_MAX];
    let too_long = vec![b'k'; KEY_SIZE_MAX + 1];
    engine.put(&longest, Bytes::from_static(b"v"), Meta::default(), Check::Force).unwrap();
    let refused = engine.put(&too_long, Bytes::from_static(b"v"), Meta::default(), Check::Force);
    assert!(matches!(refused, Err(Error::Invalid(_))), "{refused:?}");
    assert!(matches!(engine.delete(&too_long, Check::Force), Err(Error::Invalid(_))));
    engine.put(b"after", Bytes::from_static(b"v"), Meta::default(), Check::Force).unwrap();

    // Reads with a key over the limit: absent, and neighbours and ranges as for any key.
    assert_eq!(engine.get(&too_long).unwrap(), None);
    assert_eq!(engine.get_meta(&too_long).unwrap(), None);
    assert_eq!(engine.previous(&too_long).unwrap().unwrap().key, Bytes::from(longest.clone()));
    assert_eq!(engine.next(&too_long).unwrap(), None);
    let range = KeyRange {
        start: Bytes::from_static(b"a"),
        start_inclusive: true,
        end: Some(Bytes::from(too_long.clone())),
        end_inclusive: false,
        reverse: false,
        max: 10,
    };
    assert_eq!(engine.keys(&range).unwrap(), vec![Bytes::from_static(b"after"), Bytes::from(longest.clone())]);
    let range = KeyRange { start: Bytes::from(too_long), end: None, ..range };
    assert!(engine.keys(&range).unwrap().is_empty());
}

/// The capacity check asks for the store's usage on every put. It used to walk the data
/// directory (under a lock every put takes); it is now what fjall keeps in memory: tables,
/// blob files and memtables. So a file someone leaves in the directory is not counted, a
/// thousand of them cost nothing, and writes and their removal move the figure.
#[test]
fn disk_usage_is_kept_by_the_engine_not_read_from_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    let engine = FjallEngine::open(FjallOptions::new(dir.path())).unwrap();
    let empty = engine.disk_usage();
    std::fs::write(dir.path().join("foreign"), vec![1u8; 8 << 20]).unwrap();
    std::fs::create_dir(dir.path().join("many")).unwrap();
    for i in 0..2000 {
        std::fs::write(dir.path().join("many").join(i.to_string()), b"x").unwrap();
    }
    assert!(engine.disk_usage() < empty + (1 << 20), "a foreign file was counted: {} then {}", empty, engine.disk_usage());
    let started = std::time::Instant::now();
    for _ in 0..200 {
        std::hint::black_box(engine.disk_usage());
    }
    assert!(started.elapsed() < std::time::Duration::from_millis(200), "200 readings took {:?}", started.elapsed());

    let value = Bytes::from(vec![7u8; 64 * 1024]);
    for i in 0..64 {
        engine.put(format!("k{i:03}").as_bytes(), value.clone(), Meta::default(), Check::Force).unwrap();
    }
    let written = engine.disk_usage();
    assert!(written >= empty + (4 << 20), "4 MiB written, usage {empty} then {written}");
    engine.sync().unwrap();
    engine.compact().unwrap();
    assert!(engine.disk_usage() >= empty + (4 << 20), "usage after a flush and compaction: {}", engine.disk_usage());
}
