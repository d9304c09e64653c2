//! Erasure-coded pools kept whole by the coordinator: shards rebuilt where a position of a
//! group went to another drive (a drive lost for good, one joining or leaving), and a scrub
//! that reads every shard of a group's stripes, checks each, and rewrites those missing,
//! damaged or out of step with the rest.
//!
//! A group's stripes are listed from the drive of a position that did not change (every
//! acknowledged stripe has a shard at every position). A stripe is healed from any `data` of
//! its shards that check; the shards to heal are encoded again and written to their drives.
//! A rebuild is paced by the move throttle and recorded in etcd as it goes; the group leaves
//! the pool's pending list only once each of its stripes is whole, so a coordinator that dies
//! midway leaves its successor the same work (rewriting a shard is harmless).

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::join_all;
use futures_util::stream::StreamExt;
use spindle_client::{Client, ClientConfig, ClientError, PutOptions, Synchronization};
use tokio::time::Instant;

use crate::control::{Control, RebuildProgress};
use crate::erasure::{self, Code};
use crate::map::{self, ClusterMap};
use crate::metrics::CoordinatorMetrics;
use crate::migrate::{Drives, Throttle};
use crate::pool::Pool;
use crate::ClusterError;

#[derive(Debug, thiserror::Error)]
pub enum RebuildError {
    #[error("drive {drive}: {source}")]
    Drive { drive: String, source: ClientError },
    #[error("drive {drive}: the rebuilt shards could not be made durable: {reason}")]
    Unsynced { drive: String, reason: String },
    #[error("group {group}: no position that kept its drive answers (the stripes cannot be listed)")]
    NoLister { group: u32 },
}

/// What healing did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Healed {
    pub stripes: u64,
    pub shards: u64,
    pub bytes: u64,
    pub unhealable: u64,
}

impl std::ops::AddAssign for Healed {
    fn add_assign(&mut self, o: Healed) {
        self.stripes += o.stripes;
        self.shards += o.shards;
        self.bytes += o.bytes;
        self.unhealable += o.unhealable;
    }
}

/// Places the erasure-coded pools' groups where their members call for, if that differs
/// from the map: a drive that joined takes positions, one failed or leaving gives its own up
/// (the other positions stay, so every other shard stays where readers look), each change
/// pending until `step` rebuilds it. `true` if the map changed.
pub(crate) async fn place(control: &Control, client: &ClientConfig, metrics: &CoordinatorMetrics, map: &ClusterMap, revision: i64, failed: &std::collections::BTreeSet<String>) -> Result<bool, ClusterError> {
    let mut next = map.clone();
    if !next.place_pools(failed) {
        return Ok(false);
    }
    next.epoch += 1;
    if control.replace_map(revision, &next).await? {
        metrics.map_changed();
        tracing::info!("epoch {}: pool placement changed", next.epoch);
        crate::migrate::connect_all(&next, client).await;
    }
    Ok(true)
}

/// The first pool with pending groups not to `skip`, and up to `most` of those groups.
pub fn next_pending(map: &ClusterMap, most: usize, skip: &dyn Fn(&str, u32) -> bool) -> Option<(String, Vec<u32>)> {
    map.pools.iter().find_map(|(name, pool)| {
        let groups: Vec<u32> = pool.pending.keys().copied().filter(|g| !skip(name, *g)).take(most).collect();
        (!groups.is_empty()).then(|| (name.clone(), groups))
    })
}

