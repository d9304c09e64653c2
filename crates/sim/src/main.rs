//! `spindle-sim`: runs the simulator over seeds.
//!
//! `spindle-sim --seed N` replays one seed; `spindle-sim --seeds K [--from N]` runs K seeds
//! from N and stops at the first failure, printing its seed. `--ops`, `--clients`,
//! `--concurrency` (operations a client runs at once), `--drives`
//! and `--no-faults` change the run; `--churn` adds member changes (two spares, leaves down to
//! three members, drives that left join again); `--moves` changes members far more often
//! (one move after another); `--lossy` makes links fail at random too; `--slow`
//! makes a client's links to the drives slow for a while (operations straddle map changes);
//! `--stalls` pauses one decided write in four before its requests go out, `--stale-views`
//! one operation in four between choosing its map and its first request; `--s3`
//! adds two S3 gateways (clocks skewed) doing PUT, GET and DELETE on shared objects; `--history FILE`
//! writes each run's history there.

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut options = spindle_sim::Options::default();
    let (mut from, mut count, mut verbose, mut steady_gateways) = (0u64, 1u64, false, false);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut number = |what: &str| -> Option<u64> {
            let v = args.next().and_then(|v| v.parse().ok());
            if v.is_none() {
                eprintln!("{what} takes a number");
            }
            v
        };
        let parsed = match arg.as_str() {
            "--seed" => number("--seed").map(|n| {
                from = n;
                count = 1;
            }),
            "--from" => number("--from").map(|n| from = n),
            "--seeds" => number("--seeds").map(|n| count = n),
            "--ops" => number("--ops").map(|n| options.ops = n),
            "--clients" => number("--clients").map(|n| options.clients = n as usize),
            "--concurrency" => number("--concurrency").map(|n| options.concurrency = n),
            "--drives" => number("--drives").map(|n| options.drives = n as usize),
            "--keys" => number("--keys").map(|n| options.keys = n),
            "--no-faults" => {
                options.faults = false;
                Some(())
            }
            "-v" | "--verbose" => {
                verbose = true;
                Some(())
            }
            "--churn" => {
                let churn = spindle_sim::Options::churn(0);
                (options.spares, options.min_members, options.rejoin) = (churn.spares, churn.min_members, churn.rejoin);
                Some(())
            }
            "--s3" => {
                options.gateways = 2;
                Some(())
            }
            "--s3-as-found" => {
                steady_gateways = true;
                Some(())
            }
            "--slow" => {
                options.slow_links = true;
                Some(())
            }
            "--moves" => {
                options.moves = true;
                Some(())
            }
            "--stalls" => {
                options.stalls = true;
                Some(())
            }
            "--stale-views" => {
                options.stale_views = true;
                Some(())
            }
            "--lossy" => {
                options.lossy = true;
                Some(())
            }
            "--history" => args.next().map(|path| options.history = Some(path.into())),
            "--trace" => {
                options.trace = true;
                Some(())
            }
            other => {
                eprintln!("unknown argument {other}; usage: spindle-sim [--seed N | --seeds K --from N] [--ops N] [--clients N] [--concurrency N] [--drives N] [--keys N] [--no-faults] [--churn] [--moves] [--stalls] [--stale-views] [--lossy] [--slow] [--s3] [--s3-as-found] [--trace] [--history FILE] [-v]");
                None
            }
        };
        if parsed.is_none() {
            return ExitCode::from(2);
        }
    }
    // Gateways crash with the other faults, and upload some objects in parts, unless asked
    // not to (`--s3-as-found`: a replay of a seed found before they did).
    options.gateway_crashes = options.gateways > 0 && !steady_gateways;
    options.multipart = options.gateway_crashes;
    if let Ok(filter) = std::env::var("SPINDLE_LOG") {
        tracing_subscriber::fmt().with_timer(SimTime).with_ansi(false).with_env_filter(tracing_subscriber::EnvFilter::new(filter)).with_writer(std::io::stderr).init();
    }
    let started = std::time::Instant::now();
    let (mut operations, mut faults, mut orphans) = (0usize, 0usize, 0u64);
    for seed in from..from + count {
        options.seed = seed;
        match spindle_sim::run(&options) {
            Ok(report) => {
                operations += report.events;
                faults += report.faults.len();
                orphans += report.orphans;
                if verbose || count == 1 {
                    println!(
                        "seed {seed}: {} operations ({} acknowledged, {} unknown), {} faults, {} orphans, {:.1} s simulated, digest {:016x}",
                        report.events,
                        report.acknowledged,
                        report.failed,
                        report.faults.len(),
                        report.orphans,
                        report.simulated.as_secs_f64(),
                        report.digest
                    );
                }
                if verbose && count == 1 {
                    for line in &report.faults {
                        println!("  {line}");
                    }
                }
            }
            Err(failure) => {
                println!("seed {seed} FAILED: {failure}");
                println!("replay: spindle-sim --seed {seed}{}", run_flags());
                return ExitCode::FAILURE;
            }
        }
    }
    println!("{count} seeds from {from} passed: {operations} operations, {faults} faults, {orphans} orphans found by scans, in {:.0} s", started.elapsed().as_secs_f64());
    ExitCode::SUCCESS
}

/// The flags that shape a run (all but which seeds), as given: a failure's replay needs them.
fn run_flags() -> String {
    let mut flags = String::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if matches!(arg.as_str(), "--seed" | "--seeds" | "--from") {
            args.next();
        } else {
            flags.push(' ');
            flags.push_str(&arg);
        }
    }
    flags
}

/// Log lines stamped with the simulated time in microseconds, the clock of the history's calls
/// and returns, so that a line can be set beside the operations it served.
struct SimTime;

impl tracing_subscriber::fmt::time::FormatTime for SimTime {
    fn format_time(&self, w: &mut tracing_subscriber::fmt::format::Writer<'_>) -> std::fmt::Result {
        write!(w, "{:>10}", spindle_sim::etcd::now().as_micros())
    }
}
