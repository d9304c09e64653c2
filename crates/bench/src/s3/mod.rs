//! `spindle bench s3`: an S3 load generator that runs the way MinIO's warp does, so that any
//! two S3 servers can be measured side by side by one tool (warp itself cannot be installed
//! here). Definitions, after warp's:
//!
//! - *PUT*: `concurrency` workers upload objects of `object_bytes` random bytes, each to a new
//!   key, for `duration`; objects at or above `multipart_bytes` go up as multipart uploads in
//!   parts of that size (warp's client does so from 16 MiB parts; 64 MiB objects: 4 parts).
//! - *GET*: a set of `objects` objects is uploaded first (not timed), then `concurrency` workers
//!   read random objects of the set, whole bodies, for `duration`; time to first byte is the
//!   time from sending the request to the first body byte.
//! - *mixed*: the same prepared set as a pool; each operation is drawn 45 : 30 : 15 : 10 among
//!   GET, STAT (HEAD), PUT (a new object joins the pool) and DELETE (one leaves it).
//!
//! An operation counts when it completes. Rates are bytes (objects) of completed operations
//! over the time from the start to the end of the last operation (workers start no operation
//! after `duration`, and finish the one they are in); the median of one-second windows is
//! given beside, each operation's bytes spread over the windows it spanned, as warp's
//! "50% Median". The server's CPU (user + system of the given PIDs, from /proc/PID/stat) over
//! the timed phase is reported per MiB moved, because on a small machine the generator and the
//! server share the cores. Everything a run writes lives under a fresh prefix and is deleted
//! afterwards (not timed).

pub mod client;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use parking_lot::Mutex;
use rand::{Rng, RngCore, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::paper::Machine;
use client::{S3Conn, S3Endpoint, S3Error, S3Signer};

/// Version of the result document's layout.
pub const SCHEMA_VERSION: u32 = 1;
const MIB: f64 = (1u64 << 20) as f64;
/// Distinct-content slack: object n starts at a random offset below this in the random pool,
/// so no two objects need be byte-identical (no server gets to deduplicate).
const DATA_SLACK_BYTES: usize = 1 << 20;
/// The prepared set for GET and mixed, when not given: about this many bytes...
const PREPARED_BYTES_DEFAULT: u64 = 1 << 30;
/// ...and at most this many objects (warp's default `--objects`).
const PREPARED_OBJECTS_MAX: u64 = 2500;
/// Distinct error messages kept as samples.
const ERROR_SAMPLES_MAX: usize = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum S3Op {
    Put,
    Get,
    Mixed,
}

impl S3Op {
    pub fn name(self) -> &'static str {
        match self {
            S3Op::Put => "put",
            S3Op::Get => "get",
            S3Op::Mixed => "mixed",
        }
    }
}

/// Shares of the mixed workload's operations (warp's defaults: 45, 30, 15, 10).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Mix {
    pub get: u32,
    pub stat: u32,
    pub put: u32,
    pub delete: u32,
}

impl Mix {
    pub const WARP: Mix = Mix { get: 45, stat: 30, put: 15, delete: 10 };

    /// The operation a draw in 0..total picks.
    fn pick(&self, draw: u32) -> Kind {
        if draw < self.get {
            Kind::Get
        } else if draw < self.get + self.stat {
            Kind::Stat
        } else if draw < self.get + self.stat + self.put {
            Kind::Put
        } else {
            Kind::Delete
        }
    }