/// One step of the coordinator's rebuild: up to `GROUPS_AT_ONCE` pending groups of a pool
/// healed (their pending positions' shards written to their new drives), then taken off the
/// pool's pending list in one compare-and-swap of the map, and the progress recorded. `true`
/// if there was anything to do (the next step follows at once). A group that fails waits
/// `RETRY_AFTER`; the others go on.
pub(crate) async fn step(
    control: &Control,
    client: &ClientConfig,
    rate: u64,
    metrics: &CoordinatorMetrics,
    map: &ClusterMap,
    revision: i64,
    unhealed: &mut BTreeMap<(String, u32), Instant>,
) -> Result<bool, ClusterError> {
    unhealed.retain(|_, until| *until > Instant::now());
    let Some((name, groups)) = next_pending(map, GROUPS_AT_ONCE, &|pool, g| unhealed.contains_key(&(pool.to_string(), g))) else { return Ok(false) };
    let pool = map.pool(&name)?;
    let drives = crate::migrate::connect_all(map, client).await;
    let throttle = Throttle::new(rate);
    let started = crate::control::now_ms();
    let work: Vec<(u32, Vec<usize>)> = groups.iter().map(|&g| (g, pool.pending.get(&g).map(|p| p.keys().map(|i| usize::from(*i)).collect()).unwrap_or_default())).collect();
    let results = heal_groups(pool, &work, false, REBUILD_STRIPES_AT_ONCE, &drives, &throttle).await;
    let mut done = Vec::new();
    let mut healed = Healed::default();
    for (g, r) in results {
        match r {
            Ok(h) if h.unhealable == 0 => {
                done.push(g);
                healed += h;
            }
            Ok(h) => {
                tracing::warn!("pool {name} group {g}: {} stripes have too few good shards to rebuild; trying again later", h.unhealable);
                unhealed.insert((name.clone(), g), Instant::now() + RETRY_AFTER);
            }
            Err(e) => {
                tracing::warn!("pool {name} group {g}: {e}; trying again later");
                unhealed.insert((name.clone(), g), Instant::now() + RETRY_AFTER);
            }
        }
    }
    if done.is_empty() {
        return Ok(true);
    }
    let mut next = map.clone();
    if let Some(p) = next.pools.get_mut(&name) {
        for g in &done {
            p.pending.remove(g);
        }
    }
    if !control.replace_map(revision, &next).await? {
        return Ok(true);
    }
    let left = next.pools.get(&name).map_or(0, |p| p.pending.len());
    let mut rebuilds = control.rebuilds().await?;
    let progress = rebuilds.entry(name.clone()).or_default();
    if progress.groups_done == 0 || progress.finished {
        *progress = RebuildProgress { started_ms: started, rate_limit: rate, ..Default::default() };
    }
    progress.finished = left == 0;
    progress.groups_done += done.len() as u32;
    progress.shards += healed.shards;
    progress.bytes += healed.bytes;
    progress.updated_ms = crate::control::now_ms();
    control.save_rebuilds(&rebuilds).await?;
    metrics.moved(healed.bytes, healed.shards);
    tracing::info!("pool {name}: {} groups rebuilt, {} shards of {} stripes ({left} groups left)", done.len(), healed.shards, healed.stripes);
    Ok(true)
}

/// Heals `group` of `pool`: the shards of `targets` (positions; all of them for a scrub, which
/// also checks that parity agrees with the data) of every stripe listed there.
pub async fn heal_group(pool: &Pool, group: u32, targets: &[usize], scrub: bool, drives: &Drives, throttle: &Throttle) -> Result<Healed, RebuildError> {
    let mut healed = heal_groups(pool, &[(group, targets.to_vec())], scrub, GROUP_STRIPES_AT_ONCE, drives, throttle).await;
    healed.pop().map_or(Ok(Healed::default()), |(_, h)| h)
}

