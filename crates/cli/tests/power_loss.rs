//! Durability under power loss: the drive runs on the project's power-cut file system
//! (crates/powercut), which holds every write and every directory-entry change not yet synced
//! and discards them at a cut. Each cycle starts the drive on the same data, checks every
//! promise made before the last cut, loads it, kills it with SIGKILL at a random moment, and
//! cuts the power: unsynced data dropped (`drop`), the in-order write-back torn at a sector
//! (`torn`), or a random subset of it kept (`reorder`), in turn.
//!
//! Promises: an acknowledged WRITETHROUGH put or delete, and every WRITEBACK write
//! acknowledged before an acknowledged FLUSHALLDATA, is there (or a later write of the same
//! key is); no delete is undone; no value that was never written appears; what a client read
//! after a restart stays; SETUP (cluster version) and SECURITY (ACL, erase PIN) changes
//! acknowledged are kept; the drive's identity never changes. A control case, WRITEBACK
//! without a flush, must lose data, or the cut is not biting.
//!
//! Needs root and /dev/fuse (CI runs as root). `POWER_LOSS_CYCLES=N` sets the cycles per
//! case (default 3); the long run in docs/design/storage.md used 60 per case.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use common::TestDrive;
use rand::{Rng, SeedableRng};
use spindle_client::{AclEntry, AclScope, Client, ClientConfig, DeleteOptions, PutOptions, Synchronization};
use spindle_powercut::{CutMode, MountOptions, PowerCutFs};

const MODES: [CutMode; 3] = [CutMode::Drop, CutMode::Torn, CutMode::Reorder];

fn cycles() -> usize {
    std::env::var("POWER_LOSS_CYCLES").ok().and_then(|v| v.parse().ok()).unwrap_or(3)
}

/// The power-cut file system on a fresh mount point, or `None` (with a note) where it cannot
/// be mounted; under CI, or the test command (SPINDLE_REQUIRE_FUSE), that is a failure.
fn mount(dir: &Path) -> Option<PowerCutFs> {
    let mnt = dir.join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    match PowerCutFs::mount(&mnt, MountOptions::default()) {
        Ok(fs) => Some(fs),
        Err(e) if std::env::var_os("CI").is_none() && std::env::var_os("SPINDLE_REQUIRE_FUSE").is_none() => {
            eprintln!("skipped: needs root and /dev/fuse to mount the power-cut file system ({e})");
            None
        }
        Err(e) => panic!("cannot mount the power-cut file system under CI: {e}"),
    }
}

/// One value of a key's history: absent, or a put with its version and length.
#[derive(Clone, Debug, PartialEq, Eq)]
enum State {
    Absent,
    Put { version: String, len: usize },
}

fn value_for(key: &str, version: &str, len: usize) -> Bytes {
    let seed = key.bytes().chain(version.bytes()).fold(7u8, |a, b| a.wrapping_mul(31).wrapping_add(b));
    Bytes::from((0..len).map(|i| seed.wrapping_add((i / 7) as u8)).collect::<Vec<_>>())
}

/// Every write sent to a key since the last check, and how many of them are promised.
#[derive(Debug)]
struct KeyLog {
    /// `history[0]` is the state found at the last check; writes follow in the order sent.
    history: Vec<State>,
    /// The state after a restart must be `history[j]` for some `j >= required`.
    required: usize,
    /// The last write the drive acknowledged (promised or not).
    acked: usize,
}

#[derive(Default)]
struct Ledger {
    keys: HashMap<String, KeyLog>,
    /// Keys found, after a cut, older than their last acknowledged write (allowed where that
    /// write was not promised): the control case's evidence that the cut bites.
    acknowledged_lost: usize,
    /// Writes acknowledged, over all cycles.
    acks: usize,
}

type Shared = Arc<Mutex<Ledger>>;

impl Ledger {
    fn current(&self, key: &str) -> State {
        self.keys.get(key).and_then(|k| k.history.last().cloned()).unwrap_or(State::Absent)
    }

    /// Records a write about to be sent; returns its index in the key's history.
    fn sent(&mut self, key: &str, state: State) -> usize {
        let log = self.keys.entry(key.to_string()).or_insert_with(|| KeyLog { history: vec![State::Absent], required: 0, acked: 0 });
        log.history.push(state);
        log.history.len() - 1
    }

