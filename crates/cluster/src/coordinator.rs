//! The coordinator: several may run, one leads (etcd election on a lease). The leader probes
//! every drive through Kinetic (NOOP), marks a drive down when it has not answered for
//! `down_after` and up again once it has caught up, owns every change of the map (member
//! changes asked through etcd, moves of partitions toward the placement the members call for
//! (migrate.rs), drives down for `replace_after` replaced), sweeps data drives no longer need
//! (sweep.rs), and fences drives to the map's epoch with SETUP after each transaction commits.
//! Everything a successor needs to resume is in etcd: the map (with the move under way) and
//! the move's progress.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

use futures_util::stream::StreamExt;
use spindle_client::{Client, ClientConfig};
use tracing::{info, warn};

use crate::control::{now_ms, Control, Health, HealthState, MemberChange, MoveProgress};
use crate::map::{ClusterMap, Member};
use crate::fence::{fence, fenced_client};
use crate::{migrate, rebuild, sweeper};
use crate::metrics::{CoordinatorMetrics, DriveView};
use crate::repair;
use crate::store::StoreConfig;
use crate::ClusterError;

/// Mixed into `CoordinatorConfig::store_seed` for the sweeper's cluster client, so that it and
/// a move's never draw the same writer id.
const SWEEPER_SEED: u64 = 0x5357_4545_5045_5253;

#[derive(Debug, Clone)]
pub struct CoordinatorConfig {
    /// This coordinator's name (shown by `status`).
    pub name: String,
    pub probe_interval: Duration,
    /// A drive silent this long is marked down.
    pub down_after: Duration,
    /// TTL of the leadership lease: how soon another coordinator takes over from a dead one.
    pub lease_ttl: Duration,
    /// A drive down this long is replaced: its partitions are re-replicated on the others.
    pub replace_after: Duration,
    /// Bandwidth a move's pushes may take, bytes per second (0: no limit).
    pub migrate_rate: u64,
    /// How long data a drive no longer needs stays before the sweeper deletes it, and how
    /// often the sweeper looks.
    pub sweep_grace: Duration,
    pub sweep_interval: Duration,
    /// Identity and key for the drives.
    pub client: ClientConfig,
    /// What `/metrics` reports of this coordinator.
    pub metrics: Arc<CoordinatorMetrics>,
    /// Seeds the cluster client a move settles keys with (`StoreConfig::seed`).
    pub store_seed: Option<u64>,
}

impl Default for CoordinatorConfig {
    fn default() -> Self {
        CoordinatorConfig {
            name: format!("coordinator-{}", std::process::id()),
            probe_interval: Duration::from_millis(500),
            down_after: Duration::from_secs(3),
            lease_ttl: Duration::from_secs(3),
            replace_after: Duration::from_secs(120),
            migrate_rate: 64 << 20,
            sweep_grace: Duration::from_secs(30),
            sweep_interval: Duration::from_secs(10),
            client: ClientConfig { timeout: Duration::from_secs(2), ..ClientConfig::default() },
            metrics: Arc::default(),
            store_seed: None,
        }
    }
}

/// What the leader knows of one drive between probes.
struct Probe {
    client: Option<Client>,
    last_seen: Instant,
    /// Marked down in etcd; cleared once caught up.
    down: bool,
    /// The catch-up under way for it, beside the probes (a long one must not keep the other
    /// drives from being probed).
    catching_up: Option<tokio::task::JoinHandle<Result<u64, ClusterError>>>,
}

