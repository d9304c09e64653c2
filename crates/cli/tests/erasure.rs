//! Erasure-coded pools with real processes: etcd, `spindle drive`s in a 4+2 pool beside the
//! replicated one, a coordinator placing the pool's groups, and the cluster client's stripes
//! read back through damaged shards and killed drives.

mod common;
#[path = "common/cluster.rs"]
mod harness;

use harness::*;

use std::time::Duration;

use bytes::Bytes;
use common::{runtime, TestDrive};
use spindle_client::{Client, ClientConfig, PutOptions};
use spindle_cluster::control::{HealthState, MemberChange};
use spindle_cluster::pool::Pool;
use spindle_cluster::{ClusterError, ClusterMap, Control, Member, Store, StoreConfig, StripeError};

const POOL: &str = "cold";

fn stripe(object: usize, index: u32) -> Bytes {
    // Full stripes, a short last one, and one of a few bytes.
    let len = match (object % 3, index) {
        (0, _) => 1 << 20,
        (1, 2) => 333_333,
        (2, _) => 37,
        _ => 1 << 20,
    };
    Bytes::from((0..len).map(|i| ((i * 31 + object * 7 + index as usize * 13) % 251) as u8).collect::<Vec<u8>>())
}

fn name(object: usize) -> Vec<u8> {
    format!("object-{object}").into_bytes()
}

/// A connection to one member of `map` at its epoch: shards read and written as they lie.
async fn drive_of(map: &ClusterMap, id: &str) -> Client {
    let config = ClientConfig { cluster_version: map.epoch as i64, ..ClientConfig::default() };
    Client::connect(map.members[id].addr.as_str(), config).await.unwrap()
}

async fn all_read_right(store: &Store, objects: usize, stripes: u32) -> Result<(), String> {
    for o in 0..objects {
        for i in 0..stripes {
            let want = stripe(o, i);
            let got = store.get_stripe(POOL, &name(o), i, want.len()).await.map_err(|e| e.to_string())?.to_bytes();
            if got != want {
                return Err(format!("object {o} stripe {i}: wrong bytes"));
            }
        }
    }
    Ok(())
}

/// Cluster `cluster` with the default pool on `drives[0]` alone and the 4+2 pool `POOL` on
/// the six others (p1..p6), every group placed and every drive up.
async fn pool_cluster(etcd: &str, cluster: &str, drives: &[TestDrive]) -> (Control, ClusterMap) {
    let control = control(etcd, cluster).await;
    control.init(&ClusterMap::new(4, 1, 1).unwrap()).await.unwrap();
    add_addresses(&control, &[drives[0].addr.clone()]).await;
    let pool = Pool::new("4+2".parse().unwrap(), 16).unwrap();
    control.request_change(&MemberChange::AddPool { name: POOL.into(), pool }).await.unwrap();
    until("the pool to exist", Duration::from_secs(30), async || control.load_map().await.ok()?.0.pools.contains_key(POOL).then_some(())).await;
    // Its drives are p1..p6; a drive of another pool, or the default one, is none of its.
    for (i, d) in drives.iter().enumerate().skip(1) {
        let member = Member { id: format!("p{i}"), addr: d.addr.clone(), tls_port: None, capacity: 0, weight: 1.0, domain: None, leaving: false, pool: Some(POOL.into()) };
        control.request_change(&MemberChange::Add(member)).await.unwrap();
    }
    let map = until("every group placed on six drives, all up", Duration::from_secs(60), async || {
        let (map, _) = control.load_map().await.ok()?;
        let health = control.health().await.ok()?;
        let placed = map.pools.get(POOL)?.placement.iter().all(|g| g.len() == 6);
        let up = health.values().filter(|h| h.state == HealthState::Up).count() == drives.len();
        (placed && up).then_some(map)
    })
    .await;
    (control, map)
}

