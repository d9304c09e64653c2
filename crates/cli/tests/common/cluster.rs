//! The cluster harness the cluster and migration tests share: etcd members, coordinators,
//! a control connection, membership helpers, and a recorded workload for the history checker.
#![allow(dead_code, reason = "each test binary uses a different part of it")]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command as Process, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use spindle_cluster::control::{HealthState, MemberChange};
use spindle_cluster::history::{Event, Op};
use spindle_cluster::{Condition, Control, Member, Store};

use crate::common::{dies_with_test, spindle_bin, TestDrive};

/// Clients doing compare-and-swaps beside the unconditional ones in the fault tests.
pub const CONDITIONAL_CLIENTS: usize = 2;

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A process killed when dropped (tests stop everything they start, failing or not).
pub struct Proc(pub Option<Child>);

impl Proc {
    pub fn kill(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Proc {
    /// Whether the process has ended (on its own: a crash point).
    pub fn exited(&mut self) -> bool {
        self.0.as_mut().is_none_or(|c| c.try_wait().ok().flatten().is_some())
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// etcd members on loopback, each with its own data directory under `dir`.
pub struct Etcd {
    pub members: Vec<Proc>,
    pub urls: Vec<String>,
}

impl Etcd {
    pub fn start(dir: &Path, n: usize) -> Etcd {
        let ports: Vec<(u16, u16)> = (0..n).map(|_| (free_port(), free_port())).collect();
        let initial: Vec<String> = ports.iter().enumerate().map(|(i, (_, p))| format!("e{i}=http://127.0.0.1:{p}")).collect();
        let mut members = Vec::new();
        let mut urls = Vec::new();
        for (i, (client, peer)) in ports.iter().enumerate() {
            let url = format!("http://127.0.0.1:{client}");
            let peer_url = format!("http://127.0.0.1:{peer}");
            let child = dies_with_test(&mut Process::new("etcd"))
                .args(["--name", &format!("e{i}"), "--data-dir"])
                .arg(dir.join(format!("etcd-{i}")))
                .args(["--listen-client-urls", &url, "--advertise-client-urls", &url])
                .args(["--listen-peer-urls", &peer_url, "--initial-advertise-peer-urls", &peer_url])
                .args(["--initial-cluster", &initial.join(","), "--initial-cluster-state", "new"])
                .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("etcd (Debian package etcd-server) must be installed");
            members.push(Proc(Some(child)));
            urls.push(url);
        }
        Etcd { members, urls }
    }

    pub fn endpoints(&self) -> String {
        self.urls.join(",")
    }
}

pub fn coordinator(etcd: &str, cluster: &str, name: &str) -> Proc {
    coordinator_with(etcd, cluster, name, &[])
}

pub fn coordinator_with(etcd: &str, cluster: &str, name: &str, args: &[&str]) -> Proc {
    coordinator_env(etcd, cluster, name, args, &[])
}

/// A coordinator with extra environment (`SPINDLE_COORDINATOR_CRASH_AT`).
pub fn coordinator_env(etcd: &str, cluster: &str, name: &str, args: &[&str], env: &[(&str, &str)]) -> Proc {
    let child = dies_with_test(&mut Process::new(spindle_bin()))
        .args(["cluster", "coordinator", "--etcd", etcd, "--cluster", cluster, "--name", name])
        .args(args)
        .args(["--probe-ms", "100", "--down-after-ms", "800", "--lease-secs", "1"])
        .env("SPINDLE_LOG", "warn")
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    Proc(Some(child))
}

/// One partition on three replicas (write quorum 2): etcd, the drives, and a coordinator that
/// never scrubs, for tests that build the partition's state replica by replica (a scrub would
/// repair it under them). Dropped, everything stops.
pub struct ThreeReplicas {
    pub drives: Vec<TestDrive>,
    cluster: &'static str,
    _coordinator: Proc,
    etcd: Etcd,
    _dir: tempfile::TempDir,
}

impl ThreeReplicas {
    pub fn start(cluster: &'static str) -> ThreeReplicas {
        ThreeReplicas::start_with(cluster, &[])
    }

    /// With `flags` for every drive.
    pub fn start_with(cluster: &'static str, flags: &[&str]) -> ThreeReplicas {
        let dir = tempfile::tempdir().unwrap();
        let etcd = Etcd::start(dir.path(), 1);
        let drives = (0..3).map(|_| TestDrive::start(flags)).collect();
        let coordinator = coordinator_with(&etcd.endpoints(), cluster, "c1", &["--sweep-interval-ms", "600000"]);
        ThreeReplicas { drives, cluster, _coordinator: coordinator, etcd, _dir: dir }
    }

    /// The cluster made and its drives added: a client of it, and a Kinetic client of each
    /// replica in the partition's order, at the map's epoch (the cluster's identity).
    pub async fn store(&self) -> (Store, [spindle_client::Client; 3]) {
        let control = control(&self.etcd.endpoints(), self.cluster).await;
        control.init(&spindle_cluster::ClusterMap::new(1, 3, 2).unwrap()).await.unwrap();
        add_drives(&control, &self.drives.iter().collect::<Vec<_>>()).await;
        let store = Store::open(control, spindle_cluster::StoreConfig::default()).await.unwrap();
        let map = store.map();
        let mut clients = Vec::new();
        for id in map.replicas_of(0) {
            let config = spindle_client::ClientConfig { cluster_version: map.epoch as i64, ..Default::default() };
            clients.push(spindle_client::Client::connect(map.members[id].addr.as_str(), config).await.unwrap());
        }
        (store, clients.try_into().unwrap_or_else(|_| panic!("one partition on three replicas")))
    }
}

pub async fn control(etcd: &str, cluster: &str) -> Control {
    let mut last = String::new();
    for _ in 0..100 {
        match Control::connect(etcd, cluster).await {
            Ok(c) => match c.coordinators().await {
                Ok(_) => return c,
                Err(e) => last = e.to_string(),
            },
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("etcd did not come up: {last}");
}

pub async fn until<T>(what: &str, limit: Duration, mut probe: impl AsyncFnMut() -> Option<T>) -> T {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Some(v) = probe().await {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{what}: not within {limit:?}");
}

/// Adds drives through the coordinator and waits until all are members and up.
pub async fn add_drives(control: &Control, drives: &[&TestDrive]) {
    add_addresses(control, &drives.iter().map(|d| d.addr.clone()).collect::<Vec<_>>()).await;
}

/// How long drives added at once may take to become members and up: seconds when the machine
/// is idle, far more when other suites load both cores (an etcd that answers late holds the
/// coordinator's every step); only a defect takes this long.
const ADDED_WITHIN: Duration = Duration::from_secs(180);

/// Adds the drives at `addrs` as d0, d1, … and waits until all are members and up.
pub async fn add_addresses(control: &Control, drives: &[String]) {
    for (i, addr) in drives.iter().enumerate() {
        let member = Member { id: format!("d{i}"), addr: addr.clone(), tls_port: None, capacity: 0, weight: 1.0, domain: None, leaving: false, pool: None };
        control.request_change(&MemberChange::Add(member)).await.unwrap();
    }
    let n = drives.len();
    until("drives added and up", ADDED_WITHIN, async || {
        let (map, _) = control.load_map().await.ok()?;
        let health = control.health().await.ok()?;
        (map.members.len() == n && health.values().filter(|h| h.state == HealthState::Up).count() == n).then_some(())
    })
    .await;
    settled(control).await;
}

/// Waits until no move is under way and every partition has its replicas (as many as there
/// are members, up to R), each on a member that is not leaving.
pub async fn settled(control: &Control) -> spindle_cluster::ClusterMap {
    until("the placement to settle", Duration::from_secs(60), async || {
        let (map, _) = control.load_map().await.ok()?;
        let placeable = map.members.values().filter(|m| !m.leaving).count().min(usize::from(map.replicas));
        let full = map.placement.iter().all(|r| r.len() == placeable && r.iter().all(|d| map.members.get(d).is_some_and(|m| !m.leaving)));
        (map.moving.is_empty() && full).then_some(map)
    })
    .await
}

/// A workload recording a history: `clients` tasks doing puts (unique values), deletes and
/// reads on `keys` keys while `running` holds.
pub struct Recorder {
    pub start: Instant,
    pub events: Mutex<Vec<Event>>,
    pub acknowledged: std::sync::atomic::AtomicU64,
    /// Operations that returned an error to the client, and the last such error.
    pub errors: std::sync::atomic::AtomicU64,
    /// Writes whose outcome a race left unknown (`ClusterError::Contended`).
    pub contended: std::sync::atomic::AtomicU64,
    pub last_error: Mutex<Option<String>>,
}

impl Recorder {
    pub fn new() -> Arc<Recorder> {
        Arc::new(Recorder {
            start: Instant::now(),
            events: Mutex::new(Vec::new()),
            acknowledged: Default::default(),
            errors: Default::default(),
            contended: Default::default(),
            last_error: Mutex::new(None),
        })
    }

    /// An error seen by a client. A write that raced another and may or may not have taken
    /// effect is recorded as unknown but is not an error of availability.
    fn failed(&self, e: &spindle_cluster::ClusterError) {
        if matches!(e, spindle_cluster::ClusterError::Contended { .. }) {
            self.contended.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return;
        }
        self.errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        *self.last_error.lock() = Some(e.to_string());
    }

    pub fn errors(&self) -> (u64, Option<String>) {
        (self.errors.load(std::sync::atomic::Ordering::Relaxed), self.last_error.lock().clone())
    }

    /// The history checked for linearizability; a violation is written to a file named
    /// after `name` and fails the test.
    pub fn check(&self, name: &str) {
        let events = self.events.lock().clone();
        if let Err(v) = spindle_cluster::history::check(&events) {
            let path = std::env::temp_dir().join(format!("spindle-cluster-violation-{name}.txt"));
            std::fs::write(&path, v.to_string()).unwrap();
            panic!("not linearizable: key {} ({} operations, all in {})", v.key, v.events.len(), path.display());
        }
        assert!(events.iter().any(|e| matches!(e.op, Op::Read(Some(_)))), "the history read nothing back");
    }

    pub fn now(&self) -> u64 {
        self.start.elapsed().as_micros() as u64
    }
}

pub async fn client_loop(store: Store, rec: Arc<Recorder>, id: u64, keys: u64, stop: Arc<std::sync::atomic::AtomicBool>) {
    named_client_loop(store, rec, id, keys, stop, |k| format!("key-{k}")).await
}

/// `client_loop` over the keys `name` gives the numbers 0..`keys`.
pub async fn named_client_loop(store: Store, rec: Arc<Recorder>, id: u64, keys: u64, stop: Arc<std::sync::atomic::AtomicBool>, name: fn(u64) -> String) {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::from_os_rng();
    let mut n = 0u64;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let key = rng.random_range(0..keys);
        let k = name(key);
        let call = rec.now();
        let roll = rng.random_range(0..10);
        let event = if roll < 4 {
            n += 1;
            let v = (id << 32) | n;
            let r = store.put(k.as_bytes(), Bytes::from(v.to_be_bytes().to_vec()), Condition::None).await;
            if let Err(e) = &r {
                rec.failed(e);
            }
            let ret = r.is_ok().then(|| rec.now());
            Event { key, op: Op::Write(Some(v)), call, ret }
        } else if roll < 5 {
            // A delete that found nothing wrote nothing: it read "absent".
            match store.delete(k.as_bytes(), Condition::None).await {
                Ok(true) => Event { key, op: Op::Write(None), call, ret: Some(rec.now()) },
                Ok(false) => Event { key, op: Op::Read(None), call, ret: Some(rec.now()) },
                Err(e) => {
                    rec.failed(&e);
                    Event { key, op: Op::Write(None), call, ret: None }
                }
            }
        } else {
            match store.get(k.as_bytes()).await {
                Ok(v) => {
                    let value = v.map(|v| u64::from_be_bytes(v.value[..].try_into().expect("8-byte values")));
                    Event { key, op: Op::Read(value), call, ret: Some(rec.now()) }
                }
                Err(e) => {
                    rec.failed(&e);
                    continue;
                }
            }
        };
        if event.ret.is_some() {
            rec.acknowledged.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        rec.events.lock().push(event);
    }
}

/// A client doing only compare-and-swaps: each reads a key, then puts a new value or deletes
/// it on the version it read ("if absent" when it read nothing). Recorded as what the
/// register held: a refusal says it held something else at the moment, an error that the
/// write may or may not have happened.
pub async fn conditional_loop(store: Store, rec: Arc<Recorder>, id: u64, keys: u64, stop: Arc<std::sync::atomic::AtomicBool>) {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::from_os_rng();
    let mut n = 0u64;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let key = rng.random_range(0..keys);
        let k = format!("key-{key}");
        let call = rec.now();
        let read = match store.get(k.as_bytes()).await {
            Ok(v) => v,
            Err(e) => {
                rec.failed(&e);
                continue;
            }
        };
        let expect = read.as_ref().map(|v| u64::from_be_bytes(v.value[..].try_into().expect("8-byte values")));
        rec.events.lock().push(Event { key, op: Op::Read(expect), call, ret: Some(rec.now()) });
        rec.acknowledged.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let condition = read.map_or(Condition::Absent, |v| Condition::Version(v.version));
        let call = rec.now();
        let (new, result) = if expect.is_some() && rng.random_range(0..4) == 0 {
            (None, store.delete(k.as_bytes(), condition).await.map(drop))
        } else {
            n += 1;
            let v = (id << 32) | n;
            (Some(v), store.put(k.as_bytes(), Bytes::from(v.to_be_bytes().to_vec()), condition).await.map(drop))
        };
        let event = match result {
            Ok(()) => Event { key, op: Op::Cas { expect, new }, call, ret: Some(rec.now()) },
            Err(spindle_cluster::ClusterError::VersionMismatch { .. }) => Event { key, op: Op::Refused { expect }, call, ret: Some(rec.now()) },
            Err(e) => {
                rec.failed(&e);
                Event { key, op: Op::Cas { expect, new }, call, ret: None }
            }
        };
        if event.ret.is_some() {
            rec.acknowledged.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        rec.events.lock().push(event);
    }
}

/// Every key's newest tag is on every replica the map names for it.
pub async fn replicas_agree(store: &Store, drives: &BTreeMap<String, String>, keys: u64) -> Result<(), String> {
    store.refresh().await.map_err(|e| e.to_string())?;
    let map = store.map();
    for key in 0..keys {
        let k = format!("key-{key}");
        let p = map.partition_of(k.as_bytes());
        let dk = spindle_cluster::map::drive_key(p, k.as_bytes());
        let mut tags = Vec::new();
        for d in map.replicas_of(p) {
            let config = spindle_client::ClientConfig { cluster_version: map.epoch as i64, ..Default::default() };
            let c = spindle_client::Client::connect(drives[d].as_str(), config).await.map_err(|e| e.to_string())?;
            let stamp = c.get_metadata(&dk).await.map_err(|e| e.to_string())?.and_then(|m| spindle_cluster::stamp::Stamp::decode(&m.version));
            tags.push((d.clone(), stamp.map(|s| (s.identity, s.ballot))));
        }
        if tags.windows(2).any(|w| w[0].1 != w[1].1) {
            return Err(format!("{k}: replicas differ: {tags:?}"));
        }
    }
    Ok(())
}


/// A recorded workload running in the background: one task per client store.
pub struct Workload {
    stop: Arc<std::sync::atomic::AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Workload {
    pub fn start(clients: &[Store], rec: &Arc<Recorder>, keys: u64) -> Workload {
        Workload::mixed(clients, 0, rec, keys)
    }

    /// The last `conditional` of `clients` do compare-and-swaps (`conditional_loop`), the
    /// others unconditional puts, deletes and reads.
    pub fn mixed(clients: &[Store], conditional: usize, rec: &Arc<Recorder>, keys: u64) -> Workload {
        Workload::mixed_from(clients, conditional, rec, keys, 0)
    }

    /// As `mixed`, the clients numbered from `first + 1` (several workloads on one recorder
    /// need distinct client numbers: they make the values unique).
    pub fn mixed_from(clients: &[Store], conditional: usize, rec: &Arc<Recorder>, keys: u64, first: u64) -> Workload {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let plain = clients.len().saturating_sub(conditional);
        let tasks = clients
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let (c, rec, id, stop) = (c.clone(), rec.clone(), first + i as u64 + 1, stop.clone());
                if i < plain { tokio::spawn(client_loop(c, rec, id, keys, stop)) } else { tokio::spawn(conditional_loop(c, rec, id, keys, stop)) }
            })
            .collect();
        Workload { stop, tasks }
    }

    pub async fn stop(self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.tasks {
            t.await.unwrap();
        }
    }
}
