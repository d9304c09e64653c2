//! Live migration with real processes: drives join, leave and fail while recorded clients
//! read and write; coordinators crash at every phase of a move, sources and targets are
//! killed mid-copy. After each: no acknowledged write lost (the history linearizes), every
//! replica agrees, every partition has its R copies, and the sweeper leaves nothing of a
//! partition on a drive that does not hold it.

mod common;
#[path = "common/cluster.rs"]
mod harness;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{runtime, samples, scrape, spindle_bin, TestDrive};
use harness::*;
use spindle_cluster::control::{HealthState, MemberChange};
use spindle_cluster::{ClusterMap, Condition, Control, Member, Store, StoreConfig};

/// Keys the recorded workload uses.
const KEYS: u64 = 24;

fn member(id: &str, addr: &str) -> Member {
    Member { id: id.into(), addr: addr.into(), tls_port: None, capacity: 0, weight: 1.0, domain: None, leaving: false, pool: None }
}

async fn clients(control: &Control, n: usize) -> Vec<Store> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(Store::open(control.clone(), StoreConfig::default()).await.unwrap());
    }
    out
}

/// `n` keys of `size` bytes each (something for a move to push); returns what was stored.
async fn preload(store: &Store, n: usize, size: usize) -> BTreeMap<String, Bytes> {
    let mut out = BTreeMap::new();
    for i in 0..n {
        let key = format!("bulk-{i:05}");
        let value = Bytes::from(vec![(i % 251) as u8; size]);
        store.put(key.as_bytes(), value.clone(), Condition::None).await.unwrap();
        out.insert(key, value);
    }
    out
}

async fn all_there(store: &Store, bulk: &BTreeMap<String, Bytes>) {
    for (k, v) in bulk {
        let got = store.get(k.as_bytes()).await.unwrap().unwrap_or_else(|| panic!("{k} lost"));
        assert_eq!(&got.value, v, "{k} changed");
    }
}

/// The map's members' addresses by id.
async fn addresses(control: &Control) -> BTreeMap<String, String> {
    control.load_map().await.unwrap().0.members.into_values().map(|m| (m.id, m.addr)).collect()
}

/// Waits until the sweeper has left every member holding only the partitions placed on it.
async fn swept(control: &Control) {
    until("the sweeper to remove every copy a drive does not hold", Duration::from_secs(30), async || {
        let (map, _) = control.load_map().await.ok()?;
        for m in map.members.values() {
            let config = spindle_client::ClientConfig { cluster_version: map.epoch as i64, ..Default::default() };
            let c = spindle_client::Client::connect(m.addr.as_str(), config).await.ok()?;
            if !spindle_cluster::sweep::foreign_partitions(&map, &m.id, &c).await.ok()?.is_empty() {
                return None;
            }
        }
        Some(())
    })
    .await;
}

/// Every partition on R distinct members, all up (a drive just restarted is caught up first).
async fn fully_replicated(control: &Control) -> ClusterMap {
    let map = settled(control).await;
    for (p, replicas) in map.placement.iter().enumerate() {
        let mut distinct = replicas.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), usize::from(map.replicas), "partition {p}: {replicas:?}");
    }
    until("every replica's drive up", Duration::from_secs(30), async || {
        let health = control.health().await.ok()?;
        map.placement.iter().flatten().all(|d| health.get(d).is_some_and(|h| h.state == HealthState::Up)).then_some(())
    })
    .await;
    map
}

/// A drive holds no entry at all (a drained drive after it left).
async fn empty_drive(addr: &str) -> bool {
    let c = spindle_client::Client::connect(addr, spindle_client::ClientConfig { cluster_version: 0, ..Default::default() }).await.unwrap();
    let theirs = c.sign_on().header.as_ref().and_then(|h| h.cluster_version).unwrap_or(0);
    c.set_request_cluster_version(theirs);
    let all = spindle_client::RangeQuery { start: Bytes::new(), start_inclusive: true, end: None, end_inclusive: true, max_returned: 10, reverse: false };
    c.get_key_range(all).await.unwrap().is_empty()
}

/// Asks for drive `id` at `addr` to join; returns the map once moves have made it hold
/// partitions.
async fn join(control: &Control, id: &str, addr: &str) -> ClusterMap {
    control.request_change(&MemberChange::Add(member(id, addr))).await.unwrap();
    until(&format!("{id} to hold partitions"), Duration::from_secs(60), async || {
        let (map, _) = control.load_map().await.ok()?;
        (map.moving.is_empty() && map.placement.iter().any(|r| r.iter().any(|d| d == id))).then_some(map)
    })
    .await
}

/// Asks for drive `id` to leave; returns once it is drained and dropped from the map.
async fn leave(control: &Control, id: &str) {
    control.request_change(&MemberChange::Remove { id: id.into() }).await.unwrap();
    until(&format!("{id} to be drained and dropped"), Duration::from_secs(60), async || {
        let (map, _) = control.load_map().await.ok()?;
        (!map.members.contains_key(id)).then_some(())
    })
    .await;
}

