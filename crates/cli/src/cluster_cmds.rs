//! `spindle cluster`: create a cluster, change its members, look at it, use it, run its
//! coordinator, or start a whole one on loopback (`demo`).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use clap::Subcommand;
use serde_json::json;
use spindle_cluster::control::{HealthState, MemberChange};
use spindle_cluster::coordinator::{self, CoordinatorConfig};
use spindle_cluster::{BatchOp, ClusterMap, Condition, Member};

use crate::client_cmds::CmdResult;
use crate::cluster_access::{serve_metrics, stop_signal, wait_for, Etcd};

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
        /// The erasure-coded pool the drive serves [default: the replicated pool]
        #[arg(long)]
        pool: Option<String>,
        #[command(flatten)]
        provision: crate::cluster_secure::ProvisionArgs,
        #[command(flatten)]
        etcd: Etcd,
    },
    /// Make a cluster's credentials (identity, HMAC key, CA) in --credentials DIR
    NewCredentials {
        #[command(flatten)]
        etcd: Etcd,
    },
    /// Give the cluster its own etcd user (its prefix only) and have etcd enforce users
    SecureEtcd {
        /// etcd's root password, if etcd enforces users already (else one is made and kept
        /// in the credentials directory)
        #[arg(long, env = "SPINDLE_ETCD_ROOT_PASSWORD", hide_env_values = true)]
        root_password: Option<String>,
        #[command(flatten)]
        etcd: Etcd,
    },
    /// Move a secured cluster to a new identity and HMAC key without stopping it: `begin`,
    /// restart what reaches the drives with the new key one at a time, then `finish`
    RotateKey {
        step: crate::cluster_rotate::RotationStep,
        /// Keep the factory identity on the drives, with this key
        #[arg(long, env = "SPINDLE_FACTORY_KEY", hide_env_values = true)]
        keep_factory_key: Option<String>,
        #[command(flatten)]
        etcd: Etcd,
    },
    /// Move a secured cluster to a new certificate authority without stopping it: `begin`,
    /// hand out the two-CA ca.pem and renew every certificate, then `finish`
    RotateCa {
        step: crate::cluster_rotate::RotationStep,
        #[command(flatten)]
        etcd: Etcd,
    },
    /// Issue a drive's TLS certificate from a secured cluster's CA (--credentials DIR)
    IssueCert {
        /// The drive's IP addresses and DNS names (each one clients reach it by)
        #[arg(long = "name", required = true)]
        names: Vec<String>,
        /// Directory to write cert.pem and key.pem to
        #[arg(long)]
        out: PathBuf,
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
    /// Erasure-coded pools: add, list, status.
    #[command(subcommand)]
    Pool(crate::cluster_pools::PoolCommand),
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
        /// TOML file of settings, keyed by these flags' names (flags given override it)
        #[arg(long)]
        config: Option<PathBuf>,
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
        /// Run it open, as before secured clusters: drives take the factory identity over
        /// plain TCP and etcd serves anyone (secured by default)
        #[arg(long)]
        insecure: bool,
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
            let mut map = ClusterMap::new(partitions, replicas, write_quorum)?;
            let secured = match &etcd.credentials {
                Some(dir) => Some(crate::cluster_secure::secure_map(&mut map, &etcd.cluster, dir)?),
                None => None,
            };
            etcd.control().await?.init(&map).await?;
            println!("cluster {:?}: {partitions} partitions, {replicas} replicas, writes acknowledged by {write_quorum}", etcd.cluster);
            if let Some(s) = secured {
                println!("{s}");
            }
        }
        ClusterCommand::NewCredentials { etcd } => crate::cluster_secure::new_credentials(etcd.credentials.as_deref(), &etcd.cluster)?,
        ClusterCommand::SecureEtcd { root_password, etcd } => crate::cluster_secure::secure_etcd(&etcd, root_password).await?,
        ClusterCommand::RotateKey { step, keep_factory_key, etcd } => crate::cluster_rotate::rotate_key(&etcd, step, keep_factory_key).await?,
        ClusterCommand::RotateCa { step, etcd } => crate::cluster_rotate::rotate_ca(&etcd, step).await?,
        ClusterCommand::IssueCert { names, out, etcd } => crate::cluster_secure::issue_cert(etcd.credentials.as_deref(), &names, &out)?,
        ClusterCommand::AddDrive { id, addr, tls_port, capacity, weight, domain, pool, provision, etcd } => {
            let weight = weight.unwrap_or(if capacity > 0 { capacity as f64 / (1u64 << 30) as f64 } else { 1.0 });
            let control = etcd.control().await?;
            let (map, _) = control.load_map().await?;
            if let Some(p) = &pool {
                map.pool(p)?;
            }
            if let Some(done) = crate::cluster_secure::provision_drive(&etcd, &map, &addr, &provision).await? {
                println!("{done}");
            }
            let member = Member { id: id.clone(), addr, tls_port, capacity, weight, domain, leaving: false, pool: pool.clone() };
            control.request_change(&MemberChange::Add(member)).await?;
            let map = wait_for(&control, |m| m.members.get(&id).is_some_and(|m| !m.leaving), Duration::from_secs(30)).await?;
            match pool {
                Some(p) => println!("{id} added to pool {p}: epoch {}; it takes positions in the pool's groups (spindle cluster pool status)", map.epoch),
                None => println!("{id} added: epoch {}; partitions move to it live (spindle cluster status shows the move)", map.epoch),
            }
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
        ClusterCommand::Pool(cmd) => crate::cluster_pools::run(cmd).await?,
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
            config,
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
            // The file was read before parsing: its settings are among the flags (settings_file.rs).
            if let Some(file) = &config {
                tracing::info!("settings from {}", file.display());
            }
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
            // A coordinator may start before `init`: it then takes the credentials it was
            // given as they are (checked against the map by every command that follows).
            config.client = match control.load_map().await {
                Ok((map, _)) => etcd.client_config(&map, config.client.timeout)?,
                Err(spindle_cluster::ClusterError::NotInitialized(_)) => match &etcd.credentials {
                    Some(dir) => spindle_cluster::Credentials::load(dir)?.client_config(config.client.timeout),
                    None => config.client,
                },
                Err(e) => return Err(e.into()),
            };
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
        ClusterCommand::Demo { drives, data, check, insecure } => crate::cluster_demo::demo(drives, &data, check, insecure).await?,
    }
    Ok(())
}

async fn status(etcd: &Etcd) -> CmdResult {
    let control = etcd.control().await?;
    let (map, _) = control.load_map().await?;
    let health = control.health().await?;
    let (coordinators, leader) = control.coordinators().await?;
    let rebuilds = control.rebuilds().await?;
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
                   "pools": map.pools.keys().map(|n| crate::cluster_pools::pool_json(&map, &health, &rebuilds, n))
                       .chain(map.remotes.iter().map(|(n, r)| crate::cluster_pools::remote_json(n, r))).collect::<Vec<_>>(),
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
    for name in map.pools.keys() {
        for line in crate::cluster_pools::pool_lines(&map, &health, &rebuilds, name) {
            println!("{line}");
        }
    }
    for (name, r) in &map.remotes {
        println!("{}", crate::cluster_pools::remote_line(name, r));
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
