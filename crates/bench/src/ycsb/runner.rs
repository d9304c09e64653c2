//! Runs a YCSB workload against any target (a Kinetic endpoint or a peer, see
//! [`crate::target`]): a load phase inserting `records` records,
//! and a run phase drawing operations from the workload's mix and keys from its distribution.
//!
//! Records are YCSB's: key `user<fnvhash64(k)>`, ten fields `field0..field9` of 100 bytes,
//! stored as one Kinetic value (`name=value` fields separated by 0x1f). An UPDATE rewrites one
//! randomly chosen field, writing the whole record (a Kinetic value has no fields to patch);
//! READ-MODIFY-WRITE is a GET then that PUT; SCAN is GETKEYRANGE from the chosen key followed
//! by a GET of every key returned (the same range-then-get on every target). With `target_ops_per_second` the run is open-loop: each
//! operation has a scheduled start and its latency counts from then, so a stall shows in the
//! latencies instead of silently lowering the offered load (no coordinated omission).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use spindle_client::Synchronization;

use super::generators::{key_name, Hotspot, ScrambledZipfian, SkewedLatest, Uniform};
use super::workload::{Distribution, Op, Workload};
use crate::target::{self, Store};
use crate::BenchError;

#[derive(Debug, Clone, Serialize)]
pub struct YcsbSpec {
    pub target: String,
    pub workload: Workload,
    pub records: u64,
    pub operations: u64,
    pub threads: usize,
    /// Open-loop rate for the whole run (all threads); `None`: as fast as possible.
    pub target_ops_per_second: Option<f64>,
    pub seed: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct OpStats {
    pub operations: u64,
    pub failures: u64,
    pub average_us: f64,
    pub min_us: u64,
    pub max_us: u64,
    pub p95_us: u64,
    pub p99_us: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct YcsbResult {
    pub spec: YcsbSpec,
    pub phase: &'static str,
    pub runtime_ms: f64,
    pub throughput_ops_per_second: f64,
    pub operations: BTreeMap<String, OpStats>,
}

impl YcsbResult {
    /// YCSB's text exporter lines: `[OVERALL], RunTime(ms), ...` and per operation.
    pub fn ycsb_lines(&self) -> String {
        let mut out = format!(
            "[OVERALL], RunTime(ms), {:.0}\n[OVERALL], Throughput(ops/sec), {:.3}\n",
            self.runtime_ms, self.throughput_ops_per_second
        );
        for (name, s) in &self.operations {
            out += &format!("[{name}], Operations, {}\n", s.operations);
            out += &format!("[{name}], AverageLatency(us), {:.3}\n", s.average_us);
            out += &format!("[{name}], MinLatency(us), {}\n", s.min_us);
            out += &format!("[{name}], MaxLatency(us), {}\n", s.max_us);
            out += &format!("[{name}], 95thPercentileLatency(us), {}\n", s.p95_us);
            out += &format!("[{name}], 99thPercentileLatency(us), {}\n", s.p99_us);
            out += &format!("[{name}], Return=OK, {}\n", s.operations - s.failures);
            if s.failures > 0 {
                out += &format!("[{name}], Return=ERROR, {}\n", s.failures);
            }
        }
        out
    }
}

const FIELD_SEPARATOR: u8 = 0x1f;

/// Bytes a stored record of `w` takes: its fields, their `fieldN=` names and the separators.
pub fn record_len(w: &Workload) -> usize {
    (0..w.field_count).map(|f| format!("field{f}=").len() + w.field_length).sum::<usize>() + w.field_count.saturating_sub(1)
}

/// The largest field length whose stored records fit in `record_size` bytes (a 1 MiB record
/// must still fit a drive's 1 MiB value limit).
pub fn field_length_for(w: &Workload, record_size: usize) -> usize {
    let overhead = record_len(&Workload { field_length: 0, ..w.clone() });
    record_size.saturating_sub(overhead) / w.field_count.max(1)
}

fn record(rng: &mut impl Rng, w: &Workload) -> Bytes {
    let mut v = Vec::with_capacity(w.field_count * (w.field_length + 8));
    for f in 0..w.field_count {
        if f > 0 {
            v.push(FIELD_SEPARATOR);
        }
        v.extend_from_slice(format!("field{f}=").as_bytes());
        // Printable random bytes, as YCSB's RandomByteIterator; drawn in bulk so that a 1 MiB
        // record costs the load generator a memory pass, not a million draws.
        let start = v.len();
        v.resize(start + w.field_length, 0);
        rng.fill_bytes(&mut v[start..]);
        for b in &mut v[start..] {
            *b = b' ' + *b % 95;
        }
    }
    Bytes::from(v)
}

struct Shared {
    spec: YcsbSpec,
    /// Next record number to insert (load phase and run-phase inserts).
    next_insert: AtomicU64,
    /// Highest record number below which every insert was acknowledged (for `latest`, and the
    /// bound on keys a read may choose): YCSB's AcknowledgedCounterGenerator.
    acknowledged: Acknowledged,
    next_op: AtomicU64,
    started: Instant,
}

type Histograms = BTreeMap<&'static str, (Histogram<u64>, u64)>;

/// The highest record number `L` such that every insert up to `L` was acknowledged: inserts
/// finish out of order across threads, and a key is readable only once all before it are.
struct Acknowledged {
    limit: AtomicU64,
    pending: std::sync::Mutex<std::collections::BTreeSet<u64>>,
}

impl Acknowledged {
    fn new(limit: u64) -> Self {
        Acknowledged { limit: AtomicU64::new(limit), pending: Default::default() }
    }

    fn limit(&self) -> u64 {
        self.limit.load(Ordering::Acquire)
    }

    fn acknowledge(&self, k: u64) {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        pending.insert(k);
        let mut limit = self.limit();
        while pending.remove(&(limit + 1)) {
            limit += 1;
        }
        self.limit.store(limit, Ordering::Release);
    }
}

fn record_op(h: &mut Histograms, name: &'static str, us: u64, ok: bool) {
    let entry = h.entry(name).or_insert_with(|| (Histogram::new_with_bounds(1, 60_000_000, 3).expect("bounds"), 0));
    entry.0.saturating_record(us.max(1));
    if !ok {
        entry.1 += 1;
    }
}

async fn insert(c: &dyn Store, k: u64, rng: &mut impl Rng, w: &Workload) -> bool {
    c.put(Bytes::from(key_name(k, true)), record(rng, w), Synchronization::Writeback).await.is_ok()
}

async fn read(c: &dyn Store, k: u64) -> bool {
    matches!(c.get(Bytes::from(key_name(k, true))).await, Ok(Some(_)))
}

/// Loads records 0..records (YCSB's load phase).
pub async fn load(spec: YcsbSpec) -> Result<YcsbResult, BenchError> {
    drive(spec, "load").await
}

/// Runs the transaction phase over records already loaded.
pub async fn run(spec: YcsbSpec) -> Result<YcsbResult, BenchError> {
    drive(spec, "run").await
}

async fn drive(spec: YcsbSpec, phase: &'static str) -> Result<YcsbResult, BenchError> {
    if spec.threads == 0 || spec.records == 0 {
        return Err(BenchError::Invalid("threads and records must be at least 1".into()));
    }
    let needs_scans = spec.workload.scan > 0.0;
    let stores = target::connect(&spec.target, spec.threads, target::Needs { scans: needs_scans }).await?;
    let shared = Arc::new(Shared {
        next_insert: AtomicU64::new(if phase == "load" { 0 } else { spec.records }),
        acknowledged: Acknowledged::new(spec.records - 1),
        next_op: AtomicU64::new(0),
        started: Instant::now(),
        spec,
    });
    let mut tasks = Vec::new();
    for (t, store) in stores.into_iter().enumerate() {
        let shared = shared.clone();
        tasks.push(tokio::spawn(async move { worker(store, shared, phase, t as u64).await }));
    }
    let mut all: Histograms = BTreeMap::new();
    for task in tasks {
        for (name, (h, failures)) in task.await.map_err(|e| BenchError::Invalid(e.to_string()))?? {
            let entry = all.entry(name).or_insert_with(|| (Histogram::new_with_bounds(1, 60_000_000, 3).expect("bounds"), 0));
            entry.0.add(h).map_err(|e| BenchError::Invalid(e.to_string()))?;
            entry.1 += failures;
        }
    }
    let runtime = shared.started.elapsed().as_secs_f64();
    // Each transaction counts once (a read-modify-write too), as YCSB's overall throughput.
    let total = if phase == "load" { shared.spec.records } else { shared.spec.operations };
    let operations = all
        .into_iter()
        .map(|(name, (h, failures))| {
            (name.to_string(), OpStats {
                operations: h.len(),
                failures,
                average_us: h.mean(),
                min_us: h.min(),
                max_us: h.max(),
                p95_us: h.value_at_quantile(0.95),
                p99_us: h.value_at_quantile(0.99),
            })
        })
        .collect();
    let spec = Arc::try_unwrap(shared).map(|s| s.spec).unwrap_or_else(|s| s.spec.clone());
    Ok(YcsbResult { spec, phase, runtime_ms: runtime * 1000.0, throughput_ops_per_second: total as f64 / runtime.max(1e-9), operations })
}

async fn worker(c: Arc<dyn Store>, shared: Arc<Shared>, phase: &'static str, thread: u64) -> Result<Histograms, BenchError> {
    let spec = &shared.spec;
    let w = &spec.workload;
    let mut rng = rand::rngs::StdRng::seed_from_u64(spec.seed ^ (thread + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut hist: Histograms = BTreeMap::new();
    // YCSB sizes the zipfian's range for the inserts the run will add (a fudge factor of 2).
    let expected_new = (spec.operations as f64 * w.insert * 2.0) as u64;
    let mut zipf = ScrambledZipfian::new(0, spec.records + expected_new);
    let mut latest = SkewedLatest::new(spec.records);
    let uniform = Uniform { lb: 0, ub: spec.records - 1 };
    let hotspot = Hotspot { lb: 0, ub: spec.records - 1, data_fraction: 0.2, op_fraction: 0.8 };
    let interval = spec.target_ops_per_second.map(|r| Duration::from_secs_f64(1.0 / r.max(1e-9)));
    loop {
        let i = shared.next_op.fetch_add(1, Ordering::Relaxed);
        let total = if phase == "load" { spec.records } else { spec.operations };
        if i >= total {
            return Ok(hist);
        }
        // Open loop: the operation's intended start; latency counts from there.
        let scheduled = match interval {
            Some(iv) => {
                let at = shared.started + iv.mul_f64(i as f64);
                tokio::time::sleep_until(at.into()).await;
                at
            }
            None => Instant::now(),
        };
        let op = if phase == "load" { Op::Insert } else { w.next_op(&mut rng) };
        let mut keynum = || loop {
            let acknowledged = shared.acknowledged.limit();
            let k = match w.distribution {
                Distribution::Zipfian => zipf.next(&mut rng),
                Distribution::Latest => latest.next(&mut rng, acknowledged),
                Distribution::Uniform => uniform.next(&mut rng),
                Distribution::Hotspot => hotspot.next(&mut rng),
            };
            // YCSB redraws keys beyond the last acknowledged insert.
            if k <= acknowledged {
                return k;
            }
        };
        let (name, ok): (&'static str, bool) = match op {
            Op::Insert => {
                let k = shared.next_insert.fetch_add(1, Ordering::Relaxed);
                let ok = insert(&*c, k, &mut rng, w).await;
                if ok {
                    shared.acknowledged.acknowledge(k);
                }
                ("INSERT", ok)
            }
            Op::Read => {
                let k = keynum();
                ("READ", read(&*c, k).await)
            }
            Op::Update => {
                let k = keynum();
                ("UPDATE", insert(&*c, k, &mut rng, w).await)
            }
            Op::ReadModifyWrite => {
                let k = keynum();
                let t = Instant::now();
                let read_ok = read(&*c, k).await;
                record_op(&mut hist, "READ", t.elapsed().as_micros() as u64, read_ok);
                let t = Instant::now();
                let write_ok = insert(&*c, k, &mut rng, w).await;
                record_op(&mut hist, "UPDATE", t.elapsed().as_micros() as u64, write_ok);
                ("READ-MODIFY-WRITE", read_ok && write_ok)
            }
            Op::Scan => {
                let k = keynum();
                let len = rng.random_range(1..=w.max_scan_length).min(200) as i32;
                let ok = match c.scan(Bytes::from(key_name(k, true)), len as usize).await {
                    // The start key exists (it is an acknowledged record): a scan that returns
                    // nothing did not scan.
                    Ok(keys) if keys.is_empty() => false,
                    Ok(keys) => {
                        let mut ok = true;
                        for key in keys {
                            ok &= c.get(key).await.is_ok();
                        }
                        ok
                    }
                    Err(_) => false,
                };
                ("SCAN", ok)
            }
        };
        record_op(&mut hist, name, scheduled.elapsed().as_micros() as u64, ok);
    }
}

/// Draws `draws` operations and keys as the run phase would (no target involved), for
/// comparing this generator with YCSB's own: operation counts and record-number counts.
pub fn sample(workload: &Workload, records: u64, operations: u64, draws: u64, seed: u64) -> (BTreeMap<String, u64>, BTreeMap<u64, u64>) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let expected_new = (operations as f64 * workload.insert * 2.0) as u64;
    let mut zipf = ScrambledZipfian::new(0, records + expected_new);
    let mut latest = SkewedLatest::new(records);
    let uniform = Uniform { lb: 0, ub: records - 1 };
    let hotspot = Hotspot { lb: 0, ub: records - 1, data_fraction: 0.2, op_fraction: 0.8 };
    let acknowledged = records - 1;
    let (mut ops, mut keys) = (BTreeMap::new(), BTreeMap::new());
    for _ in 0..draws {
        let op = workload.next_op(&mut rng);
        *ops.entry(format!("{op:?}")).or_insert(0) += 1;
        if op == Op::Insert {
            continue;
        }
        let k = loop {
            let k = match workload.distribution {
                Distribution::Zipfian => zipf.next(&mut rng),
                Distribution::Latest => latest.next(&mut rng, acknowledged),
                Distribution::Uniform => uniform.next(&mut rng),
                Distribution::Hotspot => hotspot.next(&mut rng),
            };
            if k <= acknowledged {
                break k;
            }
        };
        *keys.entry(k).or_insert(0) += 1;
    }
    (ops, keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_as_long_as_record_len_says_and_printable() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        for field_length in [0, 1, 100, 4000] {
            let w = Workload { field_length, ..Workload::core('A').unwrap() };
            let r = record(&mut rng, &w);
            assert_eq!(r.len(), record_len(&w));
            assert!(r.iter().all(|b| *b == FIELD_SEPARATOR || (b' '..=b'~').contains(b)));
        }
    }
}