#[test]
fn stripes_read_back_through_damaged_shards_and_lost_drives_and_fail_cleanly_beyond() {
    let dir = tempfile::tempdir().unwrap();
    let etcd = Etcd::start(dir.path(), 1);
    let mut drives: Vec<TestDrive> = (0..7).map(|_| TestDrive::start(&[])).collect();
    let _coordinator = coordinator(&etcd.endpoints(), "ec", "c1");
    runtime().block_on(async {
        let (control, map) = pool_cluster(&etcd.endpoints(), "ec", &drives).await;
        // The default pool's partitions stay on its own drive.
        assert!(map.placement.iter().all(|r| r == &vec!["d0".to_string()]));

        let store = Store::open(control.clone(), StoreConfig::default()).await.unwrap();
        let (objects, stripes) = (6, 3);
        for o in 0..objects {
            for i in 0..stripes {
                store.put_stripe(POOL, &name(o), i, stripe(o, i)).await.unwrap();
            }
        }
        all_read_right(&store, objects, stripes).await.unwrap();

        // Bit rot: one shard's byte flipped on its drive. The read finds it and rebuilds.
        let p = map.pools[POOL].clone();
        let group = p.group_of(&name(0));
        let holder = &p.drives_of(group)[1];
        let direct = drive_of(&map, holder).await;
        let key = spindle_cluster::store::shard_key(group, &name(0), 0, 1);
        let original = direct.get(&key).await.unwrap().expect("the shard is on its drive").value;
        let mut value = original.to_vec();
        let at = value.len() / 2;
        value[at] ^= 0x40;
        direct.put(&key, Bytes::from(value), PutOptions { force: true, ..PutOptions::default() }).await.unwrap();
        all_read_right(&store, objects, stripes).await.unwrap();

        // Two drives killed besides: that stripe has 3 good shards of the 4 it needs, and says
        // what is missing; every other stripe reads right from parity.
        let holder_index: usize = holder.trim_start_matches('p').parse().unwrap();
        let victims: Vec<usize> = (1..=6).filter(|i| *i != holder_index).take(3).collect();
        drives[victims[0]].kill();
        drives[victims[1]].kill();
        let lost = store.get_stripe(POOL, &name(0), 0, stripe(0, 0).len()).await.unwrap_err();
        match &lost {
            ClusterError::Stripe(StripeError::Lost { have, need, missing, .. }) => {
                assert_eq!((*have, *need), (3, 4), "{lost}");
                assert!(missing.contains("damaged") && missing.contains("did not answer"), "{missing}");
            }
            other => panic!("expected a lost stripe, got {other}"),
        }
        for o in 1..objects {
            for i in 0..stripes {
                assert_eq!(store.get_stripe(POOL, &name(o), i, stripe(o, i).len()).await.unwrap().to_bytes(), stripe(o, i));
            }
        }
        // The shard put right: with two drives down every stripe reads right.
        direct.put(&key, original, PutOptions { force: true, ..PutOptions::default() }).await.unwrap();
        all_read_right(&store, objects, stripes).await.expect("reads with two drives down");
        // A write cannot put every shard on a drive: refused, nothing acknowledged.
        let refused = store.put_stripe(POOL, b"while-down", 0, stripe(0, 0)).await.unwrap_err();
        assert!(matches!(refused, ClusterError::Stripe(StripeError::Incomplete { .. })), "{refused}");

        // A third drive down: more than the parity, a clear error and no bytes.
        drives[victims[2]].kill();
        let lost = store.get_stripe(POOL, &name(1), 0, stripe(1, 0).len()).await.unwrap_err();
        assert!(matches!(lost, ClusterError::Stripe(StripeError::Lost { have: 3, need: 4, .. })), "{lost}");

        // Back: everything reads right again.
        for &i in &victims {
            drives[i].restart_same_port();
        }
        until("every stripe to read right with the drives back", Duration::from_secs(60), async || all_read_right(&store, objects, stripes).await.ok()).await;

        // Deleted: every shard of every stripe, from every drive of the group.
        for o in 0..objects {
            let deleted = store.delete_stripes(POOL, &name(o)).await.unwrap();
            assert_eq!(deleted, u64::from(stripes) * 6, "object {o}");
            assert!(store.get_stripe(POOL, &name(o), 0, 37).await.is_err());
        }
        assert_eq!(store.delete_stripes(POOL, &name(0)).await.unwrap(), 0);
    });
}

