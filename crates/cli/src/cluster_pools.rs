//! `spindle cluster pool`: the cluster's erasure-coded pools (add, list, status), and the pool
//! lines of `spindle cluster status`.

use std::collections::BTreeMap;
use std::time::Duration;

use clap::Subcommand;
use serde_json::json;
use spindle_cluster::control::{Health, HealthState, MemberChange};
use spindle_cluster::erasure::Code;
use spindle_cluster::pool::{Pool, DEFAULT_GROUPS};
use spindle_cluster::remote::RemotePool;
use spindle_cluster::control::RebuildProgress;

/// Each pool's rebuild, as etcd has it.
pub type Rebuilds = BTreeMap<String, RebuildProgress>;
use spindle_cluster::ClusterMap;

use crate::client_cmds::CmdResult;
use crate::cluster_access::{wait_for, Etcd};

#[derive(Subcommand)]
pub enum PoolCommand {
    /// Add an erasure-coded pool (its drives join with `add-drive --pool NAME`), or a remote
    /// pool: an external S3 bucket that gateways write to with keys they are given.
    Add {
        name: String,
        /// The code: DATA+PARITY shards per stripe (4+2 stores 1.5 bytes per byte and
        /// survives the loss of any 2 of a stripe's 6 drives)
        #[arg(long, required_unless_present = "s3", conflicts_with = "s3")]
        ec: Option<Code>,
        /// A remote pool's bucket: http(s)://HOST:PORT/BUCKET[/PREFIX] (no keys: each gateway
        /// is given them with `spindle s3 --remote-keys NAME=FILE`)
        #[arg(long, value_name = "URL")]
        s3: Option<String>,
        /// The region a remote pool's requests are signed for
        #[arg(long, default_value = "us-east-1", requires = "s3")]
        region: String,
        /// Placement groups (each object's stripes go to one group's drives)
        #[arg(long, default_value_t = DEFAULT_GROUPS)]
        groups: u32,
        #[command(flatten)]
        etcd: Etcd,
    },
    /// The pools: the replicated default one and each erasure-coded one.
    List {
        #[command(flatten)]
        etcd: Etcd,
    },
    /// A pool's drives and groups: placed, degraded (a drive down), unreadable (more drives
    /// down than its parity), and whether its drives span enough failure domains.
    Status {
        /// One pool (default: all)
        name: Option<String>,
        #[command(flatten)]
        etcd: Etcd,
    },
}