/// Every key's newest write on every replica the map names, once the scrub has been round
/// (a replica may miss a write acknowledged without it while drives are being fenced).
async fn agree(store: &Store, control: &Control) {
    let mut last = String::new();
    for _ in 0..150 {
        match replicas_agree(store, &addresses(control).await, KEYS).await {
            Ok(()) => return,
            Err(e) => last = e,
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("replicas still differ after 30 s: {last}");
}

fn assert_no_errors(rec: &Recorder) {
    let (errors, last) = rec.errors();
    assert_eq!(errors, 0, "clients saw errors during the move; the last: {last:?}");
}

#[test]
fn drives_join_and_leave_under_load_and_nothing_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let etcd = Etcd::start(dir.path(), 1);
    let drives: Vec<TestDrive> = (0..4).map(|_| TestDrive::start(&[])).collect();
    let addrs: Vec<String> = drives.iter().map(|d| d.addr.clone()).collect();
    let metrics: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let args = ["--migrate-mib-s", "0", "--sweep-grace-ms", "300", "--sweep-interval-ms", "200", "--metrics", &metrics.to_string()];
    let _coordinator = coordinator_with(&etcd.endpoints(), "join", "c1", &args);
    runtime().block_on(async {
        let control = control(&etcd.endpoints(), "join").await;
        control.init(&ClusterMap::new(16, 3, 2).unwrap()).await.unwrap();
        add_addresses(&control, &addrs[..3]).await;
        let store = Store::open(control.clone(), StoreConfig::default()).await.unwrap();
        let bulk = preload(&store, 300, 8192).await;
        let rec = Recorder::new();
        let load = Workload::mixed(&clients(&control, 4 + CONDITIONAL_CLIENTS).await, CONDITIONAL_CLIENTS, &rec, KEYS);
        tokio::time::sleep(Duration::from_millis(500)).await;

        // Join: d3's share moves to it while the clients go on.
        let before = control.load_map().await.unwrap().0.epoch;
        let joined = join(&control, "d3", &addrs[3]).await;
        // The member change, the move's start and its flip: three epochs.
        assert!(joined.epoch >= before + 3, "epoch {} after {before}", joined.epoch);
        fully_replicated(&control).await;
        let m = samples(&scrape(metrics));
        assert!(m["spindle_coordinator_moved_bytes_total"] > 0.0, "the drives pushed nothing");
        assert!(m["spindle_coordinator_moved_entries_total"] > 0.0);
        tokio::time::sleep(Duration::from_millis(300)).await;

        // Leave: d0 is drained, swept and dropped.
        leave(&control, "d0").await;
        let map = fully_replicated(&control).await;
        assert!(map.placement.iter().all(|r| !r.iter().any(|d| d == "d0")));
        tokio::time::sleep(Duration::from_millis(500)).await;
        load.stop().await;

        assert_no_errors(&rec);
        rec.check("join");
        agree(&store, &control).await;
        all_there(&store, &bulk).await;
        swept(&control).await;
        assert!(empty_drive(&addrs[0]).await, "the drive that left still holds the cluster's data");
        let m = samples(&scrape(metrics));
        assert!(m["spindle_coordinator_swept_entries_total"] > 0.0);
        assert_eq!(m["spindle_coordinator_moving_partitions"], 0.0);
    });
}

/// At R=1 a put stores in one request while its partition does not move, and goes the
/// usual way (read first, both sets written) while it does: partitions moving to a joining
/// drive and off a leaving one under recorded load lose nothing, and the history linearizes.
#[test]
fn single_replica_partitions_move_under_load_and_nothing_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let etcd = Etcd::start(dir.path(), 1);
    let drives: Vec<TestDrive> = (0..3).map(|_| TestDrive::start(&[])).collect();
    let addrs: Vec<String> = drives.iter().map(|d| d.addr.clone()).collect();
    let args = ["--migrate-mib-s", "0", "--sweep-grace-ms", "300", "--sweep-interval-ms", "200"];
    let _coordinator = coordinator_with(&etcd.endpoints(), "single", "c1", &args);
    runtime().block_on(async {
        let control = control(&etcd.endpoints(), "single").await;
        control.init(&ClusterMap::new(8, 1, 1).unwrap()).await.unwrap();
        add_addresses(&control, &addrs[..2]).await;
        let store = Store::open(control.clone(), StoreConfig::default()).await.unwrap();
        let bulk = preload(&store, 200, 4096).await;
        let rec = Recorder::new();
        let clients = clients(&control, 4).await;
        let load = Workload::start(&clients, &rec, KEYS);
        tokio::time::sleep(Duration::from_millis(500)).await;

        join(&control, "d2", &addrs[2]).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        leave(&control, "d0").await;
        fully_replicated(&control).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        load.stop().await;

        assert_no_errors(&rec);
        rec.check("single");
        all_there(&store, &bulk).await;
        swept(&control).await;
        let guessed: u64 = clients.iter().map(|c| c.write_counts().one_round_trip.load(std::sync::atomic::Ordering::Relaxed)).sum();
        assert!(guessed > 0, "no put stored in one request");
    });
}

