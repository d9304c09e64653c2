//! Live migration: partitions move between drives while clients read and write.
//!
//! A move takes two epochs (docs/design/live-migration.md has the argument and the failure cases):
//! 1. **Start** (epoch e+1, one etcd transaction): the map names, for each moving partition,
//!    the drives it will have. Every drive is fenced to e+1, so no write of epoch e can still
//!    be acknowledged. Clients now write to the old and the new replicas and need a write
//!    quorum of each (store.rs); reads still ask the old replicas.
//! 2. **Copy**, partition by partition: one current replica pushes to each new drive the
//!    entries it lacks (PEER2PEERPUSH: the drives move the data, not the coordinator), each
//!    copy a put that lands only where the key is absent, so a client's newer write is never
//!    replaced; paced to the bandwidth limit. Then a catch-up pass over old and new replicas
//!    together brings every key to its newest write on all of them (store if newer): writes
//!    that a read quorum of the old replicas acknowledged, but not the pushing one.
//! 3. **Flip** (epoch e+2, one transaction): the new drives become the partition's replicas;
//!    drives are fenced again. The sweeper removes what the old owners no longer need after
//!    a grace period.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tokio::time::Instant;

use bytes::Bytes;
use futures_util::future::join_all;
use spindle_client::{Client, ClientConfig, ClientError, LogType, MessageType, Peer, PushOp, RangeQuery, StatusCode};
use tracing::{info, warn};

use crate::map::{self, ClusterMap, Member};
use crate::repair;
use crate::control::Control;
use crate::store::{Store, StoreConfig};
use crate::ClusterError;

/// Connections to a map's drives, each fenced to its epoch (those that answered).
pub type Drives = BTreeMap<String, Client>;

/// A connection to every member that answers, fenced to `map`'s epoch.
pub async fn connect_all(map: &ClusterMap, config: &ClientConfig) -> Drives {
    let epoch = map.epoch as i64;
    let tries = map.members.values().map(|m| async move { (m.id.clone(), crate::fence::fenced_client(&m.addr, epoch, config).await) });
    join_all(tries).await.into_iter().filter_map(|(id, c)| c.map(|c| (id, c))).collect()
}

/// Partitions copied at once: enough to keep a drive's push pipeline and the catch-up pass's
/// reads overlapping, few enough that a move is a background load.
pub const PARALLEL_COPIES: usize = 4;

/// Members of noted batches the leader settles at once before a flip: each a read and
/// perhaps write-backs, on the partitions that move.
const MAX_NOTED_SETTLES: usize = 8;

/// Keeps a move's pushes, all copies together, under a bandwidth limit (bytes per second; 0:
/// none): a schedule that each page of pushes books its bytes on, waiting until the schedule
/// has room. Idle time is not saved up for a burst later.
#[derive(Debug)]
pub struct Throttle {
    rate: u64,
    free_at: parking_lot::Mutex<Option<Instant>>,
}

impl Throttle {
    pub fn new(rate: u64) -> Throttle {
        Throttle { rate, free_at: parking_lot::Mutex::new(None) }
    }

    /// Books `bytes` just moved (in `took`) and waits until the limit allows the next page.
    pub async fn pace(&self, bytes: u64, took: Duration) {
        if self.rate == 0 {
            return;
        }
        let now = Instant::now();
        let until = {
            let mut free_at = self.free_at.lock();
            // This page's transfer started `took` ago; the schedule is not behind that.
            let start = free_at.map_or(now - took, |f| f.max(now - took));
            let until = start + Duration::from_secs_f64(bytes as f64 / self.rate as f64);
            *free_at = Some(until);
            until
        };
        tokio::time::sleep_until(until).await;
    }
}

/// What copying one partition took.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Copied {
    /// Value bytes pushed drive to drive.
    pub bytes: u64,
    /// Entries pushed.
    pub entries: u64,
    /// Entries the catch-up pass copied.
    pub repaired: u64,
}

/// What copies share: the connections, the bandwidth schedule, and one lock per source
/// drive, held over a page's push and the two readings of the drive's push counter around it,
/// so that copies pushing from one drive at once do not count each other's bytes.
pub struct Movers {
    pub drives: Drives,
    pub throttle: Throttle,
    push_locks: BTreeMap<String, tokio::sync::Mutex<()>>,
    /// A cluster client at the move's map, for the keys a late accept cannot bring to their
    /// newest write (`repair::repair_partition_noting`): opened the first time one is met
    /// (rarely), from `settler`.
    settler: (Control, StoreConfig),
    settling: tokio::sync::OnceCell<Store>,
}