/// Heals several groups at once, each with its target positions: every group's stripes are
/// listed, then all of them go through one window of `at_once` stripes, so that a group with
/// few stripes does not leave the drives idle while a large one finishes.
async fn heal_groups(pool: &Pool, work: &[(u32, Vec<usize>)], scrub: bool, at_once: usize, drives: &Drives, throttle: &Throttle) -> Vec<(u32, Result<Healed, RebuildError>)> {
    let listed = join_all(work.iter().map(|(g, _)| list_group(pool, *g, drives))).await;
    let mut results: Vec<(u32, Result<Healed, RebuildError>)> = Vec::with_capacity(work.len());
    let mut stripes = Vec::new();
    for (i, ((g, _), list)) in work.iter().zip(listed).enumerate() {
        match list {
            Ok(list) => stripes.extend(list.into_iter().map(|(object, index)| (i, object, index))),
            Err(e) => {
                results.push((*g, Err(e)));
                continue;
            }
        }
        results.push((*g, Ok(Healed::default())));
    }
    let mut heals = futures_util::stream::iter(stripes)
        .map(|(i, object, index)| {
            let (group, targets) = (&work[i].0, &work[i].1);
            async move {
                let placed = pool.drives_of(*group);
                // Where a position's shard may still be while its move is pending: the drive
                // that held it.
                let pending = pool.pending.get(group);
                let holders: Vec<Option<&String>> = (0..placed.len()).map(|p| pending.and_then(|m| m.get(&(p as u8)))).collect();
                let started = Instant::now();
                let h = heal_stripe(pool.code, *group, placed, &holders, drives, &object, index, targets, scrub).await;
                if let Ok(h) = &h {
                    throttle.pace(h.bytes, started.elapsed()).await;
                }
                (i, h)
            }
        })
        .buffer_unordered(at_once);
    while let Some((i, h)) = heals.next().await {
        let slot = &mut results[i].1;
        match (slot.as_mut(), h) {
            (Ok(sum), Ok(h)) => *sum += h,
            (Ok(_), Err(e)) => *slot = Err(e),
            (Err(_), _) => {}
        }
    }
    // The rebuilt shards are durable before anyone counts on them: one sync per drive written
    // to, all at once, not one per shard; a group whose drive fails it stays pending.
    if !scrub {
        let written: Vec<bool> = results.iter().map(|(_, r)| r.as_ref().is_ok_and(|h| h.shards > 0)).collect();
        let targets_of = |i: usize| {
            let placed = pool.drives_of(work[i].0);
            work[i].1.iter().filter_map(move |&t| placed.get(t).cloned())
        };
        let to_sync: std::collections::BTreeSet<String> = (0..work.len()).filter(|&i| written[i]).flat_map(targets_of).collect();
        let synced = join_all(to_sync.into_iter().map(|d| async move {
            let r = match drives.get(&d) {
                Some(c) => c.flush_all_data().await,
                None => Err(ClientError::Protocol("not connected".into())),
            };
            (d, r)
        }))
        .await;
        for (d, r) in synced {
            let Err(source) = r else { continue };
            for i in 0..work.len() {
                if written[i] && targets_of(i).any(|t| t == d) {
                    results[i].1 = Err(RebuildError::Unsynced { drive: d.clone(), reason: source.to_string() });
                }
            }
        }
    }
    results
}

/// Every stripe of `group` (object, stripe index), listed from the drives of PARITY + 1 of the
/// positions that kept their drive at once (more, a wave at a time, for those that do not
/// answer): a stripe missing its shard on one drive is still found on another.
async fn list_group(pool: &Pool, group: u32, drives: &Drives) -> Result<std::collections::BTreeSet<(Bytes, u32)>, RebuildError> {
    let placed = pool.drives_of(group);
    let pending = pool.pending.get(&group);
    let stable: Vec<usize> = (0..placed.len()).filter(|i| pending.is_none_or(|p| !p.contains_key(&(*i as u8)))).collect();
    let want = usize::from(pool.code.parity) + 1;
    let mut listed: Option<std::collections::BTreeSet<(Bytes, u32)>> = None;
    let (mut listers, mut next) = (0, 0);
    while listers < want && next < stable.len() {
        let wave = &stable[next..(next + want - listers).min(stable.len())];
        next += wave.len();
        let lists = join_all(wave.iter().map(|&i| async move {
            let list = match drives.get(&placed[i]) {
                Some(c) => Some(stripes_of(c, group, i as u8).await),
                None => None,
            };
            (i, list)
        }))
        .await;
        for (i, list) in lists {
            match list {
                Some(Ok(s)) => {
                    listed.get_or_insert_default().extend(s);
                    listers += 1;
                }
                Some(Err(e)) => tracing::warn!("listing group {group} on {}: {e}", placed[i]),
                None => {}
            }
        }
    }
    listed.ok_or(RebuildError::NoLister { group })
}