#[test]
fn a_failed_drive_is_replaced_and_caught_up_when_it_comes_back() {
    let dir = tempfile::tempdir().unwrap();
    let etcd = Etcd::start(dir.path(), 1);
    let mut drives: Vec<TestDrive> = (0..4).map(|_| TestDrive::start(&[])).collect();
    let addrs: Vec<String> = drives.iter().map(|d| d.addr.clone()).collect();
    let args = ["--replace-after-ms", "1500", "--migrate-mib-s", "0", "--sweep-grace-ms", "300", "--sweep-interval-ms", "200"];
    let _coordinator = coordinator_with(&etcd.endpoints(), "fail", "c1", &args);
    runtime().block_on(async {
        let control = control(&etcd.endpoints(), "fail").await;
        control.init(&ClusterMap::new(8, 3, 2).unwrap()).await.unwrap();
        add_addresses(&control, &addrs).await;
        let store = Store::open(control.clone(), StoreConfig::default()).await.unwrap();
        let bulk = preload(&store, 200, 4096).await;
        let rec = Recorder::new();
        let load = Workload::mixed(&clients(&control, 4 + CONDITIONAL_CLIENTS).await, CONDITIONAL_CLIENTS, &rec, KEYS);
        tokio::time::sleep(Duration::from_millis(500)).await;

        drives[1].kill();
        // Down, then replaced: its partitions re-replicated on the three others.
        let replaced = until("d1's partitions re-replicated", Duration::from_secs(60), async || {
            let (map, _) = control.load_map().await.ok()?;
            (map.moving.is_empty() && map.placement.iter().all(|r| r.len() == 3 && !r.iter().any(|d| d == "d1"))).then_some(map)
        })
        .await;
        assert!(replaced.members.contains_key("d1"), "a failed drive stays a member (it may come back)");
        tokio::time::sleep(Duration::from_millis(500)).await;

        // Back: it is caught up, takes its share again, and what it held of the rest is swept.
        drives[1].restart_same_port();
        until("d1 back in the placement", Duration::from_secs(60), async || {
            let (map, _) = control.load_map().await.ok()?;
            (map.moving.is_empty() && map.placement.iter().any(|r| r.iter().any(|d| d == "d1"))).then_some(())
        })
        .await;
        fully_replicated(&control).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        load.stop().await;

        assert_no_errors(&rec);
        rec.check("fail");
        agree(&store, &control).await;
        all_there(&store, &bulk).await;
        swept(&control).await;
    });
}