/// A pool of seven drives (one more than a stripe's width) with a coordinator that replaces a
/// drive down for 3 s: its positions go to the spare and are rebuilt there, so that two more
/// drives down still leave every stripe readable; a scrub rewrites a shard whose bytes rotted;
/// a drive that joins takes positions and gets their shards.
#[test]
fn a_lost_drive_is_rebuilt_a_scrub_heals_rot_and_a_joining_drive_gets_its_shards() {
    let dir = tempfile::tempdir().unwrap();
    let etcd = Etcd::start(dir.path(), 1);
    let mut drives: Vec<TestDrive> = (0..9).map(|_| TestDrive::start(&[])).collect();
    let args = ["--probe-ms", "200", "--down-after-ms", "1000", "--replace-after-ms", "3000", "--sweep-interval-ms", "300", "--sweep-grace-ms", "1000", "--migrate-mib-s", "0"];
    let _coordinator = coordinator_with(&etcd.endpoints(), "heal", "c1", &args);
    runtime().block_on(async {
        let control = control(&etcd.endpoints(), "heal").await;
        control.init(&ClusterMap::new(4, 1, 1).unwrap()).await.unwrap();
        add_addresses(&control, &[drives[0].addr.clone()]).await;
        let pool = Pool::new("4+2".parse().unwrap(), 16).unwrap();
        control.request_change(&MemberChange::AddPool { name: POOL.into(), pool }).await.unwrap();
        until("the pool to exist", Duration::from_secs(30), async || control.load_map().await.ok()?.0.pools.contains_key(POOL).then_some(())).await;
        let add = async |i: usize, addr: &str| {
            let member = Member { id: format!("p{i}"), addr: addr.to_string(), tls_port: None, capacity: 0, weight: 1.0, domain: None, leaving: false, pool: Some(POOL.into()) };
            control.request_change(&MemberChange::Add(member)).await.unwrap();
        };
        for (i, d) in drives.iter().enumerate().take(8).skip(1) {
            add(i, &d.addr).await;
        }
        let settled = async |members: usize| {
            until("the pool placed, nothing to rebuild", Duration::from_secs(120), async || {
                let (map, _) = control.load_map().await.ok()?;
                let p = map.pools.get(POOL)?;
                let placed = p.placement.iter().all(|g| g.len() == 6) && p.pending.is_empty();
                (placed && map.members.len() == members).then_some(map)
            })
            .await
        };
        settled(8).await;
        let store = Store::open(control.clone(), StoreConfig::default()).await.unwrap();
        let (objects, stripes) = (12, 2);
        for o in 0..objects {
            for i in 0..stripes {
                store.put_stripe(POOL, &name(o), i, stripe(o, i)).await.unwrap();
            }
        }

        // The remains of a deleted object the sweeper has half cleared: one shard of a stripe
        // in a group of p3's. With p3 gone it can never be read (even p3's shard would make
        // two of four), so it must not hold the rebuild up.
        let (map, _) = control.load_map().await.unwrap();
        let p = map.pools[POOL].clone();
        let group = (0..p.groups).find(|g| p.drives_of(*g).iter().any(|d| d == "p3")).expect("a group of p3's");
        let (position, holder) = p.drives_of(group).iter().enumerate().find(|(_, d)| *d != "p3").unwrap();
        let shard = p.code.encode(&stripe(99, 0)).unwrap()[position].clone();
        let direct = drive_of(&map, holder).await;
        direct.put(&spindle_cluster::store::shard_key(group, b"remains", 0, position as u8), shard, PutOptions { force: true, ..PutOptions::default() }).await.unwrap();

        // p3 lost for good: its positions go to the spare and are rebuilt there.
        let before = control.rebuilds().await.unwrap().get(POOL).map_or(0, |r| r.updated_ms);
        drives[3].kill();
        let map = until("p3's positions given away and rebuilt", Duration::from_secs(120), async || {
            let (map, _) = control.load_map().await.ok()?;
            let p = map.pools.get(POOL)?;
            // The progress is recorded just after the map that ends the rebuild.
            let progress = control.rebuilds().await.ok()?.get(POOL).filter(|r| r.finished && r.updated_ms > before).cloned();
            (!p.places("p3") && p.pending.is_empty()).then_some((map, progress?))
        })
        .await;
        let (map, progress) = map;
        assert!(progress.finished && progress.shards > 0 && progress.groups_done > 0, "{progress:?}");
        // As the operator sees it.
        let status = std::process::Command::new(common::spindle_bin())
            .args(["cluster", "pool", "status", POOL, "--json", "--cluster", "heal", "--etcd", &etcd.endpoints()])
            .output()
            .unwrap();
        assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));
        let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
        let pool = &status["pools"][0];
        assert_eq!((pool["groups_to_rebuild"].as_u64(), pool["rebuild"]["finished"].as_bool()), (Some(0), Some(true)), "{pool}");
        assert!(pool["rebuild"]["shards"].as_u64().unwrap() > 0 && pool["rebuild"]["mib_per_sec"].as_f64().is_some(), "{pool}");
        assert!(pool["drives"].as_array().unwrap().iter().any(|d| d["id"] == "p3" && d["positions"] == 0), "{pool}");
        // Two more down: every group has four of its six, the rebuilt one among them.
        store.refresh().await.unwrap();
        let (a, b) = (1, 5);
        drives[a].kill();
        drives[b].kill();
        all_read_right(&store, objects, stripes).await.expect("reads after the rebuild, with two more drives down");
        drives[a].restart_same_port();
        drives[b].restart_same_port();

        // Rot on one shard: the scrub finds it and writes it again.
        let p = map.pools[POOL].clone();
        let group = p.group_of(&name(4));
        let holder = p.drives_of(group)[2].clone();
        let direct = drive_of(&map, &holder).await;
        let key = spindle_cluster::store::shard_key(group, &name(4), 1, 2);
        let good = until("the shard readable on its drive", Duration::from_secs(30), async || direct.get(&key).await.ok().flatten()).await.value;
        let mut rotten = good.to_vec();
        let at = rotten.len() - 3;
        rotten[at] ^= 1;
        direct.put(&key, Bytes::from(rotten), PutOptions { force: true, ..PutOptions::default() }).await.unwrap();
        until("the scrub to rewrite the rotten shard", Duration::from_secs(120), async || {
            let now = direct.get(&key).await.ok().flatten()?;
            (now.value == good).then_some(())
        })
        .await;

        // A drive joins: it takes positions, and their shards are written to it.
        add(8, &drives[8].addr).await;
        let joined = until("p8 placed, its shards rebuilt", Duration::from_secs(120), async || {
            let (map, _) = control.load_map().await.ok()?;
            let p = map.pools.get(POOL)?;
            (p.places("p8") && p.pending.is_empty()).then_some(map)
        })
        .await;
        // A group holding p8 reads right with two of its other drives down: p8's shard counts.
        let p = joined.pools[POOL].clone();
        let o = (0..objects).find(|o| p.drives_of(p.group_of(&name(*o))).iter().any(|d| d == "p8")).expect("an object in a group of p8");
        let victims: Vec<usize> = p.drives_of(p.group_of(&name(o))).iter().filter(|d| *d != "p8").take(2).map(|d| d[1..].parse().unwrap()).collect();
        store.refresh().await.unwrap();
        for &i in &victims {
            drives[i].kill();
        }
        for i in 0..stripes {
            assert_eq!(store.get_stripe(POOL, &name(o), i, stripe(o, i).len()).await.unwrap().to_bytes(), stripe(o, i), "object {o} stripe {i}");
        }
    });
}

