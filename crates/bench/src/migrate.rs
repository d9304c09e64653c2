//! `spindle bench migrate`: what a live move costs the clients, as Shadowfax measures
//! scale-out. A cluster is loaded with records; a YCSB mix runs at a fixed offered rate;
//! after a quiet spell a drive is added, and once its move is done and another quiet spell
//! has passed, a drive is removed. Every operation's latency is kept (from its scheduled
//! start, so a stall counts in full) and cut into one-second windows: throughput, p50 and p99
//! over time, before, during and after each move; the moves' bytes against the ideal (the
//! share that has to move), and every error a client saw.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use parking_lot::Mutex;
use plotters::prelude::*;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use spindle_cluster::control::{MemberChange, MoveProgress};
use spindle_cluster::{ClusterMap, Condition, Control, Member, Store, StoreConfig};

use crate::ycsb::generators::{key_name, ScrambledZipfian};
use crate::ycsb::workload::{Op, Workload};
use crate::BenchError;

#[derive(Debug, Clone, Serialize)]
pub struct MigrateSpec {
    /// etcd endpoints (comma-separated) and the cluster's name.
    pub etcd: String,
    pub cluster: String,
    /// Records loaded before the run, and their size.
    pub records: u64,
    pub value_size: usize,
    /// YCSB core workload letter (its read/update mix and key distribution).
    pub workload: char,
    /// Operations per second offered, spread over `threads` clients.
    pub rate: f64,
    pub threads: usize,
    /// The drive to add (id, HOST:PORT), and the member to remove after it.
    pub add: Option<(String, String)>,
    pub remove: Option<String>,
    /// Quiet time before the first change, between changes and after the last.
    pub settle: Duration,
    /// Longest a move may take before the run gives up.
    pub move_limit: Duration,
}

/// One second of the run.
#[derive(Debug, Clone, Serialize)]
pub struct Window {
    /// Seconds since the run began (window start).
    pub t: f64,
    pub ops: u64,
    pub errors: u64,
    pub p50_us: u64,
    pub p99_us: u64,
}

/// One move, as the clients and etcd saw it.
#[derive(Debug, Clone, Serialize)]
pub struct MoveRecord {
    /// "join" or "leave", and the drive.
    pub kind: &'static str,
    pub drive: String,
    /// Seconds since the run began: the change asked, the move's partitions named in the map,
    /// the flip, and (for a leave) the drive dropped after its sweep.
    pub asked_at: f64,
    pub started_at: f64,
    pub flipped_at: f64,
    pub done_at: f64,
    pub partitions: u32,
    /// Value bytes the drives pushed, entries pushed and caught up.
    pub bytes: u64,
    pub entries: u64,
    pub caught_up: u64,
    /// Bytes that had to move for this placement (the partitions given to a new replica), and
    /// the drive's fair share of all data (records x size x R / drives).
    pub ideal_bytes: u64,
    pub fair_share_bytes: u64,
    pub rate_limit: u64,
}

