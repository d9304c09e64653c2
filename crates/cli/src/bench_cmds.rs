//! `spindle bench`: the put/get benchmark, the paper's experiments, YCSB, P2P, ACT and the
//! archival workloads, each a subcommand over the bench crate.

use clap::{Args, Subcommand, ValueEnum};
use serde_json::json;
use spindle_bench::{BenchSpec, KeyOrder, Operation};

use crate::client_cmds::{CmdResult, SyncArg};
use crate::json_file::write_atomically;

#[derive(Subcommand)]
pub enum BenchCommand {
    /// Put COUNT values and report throughput and latency.
    Put(BenchArgs),
    /// Get COUNT keys (written by a previous `bench put`) and report throughput and latency.
    Get(BenchArgs),
    /// Client put versus drive-to-drive push of the same pairs between two drives.
    P2p(P2pBenchArgs),
    /// A YCSB core workload (A-F): load phase, run phase, or both; YCSB-style output lines.
    Ycsb(YcsbArgs),
    /// Live moves under load: a cluster loaded with records, YCSB at a fixed rate, a drive
    /// added and then one removed; throughput and p99 per second before, during and after,
    /// bytes moved against the ideal, client-visible errors (scripts/bench-migrate.sh sets
    /// up the cluster and compares with `bench p2p`).
    Migrate(MigrateArgs),
    /// Archival workloads: file-size models (Gamma / generalized Gamma) with bootstrap
    /// envelopes, sequential writes and random reads at capacity-utilisation levels.
    #[command(subcommand)]
    Archive(crate::archive_cmds::ArchiveCommand),
    /// S3 load generator, run as MinIO's warp runs: PUT (N workers uploading new objects for a
    /// duration), GET (a prepared set read back at random) or mixed; MiB/s, objects/s,
    /// latency and time-to-first-byte percentiles, the server's CPU per MiB
    /// (scripts/bench-s3.sh: Spindle's gateway and MinIO side by side).
    S3(crate::bench_s3_cmds::S3BenchArgs),
    /// A TCP relay in front of a server, to measure what one more hop costs (the S3
    /// benchmark's MinIO behind it has the hop Spindle's gateway makes to its drive). Prints
    /// "relaying on ADDR" once it listens; runs until stopped.
    Relay {
        /// Where to listen (port 0: any free port)
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: std::net::SocketAddr,
        /// The server every connection is relayed to
        #[arg(long)]
        to: std::net::SocketAddr,
    },
    /// What TLS costs this machine: messages over loopback connections, plain TCP and then TLS
    /// as the drives and the cluster's clients use it, both ends in this process; MiB/s and CPU
    /// per GiB of each (the floor under scripts/bench-cluster.sh --secured)
    TlsFloor {
        /// Bytes per message
        #[arg(long, default_value_t = 1 << 20)]
        message_size: usize,
        #[arg(long, default_value_t = 2000)]
        messages: u64,
        #[arg(long, default_value_t = 4)]
        connections: usize,
        /// One JSON object instead of text
        #[arg(long)]
        json: bool,
    },
    /// Side-by-side Markdown of `bench s3 --json` result files, each server's row and its ratio
    /// to the baseline's, per operation, object size and worker count.
    S3Compare {
        results: Vec<std::path::PathBuf>,
        /// The label (`bench s3 --label`) the others are divided by
        #[arg(long, default_value = "minio")]
        baseline: String,
    },
    /// The Kinetic paper's micro-benchmarks against one target, as versioned JSON.
    Paper {
    /// Target: a Kinetic endpoint (HOST:PORT or kinetic://HOST:PORT), Spindle's engine in-process
    /// (embedded:DIR, memory:), redis://HOST:PORT, or LevelDB/RocksDB in-process (leveldb:DIR,
    /// rocksdb:DIR, rocksdb-blob:DIR: RocksDB with blob files), or a Spindle cluster
    /// (cluster:ETCD_URLS[#NAME]; cluster-cas:... puts by compare-and-swap; cluster-batch:... puts as one-operation batches), or a Kinetic endpoint through the client's request API
    /// (client:HOST:PORT: the path a cluster client takes, where HOST:PORT alone gets the
    /// load generator's raw pipeline)
        #[arg(long, default_value = "127.0.0.1:8123")]
        drive: String,
        #[arg(long, value_enum, default_value = "default")]
        scale: ScaleArg,
        /// Measurements per point (rows give the median run, with min and max)
        #[arg(long, default_value_t = 1)]
        repeat: usize,
        /// Leave out YCSB A-F (4 KiB and 1 MiB records)
        #[arg(long)]
        no_ycsb: bool,
        /// The system's name in reports (default: the target)
        #[arg(long)]
        label: Option<String>,
        /// Where to write the JSON results (default: standard output)
        #[arg(long)]
        out: Option<std::path::PathBuf>,
    },
    /// ACT-style SSD certification of a device or a drive: open-loop record reads and writes,
    /// per-slice latency thresholds, pass/fail, load stepping.
    #[command(subcommand)]
    Act(crate::act_cmds::ActCommand),
    /// Markdown + HTML report with SVG figures from `bench paper` result files (one per target).
    Report {
        results: Vec<std::path::PathBuf>,
        #[arg(long, default_value = "bench-report")]
        out: std::path::PathBuf,
    },
    /// Draw operations and keys as a YCSB run would, without a target (JSON: operation
    /// counts and the most drawn record numbers), to compare with YCSB's own generators.
    YcsbSample {
        #[arg(long, default_value = "A")]
        workload: char,
        #[arg(long, default_value_t = 1000)]
        records: u64,
        #[arg(long, default_value_t = 1000)]
        operations: u64,
        #[arg(long, default_value_t = 1_000_000)]
        draws: u64,
        /// How many of the most drawn records to list
        #[arg(long, default_value_t = 50)]
        top: usize,
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
}

#[derive(Args)]
pub struct YcsbArgs {
    /// Target: a Kinetic endpoint (HOST:PORT or kinetic://HOST:PORT), Spindle's engine in-process
    /// (embedded:DIR, memory:), redis://HOST:PORT, or LevelDB/RocksDB in-process (leveldb:DIR,
    /// rocksdb:DIR, rocksdb-blob:DIR: RocksDB with blob files), or a Spindle cluster
    /// (cluster:ETCD_URLS[#NAME]; cluster-cas:... puts by compare-and-swap; cluster-batch:... puts as one-operation batches), or a Kinetic endpoint through the client's request API
    /// (client:HOST:PORT: the path a cluster client takes, where HOST:PORT alone gets the
    /// load generator's raw pipeline)
    #[arg(long, default_value = "127.0.0.1:8123")]
    drive: String,
    /// A, B, C, D, E or F
    #[arg(long, default_value = "A")]
    workload: char,
    #[arg(long, default_value_t = 10_000)]
    records: u64,
    #[arg(long, default_value_t = 10_000)]
    operations: u64,
    /// Bytes per field (YCSB's fieldlength; ten fields per record)
    #[arg(long, default_value_t = 100)]
    field_length: usize,
    /// Client threads (one connection each)
    #[arg(long, default_value_t = 8)]
    threads: usize,
    /// Open-loop target rate, operations per second over all threads
    #[arg(long)]
    target_rate: Option<f64>,
    #[arg(long, value_enum, default_value = "both")]
    phase: PhaseArg,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print JSON results instead of YCSB's text lines
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum ScaleArg {
    Quick,
    Default,
    Paper,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum PhaseArg {
    Load,
    Run,
    Both,
}

#[derive(Args)]
pub struct MigrateArgs {
    /// etcd endpoints of the cluster (comma-separated)
    #[arg(long, env = "SPINDLE_ETCD", default_value = "http://127.0.0.1:2379")]
    etcd: String,
    #[arg(long, env = "SPINDLE_CLUSTER", default_value = "spindle")]
    cluster: String,
    /// The drive to add, ID=HOST:PORT
    #[arg(long)]
    add: Option<String>,
    /// The member to remove once the addition is done
    #[arg(long)]
    remove: Option<String>,
    #[arg(long, default_value_t = 20_000)]
    records: u64,
    #[arg(long, default_value_t = 4096)]
    value_size: usize,
    /// YCSB core workload: A, B, C or F
    #[arg(long, default_value = "A")]
    workload: char,
    /// Operations per second offered
    #[arg(long, default_value_t = 500.0)]
    rate: f64,
    #[arg(long, default_value_t = 8)]
    threads: usize,
    /// Seconds of quiet before the first change, between changes and after the last
    #[arg(long, default_value_t = 5.0)]
    settle_secs: f64,
    /// Seconds a move may take before the run fails
    #[arg(long, default_value_t = 600.0)]
    move_limit_secs: f64,
    /// Write the whole result (every second, every move) as JSON here
    #[arg(long)]
    out: Option<std::path::PathBuf>,
    /// Draw throughput and p99 over time (SVG) here
    #[arg(long)]
    plot: Option<std::path::PathBuf>,
    /// Print the result as JSON instead of tables
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct P2pBenchArgs {
    /// Source drive (holds the data, pushes it)
    #[arg(long)]
    source: String,
    /// Target drive
    #[arg(long)]
    target: String,
    /// The target's address as the source reaches it (default: --target)
    #[arg(long)]
    target_from_source: Option<String>,
    #[arg(long, default_value_t = 512)]
    count: u64,
    #[arg(long, default_value_t = 1024 * 1024)]
    value_size: usize,
    #[arg(long, default_value_t = 256)]
    keys_per_request: usize,
    #[arg(long, default_value_t = 2)]
    requests_in_flight: usize,
    #[arg(long, default_value_t = 4)]
    connections: usize,
    #[arg(long, default_value_t = 4)]
    depth: usize,
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct BenchArgs {
    /// Target: a Kinetic endpoint (HOST:PORT or kinetic://HOST:PORT), Spindle's engine in-process
    /// (embedded:DIR, memory:), redis://HOST:PORT, or LevelDB/RocksDB in-process (leveldb:DIR,
    /// rocksdb:DIR, rocksdb-blob:DIR: RocksDB with blob files), or a Spindle cluster
    /// (cluster:ETCD_URLS[#NAME]; cluster-cas:... puts by compare-and-swap; cluster-batch:... puts as one-operation batches), or a Kinetic endpoint through the client's request API
    /// (client:HOST:PORT: the path a cluster client takes, where HOST:PORT alone gets the
    /// load generator's raw pipeline), or the floor under replication on drives A,B,C
    /// (fanout:A,B,C: each put on all, answered at a majority; fanout-read:A,B,C: the version
    /// read from R-W+1 of them first)
    #[arg(long, default_value = "127.0.0.1:8123")]
    drive: String,
    #[arg(long, default_value_t = 10_000)]
    count: u64,
    #[arg(long, default_value_t = 4096)]
    value_size: usize,
    #[arg(long, default_value_t = 16)]
    key_size: usize,
    #[arg(long, default_value_t = 8)]
    connections: usize,
    /// Requests in flight per connection
    #[arg(long, default_value_t = 16)]
    depth: usize,
    #[arg(long, value_enum, default_value = "sequential")]
    order: OrderArg,
    #[arg(long, value_enum, default_value = "writeback")]
    sync: SyncArg,
    /// End a put run with FLUSHALLDATA (timed)
    #[arg(long)]
    flush: bool,
    /// Before a get run, put the same keys (not measured) and let an in-process engine finish
    /// the background work they caused: for an in-process target, whose data lives only as
    /// long as this process (memory:, embedded:)
    #[arg(long)]
    preload: bool,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum OrderArg {
    Sequential,
    Random,
}

pub async fn bench(cmd: BenchCommand) -> CmdResult {
    let (operation, a) = match cmd {
        BenchCommand::Put(a) => (Operation::Put, a),
        BenchCommand::Get(a) => (Operation::Get, a),
        BenchCommand::P2p(a) => return bench_p2p(a).await,
        BenchCommand::Ycsb(a) => return bench_ycsb(a).await,
        BenchCommand::Migrate(a) => return bench_migrate(a).await,
        BenchCommand::Archive(cmd) => return crate::archive_cmds::run(cmd).await,
        BenchCommand::S3(a) => return crate::bench_s3_cmds::bench_s3(a).await,
        BenchCommand::S3Compare { results, baseline } => return crate::bench_s3_cmds::bench_s3_compare(&results, &baseline),
        BenchCommand::Relay { listen, to } => return crate::bench_s3_cmds::bench_relay(listen, to).await,
        BenchCommand::TlsFloor { message_size, messages, connections, json } => {
            let spec = spindle_bench::tls_floor::FloorSpec { message_bytes: message_size, messages, connections };
            let f = spindle_bench::tls_floor::measure(spec).await?;
            if json {
                println!("{}", serde_json::to_string(&f)?);
            } else {
                println!(
                    "{messages} messages of {message_size} B over {connections} connections: plain {:.0} MiB/s ({:.3} CPU s/GiB), TLS {:.0} MiB/s ({:.3} CPU s/GiB), TLS ÷ plain {:.2}×",
                    f.plain.mib_per_second,
                    f.plain.cpu_seconds_per_gib,
                    f.tls.mib_per_second,
                    f.tls.cpu_seconds_per_gib,
                    f.tls.mib_per_second / f.plain.mib_per_second
                );
            }
            return Ok(());
        }
        BenchCommand::Act(cmd) => return crate::act_cmds::run(cmd).await,
        BenchCommand::Report { results, out } => {
            let files = spindle_bench::report::write_report(&results, &out)?;
            println!("report written: {} files in {}", files.len(), out.display());
            return Ok(());
        }
        BenchCommand::Paper { drive, scale, repeat, no_ycsb, label, out } => {
            use spindle_bench::paper::{points, run_paper, PaperOptions, Scale};
            let scale = match scale {
                ScaleArg::Quick => Scale::Quick,
                ScaleArg::Default => Scale::Default,
                ScaleArg::Paper => Scale::Paper,
            };
            let options = PaperOptions { scale, repeat, ycsb: !no_ycsb, label };
            let bar = indicatif::ProgressBar::new(points(&options));
            bar.set_style(
                indicatif::ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
                    .expect("valid template")
                    .progress_chars("=> "),
            );
            let mut write_error = None;
            let results = run_paper(&drive, options, |partial| {
                // YCSB rows come after every micro-benchmark row.
                let line = if let Some(y) = partial.ycsb.last() {
                    format!("ycsb {:>7} B {:<6} {:<4}: {:>10.0} ops/s", y.record_size, y.workload, y.phase, y.result.throughput_ops_per_second)
                } else {
                    let Some(row) = partial.rows.last() else { return };
                    let r = &row.result;
                    format!(
                        "{:<36} {:>28}: {:>10.0} ops/s {:>9.1} MB/s  p50 {:>6} us  p99 {:>7} us",
                        row.experiment, row.label, r.ops_per_second, r.megabytes_per_second, r.latency_us.p50, r.latency_us.p99
                    )
                };
                bar.set_message(line.split(':').next().unwrap_or_default().trim().to_string());
                // The bar draws only on a terminal; the lines go to stderr either way.
                if bar.is_hidden() {
                    eprintln!("{line}");
                } else {
                    bar.println(line);
                }
                bar.inc(1);
                // After every point the file holds valid results, so Ctrl-C loses only the
                // point in progress ("complete": false says the run did not finish).
                if let Some(path) = &out {
                    if let Err(e) = write_atomically(path, partial) {
                        write_error.get_or_insert(e);
                    }
                }
            })
            .await?;
            bar.finish_and_clear();
            if let Some(e) = write_error {
                return Err(e);
            }
            match out {
                Some(path) => write_atomically(&path, &results)?,
                None => println!("{}", serde_json::to_string_pretty(&results)?),
            }
            return Ok(());
        }
        BenchCommand::YcsbSample { workload, records, operations, draws, top, seed } => {
            let w = spindle_bench::ycsb::workload::Workload::core(workload).ok_or("unknown workload: use A to F")?;
            let (ops, keys) = spindle_bench::ycsb::runner::sample(&w, records, operations, draws, seed);
            let mut ranked: Vec<(u64, u64)> = keys.into_iter().collect();
            ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            ranked.truncate(top);
            let top: Vec<serde_json::Value> = ranked.iter().map(|(k, n)| json!({"record": k, "count": n})).collect();
            println!("{}", json!({"workload": w.name, "draws": draws, "operations": ops, "top_records": top}));
            return Ok(());
        }
    };
    let spec = BenchSpec {
        target: a.drive,
        operation,
        count: a.count,
        value_size: a.value_size,
        key_size: a.key_size,
        connections: a.connections,
        depth: a.depth,
        order: match a.order {
            OrderArg::Sequential => KeyOrder::Sequential,
            OrderArg::Random => KeyOrder::Random,
        },
        sync: a.sync.into(),
        flush_at_end: a.flush,
        seed: a.seed,
        key_offset: 0,
        key_stride: 1,
    };
    if a.preload && operation == Operation::Get {
        spindle_bench::run(BenchSpec { operation: Operation::Put, ..spec.clone() }).await?;
        spindle_bench::target::settle(&spec.target).await?;
    }
    let r = spindle_bench::run(spec).await?;
    if a.json {
        println!("{}", serde_json::to_string(&r)?);
    } else {
        println!(
            "{:?} {} x {} B, {} conns x depth {}: {:.0} ops/s, {:.1} MB/s, p50 {} us, p99 {} us, errors {}; bench CPU {:.2} s ({:.0} ops per CPU-second)",
            r.spec.operation, r.ops, r.spec.value_size, r.spec.connections, r.spec.depth, r.ops_per_second,
            r.megabytes_per_second, r.latency_us.p50, r.latency_us.p99, r.errors, r.bench_cpu_seconds, r.ops_per_bench_cpu_second
        );
    }
    Ok(())
}

async fn bench_p2p(a: P2pBenchArgs) -> CmdResult {
    let spec = spindle_bench::p2p::P2pSpec {
        target_from_source: a.target_from_source.unwrap_or_else(|| a.target.clone()),
        source: a.source,
        target: a.target,
        count: a.count,
        value_size: a.value_size,
        keys_per_request: a.keys_per_request,
        requests_in_flight: a.requests_in_flight,
        connections: a.connections,
        depth: a.depth,
    };
    let r = spindle_bench::p2p::run_p2p(spec).await?;
    if a.json {
        println!("{}", serde_json::to_string(&r)?);
    } else {
        println!(
            "{} x {} B: client put {:.1} MB/s, drive push {:.1} MB/s ({:.2}x), {} failed",
            r.spec.count, r.spec.value_size, r.client_put_mb_per_second, r.push_mb_per_second, r.push_over_put, r.push_failures
        );
    }
    Ok(())
}

async fn bench_migrate(a: MigrateArgs) -> CmdResult {
    let seconds = |s: f64, what: &str| {
        if s.is_finite() && s >= 0.0 {
            Ok(std::time::Duration::from_secs_f64(s))
        } else {
            Err(format!("{what} {s}: must be 0 or more seconds"))
        }
    };
    let add = match &a.add {
        Some(spec) => {
            let (id, addr) = spec.split_once('=').ok_or_else(|| format!("--add {spec:?}: expected ID=HOST:PORT"))?;
            Some((id.to_string(), addr.to_string()))
        }
        None => None,
    };
    let spec = spindle_bench::migrate::MigrateSpec {
        etcd: a.etcd,
        cluster: a.cluster,
        records: a.records,
        value_size: a.value_size,
        workload: a.workload,
        rate: a.rate,
        threads: a.threads,
        add,
        remove: a.remove,
        settle: seconds(a.settle_secs, "--settle-secs")?,
        move_limit: seconds(a.move_limit_secs, "--move-limit-secs")?,
    };
    let r = spindle_bench::migrate::run_migrate(spec).await?;
    if let Some(path) = &a.out {
        write_atomically(path, &r)?;
    }
    if let Some(path) = &a.plot {
        spindle_bench::migrate::plot(&r, path)?;
    }
    if a.json {
        println!("{}", serde_json::to_string(&r)?);
    } else {
        print!("{}", spindle_bench::migrate::markdown(&r));
        for e in &r.error_samples {
            println!("error: {e}");
        }
    }
    Ok(())
}

async fn bench_ycsb(a: YcsbArgs) -> CmdResult {
    use spindle_bench::ycsb::{runner, workload::Workload};
    let mut workload = Workload::core(a.workload).ok_or_else(|| format!("unknown workload {:?}: use A to F", a.workload))?;
    if a.field_length == 0 {
        return Err("--field-length must be at least 1".into());
    }
    workload.field_length = a.field_length;
    let spec = runner::YcsbSpec {
        target: a.drive,
        workload,
        records: a.records,
        operations: a.operations,
        threads: a.threads,
        target_ops_per_second: a.target_rate,
        seed: a.seed,
    };
    let mut results = Vec::new();
    if a.phase != PhaseArg::Run {
        results.push(runner::load(spec.clone()).await?);
    }
    if a.phase != PhaseArg::Load {
        results.push(runner::run(spec).await?);
    }
    for r in &results {
        if a.json {
            println!("{}", serde_json::to_string(r)?);
        } else {
            println!("# YCSB workload {} {} phase: {} records, {} threads", r.spec.workload.name, r.phase, r.spec.records, r.spec.threads);
            print!("{}", r.ycsb_lines());
        }
    }
    let failures: u64 = results.iter().flat_map(|r| r.operations.values()).map(|s| s.failures).sum();
    if failures > 0 {
        return Err(format!("{failures} operations failed").into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Bench {
        #[command(subcommand)]
        command: BenchCommand,
    }

    fn s3_spec(args: &[&str]) -> Result<spindle_bench::s3::S3BenchSpec, clap::Error> {
        let base = ["bench", "s3", "--endpoint", "http://127.0.0.1:9000", "--access-key", "ak", "--secret-key", "sk"];
        match Bench::try_parse_from(base.iter().chain(args))?.command {
            BenchCommand::S3(a) => Ok(a.spec().0),
            _ => unreachable!("parsed as `bench s3`"),
        }
    }

    #[test]
    fn s3_bench_flags_parse_sizes_durations_and_pids() {
        let s = s3_spec(&[]).unwrap();
        assert_eq!((s.object_bytes, s.concurrency, s.duration_seconds, s.multipart_bytes), (1 << 20, 8, 10.0, 16 << 20));
        assert_eq!((s.op, s.objects, s.cleanup, s.target.region.as_str()), (spindle_bench::s3::S3Op::Put, 0, true, "us-east-1"));
        let s = s3_spec(&["--op", "get", "--size", "64MiB", "--concurrency", "4", "--duration", "500ms", "--multipart-size", "0", "--server-pid", "10,11", "--server-pid", "12", "--no-cleanup"]).unwrap();
        assert_eq!((s.op, s.object_bytes, s.concurrency, s.duration_seconds, s.multipart_bytes), (spindle_bench::s3::S3Op::Get, 64 << 20, 4, 0.5, 0));
        assert_eq!(s.server_pids, vec![10, 11, 12]);
        assert!(!s.cleanup);
        assert_eq!(s3_spec(&["--size", "1.5KB"]).unwrap().object_bytes, 1500);
        for bad in [&["--size", "1XB"][..], &["--duration", "0s"], &["--duration", "ten"], &["--op", "list"], &["--server-pid", "x"]] {
            assert!(s3_spec(bad).is_err(), "{bad:?}");
        }
        // Credentials are required (from flags or the environment).
        assert!(Bench::try_parse_from(["bench", "s3", "--endpoint", "http://x:1"]).is_err() || std::env::var_os("SPINDLE_S3_ACCESS_KEY").is_some());
    }
}