/// A coordinator aborts at each phase of a move in turn (`SPINDLE_COORDINATOR_CRASH_AT`), as
/// if killed there; the next leader resumes the move from etcd (or finds it done) and
/// finishes it: joins and leaves alternate, under load.
#[test]
fn a_move_survives_its_coordinator_crashing_at_every_phase() {
    let dir = tempfile::tempdir().unwrap();
    let etcd = Etcd::start(dir.path(), 1);
    let drives: Vec<TestDrive> = (0..5).map(|_| TestDrive::start(&[])).collect();
    let addrs: Vec<String> = drives.iter().map(|d| d.addr.clone()).collect();
    let args = ["--migrate-mib-s", "0", "--sweep-grace-ms", "300", "--sweep-interval-ms", "200"];
    let mut survivor = coordinator_with(&etcd.endpoints(), "crash", "s0", &args);
    runtime().block_on(async {
        let control = control(&etcd.endpoints(), "crash").await;
        control.init(&ClusterMap::new(16, 3, 2).unwrap()).await.unwrap();
        add_addresses(&control, &addrs[..3]).await;
        let store = Store::open(control.clone(), StoreConfig::default()).await.unwrap();
        let bulk = preload(&store, 200, 4096).await;
        let rec = Recorder::new();
        let load = Workload::mixed(&clients(&control, 4 + CONDITIONAL_CLIENTS).await, CONDITIONAL_CLIENTS, &rec, KEYS);
        let changes = [
            MemberChange::Add(member("d3", &addrs[3])),
            MemberChange::Remove { id: "d3".into() },
            MemberChange::Add(member("d4", &addrs[4])),
            MemberChange::Remove { id: "d0".into() },
        ];
        for (i, (phase, change)) in ["move-started", "partition-copied", "copied", "flipped"].into_iter().zip(changes).enumerate() {
            // The crashing coordinator leads: the one that led is killed once it is ready.
            let name = format!("crash-at-{phase}");
            let mut crasher = coordinator_env(&etcd.endpoints(), "crash", &name, &args, &[("SPINDLE_COORDINATOR_CRASH_AT", phase)]);
            until("the crashing coordinator to be up", Duration::from_secs(10), async || {
                control.coordinators().await.ok()?.0.contains(&name).then_some(())
            })
            .await;
            survivor.kill();
            until("the crashing coordinator to lead", Duration::from_secs(15), async || {
                (control.coordinators().await.ok()?.1? == name).then_some(())
            })
            .await;
            survivor = coordinator_with(&etcd.endpoints(), "crash", &format!("s{}", i + 1), &args);
            let expect_member = match &change {
                MemberChange::Add(m) => (m.id.clone(), true),
                MemberChange::Remove { id } => (id.clone(), false),
                MemberChange::AddPool { .. } | MemberChange::AddRemote { .. } => unreachable!("only member changes here"),
            };
            control.request_change(&change).await.unwrap();
            until(&format!("the coordinator to crash at {phase}"), Duration::from_secs(30), async || crasher.exited().then_some(())).await;
            until(&format!("the move crashed at {phase} to be finished by the next leader"), Duration::from_secs(60), async || {
                let (map, _) = control.load_map().await.ok()?;
                let (id, present) = &expect_member;
                (map.members.contains_key(id) == *present && map.moving.is_empty()).then_some(())
            })
            .await;
            fully_replicated(&control).await;
            eprintln!("crash at {phase}: move finished by the next leader");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        load.stop().await;

        assert_no_errors(&rec);
        rec.check("crash");
        agree(&store, &control).await;
        all_there(&store, &bulk).await;
        swept(&control).await;
    });
    survivor.kill();
}

/// A throttled move (0.5 MiB/s): `status` shows its progress; the target is killed mid-copy
/// and comes back, then a source; the move finishes, no faster than the limit allows.
#[test]
fn a_throttled_move_survives_its_source_and_target_dying_and_shows_progress() {
    let dir = tempfile::tempdir().unwrap();
    let etcd = Etcd::start(dir.path(), 1);
    let mut drives: Vec<TestDrive> = (0..4).map(|_| TestDrive::start(&[])).collect();
    let addrs: Vec<String> = drives.iter().map(|d| d.addr.clone()).collect();
    let metrics: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let args = ["--migrate-mib-s", "0.5", "--sweep-grace-ms", "300", "--sweep-interval-ms", "200", "--metrics", &metrics.to_string()];
    let _coordinator = coordinator_with(&etcd.endpoints(), "throttle", "c1", &args);
    runtime().block_on(async {
        let control = control(&etcd.endpoints(), "throttle").await;
        control.init(&ClusterMap::new(8, 3, 2).unwrap()).await.unwrap();
        add_addresses(&control, &addrs[..3]).await;
        let store = Store::open(control.clone(), StoreConfig::default()).await.unwrap();
        let bulk = preload(&store, 300, 8192).await;
        let rec = Recorder::new();
        let load = Workload::mixed(&clients(&control, 4 + CONDITIONAL_CLIENTS).await, CONDITIONAL_CLIENTS, &rec, KEYS);

        let started = Instant::now();
        control.request_change(&MemberChange::Add(member("d3", &addrs[3]))).await.unwrap();
        until("the move's first partition copied", Duration::from_secs(30), async || {
            control.progress().await.ok()?.filter(|p| !p.done.is_empty()).map(drop)
        })
        .await;
        let status = std::process::Command::new(spindle_bin())
            .args(["cluster", "status", "--etcd", &etcd.endpoints(), "--cluster", "throttle"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&status.stdout);
        assert!(status.status.success(), "{text}");
        assert!(text.contains("moving: ") && text.contains("partitions done") && text.contains("MiB"), "status shows no move:\n{text}");
        eprintln!("{text}");

        // The target dies mid-copy and comes back; then a source does.
        drives[3].kill();
        tokio::time::sleep(Duration::from_millis(1200)).await;
        drives[3].restart_same_port();
        tokio::time::sleep(Duration::from_millis(500)).await;
        let map = control.load_map().await.unwrap().0;
        if !map.moving.is_empty() {
            let source = map.moving.keys().flat_map(|p| map.replicas_of(*p)).next().cloned().unwrap();
            let i: usize = source.trim_start_matches('d').parse().unwrap();
            drives[i].kill();
            tokio::time::sleep(Duration::from_millis(1000)).await;
            drives[i].restart_same_port();
        }
        until("the move to finish", Duration::from_secs(90), async || {
            let (map, _) = control.load_map().await.ok()?;
            (map.moving.is_empty() && map.placement.iter().any(|r| r.iter().any(|d| d == "d3"))).then_some(())
        })
        .await;
        let took = started.elapsed();
        fully_replicated(&control).await;
        load.stop().await;

        let moved = samples(&scrape(metrics))["spindle_coordinator_moved_bytes_total"];
        let floor = moved / (0.5 * f64::from(1u32 << 20));
        eprintln!("moved {moved} bytes in {took:?} (the limit allows no less than {floor:.1} s)");
        assert!(moved > 0.0);
        assert!(took.as_secs_f64() >= floor * 0.9, "{moved} bytes moved in {took:?}, faster than 0.5 MiB/s");
        assert_no_errors(&rec);
        rec.check("throttle");
        agree(&store, &control).await;
        all_there(&store, &bulk).await;
        swept(&control).await;
    });
}

/// A cluster of one partition written by hand at epoch 5, every drive fenced to it: replicas
/// d0 d1 d2, moving to d0 d1 d3. Returns the map and a connection to each drive at epoch 5.
async fn one_partition_moving(control: &Control, drives: &[TestDrive]) -> (ClusterMap, Vec<spindle_client::Client>) {
    use spindle_client::{Client, ClientConfig};
    control.init(&ClusterMap::new(1, 3, 2).unwrap()).await.unwrap();
    let (mut map, revision) = control.load_map().await.unwrap();
    for (i, d) in drives.iter().enumerate() {
        let id = format!("d{i}");
        map.members.insert(id.clone(), member(&id, &d.addr));
    }
    let ids = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    map.placement = vec![ids(&["d0", "d1", "d2"])];
    map.moving.insert(0, ids(&["d0", "d1", "d3"]));
    map.epoch = 5;
    assert!(control.replace_map(revision, &map).await.unwrap());
    let mut raw = Vec::new();
    for d in drives {
        let c = Client::connect(d.addr.as_str(), ClientConfig::default()).await.unwrap();
        c.set_cluster_version(5).await.unwrap();
        c.set_request_cluster_version(5);
        raw.push(c);
    }
    (map, raw)
}

/// A read during a move that finds the newest write on a write quorum of the old replicas,
/// but not of the drives the partition moves to, writes it back: else the flip leaves it on
/// one new replica, and a read of the new ones returns something older than this read did.
/// (One partition, O = d0 d1 d2 moving to N = d0 d1 d3; the write on d1 and d2 only; d0 down,
/// so the read asks d1 and d2.)
#[test]
fn a_read_during_a_move_leaves_what_it_returns_on_a_quorum_of_the_new_replicas() {
    use spindle_client::PutOptions;
    use spindle_cluster::tag::{Kind, Tag};
    let dir = tempfile::tempdir().unwrap();
    let etcd = Etcd::start(dir.path(), 1);
    let mut drives: Vec<TestDrive> = (0..4).map(|_| TestDrive::start(&[])).collect();
    runtime().block_on(async {
        let control = control(&etcd.endpoints(), "read").await;
        let (_, raw) = one_partition_moving(&control, &drives).await;
        let key = spindle_cluster::map::drive_key(0, b"k");
        let tag = Tag { epoch: 5, counter: 1, writer: 7, kind: Kind::Value };
        for c in &raw[1..3] {
            let options = PutOptions { new_version: tag.encode(), force: true, ..PutOptions::default() };
            c.put(&key, Bytes::from_static(b"v"), options).await.unwrap();
        }
        drives[0].kill();
        let store = Store::open(control.clone(), StoreConfig::default()).await.unwrap();
        assert_eq!(store.get(b"k").await.unwrap().unwrap().value, Bytes::from_static(b"v"));
        let on_d3 = raw[3].get_metadata(&key).await.unwrap().and_then(|m| Tag::decode(&m.version));
        assert_eq!(on_d3, Some(tag), "the read returned a write that only one of the new replicas holds");
    });
}

/// A put caught by the flip (O = d0 d1 d2 moving to N = d0 d1 d3 at epoch 5; the flip to
/// epoch 6 fences the drives while the put's client still holds the move's map) is one write:
/// a reader of the new epoch and a later put there, both while it is under way, must leave a
/// history that linearizes. The one-round-trip try that puts once made stored the value on
/// d0 and d2 under an epoch-5 tag, a reader returned it, a put of epoch 6 replaced it, and
/// the try's retry at epoch 6, tagged again, brought the value back.
#[test]
fn a_put_caught_by_the_flip_is_one_write() {
    use spindle_cluster::history::{check, Event, Op};
    let dir = tempfile::tempdir().unwrap();
    let etcd = Etcd::start(dir.path(), 1);
    let drives: Vec<TestDrive> = (0..4).map(|_| TestDrive::start(&[])).collect();
    runtime().block_on(async {
        let control = control(&etcd.endpoints(), "caught").await;
        let (map, raw) = one_partition_moving(&control, &drives).await;
        let start = Instant::now();
        let now = move || start.elapsed().as_micros() as u64;
        let events = std::sync::Arc::new(parking_lot::Mutex::new(Vec::new()));
        let behind = Store::open(control.clone(), StoreConfig::default()).await.unwrap();
        let call = now();
        behind.put(b"k", Bytes::from_static(&[0]), Condition::None).await.unwrap();
        events.lock().push(Event { key: 0, op: Op::Write(Some(0)), call, ret: Some(now()) });
        // The flip fences d1 and d3 first; its map reaches the put's client last.
        for i in [1, 3] {
            raw[i].set_cluster_version(6).await.unwrap();
        }
        let (put_events, call) = (events.clone(), now());
        let put = tokio::spawn(async move {
            behind.put(b"k", Bytes::from_static(&[1]), Condition::None).await.unwrap();
            put_events.lock().push(Event { key: 0, op: Op::Write(Some(1)), call, ret: Some(now()) });
        });
        // Whatever the put stores on d0 and d2 meanwhile, then they are fenced too.
        let key = spindle_cluster::map::drive_key(0, b"k");
        let deadline = Instant::now() + Duration::from_millis(500);
        while Instant::now() < deadline {
            if raw[0].get(&key).await.unwrap().is_some_and(|e| e.value[..] == [1]) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        for i in [0, 2] {
            raw[i].set_cluster_version(6).await.unwrap();
        }
        // Clients of the flipped map (under another cluster name until the put's own map
        // flips): a read, a put over it, a read.
        let ids = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let mut flipped = map.clone();
        flipped.placement = vec![ids(&["d0", "d1", "d3"])];
        flipped.moving.clear();
        flipped.epoch = 6;
        let ahead_control = harness::control(&etcd.endpoints(), "caught-ahead").await;
        ahead_control.init(&ClusterMap::new(1, 3, 2).unwrap()).await.unwrap();
        let (_, revision) = ahead_control.load_map().await.unwrap();
        assert!(ahead_control.replace_map(revision, &flipped).await.unwrap());
        let ahead = Store::open(ahead_control, StoreConfig::default()).await.unwrap();
        let read = async || {
            let call = now();
            let got = ahead.get(b"k").await.unwrap().map(|v| u64::from(v.value[0]));
            events.lock().push(Event { key: 0, op: Op::Read(got), call, ret: Some(now()) });
        };
        read().await;
        let call = now();
        ahead.put(b"k", Bytes::from_static(&[2]), Condition::None).await.unwrap();
        events.lock().push(Event { key: 0, op: Op::Write(Some(2)), call, ret: Some(now()) });
        read().await;
        // The flip reaches the put's client; the put completes; a last read.
        let (_, revision) = control.load_map().await.unwrap();
        assert!(control.replace_map(revision, &flipped).await.unwrap());
        put.await.unwrap();
        read().await;
        let history = events.lock().clone();
        if let Err(v) = check(&history) {
            panic!("not linearizable: {v}");
        }
    });
}

/// A client still holding a move's map after the flip must not miss a key a client of the
/// new epoch created on the new replicas: its read asks a quorum of the new set too, meets a
/// drive fenced to the new epoch, and reloads the map. (O = d0 d1 d2 moving to N = d0 d1 d3 at
/// epoch 5; the flip to epoch 6 has fenced d1 and d3 but not yet d0 and d2.)
#[test]
fn a_client_behind_the_flip_still_reads_what_the_new_epoch_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let etcd = Etcd::start(dir.path(), 1);
    let drives: Vec<TestDrive> = (0..4).map(|_| TestDrive::start(&[])).collect();
    runtime().block_on(async {
        let control = control(&etcd.endpoints(), "behind").await;
        let (map, raw) = one_partition_moving(&control, &drives).await;
        let ids = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let behind = Store::open(control.clone(), StoreConfig::default()).await.unwrap();
        // The flip: committed, and only d1 and d3 fenced so far.
        let (_, revision) = control.load_map().await.unwrap();
        let mut flipped = map.clone();
        flipped.placement = vec![ids(&["d0", "d1", "d3"])];
        flipped.moving.clear();
        flipped.epoch = 6;
        assert!(control.replace_map(revision, &flipped).await.unwrap());
        for i in [1, 3] {
            raw[i].set_cluster_version(6).await.unwrap();
        }
        let ahead = Store::open(control.clone(), StoreConfig::default()).await.unwrap();
        ahead.put(b"k", Bytes::from_static(b"new"), Condition::Absent).await.unwrap();
        let got = behind.get(b"k").await.unwrap();
        assert_eq!(got.map(|v| v.value), Some(Bytes::from_static(b"new")), "a read behind the flip missed an acknowledged write");
    });
}

/// Batch B (counter 3,010 of epoch 5) over j, k and n on d1 and d3 alone of O = d0 d1 d2
/// moving to N = d0 d1 d3, n since overwritten on every drive (X), the others "old" beneath:
/// never chosen, and on a write quorum of N.
async fn a_batch_across_the_move(raw: &[spindle_client::Client]) -> ([&'static [u8]; 3], spindle_cluster::tag::Tag) {
    use spindle_cluster::tag::{Kind, Tag};
    use spindle_cluster::{batch, replica};
    let dk = |k: &[u8]| spindle_cluster::map::drive_key(0, k);
    let at = |counter: u64, kind: Kind| Tag { epoch: 5, counter, writer: 7, kind };
    let keys: [&[u8]; 3] = [b"{b}j", b"{b}k", b"{b}n"];
    for r in raw {
        for k in keys {
            replica::store_if_newer(r, &dk(k), Bytes::from_static(b"old"), at(3_000, Kind::Value), None).await.unwrap();
        }
    }
    let b = at(3_010, Kind::BatchValue);
    let entries: Vec<replica::BatchEntry> = keys.iter().map(|k| (dk(k), batch::encode_entry(&keys, b"B"), b)).collect();
    for r in [&raw[1], &raw[3]] {
        replica::store_batch_if_newer(r, &entries, None).await.unwrap();
    }
    for r in raw {
        replica::store_if_newer(r, &dk(b"{b}n"), Bytes::from_static(b"X"), at(3_011, Kind::Value), None).await.unwrap();
    }
    (keys, b)
}

/// The same batch, met while the control plane does not answer: it cannot be noted, so it is
/// passed over nowhere. The read fails rather than return the write before it, and B stands on
/// j where it stood (noted later, it is settled before the flip).
#[test]
fn a_batch_that_cannot_be_noted_is_passed_over_nowhere() {
    use spindle_cluster::replica;
    let dir = tempfile::tempdir().unwrap();
    let mut etcd = Etcd::start(dir.path(), 1);
    let drives: Vec<TestDrive> = (0..4).map(|_| TestDrive::start(&[])).collect();
    runtime().block_on(async {
        let control = control(&etcd.endpoints(), "unnoted").await;
        let (_, raw) = one_partition_moving(&control, &drives).await;
        let dk = |k: &[u8]| spindle_cluster::map::drive_key(0, k);
        let (keys, b) = a_batch_across_the_move(&raw).await;
        let store = Store::open(control.clone(), StoreConfig::default()).await.unwrap();
        etcd.members[0].kill();
        let read = store.get(keys[1]).await;
        assert!(read.is_err(), "a read passed over a batch it could not note: {read:?}");
        for r in [&raw[1], &raw[3]] {
            for k in [keys[0], keys[1]] {
                let held = replica::held(r, &dk(k)).await.unwrap();
                assert!(held.tag().is_some_and(|t| t.same_write(&b)), "B left {}: {held:?}", String::from_utf8_lossy(k));
            }
        }
    });
}

/// A batch that lands during a move on a write quorum of the drives the partition moves to,
/// but not of its old replicas, was never chosen; abandoned by a reader on one key, it must
/// not stand on its other keys once the move flips and those drives are the replicas
/// (docs/design/simulation.md, Findings, "Half a batch across a move's flip"). O = d0 d1 d2
/// moving to N = d0 d1 d3 at epoch 5; batch B over j, k and n on d1 and d3 alone, n since
/// overwritten on every drive. A read of k abandons B and notes it; the flip, as the
/// coordinator makes it (the noted batches settled on every member, then the map), leaves j
/// at its write from before B. Without the note, a read after the flip returned B for j.
#[test]
fn a_batch_abandoned_during_a_move_stands_on_none_of_its_keys_after_the_flip() {
    use spindle_cluster::migrate;
    let dir = tempfile::tempdir().unwrap();
    let etcd = Etcd::start(dir.path(), 1);
    let drives: Vec<TestDrive> = (0..4).map(|_| TestDrive::start(&[])).collect();
    runtime().block_on(async {
        let control = control(&etcd.endpoints(), "noted").await;
        let (map, raw) = one_partition_moving(&control, &drives).await;
        let dk = |k: &[u8]| spindle_cluster::map::drive_key(0, k);
        let (keys, b) = a_batch_across_the_move(&raw).await;

        let store = Store::open(control.clone(), StoreConfig::default()).await.unwrap();
        assert_eq!(store.get(b"{b}k").await.unwrap().unwrap().value, Bytes::from_static(b"old"), "B was never chosen");
        let (noted, guard) = control.noted_abandoned(5).await.unwrap();
        assert_eq!(noted.len(), 1, "B, on a write quorum of the drives the partition moves to, is noted for the flip");
        assert_eq!((noted[0].counter, noted[0].partition), (3_010, 0));
        assert_eq!(noted[0].members, keys.map(<[u8]>::to_vec).to_vec());
        // On j, B still stands on d1 and d3: a write quorum of the replicas after the flip.
        for r in [&raw[1], &raw[3]] {
            let held = r.get_metadata(&dk(b"{b}j")).await.unwrap().and_then(|m| spindle_cluster::stamp::Stamp::decode(&m.version));
            assert_eq!(held.map(|s| s.identity), Some(b));
        }

        // The flip as the coordinator makes it.
        let movers = migrate::Movers::new(migrate::connect_all(&map, &StoreConfig::default().client).await, 0, (control.clone(), StoreConfig::default()));
        let failed = migrate::settle_noted(&movers, &noted).await.unwrap();
        assert!(failed.is_empty(), "{failed:?}");
        let (_, revision) = control.load_map().await.unwrap();
        let mut flipped = map.clone();
        flipped.placement = vec![["d0", "d1", "d3"].map(String::from).to_vec()];
        flipped.moving.clear();
        flipped.epoch = 6;
        let progress = spindle_cluster::control::MoveProgress { epoch: 5, ..Default::default() };
        assert!(control.commit_flip(revision, &flipped, &progress, guard).await.unwrap());
        for r in &raw {
            r.set_cluster_version(6).await.unwrap();
        }
        assert!(control.noted_abandoned(5).await.unwrap().0.is_empty(), "the notes are dropped after the flip");
        let after = Store::open(control.clone(), StoreConfig::default()).await.unwrap();
        for (k, v) in [(keys[0], "old"), (keys[1], "old"), (keys[2], "X")] {
            assert_eq!(after.get(k).await.unwrap().unwrap().value, Bytes::from(v), "{} after the flip", String::from_utf8_lossy(k));
        }
    });
}

/// A noted batch whose members cannot all be settled holds its partition's flip back: the
/// coordinator settles every member of every noted batch before the flip, and a partition
/// with one that fails (here a member whose entry on one drive, tagged as the batch's, does
/// not decode) is reported, and the coordinator leaves it where it is this time. Once the
/// member reads again, the next settle lets it flip.
#[test]
fn a_noted_batch_that_cannot_be_settled_holds_its_partition_back() {
    use spindle_client::PutOptions;
    use spindle_cluster::abandoned::NotedBatch;
    use spindle_cluster::tag::{Kind, Tag};
    use spindle_cluster::{migrate, replica};
    let dir = tempfile::tempdir().unwrap();
    let etcd = Etcd::start(dir.path(), 1);
    let drives: Vec<TestDrive> = (0..4).map(|_| TestDrive::start(&[])).collect();
    runtime().block_on(async {
        let control = control(&etcd.endpoints(), "unsettled-note").await;
        let (map, raw) = one_partition_moving(&control, &drives).await;
        let dk = |k: &[u8]| spindle_cluster::map::drive_key(0, k);
        let keys: [&[u8]; 2] = [b"{c}j", b"{c}k"];
        let b = Tag { epoch: 5, counter: 3_010, writer: 7, kind: Kind::BatchValue };
        for r in &raw {
            replica::store_if_newer(r, &dk(keys[0]), Bytes::from_static(b"old"), Tag { kind: Kind::Value, counter: 3_000, ..b }, None).await.unwrap();
            replica::store_if_newer(r, &dk(keys[1]), Bytes::from_static(b"old"), Tag { kind: Kind::Value, counter: 3_000, ..b }, None).await.unwrap();
        }
        // k's entry on d1: tagged as a batch's, its value no batch entry.
        {
            let r = &raw[1];
            let replica::Held::Entry { version, .. } = replica::held(r, &dk(keys[1])).await.unwrap() else { panic!("k not stored") };
            let batch_version = spindle_cluster::stamp::Stamp { identity: b, ballot: Tag { kind: Kind::Value, ..b }, promise: None }.encode();
            let garbled = PutOptions { db_version: version, new_version: batch_version, force: true, ..PutOptions::default() };
            r.put(&dk(keys[1]), Bytes::from_static(b"\xff not a batch entry"), garbled).await.unwrap();
        }
        assert!(control.note_abandoned(5, NotedBatch::new(0, b, keys.map(<[u8]>::to_vec).to_vec())).await.unwrap());
        let (noted, _) = control.noted_abandoned(5).await.unwrap();

        let movers = migrate::Movers::new(migrate::connect_all(&map, &StoreConfig::default().client).await, 0, (control.clone(), StoreConfig::default()));
        let failed = migrate::settle_noted(&movers, &noted).await.unwrap();
        assert_eq!(failed.keys().copied().collect::<Vec<_>>(), vec![0], "a partition whose noted batch was not settled is held back");

        // k written again as the cluster writes it: the noted batch now settles.
        for r in &raw {
            replica::store_if_newer(r, &dk(keys[1]), Bytes::from_static(b"new"), Tag { kind: Kind::Value, counter: 3_020, ..b }, None).await.unwrap();
        }
        let failed = migrate::settle_noted(&movers, &noted).await.unwrap();
        assert!(failed.is_empty(), "{failed:?}");
    });
}

/// A note made after the coordinator read the notes fails its flip: the batch noted then is
/// settled by the next round before the map flips. Notes are taken only while the map is at
/// the move's epoch, and dropped once it has moved on.
#[test]
fn a_batch_noted_after_the_coordinator_read_the_notes_holds_the_flip_back() {
    use spindle_cluster::abandoned::NotedBatch;
    use spindle_cluster::tag::{Kind, Tag};
    let dir = tempfile::tempdir().unwrap();
    let etcd = Etcd::start(dir.path(), 1);
    let drives: Vec<TestDrive> = (0..4).map(|_| TestDrive::start(&[])).collect();
    runtime().block_on(async {
        let control = control(&etcd.endpoints(), "late-note").await;
        let (map, _raw) = one_partition_moving(&control, &drives).await;
        let note = |counter| NotedBatch::new(0, Tag { epoch: 5, counter, writer: 7, kind: Kind::BatchValue }, vec![format!("{{b}}{counter}").into_bytes()]);
        assert!(control.note_abandoned(5, note(1)).await.unwrap());
        // Noted at another epoch than the map's: refused.
        assert!(!control.note_abandoned(4, note(2)).await.unwrap());
        let (noted, guard) = control.noted_abandoned(5).await.unwrap();
        assert_eq!(noted, vec![note(1)]);
        assert!(control.note_abandoned(5, note(2)).await.unwrap());
        let (_, revision) = control.load_map().await.unwrap();
        let mut flipped = map.clone();
        flipped.moving.clear();
        flipped.epoch = 6;
        let progress = spindle_cluster::control::MoveProgress { epoch: 5, ..Default::default() };
        assert!(!control.commit_flip(revision, &flipped, &progress, guard).await.unwrap(), "a flip over a note it did not read");
        let (noted, guard) = control.noted_abandoned(5).await.unwrap();
        assert_eq!(noted, vec![note(1), note(2)]);
        assert!(control.commit_flip(revision, &flipped, &progress, guard).await.unwrap());
        // Once flipped, nothing is noted at the old epoch any more, and its notes are gone.
        assert!(!control.note_abandoned(5, note(3)).await.unwrap());
        assert!(control.noted_abandoned(5).await.unwrap().0.is_empty());
    });
}
