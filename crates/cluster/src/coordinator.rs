//! The coordinator: several may run, one leads (etcd election on a lease). The leader probes
//! every drive through Kinetic (NOOP), marks a drive down when it has not answered for
//! `down_after` and up again once it has caught up, owns every change of the map (member
//! changes asked through etcd become a new placement and epoch in one transaction), and fences
//! drives to the map's epoch with SETUP after the transaction commits.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use spindle_client::{Client, ClientConfig};
use tracing::{info, warn};

use crate::control::{now_ms, Control, Health, HealthState, MemberChange};
use crate::map::ClusterMap;
use crate::metrics::{CoordinatorMetrics, DriveView};
use crate::repair;
use crate::ClusterError;

#[derive(Debug, Clone)]
pub struct CoordinatorConfig {
    /// This coordinator's name (shown by `status`).
    pub name: String,
    pub probe_interval: Duration,
    /// A drive silent this long is marked down.
    pub down_after: Duration,
    /// TTL of the leadership lease: how soon another coordinator takes over from a dead one.
    pub lease_ttl: Duration,
    /// Identity and key for the drives.
    pub client: ClientConfig,
    /// What `/metrics` reports of this coordinator.
    pub metrics: Arc<CoordinatorMetrics>,
}

impl Default for CoordinatorConfig {
    fn default() -> Self {
        CoordinatorConfig {
            name: format!("coordinator-{}", std::process::id()),
            probe_interval: Duration::from_millis(500),
            down_after: Duration::from_secs(3),
            lease_ttl: Duration::from_secs(3),
            client: ClientConfig { timeout: Duration::from_secs(2), ..ClientConfig::default() },
            metrics: Arc::default(),
        }
    }
}

/// What the leader knows of one drive between probes.
struct Probe {
    client: Option<Client>,
    last_seen: Instant,
    /// Marked down in etcd; cleared once caught up.
    down: bool,
}

