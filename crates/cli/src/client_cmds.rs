//! The everyday client commands: put, get, delete, ranges, P2P, GETLOG, ping.

use std::io::{Read, Write};
use std::time::Instant;

use bytes::Bytes;
use clap::{Args, Subcommand, ValueEnum};
use serde_json::json;
use spindle_client::{Client, ClientConfig, DeleteOptions, LogType, Peer, PushOp, PutOptions, RangeQuery, Synchronization};

pub(crate) type CmdResult = Result<(), Box<dyn std::error::Error>>;

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
        /// START and END are hex (binary keys); keys are printed in hex too
        #[arg(long)]
        hex: bool,
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

pub(crate) fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

pub(crate) fn print_json(v: serde_json::Value) {
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
        ClientCommand::Range { start, end, max, reverse, exclude_start, exclude_end, hex, conn } => {
            let client = conn.connect().await?;
            let key = |s: String| -> Result<Bytes, String> {
                if !hex {
                    return Ok(s.into_bytes().into());
                }
                (0..s.len()).step_by(2).map(|i| s.get(i..i + 2).and_then(|b| u8::from_str_radix(b, 16).ok()).ok_or_else(|| format!("{s:?} is not hex"))).collect::<Result<Vec<u8>, _>>().map(Bytes::from)
            };
            let show = |k: &Bytes| if hex { k.iter().map(|b| format!("{b:02x}")).collect() } else { text(k) };
            let q = RangeQuery {
                start: key(start)?,
                start_inclusive: !exclude_start,
                end: Some(key(end)?),
                end_inclusive: !exclude_end,
                max_returned: max,
                reverse,
            };
            let keys = client.get_key_range(q).await?;
            if conn.json {
                print_json(json!({"keys": keys.iter().map(show).collect::<Vec<_>>()}));
            } else {
                for k in &keys {
                    println!("{}", show(k));
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
