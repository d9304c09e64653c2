//! `spindle cluster`: create a cluster, change its members, look at it, use it, run its
//! coordinator, or start a whole one on loopback (`demo`).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use bytes::Bytes;
use clap::{Args, Subcommand};
use serde_json::json;
use spindle_cluster::control::{HealthState, MemberChange};
use spindle_cluster::coordinator::{self, CoordinatorConfig};
use spindle_cluster::{BatchOp, ClusterMap, Condition, Control, Member, Store, StoreConfig};

use crate::client_cmds::CmdResult;

#[derive(Args, Clone)]
pub struct Etcd {
    /// etcd client URLs, comma-separated
    #[arg(long, env = "SPINDLE_ETCD", default_value = "http://127.0.0.1:2379", global = true)]
    etcd: String,
    /// Name of the cluster (several may share one etcd)
    #[arg(long, env = "SPINDLE_CLUSTER", default_value = "spindle", global = true)]
    cluster: String,
    /// Machine-readable output
    #[arg(long, global = true)]
    json: bool,
}

impl Etcd {
    async fn control(&self) -> Result<Control, Box<dyn std::error::Error>> {
        Ok(Control::connect(&self.etcd, &self.cluster).await.map_err(|e| format!("{}: {e}", self.etcd))?)
    }

    async fn store(&self) -> Result<Store, Box<dyn std::error::Error>> {
        Ok(Store::open(self.control().await?, StoreConfig::default()).await?)
    }
}

#[derive(Subcommand)]
pub enum ClusterCommand {
    /// Create the cluster's map in etcd (no drives yet: add them with add-drive).
    Init {
        #[arg(long, default_value_t = 256)]
        partitions: u32,
        #[arg(long, default_value_t = 3)]
        replicas: u8,
        /// Replicas that must take a write before it is acknowledged (a majority)
        #[arg(long, default_value_t = 2)]
        write_quorum: u8,
        #[command(flatten)]
        etcd: Etcd,
    },
    /// Ask the coordinator to add a drive (waits until the map has it; partitions then move
    /// to it live, shown by status).
    AddDrive {
        /// Member id
        id: String,
        /// HOST:PORT of the drive
        addr: String,
        #[arg(long)]
        tls_port: Option<u16>,
        /// Bytes the drive offers
        #[arg(long, default_value_t = 0)]
        capacity: u64,
        /// Relative share of partitions [default: capacity in GiB, or 1]
        #[arg(long)]
        weight: Option<f64>,
        /// Failure domain (host, rack): replicas avoid sharing one
        #[arg(long)]
        domain: Option<String>,
        #[command(flatten)]
        etcd: Etcd,
    },
    /// Ask the coordinator to drain a drive and drop it: its partitions move to the others
    /// live, and it leaves the map once nothing of the cluster's is left on it.
    RemoveDrive {
        id: String,
        /// Seconds to wait for the drain (0: return once the coordinator has it)
        #[arg(long, default_value_t = 600)]
        wait_secs: u64,
        #[command(flatten)]
        etcd: Etcd,
    },
    /// Drives, health, partitions per drive, replicas missing, epoch, coordinators.
    Status {
        #[command(flatten)]
        etcd: Etcd,
    },
    Put {
        key: String,
        value: String,
        /// Only if the key holds this version (hex), or "absent"
        #[arg(long)]
        if_version: Option<String>,
        #[command(flatten)]
        etcd: Etcd,
    },
    Get {
        key: String,
        #[command(flatten)]
        etcd: Etcd,
    },
    Delete {
        key: String,
        #[arg(long)]
        if_version: Option<String>,
        #[command(flatten)]
        etcd: Etcd,
    },
    /// Puts and deletes applied atomically: readers see all of them or none. The keys must
    /// share a partition: give them one hash tag, e.g. {user42}/name and {user42}/mail.
    Batch {
        /// KEY=VALUE to store (repeatable)
        #[arg(long = "put", value_name = "KEY=VALUE")]
        puts: Vec<String>,
        /// KEY to delete (repeatable)
        #[arg(long = "delete", value_name = "KEY")]
        deletes: Vec<String>,
        #[command(flatten)]
        etcd: Etcd,
    },
    /// Keys from START to END (both included), in order; with --json as {"keys": [...]} (a
    /// key's bytes may hold a newline).
    Range {
        #[arg(default_value = "")]
        start: String,
        end: Option<String>,
        #[arg(long, default_value_t = 100)]
        max: usize,
        #[command(flatten)]
        etcd: Etcd,
    },
    /// Run a coordinator (several may run; one leads).
    Coordinator {
        #[arg(long)]
        name: Option<String>,
        /// Milliseconds between probes of each drive
        #[arg(long, default_value_t = 500)]
        probe_ms: u64,
        /// Milliseconds without an answer before a drive is marked down
        #[arg(long, default_value_t = 3000)]
        down_after_ms: u64,
        /// Seconds of the leadership lease (another coordinator takes over after it)
        #[arg(long, default_value_t = 3)]
        lease_secs: u64,
        /// Milliseconds a drive may be down before its partitions are re-replicated on the others
        #[arg(long, default_value_t = 120_000)]
        replace_after_ms: u64,
        /// Bandwidth moves may take, MiB/s of values pushed drive to drive (0: no limit)
        #[arg(long, default_value_t = 64.0)]
        migrate_mib_s: f64,
        /// Milliseconds data a drive no longer holds stays before it is swept off
        #[arg(long, default_value_t = 30_000)]
        sweep_grace_ms: u64,
        /// Milliseconds between sweeps
        #[arg(long, default_value_t = 10_000)]
        sweep_interval_ms: u64,
        /// Serve Prometheus metrics at http://ADDR/metrics (e.g. 127.0.0.1:9200)
        #[arg(long)]
        metrics: Option<std::net::SocketAddr>,
        #[command(flatten)]
        etcd: Etcd,
    },
    /// Start a whole cluster on loopback: etcd, drives and a coordinator, data in a folder;
    /// Ctrl-C stops all of it.
    Demo {
        #[arg(long, default_value_t = 4)]
        drives: usize,
        #[arg(long, default_value = "spindle-cluster")]
        data: PathBuf,
        /// Exit once the cluster is up (for scripts: everything is stopped again)
        #[arg(long, hide = true)]
        check: bool,
    },
}