pub async fn run(cmd: PoolCommand) -> CmdResult {
    match cmd {
        PoolCommand::Add { name, ec: None, s3: Some(url), region, etcd, .. } => {
            let remote = RemotePool::parse(&url, &region)?;
            let control = etcd.control().await?;
            if control.load_map().await?.0.has_pool(&name) {
                return Err(format!("pool {name:?} already exists").into());
            }
            control.request_change(&MemberChange::AddRemote { name: name.clone(), remote: remote.clone() }).await?;
            let map = wait_for(&control, |m| m.remotes.contains_key(&name), Duration::from_secs(30)).await?;
            println!("pool {name} added: the remote bucket {}, epoch {}; give gateways its keys with `spindle s3 --remote-keys {name}=FILE`", remote.describe(), map.epoch);
        }
        PoolCommand::Add { ec: None, .. } => return Err("give --ec DATA+PARITY or --s3 URL".into()),
        PoolCommand::Add { name, ec: Some(ec), groups, etcd, .. } => {
            let pool = Pool::new(ec, groups)?;
            let control = etcd.control().await?;
            if control.load_map().await?.0.has_pool(&name) {
                return Err(format!("pool {name:?} already exists").into());
            }
            control.request_change(&MemberChange::AddPool { name: name.clone(), pool }).await?;
            let map = wait_for(&control, |m| m.pools.contains_key(&name), Duration::from_secs(30)).await?;
            println!("pool {name} added: {ec}, {groups} placement groups, epoch {}; add its drives with `spindle cluster add-drive --pool {name}` (at least {})", map.epoch, ec.width());
        }
        PoolCommand::List { etcd } => {
            let (map, _) = etcd.control().await?.load_map().await?;
            if etcd.json {
                let mut pools: Vec<_> = map.pools.iter().map(|(name, p)| json!({"name": name, "kind": "erasure-coded", "code": p.code.to_string(), "groups": p.groups, "drives": drives_of(&map, name).len()})).collect();
                pools.extend(map.remotes.iter().map(|(name, r)| remote_json(name, r)));
                println!("{}", json!({"default": {"replicas": map.replicas, "write_quorum": map.write_quorum, "partitions": map.partitions}, "pools": pools}));
                return Ok(());
            }
            println!("{:<16} {:<12} {:>8} {:>7} {:>9}", "POOL", "KIND", "GROUPS", "DRIVES", "RAW/BYTE");
            let default_drives = map.members.values().filter(|m| m.pool.is_none()).count();
            println!("{:<16} {:<12} {:>8} {:>7} {:>9.2}", "default", format!("R={} W={}", map.replicas, map.write_quorum), map.partitions, default_drives, f64::from(map.replicas));
            for (name, p) in &map.pools {
                println!("{:<16} {:<12} {:>8} {:>7} {:>9.2}", name, format!("EC {}", p.code), p.groups, drives_of(&map, name).len(), p.code.overhead());
            }
            for (name, r) in &map.remotes {
                println!("{:<16} {:<12} {:>8} {:>7} {:>9}  {}", name, "remote S3", "-", "-", "-", r.describe());
            }
        }
        PoolCommand::Status { name, etcd } => {
            let control = etcd.control().await?;
            let (map, _) = control.load_map().await?;
            let health = control.health().await?;
            let rebuilds = control.rebuilds().await?;
            if let Some(n) = name.as_ref().filter(|n| !map.remotes.contains_key(*n)) {
                map.pool(n)?;
            }
            let wanted = |n: &String| name.as_ref().is_none_or(|w| w == n);
            let names: Vec<&String> = map.pools.keys().filter(|n| wanted(n)).collect();
            let remotes: Vec<(&String, &RemotePool)> = map.remotes.iter().filter(|(n, _)| wanted(n)).collect();
            if etcd.json {
                let mut out: Vec<_> = names.iter().map(|n| pool_json(&map, &health, &rebuilds, n)).collect();
                out.extend(remotes.iter().map(|(n, r)| remote_json(n, r)));
                println!("{}", json!({"pools": out}));
                return Ok(());
            }
            if names.is_empty() && remotes.is_empty() {
                println!("no erasure-coded or remote pools (add one with `spindle cluster pool add NAME --ec 4+2` or `--s3 URL`)");
            }
            for (n, r) in remotes {
                println!("{}", remote_line(n, r));
            }
            for n in names {
                for line in pool_lines(&map, &health, &rebuilds, n) {
                    println!("{line}");
                }
            }
        }
    }
    Ok(())
}

pub fn remote_json(name: &str, r: &RemotePool) -> serde_json::Value {
    json!({"name": name, "kind": "remote", "endpoint": r.endpoint, "bucket": r.bucket, "prefix": r.prefix, "region": r.region})
}

/// A remote pool as `cluster status` and `pool status` print it.
pub fn remote_line(name: &str, r: &RemotePool) -> String {
    format!("pool {name}: remote S3 bucket {} (region {}); its durability is the remote store's, and gateways reach it with the keys they are given", r.describe(), r.region)
}

fn drives_of<'a>(map: &'a ClusterMap, pool: &str) -> Vec<&'a String> {
    map.members.values().filter(|m| m.pool.as_deref() == Some(pool)).map(|m| &m.id).collect()
}

/// What a pool's groups look like with the drives `health` says are down.
struct GroupCounts {
    placed: usize,
    degraded: usize,
    unreadable: usize,
    domains: usize,
    short_of_domains: bool,
}