/// Throughput and latency over a stretch of the run.
#[derive(Debug, Clone, Serialize)]
pub struct Stretch {
    pub name: String,
    pub seconds: f64,
    pub ops_per_second: f64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub errors: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct MigrateResult {
    pub spec: MigrateSpec,
    pub windows: Vec<Window>,
    pub moves: Vec<MoveRecord>,
    pub stretches: Vec<Stretch>,
    pub errors: u64,
    /// The first few errors clients saw, as they were reported.
    pub error_samples: Vec<String>,
}

/// One operation: when it was due (since the run began), how long it took from then, and
/// whether it succeeded.
#[derive(Clone, Copy)]
struct Done {
    due_us: u64,
    latency_us: u64,
    ok: bool,
}

struct Shared {
    started: Instant,
    /// The same moment as Unix milliseconds (the coordinator's records use them).
    started_ms: u64,
    stop: AtomicBool,
    errors: Mutex<Vec<String>>,
    error_count: AtomicU64,
}

pub async fn run_migrate(spec: MigrateSpec) -> Result<MigrateResult, BenchError> {
    let workload = Workload::core(spec.workload).ok_or_else(|| BenchError::Invalid(format!("no YCSB workload {:?}", spec.workload)))?;
    if workload.scan > 0.0 || workload.insert > 0.0 {
        return Err(BenchError::Invalid("bench migrate runs reads, updates and read-modify-writes over the loaded records (A, B, C or F)".into()));
    }
    if spec.threads == 0 || spec.records == 0 || spec.rate.is_nan() || spec.rate <= 0.0 {
        return Err(BenchError::Invalid("threads, records and rate must be positive".into()));
    }
    let cluster_err = |e: spindle_cluster::ClusterError| BenchError::Invalid(e.to_string());
    let control = Control::connect(&spec.etcd, &spec.cluster).await.map_err(cluster_err)?;
    let store = Store::open(control.clone(), StoreConfig::default()).await.map_err(cluster_err)?;
    load(&store, spec.records, spec.value_size).await?;

    let shared = Arc::new(Shared {
        started: Instant::now(),
        started_ms: spindle_cluster::control::now_ms(),
        stop: AtomicBool::new(false),
        errors: Mutex::new(Vec::new()),
        error_count: AtomicU64::new(0),
    });
    let mut clients = Vec::new();
    for t in 0..spec.threads {
        let store = Store::open(control.clone(), StoreConfig::default()).await.map_err(cluster_err)?;
        let (shared, workload, spec) = (shared.clone(), workload.clone(), spec.clone());
        clients.push(tokio::spawn(async move { client(store, shared, workload, spec, t as u64).await }));
    }
    let mut moves = Vec::new();
    tokio::time::sleep(spec.settle).await;
    if let Some((id, addr)) = &spec.add {
        let member = Member { id: id.clone(), addr: addr.clone(), tls_port: None, capacity: 0, weight: 1.0, domain: None, leaving: false, pool: None };
        moves.push(watch_move(&control, &shared, &spec, MemberChange::Add(member)).await?);
        tokio::time::sleep(spec.settle).await;
    }
    if let Some(id) = &spec.remove {
        moves.push(watch_move(&control, &shared, &spec, MemberChange::Remove { id: id.clone() }).await?);
        tokio::time::sleep(spec.settle).await;
    }
    shared.stop.store(true, Ordering::Relaxed);
    let mut done = Vec::new();
    for c in clients {
        done.extend(c.await.map_err(|e| BenchError::Invalid(e.to_string()))?);
    }
    let windows = windows(&done);
    let stretches = stretches(&done, &moves, shared.started.elapsed().as_secs_f64());
    let error_samples = shared.errors.lock().clone();
    Ok(MigrateResult { errors: shared.error_count.load(Ordering::Relaxed), error_samples, spec, windows, moves, stretches })
}

/// Puts records 0..n (YCSB's hashed key names), 32 at a time.
async fn load(store: &Store, n: u64, size: usize) -> Result<(), BenchError> {
    let next = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..32 {
        let (store, next) = (store.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let value = Bytes::from(vec![b'x'; size]);
            loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                if k >= n {
                    return Ok(());
                }
                store.put(key_name(k, true).as_bytes(), value.clone(), Condition::None).await?;
            }
        }));
    }
    for t in tasks {
        t.await.map_err(|e| BenchError::Invalid(e.to_string()))?.map_err(|e: spindle_cluster::ClusterError| BenchError::Invalid(format!("loading: {e}")))?;
    }
    Ok(())
}

/// One client: operations due every `threads / rate` seconds, each timed from when it was due.
async fn client(store: Store, shared: Arc<Shared>, workload: Workload, spec: MigrateSpec, id: u64) -> Vec<Done> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x4d49_4752 ^ id);
    let mut keys = ScrambledZipfian::new(0, spec.records - 1);
    let period = Duration::from_secs_f64(spec.threads as f64 / spec.rate);
    let value = Bytes::from(vec![b'y'; spec.value_size]);
    // Clients start spread over one period, not all at once.
    let mut due = shared.started.elapsed() + period.mul_f64(id as f64 / spec.threads as f64);
    let mut out = Vec::new();
    while !shared.stop.load(Ordering::Relaxed) {
        let now = shared.started.elapsed();
        if due > now {
            tokio::time::sleep(due - now).await;
        }
        let k = if matches!(workload.distribution, crate::ycsb::workload::Distribution::Uniform) { rng.random_range(0..spec.records) } else { keys.next(&mut rng) };
        let key = key_name(k, true);
        let result = match workload.next_op(&mut rng) {
            Op::Read => store.get(key.as_bytes()).await.map(drop),
            Op::ReadModifyWrite => match store.get(key.as_bytes()).await {
                Ok(_) => store.put(key.as_bytes(), value.clone(), Condition::None).await.map(drop),
                Err(e) => Err(e),
            },
            _ => store.put(key.as_bytes(), value.clone(), Condition::None).await.map(drop),
        };
        let ok = result.is_ok();
        if let Err(e) = result {
            if shared.error_count.fetch_add(1, Ordering::Relaxed) < 10 {
                shared.errors.lock().push(e.to_string());
            }
        }
        let latency = shared.started.elapsed().saturating_sub(due);
        out.push(Done { due_us: due.as_micros() as u64, latency_us: latency.as_micros() as u64, ok });
        due += period;
    }
    out
}