impl Movers {
    pub fn new(drives: Drives, rate: u64, settler: (Control, StoreConfig)) -> Movers {
        let push_locks = drives.keys().map(|d| (d.clone(), tokio::sync::Mutex::new(()))).collect();
        Movers { drives, throttle: Throttle::new(rate), push_locks, settler, settling: tokio::sync::OnceCell::new() }
    }
}

/// Whether enough of `partition`'s drives answer (`answers`) for a move to copy it: a read
/// quorum and a write quorum of its replicas, every drive it moves to that it does not have
/// yet, and a write quorum of the drives it moves to.
fn enough_answer(map: &ClusterMap, partition: u32, answers: impl Fn(&str) -> bool) -> Result<(), ClusterError> {
    let old = map.replicas_of(partition);
    let new = map.moving_to(partition).unwrap_or_default();
    let answering = |set: &[String]| set.iter().filter(|d| answers(d)).count();
    let read_quorum = map.read_quorum().min(old.len());
    // Fenced to the move's epoch (`drives` are): a read quorum, to find every write
    // acknowledged before the move, and a write quorum, so that too few replicas are left at
    // the old epoch for a client there to complete a read or a write.
    let fenced = read_quorum.max(usize::from(map.write_quorum)).min(old.len());
    if answering(old) < fenced {
        return Err(ClusterError::TooFewToCopy { partition, answering: answering(old), needed: fenced });
    }
    if let Some(d) = new.iter().find(|d| !old.contains(d) && !answers(d)) {
        return Err(ClusterError::TargetDown { partition, drive: d.clone() });
    }
    // The catch-up brings every write to the drives it moves to that answer, and the flip
    // needs each on a write quorum of them: a drive that stays but is down now does not count.
    // (Implied above for a set as large as the old one; not for one that shrinks, as when
    // fewer members than R remain.)
    let receiving = usize::from(map.write_quorum).min(new.len());
    if answering(new) < receiving {
        return Err(ClusterError::TooFewToReceive { partition, answering: answering(new), needed: receiving });
    }
    Ok(())
}

/// Copies `partition` to the drives it moves to under `map` (a map with a move under way),
/// over `movers.drives` (fenced to the map's epoch). Fails, to be tried again, unless enough
/// of its drives answer (`enough_answer`).
pub async fn copy_partition(map: &ClusterMap, partition: u32, movers: &Movers) -> Result<Copied, ClusterError> {
    let drives = &movers.drives;
    let old = map.replicas_of(partition);
    let Some(new) = map.moving_to(partition) else { return Ok(Copied::default()) };
    enough_answer(map, partition, |d| drives.contains_key(d))?;
    let joining: Vec<&String> = new.iter().filter(|d| !old.contains(d)).collect();
    let read_quorum = map.read_quorum().min(old.len());
    let mut sources: Vec<&String> = old.iter().filter(|d| drives.contains_key(*d)).collect();
    // Partitions start from different replicas, so that copies at once push from different
    // drives.
    let turn = partition as usize % sources.len().max(1);
    sources.rotate_left(turn);
    let mut copied = Copied::default();
    for target in joining {
        let peer = peer_of(&map.members[target], map.security.is_some())?;
        let mut last_error = None;
        for source in &sources {
            let lock = &movers.push_locks[*source];
            match push_range(partition, (&drives[*source], lock), &drives[target], &peer, &movers.throttle, &mut copied).await {
                Ok(()) => {
                    last_error = None;
                    break;
                }
                Err(e) => {
                    warn!("partition {partition}: no push from {source} to {target} ({e}); trying another replica");
                    last_error = Some(ClusterError::Drive { drive: (*source).clone(), source: e });
                }
            }
        }
        if let Some(e) = last_error {
            return Err(e);
        }
    }
    // The new replicas and a read quorum of the old ones together (the old ones that stay
    // first), every key brought to its newest write on all: a write acknowledged before the
    // move is on a write quorum of the old replicas, so on one of any read quorum of them.
    let staying: Vec<&String> = old.iter().filter(|d| new.contains(d) && drives.contains_key(*d)).collect();
    let leaving = old.iter().filter(|d| !new.contains(d) && drives.contains_key(*d));
    let quorum: Vec<&String> = staying.iter().copied().chain(leaving).take(read_quorum.max(staying.len())).collect();
    let everyone: BTreeSet<&String> = quorum.into_iter().chain(new.iter().filter(|d| drives.contains_key(*d))).collect();
    let reachable: Vec<(String, Client)> = everyone.into_iter().filter_map(|d| drives.get(d).map(|c| (d.clone(), c.clone()))).collect();
    let mut blocked = Vec::new();
    copied.repaired = repair::repair_partition_noting(partition, &reachable, &mut blocked)
        .await
        .map_err(|source| ClusterError::CatchUp { partition, source })?;
    // A replica that promised above a key's newest write (a round that never finished, or a
    // push's copy of such a promise) refuses the late accept, and a batch's write whose
    // source no longer holds it whole is not copied: left so, the new replica set could hold
    // the write on fewer than a write quorum (or a batch never chosen, copied by a push, on
    // as many). Settled through the cluster client at the move's map from what every replica
    // holds: written back to the joint write quorums (by a round above a promise that
    // refuses it), a batch without a member only if chosen, else abandoned.
    if !blocked.is_empty() {
        info!("partition {partition}: {} keys not brought to their newest write by repair; settled through the cluster client", blocked.len());
    }
    for dkey in blocked {
        if let Some(key) = map::user_key(partition, &dkey) {
            let (control, config) = &movers.settler;
            let store = movers.settling.get_or_try_init(|| Store::open(control.clone(), config.clone())).await?;
            store.make_chosen(key).await?;
            copied.repaired += 1;
        }
    }
    Ok(copied)
}

