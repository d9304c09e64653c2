//! Anti-entropy for one partition: every key any reachable replica holds, brought to its
//! newest tag on every reachable replica. Used when a drive comes back (the writes it missed)
//! and when placement gives a partition a new replica. Safe under concurrent client writes:
//! every copy is a store-if-newer, so a repair never replaces a newer write with an older one.
//! The partition is walked a page of keys at a time, so its size bounds no memory.

use std::collections::BTreeMap;

use bytes::Bytes;
use futures_util::future::try_join_all;
use spindle_client::{Client, ClientError};

use crate::map;
use crate::replica::{self, Held};
use crate::stamp::{Stamp, NOTHING};
use crate::tag::Tag;

/// Repairs `partition` over `replicas` (drive id and connection; unreachable ones left out).
/// Returns the number of entries written to replicas that lacked the newest.
pub async fn repair_partition(partition: u32, replicas: &[(String, Client)]) -> Result<u64, ClientError> {
    let mut copied = 0;
    let mut from: Option<Bytes> = None;
    loop {
        let query = map::page_query(partition, from.as_deref().unwrap_or_default(), from.is_some(), None, map::KEY_PAGE);
        let answers = try_join_all(replicas.iter().map(|(_, c)| c.get_key_range(query.clone()))).await?;
        let (keys, next) = map::page_union(partition, answers, map::KEY_PAGE);
        // What every replica holds of the page, asked all at once (pipelined): most keys agree
        // and cost nothing more.
        let dkeys: Vec<Bytes> = keys.iter().map(|k| map::drive_key(partition, k)).collect();
        let held = try_join_all(replicas.iter().map(|(_, c)| replica::held_many(c, &dkeys))).await?;
        for (i, key) in dkeys.iter().enumerate() {
            let per_replica: BTreeMap<&str, Held> = replicas.iter().zip(&held).map(|((id, _), h)| (id.as_str(), h[i].clone())).collect();
            let mut tags = per_replica.values().map(Held::order);
            let first = tags.next().flatten();
            if first.is_some() && tags.all(|t| t == first) {
                continue;
            }
            copied += repair_key(partition, key, replicas, per_replica).await?;
        }
        match next {
            Some(n) => from = Some(n),
            None => return Ok(copied),
        }
    }
}

/// Brings one drive key to its newest write on every replica; returns the copies made: a
/// late accept of that write under the ballot it holds, taken only by replicas that stand
/// below it. A batch's entry is copied with the rest of its batch, atomically, as readers
/// write it back.
async fn repair_key(partition: u32, key: &Bytes, replicas: &[(String, Client)], held: BTreeMap<&str, Held>) -> Result<u64, ClientError> {
    let Some(newest) = held.values().filter_map(|h| h.stamp().filter(|s| s.identity != NOTHING)).max_by_key(Stamp::order) else { return Ok(0) };
    let holds = |id: &str| held[id].holds(newest.identity, newest.ballot);
    let Some((_, source)) = replicas.iter().find(|(id, _)| holds(id)) else { return Ok(0) };
    let lacking: Vec<&(String, Client)> = replicas.iter().filter(|(id, _)| !holds(id)).collect();
    if lacking.is_empty() {
        return Ok(0);
    }
    let Some(entry) = source.get(key).await? else { return Ok(0) };
    if !Held::from_version(entry.metadata.version.clone()).holds(newest.identity, newest.ballot) {
        // Overwritten meanwhile by a newer write, which reaches every replica itself.
        return Ok(0);
    }
    let mut copied = 0;
    if newest.identity.is_batch() {
        let Some(entries) = batch_of(partition, source, key, newest.identity, &entry.value).await? else { return Ok(0) };
        for (_, c) in lacking {
            if replica::accept_batch(c, &entries, newest.ballot, None).await? == replica::Answer::Yes {
                copied += 1;
            }
        }
        return Ok(copied);
    }
    for (id, c) in lacking {
        let known = held.get(id.as_str()).cloned();
        if replica::accept(c, key, entry.value.clone(), newest.identity, newest.ballot, known).await? == replica::Answer::Yes {
            copied += 1;
        }
    }
    Ok(copied)
}

/// The entries of the batch whose entry for `key` (tagged `tag`) is `value`, as `source` holds
/// them; `None` if `source` no longer holds every member at that write. A member replaced by a
/// newer write is not copied without it: the batch would then be on replicas with that member
/// older, which a reader could meet on a quorum. The member's own repair copies the newer
/// write, and readers write the batch back whole (settling the newer member first).
async fn batch_of(partition: u32, source: &Client, key: &Bytes, tag: Tag, value: &Bytes) -> Result<Option<Vec<replica::BatchEntry>>, ClientError> {
    let Some((members, _)) = crate::batch::decode_entry(value) else { return Ok(None) };
    let mut entries = vec![(key.clone(), value.clone(), tag)];
    for member in members {
        let mkey = map::drive_key(partition, &member);
        if mkey == *key {
            continue;
        }
        match source.get(&mkey).await? {
            Some(e) => match Stamp::decode(&e.metadata.version) {
                Some(s) if s.identity.same_write(&tag) => entries.push((mkey, e.value, s.identity)),
                _ => return Ok(None),
            },
            None => return Ok(None),
        }
    }
    Ok(Some(entries))
}
