//! The deterministic simulator: a whole cluster in one process and one thread, driven by a
//! seed.
//!
//! Drives (the real drive code over a simulated disk), two coordinators (the real coordinator:
//! probes, member changes, moves with the drives' own pushes, repair, the sweeper) and the
//! clients (the real cluster client) run as turmoil hosts over a simulated network and clock;
//! the control plane is a model of etcd (`etcd`). Faults are drawn from the seed between the
//! simulation's steps (`faults`). Every run's history is checked for per-key linearizability
//! once the cluster has settled, and the run then answers: every replica agrees, and a read of
//! every key meets the last acknowledged write. The same seed replays the same run.

#![deny(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::SeedableRng;
use spindle_client::ClientConfig;
use spindle_cluster::control::{Control, HealthState, MemberChange};
use spindle_cluster::coordinator::CoordinatorConfig;
use spindle_cluster::history::{self, Event, Op, Violation};
use spindle_cluster::map::ClusterMap;
use spindle_cluster::store::{Stalls, Store, StoreConfig};

mod cases;
mod checks;
mod completions;
pub mod disk;
pub mod etcd;
mod faults;
mod invariants;
mod minority;
mod queued;
pub mod net;
mod s3;
mod workload;

pub use minority::{a_part_swap_left_on_one_replica, a_swap_left_on_one_replica};
pub use completions::{a_completion_give_back_refused, a_completion_mark_left_on_one_replica, a_versioned_completion_failed_after_its_swap, retried_completions_of_one_upload, retried_completions_of_one_versioned_upload};
pub use queued::writers_queued_past_the_grace;
pub use cases::{a_completion_failed_after_its_swap, a_completion_meets_its_parts_data_taken, a_connection_that_lost_a_message, an_orphaned_chunk, racing_conditional_writers_of_one_object, racing_writers_of_one_object, racing_writers_of_one_versioned_object};
use faults::{Cast, Faults};
use workload::History;

/// The cluster's name in the model of etcd.
const CLUSTER: &str = "sim";
/// Partitions, replicas and write quorum of the simulated cluster.
const PARTITIONS: u32 = 16;
const REPLICAS: u8 = 3;
const WRITE_QUORUM: u8 = 2;
/// How long a drive is silent before a coordinator marks it down.
const DOWN_AFTER: Duration = Duration::from_millis(800);
/// How long the cluster must look settled before the checks start: longer than a silent
/// drive takes to be marked down, so that a view from before the faults were healed (a drive
/// that hung or crashed a moment before, still shown up) is not taken for the settled one.
const SETTLED_FOR: Duration = Duration::from_secs(2);
/// Longest the cluster may take, in simulated time, to settle once every fault is healed:
/// only a liveness defect exceeds it.
const SETTLE_WITHIN: Duration = Duration::from_secs(300);
/// Connections a simulated socket queues (turmoil panics past it; a kernel drops them).
const TCP_BACKLOG: usize = 1 << 14;
/// With `lossy`: the chance per link and millisecond that it fails, and that a failed one is
/// repaired.
const LINK_FAIL_RATE: f64 = 0.000_5;
const LINK_REPAIR_RATE: f64 = 0.2;
/// The simulated wall clock's start, in seconds after 1970 (2027-01-15).
const SIM_EPOCH_SECS: u64 = 1_800_000_000;
/// With `moves`: the bandwidth a move's pushes may take, bytes per second. The simulated
/// values are small, so a move copies a partition of a few hundred bytes in a second or more:
/// partitions copied early wait for the flip, while writes decided before the move may still
/// land on their old replicas only (the window the epoch a request carries guards).
const MOVE_RATE: u64 = 256;
/// The longest pause of a stalled operation (`Options::stalls`, `Options::stale_views`).
const STALL_MAX: Duration = Duration::from_millis(1500);
/// How long a run may last in simulated time before it is called stuck.
const LONGEST_RUN: Duration = Duration::from_secs(3_600);