impl Drop for Probe {
    fn drop(&mut self) {
        // A catch-up belongs to the term that started it.
        if let Some(task) = self.catching_up.take() {
            task.abort();
        }
    }
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
    let plane = control.plane();
    let ttl = config.lease_ttl.as_secs().max(1) as i64;
    let lease = plane.grant(ttl).await?;
    let mut keeper = plane.keep_alive(lease).await?;
    let me = control.key(&format!("coordinators/{}", config.name));
    plane.put(&me, config.name.clone().into_bytes(), Some(lease)).await?;
    // Keep the lease alive while campaigning and leading; a lost lease ends the term.
    let keep = async {
        let mut tick = tokio::time::interval(Duration::from_millis((ttl as u64 * 1000) / 3));
        loop {
            tick.tick().await;
            if keeper.renew().await? <= 0 {
                return Err::<(), ClusterError>(ClusterError::LeaseLost);
            }
        }
    };
    let term = async {
        let term = plane.campaign(&control.key("leader"), &config.name, lease).await?;
        info!("coordinator {} leads (lease {lease:x})", config.name);
        config.metrics.leading(true);
        let result = lead(control, config).await;
        let _ = term.resign().await;
        result
    };
    let result = tokio::select! {
        r = keep => r,
        r = term => r,
    };
    config.metrics.leading(false);
    let _ = plane.revoke(lease).await;
    result
}

/// The leader's two loops, side by side: `watch` probes drives, marks them down and up and
/// catches up those that come back; `plan` applies member changes, moves partitions and
/// sweeps. Either failing (etcd gone, leadership lost) ends the term.
async fn lead(control: &Control, config: &CoordinatorConfig) -> Result<(), ClusterError> {
    tokio::try_join!(watch(control, config), plan(control, config)).map(drop)
}