fn counts(map: &ClusterMap, health: &BTreeMap<String, Health>, name: &str) -> Option<GroupCounts> {
    let pool = map.pools.get(name)?;
    let up = |d: &String| health.get(d).is_some_and(|h| h.state == HealthState::Up);
    let mut c = GroupCounts { placed: 0, degraded: 0, unreadable: 0, domains: 0, short_of_domains: false };
    for g in &pool.placement {
        if g.is_empty() {
            continue;
        }
        c.placed += 1;
        let down = g.iter().filter(|d| !up(d)).count();
        if down > usize::from(pool.code.parity) {
            c.unreadable += 1;
        } else if down > 0 {
            c.degraded += 1;
        }
    }
    (c.domains, c.short_of_domains) = pool.domains(&map.candidates(Some(name), &Default::default()));
    Some(c)
}

pub fn pool_json(map: &ClusterMap, health: &BTreeMap<String, Health>, rebuilds: &Rebuilds, name: &str) -> serde_json::Value {
    let Some((pool, c)) = map.pools.get(name).zip(counts(map, health, name)) else { return json!(null) };
    let drives: Vec<_> = drives_of(map, name)
        .into_iter()
        .map(|d| json!({"id": d, "up": health.get(d).is_some_and(|h| h.state == HealthState::Up), "positions": pool.placement.iter().filter(|g| g.contains(d)).count()}))
        .collect();
    let rebuild = rebuilds.get(name).filter(|r| !r.finished || pool.pending.is_empty()).map(|r| {
        json!({"groups_left": pool.pending.len(), "groups_done": r.groups_done, "shards": r.shards, "bytes": r.bytes,
               "mib_per_sec": r.mib_per_sec(), "eta_secs": r.eta_secs(pool.pending.len()), "rate_limit": r.rate_limit,
               "started_ms": r.started_ms, "updated_ms": r.updated_ms, "finished": pool.pending.is_empty()})
    });
    json!({"name": name, "code": pool.code.to_string(), "groups": pool.groups, "placed": c.placed, "degraded": c.degraded,
           "unreadable": c.unreadable, "domains": c.domains, "short_of_domains": c.short_of_domains, "drives": drives,
           "groups_to_rebuild": pool.pending.len(), "rebuild": rebuild})
}

/// A pool's summary as `cluster status` and `pool status` print it.
pub fn pool_lines(map: &ClusterMap, health: &BTreeMap<String, Health>, rebuilds: &Rebuilds, name: &str) -> Vec<String> {
    let Some((pool, c)) = map.pools.get(name).zip(counts(map, health, name)) else { return Vec::new() };
    let drives = drives_of(map, name);
    let up = drives.iter().filter(|d| health.get(**d).is_some_and(|h| h.state == HealthState::Up)).count();
    let mut out = vec![format!(
        "pool {name}: EC {} ({:.2} raw bytes per byte), {} drives ({up} up), {} of {} groups placed, {} degraded, {} unreadable",
        pool.code,
        pool.code.overhead(),
        drives.len(),
        c.placed,
        pool.groups,
        c.degraded,
        c.unreadable
    )];
    if c.placed < pool.groups as usize {
        out.push(format!("  needs at least {} drives up to place every group", pool.code.width()));
    }
    if !pool.pending.is_empty() {
        let shards: usize = pool.pending.values().map(|p| p.len()).sum();
        let line = match rebuilds.get(name).filter(|r| !r.finished) {
            Some(r) => {
                let limit = if r.rate_limit > 0 { format!(" (limit {:.1} MiB/s)", r.rate_limit as f64 / f64::from(1u32 << 20)) } else { String::new() };
                let left = r.eta_secs(pool.pending.len()).map_or_else(|| "time left unknown yet".to_string(), |s| format!("about {s:.0} s left"));
                format!(
                    "  rebuilding: {} groups left ({shards} positions), {} groups done, {} shards ({:.1} MiB) written at {:.1} MiB/s{limit}; {left}",
                    pool.pending.len(),
                    r.groups_done,
                    r.shards,
                    r.bytes as f64 / f64::from(1u32 << 20),
                    r.mib_per_sec()
                )
            }
            None => format!("  rebuilding: {} groups left ({shards} positions), starting", pool.pending.len()),
        };
        out.push(line);
    }
    if c.short_of_domains && !drives.is_empty() {
        out.push(format!("  its drives span {} failure domains, fewer than a stripe's {} shards: losing one domain can cost a stripe more than one shard", c.domains, pool.code.width()));
    }
    out
}
