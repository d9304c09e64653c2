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
use spindle_cluster::{ClusterError, ClusterMap, Member, Store, StoreConfig, StripeError};

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

async fn all_read_right(store: &Store, objects: usize, stripes: u32) -> Result<(), String> {
    for o in 0..objects {
        for i in 0..stripes {
            let want = stripe(o, i);
            let got = store.get_stripe(POOL, &name(o), i, want.len()).await.map_err(|e| e.to_string())?;
            if got != want {
                return Err(format!("object {o} stripe {i}: wrong bytes"));
            }
        }
    }
    Ok(())
}

#[test]
fn stripes_read_back_through_damaged_shards_and_lost_drives_and_fail_cleanly_beyond() {
    let dir = tempfile::tempdir().unwrap();
    let etcd = Etcd::start(dir.path(), 1);
    let mut drives: Vec<TestDrive> = (0..7).map(|_| TestDrive::start(&[])).collect();
    let _coordinator = coordinator(&etcd.endpoints(), "ec", "c1");
    runtime().block_on(async {
        let control = control(&etcd.endpoints(), "ec").await;
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
            let up = health.values().filter(|h| h.state == HealthState::Up).count() == 7;
            (placed && up).then_some(map)
        })
        .await;
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
        let addr = &map.members[holder].addr;
        let config = ClientConfig { cluster_version: map.epoch as i64, ..ClientConfig::default() };
        let direct = Client::connect(addr.as_str(), config).await.unwrap();
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
                assert_eq!(store.get_stripe(POOL, &name(o), i, stripe(o, i).len()).await.unwrap(), stripe(o, i));
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