#[derive(Debug, Clone)]
pub struct Options {
    pub seed: u64,
    /// Drives that are members from the start, and spares that may join during the run.
    pub drives: usize,
    pub spares: usize,
    /// Members a leave never goes below (at least R, three).
    pub min_members: usize,
    /// Whether a drive that left may join again once the map no longer names it.
    pub rejoin: bool,
    /// Links also fail at random on their own, for a few milliseconds at a time (turmoil's
    /// message loss): many more requests lost between one client and one drive.
    pub lossy: bool,
    /// A client's links to the drives become slow for a while (up to hundreds of
    /// milliseconds a message): operations straddle map changes.
    pub slow_links: bool,
    /// Members change far more often, beside the other faults (`faults::MOVE_GAP_MS`), and
    /// moves are paced (`MOVE_RATE`): one long move after another, operations straddling each.
    pub moves: bool,
    /// One write decided in four waits up to `STALL_MAX` before its requests go out
    /// (`Stalls::decided`): operations decided under one map send under the next.
    pub stalls: bool,
    /// One operation in four waits up to `STALL_MAX` between choosing its map and its first
    /// request (`Stalls::viewed`): it may send under a map its client loaded meanwhile.
    pub stale_views: bool,
    pub coordinators: usize,
    pub clients: usize,
    /// S3 gateways (the gateway's operations over cluster clients, clocks skewed), and the
    /// objects they share.
    pub gateways: usize,
    pub objects: u64,
    /// Gateways crash and start again, at moments drawn from the seed (with `faults`).
    pub gateway_crashes: bool,
    /// Some of the gateways' PUTs are multipart uploads.
    pub multipart: bool,
    /// Operations each client runs at once over its one cluster client.
    pub concurrency: u64,
    pub keys: u64,
    /// Operations per client.
    pub ops: u64,
    pub faults: bool,
    /// Print the faults as they start and the simulated time as it passes.
    pub trace: bool,
    /// Where to write the run's history, one operation a line (`--history FILE`).
    pub history: Option<std::path::PathBuf>,
}

impl Options {
    /// More member changes: two spares, leaves down to three members, drives that left join
    /// again.
    pub fn churn(seed: u64) -> Options {
        Options { seed, spares: 2, min_members: 3, rejoin: true, ..Options::default() }
    }
}

impl Default for Options {
    fn default() -> Self {
        Options { seed: 0, drives: 5, spares: 1, min_members: 4, rejoin: false, lossy: false, slow_links: false, moves: false, stalls: false, stale_views: false, coordinators: 2, clients: 3, gateways: 0, objects: 4, gateway_crashes: false, multipart: false, concurrency: 2, keys: 8, ops: 120, faults: true, trace: false, history: None }
    }
}

/// What a run did.
#[derive(Debug, Clone)]
pub struct Report {
    pub seed: u64,
    pub events: usize,
    pub acknowledged: u64,
    pub failed: u64,
    pub faults: Vec<String>,
    pub simulated: Duration,
    /// Orphaned data the gateways' scans found (`--s3`): each is either a chunk write that
    /// landed after its data was collected or a leak, and worth a look when it is not rare.
    pub orphans: u64,
    /// A digest of the history: the same seed gives the same digest.
    pub digest: u64,
}

#[derive(Debug)]
pub enum Failure {
    /// The history has no linearization.
    NotLinearizable { violation: Violation, faults: Vec<String> },
    /// The run broke an invariant checked after it settled, or did not settle.
    Invariant(String),
    /// The simulation itself failed (a host's software returned an error).
    Simulation(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::NotLinearizable { violation, faults } => {
                write!(f, "not linearizable: {violation}")?;
                writeln!(f, "faults:")?;
                for line in faults {
                    writeln!(f, "  {line}")?;
                }
                Ok(())
            }
            Failure::Invariant(m) => write!(f, "invariant broken: {m}"),
            Failure::Simulation(m) => write!(f, "simulation failed: {m}"),
        }
    }
}

fn client_config() -> ClientConfig {
    ClientConfig { timeout: Duration::from_secs(1), dialer: Some(net::dialer()), ..ClientConfig::default() }
}