/// Every stripe with a shard at `position` on the drive: (object, stripe index).
async fn stripes_of(client: &Client, group: u32, position: u8) -> Result<Vec<(Bytes, u32)>, ClientError> {
    let mut out = Vec::new();
    let mut from = Bytes::new();
    let mut after = false;
    loop {
        let keys = client.get_key_range(map::page_query(group, &from, after, None, map::KEY_PAGE)).await?;
        let Some(last) = keys.last() else { return Ok(out) };
        from = Bytes::copy_from_slice(map::user_key(group, last).unwrap_or_default());
        after = true;
        let full = keys.len() >= map::KEY_PAGE as usize;
        out.extend(keys.iter().filter_map(parse).filter(|(_, _, s)| *s == position).map(|(o, i, _)| (o, i)));
        if !full {
            return Ok(out);
        }
    }
}

/// (object, stripe index, shard) of a shard key (`store::stripes::shard_key`).
fn parse(key: &Bytes) -> Option<(Bytes, u32, u8)> {
    let rest = key.get(map::PARTITION_PREFIX_LEN..)?;
    let len = usize::from(u16::from_be_bytes([*rest.first()?, *rest.get(1)?]));
    let object = rest.get(2..2 + len)?;
    let tail = rest.get(2 + len..)?;
    if tail.len() != 5 {
        return None;
    }
    Some((Bytes::copy_from_slice(object), u32::from_be_bytes([tail[0], tail[1], tail[2], tail[3]]), tail[4]))
}

/// A shard as a drive answered for it: its value if it has one, or the drive and its error.
type ShardRead = Result<Option<Bytes>, (String, ClientError)>;

/// One position's read: the answer; whether the drive that held it (if asked) answered too;
/// whether the value is that drive's (the position's own drive lacks it: still to be written).
type PositionRead = (ShardRead, bool, bool);

/// What the shards read so far say: the stripe's length (as most of their headers say) and
/// each position's verified payload.
fn judge(code: Code, got: &[Option<PositionRead>]) -> Option<(usize, Vec<Option<Bytes>>)> {
    let values = || got.iter().map(|g| g.as_ref().and_then(|(r, _, _)| r.as_ref().ok()).and_then(Option::as_ref));
    let mut lengths: BTreeMap<usize, usize> = BTreeMap::new();
    for v in values().flatten() {
        if let Some(len) = erasure::stripe_len_of(v) {
            *lengths.entry(len).or_default() += 1;
        }
    }
    let (&len, _) = lengths.iter().max_by_key(|(_, n)| **n)?;
    let good = values().enumerate().map(|(s, v)| v.and_then(|v| code.verify(s, len, v).ok())).collect();
    Some((len, good))
}