fn condition(arg: &Option<String>) -> Result<Condition, Box<dyn std::error::Error>> {
    Ok(match arg.as_deref() {
        None => Condition::None,
        Some("absent") => Condition::Absent,
        Some(hex) => Condition::Version(Bytes::from(decode_hex(hex)?)),
    })
}

fn decode_hex(s: &str) -> Result<Vec<u8>, String> {
    if !s.len().is_multiple_of(2) {
        return Err(format!("{s:?}: not hex"));
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).map_err(|_| format!("{s:?}: not hex"))).collect()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

pub async fn run(cmd: ClusterCommand) -> CmdResult {
    match cmd {
        ClusterCommand::Init { partitions, replicas, write_quorum, etcd } => {
            let map = ClusterMap::new(partitions, replicas, write_quorum)?;
            etcd.control().await?.init(&map).await?;
            println!("cluster {:?}: {partitions} partitions, {replicas} replicas, writes acknowledged by {write_quorum}", etcd.cluster);
        }
        ClusterCommand::AddDrive { id, addr, tls_port, capacity, weight, domain, etcd } => {
            let weight = weight.unwrap_or(if capacity > 0 { capacity as f64 / (1u64 << 30) as f64 } else { 1.0 });
            let member = Member { id: id.clone(), addr, tls_port, capacity, weight, domain, leaving: false };
            let control = etcd.control().await?;
            control.request_change(&MemberChange::Add(member)).await?;
            let map = wait_for(&control, |m| m.members.get(&id).is_some_and(|m| !m.leaving), Duration::from_secs(30)).await?;
            println!(
                "{id} added: epoch {}; partitions move to it live (spindle cluster status shows the move)",
                map.epoch
            );
        }
        ClusterCommand::RemoveDrive { id, wait_secs, etcd } => {
            let control = etcd.control().await?;
            if !control.load_map().await?.0.members.contains_key(&id) {
                return Err(format!("{id} is not a member").into());
            }
            control.request_change(&MemberChange::Remove { id: id.clone() }).await?;
            let map = wait_for(&control, |m| m.members.get(&id).is_none_or(|m| m.leaving), Duration::from_secs(30)).await?;
            if wait_secs == 0 {
                println!("{id} leaving: epoch {}; its partitions move to the others (spindle cluster status shows the move)", map.epoch);
                return Ok(());
            }
            let map = wait_for(&control, |m| !m.members.contains_key(&id), Duration::from_secs(wait_secs)).await?;
            println!("{id} drained and removed: epoch {}", map.epoch);
        }
        ClusterCommand::Status { etcd } => status(&etcd).await?,
        ClusterCommand::Put { key, value, if_version, etcd } => {
            let version = etcd.store().await?.put(key.as_bytes(), Bytes::from(value), condition(&if_version)?).await?;
            println!("stored, version {}", hex(&version));
        }
        ClusterCommand::Get { key, etcd } => match etcd.store().await?.get(key.as_bytes()).await? {
            None => return Err(format!("{key}: not found").into()),
            Some(v) if etcd.json => println!("{}", json!({"key": key, "value": String::from_utf8_lossy(&v.value), "version": hex(&v.version)})),
            Some(v) => {
                std::io::stdout().write_all(&v.value)?;
                println!();
            }
        },
        ClusterCommand::Delete { key, if_version, etcd } => {
            if !etcd.store().await?.delete(key.as_bytes(), condition(&if_version)?).await? {
                return Err(format!("{key}: not found").into());
            }
        }
        ClusterCommand::Batch { puts, deletes, etcd } => {
            let mut ops = Vec::new();
            for p in &puts {
                let (key, value) = p.split_once('=').ok_or_else(|| format!("--put {p:?}: expected KEY=VALUE"))?;
                ops.push(BatchOp::Put { key: Bytes::from(key.to_string()), value: Bytes::from(value.to_string()), condition: Condition::None });
            }
            for key in deletes {
                ops.push(BatchOp::Delete { key: Bytes::from(key), condition: Condition::None });
            }
            let keys: Vec<String> = ops.iter().map(|op| String::from_utf8_lossy(op.key()).into_owned()).collect();
            let versions = etcd.store().await?.batch(ops).await?;
            if etcd.json {
                let out: serde_json::Map<String, serde_json::Value> = keys.into_iter().zip(&versions).map(|(k, v)| (k, json!(hex(v)))).collect();
                println!("{}", serde_json::Value::Object(out));
            } else {
                for (k, v) in keys.iter().zip(&versions) {
                    println!("{k}: version {}", hex(v));
                }
            }
        }
        ClusterCommand::Range { start, end, max, etcd } => {
            let keys = etcd.store().await?.range(start.as_bytes(), end.as_deref().map(str::as_bytes), max).await?;
            if etcd.json {
                crate::client_cmds::print_json(json!({"keys": keys.iter().map(|k| crate::client_cmds::text(k)).collect::<Vec<_>>()}));
            } else {
                for k in keys {
                    println!("{}", String::from_utf8_lossy(&k));
                }
            }
        }
        ClusterCommand::Coordinator {
            name,
            probe_ms,
            down_after_ms,
            lease_secs,
            replace_after_ms,
            migrate_mib_s,
            sweep_grace_ms,
            sweep_interval_ms,
            metrics,
            etcd,
        } => {
            if !(migrate_mib_s.is_finite() && migrate_mib_s >= 0.0) {
                return Err(format!("--migrate-mib-s {migrate_mib_s}: must be 0 or more").into());
            }
            let mut config = CoordinatorConfig {
                probe_interval: Duration::from_millis(probe_ms.max(10)),
                down_after: Duration::from_millis(down_after_ms),
                lease_ttl: Duration::from_secs(lease_secs.max(1)),
                replace_after: Duration::from_millis(replace_after_ms),
                migrate_rate: (migrate_mib_s * f64::from(1u32 << 20)) as u64,
                sweep_grace: Duration::from_millis(sweep_grace_ms),
                sweep_interval: Duration::from_millis(sweep_interval_ms.max(10)),
                ..CoordinatorConfig::default()
            };
            if let Some(n) = name {
                config.name = n;
            }
            let control = etcd.control().await?;
            eprintln!("coordinator {} for cluster {:?} on {}", config.name, etcd.cluster, etcd.etcd);
            let endpoint = match metrics {
                Some(addr) => {
                    let endpoint = serve_metrics(&config, addr).await?;
                    eprintln!("coordinator metrics on http://{}/metrics", endpoint.local_addr);
                    Some(endpoint)
                }
                None => None,
            };
            coordinator::run(control, config, stop_signal()).await?;
            if let Some(e) = endpoint {
                e.stop().await;
            }
        }
        ClusterCommand::Demo { drives, data, check } => demo(drives, &data, check).await?,
    }
    Ok(())
}

