//! Spindle's benchmark lab. This first piece measures puts and gets against any Kinetic
//! endpoint: several connections, each keeping `depth` requests in flight through a pipelined
//! connection (one task per connection, one write per round), latencies recorded per operation
//! into an HdrHistogram.

// Unsafe only at system calls and the C API of LevelDB and RocksDB, each allowed where it stands.
#![deny(unsafe_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::Serialize;

use spindle_client::{ClientConfig, ClientError, MessageType, Pipeline, StatusCode, Synchronization};
use spindle_proto::pb::command::{Body, KeyValue};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Operation {
    Put,
    Get,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyOrder {
    Sequential,
    Random,
}

#[derive(Debug, Clone, Serialize)]
pub struct BenchSpec {
    pub target: String,
    pub operation: Operation,
    pub count: u64,
    pub value_size: usize,
    pub key_size: usize,
    pub connections: usize,
    /// Requests in flight per connection.
    pub depth: usize,
    pub order: KeyOrder,
    #[serde(serialize_with = "sync_name")]
    pub sync: Synchronization,
    /// End a put run with FLUSHALLDATA on every connection, inside the timed window.
    pub flush_at_end: bool,
    pub seed: u64,
    /// Item i uses key number `key_offset + i * key_stride`: a stride of 2 writes every other
    /// key, so offset 1 reads keys that are absent yet inside the written range.
    pub key_offset: u64,
    pub key_stride: u64,
}

impl BenchSpec {
    /// A spec with the defaults of `spindle bench` (16-byte sequential keys, 8 x 16, WRITEBACK).
    pub fn new(target: &str, operation: Operation, count: u64, value_size: usize) -> Self {
        BenchSpec {
            target: target.to_string(),
            operation,
            count,
            value_size,
            key_size: 16,
            connections: 8,
            depth: 16,
            order: KeyOrder::Sequential,
            sync: Synchronization::Writeback,
            flush_at_end: false,
            seed: 1,
            key_offset: 0,
            key_stride: 1,
        }
    }

    /// The key of item `i` (after ordering).
    pub fn key(&self, item: u64) -> Vec<u8> {
        key_for(self.key_offset + item * self.key_stride.max(1), self.key_size)
    }
}

fn sync_name<S: serde::Serializer>(s: &Synchronization, ser: S) -> Result<S::Ok, S::Error> {
    ser.serialize_str(s.as_str_name())
}

#[derive(Debug, Clone, Serialize)]
pub struct BenchResult {
    pub spec: BenchSpec,
    pub ops: u64,
    pub errors: u64,
    pub seconds: f64,
    pub ops_per_second: f64,
    pub megabytes_per_second: f64,
    pub latency_us: Percentiles,
    /// CPU time (user + system) the bench process spent while the operations ran (the timed
    /// window: connecting and opening come before it). For a networked target this is the
    /// load generator's own cost; for an in-process one it includes the store's.
    pub bench_cpu_seconds: f64,
    /// Operations per second of bench CPU: the rate the load generator could drive with one
    /// core to itself (networked targets).
    pub ops_per_bench_cpu_second: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Percentiles {
    /// Operations per 10 ms latency bin (0-10 ms, 10-20 ms, ...; the last bin is 100 ms and
    /// more), as the Kinetic paper's histograms.
    pub bins_10ms: Vec<u64>,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
    pub mean: f64,
}

/// The key of item `i`: zero-padded decimal, padded or cut to `size` bytes, so keys sort in
/// item order (the sequential order of the papers' experiments).
pub fn key_for(i: u64, size: usize) -> Vec<u8> {
    // Decimal digits from the right, at least 16 of them (zero-padded) and all 20 of a large i.
    const PADDED: usize = 16;
    let mut buf = [b'0'; 20];
    let (mut rest, mut start) = (i, buf.len());
    loop {
        start -= 1;
        buf[start] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    let digits = &buf[start.min(buf.len() - PADDED)..];
    let mut key = Vec::with_capacity(size);
    if size >= digits.len() {
        key.resize(size - digits.len(), b'k');
        key.extend_from_slice(digits);
    } else {
        key.extend_from_slice(&digits[digits.len() - size..]);
    }
    key
}

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("invalid benchmark: {0}")]
    Invalid(String),
}

/// The timed window of a run: wall clock and the process's CPU time, both taken once the
/// connections are up, so that a client's per-operation cost does not carry its setup (a
/// cluster client's etcd connection and map load, a TLS handshake) spread over the count.
pub(crate) struct Window {
    started: Instant,
    cpu: f64,
}

impl Window {
    pub(crate) fn open() -> Window {
        Window { cpu: process_cpu_seconds(), started: Instant::now() }
    }

    /// The wall time and the process's CPU seconds since `open`.
    pub(crate) fn close(&self) -> (Duration, f64) {
        (self.started.elapsed(), (process_cpu_seconds() - self.cpu).max(0.0))
    }
}

/// User plus system CPU time of this process so far.
pub(crate) fn process_cpu_seconds() -> f64 {
    // SAFETY: rusage is plain old data; all-zero is a valid value to be overwritten.
    #[allow(unsafe_code, reason = "getrusage(2) has no safe wrapper in std")]
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage fills the struct we pass; RUSAGE_SELF is always valid.
    #[allow(unsafe_code, reason = "getrusage(2) has no safe wrapper in std")]
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    if rc != 0 {
        return 0.0;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// Runs a put or get benchmark. `spec.target` is a Kinetic endpoint (`HOST:PORT` or
/// `kinetic://HOST:PORT`), Spindle's engine in this process: `embedded:DIR` (on disk) or
/// `memory:` (no storage), which shows what the protocol and the network cost, or a redis
/// server (`redis://HOST:PORT`: SET and GET), or LevelDB and RocksDB through their own
/// libraries (`leveldb:DIR`, `rocksdb:DIR`: the paper's "LevelDB servers").
pub async fn run(spec: BenchSpec) -> Result<BenchResult, BenchError> {
    if spec.connections == 0 || spec.depth == 0 || spec.key_size < 1 {
        return Err(BenchError::Invalid("connections, depth and key size must be at least 1".into()));
    }
    if let (Some((kind, _)), Some(target::InProcess::Lsm(db))) = (lsm_library::LsmKind::parse(&spec.target), target::in_process(&spec.target)?) {
        return lsm_library::run(kind, db, spec).await;
    }
    if !target::is_kinetic(&spec.target) {
        let stores = target::connect(&spec.target, spec.connections, target::Needs { scans: false }).await?;
        return run_sessions(spec, stores).await;
    }
    let addr = spec.target.trim_start_matches("kinetic://").to_string();
    let mut pipelines = Vec::with_capacity(spec.connections);
    for _ in 0..spec.connections {
        pipelines.push(Pipeline::connect(addr.as_str(), ClientConfig::default()).await?);
    }
    let shared = Arc::new(Work::new(spec.clone()));
    let window = Window::open();
    let tasks: Vec<_> = pipelines.into_iter().map(|p| tokio::spawn(drive_connection(p, shared.clone()))).collect();
    let mut hist = new_histogram();
    let mut errors = 0;
    let mut finished = Vec::new();
    for t in tasks {
        let (h, e, p) = t.await.map_err(|e| BenchError::Invalid(e.to_string()))??;
        hist.add(h).map_err(|e| BenchError::Invalid(e.to_string()))?;
        errors += e;
        finished.push(p);
    }
    if spec.operation == Operation::Put && spec.flush_at_end {
        for mut p in finished {
            p.queue(MessageType::Flushalldata, None, &[]);
            p.flush().await?;
            let (_, response) = p.recv().await?;
            if response.status() != StatusCode::Success {
                return Err(BenchError::Invalid(format!("FLUSHALLDATA answered {:?}", response.status())));
            }
        }
    }
    Ok(summarize(spec, &hist, errors, window.close()))
}

fn bins_10ms(hist: &Histogram<u64>) -> Vec<u64> {
    let mut bins = vec![0u64; 11];
    for v in hist.iter_recorded() {
        let bin = ((v.value_iterated_to() / 10_000) as usize).min(10);
        bins[bin] += v.count_at_value();
    }
    bins
}

/// The result of `spec.count` operations that took `elapsed` and `cpu` seconds of this
/// process's CPU (a [`Window`]'s figures).
fn summarize(spec: BenchSpec, hist: &Histogram<u64>, errors: u64, (elapsed, cpu): (Duration, f64)) -> BenchResult {
    let seconds = elapsed.max(Duration::from_micros(1)).as_secs_f64();
    let ops = spec.count;
    BenchResult {
        ops,
        errors,
        seconds,
        ops_per_second: ops as f64 / seconds,
        megabytes_per_second: ops as f64 * spec.value_size as f64 / seconds / 1e6,
        latency_us: Percentiles {
            bins_10ms: bins_10ms(hist),
            p50: hist.value_at_quantile(0.5),
            p90: hist.value_at_quantile(0.9),
            p99: hist.value_at_quantile(0.99),
            p999: hist.value_at_quantile(0.999),
            max: hist.max(),
            mean: hist.mean(),
        },
        bench_cpu_seconds: cpu,
        ops_per_bench_cpu_second: ops as f64 / cpu.max(1e-6),
        spec,
    }
}

/// Runs `spec` through `stores` (one per connection), `depth` tasks per store, each taking the
/// next item and waiting for its answer, timed per operation; `flush_at_end` flushes inside the
/// timed window. For targets without a pipelined path (in-process engines, redis).
async fn run_sessions(spec: BenchSpec, stores: Vec<Arc<dyn target::Store>>) -> Result<BenchResult, BenchError> {
    let work = Arc::new(Work::new(spec.clone()));
    let window = Window::open();
    let handles: Vec<_> = (0..stores.len() * spec.depth)
        .map(|task| {
            let (work, store) = (work.clone(), stores[task % stores.len()].clone());
            tokio::spawn(async move {
                let mut hist = new_histogram();
                let mut errors = 0u64;
                while let Some(key) = work.next_key() {
                    let key = Bytes::from(key);
                    let t = Instant::now();
                    let ok = match work.spec.operation {
                        Operation::Put => store.put(key, work.value.clone(), work.spec.sync).await.is_ok(),
                        Operation::Get => matches!(store.get(key).await, Ok(Some(_))),
                    };
                    hist.saturating_record(t.elapsed().as_micros().max(1) as u64);
                    errors += u64::from(!ok);
                }
                (hist, errors)
            })
        })
        .collect();
    let mut hist = new_histogram();
    let mut errors = 0;
    for h in handles {
        let (part, e) = h.await.map_err(|e| BenchError::Invalid(e.to_string()))?;
        hist.add(part).map_err(|e| BenchError::Invalid(e.to_string()))?;
        errors += e;
    }
    if spec.operation == Operation::Put && spec.flush_at_end {
        stores[0].flush().await.map_err(BenchError::Invalid)?;
    }
    Ok(summarize(spec, &hist, errors, window.close()))
}

pub mod lsm_library;
pub mod session;
pub mod target;

/// The items of one run, handed out in the spec's key order to whichever worker asks next.
struct Work {
    order: Vec<u64>,
    next: AtomicU64,
    value: Bytes,
    spec: BenchSpec,
}

impl Work {
    fn new(spec: BenchSpec) -> Work {
        let mut order: Vec<u64> = (0..spec.count).collect();
        if spec.order == KeyOrder::Random {
            order.shuffle(&mut rand::rngs::StdRng::seed_from_u64(spec.seed));
        }
        Work { order, next: AtomicU64::new(0), value: bench_value(spec.value_size, spec.seed), spec }
    }

    /// The key of the next item, until the run's count is reached.
    fn next_key(&self) -> Option<Vec<u8>> {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        (i < self.spec.count).then(|| self.spec.key(self.order[i as usize]))
    }
}

/// The value every put of a run stores: random bytes, so that no target's compression (LevelDB
/// and RocksDB compress blocks with Snappy by default) makes its figures look better than the
/// bytes a user stores would.
pub fn bench_value(size: usize, seed: u64) -> Bytes {
    let mut value = vec![0u8; size];
    rand::RngCore::fill_bytes(&mut rand::rngs::StdRng::seed_from_u64(seed ^ 0x5eed_1e55), &mut value);
    Bytes::from(value)
}

fn new_histogram() -> Histogram<u64> {
    Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("valid bounds")
}

/// Keeps `depth` requests in flight on one connection until the work runs out: one task, one
/// write per round of requests, latencies from the write that sent a request to its answer.
async fn drive_connection(mut p: Pipeline, work: Arc<Work>) -> Result<(Histogram<u64>, u64, Pipeline), BenchError> {
    let spec = &work.spec;
    let mut hist = new_histogram();
    let mut errors = 0;
    let mut in_flight = InFlight::default();
    loop {
        while in_flight.outstanding() < spec.depth {
            let Some(key) = work.next_key() else { break };
            let key = Bytes::from(key);
            let seq = match spec.operation {
                Operation::Put => {
                    let kv = KeyValue {
                        key: Some(key),
                        force: Some(true),
                        synchronization: Some(spec.sync as i32),
                        ..KeyValue::default()
                    };
                    p.queue(MessageType::Put, Some(Body { key_value: Some(kv), ..Body::default() }), &work.value)
                }
                Operation::Get => {
                    let kv = KeyValue { key: Some(key), ..KeyValue::default() };
                    p.queue(MessageType::Get, Some(Body { key_value: Some(kv), ..Body::default() }), &[])
                }
            };
            in_flight.queued(seq);
        }
        if in_flight.outstanding() == 0 {
            return Ok((hist, errors, p));
        }
        in_flight.sent(Instant::now());
        p.flush().await?;
        loop {
            let (ack, status) = p.recv_status().await?;
            let sent = in_flight
                .answered(ack)
                .ok_or_else(|| BenchError::Invalid(format!("answer to unknown or already answered sequence {ack}")))?;
            hist.saturating_record(sent.elapsed().as_micros().max(1) as u64);
            if status != StatusCode::Success {
                errors += 1;
            }
            if !p.response_buffered() {
                break;
            }
        }
    }
}

/// The requests of one connection that await their answers. A [`Pipeline`] numbers its
/// requests consecutively, so they sit in a queue indexed by sequence; answers may come in
/// any order.
#[derive(Debug, Default)]
struct InFlight {
    /// Sequence of `slots[0]`.
    first: i64,
    slots: std::collections::VecDeque<Slot>,
    outstanding: usize,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Slot {
    Queued,
    Sent(Instant),
    Answered,
}

impl InFlight {
    fn outstanding(&self) -> usize {
        self.outstanding
    }

    fn queued(&mut self, sequence: i64) {
        if self.slots.is_empty() {
            self.first = sequence;
        }
        assert_eq!(sequence, self.first + self.slots.len() as i64, "a pipeline numbers its requests consecutively");
        self.slots.push_back(Slot::Queued);
        self.outstanding += 1;
    }

    /// Every queued request went out at `at`.
    fn sent(&mut self, at: Instant) {
        for slot in self.slots.iter_mut().rev() {
            match slot {
                Slot::Queued => *slot = Slot::Sent(at),
                Slot::Sent(_) => break,
                Slot::Answered => {}
            }
        }
    }

    /// When the request `sequence` was sent, unless it is not awaiting an answer.
    fn answered(&mut self, sequence: i64) -> Option<Instant> {
        let index = usize::try_from(sequence.checked_sub(self.first)?).ok()?;
        let Slot::Sent(at) = *self.slots.get(index)? else { return None };
        self.slots[index] = Slot::Answered;
        self.outstanding -= 1;
        while self.slots.front() == Some(&Slot::Answered) {
            self.slots.pop_front();
            self.first += 1;
        }
        Some(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_zero_padded_decimals() {
        assert_eq!(key_for(42, 16), b"0000000000000042");
        assert_eq!(key_for(42, 20), b"kkkk0000000000000042");
        assert_eq!(key_for(123456, 4), b"3456");
        assert_eq!(key_for(u64::MAX, 20), u64::MAX.to_string().as_bytes());
        for i in [0, 7, 99_999, 10_000_000_000_000_000 - 1] {
            assert_eq!(key_for(i, 16), format!("{i:016}").as_bytes());
        }
    }

    #[test]
    fn in_flight_matches_answers_in_any_order() {
        let t0 = Instant::now();
        let mut f = InFlight::default();
        for seq in 5..9 {
            f.queued(seq);
        }
        assert_eq!(f.answered(5), None, "not sent yet");
        f.sent(t0);
        assert_eq!(f.outstanding(), 4);
        assert_eq!(f.answered(7), Some(t0));
        assert_eq!(f.answered(7), None, "answered twice");
        assert_eq!(f.answered(4), None);
        assert_eq!(f.answered(9), None);
        f.queued(9);
        let t1 = t0 + Duration::from_millis(1);
        f.sent(t1);
        assert_eq!(f.answered(9), Some(t1));
        assert_eq!(f.answered(5), Some(t0));
        assert_eq!(f.answered(6), Some(t0));
        assert_eq!(f.answered(8), Some(t0));
        assert_eq!(f.outstanding(), 0);
        assert!(f.slots.is_empty());
        f.queued(10);
        assert_eq!(f.first, 10);
    }

    #[test]
    fn keys_sort_in_item_order_at_any_size() {
        for size in [4, 16, 100] {
            let keys: Vec<_> = (0..1000).map(|i| key_for(i * 7, size)).collect();
            assert!(keys.iter().all(|k| k.len() == size));
            if size >= 16 {
                assert!(keys.windows(2).all(|w| w[0] < w[1]));
            }
        }
    }
}

pub mod archive;
pub mod act;
pub mod cluster_target;
pub mod migrate;
pub mod p2p;
pub mod paper;
pub mod relay;
pub mod report;
pub mod s3;
pub mod tls_floor;
pub mod ycsb;
