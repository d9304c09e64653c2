//! Drive mode: the same load against any Kinetic endpoint. Reads become GETs and writes PUTs
//! of record-size values, at the rates ACT derives (reads plus update reads; writes times the
//! replication factor), on uniformly random keys of a salted key space. A drive does its own
//! large-block writing and defragmentation, so there are no large-block streams: their cost
//! shows in the GET and PUT latencies, which are both judged (both are client transactions).
//!
//! Requests are sent from one pacing thread per stream (an async timer rounds to whole
//! milliseconds) onto multiplexed connections served by one I/O thread; a bound on
//! requests in flight keeps a stalled drive from growing the queue without limit, and waiting
//! for a free slot longer than the max lag stops the test like ACT's lagging threads.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use rand::{Rng, RngCore, SeedableRng};
use serde::Serialize;
use spindle_client::{Client, ClientConfig, PutOptions, Synchronization};

use super::histogram::AtomicBuckets;
use super::rates::Rates;
use super::run::{Op, StreamSpec};
use super::ActError;

/// Requests in flight per stream before the pacing thread waits.
pub const IN_FLIGHT_MAX: usize = 1024;
/// Concurrent puts per connection while salting.
pub const PREP_TASKS_PER_CONNECTION: usize = 32;
/// Values are slices of one random buffer of this size (random, so nothing compresses them).
pub const VALUE_POOL_BYTES: usize = 1 << 20;
/// How long the end of a run waits for requests still in flight.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(60);
/// Keys are `act` and 13 digits: 16 bytes.
pub const KEY_BYTES: usize = 16;

#[derive(Debug, Clone, Serialize)]
pub struct DriveSpec {
    pub target: String,
    /// Records in the key space (keys 0 .. keys-1).
    pub keys: u64,
    /// Connections for the GETs, and as many again for the PUTs.
    pub connections: usize,
    #[serde(serialize_with = "sync_name")]
    pub sync: Synchronization,
}

fn sync_name<S: serde::Serializer>(s: &Synchronization, ser: S) -> Result<S::Ok, S::Error> {
    ser.serialize_str(s.as_str_name())
}

/// The key of record `i`.
pub fn act_key(i: u64) -> Bytes {
    Bytes::from(format!("act{i:013}"))
}

/// A bound on requests in flight, waited on by a pacing thread and released by async tasks.
pub struct Slots {
    used: Mutex<usize>,
    freed: Condvar,
    max: usize,
}

impl Slots {
    pub fn new(max: usize) -> Slots {
        Slots { used: Mutex::new(0), freed: Condvar::new(), max }
    }

    /// Takes a slot, waiting until `deadline` at most; false if none came free.
    pub fn acquire(&self, deadline: Option<Instant>) -> bool {
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        while *used >= self.max {
            let wait = match deadline {
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(w) if !w.is_zero() => w,
                    _ => return false,
                },
                None => Duration::from_secs(1),
            };
            used = self.freed.wait_timeout(used, wait).unwrap_or_else(|e| e.into_inner()).0;
        }
        *used += 1;
        true
    }

    pub fn release(&self) {
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        *used = used.saturating_sub(1);
        self.freed.notify_all();
    }

    /// Waits until nothing is in flight or `timeout` passed; true if drained.
    pub fn drain(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        while *used > 0 {
            let Some(wait) = deadline.checked_duration_since(Instant::now()).filter(|w| !w.is_zero()) else { return false };
            used = self.freed.wait_timeout(used, wait).unwrap_or_else(|e| e.into_inner()).0;
        }
        true
    }
}

/// A single-threaded async runtime on its own thread, for the drive's connections: one thread
/// wakes for every answer, where a work-stealing pool would also wake its idle workers to look
/// for work, each a thread switch that lands in the measured latency on a small machine.
pub struct IoThread {
    pub handle: tokio::runtime::Handle,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl IoThread {
    pub fn start() -> Result<IoThread, ActError> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| ActError::Io(format!("async runtime: {e}")))?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("act-io".into())
            .spawn(move || {
                let _ = runtime.block_on(stopped);
            })
            .map_err(|e| ActError::Io(format!("I/O thread: {e}")))?;
        Ok(IoThread { handle, stop: Some(stop), thread: Some(thread) })
    }

    /// Runs `fut` on the I/O thread and waits for it here (a thread outside any runtime).
    pub fn run<T: Send + 'static>(&self, fut: impl std::future::Future<Output = T> + Send + 'static) -> Result<T, ActError> {
        let (tx, rx) = std::sync::mpsc::channel();
        self.handle.spawn(async move {
            let _ = tx.send(fut.await);
        });
        rx.recv().map_err(|_| ActError::Io("the I/O thread stopped".into()))
    }
}

