//! The micro-benchmarks of "Kinetic Action" (ICPADS 2017, sections IV-VI) against one target:
//! value-size sweeps in sequential and random key order, key size, write modes (the paper's
//! Table IV), key-not-found latency, and read-latency histograms after sequential-order and
//! random-order writes. Sizes scale from a seconds-long smoke run to the paper's 1,000,000
//! pairs; results are versioned JSON with the machine they ran on.

use serde::Serialize;
use spindle_client::Synchronization;

use crate::ycsb::runner::{self, YcsbResult, YcsbSpec};
use crate::ycsb::workload::Workload;
use crate::{run, BenchError, BenchResult, BenchSpec, KeyOrder, Operation};

/// Version of the result document's layout (2: repetitions, warm-up and YCSB rows).
pub const SCHEMA_VERSION: u32 = 2;

/// Points one run measures: 7 sizes x 3 (sequential sweep) + 7 x 2 (random sweep) + 2 x 2 (key
/// size) + 3 (write modes) + 2 (not found) + 2 (histograms), and with YCSB, for each of the two
/// record sizes, a load and the six core workloads.
pub fn points(options: &PaperOptions) -> u64 {
    46 + if options.ycsb { YCSB_RECORD_SIZES.len() as u64 * 7 } else { 0 }
}

/// The paper's value sizes (16-byte keys).
pub const VALUE_SIZES: [usize; 7] = [120, 1024, 4096, 16 * 1024, 64 * 1024, 256 * 1024, 1024 * 1024];

/// YCSB record sizes of the report (ten fields each, as YCSB's records).
pub const YCSB_RECORD_SIZES: [usize; 2] = [4096, 1024 * 1024];

/// The YCSB workloads in the order they run over one load (D and E insert; E last, as its
/// scans are the slowest).
pub const YCSB_ORDER: [char; 6] = ['A', 'B', 'C', 'F', 'D', 'E'];

/// How much a run measures.
#[derive(Debug, Clone, Serialize)]
pub struct PaperOptions {
    pub scale: Scale,
    /// Measurements per point; rows report the median run with the min and max.
    pub repeat: usize,
    /// Also run YCSB A-F at 4 KiB and 1 MiB records.
    pub ycsb: bool,
    /// The system's name in reports (default: the target).
    pub label: Option<String>,
}