/// The coordinator's `/metrics` on `addr`.
async fn serve_metrics(config: &CoordinatorConfig, addr: std::net::SocketAddr) -> Result<spindle_metrics::Endpoint, Box<dyn std::error::Error>> {
    let mut registry = spindle_metrics::Registry::default();
    registry.register_collector(Box::new(config.metrics.clone()));
    Ok(spindle_metrics::serve(addr, std::sync::Arc::new(registry)).await?)
}

/// Ctrl-C or SIGTERM.
pub(crate) async fn stop_signal() {
    let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) else {
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

/// Waits (up to `limit`) for the coordinator to have committed a map that passes `done`.
async fn wait_for(control: &Control, done: impl Fn(&ClusterMap) -> bool, limit: Duration) -> Result<ClusterMap, Box<dyn std::error::Error>> {
    let start = std::time::Instant::now();
    loop {
        let (map, _) = control.load_map().await?;
        if done(&map) {
            return Ok(map);
        }
        if start.elapsed() >= limit {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (_, leader) = control.coordinators().await?;
    Err(match leader {
        None => "no coordinator is running: the change waits in etcd until one is (spindle cluster coordinator)".into(),
        Some(l) => format!("coordinator {l} has not finished the change within {limit:?} (spindle cluster status shows where it is)").into(),
    })
}

async fn status(etcd: &Etcd) -> CmdResult {
    let control = etcd.control().await?;
    let (map, _) = control.load_map().await?;
    let health = control.health().await?;
    let (coordinators, leader) = control.coordinators().await?;
    let load = map.load();
    let down: Vec<&String> = map.members.keys().filter(|id| health.get(*id).is_none_or(|h| h.state != HealthState::Up)).collect();
    let missing: usize = map.placement.iter().map(|r| r.iter().filter(|d| down.contains(d)).count() + usize::from(map.replicas).saturating_sub(r.len())).sum();
    let pending = control.pending_changes().await?.len();
    let progress = control.progress().await?.filter(|p| p.epoch == map.epoch && !map.moving.is_empty());
    let moving_to: BTreeMap<&String, usize> = map.moving.values().flatten().fold(BTreeMap::new(), |mut acc, d| {
        *acc.entry(d).or_default() += 1;
        acc
    });
    if etcd.json {
        let drives: Vec<_> = map
            .members
            .values()
            .map(|m| {
                let h = health.get(&m.id);
                json!({"id": m.id, "addr": m.addr, "domain": m.domain, "weight": m.weight, "leaving": m.leaving,
                       "state": h.map_or("unknown", |h| if h.state == HealthState::Up { "up" } else if h.repairing { "repairing" } else { "down" }),
                       "partitions": load.get(&m.id).copied().unwrap_or(0),
                       "partitions_after_move": moving_to.get(&m.id).copied()})
            })
            .collect();
        println!(
            "{}",
            json!({"cluster": etcd.cluster, "epoch": map.epoch, "partitions": map.partitions, "replicas": map.replicas,
                   "write_quorum": map.write_quorum, "drives": drives, "replicas_missing": missing,
                   "coordinators": coordinators, "leader": leader, "pending_changes": pending,
                   "move": progress.as_ref().map(|p| json!({"partitions": p.total, "done": p.done.len(), "bytes": p.bytes,
                       "entries": p.entries, "caught_up": p.repaired, "started_ms": p.started_ms, "updated_ms": p.updated_ms,
                       "rate_limit": p.rate_limit, "eta_secs": p.eta_secs()}))})
        );
        return Ok(());
    }
    println!(
        "cluster {:?}  epoch {}  {} partitions × {} replicas (writes need {})",
        etcd.cluster, map.epoch, map.partitions, map.replicas, map.write_quorum
    );
    println!("coordinators: {} (leader: {})", if coordinators.is_empty() { "none".into() } else { coordinators.join(", ") }, leader.as_deref().unwrap_or("none"));
    println!("{:<12} {:<22} {:<10} {:>7} {:<10} {:>10}", "DRIVE", "ADDRESS", "DOMAIN", "WEIGHT", "STATE", "PARTITIONS");
    for m in map.members.values() {
        let state = match health.get(&m.id) {
            None => "unknown",
            Some(h) if h.state == HealthState::Up => "up",
            Some(h) if h.repairing => "repairing",
            Some(_) => "down",
        };
        let state = if m.leaving { format!("{state},leaving") } else { state.to_string() };
        println!(
            "{:<12} {:<22} {:<10} {:>7.2} {:<10} {:>10}",
            m.id,
            m.addr,
            m.domain.as_deref().unwrap_or("-"),
            m.weight,
            state,
            load.get(&m.id).copied().unwrap_or(0)
        );
    }
    println!("replicas missing: {missing}{}", if pending > 0 { format!("  (member changes waiting: {pending})") } else { String::new() });
    if let Some(p) = progress {
        let secs = p.updated_ms.saturating_sub(p.started_ms) as f64 / 1000.0;
        let mib = p.bytes as f64 / f64::from(1u32 << 20);
        let rate = if secs > 0.0 { format!(" at {:.1} MiB/s", mib / secs) } else { String::new() };
        let limit = if p.rate_limit > 0 { format!(" (limit {:.1} MiB/s)", p.rate_limit as f64 / f64::from(1u32 << 20)) } else { String::new() };
        let left = p.eta_secs().map_or_else(|| "time left unknown yet".to_string(), |s| format!("about {s:.0} s left"));
        println!(
            "moving: {} of {} partitions done, {mib:.1} MiB in {} entries moved{rate}{limit}, {} caught up; {left}",
            p.done.len(),
            p.total,
            p.entries,
            p.repaired
        );
        let to: Vec<String> = moving_to.iter().map(|(d, n)| format!("{d} {n}")).collect();
        println!("  partitions per drive after the move: {}", to.join(", "));
    }
    Ok(())
}

/// A port free on loopback now (the OS picks; the listener is closed before it is used).
fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Children of the demo, killed when it ends however it ends.
struct Children(Vec<std::process::Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for c in &mut self.0 {
            // SIGTERM first: drives make acknowledged writes durable on the way out.
            let _ = std::process::Command::new("kill").arg(c.id().to_string()).status();
        }
        for c in &mut self.0 {
            for _ in 0..100 {
                if matches!(c.try_wait(), Ok(Some(_))) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

async fn demo(drives: usize, data: &Path, check: bool) -> CmdResult {
    if drives == 0 || drives > 64 {
        return Err("--drives must be 1..=64".into());
    }
    std::fs::create_dir_all(data)?;
    let mut children = Children(Vec::new());
    // etcd keeps its ports across demo runs on one folder (its data names its peer address).
    let ports_file = data.join("etcd-ports");
    let remembered_ports = std::fs::read_to_string(&ports_file).ok().and_then(|s| {
        let mut it = s.split_whitespace().map(|p| p.parse::<u16>().ok());
        Some((it.next()??, it.next()??))
    });
    let (client_port, peer_port) = match remembered_ports {
        Some(p) if data.join("etcd").exists() => p,
        _ => (free_port()?, free_port()?),
    };
    std::fs::write(&ports_file, format!("{client_port} {peer_port}\n"))?;
    let etcd_url = format!("http://127.0.0.1:{client_port}");
    let peer = format!("http://127.0.0.1:{peer_port}");
    let etcd_log = std::fs::File::create(data.join("etcd.log"))?;
    children.0.push(
        std::process::Command::new("etcd")
            .args(["--name", "demo", "--data-dir"])
            .arg(data.join("etcd"))
            .args(["--listen-client-urls", &etcd_url, "--advertise-client-urls", &etcd_url])
            .args(["--listen-peer-urls", &peer, "--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &format!("demo={peer}")])
            .stdout(Stdio::null())
            .stderr(etcd_log)
            .spawn()
            .map_err(|e| format!("starting etcd (Debian package etcd-server): {e}"))?,
    );
    let control = connect_when_up(&etcd_url).await?;
    let fresh = control.load_map().await.is_err();
    if fresh {
        control.init(&ClusterMap::new(64, 3.min(drives as u8), (3.min(drives as u8) / 2) + 1)?).await?;
    }
    // A demo started again on its folder starts each drive at the address the map remembers.
    let remembered = control.load_map().await?.0;
    let exe = std::env::current_exe()?;
    let mut addrs = Vec::new();
    // Kept open: a drive writing to a closed stdout would fail.
    let mut outputs = Vec::new();
    let mut metrics_urls = Vec::new();
    for i in 0..drives {
        let port = remembered.members.get(&format!("drive-{i}")).and_then(|m| m.addr.rsplit(':').next()?.parse::<u16>().ok()).unwrap_or(0);
        let mut child = std::process::Command::new(&exe)
            .args(["drive", "--port", &port.to_string(), "--tls-port", "0", "--metrics-port", "0", "--data"])
            .arg(data.join(format!("drive-{i}")))
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(data.join(format!("drive-{i}.log")))?)
            .spawn()?;
        let out = child.stdout.take().ok_or("drive stdout")?;
        children.0.push(child);
        let mut line = String::new();
        let mut out = BufReader::new(out);
        out.read_line(&mut line)?;
        let addr = line.split_whitespace().nth(4).ok_or_else(|| format!("drive {i} did not start (see {}): {line:?}", data.join(format!("drive-{i}.log")).display()))?.to_string();
        // "spindle drive metrics on http://ADDR/metrics"
        let mut metrics_line = String::new();
        out.read_line(&mut metrics_line)?;
        metrics_urls.push(metrics_line.split_whitespace().nth(4).unwrap_or("none").to_string());
        outputs.push(out);
        addrs.push(addr);
    }
    let config = CoordinatorConfig { name: "demo-coordinator".into(), ..CoordinatorConfig::default() };
    let coordinator_metrics = serve_metrics(&config, std::net::SocketAddr::from(([127, 0, 0, 1], 0))).await?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let coordinator = tokio::spawn(coordinator::run(control.clone(), config, async {
        let _ = stop_rx.await;
    }));
    // Drives get new ports at each start: the members' addresses follow.
    let (map, _) = control.load_map().await?;
    for (i, addr) in addrs.iter().enumerate() {
        let id = format!("drive-{i}");
        let known = map.members.get(&id);
        if known.is_some_and(|m| &m.addr == addr) {
            continue;
        }
        // A member known at another address takes the new one (an update, not a move).
        let member = Member { id: id.clone(), addr: addr.clone(), tls_port: None, capacity: 0, weight: 1.0, domain: None, leaving: false };
        control.request_change(&MemberChange::Add(member)).await?;
        let a = addr.clone();
        wait_for(&control, |m| m.members.get(&id).is_some_and(|m| m.addr == a), Duration::from_secs(30)).await?;
    }
    // Ready once every partition is placed on as many drives as it can have.
    let full = |m: &ClusterMap| {
        let n = m.members.values().filter(|d| !d.leaving).count().min(usize::from(m.replicas));
        m.moving.is_empty() && m.placement.iter().all(|r| r.len() == n)
    };
    wait_for(&control, full, Duration::from_secs(60)).await?;
    println!("spindle cluster demo: {drives} drives, etcd at {etcd_url}, data in {}", data.display());
    println!("  export SPINDLE_ETCD={etcd_url}");
    println!("  spindle cluster status;  spindle cluster put hello world;  spindle cluster get hello");
    println!("Prometheus metrics (docs/metrics.md): coordinator http://{}/metrics", coordinator_metrics.local_addr);
    for (i, url) in metrics_urls.iter().enumerate() {
        println!("  drive-{i} {url}");
    }
    println!("Ctrl-C stops the cluster.");
    std::io::stdout().flush()?;
    if !check {
        stop_signal().await;
    } else {
        // Wait until every drive is up, then end: the check is that it came up.
        for _ in 0..200 {
            let health = control.health().await?;
            if health.values().filter(|h| h.state == HealthState::Up).count() == drives {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let _ = stop_tx.send(());
    let _ = coordinator.await;
    coordinator_metrics.stop().await;
    drop(children);
    Ok(())
}

async fn connect_when_up(url: &str) -> Result<Control, Box<dyn std::error::Error>> {
    let mut last = String::new();
    for _ in 0..100 {
        match Control::connect(url, "spindle").await {
            Ok(c) => match c.coordinators().await {
                Ok(_) => return Ok(c),
                Err(e) => last = e.to_string(),
            },
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(format!("etcd at {url} did not come up: {last}").into())
}
