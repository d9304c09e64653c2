//! `spindle bench act device|drive`: ACT-style certification (spindle_bench::act), with ACT's
//! text table per slice on stdout, versioned JSON results and an SVG figure.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use spindle_bench::act::certify::DEFAULT_LADDER;
use spindle_bench::act::device::DeviceSpec;
use spindle_bench::act::drive::DriveSpec;
use spindle_bench::act::rates::Workload;
use spindle_bench::act::run::Timing;
use spindle_bench::act::{certify_device, certify_drive, plot::plot, text, ActResults, Event, Plan};

use crate::client_cmds::SyncArg;
use crate::json_file::write_atomically;

type CmdResult = Result<(), Box<dyn std::error::Error>>;

#[derive(Subcommand)]
pub enum ActCommand {
    /// Certify a file or block device: O_DIRECT record reads, large-block reads and writes.
    Device(DeviceArgs),
    /// Certify a Kinetic drive: GETs and PUTs of records at the same rates.
    Drive(DriveArgs),
}

#[derive(Args)]
pub struct DeviceArgs {
    /// File or block device to test (overwritten)
    #[arg(long)]
    device: PathBuf,
    /// Create or resize a regular file of this size first (bytes, or with K/M/G/T[iB], KB/MB/GB/TB)
    #[arg(long, value_parser = parse_size)]
    size: Option<u64>,
    /// Confirm that a block device may be overwritten from end to end
    #[arg(long)]
    yes_destroy_data: bool,
    /// Open without O_DSYNC (ACT's disable-odsync)
    #[arg(long)]
    disable_odsync: bool,
    /// Threads issuing the record reads [default: 5 per CPU, as ACT]
    #[arg(long)]
    service_threads: Option<usize>,
    #[command(flatten)]
    plan: PlanArgs,
}

#[derive(Args)]
pub struct DriveArgs {
    /// Kinetic endpoint (HOST:PORT or kinetic://HOST:PORT)
    #[arg(long, default_value = "127.0.0.1:8123")]
    drive: String,
    /// Records in the key space
    #[arg(long, default_value_t = 100_000)]
    keys: u64,
    /// Connections for the GETs, and as many again for the PUTs
    #[arg(long, default_value_t = 4)]
    connections: usize,
    /// Synchronization of the PUTs (WRITEBACK: acknowledged once journaled, as Aerospike
    /// acknowledges from its write buffer)
    #[arg(long, value_enum, default_value = "writeback")]
    sync: SyncArg,
    #[command(flatten)]
    plan: PlanArgs,
}

#[derive(Args)]
pub struct PlanArgs {
    /// Loads to step through, in multiples of 1x = 2000 reads/s + 1000 writes/s; stepping
    /// stops at the first that fails
    #[arg(long, value_delimiter = ',', default_values_t = DEFAULT_LADDER)]
    ratings: Vec<u32>,
    /// Seconds per run
    #[arg(long, default_value_t = 60.0)]
    duration: f64,
    /// Seconds per slice: every slice must meet the criteria
    #[arg(long, default_value_t = 10.0)]
    slice: f64,
    /// Stop a run when a stream falls this many seconds behind its schedule (0: never)
    #[arg(long, default_value_t = 10.0)]
    max_lag: f64,
    #[arg(long, default_value_t = 1536)]
    record_bytes: u32,
    #[arg(long, default_value_t = 128)]
    large_block_kib: u32,
    #[arg(long, default_value_t = 50)]
    defrag_lwm_pct: u32,
    #[arg(long, default_value_t = 1)]
    replication_factor: u32,
    #[arg(long, default_value_t = 0)]
    update_pct: u32,
    #[arg(long)]
    no_defrag_reads: bool,
    /// Salt the space first (device: zero, then random data; drive: put every key)
    #[arg(long)]
    prep: bool,
    /// After --prep, wait this many seconds before the first run (a VM disk's burst allowance
    /// refills, a drive's compactions finish)
    #[arg(long, default_value_t = 0.0)]
    settle: f64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write the JSON results here (rewritten after every run)
    #[arg(long)]
    out: Option<PathBuf>,
    /// Draw percent-over-threshold per slice, one row per rating (SVG)
    #[arg(long)]
    plot: Option<PathBuf>,
    /// JSON results on stdout; the text table goes to stderr
    #[arg(long)]
    json: bool,
}

fn seconds(name: &str, s: f64) -> Result<Duration, String> {
    Duration::try_from_secs_f64(s).map_err(|_| format!("--{name} {s}: not a number of seconds"))
}

impl PlanArgs {
    fn plan(&self) -> Result<Plan, String> {
        let max_lag = seconds("max-lag", self.max_lag)?;
        let large_block_bytes = self.large_block_kib.checked_mul(1024).ok_or_else(|| format!("--large-block-kib {} is too large", self.large_block_kib))?;
        Ok(Plan {
            workload: Workload {
                record_bytes: self.record_bytes,
                large_block_bytes,
                replication_factor: self.replication_factor,
                update_pct: self.update_pct,
                defrag_lwm_pct: self.defrag_lwm_pct,
                no_defrag_reads: self.no_defrag_reads,
                ..Workload::default()
            },
            timing: Timing { duration: seconds("duration", self.duration)?, slice: seconds("slice", self.slice)?, max_lag: (!max_lag.is_zero()).then_some(max_lag) },
            ladder: self.ratings.clone(),
            seed: self.seed,
            prep: self.prep,
            settle: seconds("settle", self.settle)?,
        })
    }
}