/// Probes every member each round, all at once.
async fn watch(control: &Control, config: &CoordinatorConfig) -> Result<(), ClusterError> {
    let mut probes: BTreeMap<String, Probe> = BTreeMap::new();
    let mut tick = tokio::time::interval(config.probe_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let (map, _) = control.load_map().await?;
        let health = control.health().await?;
        probes.retain(|id, _| map.members.contains_key(id));
        for id in map.members.keys() {
            probes.entry(id.clone()).or_insert_with(|| Probe {
                client: None,
                last_seen: Instant::now(),
                down: health.get(id).is_some_and(|h| h.state == HealthState::Down),
                catching_up: None,
            });
        }
        let map_ref = &map;
        let rounds = probes.iter_mut().filter_map(|(id, probe)| {
            let addr = map_ref.members.get(id)?.addr.clone();
            Some(async move {
                let started = Instant::now();
                let answered = check(probe, &addr, map_ref, config).await;
                (id.clone(), answered, started.elapsed())
            })
        });
        let answers = futures_util::future::join_all(rounds).await;
        for (id, answered, took) in answers {
            config.metrics.probed(answered, took);
            observe(control, config, &map, &health, &mut probes, &id, answered).await?;
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

/// What one probe's answer changes: a drive back (or new) is caught up in a task of its own
/// and marked up when that ends well; one silent for `down_after` is marked down.
async fn observe(
    control: &Control,
    config: &CoordinatorConfig,
    map: &ClusterMap,
    health: &BTreeMap<String, Health>,
    probes: &mut BTreeMap<String, Probe>,
    id: &str,
    answered: bool,
) -> Result<(), ClusterError> {
    let replicas: BTreeMap<String, Client> =
        probes.iter().filter_map(|(d, p)| p.client.clone().filter(|c| !c.is_closed()).map(|c| (d.clone(), c))).collect();
    let Some(probe) = probes.get_mut(id) else { return Ok(()) };
    if answered {
        probe.last_seen = Instant::now();
        if probe.down || !health.contains_key(id) {
            match probe.catching_up.take() {
                None => {
                    // Back (or new): catch it up before it counts as a full replica again.
                    let repairing = Health { state: HealthState::Down, last_seen_ms: now_ms(), cluster_version: map.epoch as i64, repairing: true };
                    control.set_health(id, &repairing).await?;
                    let (map, drive) = (map.clone(), id.to_string());
                    probe.catching_up = Some(tokio::spawn(async move { catch_up(&map, &drive, &replicas).await }));
                    // Not up until the catch-up ends well (a new member too).
                    probe.down = true;
                }
                Some(task) if !task.is_finished() => probe.catching_up = Some(task),
                Some(task) => match task.await {
                    Ok(Ok(copied)) => {
                        config.metrics.repaired(copied);
                        info!("drive {id} is up (caught up: {copied} entries copied)");
                        let up = Health { state: HealthState::Up, last_seen_ms: now_ms(), cluster_version: map.epoch as i64, repairing: false };
                        control.set_health(id, &up).await?;
                        probe.down = false;
                    }
                    Ok(Err(e)) => warn!("drive {id}: catching up failed ({e}); trying again"),
                    Err(e) => warn!("drive {id}: catching up ended ({e}); trying again"),
                },
            }
        } else if health.get(id).is_some_and(|h| now_ms().saturating_sub(h.last_seen_ms) > 1000) {
            let up = Health { state: HealthState::Up, last_seen_ms: now_ms(), cluster_version: map.epoch as i64, repairing: false };
            control.set_health(id, &up).await?;
        }
    } else if probe.down && health.get(id).is_some_and(|h| h.repairing) {
        // Gone again while being caught up (or the leader that was catching it up died):
        // down, and no longer repairing, so that it can be replaced.
        if let Some(task) = probe.catching_up.take() {
            task.abort();
        }
        let h = &health[id];
        control.set_health(id, &Health { repairing: false, ..h.clone() }).await?;
    } else if !probe.down && probe.last_seen.elapsed() >= config.down_after {
        warn!("drive {id} has not answered for {:?}: marked down", probe.last_seen.elapsed());
        probe.down = true;
        config.metrics.marked_down();
        let seen = health.get(id).map_or(0, |h| h.last_seen_ms);
        let cv = health.get(id).map_or(0, |h| h.cluster_version);
        control.set_health(id, &Health { state: HealthState::Down, last_seen_ms: seen, cluster_version: cv, repairing: false }).await?;
    }
    Ok(())
}

/// Probes a drive: NOOP on a kept connection (reconnecting as needed), fencing it to the
/// map's epoch when its cluster version differs. `true` if it answered at the right epoch.
async fn check(probe: &mut Probe, addr: &str, map: &ClusterMap, config: &CoordinatorConfig) -> bool {
    let epoch = map.epoch as i64;
    let kept = probe.client.clone().filter(|c| !c.is_closed());
    let kept = match kept {
        Some(c) => match fence(&c, epoch).await {
            Ok(()) => Some(c),
            // Fenced meanwhile through another connection (the plan loop's, at a change of
            // the map): the drive answered; reconnect at once and learn its version.
            Err(e) if e.status() == Some(spindle_client::StatusCode::VersionFailure) => None,
            Err(e) => {
                warn!("fencing {addr} to epoch {epoch}: {e}");
                probe.client = None;
                return false;
            }
        },
        None => None,
    };
    let client = match kept {
        Some(c) => c,
        None => match fenced_client(addr, epoch, &config.client).await {
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

/// Repairs every partition `drive` holds, over the replicas that answer (`replicas`: the
/// connections the probes hold).
async fn catch_up(map: &ClusterMap, drive: &str, connections: &BTreeMap<String, Client>) -> Result<u64, ClusterError> {
    let mut copied = 0;
    for p in 0..map.partitions {
        let replicas = map.replicas_of(p);
        if !replicas.iter().any(|r| r == drive) {
            continue;
        }
        let reachable: Vec<(String, Client)> =
            replicas.iter().filter_map(|r| connections.get(r).filter(|c| !c.is_closed()).map(|c| (r.clone(), c.clone()))).collect();
        copied += repair::repair_partition(p, &reachable).await.map_err(|e| ClusterError::Drive { drive: drive.to_string(), source: e })?;
    }
    Ok(copied)
}

/// Why a coordinator stops on purpose at a point of a move (`SPINDLE_COORDINATOR_CRASH_AT`):
/// the crash tests kill it at each phase, exactly there, as a power cut or SIGKILL would.
fn crash_point(phase: &str) {
    if std::env::var("SPINDLE_COORDINATOR_CRASH_AT").is_ok_and(|p| p == phase) {
        eprintln!("coordinator: crashing at {phase} (SPINDLE_COORDINATOR_CRASH_AT)");
        std::process::abort();
    }
}

/// Member changes, moves and sweeps, one step per round, in this order: a move under way is
/// driven to its flip before anything else changes the map.
async fn plan(control: &Control, config: &CoordinatorConfig) -> Result<(), ClusterError> {
    let mut tick = tokio::time::interval(config.probe_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut sweeper = sweeper::Sweeper::default();
    // The sweeper's cluster client writes under a writer id of its own, apart from a move's.
    let sweep_settler = StoreConfig { client: config.client.clone(), seed: config.store_seed.map(|s| s ^ SWEEPER_SEED), ..StoreConfig::default() };
    // Since when the move under way (by its epoch) has had partitions that could not be
    // copied, none being copied meanwhile.
    let mut stuck: Option<(u64, Instant)> = None;
    // Set when a step calls for the next at once (a move just started goes straight on).
    let mut again = false;
    // Pool groups whose rebuild failed lately, until when they wait.
    let mut unhealed: BTreeMap<(String, u32), Instant> = BTreeMap::new();
    loop {
        if !std::mem::take(&mut again) {
            tick.tick().await;
        }
        let (map, revision) = control.load_map().await?;
        config.metrics.moving(map.moving.len());
        if !map.moving.is_empty() {
            run_move(control, config, map, revision, &mut stuck).await?;
            continue;
        }
        if apply_change(control, config).await? {
            again = true;
            continue;
        }
        let health = control.health().await?;
        if map.members.keys().any(|id| !health.contains_key(id)) {
            // A member not probed yet: its first probe (within `down_after`) says whether
            // placement can count on it.
            continue;
        }
        let failed = failed(&map, &health, config.replace_after);
        if start_move(control, config, map.clone(), revision, &failed).await? {
            again = true;
            continue;
        }
        if rebuild::place(control, &config.client, &config.metrics, &map, revision, &failed).await? {
            again = true;
            continue;
        }
        if rebuild::step(control, &config.client, config.migrate_rate, &config.metrics, &map, revision, &mut unhealed).await? {
            again = true;
            continue;
        }
        let settings = sweeper::SweepConfig { interval: config.sweep_interval, grace: config.sweep_grace, client: &config.client, metrics: &config.metrics, settler: &sweep_settler };
        sweeper.round(control, &settings, &map, revision).await?;
    }
}

/// Drives down for longer than `replace_after` (their partitions are re-replicated on the
/// others), and members never seen up that hold nothing yet (placed once they answer).
fn failed(map: &ClusterMap, health: &BTreeMap<String, Health>, replace_after: Duration) -> BTreeSet<String> {
    let now = now_ms();
    map.members
        .keys()
        .filter(|id| match health.get(*id) {
            // A drive marked repairing but silent since counts too: its catch-up died with it.
            Some(h) => h.state == HealthState::Down && now.saturating_sub(h.last_seen_ms) > replace_after.as_millis() as u64,
            None => !(0..map.partitions).any(|p| map.assigned(id, p)),
        })
        .cloned()
        .collect()
}

/// Applies the oldest waiting member change, if any (one epoch): an added member joins (or
/// an existing one takes its new address and weight); a removed one is marked leaving, which
/// the next plan drains. `true` if there was one.
async fn apply_change(control: &Control, config: &CoordinatorConfig) -> Result<bool, ClusterError> {
    let Some((key, change)) = control.pending_changes().await?.into_iter().next() else { return Ok(false) };
    let (mut map, revision) = control.load_map().await?;
    match &change {
        MemberChange::Add(m) => {
            let refusal = if map.members.values().any(|o| o.addr == m.addr && o.id != m.id) {
                Some(format!("{} is already a member", m.addr))
            } else if m.pool.as_ref().is_some_and(|p| !map.pools.contains_key(p)) {
                Some(format!("no pool {:?}", m.pool))
            } else if map.members.get(&m.id).is_some_and(|o| o.pool != m.pool) {
                // Its data is of the pool it serves: it leaves, then joins the other.
                Some("a member changes pools by leaving and joining again".to_string())
            } else {
                None
            };
            if let Some(why) = refusal {
                warn!("refusing to add {}: {why}", m.id);
                control.drop_change(&key).await?;
                return Ok(true);
            }
            map.members.insert(m.id.clone(), Member { leaving: false, ..m.clone() });
        }
        MemberChange::AddPool { name, .. } | MemberChange::AddRemote { name, .. } if map.has_pool(name) || map.pools.len() + map.remotes.len() >= crate::pool::MAX_POOLS => {
            warn!("refusing to add pool {name}: it exists, or the cluster has {} pools", map.pools.len() + map.remotes.len());
            control.drop_change(&key).await?;
            return Ok(true);
        }
        MemberChange::AddPool { name, pool } => {
            map.pools.insert(name.clone(), pool.clone());
        }
        MemberChange::AddRemote { name, remote } => {
            map.remotes.insert(name.clone(), remote.clone());
        }
        MemberChange::Remove { id } => match map.members.get_mut(id) {
            Some(m) => m.leaving = true,
            None => {
                control.drop_change(&key).await?;
                return Ok(true);
            }
        },
    }
    // Clients learn new addresses from the map they reload when the epoch changes.
    map.epoch += 1;
    if control.apply_change(revision, &map, &key).await? {
        config.metrics.map_changed();
        info!("epoch {}: {change:?}", map.epoch);
    }
    Ok(true)
}

/// Starts the move from the placement the map has to the one its members call for, if they
/// differ: the moving partitions named in the map at a new epoch, with the move's progress, in
/// one transaction; then every drive fenced to it. A partition with nothing to copy from (a
/// new cluster's first drives) is placed at once. `true` if the map changed.
async fn start_move(control: &Control, config: &CoordinatorConfig, mut map: ClusterMap, revision: i64, failed: &BTreeSet<String>) -> Result<bool, ClusterError> {
    let desired = map.computed_placement(failed);
    let same = |a: &[String], b: &[String]| a.len() == b.len() && a.iter().all(|d| b.contains(d));
    let mut moving = BTreeMap::new();
    let mut placed = false;
    for p in 0..map.partitions {
        let want = &desired[p as usize];
        let now = map.replicas_of(p);
        if same(now, want) || want.is_empty() {
            continue;
        }
        if now.iter().all(|d| !map.members.contains_key(d)) {
            map.placement[p as usize] = want.clone();
            placed = true;
        } else {
            moving.insert(p, want.clone());
        }
    }
    if moving.is_empty() && !placed {
        return Ok(false);
    }
    map.moving = moving;
    map.epoch += 1;
    let progress = (!map.moving.is_empty()).then(|| MoveProgress {
        epoch: map.epoch,
        total: map.moving.len() as u32,
        started_ms: now_ms(),
        updated_ms: now_ms(),
        rate_limit: config.migrate_rate,
        ..MoveProgress::default()
    });
    if !control.commit_move(revision, &map, progress.as_ref()).await? {
        return Ok(true);
    }
    config.metrics.map_changed();
    info!("epoch {}: {} partitions start moving", map.epoch, map.moving.len());
    tracing::debug!(moves = ?map.moving.iter().map(|(p, new)| (p, map.replicas_of(*p), new)).collect::<Vec<_>>(), "from and to");
    crash_point("move-started");
    migrate::connect_all(&map, &config.client).await;
    Ok(true)
}

/// Drives the move under way: rolls it back if a drive it copies to is gone, else copies the
/// partitions not yet done (recording each in etcd), then flips. Partitions that cannot be
/// copied for `replace_after` (no read quorum of their replicas answers) are left where they
/// are and the rest flipped, so that one partition cannot hold every other change back.
async fn run_move(control: &Control, config: &CoordinatorConfig, map: ClusterMap, revision: i64, stuck: &mut Option<(u64, Instant)>) -> Result<(), ClusterError> {
    let health = control.health().await?;
    let failed = failed(&map, &health, config.replace_after);
    let m = &map;
    let lost = m
        .moving
        .iter()
        .flat_map(|(p, new)| new.iter().filter(move |d| !m.replicas_of(*p).contains(d)))
        .find(|d| failed.contains(*d) || m.members.get(*d).is_none_or(|member| member.leaving))
        .cloned();
    if let Some(lost) = lost {
        // The old replicas have every acknowledged write (writes needed a quorum of them):
        // they stay; what was copied is swept.
        let mut back = map.clone();
        back.moving.clear();
        back.epoch += 1;
        if control.commit_move(revision, &back, None).await? {
            warn!("epoch {}: move rolled back ({lost}, a drive it copied to, is gone)", back.epoch);
            config.metrics.map_changed();
            migrate::connect_all(&back, &config.client).await;
        }
        return Ok(());
    }
    let mut progress = match control.progress().await? {
        Some(p) if p.epoch == map.epoch => p,
        _ => MoveProgress { epoch: map.epoch, total: map.moving.len() as u32, started_ms: now_ms(), rate_limit: config.migrate_rate, ..MoveProgress::default() },
    };
    let settler = (control.clone(), StoreConfig { client: config.client.clone(), seed: config.store_seed, ..StoreConfig::default() });
    let movers = migrate::Movers::new(migrate::connect_all(&map, &config.client).await, config.migrate_rate, settler);
    let mut pending = 0;
    let mut first_error = None;
    let done_before = progress.done.len();
    let todo: Vec<u32> = map.moving.keys().copied().filter(|p| !progress.done.contains(p)).collect();
    let (map_ref, movers_ref) = (&map, &movers);
    let mut copies = futures_util::stream::iter(todo)
        .map(|p| async move { (p, migrate::copy_partition(map_ref, p, movers_ref).await) })
        .buffer_unordered(migrate::PARALLEL_COPIES);
    while let Some((p, copied)) = copies.next().await {
        match copied {
            Ok(c) => {
                progress.done.insert(p);
                progress.bytes += c.bytes;
                progress.entries += c.entries;
                progress.repaired += c.repaired;
                progress.updated_ms = now_ms();
                control.save_progress(&progress).await?;
                config.metrics.moved(c.bytes, c.entries + c.repaired);
                crash_point("partition-copied");
            }
            Err(e) => {
                first_error.get_or_insert(e);
                pending += 1;
            }
        }
    }
    let copied_now = progress.done.len() > done_before;
    // Batches abandoned during the move settled on every member first (a note made after
    // this read fails the flip's transaction); a partition whose are not does not flip yet.
    let (noted, noted_guard) = control.noted_abandoned(map.epoch).await?;
    for (p, e) in migrate::settle_noted(&movers, &noted).await? {
        pending += usize::from(progress.done.remove(&p));
        first_error.get_or_insert(e);
    }
    if let Some(e) = first_error {
        if copied_now || stuck.is_none_or(|(epoch, _)| epoch != map.epoch) {
            *stuck = Some((map.epoch, Instant::now()));
        }
        let stuck_for = stuck.map_or(Duration::ZERO, |(_, since)| since.elapsed());
        if stuck_for < config.replace_after {
            warn!("epoch {}: {pending} partitions not copied yet ({e}); trying again", map.epoch);
            return Ok(());
        }
        warn!("epoch {}: {pending} partitions could not be copied for {stuck_for:?} ({e}); they stay where they are, the rest flips", map.epoch);
    }
    *stuck = None;
    crash_point("copied");
    let mut next = map.clone();
    for (p, new) in std::mem::take(&mut next.moving) {
        if progress.done.contains(&p) {
            next.placement[p as usize] = new;
        }
    }
    next.epoch += 1;
    progress.updated_ms = now_ms();
    if control.commit_flip(revision, &next, &progress, noted_guard).await? {
        config.metrics.map_changed();
        let took = now_ms().saturating_sub(progress.started_ms) as f64 / 1000.0;
        info!("epoch {}: move done, {} partitions, {} bytes pushed, {} entries caught up, in {took:.1} s", next.epoch, progress.total, progress.bytes, progress.repaired);
        crash_point("flipped");
        migrate::connect_all(&next, &config.client).await;
    }
    Ok(())
}