/// A pool drive with no room left: a stripe is refused as full (`StripeError::Incomplete`
/// counting the shard refused for lack of space, which the gateway answers 507), not as a drive
/// down, and every stripe acknowledged before reads back whole.
#[test]
fn a_full_pool_drive_refuses_stripes_as_full_and_keeps_what_it_holds() {
    let dir = tempfile::tempdir().unwrap();
    let etcd = Etcd::start(dir.path(), 1);
    let quota = (24u64 << 20).to_string();
    let flags = |i: usize| -> Vec<&str> { if i == 3 { vec!["--capacity-bytes", &quota] } else { Vec::new() } };
    let drives: Vec<TestDrive> = (0..7).map(|i| TestDrive::start(&flags(i))).collect();
    let _coordinator = coordinator(&etcd.endpoints(), "ecfull", "c1");
    runtime().block_on(async {
        let (control, _) = pool_cluster(&etcd.endpoints(), "ecfull", &drives).await;
        let store = Store::open(control, StoreConfig::default()).await.unwrap();
        // 1 MiB stripes: a 256 KiB shard on each of the six drives, p3 among them.
        let mut stored = 0;
        let refused = loop {
            assert!(stored < 400, "400 MiB of stripes went into a pool with a drive of 24 MiB");
            match store.put_stripe(POOL, &name(0), stored, stripe(0, stored)).await {
                Ok(()) => stored += 1,
                Err(e) => break e,
            }
        };
        assert!(matches!(refused, ClusterError::Stripe(StripeError::Incomplete { out_of_space: 1, written: 5, .. })), "{refused}");
        assert!(refused.is_full(), "{refused}");
        assert!(stored > 8, "only {stored} stripes fit");
        for i in 0..stored {
            assert_eq!(store.get_stripe(POOL, &name(0), i, 1 << 20).await.unwrap().to_bytes(), stripe(0, i), "stripe {i}");
        }
    });
}