    fn acknowledged(&mut self, key: &str, index: usize) {
        let log = self.keys.get_mut(key).expect("sent before acknowledged");
        log.acked = log.acked.max(index);
        self.acks += 1;
    }

    fn promised(&mut self, key: &str, index: usize) {
        let log = self.keys.get_mut(key).expect("sent before promised");
        log.required = log.required.max(index);
    }
}

/// Reads every key and checks it against its history; the state found becomes the new base.
async fn check(c: &Client, ledger: &Shared, cycle: usize) {
    let keys: Vec<String> = ledger.lock().unwrap().keys.keys().cloned().collect();
    for key in keys {
        let found = match c.get(key.as_bytes()).await.unwrap_or_else(|e| panic!("cycle {cycle}: get {key}: {e}")) {
            None => State::Absent,
            Some(e) => {
                let version = String::from_utf8(e.metadata.version.to_vec()).expect("a version the test wrote");
                assert_eq!(e.value, value_for(&key, &version, e.value.len()), "cycle {cycle}: {key} {version}: a value never written");
                State::Put { version, len: e.value.len() }
            }
        };
        let mut l = ledger.lock().unwrap();
        let log = l.keys.get_mut(&key).unwrap();
        let at = log.history.iter().rposition(|s| *s == found);
        match at {
            Some(j) if j >= log.required => {}
            _ => panic!(
                "cycle {cycle}: {key} is {found:?} after the cut, but the drive promised write {} of {:?}",
                log.required, log.history
            ),
        }
        let lost = at.unwrap_or(0) < log.acked;
        *log = KeyLog { history: vec![found], required: 0, acked: 0 };
        if lost {
            l.acknowledged_lost += 1;
        }
    }
}

/// Runs `workers` for a random while, kills the drive, and cuts the power.
async fn load_then_cut<F, Fut>(drive: &mut TestDrive, fs: &mut PowerCutFs, cycle: usize, seed: u64, start_workers: F)
where
    F: FnOnce(usize) -> Vec<Fut>,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let tasks: Vec<_> = start_workers(cycle).into_iter().map(tokio::spawn).collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    tokio::time::sleep(Duration::from_millis(rng.random_range(300..900))).await;
    drive.kill();
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(30), t).await.expect("a worker hung after the kill").unwrap();
    }
    let mode = MODES[cycle % MODES.len()];
    let report = fs.cut(mode, seed).expect("power cut");
    eprintln!("cycle {cycle}: {report}");
}

/// A worker's writes: puts (compare-and-swap on the version it last wrote) and deletes, with
/// `sync`; with WRITEBACK, a FLUSHALLDATA every few writes promises those before it.
async fn writer(c: Client, ledger: Shared, keys: Vec<String>, sync: Synchronization, flush_every: Option<usize>, sizes: (usize, usize), seed: u64) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut unflushed: Vec<(String, usize)> = Vec::new();
    for i in 0.. {
        let key = &keys[rng.random_range(0..keys.len())];
        let current = ledger.lock().unwrap().current(key);
        let db_version = match &current {
            State::Put { version, .. } => Bytes::from(version.clone()),
            State::Absent => Bytes::new(),
        };
        let delete = matches!(current, State::Put { .. }) && rng.random_range(0..5) == 0;
        let (state, result) = if delete {
            let index = ledger.lock().unwrap().sent(key, State::Absent);
            let r = c.delete(key.as_bytes(), DeleteOptions { db_version, force: false, sync }).await.map(|found| {
                assert!(found, "{key}: a delete of a key the test wrote found nothing");
            });
            (index, r)
        } else {
            let version = format!("s{seed}-{i}");
            let len = rng.random_range(sizes.0..=sizes.1);
            let index = ledger.lock().unwrap().sent(key, State::Put { version: version.clone(), len });
            let opts = PutOptions { new_version: Bytes::from(version.clone()), db_version, force: false, sync, ..PutOptions::default() };
            (index, c.put(key.as_bytes(), value_for(key, &version, len), opts).await)
        };
        match result {
            Ok(()) => ledger.lock().unwrap().acknowledged(key, state),
            Err(e) if e.status().is_some() => panic!("{key}: the drive refused a write the test expected to succeed: {e}"),
            Err(_) => return, // the drive was killed
        }
        match (sync, flush_every) {
            (Synchronization::Writethrough, _) => ledger.lock().unwrap().promised(key, state),
            (_, Some(every)) => {
                unflushed.push((key.clone(), state));
                if unflushed.len() >= every {
                    if c.flush_all_data().await.is_err() {
                        return;
                    }
                    let mut l = ledger.lock().unwrap();
                    for (k, j) in unflushed.drain(..) {
                        l.promised(&k, j);
                    }
                }
            }
            (_, None) => {}
        }
    }
}