    fn total(&self) -> u32 {
        self.get + self.stat + self.put + self.delete
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct S3BenchSpec {
    pub target: S3Endpoint,
    /// The server's name in reports ("minio", "spindle").
    pub label: String,
    pub op: S3Op,
    pub object_bytes: u64,
    pub concurrency: usize,
    pub duration_seconds: f64,
    /// Objects at or above this go up as multipart uploads in parts of this size (0: never).
    pub multipart_bytes: u64,
    /// Size of the prepared set for GET and mixed (0: about 1 GiB, at least two per worker,
    /// at most 2500).
    pub objects: u64,
    pub mix: Mix,
    /// Processes whose CPU time is the server's (a gateway and its drive, say).
    pub server_pids: Vec<u32>,
    pub seed: u64,
    /// Delete what the run wrote, afterwards.
    pub cleanup: bool,
}

impl S3BenchSpec {
    /// Objects in the prepared set.
    pub fn prepared_objects(&self) -> u64 {
        if self.objects > 0 {
            return self.objects;
        }
        let by_bytes = PREPARED_BYTES_DEFAULT / self.object_bytes.max(1);
        by_bytes.clamp(2 * self.concurrency as u64, PREPARED_OBJECTS_MAX.max(2 * self.concurrency as u64)).max(1)
    }

    fn validate(&self) -> Result<(), S3BenchError> {
        let bad = |m: &str| Err(S3BenchError::Invalid(m.to_string()));
        if self.concurrency == 0 {
            return bad("concurrency must be at least 1");
        }
        if !(self.duration_seconds.is_finite() && self.duration_seconds > 0.0) {
            return bad("duration must be positive");
        }
        if self.object_bytes > isize::MAX as u64 / 2 {
            return bad("object size too large");
        }
        if client::uses_multipart(self.object_bytes, self.multipart_bytes) {
            client::part_ranges(self.object_bytes, self.multipart_bytes).map_err(S3BenchError::Invalid)?;
        }
        if self.op == S3Op::Mixed && (self.mix.total() == 0 || self.mix.put < self.mix.delete) {
            return bad("the mix needs some operations, and at least as many puts as deletes (else the pool runs dry)");
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum S3BenchError {
    #[error(transparent)]
    S3(#[from] S3Error),
    #[error("invalid S3 benchmark: {0}")]
    Invalid(String),
    #[error("preparing the objects to read: {failed} of {total} uploads failed; first: {first}")]
    Prepare { failed: u64, total: u64, first: String },
}

/// Latency quantiles, milliseconds.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Quantiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
}

impl Quantiles {
    fn of(h: &Histogram<u64>) -> Quantiles {
        if h.is_empty() {
            return Quantiles::default();
        }
        let ms = |us: u64| us as f64 / 1000.0;
        Quantiles { p50: ms(h.value_at_quantile(0.5)), p90: ms(h.value_at_quantile(0.9)), p99: ms(h.value_at_quantile(0.99)), max: ms(h.max()), mean: h.mean() / 1000.0 }
    }
}

/// One operation type's figures over the timed phase.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OpStats {
    /// "PUT", "GET", "STAT" or "DELETE".
    pub op: String,
    pub objects: u64,
    pub errors: u64,
    pub bytes: u64,
    pub seconds: f64,
    pub mib_per_second: f64,
    pub objects_per_second: f64,
    /// Median over the whole one-second windows of the run (None: shorter than one second).
    pub median_1s_mib_per_second: Option<f64>,
    pub median_1s_objects_per_second: Option<f64>,
    pub latency_ms: Quantiles,
    /// GET only: request sent to first body byte.
    pub ttfb_ms: Option<Quantiles>,
}

#[derive(Debug, Clone, Serialize)]
pub struct S3BenchResult {
    pub schema_version: u32,
    pub kind: &'static str,
    pub machine: Machine,
    pub spec: S3BenchSpec,
    /// Every key of the run starts with it.
    pub prefix: String,
    /// Start of the timed phase to the end of its last operation.
    pub seconds: f64,
    pub operations: Vec<OpStats>,
    /// All operations: payload MiB moved per second, objects per second, errors.
    pub mib_per_second: f64,
    pub objects_per_second: f64,
    pub errors: u64,
    /// The untimed upload of the prepared set (GET and mixed).
    pub prepare: Option<OpStats>,
    /// CPU seconds the server's processes spent in the timed phase, and per MiB moved.
    pub server_cpu_seconds: Option<f64>,
    pub server_cpu_seconds_per_mib: Option<f64>,
    /// Why server CPU is missing although PIDs were given.
    pub server_cpu_note: Option<String>,
    /// This process' CPU over the timed phase (the load generator's cost).
    pub bench_cpu_seconds: f64,
    pub error_samples: Vec<String>,
    pub cleanup_deleted: u64,
    pub cleanup_errors: u64,
}

/// The parts of a result file that comparisons read.
#[derive(Debug, Clone, Deserialize)]
pub struct S3ResultView {
    pub kind: String,
    pub schema_version: u32,
    pub spec: S3BenchSpec,
    pub operations: Vec<OpStats>,
    pub server_cpu_seconds_per_mib: Option<f64>,
    pub errors: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Put,
    Get,
    Stat,
    Delete,
}

impl Kind {
    const ALL: [Kind; 4] = [Kind::Put, Kind::Get, Kind::Stat, Kind::Delete];

    fn name(self) -> &'static str {
        match self {
            Kind::Put => "PUT",
            Kind::Get => "GET",
            Kind::Stat => "STAT",
            Kind::Delete => "DELETE",
        }
    }
}

fn new_histogram() -> Histogram<u64> {
    // 1 us to 1 hour at 3 significant digits.
    Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds")
}

/// One operation type's measurements, per worker, merged at the end.
struct Recorder {
    objects: u64,
    errors: u64,
    bytes: u64,
    latency: Histogram<u64>,
    ttfb: Histogram<u64>,
    /// Bytes and objects per one-second window since the start, each operation spread over the
    /// windows it spanned.
    window_bytes: Vec<f64>,
    window_objects: Vec<f64>,
}

impl Recorder {
    fn new() -> Recorder {
        Recorder { objects: 0, errors: 0, bytes: 0, latency: new_histogram(), ttfb: new_histogram(), window_bytes: Vec::new(), window_objects: Vec::new() }
    }

    /// A completed operation that ran from `from` to `to` (seconds since the start).
    fn done(&mut self, from: f64, to: f64, bytes: u64, ttfb: Option<Duration>) {
        self.objects += 1;
        self.bytes += bytes;
        self.latency.saturating_record(((to - from) * 1e6).max(1.0) as u64);
        if let Some(t) = ttfb {
            self.ttfb.saturating_record(t.as_micros().max(1) as u64);
        }
        spread(&mut self.window_bytes, from, to, bytes as f64);
        spread(&mut self.window_objects, from, to, 1.0);
    }

    fn merge(&mut self, other: Recorder) {
        self.objects += other.objects;
        self.errors += other.errors;
        self.bytes += other.bytes;
        self.latency.add(&other.latency).expect("same bounds");
        self.ttfb.add(&other.ttfb).expect("same bounds");
        for (mine, theirs) in [(&mut self.window_bytes, other.window_bytes), (&mut self.window_objects, other.window_objects)] {
            if mine.len() < theirs.len() {
                mine.resize(theirs.len(), 0.0);
            }
            for (m, t) in mine.iter_mut().zip(theirs) {
                *m += t;
            }
        }
    }

    fn stats(&self, kind: Kind, seconds: f64, whole_windows: usize) -> OpStats {
        let s = seconds.max(1e-9);
        let median = |w: &[f64]| {
            let mut v: Vec<f64> = (0..whole_windows).map(|i| w.get(i).copied().unwrap_or(0.0)).collect();
            median_of(&mut v)
        };
        OpStats {
            op: kind.name().to_string(),
            objects: self.objects,
            errors: self.errors,
            bytes: self.bytes,
            seconds,
            mib_per_second: self.bytes as f64 / MIB / s,
            objects_per_second: self.objects as f64 / s,
            median_1s_mib_per_second: median(&self.window_bytes).map(|b| b / MIB),
            median_1s_objects_per_second: median(&self.window_objects),
            latency_ms: Quantiles::of(&self.latency),
            ttfb_ms: (kind == Kind::Get).then(|| Quantiles::of(&self.ttfb)),
        }
    }
}

/// Adds `amount` to the one-second windows that [from, to) spans, in proportion to the time
/// spent in each (all of it to the window of `from` for an instantaneous operation).
pub fn spread(windows: &mut Vec<f64>, from: f64, to: f64, amount: f64) {
    let from = from.max(0.0);
    let to = to.max(from);
    let last = to.floor() as usize;
    if windows.len() <= last {
        windows.resize(last + 1, 0.0);
    }
    let span = to - from;
    if span <= 0.0 {
        windows[from.floor() as usize] += amount;
        return;
    }
    let mut t = from;
    while t < to {
        let w = t.floor();
        let end = (w + 1.0).min(to);
        windows[w as usize] += amount * (end - t) / span;
        t = end;
    }
}

/// The median (mean of the middle two for an even count); None for no values.
pub fn median_of(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 })
}

/// CPU seconds (user + system) process `pid` has used, from /proc/PID/stat.
pub fn process_cpu_seconds(pid: u32) -> Result<f64, String> {
    let path = format!("/proc/{pid}/stat");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    // SAFETY: sysconf has no preconditions; _SC_CLK_TCK is a valid name.
    #[allow(unsafe_code, reason = "sysconf(3) has no safe wrapper in std")]
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    cpu_seconds_of_stat(&text, ticks as f64).ok_or_else(|| format!("{path}: unexpected format"))
}

/// utime + stime of a /proc/PID/stat line, in seconds at `ticks_per_second`. The command
/// name (field 2) is in parentheses and may hold spaces and parentheses itself, so fields are
/// counted from the last ')'.
pub fn cpu_seconds_of_stat(stat: &str, ticks_per_second: f64) -> Option<f64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state is field 3, so utime (14) and stime (15) are at 11 and 12.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    (ticks_per_second > 0.0).then(|| (utime + stime) as f64 / ticks_per_second)
}

