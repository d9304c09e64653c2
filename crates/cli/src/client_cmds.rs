//! The everyday client commands and the put/get benchmark.

use std::io::{Read, Write};
use std::time::Instant;

use bytes::Bytes;
use clap::{Args, Subcommand, ValueEnum};
use serde_json::json;
use spindle_bench::{BenchSpec, KeyOrder, Operation};
use spindle_client::{Client, ClientConfig, DeleteOptions, LogType, Peer, PushOp, PutOptions, RangeQuery, Synchronization};

type CmdResult = Result<(), Box<dyn std::error::Error>>;

#[derive(Args, Clone)]
pub struct Conn {
    /// Drive address
    #[arg(long, default_value = "127.0.0.1:8123", global = true)]
    pub drive: String,
    /// Identity to authenticate as
    #[arg(long, default_value_t = spindle_proto::DEFAULT_IDENTITY, global = true)]
    identity: i64,
    /// HMAC key of the identity
    #[arg(long, default_value = "asdfasdf", global = true)]
    hmac_key: String,
    /// Cluster version to send
    #[arg(long, default_value_t = 0, global = true)]
    cluster_version: i64,
    /// Connect with TLS (to the drive's TLS port), trusting this PEM certificate
    #[arg(long, global = true)]
    tls_trust: Option<std::path::PathBuf>,
    /// Machine-readable output
    #[arg(long, global = true)]
    pub json: bool,
}

impl Conn {
    pub async fn connect(&self) -> Result<Client, Box<dyn std::error::Error>> {
        let config = ClientConfig {
            identity: self.identity,
            hmac_key: Bytes::from(self.hmac_key.clone()),
            cluster_version: self.cluster_version,
            tls_trust: self.tls_trust.clone(),
            ..ClientConfig::default()
        };
        Ok(Client::connect(self.drive.as_str(), config).await.map_err(|e| format!("{}: {e}", self.drive))?)
    }
}

#[derive(Clone, Copy, ValueEnum)]
pub enum SyncArg {
    Writethrough,
    Writeback,
    Flush,
}

impl From<SyncArg> for Synchronization {
    fn from(s: SyncArg) -> Self {
        match s {
            SyncArg::Writethrough => Synchronization::Writethrough,
            SyncArg::Writeback => Synchronization::Writeback,
            SyncArg::Flush => Synchronization::Flush,
        }
    }
}

