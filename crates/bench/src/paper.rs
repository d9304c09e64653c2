//! The micro-benchmarks of "Kinetic Action" (ICPADS 2017, sections IV-VI) against one target:
//! value-size sweeps in sequential and random key order, key size, write modes (the paper's
//! Table IV), key-not-found latency, and read-latency histograms after sequential-order and
//! random-order writes. Sizes scale from a seconds-long smoke run to the paper's 1,000,000
//! pairs; results are versioned JSON with the machine they ran on.

use serde::Serialize;
use spindle_client::Synchronization;

use crate::{run, BenchError, BenchResult, BenchSpec, KeyOrder, Operation};

/// Version of the result document's layout.
pub const SCHEMA_VERSION: u32 = 1;

/// Points one run measures: 7 sizes x 3 (sequential sweep) + 7 x 2 (random sweep) + 2 x 2 (key
/// size) + 3 (write modes) + 2 (not found) + 2 (histograms).
pub const POINTS: u64 = 46;

/// The paper's value sizes (16-byte keys).
pub const VALUE_SIZES: [usize; 7] = [120, 1024, 4096, 16 * 1024, 64 * 1024, 256 * 1024, 1024 * 1024];

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
            Scale::Quick => (2 << 20, 50, 500),
            Scale::Default => (256 << 20, 1000, 100_000),
            Scale::Paper => return 1_000_000,
        };
        ((budget / value_size) as u64).clamp(min, max)
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
    pub result: BenchResult,
}

#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    pub cpu: String,
    pub cores: usize,
    pub memory_bytes: u64,
    pub kernel: String,
    pub spindle_version: &'static str,
}

impl Machine {
    pub fn this() -> Machine {
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
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct PaperResults {
    pub schema_version: u32,
    pub target: String,
    pub scale: Scale,
    pub machine: Machine,
    /// False while the run is going (or was interrupted): the rows so far are valid results.
    pub complete: bool,
    pub rows: Vec<Row>,
}

impl PaperResults {
    pub fn new(target: &str, scale: Scale) -> Self {
        PaperResults { schema_version: SCHEMA_VERSION, target: target.to_string(), scale, machine: Machine::this(), complete: false, rows: Vec::new() }
    }
}

/// Keys of different experiments never collide: each gets its own block of key numbers.
fn block(n: u64) -> u64 {
    n * 10_000_000_000
}

/// Runs every experiment against `target`; `progress` sees the results after every point (so
/// an interrupted run can still leave valid, partial results behind).
pub async fn run_paper(target: &str, scale: Scale, mut progress: impl FnMut(&PaperResults)) -> Result<PaperResults, BenchError> {
    let mut results = PaperResults::new(target, scale);
    let rows = &mut results;
    let mut push = |results: &mut PaperResults, experiment, label: String, result| {
        results.rows.push(Row { experiment, label, result });
        progress(results);
    };
    let mut next_block = 1;
    let mut fresh = || {
        next_block += 1;
        block(next_block)
    };

    // Sequential-key-order writes, then sequential and random reads, per value size.
    for size in VALUE_SIZES {
        let count = scale.count(size);
        let base = BenchSpec { key_offset: fresh(), flush_at_end: true, ..BenchSpec::new(target, Operation::Put, count, size) };
        push(rows, "sequential-write", format!("{size}"), run(base.clone()).await?);
        let read = BenchSpec { operation: Operation::Get, flush_at_end: false, ..base.clone() };
        push(rows, "sequential-read", format!("{size}"), run(read.clone()).await?);
        push(rows, "random-read-after-sequential-write", format!("{size}"), run(BenchSpec { order: KeyOrder::Random, ..read }).await?);
    }
    // Random-key-order writes and reads, per value size.
    for size in VALUE_SIZES {
        let count = scale.count(size);
        let base = BenchSpec { key_offset: fresh(), order: KeyOrder::Random, flush_at_end: true, ..BenchSpec::new(target, Operation::Put, count, size) };
        push(rows, "random-write", format!("{size}"), run(base.clone()).await?);
        push(rows, "random-read", format!("{size}"), run(BenchSpec { operation: Operation::Get, flush_at_end: false, ..base }).await?);
    }
    // Key size: 16 B versus 4 KiB keys, 4 KiB values.
    for key_size in [16, 4096] {
        let count = scale.count(4096);
        let base = BenchSpec { key_offset: fresh(), key_size, order: KeyOrder::Random, flush_at_end: true, ..BenchSpec::new(target, Operation::Put, count, 4096) };
        push(rows, "key-size-write", format!("{key_size}"), run(base.clone()).await?);
        push(rows, "key-size-read", format!("{key_size}"), run(BenchSpec { operation: Operation::Get, flush_at_end: false, ..base }).await?);
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
        let spec = BenchSpec { key_offset: fresh(), connections: 1, depth: 1, sync, flush_at_end, ..BenchSpec::new(target, Operation::Put, count, 4096) };
        push(rows, "write-mode", label.to_string(), run(spec).await?);
    }
    // Key-not-found latency: every other key written, then absent keys inside and outside the
    // written range, one lookup at a time.
    let lookups = scale.lookups();
    let offset = fresh();
    let written = BenchSpec { key_offset: offset, key_stride: 2, ..BenchSpec::new(target, Operation::Put, lookups, 120) };
    run(written).await?;
    let probe = |key_offset| BenchSpec { key_offset, key_stride: 2, connections: 1, depth: 1, order: KeyOrder::Random, ..BenchSpec::new(target, Operation::Get, lookups, 120) };
    push(rows, "not-found", "inside the written range".into(), run(probe(offset + 1)).await?);
    push(rows, "not-found", "outside the written range".into(), run(probe(fresh())).await?);
    // Random-read latency histograms after sequential-order and after random-order writes.
    for (label, order) in [("after sequential-order writes", KeyOrder::Sequential), ("after random-order writes", KeyOrder::Random)] {
        let count = scale.count(4096);
        let base = BenchSpec { key_offset: fresh(), order, flush_at_end: true, ..BenchSpec::new(target, Operation::Put, count, 4096) };
        run(base.clone()).await?;
        let reads = BenchSpec { operation: Operation::Get, order: KeyOrder::Random, connections: 1, depth: 1, flush_at_end: false, seed: 7, ..base };
        push(rows, "read-latency-histogram", label.to_string(), run(reads).await?);
    }
    results.complete = true;
    Ok(results)
}