fn keys(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i:04}")).collect()
}

/// One writer of a case: its synchronization, a FLUSHALLDATA every so many writes (if any),
/// the (least, most) value size, and how many keys it writes.
type WriterSpec = (Synchronization, Option<usize>, (usize, usize), usize);

/// The cycles of one case: start, check, load, kill, cut.
async fn run_case(name: &str, extra: &[&str], workers: &[WriterSpec]) -> Option<Ledger> {
    let dir = tempfile::tempdir().unwrap();
    let mut fs = mount(dir.path())?;
    let data: PathBuf = fs.mountpoint().join("data");
    let ledger: Shared = Arc::new(Mutex::new(Ledger::default()));
    let mut identity = None;
    for cycle in 0..cycles() {
        let mut drive = TestDrive::start_in(&data, extra);
        let c = drive.client().await;
        let now = identity_of(&drive, &c);
        assert!(*identity.get_or_insert_with(|| now.clone()) == now, "{name} cycle {cycle}: the drive's identity changed");
        check(&c, &ledger, cycle).await;
        let acks_before = ledger.lock().unwrap().acks;
        let seed = (name.len() * 1000 + cycle) as u64;
        let mut clients = Vec::new();
        for _ in workers {
            clients.push(drive.client().await);
        }
        let ledger2 = ledger.clone();
        let workers = workers.to_vec();
        load_then_cut(&mut drive, &mut fs, cycle, seed, move |cycle| {
            clients
                .into_iter()
                .zip(workers)
                .enumerate()
                .map(|(w, (c, (sync, flush, sizes, nkeys)))| {
                    writer(c, ledger2.clone(), keys(&format!("w{w}"), nkeys), sync, flush, sizes, (cycle * 100 + w) as u64)
                })
                .collect()
        })
        .await;
        assert!(ledger.lock().unwrap().acks > acks_before, "{name} cycle {cycle}: no write was acknowledged before the kill");
    }
    // The last cut's promises, checked on a last start.
    let drive = TestDrive::start_in(&data, extra);
    let c = drive.client().await;
    assert!(identity == Some(identity_of(&drive, &c)), "{name}: the drive's identity changed");
    check(&c, &ledger, cycles()).await;
    let l = ledger.lock().unwrap();
    eprintln!("{name}: {} writes acknowledged, {} keys found older than their last acknowledged write", l.acks, l.acknowledged_lost);
    assert!(l.acks > 0, "{name}: no write was acknowledged");
    drop(l);
    drop(drive);
    fs.unmount().unwrap();
    Some(Arc::try_unwrap(ledger).ok().unwrap().into_inner().unwrap())
}

/// The drive's identity as it tells it: serial number and world-wide name from the sign-on,
/// and the TLS certificate it generated (which clients pin).
fn identity_of(drive: &TestDrive, c: &Client) -> ((Bytes, Bytes), Vec<u8>) {
    (common::sign_on_identity(c), std::fs::read(drive.data_dir().join("tls/cert.pem")).expect("the generated certificate"))
}