fn servers_cpu(pids: &[u32]) -> Result<f64, String> {
    pids.iter().map(|p| process_cpu_seconds(*p)).sum()
}

/// What every worker shares.
struct Shared {
    signer: S3Signer,
    spec: S3BenchSpec,
    /// Random bytes: an object is a slice of it.
    data: Bytes,
    prefix: String,
    /// GET and mixed: the keys that exist.
    pool: Mutex<Vec<String>>,
}

impl Shared {
    fn body(&self, rng: &mut impl Rng) -> Bytes {
        let size = self.spec.object_bytes as usize;
        let offset = rng.random_range(0..=self.data.len() - size);
        self.data.slice(offset..offset + size)
    }

    fn pick(&self, rng: &mut impl Rng) -> Option<String> {
        let pool = self.pool.lock();
        (!pool.is_empty()).then(|| pool[rng.random_range(0..pool.len())].clone())
    }
}

/// What a worker did.
struct WorkerOut {
    recorders: Vec<Recorder>,
    /// Keys it created (to delete afterwards).
    created: Vec<String>,
    samples: Vec<String>,
}

fn note_error(samples: &mut Vec<String>, e: &dyn std::fmt::Display) {
    let text = e.to_string();
    if samples.len() < ERROR_SAMPLES_MAX && !samples.contains(&text) {
        samples.push(text);
    }
}

