//! What the simulated clients do, and what they saw: puts of values unique in the run,
//! deletes, reads, compare-and-swaps on the version a read returned (puts and deletes, "if
//! absent" included) and batches, on a few keys so that they race. Every operation is recorded
//! for the history checker with its call and return in simulated time; one whose outcome the
//! client cannot know (an error) as possibly done at any moment after its call.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use spindle_cluster::batch::BatchOp;
use spindle_cluster::history::{Event, Op};
use spindle_cluster::store::{Condition, Store};
use spindle_cluster::ClusterError;

/// Keys share a hash tag in groups, so that a batch can span several keys of one group.
pub const GROUPS: u64 = 4;

pub fn key_name(key: u64) -> String {
    format!("{{g{}}}key-{key}", key % GROUPS)
}

fn now_micros() -> u64 {
    crate::etcd::now().as_micros() as u64
}

#[derive(Default)]
pub struct History {
    pub events: Mutex<Vec<Event>>,
    /// Each batch's writes, `(key, value)`: for the check that a batch lands whole or not at all.
    pub batches: Mutex<Vec<Vec<(u64, u64)>>>,
    pub acknowledged: AtomicU64,
    pub failed: AtomicU64,
}

impl History {
    pub(crate) fn record(&self, event: Event) {
        if event.ret.is_some() {
            self.acknowledged.fetch_add(1, Ordering::Relaxed);
        } else {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
        self.events.lock().push(event);
    }
}

fn value_of(bytes: &[u8]) -> Option<u64> {
    bytes.try_into().ok().map(u64::from_be_bytes)
}

/// A client's run of `ops` operations on `keys` keys, `workers` of them at a time over its one
/// cluster client (as the S3 gateway runs its requests): an operation can load a newer map
/// while another is still under way with the one it was decided with.
pub async fn client(store: Store, history: Arc<History>, client: u64, keys: u64, ops: u64, workers: u64, seed: u64) {
    let workers = workers.max(1);
    let runs = (0..workers).map(|w| {
        let share = ops / workers + u64::from(w < ops % workers);
        worker(store.clone(), history.clone(), (client << WORKER_BITS) | w, keys, share, seed.wrapping_add(w.wrapping_mul(0x9e37_79b9)))
    });
    futures_util::future::join_all(runs).await;
}

/// Bits of a writer's number that tell a client's workers apart.
const WORKER_BITS: u32 = 4;

/// One worker's operations, one at a time; values are `(writer << 32) | n`.
async fn worker(store: Store, history: Arc<History>, client: u64, keys: u64, ops: u64, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut n = 0u64;
    for _ in 0..ops {
        let key = rng.random_range(0..keys);
        let name = key_name(key);
        let roll = rng.random_range(0..20);
        let call = now_micros();
        match roll {
            0..=5 => {
                n += 1;
                let v = (client << 32) | n;
                let r = store.put(name.as_bytes(), Bytes::copy_from_slice(&v.to_be_bytes()), Condition::None).await;
                history.record(Event { key, op: Op::Write(Some(v)), call, ret: r.is_ok().then(now_micros) });
            }
            6 => {
                let event = match store.delete(name.as_bytes(), Condition::None).await {
                    Ok(true) => Event { key, op: Op::Write(None), call, ret: Some(now_micros()) },
                    // A delete that found nothing wrote nothing: it read "absent".
                    Ok(false) => Event { key, op: Op::Read(None), call, ret: Some(now_micros()) },
                    Err(_) => Event { key, op: Op::Write(None), call, ret: None },
                };
                history.record(event);
            }
            7..=11 => {
                if let Ok(v) = store.get(name.as_bytes()).await {
                    let value = v.and_then(|v| value_of(&v.value));
                    history.record(Event { key, op: Op::Read(value), call, ret: Some(now_micros()) });
                }
            }
            12..=17 => {
                n += 1;
                cas(&store, &history, key, (client << 32) | n, rng.random_range(0..4) == 0).await;
            }
            _ => {
                n += 1;
                batch(&store, &history, &mut rng, key, keys, client, &mut n).await;
            }
        }
    }
}

/// Reads `key`, then writes `new` (or deletes, if `delete` and there is something) on the
/// version read.
async fn cas(store: &Store, history: &History, key: u64, new: u64, delete: bool) {
    let name = key_name(key);
    let call = now_micros();
    let Ok(read) = store.get(name.as_bytes()).await else { return };
    let expect = read.as_ref().and_then(|v| value_of(&v.value));
    history.record(Event { key, op: Op::Read(expect), call, ret: Some(now_micros()) });
    let condition = read.map_or(Condition::Absent, |v| Condition::Version(v.version));
    let call = now_micros();
    let (new, result) = if delete && expect.is_some() {
        (None, store.delete(name.as_bytes(), condition).await.map(drop))
    } else {
        (Some(new), store.put(name.as_bytes(), Bytes::copy_from_slice(&new.to_be_bytes()), condition).await.map(drop))
    };
    let event = match result {
        Ok(()) => Event { key, op: Op::Cas { expect, new }, call, ret: Some(now_micros()) },
        Err(ClusterError::VersionMismatch { .. }) => Event { key, op: Op::Refused { expect }, call, ret: Some(now_micros()) },
        Err(_) => Event { key, op: Op::Cas { expect, new }, call, ret: None },
    };
    history.record(event);
}

/// Puts new values under two or three keys of `key`'s group in one batch.
async fn batch(store: &Store, history: &History, rng: &mut StdRng, key: u64, keys: u64, client: u64, n: &mut u64) {
    let group: Vec<u64> = (0..keys).filter(|k| k % GROUPS == key % GROUPS).collect();
    let count = rng.random_range(2..=3).min(group.len());
    let mut chosen: Vec<u64> = Vec::new();
    while chosen.len() < count {
        let k = group[rng.random_range(0..group.len())];
        if !chosen.contains(&k) {
            chosen.push(k);
        }
    }
    let writes: Vec<(u64, u64)> = chosen
        .iter()
        .map(|&k| {
            *n += 1;
            (k, (client << 32) | *n)
        })
        .collect();
    let ops = writes
        .iter()
        .map(|&(k, v)| BatchOp::Put { key: Bytes::from(key_name(k)), value: Bytes::copy_from_slice(&v.to_be_bytes()), condition: Condition::None })
        .collect();
    let call = now_micros();
    let ret = store.batch(ops).await.is_ok().then(now_micros);
    history.batches.lock().push(writes.clone());
    for &(k, v) in &writes {
        history.record(Event { key: k, op: Op::Write(Some(v)), call, ret });
    }
}
