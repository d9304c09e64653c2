//! The engine's write-buffer cap: memtables waiting for their flush do not grow without
//! bound under a stream of large values, and writes still all land.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use spindle_engine::{Check, Engine, FjallEngine, FjallOptions, Meta, MIN_WRITE_BUFFER_MEMTABLES};

const MEMTABLE: u64 = 1024 * 1024;
const VALUE_LEN: usize = 64 * 1024;
const WRITERS: usize = 4;
const PUTS_PER_WRITER: usize = 200;

fn key(w: usize, i: usize) -> Vec<u8> {
    format!("cap-{w}-{i:05}").into_bytes()
}

fn value(w: usize, i: usize) -> Bytes {
    let mut v = vec![(w * 31 + i) as u8; VALUE_LEN];
    v[..8].copy_from_slice(&(i as u64).to_le_bytes());
    Bytes::from(v)
}

#[test]
fn memtables_stay_near_the_cap_and_every_write_lands() {
    let dir = tempfile::tempdir().unwrap();
    // A cap under the floor is raised to it.
    // The values go through the memtables (not the value log), which is what is capped.
    let options = FjallOptions { memtable_size: MEMTABLE, write_buffer_memtables: 1, log_threshold: usize::MAX, ..FjallOptions::new(dir.path()) };
    let cap = MIN_WRITE_BUFFER_MEMTABLES * MEMTABLE;
    let engine = FjallEngine::open(options).unwrap();

    let done = Arc::new(AtomicBool::new(false));
    let most = Arc::new(AtomicU64::new(0));
    let sampler = {
        let (engine, done, most) = (engine.clone(), done.clone(), most.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Acquire) {
                most.fetch_max(engine.write_buffer_bytes(), Ordering::Relaxed);
                std::thread::yield_now();
            }
        })
    };
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let engine = engine.clone();
            std::thread::spawn(move || {
                for i in 0..PUTS_PER_WRITER {
                    engine.put(&key(w, i), value(w, i), Meta::default(), Check::Force).unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    done.store(true, Ordering::Release);
    sampler.join().unwrap();

    // 50 MiB went through 1 MiB memtables faster than they flush: the writer had to wait.
    assert!(engine.write_buffer_waits() > 0, "the writer never waited; peak {} bytes", most.load(Ordering::Relaxed));
    // Over the cap only by what one group adds and the active memtables' overshoot until
    // fjall seals them; fjall's own limit alone would allow 4 sealed + 1 active per keyspace.
    let slack = 2 * MEMTABLE + (WRITERS * VALUE_LEN) as u64;
    let peak = most.load(Ordering::Relaxed);
    assert!(peak <= cap + slack, "memtables held {peak} bytes, cap {cap}");
    for w in 0..WRITERS {
        for i in 0..PUTS_PER_WRITER {
            let entry = engine.get(&key(w, i)).unwrap().unwrap_or_else(|| panic!("key {w}/{i} missing"));
            assert!(entry.value == value(w, i), "key {w}/{i} has the wrong value");
        }
    }
}