/// One worker of the timed phase: operations back to back until the deadline.
async fn worker(shared: Arc<Shared>, id: usize, start: Instant, deadline: Instant) -> WorkerOut {
    let spec = &shared.spec;
    let mut rng = rand::rngs::StdRng::seed_from_u64(spec.seed.wrapping_mul(0x9E37_79B9).wrapping_add(id as u64 + 1));
    let mut conn = S3Conn::new(shared.signer.clone());
    let mut out = WorkerOut { recorders: Kind::ALL.iter().map(|_| Recorder::new()).collect(), created: Vec::new(), samples: Vec::new() };
    let mut n = 0u64;
    while Instant::now() < deadline {
        let kind = match spec.op {
            S3Op::Put => Kind::Put,
            S3Op::Get => Kind::Get,
            S3Op::Mixed => spec.mix.pick(rng.random_range(0..spec.mix.total())),
        };
        let from = start.elapsed().as_secs_f64();
        let result: Result<(u64, Option<Duration>), S3Error> = match kind {
            Kind::Put => {
                let key = format!("{}/w{id:03}/{n:09}", shared.prefix);
                n += 1;
                let r = conn.upload(&key, shared.body(&mut rng), spec.multipart_bytes).await;
                if r.is_ok() {
                    if spec.op == S3Op::Mixed {
                        shared.pool.lock().push(key.clone());
                    }
                    out.created.push(key);
                }
                r.map(|()| (spec.object_bytes, None))
            }
            Kind::Get | Kind::Stat => {
                let Some(key) = shared.pick(&mut rng) else { break };
                let r = if kind == Kind::Get {
                    conn.get_object(&key, None, |_| {}).await.map(|t| (t.bytes, Some(t.first_byte)))
                } else {
                    conn.head_object(&key).await.map(|_| (0, None))
                };
                // In the mixed workload a key may be deleted between the pick and the read:
                // not a server error, and not an operation either.
                if matches!(&r, Err(e) if e.status() == Some(hyper::StatusCode::NOT_FOUND)) && !shared.pool.lock().contains(&key) {
                    continue;
                }
                r
            }
            Kind::Delete => {
                let key = {
                    let mut pool = shared.pool.lock();
                    if pool.len() <= 1 {
                        continue;
                    }
                    let i = rng.random_range(0..pool.len());
                    pool.swap_remove(i)
                };
                conn.delete_object(&key).await.map(|()| (0, None))
            }
        };
        let to = start.elapsed().as_secs_f64();
        let rec = &mut out.recorders[kind as usize];
        match result {
            Ok((bytes, ttfb)) => rec.done(from, to, bytes, ttfb),
            Err(e) => {
                rec.errors += 1;
                note_error(&mut out.samples, &e);
            }
        }
    }
    out
}

/// Runs `work(i)` for i in 0..count on `concurrency` tasks, each with its own connection.
async fn on_connections<F, Fut>(signer: &S3Signer, count: u64, concurrency: usize, work: F) -> Vec<(u64, u64, Vec<String>)>
where
    F: Fn(u64, S3Conn) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = (S3Conn, Result<(), S3Error>)> + Send,
{
    let next = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let tasks: Vec<_> = (0..concurrency.max(1))
        .map(|_| {
            let (next, work) = (next.clone(), work.clone());
            let mut conn = S3Conn::new(signer.clone());
            tokio::spawn(async move {
                let (mut ok, mut failed, mut samples) = (0u64, 0u64, Vec::new());
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if i >= count {
                        return (ok, failed, samples);
                    }
                    let (back, r) = work(i, conn).await;
                    conn = back;
                    match r {
                        Ok(()) => ok += 1,
                        Err(e) => {
                            failed += 1;
                            note_error(&mut samples, &e);
                        }
                    }
                }
            })
        })
        .collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap_or_else(|e| (0, 1, vec![e.to_string()])));
    }
    out
}

/// A run's key prefix: fresh for every run (seed and clock), so runs never meet.
fn run_prefix(seed: u64) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ nanos);
    format!("spindle-bench/{:016x}", rng.next_u64())
}