impl Drop for IoThread {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Connections to the drive.
pub struct Drive {
    pub spec: DriveSpec,
    clients: Vec<Client>,
    pool: Bytes,
    record_bytes: usize,
}

impl Drive {
    pub async fn connect(spec: DriveSpec, record_bytes: u32, seed: u64) -> Result<Drive, ActError> {
        if spec.connections == 0 || spec.keys == 0 {
            return Err(ActError::Config("at least one connection and one key".into()));
        }
        let max_value = spindle_proto::limits::MAX_VALUE_SIZE;
        if record_bytes > max_value {
            return Err(ActError::Config(format!("{record_bytes} B records exceed the Kinetic value limit of {max_value} B")));
        }
        let addr = spec.target.trim_start_matches("kinetic://").to_string();
        // GETs and PUTs each get `connections` of their own: a drive answers one connection's
        // requests in order, and ACT's record reads never wait behind its writes.
        let mut clients = Vec::with_capacity(2 * spec.connections);
        for _ in 0..2 * spec.connections {
            clients.push(Client::connect(addr.as_str(), ClientConfig::default()).await?);
        }
        let mut pool = vec![0u8; VALUE_POOL_BYTES.max(2 * record_bytes as usize)];
        rand::rngs::StdRng::seed_from_u64(seed).fill_bytes(&mut pool);
        Ok(Drive { spec, clients, pool: Bytes::from(pool), record_bytes: record_bytes as usize })
    }

    fn value(&self, rng: &mut impl Rng) -> Bytes {
        let at = rng.random_range(0..=self.pool.len() - self.record_bytes);
        self.pool.slice(at..at + self.record_bytes)
    }

    /// Salts the key space: puts every key once (WRITEBACK, then one FLUSHALLDATA). Returns
    /// the seconds it took.
    pub async fn prep(self: &Arc<Self>, seed: u64) -> Result<f64, ActError> {
        let started = Instant::now();
        let next = Arc::new(AtomicU64::new(0));
        let mut tasks = tokio::task::JoinSet::new();
        for (c, client) in self.clients.iter().enumerate() {
            for t in 0..PREP_TASKS_PER_CONNECTION {
                let (drive, client, next) = (self.clone(), client.clone(), next.clone());
                let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ ((c * PREP_TASKS_PER_CONNECTION + t) as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
                tasks.spawn(async move {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= drive.spec.keys {
                            return Ok::<(), ActError>(());
                        }
                        client.put(&act_key(i), drive.value(&mut rng), PutOptions::forced(Synchronization::Writeback)).await?;
                    }
                });
            }
        }
        while let Some(done) = tasks.join_next().await {
            done.map_err(|e| ActError::Io(format!("preparation task: {e}")))??;
        }
        self.clients[0].flush_all_data().await?;
        Ok(started.elapsed().as_secs_f64())
    }

    /// The GET and PUT streams of one run, spawning requests on `runtime`.
    pub fn streams(self: &Arc<Self>, rates: &Rates, runtime: &tokio::runtime::Handle, max_lag: Option<Duration>, slots: &Arc<Slots>, seed: u64) -> Vec<StreamSpec> {
        let gets = Arc::new(AtomicBuckets::default());
        let puts = Arc::new(AtomicBuckets::default());
        let op = |put: bool, hist: Arc<AtomicBuckets>| {
            let (drive, slots, runtime) = (self.clone(), slots.clone(), runtime.clone());
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ if put { 0x5055_5453 } else { 0x4745_5453 });
            let mut n = 0usize;
            let name = if put { "puts" } else { "gets" };
            Box::new(move |due: Instant| {
                if !slots.acquire(max_lag.map(|m| due + m)) {
                    return Err(format!("{name} can't keep up: {IN_FLIGHT_MAX} requests in flight for longer than the max lag"));
                }
                let key = act_key(rng.random_range(0..drive.spec.keys));
                let connections = drive.spec.connections;
                let client = drive.clients[usize::from(put) * connections + n % connections].clone();
                n += 1;
                let value = put.then(|| drive.value(&mut rng));
                let (hist, slots, sync, record) = (hist.clone(), slots.clone(), drive.spec.sync, drive.record_bytes);
                runtime.spawn(async move {
                    let ok = match value {
                        Some(v) => client.put(&key, v, PutOptions::forced(sync)).await.is_ok(),
                        None => matches!(client.get(&key).await, Ok(Some(e)) if e.value.len() == record),
                    };
                    if ok {
                        hist.record(due.elapsed());
                    } else {
                        hist.record_error(due.elapsed());
                    }
                    slots.release();
                });
                Ok(())
            }) as Op
        };
        vec![
            StreamSpec { name: "gets", judged: true, rate: rates.internal_reads_per_sec, hist: gets.clone(), ops: vec![op(false, gets)] },
            StreamSpec { name: "puts", judged: true, rate: rates.internal_writes_per_sec, hist: puts.clone(), ops: vec![op(true, puts)] },
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_16_bytes_and_distinct() {
        assert_eq!(act_key(0).len(), KEY_BYTES);
        assert_eq!(act_key(9_999_999_999_999).len(), KEY_BYTES);
        assert_ne!(act_key(1), act_key(10));
    }

    #[test]
    fn slots_bound_what_is_in_flight_and_time_out_at_the_deadline() {
        let slots = Arc::new(Slots::new(2));
        assert!(slots.acquire(None) && slots.acquire(None));
        let t = Instant::now();
        assert!(!slots.acquire(Some(t + Duration::from_millis(30))));
        assert!(t.elapsed() >= Duration::from_millis(30));
        let s = slots.clone();
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            s.release();
            s.release();
        });
        assert!(slots.acquire(Some(Instant::now() + Duration::from_secs(5))), "a released slot wakes the waiter");
        releaser.join().unwrap();
        slots.release();
        assert!(slots.drain(Duration::from_millis(10)));
    }
}