/// Heals one stripe: writes the shards of `targets` that are missing or do not check (with
/// `scrub`, also parity that disagrees with the data).
///
/// A rebuild reads the targets first: a shard its drive has, or that the drive which held the
/// position still has (a join or a leave), needs no decoding and is copied as it is. Only then
/// are other positions read, data shards first, as many as DATA good shards still need (one
/// more for each missing or damaged): a lost drive's shard costs DATA reads, not the stripe's
/// width. A scrub reads every position. A rebuild (not a scrub) whose target does not answer
/// counts the stripe unhealable, so that its group stays pending, as does one that drives
/// which did not answer could still make readable. A stripe with fewer than DATA shards even
/// counting every position that did not answer is the remains of a deleted object (or of a
/// write that failed), left to the sweepers: waiting would not heal it.
#[allow(clippy::too_many_arguments, reason = "one stripe's address")]
async fn heal_stripe(
    code: Code,
    group: u32,
    placed: &[String],
    holders: &[Option<&String>],
    drives: &Drives,
    object: &[u8],
    index: u32,
    targets: &[usize],
    scrub: bool,
) -> Result<Healed, RebuildError> {
    let width = placed.len();
    let keys: Vec<Bytes> = (0..width).map(|s| crate::store::shard_key(group, object, index, s as u8)).collect();
    let fetch = |d: &String, k: &Bytes| {
        let (d, k) = (d.clone(), k.clone());
        async move {
            match drives.get(&d) {
                Some(c) => c.get(&k).await.map(|e| e.map(|e| e.value)).map_err(|e| (d, e)),
                None => Err((d, ClientError::Protocol("not connected".into()))),
            }
        }
    };
    let read = |s: usize| {
        let (d, k, holder) = (&placed[s], &keys[s], holders.get(s).copied().flatten());
        async move {
            let here = fetch(d, k).await;
            match (&here, holder) {
                (Ok(None), Some(old)) => match fetch(old, k).await {
                    Ok(v) => (Ok(v), true, true),
                    Err(_) => (Ok(None), false, false),
                },
                _ => (here, true, false),
            }
        }
    };
    let data = usize::from(code.data);
    let mut got: Vec<Option<PositionRead>> = (0..width).map(|_| None).collect();
    let mut wave: Vec<usize> = if scrub { (0..width).collect() } else { targets.iter().copied().filter(|&s| s < width).collect() };
    let mut judged;
    loop {
        for (&s, r) in wave.iter().zip(join_all(wave.iter().map(|&s| read(s))).await) {
            got[s] = Some(r);
        }
        judged = judge(code, &got);
        let good = judged.as_ref().map_or(0, |(_, g)| g.iter().flatten().count());
        let copied = !scrub && judged.as_ref().is_some_and(|(_, g)| targets.iter().all(|&t| g.get(t).is_some_and(Option::is_some)));
        let unasked: Vec<usize> = (0..width).filter(|&s| got[s].is_none()).collect();
        if copied || good >= data || unasked.is_empty() {
            break;
        }
        wave = unasked.into_iter().take(data.saturating_sub(good).max(1)).collect();
    }
    // Positions whose drive (or the drive that held the position) did not answer.
    let unknown = got.iter().flatten().filter(|(r, holder, _)| r.is_err() || !*holder).count();
    let all_answered = unknown == 0 && got.iter().all(Option::is_some);
    let borrowed: Vec<bool> = got.iter().map(|g| g.as_ref().is_some_and(|(_, _, b)| *b)).collect();
    let raw: Vec<Option<ShardRead>> = got.into_iter().map(|g| g.map(|(r, _, _)| r)).collect();
    let garbage = Healed { stripes: 1, ..Healed::default() };
    let stuck = Healed { stripes: 1, unhealable: 1, ..Healed::default() };
    // Waiting for the positions that did not answer helps only while they and the shards that
    // exist could together reach DATA.
    let present = raw.iter().filter(|r| matches!(r, Some(Ok(Some(_))))).count();
    let settled = all_answered || present + unknown < data;
    let Some((len, good)) = judged else {
        return Ok(if settled { garbage } else { stuck });
    };
    // The positions to write: a rebuild's targets not already good where they belong; every
    // target of a scrub, whose parity is compared with what the data gives.
    let redo: Vec<usize> = targets.iter().copied().filter(|&s| scrub || borrowed[s] || good[s].is_none()).collect();
    let whole: Vec<Option<Bytes>> = match code.rebuild(len, &good, &redo) {
        Ok(whole) => whole,
        // Every target verified where it was read: the whole shards to write are those values.
        Err(_) if !scrub && targets.iter().all(|&t| good.get(t).is_some_and(Option::is_some)) => {
            raw.iter().map(|r| r.as_ref().and_then(|r| r.as_ref().ok()).cloned().flatten()).collect()
        }
        // Every drive answered and fewer than DATA shards exist at all: never acknowledged,
        // or deleted. Shards that exist but do not check are damage, not garbage.
        Err(_) => return Ok(if settled && present < data { garbage } else { stuck }),
    };
    let mut healed = Healed { stripes: 1, ..Healed::default() };
    for &s in targets {
        let Some(shard) = whole.get(s).cloned().flatten() else { continue };
        let fine = !borrowed[s] && good[s].as_ref().is_some_and(|payload| shard.slice(erasure::SHARD_HEADER..) == *payload);
        if fine {
            continue;
        }
        // A drive that does not answer is not written: a scrub heals its shard once it is
        // back; a rebuild keeps the group pending.
        let Some(c) = drives.get(&placed[s]).filter(|_| !matches!(raw.get(s), Some(Some(Err(_))))) else {
            if !scrub {
                healed.unhealable += 1;
            }
            continue;
        };
        // Written back: the group's drives are flushed once before it leaves the pending list.
        let options = PutOptions { force: true, sync: if scrub { Synchronization::Writethrough } else { Synchronization::Writeback }, ..PutOptions::default() };
        healed.bytes += shard.len() as u64;
        c.put(&keys[s], shard, options).await.map_err(|source| RebuildError::Drive { drive: placed[s].clone(), source })?;
        healed.shards += 1;
    }
    Ok(healed)
}