/// Runs until `stop` resolves: campaigns, leads while the lease holds, campaigns again.
pub async fn run(control: Control, config: CoordinatorConfig, stop: impl std::future::Future<Output = ()>) -> Result<(), ClusterError> {
    tokio::pin!(stop);
    let mut control = control;
    loop {
        tokio::select! {
            _ = &mut stop => return Ok(()),
            r = lead_once(&control, &config) => {
                if let Err(e) = r {
                    warn!("coordinator {}: {e}; campaigning again", config.name);
                    // The etcd member may be the one that failed: go on through one that answers.
                    match control.reconnect().await {
                        Ok(c) => control = c,
                        Err(e) => warn!("coordinator {}: no etcd member answers ({e})", config.name),
                    }
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}

/// One term: a lease, the election won, leadership kept until the lease is lost.
async fn lead_once(control: &Control, config: &CoordinatorConfig) -> Result<(), ClusterError> {
    let mut etcd = control.etcd.clone();
    let ttl = config.lease_ttl.as_secs().max(1) as i64;
    let lease = etcd.lease_grant(ttl, None).await?.id();
    let (mut keeper, mut acks) = etcd.lease_keep_alive(lease).await?;
    let me = control.key(&format!("coordinators/{}", config.name));
    etcd.put(me, config.name.clone(), Some(etcd_client::PutOptions::new().with_lease(lease))).await?;
    // Keep the lease alive while campaigning and leading; a lost lease ends the term.
    let keep = async {
        let mut tick = tokio::time::interval(Duration::from_millis((ttl as u64 * 1000) / 3));
        loop {
            tick.tick().await;
            keeper.keep_alive().await?;
            match acks.message().await? {
                Some(r) if r.ttl() > 0 => {}
                _ => return Err::<(), ClusterError>(ClusterError::Timeout("leadership lease expired".into())),
            }
        }
    };
    let term = async {
        let campaign = etcd.election_client().campaign(control.key("leader"), config.name.clone(), lease).await?;
        info!("coordinator {} leads (lease {lease:x})", config.name);
        config.metrics.leading(true);
        let result = lead(control, config).await;
        if let Some(key) = campaign.leader() {
            let _ = etcd.election_client().resign(Some(etcd_client::ResignOptions::new().with_leader(key.clone()))).await;
        }
        result
    };
    let result = tokio::select! {
        r = keep => r,
        r = term => r,
    };
    config.metrics.leading(false);
    let _ = etcd.lease_revoke(lease).await;
    result
}

/// The leader's loop.
async fn lead(control: &Control, config: &CoordinatorConfig) -> Result<(), ClusterError> {
    let mut probes: HashMap<String, Probe> = HashMap::new();
    let mut tick = tokio::time::interval(config.probe_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        apply_changes(control, config).await?;
        let (map, _) = control.load_map().await?;
        let health = control.health().await?;
        probes.retain(|id, _| map.members.contains_key(id));
        for (id, member) in &map.members {
            let probe = probes.entry(id.clone()).or_insert_with(|| Probe {
                client: None,
                last_seen: Instant::now(),
                down: health.get(id).is_some_and(|h| h.state == HealthState::Down),
            });
            let probe_started = Instant::now();
            let answered = check(probe, &member.addr, &map, config).await;
            config.metrics.probed(answered, probe_started.elapsed());
            if answered {
                probe.last_seen = Instant::now();
                if probe.down || !health.contains_key(id) {
                    // Back (or new): catch it up before it counts as a full replica again.
                    let repairing = Health { state: HealthState::Down, last_seen_ms: now_ms(), cluster_version: map.epoch as i64, repairing: true };
                    control.set_health(id, &repairing).await?;
                    match catch_up(&map, id, &probes).await {
                        Ok(copied) => {
                            config.metrics.repaired(copied);
                            info!("drive {id} is up (caught up: {copied} entries copied)");
                            let up = Health { repairing: false, state: HealthState::Up, ..repairing };
                            control.set_health(id, &up).await?;
                            if let Some(p) = probes.get_mut(id) {
                                p.down = false;
                            }
                        }
                        Err(e) => warn!("drive {id}: catching up failed ({e}); trying again"),
                    }
                } else if health.get(id).is_some_and(|h| now_ms().saturating_sub(h.last_seen_ms) > 1000) {
                    let up = Health { state: HealthState::Up, last_seen_ms: now_ms(), cluster_version: map.epoch as i64, repairing: false };
                    control.set_health(id, &up).await?;
                }
            } else if !probe.down && probe.last_seen.elapsed() >= config.down_after {
                warn!("drive {id} has not answered for {:?}: marked down", probe.last_seen.elapsed());
                probe.down = true;
                config.metrics.marked_down();
                let seen = health.get(id).map_or(0, |h| h.last_seen_ms);
                let cv = health.get(id).map_or(0, |h| h.cluster_version);
                control.set_health(id, &Health { state: HealthState::Down, last_seen_ms: seen, cluster_version: cv, repairing: false }).await?;
            }
        }
        let load = map.load();
        let states: BTreeMap<String, DriveView> = map
            .members
            .keys()
            .map(|id| {
                let down = probes.get(id).is_none_or(|p| p.down);
                let partitions = load.get(id).copied().unwrap_or(0);
                (id.clone(), DriveView { up: !down, repairing: down && probes.get(id).is_some_and(|p| p.client.is_some()), partitions })
            })
            .collect();
        config.metrics.observe_round(&map, states);
    }
}

/// Probes a drive: NOOP on a kept connection (reconnecting as needed), fencing it to the
/// map's epoch when its cluster version differs. `true` if it answered at the right epoch.
async fn check(probe: &mut Probe, addr: &str, map: &ClusterMap, config: &CoordinatorConfig) -> bool {
    let epoch = map.epoch as i64;
    let client = match probe.client.clone().filter(|c| !c.is_closed()) {
        Some(c) => match fence(&c, epoch).await {
            Ok(()) => c,
            Err(e) => {
                // VERSION_FAILURE: fenced meanwhile by another connection; learnt on reconnecting.
                if e.status() != Some(spindle_client::StatusCode::VersionFailure) {
                    warn!("fencing {addr} to epoch {epoch}: {e}");
                }
                probe.client = None;
                return false;
            }
        },
        None => match fenced_client(addr, epoch, config).await {
            Some(c) => c,
            None => {
                probe.client = None;
                return false;
            }
        },
    };
    probe.client = Some(client.clone());
    match client.noop().await {
        Ok(()) => true,
        Err(e) => {
            if e.status() == Some(spindle_client::StatusCode::VersionFailure) {
                // Someone else set its version: learn it again on the next probe.
                probe.client = None;
            }
            false
        }
    }
}

/// Repairs every partition `drive` holds, over the replicas that answer.
async fn catch_up(map: &ClusterMap, drive: &str, probes: &HashMap<String, Probe>) -> Result<u64, ClusterError> {
    let mut copied = 0;
    for p in 0..map.partitions {
        let replicas = map.replicas_of(p);
        if !replicas.iter().any(|r| r == drive) {
            continue;
        }
        let reachable: Vec<(String, Client)> = replicas
            .iter()
            .filter_map(|r| probes.get(r).and_then(|pr| pr.client.clone()).filter(|c| !c.is_closed()).map(|c| (r.clone(), c)))
            .collect();
        copied += repair::repair_partition(p, &reachable).await.map_err(|e| ClusterError::Drive { drive: drive.to_string(), source: e })?;
    }
    Ok(copied)
}

/// Turns waiting member changes into new maps, one epoch each, and repairs the partitions
/// whose replicas changed.
async fn apply_changes(control: &Control, config: &CoordinatorConfig) -> Result<(), ClusterError> {
    for (key, change) in control.pending_changes().await? {
        let (mut map, revision) = control.load_map().await?;
        let before = map.clone();
        match &change {
            MemberChange::Add(m) => {
                if map.members.values().any(|o| o.addr == m.addr && o.id != m.id) {
                    warn!("refusing to add {}: {} is already a member", m.id, m.addr);
                    control.drop_change(&key).await?;
                    continue;
                }
                map.members.insert(m.id.clone(), m.clone());
            }
            MemberChange::Remove { id } => {
                if map.members.remove(id).is_none() {
                    control.drop_change(&key).await?;
                    continue;
                }
            }
        }
        map.placement = map.computed_placement();
        map.epoch += 1;
        if control.apply_change(revision, &map, &key).await? {
            config.metrics.map_changed();
            info!("epoch {}: {change:?}", map.epoch);
            if let MemberChange::Remove { id } = &change {
                control.clear_health(id).await?;
            }
            let copied = rebalance(&before, &map, config).await;
            config.metrics.repaired(copied);
            info!("epoch {}: {copied} entries copied to partitions' new replicas", map.epoch);
        }
    }
    Ok(())
}

/// After a placement change: every partition whose replicas changed is repaired over its old
/// and new replicas together, so the new ones get the data (in the new epoch; the migration
/// protocol that copies before the flip is built on this).
async fn rebalance(before: &ClusterMap, after: &ClusterMap, config: &CoordinatorConfig) -> u64 {
    let mut clients: HashMap<String, Option<Client>> = HashMap::new();
    let mut copied = 0;
    for p in 0..after.partitions {
        let (old, new) = (before.replicas_of(p), after.replicas_of(p));
        if old == new {
            continue;
        }
        let mut reachable = Vec::new();
        for id in old.iter().chain(new).collect::<std::collections::BTreeSet<_>>() {
            let Some(addr) = after.members.get(id).or_else(|| before.members.get(id)).map(|m| m.addr.clone()) else { continue };
            if !clients.contains_key(id) {
                clients.insert(id.clone(), fenced_client(&addr, after.epoch as i64, config).await);
            }
            if let Some(Some(c)) = clients.get(id) {
                reachable.push((id.clone(), c.clone()));
            }
        }
        match repair::repair_partition(p, &reachable).await {
            Ok(n) => copied += n,
            Err(e) => warn!("partition {p}: repair after the change failed ({e}); the drives' own catch-up will retry"),
        }
    }
    copied
}

/// A connection at `epoch`: it adopts the drive's cluster version from the sign-on, then
/// fences the drive to `epoch` if that differs.
async fn fenced_client(addr: &str, epoch: i64, config: &CoordinatorConfig) -> Option<Client> {
    let c = tokio::time::timeout(config.client.timeout, Client::connect(addr, config.client.clone())).await.ok()?.ok()?;
    let theirs = c.sign_on().header.as_ref().and_then(|h| h.cluster_version).unwrap_or(0);
    c.set_request_cluster_version(theirs);
    fence(&c, epoch).await.ok()?;
    Some(c)
}

/// Sets the drive's cluster version to `epoch` (SETUP, sent at the version the connection
/// knows) unless it is there already; the connection then talks at `epoch`.
async fn fence(c: &Client, epoch: i64) -> Result<(), spindle_client::ClientError> {
    if c.cluster_version() != epoch {
        c.set_cluster_version(epoch).await?;
        c.set_request_cluster_version(epoch);
        info!("drive fenced to epoch {epoch}");
    }
    Ok(())
}