/// Runs the benchmark `spec` describes.
pub async fn run(spec: S3BenchSpec) -> Result<S3BenchResult, S3BenchError> {
    spec.validate()?;
    let signer = S3Signer::new(&spec.target)?;
    S3Conn::new(signer.clone()).create_bucket().await?;
    let prefix = run_prefix(spec.seed);
    let mut data = vec![0u8; spec.object_bytes as usize + DATA_SLACK_BYTES];
    rand::rngs::StdRng::seed_from_u64(spec.seed ^ 0x0b1e_c7da).fill_bytes(&mut data);
    let shared = Arc::new(Shared { signer: signer.clone(), spec: spec.clone(), data: Bytes::from(data), prefix: prefix.clone(), pool: Mutex::new(Vec::new()) });

    // The prepared set, uploaded before the clock starts.
    let mut prepare = None;
    if spec.op != S3Op::Put {
        let count = spec.prepared_objects();
        let keys: Arc<Vec<String>> = Arc::new((0..count).map(|i| format!("{prefix}/obj/{i:09}")).collect());
        let started = Instant::now();
        let (s, k) = (shared.clone(), keys.clone());
        let parts = on_connections(&signer, count, spec.concurrency, move |i, mut conn| {
            let (s, k) = (s.clone(), k.clone());
            async move {
                let mut rng = rand::rngs::StdRng::seed_from_u64(s.spec.seed.wrapping_add(i));
                let r = conn.upload(&k[i as usize], s.body(&mut rng), s.spec.multipart_bytes).await;
                (conn, r)
            }
        })
        .await;
        let seconds = started.elapsed().as_secs_f64();
        let failed: u64 = parts.iter().map(|p| p.1).sum();
        if failed > 0 {
            let first = parts.iter().find_map(|p| p.2.first().cloned()).unwrap_or_default();
            // Leave nothing behind: the keys that did go up are deleted.
            cleanup(&signer, keys.to_vec(), spec.concurrency).await;
            return Err(S3BenchError::Prepare { failed, total: count, first });
        }
        let mut rec = Recorder::new();
        rec.objects = count;
        rec.bytes = count * spec.object_bytes;
        let mut stats = rec.stats(Kind::Put, seconds, 0);
        stats.latency_ms = Quantiles::default();
        prepare = Some(stats);
        *shared.pool.lock() = keys.to_vec();
    }

    // The timed phase.
    let cpu_before = (!spec.server_pids.is_empty()).then(|| servers_cpu(&spec.server_pids));
    let bench_cpu_before = crate::process_cpu_seconds();
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(spec.duration_seconds);
    let tasks: Vec<_> = (0..spec.concurrency).map(|id| tokio::spawn(worker(shared.clone(), id, start, deadline))).collect();
    let mut recorders: Vec<Recorder> = Kind::ALL.iter().map(|_| Recorder::new()).collect();
    let mut created = Vec::new();
    let mut samples = Vec::new();
    for t in tasks {
        match t.await {
            Ok(out) => {
                for (mine, theirs) in recorders.iter_mut().zip(out.recorders) {
                    mine.merge(theirs);
                }
                created.extend(out.created);
                for s in out.samples {
                    note_error(&mut samples, &s);
                }
            }
            Err(e) => note_error(&mut samples, &e),
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    let bench_cpu_seconds = (crate::process_cpu_seconds() - bench_cpu_before).max(0.0);
    let cpu_after = (!spec.server_pids.is_empty()).then(|| servers_cpu(&spec.server_pids));
    let (server_cpu_seconds, server_cpu_note) = match (cpu_before, cpu_after) {
        (Some(Ok(a)), Some(Ok(b))) => (Some((b - a).max(0.0)), None),
        (Some(Err(e)), _) | (_, Some(Err(e))) => (None, Some(e)),
        _ => (None, None),
    };

    let whole_windows = spec.duration_seconds.floor() as usize;
    let operations: Vec<OpStats> = Kind::ALL
        .iter()
        .zip(&recorders)
        .filter(|(k, r)| r.objects + r.errors > 0 || (spec.op != S3Op::Mixed && **k == expected_kind(spec.op)))
        .map(|(k, r)| r.stats(*k, seconds, whole_windows))
        .collect();
    let bytes: u64 = recorders.iter().map(|r| r.bytes).sum();
    let objects: u64 = recorders.iter().map(|r| r.objects).sum();
    let errors: u64 = recorders.iter().map(|r| r.errors).sum();
    let mib = bytes as f64 / MIB;

    let (mut cleanup_deleted, mut cleanup_errors) = (0, 0);
    if spec.cleanup {
        let mut keys = created;
        if spec.op != S3Op::Put {
            // The pool holds the prepared keys still there and the mixed workload's new ones.
            keys = std::mem::take(&mut *shared.pool.lock());
        }
        (cleanup_deleted, cleanup_errors) = cleanup(&signer, keys, spec.concurrency).await;
    }

    Ok(S3BenchResult {
        schema_version: SCHEMA_VERSION,
        kind: "s3",
        machine: Machine::this(),
        prefix,
        seconds,
        operations,
        mib_per_second: mib / seconds.max(1e-9),
        objects_per_second: objects as f64 / seconds.max(1e-9),
        errors,
        prepare,
        server_cpu_seconds,
        server_cpu_seconds_per_mib: server_cpu_seconds.and_then(|c| (mib > 0.0).then(|| c / mib)),
        server_cpu_note,
        bench_cpu_seconds,
        error_samples: samples,
        cleanup_deleted,
        cleanup_errors,
        spec,
    })
}

fn expected_kind(op: S3Op) -> Kind {
    match op {
        S3Op::Put | S3Op::Mixed => Kind::Put,
        S3Op::Get => Kind::Get,
    }
}

/// Deletes `keys` with `concurrency` connections; returns (deleted, failed).
async fn cleanup(signer: &S3Signer, keys: Vec<String>, concurrency: usize) -> (u64, u64) {
    let keys = Arc::new(keys);
    let k = keys.clone();
    let parts = on_connections(signer, keys.len() as u64, concurrency, move |i, mut conn| {
        let k = k.clone();
        async move {
            let r = conn.delete_object(&k[i as usize]).await;
            (conn, r)
        }
    })
    .await;
    (parts.iter().map(|p| p.0).sum(), parts.iter().map(|p| p.1).sum())
}

/// `10s`, `500ms`, `2m`, `1.5` (seconds), `1h`.
pub fn parse_duration(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let n: f64 = number.parse().map_err(|_| format!("{s:?}: not a duration"))?;
    let scale = match unit.trim() {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        other => return Err(format!("{s:?}: unknown unit {other:?} (use ms, s, m or h)")),
    };
    let seconds = n * scale;
    if !(seconds.is_finite() && seconds > 0.0) {
        return Err(format!("{s:?}: must be more than zero"));
    }
    Ok(seconds)
}

/// A size for tables: `1 MiB`, `64 MiB`, `4 KiB`, `1000 B`.
pub fn size_label(bytes: u64) -> String {
    for (unit, shift) in [("GiB", 30), ("MiB", 20), ("KiB", 10)] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{} {unit}", bytes >> shift);
        }
    }
    format!("{bytes} B")
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "–".to_string(), |x| format!("{x:.digits$}"))
}