fn seconds(shared: &Shared) -> f64 {
    shared.started.elapsed().as_secs_f64()
}

/// Asks for `change` and follows the move it leads to until it is done.
async fn watch_move(control: &Control, shared: &Shared, spec: &MigrateSpec, change: MemberChange) -> Result<MoveRecord, BenchError> {
    let e = |e: spindle_cluster::ClusterError| BenchError::Invalid(e.to_string());
    let (kind, drive) = match &change {
        MemberChange::Add(m) => ("join", m.id.clone()),
        MemberChange::Remove { id } => ("leave", id.clone()),
        MemberChange::AddPool { .. } | MemberChange::AddRemote { .. } => return Err(BenchError::Invalid("a pool is not a move".into())),
    };
    let (before, _) = control.load_map().await.map_err(e)?;
    let last_before = control.last_move().await.map_err(e)?;
    let asked_at = seconds(shared);
    control.request_change(&change).await.map_err(e)?;
    let deadline = Instant::now() + spec.move_limit;
    // When the move was seen to start, and its flip (the map then, and the finished move).
    let mut started: Option<f64> = None;
    let mut flipped: Option<(f64, ClusterMap, MoveProgress)> = None;
    loop {
        if Instant::now() > deadline {
            return Err(BenchError::Invalid(format!("the {kind} of {drive} did not finish within {:?}", spec.move_limit)));
        }
        let (map, _) = control.load_map().await.map_err(e)?;
        if started.is_none() && !map.moving.is_empty() {
            started = Some(seconds(shared));
        }
        if flipped.is_none() && map.moving.is_empty() {
            // The finished move's record, once it is another than before the change (a move
            // quicker than one look at the map is found this way too).
            let last = control.last_move().await.map_err(e)?;
            if let Some(last) = last.filter(|l| Some(l) != last_before.as_ref()) {
                flipped = Some((seconds(shared), map.clone(), last));
            }
        }
        let finished = kind == "join" || !map.members.contains_key(&drive);
        if let (true, Some((flipped_at, after, last))) = (finished, &flipped) {
            let (flipped_at, last) = (*flipped_at, last.clone());
            // The record's own start, when the map was never seen moving.
            let started_at = started.unwrap_or_else(|| last.started_ms.saturating_sub(shared.started_ms) as f64 / 1000.0);
            let (ideal, fair) = ideal_bytes(&before, after, spec, kind);
            return Ok(MoveRecord {
                kind,
                drive,
                asked_at,
                started_at,
                flipped_at,
                done_at: seconds(shared),
                partitions: last.total,
                bytes: last.bytes,
                entries: last.entries,
                caught_up: last.repaired,
                ideal_bytes: ideal,
                fair_share_bytes: fair,
                rate_limit: last.rate_limit,
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What had to move: each partition's value bytes once per drive it gained between the map
/// before the change and the map after the flip (records are counted into partitions by
/// their keys); and the drive's fair share.
fn ideal_bytes(before: &ClusterMap, after: &ClusterMap, spec: &MigrateSpec, kind: &str) -> (u64, u64) {
    let mut per_partition: BTreeMap<u32, u64> = BTreeMap::new();
    for k in 0..spec.records {
        *per_partition.entry(after.partition_of(key_name(k, true).as_bytes())).or_default() += spec.value_size as u64;
    }
    let mut ideal = 0;
    for p in 0..after.partitions {
        let gained = after.replicas_of(p).iter().filter(|d| !before.replicas_of(p).contains(d)).count() as u64;
        ideal += gained * per_partition.get(&p).copied().unwrap_or(0);
    }
    let drives = match kind {
        "join" => before.members.len() + 1,
        _ => before.members.len(),
    };
    let fair = spec.records * spec.value_size as u64 * u64::from(before.replicas) / drives.max(1) as u64;
    (ideal, fair)
}

fn histogram() -> Histogram<u64> {
    #[allow(clippy::expect_used, reason = "constant, valid bounds")]
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid bounds")
}

impl Done {
    /// When it completed, seconds since the run began.
    fn finished(&self) -> f64 {
        (self.due_us + self.latency_us) as f64 / 1e6
    }
}

/// Per second of completion: operations that succeeded (the throughput), those that failed,
/// and the successes' latency (from when each was due).
fn windows(done: &[Done]) -> Vec<Window> {
    let mut by_second: BTreeMap<u64, (Histogram<u64>, u64, u64)> = BTreeMap::new();
    for d in done {
        let w = by_second.entry(d.finished() as u64).or_insert_with(|| (histogram(), 0, 0));
        if d.ok {
            w.1 += 1;
            let _ = w.0.record(d.latency_us.max(1));
        } else {
            w.2 += 1;
        }
    }
    by_second
        .into_iter()
        .map(|(s, (h, ops, errors))| Window { t: s as f64, ops, errors, p50_us: h.value_at_quantile(0.5), p99_us: h.value_at_quantile(0.99) })
        .collect()
}

/// Before the first move, during each move (started to flipped), a leave's sweep (flipped to
/// the drained drive dropped), between and after: successes completed in each per second, and
/// their latency.
fn stretches(done: &[Done], moves: &[MoveRecord], end: f64) -> Vec<Stretch> {
    let mut cuts: Vec<(String, f64, f64)> = Vec::new();
    let mut from = 0.0;
    for (i, m) in moves.iter().enumerate() {
        let name = if i == 0 { "before".to_string() } else { format!("after the {}", moves[i - 1].kind) };
        cuts.push((name, from, m.started_at));
        cuts.push((format!("during the {}", m.kind), m.started_at, m.flipped_at.max(m.started_at + 0.001)));
        if m.done_at > m.flipped_at + 0.05 {
            cuts.push((format!("the {}'s sweep", m.kind), m.flipped_at, m.done_at));
        }
        from = m.done_at.max(m.flipped_at);
    }
    cuts.push((if moves.is_empty() { "whole run".into() } else { "after".into() }, from, end));
    cuts.into_iter()
        .filter(|(_, a, b)| b > a)
        .map(|(name, a, b)| {
            let mut h = histogram();
            let (mut ops, mut errors) = (0u64, 0u64);
            for d in done.iter().filter(|d| (a..b).contains(&d.finished())) {
                if d.ok {
                    ops += 1;
                    let _ = h.record(d.latency_us.max(1));
                } else {
                    errors += 1;
                }
            }
            Stretch { name, seconds: b - a, ops_per_second: ops as f64 / (b - a), p50_us: h.value_at_quantile(0.5), p99_us: h.value_at_quantile(0.99), errors }
        })
        .collect()
}

/// Markdown: the stretches and the moves.
pub fn markdown(r: &MigrateResult) -> String {
    let mut out = String::new();
    let s = &r.spec;
    out.push_str(&format!(
        "YCSB {} at {:.0} operations/s offered ({} clients) over {} records of {} bytes; client-visible errors: {}.\n\n",
        s.workload, s.rate, s.threads, s.records, s.value_size, r.errors
    ));
    out.push_str("| stretch | seconds | ops/s | p50 ms | p99 ms | errors |\n|---|--:|--:|--:|--:|--:|\n");
    for st in &r.stretches {
        out.push_str(&format!(
            "| {} | {:.1} | {:.0} | {:.2} | {:.2} | {} |\n",
            st.name,
            st.seconds,
            st.ops_per_second,
            st.p50_us as f64 / 1000.0,
            st.p99_us as f64 / 1000.0,
            st.errors
        ));
    }
    out.push_str("\n| move | partitions | took s (start to flip) | MiB pushed | ideal MiB | moved ÷ ideal | fair share MiB | MiB/s | limit MiB/s | caught up |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    let mib = |b: u64| b as f64 / f64::from(1u32 << 20);
    for m in &r.moves {
        let took = m.flipped_at - m.started_at;
        out.push_str(&format!(
            "| {} {} | {} | {:.1} | {:.1} | {:.1} | {:.2} | {:.1} | {:.1} | {} | {} |\n",
            m.kind,
            m.drive,
            m.partitions,
            took,
            mib(m.bytes),
            mib(m.ideal_bytes),
            m.bytes as f64 / (m.ideal_bytes.max(1)) as f64,
            mib(m.fair_share_bytes),
            mib(m.bytes) / took.max(0.001),
            if m.rate_limit > 0 { format!("{:.0}", mib(m.rate_limit)) } else { "none".into() },
            m.caught_up
        ));
    }
    out
}

/// Throughput and p99 per second, the moves shaded.
pub fn plot(r: &MigrateResult, path: &Path) -> Result<(), BenchError> {
    let err = |e: &dyn std::fmt::Display| BenchError::Invalid(format!("plotting {}: {e}", path.display()));
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let (top, bottom) = root.split_vertically(280);
    panel(r, &top, "Clients during live moves (shaded: partitions moving)", "operations/s", |w| w.ops as f64).map_err(|e| err(&e))?;
    panel(r, &bottom, "", "p99 ms", |w| w.p99_us as f64 / 1000.0).map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

/// One chart of `value` per second over the run, the moves shaded.
fn panel<DB: DrawingBackend>(r: &MigrateResult, area: &DrawingArea<DB, plotters::coord::Shift>, caption: &str, label: &str, value: impl Fn(&Window) -> f64) -> Result<(), String> {
    let end = r.windows.last().map_or(1.0, |w| w.t + 1.0);
    let max = (r.windows.iter().map(&value).fold(0.0, f64::max) * 1.15).max(0.1);
    let e = |e: &dyn std::fmt::Display| e.to_string();
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..end, 0f64..max)
        .map_err(|x| e(&x))?;
    chart.configure_mesh().x_desc("seconds").y_desc(label).draw().map_err(|x| e(&x))?;
    for m in &r.moves {
        chart
            .draw_series(std::iter::once(Rectangle::new([(m.started_at, 0.0), (m.flipped_at, max)], RGBColor(255, 200, 120).mix(0.4).filled())))
            .map_err(|x| e(&x))?;
    }
    chart.draw_series(LineSeries::new(r.windows.iter().map(|w| (w.t + 0.5, value(w))), BLUE.stroke_width(2))).map_err(|x| e(&x))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(t: f64, ms: u64, ok: bool) -> Done {
        Done { due_us: (t * 1e6) as u64, latency_us: ms * 1000, ok }
    }

    #[test]
    fn operations_count_in_the_second_and_stretch_they_complete_in() {
        // Ten a second for ten seconds; 1 ms each, 9 ms while the move runs, one failure.
        let ops: Vec<Done> = (0..100).map(|i| done(i as f64 / 10.0, if (30..50).contains(&i) { 9 } else { 1 }, i != 40)).collect();
        let m = MoveRecord {
            kind: "join",
            drive: "d4".into(),
            asked_at: 2.5,
            started_at: 3.0,
            flipped_at: 5.0,
            done_at: 5.0,
            partitions: 1,
            bytes: 0,
            entries: 0,
            caught_up: 0,
            ideal_bytes: 0,
            fair_share_bytes: 0,
            rate_limit: 0,
        };
        let s = stretches(&ops, &[m], 10.0);
        let names: Vec<&str> = s.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["before", "during the join", "after"]);
        // Completions: the failure is not throughput; each stretch counts what finished in it.
        assert_eq!((s[0].ops_per_second, s[1].ops_per_second, s[2].ops_per_second), (10.0, 9.5, 10.0));
        assert_eq!((s[0].errors, s[1].errors, s[2].errors), (0, 1, 0));
        assert!(s[1].p99_us >= 9000 && s[0].p99_us < 2000);
        let w = windows(&ops);
        assert_eq!(w.len(), 10);
        assert_eq!((w[4].ops, w[4].errors), (9, 1));
        // A stall shows as a second with nothing done.
        let stalled: Vec<Done> = (0..30).map(|i| done(i as f64 / 10.0, if i == 10 { 1500 } else { 1 }, true)).collect();
        let w = windows(&stalled);
        assert_eq!(w.iter().map(|w| w.ops).collect::<Vec<_>>(), [10, 9, 11]);
    }
}