fn store_config(seed: u64, stalls: Stalls) -> StoreConfig {
    StoreConfig { client: client_config(), connect_timeout: Duration::from_secs(1), seed: Some(seed), stalls, ..StoreConfig::default() }
}

/// The pauses `options` asks of the clients' and gateways' cluster clients.
fn stalls_of(options: &Options) -> Stalls {
    Stalls { decided: options.stalls.then_some(STALL_MAX), viewed: options.stale_views.then_some(STALL_MAX) }
}

async fn open_store(etcd: &Arc<etcd::Etcd>, host: &str, seed: u64, stalls: Stalls) -> Store {
    loop {
        if let Ok(control) = Control::over(etcd.plane(host), CLUSTER) {
            if let Ok(store) = Store::open(control, store_config(seed, stalls)).await {
                return store;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The map once no move is under way, every partition has its replicas on members that are
/// not leaving, no member is leaving and every member is up; else what is not so yet.
async fn settled(control: &Control) -> Result<ClusterMap, String> {
    let (map, _) = control.load_map().await.map_err(|e| format!("the map did not load: {e}"))?;
    let health = control.health().await.map_err(|e| format!("the drives' health did not load: {e}"))?;
    let placeable = map.members.values().filter(|m| !m.leaving).count().min(usize::from(map.replicas));
    let full = map.placement.iter().all(|r| r.len() == placeable && r.iter().all(|d| map.members.get(d).is_some_and(|m| !m.leaving)));
    let down: Vec<&String> = map.members.keys().filter(|id| !health.get(*id).is_some_and(|h| h.state == HealthState::Up)).collect();
    let leaving: Vec<&String> = map.members.values().filter(|m| m.leaving).map(|m| &m.id).collect();
    let changes = control.pending_changes().await.map_err(|e| format!("the pending changes did not load: {e}"))?;
    let moving: Vec<&u32> = map.moving.keys().collect();
    if moving.is_empty() && full && down.is_empty() && leaving.is_empty() && changes.is_empty() {
        return Ok(map);
    }
    Err(format!(
        "epoch {}: partitions moving {moving:?}, every partition fully placed {full}, members not up {down:?}, leaving {leaving:?}, {} member changes pending",
        map.epoch,
        changes.len()
    ))
}

/// Runs one seed. Runs in one process take turns (`TURNS`), each starting tokio's task
/// numbers alike (`align_task_ids`): a seed runs the same after others, or beside them in
/// other threads, as alone.
pub fn run(options: &Options) -> Result<Report, Failure> {
    let _turn = TURNS.lock();
    align_task_ids();
    let seed = options.seed;
    spindle_cluster::clock::set_wall_clock(s3::wall_clock);
    s3::reset_skews();
    let dir = tempfile::tempdir().map_err(|e| Failure::Simulation(e.to_string()))?;
    let mut sim = turmoil::Builder::new()
        .rng_seed(seed)
        // A fixed wall clock (turmoil's default starts at the real time): the coordinator's
        // timestamps, and whatever is rounded from them, are the same in every replay.
        .epoch(std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(SIM_EPOCH_SECS))
        .simulation_duration(LONGEST_RUN)
        .tick_duration(Duration::from_millis(1))
        .min_message_latency(Duration::from_micros(100))
        .max_message_latency(faults::FAST)
        // Connections tried while a drive hangs reach it at once when it is released: a
        // backlog as deep as a server's, where turmoil's default would stop the run.
        .tcp_capacity(TCP_BACKLOG)
        .fail_rate(if options.lossy { LINK_FAIL_RATE } else { 0.0 })
        .repair_rate(LINK_REPAIR_RATE)
        .build();
    let etcd = etcd::Etcd::new(seed ^ 0xe7cd);
    let history = Arc::new(History::default());

    let drives = add_drives(&mut sim, dir.path(), options.drives + options.spares);
    let spares: Vec<String> = drives[options.drives..].iter().map(|(n, _)| n.clone()).collect();

    let coordinators: Vec<String> = (0..options.coordinators).map(|i| format!("k{i}")).collect();
    let migrate_rate = if options.moves { MOVE_RATE } else { 0 };
    for name in &coordinators {
        add_coordinator(&mut sim, &etcd, name, migrate_rate, seed);
    }

    // The first client sets the cluster up; the others wait for it.
    let ready = Arc::new(AtomicBool::new(false));
    let finished = Arc::new(AtomicUsize::new(0));
    let heal = Arc::new(AtomicBool::new(false));
    let clients: Vec<String> = (0..options.clients).map(|i| format!("c{i}")).collect();
    for (i, name) in clients.iter().enumerate() {
        let (etcd, history, ready, finished, name) = (etcd.clone(), history.clone(), ready.clone(), finished.clone(), name.clone());
        let members: Vec<String> = drives[..options.drives].iter().map(|(n, _)| n.clone()).collect();
        let (keys, ops, workers, stalls, client_seed) = (options.keys, options.ops, options.concurrency, stalls_of(options), seed.wrapping_mul(31).wrapping_add(i as u64));
        sim.client(clients[i].as_str(), async move {
            if i == 0 {
                set_up(&etcd, &name, &members).await?;
                ready.store(true, Ordering::Release);
            }
            while !ready.load(Ordering::Acquire) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let store = open_store(&etcd, &name, client_seed, stalls).await;
            workload::client(store, history, i as u64 + 1, keys, ops, workers, client_seed).await;
            finished.fetch_add(1, Ordering::Release);
            Ok(())
        });
    }

    let gateways: Vec<String> = (0..options.gateways).map(|i| format!("g{i}")).collect();
    let broken: Arc<parking_lot::Mutex<Option<String>>> = Arc::default();
    let crashed: Arc<parking_lot::Mutex<Vec<String>>> = Arc::default();
    for (i, name) in gateways.iter().enumerate() {
        let (etcd, history, ready, finished, broken, name) = (etcd.clone(), history.clone(), ready.clone(), finished.clone(), broken.clone(), name.clone());
        let crashed = crashed.clone();
        let (objects, ops, workers, crashes, multipart, stalls) = (options.objects, options.ops, options.concurrency, options.gateway_crashes && options.faults, options.multipart, stalls_of(options));
        let gateway_seed = seed.wrapping_mul(37).wrapping_add(0x6a7e + i as u64);
        let skew = s3::skew_of(seed, i);
        sim.client(gateways[i].as_str(), async move {
            while !ready.load(Ordering::Acquire) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            // Each life of the gateway a cluster client of its own, as a new process has.
            let open = |life: u64| {
                let (etcd, name) = (etcd.clone(), name.clone());
                async move { open_store(&etcd, &name, gateway_seed ^ life.wrapping_mul(0x517c_c1b7_2722_0a95), stalls).await }
            };
            // Writers 1.. are the key-value clients; the gateways' numbers follow theirs.
            let plan = s3::Plan { writer: 0x100 + i as u64, objects, ops, workers, seed: gateway_seed, skew_ms: skew, crashes, multipart };
            s3::gateway(open, history, plan, broken, crashed).await?;
            finished.fetch_add(1, Ordering::Release);
            Ok(())
        });
    }

    // The checker: once the workload is done and every fault healed, waits for the cluster to
    // settle and reads every key.
    let verdict: Arc<parking_lot::Mutex<Option<String>>> = Arc::default();
    {
        let (etcd, history, finished, heal, verdict) = (etcd.clone(), history.clone(), finished.clone(), heal.clone(), verdict.clone());
        let (clients, keys, objects) = (options.clients + options.gateways, options.keys, if options.gateways > 0 { options.objects } else { 0 });
        sim.client("checker", async move {
            while finished.load(Ordering::Acquire) < clients {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            heal.store(true, Ordering::Release);
            let control = Control::over(etcd.plane("checker"), CLUSTER)?;
            let started = etcd::now();
            let mut since = None;
            loop {
                let state = settled(&control).await;
                if state.is_ok() {
                    let since = *since.get_or_insert(etcd::now());
                    if etcd::now() - since >= SETTLED_FOR {
                        break;
                    }
                } else {
                    since = None;
                }
                if etcd::now() - started > SETTLE_WITHIN {
                    let why = state.err().unwrap_or_default();
                    *verdict.lock() = Some(format!("the cluster did not settle within {SETTLE_WITHIN:?} of the faults' end ({why})"));
                    return Ok(());
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            let store = open_store(&etcd, "checker", seed ^ 0xc4ec, Stalls::default()).await;
            let mut read = BTreeMap::new();
            for key in 0..keys {
                match checks::final_read(&store, &history, key).await {
                    Ok(version) => read.insert(workload::key_name(key), version),
                    Err(failed) => {
                        *verdict.lock() = Some(failed);
                        return Ok(());
                    }
                };
            }
            let reread = |name: String| {
                let (store, history) = (store.clone(), history.clone());
                async move {
                    let key = (0..keys).find(|k| workload::key_name(*k) == name).ok_or_else(|| format!("no key is named {name}"))?;
                    checks::final_read(&store, &history, key).await
                }
            };
            if let Err(broken) = checks::on_the_drives(&control, &mut read, reread).await {
                *verdict.lock() = Some(broken);
                return Ok(());
            }
            if objects > 0 {
                if let Err(broken) = s3::check_settled(store.clone(), &history, objects, seed ^ 0x5e77).await {
                    *verdict.lock() = Some(broken);
                }
            }
            Ok(())
        });
    }

    let cast = Cast {
        drives,
        spares,
        coordinators,
        clients: clients.into_iter().chain(gateways).collect(),
        etcd: etcd.clone(),
        cluster: CLUSTER.to_string(),
        min_members: options.min_members.max(usize::from(REPLICAS)),
        rejoin: options.rejoin,
        slow_links: options.slow_links,
        moves: options.moves,
    };
    let mut faults = Faults::new(StdRng::seed_from_u64(seed ^ 0xfa17), &cast);
    let mut healed = false;
    let mut shown = (0usize, Duration::ZERO);
    loop {
        let done = sim.step().map_err(|e| Failure::Simulation(e.to_string()))?;
        if done {
            break;
        }
        if options.trace {
            for line in &faults.log[shown.0..] {
                eprintln!("[{seed}] {line}");
            }
            shown.0 = faults.log.len();
            if sim.elapsed() >= shown.1 + Duration::from_secs(5) {
                shown.1 = sim.elapsed();
                let done = finished.load(Ordering::Relaxed);
                eprintln!("[{seed}] {:.0} s simulated, {} events, {done} clients done", shown.1.as_secs_f64(), history.events.lock().len());
            }
        }
        if heal.load(Ordering::Acquire) {
            if !healed {
                faults.heal_all(&mut sim, &cast);
                // Links stop failing at random too (those failed now are repaired as before):
                // the checks run on a cluster with no fault left.
                sim.set_fail_rate(0.0);
                healed = true;
            }
        } else if options.faults && ready.load(Ordering::Acquire) {
            faults.step(&mut sim, &cast);
        }
    }
    // The gateways' crashes with the rest of the faults.
    faults.log.extend(crashed.lock().drain(..));
    // Written before the checks: a run that breaks an invariant is the one to read it for.
    let events = history.events.lock().clone();
    if let Some(path) = &options.history {
        let lines: String = events.iter().map(|e| format!("{e:?}\n")).collect();
        std::fs::write(path, lines).map_err(|e| Failure::Simulation(format!("writing {}: {e}", path.display())))?;
    }
    if let Some(m) = broken.lock().take() {
        return Err(Failure::Invariant(m));
    }
    if let Some(m) = verdict.lock().take() {
        return Err(Failure::Invariant(m));
    }
    let batches = history.batches.lock().clone();
    if let Err(violation) = history::check_with_batches(&events, &batches) {
        return Err(Failure::NotLinearizable { violation, faults: faults.log });
    }
    if !events.iter().any(|e| matches!(e.op, Op::Read(Some(_)))) {
        return Err(Failure::Invariant("the history read nothing back".into()));
    }
    Ok(Report {
        seed,
        events: events.len(),
        acknowledged: history.acknowledged.load(Ordering::Relaxed),
        failed: history.failed.load(Ordering::Relaxed),
        faults: faults.log,
        simulated: sim.elapsed(),
        orphans: s3::orphans_found(),
        digest: digest(&events),
    })
}

/// One simulation at a time in a process: tokio numbers tasks from one counter for the whole
/// process, and runs beside each other would take numbers from it in whatever order their
/// threads run.
static TURNS: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

/// Takes tokio's task numbers up to one below a multiple of four. A runtime keeps its tasks in
/// four lists by number, and a crashed host's runtime drops its tasks list by list: that order
/// is the order its connections close, and each close draws its latency from the seed. So a
/// run's tasks must fall into the same lists whatever ran before it in the process.
fn align_task_ids() {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread().build() else { return };
    runtime.block_on(async {
        loop {
            let task = tokio::spawn(async {});
            // tokio 1.54: a task id is displayed as its number.
            let Ok(number) = task.id().to_string().parse::<u64>() else {
                eprintln!("tokio's task ids are no longer numbers: runs are not aligned");
                return;
            };
            let _ = task.await;
            if number % 4 == 3 {
                break;
            }
        }
    });
}

/// Drive hosts `d0..`, each the real drive over a simulated disk with its settings under `dir`.
fn add_drives(sim: &mut turmoil::Sim<'_>, dir: &std::path::Path, count: usize) -> Vec<(String, Arc<disk::Disk>)> {
    let mut drives = Vec::new();
    for i in 0..count {
        let name = format!("d{i}");
        let disk = disk::Disk::new();
        let settings = dir.join(&name);
        let d = disk.clone();
        sim.host(name.as_str(), move || net::drive(d.clone(), settings.clone()));
        drives.push((name, disk));
    }
    drives
}

/// A coordinator host running the real coordinator over the model of etcd.
fn add_coordinator(sim: &mut turmoil::Sim<'_>, etcd: &Arc<etcd::Etcd>, name: &str, migrate_rate: u64, seed: u64) {
    let (etcd, host) = (etcd.clone(), name.to_owned());
    let coordinator_seed = seed ^ (0xc0 + name.len() as u64) ^ name.bytes().map(u64::from).sum::<u64>() << 8;
    sim.host(name, move || {
        let name = &host;
        let (etcd, name) = (etcd.clone(), name.clone());
        async move {
            let control = Control::over(etcd.plane(&name), CLUSTER)?;
            let config = CoordinatorConfig {
                name: name.clone(),
                probe_interval: Duration::from_millis(100),
                down_after: DOWN_AFTER,
                lease_ttl: Duration::from_secs(2),
                replace_after: Duration::from_secs(20),
                migrate_rate,
                sweep_grace: Duration::from_secs(2),
                sweep_interval: Duration::from_secs(1),
                client: client_config(),
                metrics: Arc::default(),
                store_seed: Some(coordinator_seed),
            };
            spindle_cluster::coordinator::run(control, config, std::future::pending()).await?;
            Ok(())
        }
    });
}

/// Creates the cluster and adds the first drives, waiting until they are members and up.
async fn set_up(etcd: &Arc<etcd::Etcd>, host: &str, members: &[String]) -> turmoil::Result {
    let control = Control::over(etcd.plane(host), CLUSTER)?;
    let map = ClusterMap::new(PARTITIONS, REPLICAS, WRITE_QUORUM)?;
    control.init(&map).await?;
    for id in members {
        control.request_change(&MemberChange::Add(faults::member(id))).await?;
    }
    loop {
        if let Ok(map) = settled(&control).await {
            if map.members.len() == members.len() {
                return Ok(());
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn digest(events: &[Event]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    for e in events {
        format!("{e:?}").hash(&mut h);
    }
    h.finish()
}