/// One run as Markdown: a row per operation type, then the server's CPU.
pub fn markdown(r: &S3BenchResult) -> String {
    let s = &r.spec;
    let mut out = format!(
        "S3 {} against {} ({}): {} objects, {} workers, {:.1} s{}.\n\n",
        s.op.name().to_uppercase(),
        s.label,
        s.target.endpoint,
        size_label(s.object_bytes),
        s.concurrency,
        r.seconds,
        if client::uses_multipart(s.object_bytes, s.multipart_bytes) { format!(", multipart in parts of {}", size_label(s.multipart_bytes)) } else { String::new() }
    );
    out.push_str("| op | objects | MiB/s | obj/s | median 1-s MiB/s | p50 ms | p90 ms | p99 ms | TTFB p50 ms | TTFB p99 ms | errors |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    for o in &r.operations {
        out.push_str(&format!(
            "| {} | {} | {:.1} | {:.1} | {} | {:.2} | {:.2} | {:.2} | {} | {} | {} |\n",
            o.op,
            o.objects,
            o.mib_per_second,
            o.objects_per_second,
            opt(o.median_1s_mib_per_second, 1),
            o.latency_ms.p50,
            o.latency_ms.p90,
            o.latency_ms.p99,
            opt(o.ttfb_ms.map(|t| t.p50), 2),
            opt(o.ttfb_ms.map(|t| t.p99), 2),
            o.errors
        ));
    }
    out.push('\n');
    match (r.server_cpu_seconds, r.server_cpu_seconds_per_mib) {
        (Some(c), per) => out.push_str(&format!("Server CPU (PIDs {:?}): {c:.2} s, {} s/MiB. ", s.server_pids, opt(per, 4))),
        (None, _) => out.push_str(&format!("Server CPU: {}. ", r.server_cpu_note.as_deref().unwrap_or("not measured (no --server-pid)"))),
    }
    out.push_str(&format!("Load generator CPU: {:.2} s.\n", r.bench_cpu_seconds));
    if let Some(p) = &r.prepare {
        out.push_str(&format!("Prepared set: {} objects, {:.1} MiB/s (not timed).\n", p.objects, p.mib_per_second));
    }
    for e in &r.error_samples {
        out.push_str(&format!("error: {e}\n"));
    }
    out
}

/// Side-by-side Markdown of result files: for each cell (operation, object size, workers) the
/// row of each server and, for each other server, its ratio to `baseline` (higher is better
/// for rates, lower for latency and CPU: the ratio is given plainly, candidate ÷ baseline).
pub fn compare_markdown(results: &[S3ResultView], baseline: &str) -> Result<String, S3BenchError> {
    for r in results {
        if r.kind != "s3" || r.schema_version != SCHEMA_VERSION {
            return Err(S3BenchError::Invalid(format!("{}: not a schema-{SCHEMA_VERSION} S3 result", r.spec.label)));
        }
    }
    type Cell = (S3Op, u64, usize, String);
    let mut cells: Vec<Cell> = Vec::new();
    for r in results {
        for o in &r.operations {
            let cell = (r.spec.op, r.spec.object_bytes, r.spec.concurrency, o.op.clone());
            if !cells.contains(&cell) {
                cells.push(cell);
            }
        }
    }
    let mut out = String::from(
        "| op | object | workers | server | MiB/s | obj/s | p50 ms | p99 ms | TTFB p50 ms | TTFB p99 ms | server CPU s/MiB | errors |\n|---|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|\n",
    );
    for (op, size, workers, kind) in &cells {
        let rows: Vec<(&S3ResultView, &OpStats)> = results
            .iter()
            .filter(|r| r.spec.op == *op && r.spec.object_bytes == *size && r.spec.concurrency == *workers)
            .filter_map(|r| r.operations.iter().find(|o| &o.op == kind).map(|o| (r, o)))
            .collect();
        let cell = format!("| {}{} | {} | {} ", kind, if *op == S3Op::Mixed { " (mixed)" } else { "" }, size_label(*size), workers);
        for (r, o) in &rows {
            out.push_str(&format!(
                "{cell}| {} | {:.1} | {:.1} | {:.2} | {:.2} | {} | {} | {} | {} |\n",
                r.spec.label,
                o.mib_per_second,
                o.objects_per_second,
                o.latency_ms.p50,
                o.latency_ms.p99,
                opt(o.ttfb_ms.map(|t| t.p50), 2),
                opt(o.ttfb_ms.map(|t| t.p99), 2),
                opt(r.server_cpu_seconds_per_mib, 4),
                o.errors
            ));
        }
        let Some((base_r, base)) = rows.iter().find(|(r, _)| r.spec.label == baseline) else { continue };
        for (r, o) in rows.iter().filter(|(r, _)| r.spec.label != baseline) {
            let ttfb = |f: fn(&Quantiles) -> f64| o.ttfb_ms.zip(base.ttfb_ms).map(|(a, b)| ratio(f(&a), f(&b)));
            out.push_str(&format!(
                "{cell}| **{} ÷ {}** | {} | {} | {} | {} | {} | {} | {} | |\n",
                r.spec.label,
                baseline,
                ratio_text(ratio(o.mib_per_second, base.mib_per_second)),
                ratio_text(ratio(o.objects_per_second, base.objects_per_second)),
                ratio_text(ratio(o.latency_ms.p50, base.latency_ms.p50)),
                ratio_text(ratio(o.latency_ms.p99, base.latency_ms.p99)),
                ratio_text(ttfb(|q| q.p50).flatten()),
                ratio_text(ttfb(|q| q.p99).flatten()),
                ratio_text(r.server_cpu_seconds_per_mib.zip(base_r.server_cpu_seconds_per_mib).and_then(|(a, b)| ratio(a, b))),
            ));
        }
    }
    Ok(out)
}