/// Groups a rebuild step takes on (their stripes healed through one window).
const GROUPS_AT_ONCE: usize = 16;
/// Stripes a rebuild step heals at once: enough to keep every drive of the pool busy (each
/// stripe reads from DATA of them), few enough that a rebuild holds a few tens of MiB.
const REBUILD_STRIPES_AT_ONCE: usize = 32;
/// Stripes of one group healed at once (a scrub's round, in the background).
const GROUP_STRIPES_AT_ONCE: usize = 8;
/// How long a group that could not be rebuilt waits before it is tried again.
pub const RETRY_AFTER: Duration = Duration::from_secs(5);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_keys_parse_back() {
        let k = crate::store::shard_key(9, b"obj", 77, 4);
        assert_eq!(parse(&k), Some((Bytes::from_static(b"obj"), 77, 4)));
        assert_eq!(parse(&Bytes::from_static(b"\0\0\0\x09\0\x09short")), None);
    }

    /// The stripe's length is what most shards read say, and only shards that check under it
    /// count: one rotten header among them is outvoted, not believed.
    #[test]
    fn judged_by_the_shards_read_so_far() {
        let code: Code = "4+2".parse().unwrap();
        let stripe = vec![7u8; 1000];
        let shards = code.encode(&stripe).unwrap();
        let read = |s: usize| Some((Ok(Some(shards[s].clone())), true, false));
        let mut got: Vec<Option<PositionRead>> = (0..6).map(|_| None).collect();
        assert!(judge(code, &got).is_none(), "nothing read: no length");
        got[1] = read(1);
        got[4] = read(4);
        let (len, good) = judge(code, &got).unwrap();
        assert_eq!((len, good.iter().flatten().count()), (1000, 2));
        assert!(good[0].is_none() && good[1].is_some() && good[4].is_some());
        // Shard 2 claims a stripe of 999 bytes (its payload is as long): outvoted, not good.
        let mut rotten = shards[2].to_vec();
        rotten[11] ^= 0x0f;
        got[2] = Some((Ok(Some(Bytes::from(rotten))), true, false));
        let (len, good) = judge(code, &got).unwrap();
        assert_eq!(len, 1000);
        assert!(good[2].is_none());
        got[3] = Some((Ok(None), true, false));
        got[5] = Some((Err(("d5".into(), ClientError::Protocol("down".into()))), true, false));
        assert_eq!(judge(code, &got).unwrap().1.iter().flatten().count(), 2);
    }
}