impl PaperOptions {
    pub fn new(scale: Scale) -> Self {
        PaperOptions { scale, repeat: 1, ycsb: true, label: None }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scale {
    /// Seconds: a smoke run of every experiment.
    Quick,
    /// Minutes on this machine.
    Default,
    /// The paper's 1,000,000 pairs per point.
    Paper,
}

impl Scale {
    /// Pairs for one point of a sweep at `value_size`.
    fn count(self, value_size: usize) -> u64 {
        let (budget, min, max) = match self {
            Scale::Quick => (2 << 20, 20, 500),
            Scale::Default => (128 << 20, 500, 50_000),
            Scale::Paper => return 1_000_000,
        };
        ((budget / value_size) as u64).clamp(min, max)
    }

    /// YCSB records (and run-phase operations) at `record_size`: about 256 MiB of data.
    fn ycsb_records(self, record_size: usize) -> u64 {
        match self {
            Scale::Quick => ((8 << 20) / record_size as u64).clamp(8, 40),
            Scale::Default => ((256 << 20) / record_size as u64).clamp(200, 20_000),
            Scale::Paper => ((4u64 << 30) / record_size as u64).clamp(1000, 1_000_000),
        }
    }

    fn lookups(self) -> u64 {
        match self {
            Scale::Quick => 500,
            Scale::Default => 20_000,
            Scale::Paper => 100_000,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub experiment: &'static str,
    pub label: String,
    /// The median repetition (by throughput), with its latencies.
    pub result: BenchResult,
    pub repetitions: Spread,
}

/// Throughput over the repetitions of one point.
#[derive(Debug, Clone, Serialize)]
pub struct Spread {
    pub runs: usize,
    pub ops_per_second: MinMedMax,
    pub megabytes_per_second: MinMedMax,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct MinMedMax {
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

impl MinMedMax {
    fn of(values: &mut [f64]) -> MinMedMax {
        values.sort_by(f64::total_cmp);
        MinMedMax { min: values[0], median: values[values.len() / 2], max: values[values.len() - 1] }
    }
}

/// The median of `runs` (by throughput) and the spread of all of them.
fn median_run(runs: Vec<BenchResult>) -> (BenchResult, Spread) {
    let megabytes_per_second = MinMedMax::of(&mut runs.iter().map(|r| r.megabytes_per_second).collect::<Vec<_>>());
    let count = runs.len();
    let (median, ops_per_second) = median_by(runs, |r| r.ops_per_second);
    (median, Spread { runs: count, ops_per_second, megabytes_per_second })
}

/// The run with the median `key` (of a non-empty set), and the spread of `key` over all runs.
fn median_by<T>(mut runs: Vec<T>, key: impl Fn(&T) -> f64) -> (T, MinMedMax) {
    let spread = MinMedMax::of(&mut runs.iter().map(&key).collect::<Vec<_>>());
    runs.sort_by(|a, b| key(a).total_cmp(&key(b)));
    (runs.swap_remove(runs.len() / 2), spread)
}

/// One YCSB phase at one record size: the median repetition and the spread.
#[derive(Debug, Clone, Serialize)]
pub struct YcsbRow {
    pub record_size: usize,
    pub workload: String,
    pub phase: &'static str,
    pub result: YcsbResult,
    pub throughput: MinMedMax,
}

#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    pub cpu: String,
    pub cores: usize,
    pub memory_bytes: u64,
    pub kernel: String,
    pub spindle_version: &'static str,
    /// The filesystem and block device under the bench's working directory (for an in-process
    /// target: under its data directory).
    pub disk: Disk,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Disk {
    pub mount_point: String,
    pub device: String,
    pub filesystem: String,
    /// From /sys/block/*/queue/rotational: false for an SSD or a virtual disk that says so.
    pub rotational: Option<bool>,
    pub model: String,
}

impl Disk {
    /// The mount holding `path` (longest matching mount point in /proc/self/mounts).
    pub fn under(path: &std::path::Path) -> Disk {
        let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        let Some((device, mount_point, filesystem)) = mounts
            .lines()
            .filter_map(|l| {
                let mut f = l.split_whitespace();
                Some((f.next()?, f.next()?, f.next()?))
            })
            .filter(|(_, mp, _)| path.starts_with(mp))
            .max_by_key(|(_, mp, _)| mp.len())
        else {
            return Disk::default();
        };
        // /dev/vda1 -> vda1 -> its parent disk vda for queue/rotational and device/model.
        let name = device.rsplit('/').next().unwrap_or(device);
        let base = name.trim_end_matches(|c: char| c.is_ascii_digit()).trim_end_matches('p');
        let sys = |disk: &str, file: &str| std::fs::read_to_string(format!("/sys/block/{disk}/{file}")).ok().map(|s| s.trim().to_string());
        let pick = |file: &str| sys(name, file).or_else(|| sys(base, file));
        Disk {
            mount_point: mount_point.to_string(),
            device: device.to_string(),
            filesystem: filesystem.to_string(),
            rotational: pick("queue/rotational").map(|r| r == "1"),
            model: pick("device/model").unwrap_or_default(),
        }
    }
}

impl Machine {
    /// This machine, with the disk under the working directory.
    pub fn this() -> Machine {
        Machine::this_for(std::path::Path::new("."))
    }

    /// This machine, with the disk under `data` (a directory the target stores in).
    pub fn this_for(data: &std::path::Path) -> Machine {
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        let cpu = read("/proc/cpuinfo").lines().find(|l| l.starts_with("model name")).and_then(|l| l.split(':').nth(1)).unwrap_or("unknown").trim().to_string();
        let memory_bytes = read("/proc/meminfo")
            .lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .unwrap_or(0)
            * 1024;
        Machine {
            cpu,
            cores: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            memory_bytes,
            kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
            spindle_version: env!("CARGO_PKG_VERSION"),
            disk: Disk::under(data),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct PaperResults {
    pub schema_version: u32,
    pub target: String,
    /// The system measured, as reports name it.
    pub name: String,
    pub scale: Scale,
    pub options: PaperOptions,
    pub machine: Machine,
    /// What the target says it is: product, version, configuration.
    pub target_description: serde_json::Value,
    /// What ran before the measurements, unmeasured.
    pub warmup: String,
    /// False while the run is going (or was interrupted): the rows so far are valid results.
    pub complete: bool,
    pub rows: Vec<Row>,
    pub ycsb: Vec<YcsbRow>,
}

impl PaperResults {
    pub fn new(target: &str, options: &PaperOptions) -> Self {
        PaperResults {
            schema_version: SCHEMA_VERSION,
            target: target.to_string(),
            name: options.label.clone().unwrap_or_else(|| target.to_string()),
            scale: options.scale,
            options: options.clone(),
            machine: Machine::this_for(&data_dir(target)),
            target_description: serde_json::Value::Null,
            warmup: String::new(),
            complete: false,
            rows: Vec::new(),
            ycsb: Vec::new(),
        }
    }
}

/// Where an in-process target keeps its data; the working directory for the others.
fn data_dir(target: &str) -> std::path::PathBuf {
    let dir = target.strip_prefix("embedded:").or_else(|| crate::lsm_library::LsmKind::parse(target).map(|(_, d)| d));
    let dir = std::path::PathBuf::from(dir.unwrap_or("."));
    // The directory may not exist yet: its nearest existing ancestor is on the same mount.
    dir.ancestors().find(|a| a.exists()).map(|a| a.to_path_buf()).unwrap_or_else(|| ".".into())
}

/// Keys of different experiments never collide: each gets its own block of key numbers.
struct Blocks(u64);

impl Blocks {
    fn fresh(&mut self) -> u64 {
        self.0 += 1;
        self.0 * 10_000_000_000
    }
}

/// Runs every experiment against `target`; `progress` sees the results after every point (so
/// an interrupted run can still leave valid, partial results behind).
pub async fn run_paper(target: &str, options: PaperOptions, mut progress: impl FnMut(&PaperResults)) -> Result<PaperResults, BenchError> {
    if options.repeat == 0 {
        return Err(BenchError::Invalid("repeat must be at least 1".into()));
    }
    let scale = options.scale;
    let mut results = PaperResults::new(target, &options);
    let mut blocks = Blocks(1);
    let session = crate::target::connect(target, 1, crate::target::Needs { scans: false }).await?;
    results.target_description = session[0].describe().await.map_err(BenchError::Invalid)?;
    drop(session);

    // Warm-up, unmeasured: connections, the target's caches and allocator, a JVM's JIT.
    let warm = BenchSpec { key_offset: blocks.fresh(), ..BenchSpec::new(target, Operation::Put, scale.count(4096), 4096) };
    run(warm.clone()).await?;
    run(BenchSpec { operation: Operation::Get, ..warm.clone() }).await?;
    results.warmup = format!("{} puts and gets of {} B values, not measured", warm.count, warm.value_size);

    let mut p = Points { results, progress: &mut progress, repeat: options.repeat };
    // Sequential-key-order writes, then sequential and random reads, per value size. Each
    // repetition of a write writes a fresh block of keys; reads repeat over the last one.
    for size in VALUE_SIZES {
        let base = BenchSpec { flush_at_end: true, ..BenchSpec::new(target, Operation::Put, scale.count(size), size) };
        let written = p.writes("sequential-write", format!("{size}"), &base, &mut blocks).await?;
        let read = BenchSpec { operation: Operation::Get, flush_at_end: false, ..written };
        p.point("sequential-read", format!("{size}"), &read).await?;
        p.point("random-read-after-sequential-write", format!("{size}"), &BenchSpec { order: KeyOrder::Random, ..read }).await?;
    }
    // Random-key-order writes and reads, per value size.
    for size in VALUE_SIZES {
        let base = BenchSpec { order: KeyOrder::Random, flush_at_end: true, ..BenchSpec::new(target, Operation::Put, scale.count(size), size) };
        let written = p.writes("random-write", format!("{size}"), &base, &mut blocks).await?;
        p.point("random-read", format!("{size}"), &BenchSpec { operation: Operation::Get, flush_at_end: false, ..written }).await?;
    }
    // Key size: 16 B versus 4 KiB keys, 4 KiB values.
    for key_size in [16, 4096] {
        let base = BenchSpec { key_size, order: KeyOrder::Random, flush_at_end: true, ..BenchSpec::new(target, Operation::Put, scale.count(4096), 4096) };
        let written = p.writes("key-size-write", format!("{key_size}"), &base, &mut blocks).await?;
        p.point("key-size-read", format!("{key_size}"), &BenchSpec { operation: Operation::Get, flush_at_end: false, ..written }).await?;
    }
    // Write modes (Table IV): one client, one request at a time, 4 KiB values.
    let count = scale.count(4096).min(match scale {
        Scale::Quick => 200,
        Scale::Default => 5_000,
        Scale::Paper => 100_000,
    });
    for (label, sync, flush_at_end) in [
        ("WRITETHROUGH", Synchronization::Writethrough, false),
        ("FLUSH every write", Synchronization::Flush, false),
        ("WRITEBACK + FLUSH", Synchronization::Writeback, true),
    ] {
        let spec = BenchSpec { connections: 1, depth: 1, sync, flush_at_end, ..BenchSpec::new(target, Operation::Put, count, 4096) };
        p.writes("write-mode", label.to_string(), &spec, &mut blocks).await?;
    }
    // Key-not-found latency: every other key written, then absent keys inside and outside the
    // written range, one lookup at a time.
    let lookups = scale.lookups();
    let offset = blocks.fresh();
    run(BenchSpec { key_offset: offset, key_stride: 2, ..BenchSpec::new(target, Operation::Put, lookups, 120) }).await?;
    let probe = |key_offset| BenchSpec { key_offset, key_stride: 2, connections: 1, depth: 1, order: KeyOrder::Random, ..BenchSpec::new(target, Operation::Get, lookups, 120) };
    p.point("not-found", "inside the written range".into(), &probe(offset + 1)).await?;
    p.point("not-found", "outside the written range".into(), &probe(blocks.fresh())).await?;
    // Random-read latency histograms after sequential-order and after random-order writes.
    for (label, order) in [("after sequential-order writes", KeyOrder::Sequential), ("after random-order writes", KeyOrder::Random)] {
        let base = BenchSpec { key_offset: blocks.fresh(), order, flush_at_end: true, ..BenchSpec::new(target, Operation::Put, scale.count(4096), 4096) };
        run(base.clone()).await?;
        let reads = BenchSpec { operation: Operation::Get, order: KeyOrder::Random, connections: 1, depth: 1, flush_at_end: false, seed: 7, ..base };
        p.point("read-latency-histogram", label.to_string(), &reads).await?;
    }
    // YCSB A-F over one load per record size (ten fields of a tenth of the record each).
    if options.ycsb {
        for record_size in YCSB_RECORD_SIZES {
            let records = scale.ycsb_records(record_size);
            let mut workload = Workload::core('A').expect("workload A");
            workload.field_length = runner::field_length_for(&workload, record_size);
            let spec = YcsbSpec { target: target.to_string(), workload, records, operations: records, threads: 8, target_ops_per_second: None, seed: 1 };
            p.ycsb(record_size, "load", spec.clone()).await?;
            for letter in YCSB_ORDER {
                let mut workload = Workload::core(letter).expect("core workload");
                workload.field_length = spec.workload.field_length;
                p.ycsb(record_size, "run", YcsbSpec { workload, ..spec.clone() }).await?;
            }
        }
    }
    let mut results = p.results;
    results.complete = true;
    Ok(results)
}

/// Measures points `repeat` times each and reports them.
struct Points<'a, F: FnMut(&PaperResults)> {
    results: PaperResults,
    progress: &'a mut F,
    repeat: usize,
}

impl<F: FnMut(&PaperResults)> Points<'_, F> {
    fn push(&mut self, experiment: &'static str, label: String, runs: Vec<BenchResult>) {
        let (result, repetitions) = median_run(runs);
        self.results.rows.push(Row { experiment, label, result, repetitions });
        (self.progress)(&self.results);
    }

    /// Repeats a read-only point over the same keys.
    async fn point(&mut self, experiment: &'static str, label: String, spec: &BenchSpec) -> Result<(), BenchError> {
        let mut runs = Vec::with_capacity(self.repeat);
        for _ in 0..self.repeat {
            runs.push(run(spec.clone()).await?);
        }
        self.push(experiment, label, runs);
        Ok(())
    }

    /// Repeats a write point, each time into a fresh block of keys; returns the last spec (its
    /// keys hold the data the following reads use).
    async fn writes(&mut self, experiment: &'static str, label: String, spec: &BenchSpec, blocks: &mut Blocks) -> Result<BenchSpec, BenchError> {
        let mut runs = Vec::with_capacity(self.repeat);
        let mut last = spec.clone();
        for _ in 0..self.repeat {
            last = BenchSpec { key_offset: blocks.fresh(), ..spec.clone() };
            runs.push(run(last.clone()).await?);
        }
        self.push(experiment, label, runs);
        Ok(last)
    }

    async fn ycsb(&mut self, record_size: usize, phase: &'static str, spec: YcsbSpec) -> Result<(), BenchError> {
        let mut runs = Vec::with_capacity(self.repeat);
        for _ in 0..self.repeat {
            runs.push(if phase == "load" { runner::load(spec.clone()).await? } else { runner::run(spec.clone()).await? });
        }
        let (result, throughput) = median_by(runs, |r| r.throughput_ops_per_second);
        self.results.ycsb.push(YcsbRow { record_size, workload: spec.workload.name.to_string(), phase, result, throughput });
        (self.progress)(&self.results);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ycsb_records_fit_their_size() {
        for size in YCSB_RECORD_SIZES {
            let mut w = Workload::core('A').unwrap();
            w.field_length = runner::field_length_for(&w, size);
            let len = runner::record_len(&w);
            assert!(len <= size && len + w.field_count > size, "{size}: {len}");
        }
    }

    #[test]
    fn median_run_takes_the_middle_and_the_spread() {
        let mk = |ops: f64| {
            let spec = BenchSpec::new("memory:", Operation::Get, 1, 1);
            crate::summarize(spec, &crate::new_histogram(), 0, (std::time::Duration::from_secs_f64(1.0 / ops), 0.0))
        };
        let (median, spread) = median_run(vec![mk(300.0), mk(100.0), mk(200.0)]);
        assert!((median.ops_per_second - 200.0).abs() < 1.0);
        assert!((spread.ops_per_second.min - 100.0).abs() < 1.0 && (spread.ops_per_second.max - 300.0).abs() < 1.0);
        assert_eq!(spread.runs, 3);
    }

    #[tokio::test]
    async fn a_run_without_repetitions_is_refused() {
        let e = run_paper("memory:", PaperOptions { repeat: 0, ..PaperOptions::new(Scale::Quick) }, |_| {}).await.expect_err("refused");
        assert!(e.to_string().contains("repeat must be at least 1"), "{e}");
    }
}