const WT: Synchronization = Synchronization::Writethrough;
const WB: Synchronization = Synchronization::Writeback;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writethrough_puts_overwrites_and_deletes_survive_power_cuts() {
    let w = [(WT, None, (0, 3000), 60), (WT, None, (0, 3000), 60), (WT, None, (4096, 70_000), 30)];
    run_case("writethrough", &[], &w).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writeback_writes_before_an_acknowledged_flush_survive_power_cuts() {
    let w = [(WB, Some(9), (0, 3000), 80), (WB, Some(25), (0, 20_000), 80)];
    run_case("writeback-flush", &[], &w).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_mib_values_survive_power_cuts() {
    // Small memtables: flushes, blob files and journal rotations within each cycle.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("drive.toml");
    std::fs::write(&config, "memtable_bytes = 4194304\n").unwrap();
    let config = config.display().to_string();
    let w = [(WT, None, (1 << 20, 1 << 20), 12), (WB, Some(4), (900_000, 1 << 20), 12)];
    run_case("large-values", &["--config", &config], &w).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cut_loses_writeback_writes_never_flushed() {
    let w = [(WB, None, (100, 3000), 400), (WB, None, (100, 3000), 400)];
    let Some(ledger) = run_case("control", &[], &w).await else { return };
    assert!(ledger.acknowledged_lost > 0, "no acknowledged WRITEBACK write was lost: the cut does not bite");
}

/// One setting's last acknowledged and last attempted value: after a cut it is one of them.
#[derive(Clone, Debug, Default)]
struct Setting {
    acked: i64,
    attempted: i64,
}

#[derive(Debug, Default)]
struct Settings {
    cluster_version: Setting,
    acl: Setting,
    erase_pin: Setting,
}

fn acl(n: i64) -> Vec<spindle_proto::pb::command::security::Acl> {
    let all = ["READ", "WRITE", "DELETE", "RANGE", "SETUP", "P2POP", "GETLOG", "SECURITY", "POWER_MANAGEMENT"];
    let scope = |perms: &[&str]| AclScope { offset: 0, value: String::new(), permissions: perms.iter().map(|p| p.to_string()).collect(), tls_required: false };
    [AclEntry { identity: 1, key: "asdfasdf".into(), scopes: vec![scope(&all)], max_priority: None },
     AclEntry { identity: 2, key: format!("key-{n}"), scopes: vec![scope(&["READ"])], max_priority: None }]
    .iter()
    .map(|e| e.to_proto().unwrap())
    .collect()
}

fn pin(n: i64) -> Vec<u8> {
    if n == 0 { Vec::new() } else { format!("pin-{n}").into_bytes() }
}

async fn admin(drive: &TestDrive, cluster_version: i64) -> Client {
    let config = ClientConfig { cluster_version, tls_trust: Some(drive.data_dir().join("tls/cert.pem")), ..ClientConfig::default() };
    Client::connect(drive.tls_addr.as_str(), config).await.unwrap()
}

/// Which of a setting's two candidates holds, by asking the drive through `holds`.
async fn settle<F, Fut>(what: &str, s: &mut Setting, holds: F)
where
    F: Fn(i64) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    // The attempted value first: the factory value (0) is only ever checked by elimination.
    let found = if holds(s.attempted).await {
        s.attempted
    } else if holds(s.acked).await {
        s.acked
    } else {
        panic!("{what}: neither the acknowledged value {} nor the attempted {} holds after the cut", s.acked, s.attempted)
    };
    *s = Setting { acked: found, attempted: found };
}

/// SETUP and SECURITY changes, in turn, until the drive is killed.
async fn change_settings(drive_tls: String, trust: PathBuf, settings: Arc<Mutex<Settings>>) {
    let connect = |cv: i64| {
        let config = ClientConfig { cluster_version: cv, tls_trust: Some(trust.clone()), ..ClientConfig::default() };
        Client::connect(drive_tls.clone(), config)
    };
    let cv = settings.lock().unwrap().cluster_version.acked;
    let Ok(mut c) = connect(cv).await else { return };
    loop {
        let n = settings.lock().unwrap().cluster_version.acked + 1;
        settings.lock().unwrap().cluster_version.attempted = n;
        if c.set_cluster_version(n).await.is_err() {
            return;
        }
        settings.lock().unwrap().cluster_version.acked = n;
        c = match connect(n).await {
            Ok(c) => c,
            Err(_) => return,
        };
        let a = settings.lock().unwrap().acl.acked + 1;
        settings.lock().unwrap().acl.attempted = a;
        if c.set_acl(acl(a)).await.is_err() {
            return;
        }
        settings.lock().unwrap().acl.acked = a;
        let p = settings.lock().unwrap().erase_pin.acked;
        settings.lock().unwrap().erase_pin.attempted = p + 1;
        if c.set_erase_pin(&pin(p), &pin(p + 1)).await.is_err() {
            return;
        }
        settings.lock().unwrap().erase_pin.acked = p + 1;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_and_security_changes_survive_power_cuts() {
    let dir = tempfile::tempdir().unwrap();
    let Some(mut fs) = mount(dir.path()) else { return };
    let data = fs.mountpoint().join("data");
    let settings = Arc::new(Mutex::new(Settings::default()));
    let mut identity = None;
    let mut changes = (0, 0, 0);
    for cycle in 0..=cycles() {
        let mut drive = TestDrive::start_in(&data, &[]);
        let plain = drive.client().await;
        let now = identity_of(&drive, &plain);
        assert!(*identity.get_or_insert_with(|| now.clone()) == now, "cycle {cycle}: the drive's identity changed");
        let drive_cv = plain.sign_on().header.as_ref().and_then(|h| h.cluster_version).unwrap_or(0);
        let mut s = std::mem::take(&mut *settings.lock().unwrap());
        settle("cluster version", &mut s.cluster_version, |v| async move { v == drive_cv }).await;
        let cv = s.cluster_version.acked;
        let addr = drive.addr.clone();
        settle("ACL", &mut s.acl, |n| {
            let addr = addr.clone();
            async move {
                if n == 0 {
                    return true; // the factory ACL, once ACL 1 (checked first) is not there
                }
                let config = ClientConfig { identity: 2, hmac_key: Bytes::from(format!("key-{n}")), cluster_version: cv, ..ClientConfig::default() };
                match Client::connect(addr.as_str(), config).await {
                    Ok(c) => c.noop().await.is_ok(),
                    Err(_) => false,
                }
            }
        })
        .await;
        let a = admin(&drive, cv).await;
        let a = &a;
        if s.erase_pin.acked > 0 {
            // A PIN lost to the cut would accept any old PIN: a wrong one must be refused.
            let wrong = a.set_erase_pin(b"never-set", b"never-set").await;
            assert_eq!(wrong.err().and_then(|e| e.status()), Some(spindle_proto::StatusCode::NotAuthorized), "cycle {cycle}: the erase PIN was lost");
        }
        settle("erase PIN", &mut s.erase_pin, |p| async move { a.set_erase_pin(&pin(p), &pin(p)).await.is_ok() }).await;
        changes = (s.cluster_version.acked, s.acl.acked, s.erase_pin.acked);
        *settings.lock().unwrap() = s;
        if cycle == cycles() {
            break;
        }
        let (tls, trust, shared) = (drive.tls_addr.clone(), drive.data_dir().join("tls/cert.pem"), settings.clone());
        load_then_cut(&mut drive, &mut fs, cycle, 77 + cycle as u64, move |_| vec![change_settings(tls, trust, shared)]).await;
    }
    assert!(changes.0 > 0 && changes.1 > 0 && changes.2 > 0, "some kind of settings change was never acknowledged: {changes:?}");
    fs.unmount().unwrap();
}

/// A cut right after a drive's first start, and one right after an acknowledged erase: the
/// drive comes back as itself (its identity was durable before it listened) and erased keys
/// stay erased.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_start_and_an_erase_survive_power_cuts() {
    for (round, mode) in MODES.into_iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let Some(mut fs) = mount(dir.path()) else { return };
        let data = fs.mountpoint().join("data");
        let mut drive = TestDrive::start_in(&data, &[]);
        let first = identity_of(&drive, &drive.client().await);
        drive.kill();
        fs.cut(mode, round as u64).unwrap();
        let mut drive = TestDrive::start_in(&data, &[]);
        let c = drive.client().await;
        assert!(identity_of(&drive, &c) == first, "round {round}: the identity of the first start was lost");
        for i in 0..50 {
            c.put(format!("k{i}").as_bytes(), Bytes::from(vec![i as u8; 5000]), PutOptions::default()).await.unwrap();
        }
        drive.tls_client().await.pin_operation(spindle_client::PinOpType::ErasePinop, b"").await.unwrap();
        drive.kill();
        fs.cut(mode, 100 + round as u64).unwrap();
        let drive = TestDrive::start_in(&data, &[]);
        let c = drive.client().await;
        assert!(identity_of(&drive, &c) == first, "round {round}: an erase and a cut changed the identity");
        for i in 0..50 {
            assert!(c.get(format!("k{i}").as_bytes()).await.unwrap().is_none(), "round {round}: k{i} came back after an acknowledged erase");
        }
        drop(drive);
        fs.unmount().unwrap();
    }
}