/// `a ÷ b`, when both are finite and b is not zero.
pub fn ratio(a: f64, b: f64) -> Option<f64> {
    (a.is_finite() && b.is_finite() && b != 0.0).then(|| a / b)
}

fn ratio_text(r: Option<f64>) -> String {
    r.map_or_else(|| "–".to_string(), |x| format!("{x:.2}×"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("10s").unwrap(), 10.0);
        assert_eq!(parse_duration("10").unwrap(), 10.0);
        assert_eq!(parse_duration("500ms").unwrap(), 0.5);
        assert_eq!(parse_duration("2m").unwrap(), 120.0);
        assert_eq!(parse_duration(" 1.5s ").unwrap(), 1.5);
        assert_eq!(parse_duration("1h").unwrap(), 3600.0);
        for bad in ["", "s", "0s", "-1s", "10x", "1.2.3s"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn sizes_label_exactly() {
        assert_eq!(size_label(1 << 20), "1 MiB");
        assert_eq!(size_label(64 << 20), "64 MiB");
        assert_eq!(size_label(4096), "4 KiB");
        assert_eq!(size_label(1000), "1000 B");
        assert_eq!(size_label((1 << 20) + 1), "1048577 B");
    }

    #[test]
    fn proc_stat_fields_are_counted_from_the_last_parenthesis() {
        // A command name with a space and a parenthesis, as /proc shows it.
        let line = "1234 (tokio (rt) w) S 1 1234 1234 0 -1 4194560 1000 0 0 0 250 75 0 0 20 0 9 0 100 1000000 500 18446744073709551615";
        assert_eq!(cpu_seconds_of_stat(line, 100.0), Some(3.25));
        assert_eq!(cpu_seconds_of_stat("garbage", 100.0), None);
        assert_eq!(cpu_seconds_of_stat(line, 0.0), None);
        // This process exists and has used some CPU.
        assert!(process_cpu_seconds(std::process::id()).unwrap() >= 0.0);
        assert!(process_cpu_seconds(u32::MAX).is_err());
    }

    #[test]
    fn windows_share_an_operation_by_time() {
        let mut w = Vec::new();
        spread(&mut w, 0.5, 2.5, 4.0);
        assert_eq!(w, vec![1.0, 2.0, 1.0]);
        spread(&mut w, 1.2, 1.2, 3.0);
        assert_eq!(w, vec![1.0, 5.0, 1.0]);
        assert_eq!(median_of(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median_of(&mut [4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median_of(&mut []), None);
    }

    proptest! {
        #[test]
        fn spreading_keeps_the_amount(from in 0.0f64..100.0, len in 0.0f64..10.0, amount in 0.0f64..1e9) {
            let mut w = Vec::new();
            spread(&mut w, from, from + len, amount);
            let total: f64 = w.iter().sum();
            prop_assert!((total - amount).abs() <= 1e-6 * amount.max(1.0));
            prop_assert!(w.iter().all(|x| *x >= 0.0));
            prop_assert_eq!(w.len(), (from + len).floor() as usize + 1);
        }

        #[test]
        fn durations_round_trip(ms in 1u64..10_000_000) {
            let text = format!("{ms}ms");
            let seconds = parse_duration(&text).unwrap();
            prop_assert!((seconds - ms as f64 / 1000.0).abs() < 1e-9);
        }
    }

    #[test]
    fn the_mix_follows_its_shares() {
        let m = Mix::WARP;
        let mut counts = [0u32; 4];
        for d in 0..m.total() {
            counts[m.pick(d) as usize] += 1;
        }
        assert_eq!(counts, [15, 45, 30, 10], "PUT, GET, STAT, DELETE");
    }

    fn spec(op: S3Op, size: u64, concurrency: usize) -> S3BenchSpec {
        S3BenchSpec {
            target: S3Endpoint { endpoint: "http://127.0.0.1:9000".into(), region: "us-east-1".into(), bucket: "b".into(), access_key: "a".into(), secret_key: "s".into(), tls_trust: None },
            label: "x".into(),
            op,
            object_bytes: size,
            concurrency,
            duration_seconds: 10.0,
            multipart_bytes: 16 << 20,
            objects: 0,
            mix: Mix::WARP,
            server_pids: vec![],
            seed: 1,
            cleanup: true,
        }
    }

    #[test]
    fn the_prepared_set_is_about_a_gib() {
        assert_eq!(spec(S3Op::Get, 1 << 20, 8).prepared_objects(), 1024);
        assert_eq!(spec(S3Op::Get, 64 << 20, 8).prepared_objects(), 16);
        assert_eq!(spec(S3Op::Get, 64 << 20, 32).prepared_objects(), 64, "two per worker at least");
        assert_eq!(spec(S3Op::Get, 1024, 8).prepared_objects(), 2500, "warp's count at most");
        assert_eq!(spec(S3Op::Get, 0, 1).prepared_objects(), 2500);
        assert_eq!(S3BenchSpec { objects: 7, ..spec(S3Op::Get, 1 << 20, 8) }.prepared_objects(), 7);
        assert!(spec(S3Op::Put, 1 << 20, 0).validate().is_err());
        assert!(S3BenchSpec { duration_seconds: 0.0, ..spec(S3Op::Put, 1, 1) }.validate().is_err());
        assert!(S3BenchSpec { multipart_bytes: 1, ..spec(S3Op::Put, 1 << 20, 1) }.validate().is_err(), "over 10,000 parts");
        assert!(S3BenchSpec { mix: Mix { put: 1, delete: 2, ..Mix::WARP }, ..spec(S3Op::Mixed, 1, 1) }.validate().is_err());
        assert!(spec(S3Op::Mixed, 1 << 20, 4).validate().is_ok());
    }

    fn stats(op: &str, mib_s: f64, p50: f64, ttfb: Option<f64>) -> OpStats {
        let q = |x: f64| Quantiles { p50: x, p90: x, p99: 2.0 * x, max: 3.0 * x, mean: x };
        OpStats {
            op: op.into(),
            objects: 10,
            errors: 0,
            bytes: 10 << 20,
            seconds: 1.0,
            mib_per_second: mib_s,
            objects_per_second: mib_s,
            median_1s_mib_per_second: None,
            median_1s_objects_per_second: None,
            latency_ms: q(p50),
            ttfb_ms: ttfb.map(q),
        }
    }

    #[test]
    fn comparisons_divide_by_the_baseline() {
        let view = |label: &str, op: S3Op, o: OpStats, cpu: f64| S3ResultView {
            kind: "s3".into(),
            schema_version: SCHEMA_VERSION,
            spec: S3BenchSpec { label: label.into(), ..spec(op, 1 << 20, 8) },
            operations: vec![o],
            server_cpu_seconds_per_mib: Some(cpu),
            errors: 0,
        };
        let results = vec![
            view("minio", S3Op::Put, stats("PUT", 100.0, 10.0, None), 0.02),
            view("spindle", S3Op::Put, stats("PUT", 150.0, 5.0, None), 0.01),
            view("minio", S3Op::Get, stats("GET", 200.0, 4.0, Some(1.0)), 0.01),
            view("spindle", S3Op::Get, stats("GET", 100.0, 8.0, Some(4.0)), 0.03),
        ];
        let md = compare_markdown(&results, "minio").unwrap();
        let lines: Vec<&str> = md.lines().collect();
        assert_eq!(lines.len(), 2 + 6, "{md}");
        assert!(lines[4].starts_with("| PUT | 1 MiB | 8 | **spindle ÷ minio** | 1.50× | 1.50× | 0.50× | 0.50× | – | – | 0.50× |"), "{}", lines[4]);
        assert!(lines[7].contains("| 0.50× | 0.50× | 2.00× | 2.00× | 4.00× | 4.00× | 3.00× |"), "{}", lines[7]);
        assert_eq!(ratio(1.0, 0.0), None);
        assert_eq!(ratio(f64::NAN, 1.0), None);
        // A result file that is not an S3 result is refused.
        let mut wrong = results[0].clone();
        wrong.kind = "archive".into();
        assert!(compare_markdown(&[wrong], "minio").is_err());
    }

    #[test]
    fn recorders_merge_and_summarise() {
        let mut a = Recorder::new();
        a.done(0.0, 0.5, 1 << 20, Some(Duration::from_millis(2)));
        a.done(0.5, 1.5, 1 << 20, Some(Duration::from_millis(4)));
        let mut b = Recorder::new();
        b.done(1.5, 2.0, 1 << 20, None);
        b.errors = 1;
        a.merge(b);
        let s = a.stats(Kind::Get, 2.0, 2);
        assert_eq!((s.objects, s.errors, s.bytes), (3, 1, 3 << 20));
        assert!((s.mib_per_second - 1.5).abs() < 1e-9);
        assert!((s.objects_per_second - 1.5).abs() < 1e-9);
        // Windows: [1 + 0.5, 0.5 + 1] MiB.
        assert!((s.median_1s_mib_per_second.unwrap() - 1.5).abs() < 1e-9);
        assert!((s.latency_ms.p50 - 500.0).abs() < 1.0, "{:?}", s.latency_ms);
        assert!(s.ttfb_ms.is_some() && a.stats(Kind::Put, 2.0, 2).ttfb_ms.is_none());
        assert_eq!(Recorder::new().stats(Kind::Put, 0.5, 0).median_1s_mib_per_second, None);
    }
}