/// Settles every member of the batches abandoned during the move (`crate::abandoned`) through
/// the cluster client at the move's map, as a reader settles each: a batch abandoned on one
/// key must not stand on a write quorum of the drives its partition moves to on another when
/// they become the replicas. Returns the partitions whose batches could not all be settled,
/// with the first error: they are not flipped this time.
pub async fn settle_noted(movers: &Movers, noted: &[crate::abandoned::NotedBatch]) -> Result<BTreeMap<u32, ClusterError>, ClusterError> {
    let mut failed = BTreeMap::new();
    if noted.is_empty() {
        return Ok(failed);
    }
    let (control, config) = &movers.settler;
    let store = movers.settling.get_or_try_init(|| Store::open(control.clone(), config.clone())).await?;
    let members: Vec<(u32, &Vec<u8>)> = noted.iter().flat_map(|batch| batch.members.iter().map(move |member| (batch.partition, member))).collect();
    for some in members.chunks(MAX_NOTED_SETTLES) {
        let mut settles = Vec::with_capacity(some.len());
        for &(partition, member) in some {
            settles.push(async move { (partition, store.make_chosen(member).await) });
        }
        for (partition, settle) in join_all(settles).await {
            if let (Err(e), std::collections::btree_map::Entry::Vacant(first)) = (settle, failed.entry(partition)) {
                warn!("partition {partition}: a batch abandoned during the move not settled on every member ({e}); the partition does not flip yet");
                first.insert(e);
            }
        }
    }
    Ok(failed)
}

/// Where a member's drive takes pushes.
fn peer_of(member: &Member, tls: bool) -> Result<Peer, ClusterError> {
    let bad = || ClusterError::from(crate::SettingError::Address(member.addr.clone()));
    let (host, port) = member.addr.rsplit_once(':').ok_or_else(bad)?;
    Ok(Peer { host: host.trim_start_matches('[').trim_end_matches(']').to_string(), port: port.parse().map_err(|_| bad())?, tls })
}

/// Has `source` push every entry of `partition` that `target` lacks, a page of keys at a time.
async fn push_range(
    partition: u32,
    (source, lock): (&Client, &tokio::sync::Mutex<()>),
    target: &Client,
    peer: &Peer,
    throttle: &Throttle,
    copied: &mut Copied,
) -> Result<(), ClientError> {
    let mut from: Option<Bytes> = None;
    loop {
        let query = map::page_query(partition, from.as_deref().unwrap_or_default(), from.is_some(), None, map::KEY_PAGE);
        let keys = source.get_key_range(query).await?;
        let (Some(first), Some(last)) = (keys.first().cloned(), keys.last().cloned()) else { return Ok(()) };
        // What the target has of this stretch already (pushed by a move that was resumed, or
        // written by clients since the move began) is not sent again.
        let have: BTreeSet<Bytes> = target
            .get_key_range(RangeQuery { start: first, start_inclusive: true, end: Some(last.clone()), end_inclusive: true, max_returned: map::KEY_PAGE, reverse: false })
            .await?
            .into_iter()
            .collect();
        let ops: Vec<PushOp> = keys
            .iter()
            .filter(|k| !have.contains(*k))
            // No expected version: the copy lands only where the target holds nothing.
            .map(|k| PushOp { key: k.clone(), force: false, ..PushOp::default() })
            .collect();
        if !ops.is_empty() {
            let started = Instant::now();
            let guard = lock.lock().await;
            let before = pushed_bytes(source).await?;
            let result = source.push_to_peer(peer, ops).await?;
            let bytes = pushed_bytes(source).await?.saturating_sub(before);
            drop(guard);
            for o in &result.operations {
                match o.status {
                    StatusCode::Success => copied.entries += 1,
                    // Written at the target meanwhile (newer), or replaced at the source by
                    // a delete's tombstone under another key path: nothing to copy.
                    StatusCode::VersionMismatch | StatusCode::NotFound => {}
                    code => return Err(ClientError::Status { code, message: format!("pushing {:02x?}: {}", o.key, o.message) }),
                }
            }
            copied.bytes += bytes;
            throttle.pace(bytes, started.elapsed()).await;
        }
        if keys.len() < map::KEY_PAGE as usize {
            return Ok(());
        }
        from = map::user_key(partition, &last).map(Bytes::copy_from_slice);
        if from.is_none() {
            return Ok(());
        }
    }
}