/// `4096`, `64MiB`, `4G`, `1.5GB`: K/M/G/T and KiB.. are powers of 1024, KB.. of 1000.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let n: f64 = number.parse().map_err(|_| format!("{s:?}: not a size"))?;
    let scale: f64 = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 1.0,
        "K" | "KIB" => 1024.0,
        "M" | "MIB" => 1024f64.powi(2),
        "G" | "GIB" => 1024f64.powi(3),
        "T" | "TIB" => 1024f64.powi(4),
        "KB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "TB" => 1e12,
        other => return Err(format!("{s:?}: unknown unit {other:?}")),
    };
    let bytes = n * scale;
    if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
        return Err(format!("{s:?}: out of range"));
    }
    Ok(bytes.round() as u64)
}

/// Prints the run as it goes and keeps `--out` up to date.
struct Reporter<'a> {
    plan: &'a PlanArgs,
    title: String,
    write_error: Option<Box<dyn std::error::Error>>,
}

impl Reporter<'_> {
    fn say(&self, line: &str) {
        if self.plan.json {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    }

    fn event(&mut self, e: Event<'_>) {
        match e {
            Event::Prepared { seconds } => self.say(&format!("prepared (salted) in {seconds:.1} s")),
            Event::RunStarted { rating, rates, histograms } => {
                let (reads, writes) = (rates.internal_reads_per_sec, rates.internal_writes_per_sec);
                let load = if histograms.contains(&"large-block-writes") {
                    format!("{reads:.0} record reads/s; {writes:.0} record writes/s as {:.2} large-block writes/s and {:.2} large-block reads/s", rates.large_block_writes_per_sec, rates.large_block_reads_per_sec)
                } else {
                    format!("{reads:.0} GETs/s, {writes:.0} PUTs/s")
                };
                self.say(&format!("\n{} at {rating}x: {load}", self.title));
                self.say(&text::header(histograms));
            }
            Event::Slice(s) => self.say(&text::slice_row(s)),
            Event::RunFinished { results } => {
                if let Some(run) = results.runs.last() {
                    self.say(&text::summary(&run.outcome.slices));
                    if run.verdict.passed {
                        self.say(&format!("{}x: PASS", run.rating));
                    } else {
                        let shown: Vec<String> = run.verdict.failures.iter().take(5).map(|f| f.to_string()).collect();
                        let more = run.verdict.failures.len().saturating_sub(shown.len());
                        self.say(&format!("{}x: FAIL: {}{}", run.rating, shown.join("; "), if more > 0 { format!(" (and {more} more)") } else { String::new() }));
                    }
                }
                if let Some(path) = &self.plan.out {
                    if let Err(e) = write_atomically(path, results) {
                        self.write_error.get_or_insert(e);
                    }
                }
            }
        }
    }

    fn finish(self, results: &ActResults) -> CmdResult {
        if let Some(e) = self.write_error {
            return Err(e);
        }
        match results.certified_rating {
            Some(r) => self.say(&format!("\ncertified: {r}x ({})", results.target)),
            None => self.say(&format!("\ncertified: none ({} failed at {}x)", results.target, results.plan.ladder.first().copied().unwrap_or(1))),
        }
        if let Some(path) = &self.plan.out {
            write_atomically(path, results)?;
        }
        if let Some(path) = &self.plan.plot {
            plot(&results.runs, &self.title, path)?;
        }
        if self.plan.json {
            println!("{}", serde_json::to_string_pretty(results)?);
        }
        Ok(())
    }
}

pub async fn run(cmd: ActCommand) -> CmdResult {
    match cmd {
        ActCommand::Device(a) => {
            let plan = a.plan.plan()?;
            let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
            let spec = DeviceSpec { path: a.device.clone(), create_bytes: a.size, yes_destroy_data: a.yes_destroy_data, odsync: !a.disable_odsync, service_threads: a.service_threads.unwrap_or(5 * cpus) };
            let mut reporter = Reporter { plan: &a.plan, title: format!("ACT device {}", a.device.display()), write_error: None };
            let results = tokio::task::block_in_place(|| certify_device(&spec, &plan, &mut |e| reporter.event(e)))?;
            reporter.finish(&results)
        }
        ActCommand::Drive(a) => {
            let plan = a.plan.plan()?;
            let spec = DriveSpec { target: a.drive.clone(), keys: a.keys, connections: a.connections, sync: a.sync.into() };
            let mut reporter = Reporter { plan: &a.plan, title: format!("ACT drive {}", a.drive), write_error: None };
            let results = tokio::task::block_in_place(|| certify_drive(spec, &plan, &mut |e| reporter.event(e)))?;
            reporter.finish(&results)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_take_binary_and_decimal_units() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("4G"), Ok(4 << 30));
        assert_eq!(parse_size("1.5GB"), Ok(1_500_000_000));
        assert!(parse_size("12 parsecs").is_err());
        assert!(parse_size("").is_err());
    }
}