#[derive(Subcommand)]
pub enum ClientCommand {
    /// Store a value: from the argument, --file, or standard input ("-").
    Put {
        key: String,
        value: Option<String>,
        #[arg(long)]
        file: Option<std::path::PathBuf>,
        /// New version of the entry
        #[arg(long, default_value = "")]
        version: String,
        /// Expected stored version (compare-and-swap)
        #[arg(long, default_value = "")]
        db_version: String,
        #[arg(long)]
        force: bool,
        #[arg(long, default_value = "")]
        tag: String,
        #[arg(long, value_enum, default_value = "writethrough")]
        sync: SyncArg,
        #[command(flatten)]
        conn: Conn,
    },
    /// Print a value (raw bytes to stdout) or its metadata.
    Get {
        key: String,
        #[arg(long)]
        metadata_only: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Delete a key.
    Delete {
        key: String,
        #[arg(long, default_value = "")]
        db_version: String,
        #[arg(long)]
        force: bool,
        #[arg(long, value_enum, default_value = "writethrough")]
        sync: SyncArg,
        #[command(flatten)]
        conn: Conn,
    },
    /// List keys between START and END (inclusive unless told otherwise).
    Range {
        start: String,
        end: String,
        #[arg(long, default_value_t = 200)]
        max: i32,
        #[arg(long)]
        reverse: bool,
        #[arg(long)]
        exclude_start: bool,
        #[arg(long)]
        exclude_end: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Show the drive's logs (all types unless --type is given).
    Getlog {
        #[arg(long = "type", value_enum)]
        types: Vec<LogArg>,
        #[command(flatten)]
        conn: Conn,
    },
    /// Drive-to-drive transfers.
    #[command(subcommand)]
    P2p(P2pCommand),
    /// Round-trip NOOPs and report the latency.
    Ping {
        #[arg(long, short = 'n', default_value_t = 5)]
        count: u32,
        #[command(flatten)]
        conn: Conn,
    },
}

#[derive(Subcommand)]
pub enum P2pCommand {
    /// Have drive FROM copy keys to drive TO itself (PEER2PEERPUSH): the listed keys, or every
    /// key in a range, walked in pages of the drive's maxKeyRangeCount.
    Push {
        /// Source drive HOST:PORT (receives the request)
        #[arg(long)]
        from: String,
        /// Target drive HOST:PORT, as the source reaches it
        #[arg(long)]
        to: String,
        /// Keys to copy
        #[arg(long, num_args = 1.., conflicts_with = "range")]
        keys: Vec<String>,
        /// Copy every key from START to END (inclusive)
        #[arg(long, num_args = 2, value_names = ["START", "END"])]
        range: Vec<String>,
        /// The source connects to the target over TLS
        #[arg(long)]
        tls: bool,
        /// Overwrite whatever the target holds (default: the target must not hold a versioned
        /// entry under the key)
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        conn: Conn,
    },
}

#[derive(Clone, Copy, ValueEnum)]
pub enum LogArg {
    Utilizations,
    Temperatures,
    Capacities,
    Configuration,
    Statistics,
    Messages,
    Limits,
}

impl From<LogArg> for LogType {
    fn from(l: LogArg) -> Self {
        match l {
            LogArg::Utilizations => LogType::Utilizations,
            LogArg::Temperatures => LogType::Temperatures,
            LogArg::Capacities => LogType::Capacities,
            LogArg::Configuration => LogType::Configuration,
            LogArg::Statistics => LogType::Statistics,
            LogArg::Messages => LogType::Messages,
            LogArg::Limits => LogType::Limits,
        }
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn print_json(v: serde_json::Value) {
    println!("{}", serde_json::to_string_pretty(&v).expect("JSON values serialise"));
}

pub async fn run(cmd: ClientCommand) -> CmdResult {
    match cmd {
        ClientCommand::Put { key, value, file, version, db_version, force, tag, sync, conn } => {
            let value: Vec<u8> = match (value.as_deref(), file) {
                (_, Some(path)) => std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?,
                (Some("-"), None) => {
                    let mut v = Vec::new();
                    std::io::stdin().read_to_end(&mut v)?;
                    v
                }
                (Some(v), None) => v.as_bytes().to_vec(),
                (None, None) => return Err("give a value, --file FILE, or - for standard input".into()),
            };
            let client = conn.connect().await?;
            let len = value.len();
            let options = PutOptions {
                new_version: version.into_bytes().into(),
                db_version: db_version.into_bytes().into(),
                force,
                tag: tag.into_bytes().into(),
                algorithm: None,
                sync: sync.into(),
            };
            client.put(key.as_bytes(), value, options).await?;
            if conn.json {
                print_json(json!({"key": key, "stored_bytes": len}));
            } else {
                println!("stored {len} bytes under {key:?}");
            }
        }
        ClientCommand::Get { key, metadata_only, conn } => {
            let client = conn.connect().await?;
            if metadata_only {
                let Some(m) = client.get_metadata(key.as_bytes()).await? else {
                    return Err(format!("{key:?}: not found").into());
                };
                if conn.json {
                    print_json(json!({"key": key, "version": text(&m.version), "tag": text(&m.tag), "algorithm": m.algorithm}));
                } else {
                    println!("key {key:?} version {:?} tag {:?} algorithm {:?}", text(&m.version), text(&m.tag), m.algorithm);
                }
            } else {
                let Some(e) = client.get(key.as_bytes()).await? else {
                    return Err(format!("{key:?}: not found").into());
                };
                if conn.json {
                    let value = match std::str::from_utf8(&e.value) {
                        Ok(s) => json!({"value": s}),
                        Err(_) => json!({"value_hex": e.value.iter().map(|b| format!("{b:02x}")).collect::<String>()}),
                    };
                    let mut doc = json!({"key": key, "version": text(&e.metadata.version), "tag": text(&e.metadata.tag)});
                    doc.as_object_mut().expect("object").extend(value.as_object().expect("object").clone());
                    print_json(doc);
                } else {
                    std::io::stdout().write_all(&e.value)?;
                    if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
                        println!();
                    }
                }
            }
        }
        ClientCommand::Delete { key, db_version, force, sync, conn } => {
            let client = conn.connect().await?;
            let options = DeleteOptions { db_version: db_version.into_bytes().into(), force, sync: sync.into() };
            let existed = client.delete(key.as_bytes(), options).await?;
            if conn.json {
                print_json(json!({"key": key, "deleted": existed}));
            } else if existed {
                println!("deleted {key:?}");
            } else {
                return Err(format!("{key:?}: not found").into());
            }
        }
        ClientCommand::Range { start, end, max, reverse, exclude_start, exclude_end, conn } => {
            let client = conn.connect().await?;
            let q = RangeQuery {
                start: start.into_bytes().into(),
                start_inclusive: !exclude_start,
                end: Some(end.into_bytes().into()),
                end_inclusive: !exclude_end,
                max_returned: max,
                reverse,
            };
            let keys = client.get_key_range(q).await?;
            if conn.json {
                print_json(json!({"keys": keys.iter().map(|k| text(k)).collect::<Vec<_>>()}));
            } else {
                for k in keys {
                    println!("{}", text(&k));
                }
            }
        }
        ClientCommand::Getlog { types, conn } => {
            let client = conn.connect().await?;
            let types: Vec<LogType> = if types.is_empty() {
                spindle_client::ALL_LOG_TYPES.to_vec()
            } else {
                types.into_iter().map(Into::into).collect()
            };
            let log = client.get_log(&types).await?;
            print_log(&log, conn.json);
        }
        ClientCommand::P2p(P2pCommand::Push { from, to, keys, range, tls, force, conn }) => {
            let source = Conn { drive: from, ..conn.clone() }.connect().await?;
            let (host, port) = to.rsplit_once(':').ok_or("--to must be HOST:PORT")?;
            let peer = Peer { host: host.to_string(), port: port.parse().map_err(|_| format!("bad port in --to {to}"))?, tls };
            let op = |k: Bytes| PushOp { key: k, force, ..PushOp::default() };
            let mut counts: std::collections::BTreeMap<&'static str, u64> = Default::default();
            let mut failures = Vec::new();
            let mut tally = |result: spindle_client::PushResult| {
                for o in result.operations {
                    *counts.entry(o.status.as_str_name()).or_default() += 1;
                    if o.status != spindle_client::StatusCode::Success {
                        failures.push(json!({"key": text(&o.key), "status": o.status.as_str_name(), "message": o.message}));
                    }
                }
            };
            if range.is_empty() {
                if keys.is_empty() {
                    return Err("give --keys KEY... or --range START END".into());
                }
                tally(source.push_to_peer(&peer, keys.into_iter().map(|k| op(Bytes::from(k))).collect()).await?);
            } else {
                let page = source
                    .sign_on()
                    .body
                    .as_ref()
                    .and_then(|b| b.get_log.as_ref())
                    .and_then(|l| l.limits.as_ref())
                    .map(|l| l.max_key_range_count() as i32)
                    .filter(|n| *n > 0)
                    .unwrap_or(200);
                let mut start = Bytes::from(range[0].clone());
                let mut inclusive = true;
                loop {
                    let q = RangeQuery {
                        start: start.clone(),
                        start_inclusive: inclusive,
                        end: Some(Bytes::from(range[1].clone())),
                        end_inclusive: true,
                        max_returned: page,
                        reverse: false,
                    };
                    let batch = source.get_key_range(q).await?;
                    let Some(last) = batch.last().cloned() else { break };
                    let full = batch.len() as i32 == page;
                    tally(source.push_to_peer(&peer, batch.into_iter().map(op).collect()).await?);
                    if !full {
                        break;
                    }
                    start = last;
                    inclusive = false;
                }
            }
            let total: u64 = counts.values().sum();
            if conn.json {
                print_json(json!({"pushed": total, "statuses": counts, "failures": failures}));
            } else {
                println!("{total} keys: {}", counts.iter().map(|(s, n)| format!("{n} {s}")).collect::<Vec<_>>().join(", "));
                for f in &failures {
                    println!("  {} {} {}", f["key"], f["status"], f["message"]);
                }
            }
            if !failures.is_empty() {
                return Err(format!("{} of {total} keys were not copied", failures.len()).into());
            }
        }
        ClientCommand::Ping { count, conn } => {
            let client = conn.connect().await?;
            let mut times = Vec::new();
            for _ in 0..count.max(1) {
                let t = Instant::now();
                client.noop().await?;
                times.push(t.elapsed().as_secs_f64() * 1e6);
            }
            times.sort_by(|a, b| a.total_cmp(b));
            let median = times[times.len() / 2];
            if conn.json {
                print_json(json!({"drive": conn.drive, "count": times.len(), "median_us": median, "min_us": times[0]}));
            } else {
                println!("{}: {} NOOPs, median {median:.0} us, min {:.0} us", conn.drive, times.len(), times[0]);
            }
        }
    }
    Ok(())
}

fn print_log(log: &spindle_client::GetLog, as_json: bool) {
    let utilizations: Vec<_> = log.utilizations.iter().map(|u| json!({"name": u.name(), "value": u.value()})).collect();
    let temperatures: Vec<_> = log
        .temperatures
        .iter()
        .map(|t| json!({"name": t.name(), "current": if t.current().is_nan() { None } else { Some(t.current()) }}))
        .collect();
    let capacity = log.capacity.as_ref().map(|c| json!({"nominal_bytes": c.nominal_capacity_in_bytes(), "portion_full": c.portion_full()}));
    let configuration = log.configuration.as_ref().map(|c| {
        json!({"vendor": c.vendor(), "model": c.model(), "serial": text(c.serial_number()), "version": c.version(),
               "protocol": c.protocol_version(), "port": c.port(), "tls_port": c.tls_port()})
    });
    let statistics: Vec<_> = log
        .statistics
        .iter()
        .filter(|s| s.count() > 0)
        .map(|s| json!({"type": s.message_type().as_str_name(), "count": s.count(), "bytes": s.bytes()}))
        .collect();
    let limits = log.limits.as_ref().map(|l| {
        json!({"max_key_size": l.max_key_size(), "max_value_size": l.max_value_size(), "max_version_size": l.max_version_size(),
               "max_tag_size": l.max_tag_size(), "max_key_range_count": l.max_key_range_count(), "max_connections": l.max_connections(),
               "max_outstanding_read_requests": l.max_outstanding_read_requests(),
               "max_outstanding_write_requests": l.max_outstanding_write_requests(), "max_message_size": l.max_message_size()})
    });
    let messages = log.messages.as_ref().map(|m| text(m));
    let doc = json!({"utilizations": utilizations, "temperatures": temperatures, "capacity": capacity,
                     "configuration": configuration, "statistics": statistics, "limits": limits, "messages": messages});
    if as_json {
        print_json(doc);
        return;
    }
    for (section, value) in doc.as_object().expect("object") {
        if value.is_null() || value.as_array().is_some_and(|a| a.is_empty()) {
            continue;
        }
        println!("{section}:");
        match value {
            serde_json::Value::String(s) => {
                for line in s.lines().rev().take(20).collect::<Vec<_>>().into_iter().rev() {
                    println!("  {line}");
                }
            }
            serde_json::Value::Array(items) => {
                for item in items {
                    println!("  {}", item);
                }
            }
            serde_json::Value::Object(map) => {
                for (k, v) in map {
                    println!("  {k}: {v}");
                }
            }
            other => println!("  {other}"),
        }
    }
}

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
    /// Archival workloads: file-size models (Gamma / generalized Gamma) with bootstrap
    /// envelopes, sequential writes and random reads at capacity-utilisation levels.
    #[command(subcommand)]
    Archive(crate::archive_cmds::ArchiveCommand),
    /// The Kinetic paper's micro-benchmarks against one target, as versioned JSON.
    Paper {
    /// Target: a Kinetic endpoint (HOST:PORT or kinetic://HOST:PORT), Spindle's engine in-process
    /// (embedded:DIR, memory:), redis://HOST:PORT, or LevelDB/RocksDB in-process (leveldb:DIR,
    /// rocksdb:DIR)
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
    /// rocksdb:DIR)
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
    /// rocksdb:DIR)
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
        BenchCommand::Archive(cmd) => return crate::archive_cmds::run(cmd).await,
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

/// Writes `value` as JSON to `path` through a temporary file and a rename.
pub(crate) fn write_atomically(path: &std::path::Path, value: &impl serde::Serialize) -> CmdResult {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_string_pretty(value)?).map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(())
}