/// Value bytes `drive` has pushed to peers so far (its GETLOG statistics; 0 from a drive that
/// does not count them, which then moves unthrottled).
async fn pushed_bytes(drive: &Client) -> Result<u64, ClientError> {
    let log = drive.get_log(&[LogType::Statistics]).await?;
    Ok(log.statistics.iter().find(|s| s.message_type == Some(MessageType::Peer2peerpush as i32)).and_then(|s| s.bytes).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_throttle_waits_out_what_pages_owe_together() {
        let t = Throttle::new(1 << 20);
        let start = Instant::now();
        // 2 MiB moved in 0.5 s owes 1.5 s more.
        t.pace(2 << 20, Duration::from_millis(500)).await;
        assert_eq!(start.elapsed(), Duration::from_millis(1500));
        // Two copies at once book one schedule: 1 MiB each, moved together in no time, owe
        // two seconds between them.
        let start = Instant::now();
        tokio::join!(t.pace(1 << 20, Duration::ZERO), t.pace(1 << 20, Duration::ZERO));
        assert_eq!(start.elapsed(), Duration::from_secs(2));
        // Idle time is not a credit: after ten quiet seconds, a page still owes its time.
        tokio::time::sleep(Duration::from_secs(10)).await;
        let start = Instant::now();
        t.pace(1 << 20, Duration::ZERO).await;
        assert_eq!(start.elapsed(), Duration::from_secs(1));
        let start = Instant::now();
        Throttle::new(0).pace(1 << 40, Duration::ZERO).await;
        assert_eq!(start.elapsed(), Duration::ZERO);
    }

    fn ids(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn a_partition_is_copied_only_where_a_write_quorum_of_its_new_drives_answers() {
        let mut map = ClusterMap::new(1, 3, 2).unwrap();
        map.placement = vec![ids(&["a", "b", "c"])];
        // Shrinking to two drives (fewer members than R): both must answer, the one that
        // stays as well, though the old replicas answer in enough numbers without it.
        map.moving.insert(0, ids(&["b", "c"]));
        let down = |gone: &'static [&'static str]| move |d: &str| !gone.contains(&d);
        assert!(matches!(enough_answer(&map, 0, down(&["c"])), Err(ClusterError::TooFewToReceive { answering: 1, needed: 2, .. })));
        assert!(enough_answer(&map, 0, down(&["a"])).is_ok());
        // Three to three: a drive that stays may be down, one that joins may not.
        map.moving.insert(0, ids(&["b", "c", "d"]));
        assert!(enough_answer(&map, 0, down(&["c"])).is_ok());
        assert!(matches!(enough_answer(&map, 0, down(&["d"])), Err(ClusterError::TargetDown { .. })));
        assert!(matches!(enough_answer(&map, 0, down(&["a", "b"])), Err(ClusterError::TooFewToCopy { .. })));
    }

    #[test]
    fn peers_are_read_from_member_addresses() {
        let m = Member { id: "d".into(), addr: "10.1.2.3:8123".into(), tls_port: None, capacity: 0, weight: 1.0, domain: None, leaving: false, pool: None };
        assert_eq!(peer_of(&m, false).unwrap(), Peer { host: "10.1.2.3".into(), port: 8123, tls: false });
        assert!(peer_of(&m, true).unwrap().tls);
        let m6 = Member { addr: "[::1]:9".into(), ..m.clone() };
        assert_eq!(peer_of(&m6, false).unwrap().host, "::1");
        assert!(peer_of(&Member { addr: "nohost".into(), ..m }, false).is_err());
    }
}
