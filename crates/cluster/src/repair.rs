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
use crate::record;
use crate::replica::{self, Held};
use crate::stamp::{Stamp, NOTHING};

/// Repairs `partition` over `replicas` (drive id and connection; unreachable ones left out).
/// Returns the number of entries written to replicas that lacked the newest.
pub async fn repair_partition(partition: u32, replicas: &[(String, Client)]) -> Result<u64, ClientError> {
    repair_partition_noting(partition, replicas, &mut Vec::new()).await
}

/// `repair_partition`, noting in `blocked` the drive keys it could not bring to their newest
/// write: one a replica lacking it refused, having promised a higher ballot (to a round that
/// may never have finished, or as a copy of another replica's entry), where a late accept
/// under the write's own ballot can never land and only a round above that promise can make
/// the write stand; and a batch's write that the source does not hold whole (a member
/// overwritten since, or older), which is copied only once known chosen
/// (`Store::make_chosen`).
pub async fn repair_partition_noting(partition: u32, replicas: &[(String, Client)], blocked: &mut Vec<Bytes>) -> Result<u64, ClientError> {
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
        let now = crate::clock::now_ms();
        for (i, key) in dkeys.iter().enumerate() {
            if map::is_reserved(&keys[i]) {
                // A batch's record (`crate::record`): a hint, not repaired; deleted once old.
                for ((_, c), h) in replicas.iter().zip(&held) {
                    if record::expired(&h[i], now) {
                        record::drop_expired(c, key, &h[i]).await?;
                    }
                }
                continue;
            }
            let per_replica: BTreeMap<&str, Held> = replicas.iter().zip(&held).map(|((id, _), h)| (id.as_str(), h[i].clone())).collect();
            let mut tags = per_replica.values().map(Held::order);
            let first = tags.next().flatten();
            if first.is_some() && tags.all(|t| t == first) {
                continue;
            }
            copied += repair_key(partition, key, replicas, per_replica, blocked, &[]).await?;
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
/// write it back. One whose member the source holds a newer write for has that member
/// repaired first and is left to `Store::make_chosen` (noted in `blocked`): copied without
/// the member it could be half a batch.
fn repair_key<'a>(
    partition: u32,
    key: &'a Bytes,
    replicas: &'a [(String, Client)],
    held: BTreeMap<&'a str, Held>,
    blocked: &'a mut Vec<Bytes>,
    chain: &'a [Bytes],
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<u64, ClientError>> + Send + 'a>> {
    Box::pin(repair_held(partition, key, replicas, held, blocked, chain))
}

/// `repair_key` for a key whose replicas' holdings are not known yet.
async fn repair_fresh(partition: u32, key: &Bytes, replicas: &[(String, Client)], blocked: &mut Vec<Bytes>, chain: &[Bytes]) -> Result<u64, ClientError> {
    let held = try_join_all(replicas.iter().map(|(_, c)| replica::held(c, key))).await?;
    let per_replica: BTreeMap<&str, Held> = replicas.iter().zip(held).map(|((id, _), h)| (id.as_str(), h)).collect();
    repair_key(partition, key, replicas, per_replica, blocked, chain).await
}

async fn repair_held(
    partition: u32,
    key: &Bytes,
    replicas: &[(String, Client)],
    held: BTreeMap<&str, Held>,
    blocked: &mut Vec<Bytes>,
    chain: &[Bytes],
) -> Result<u64, ClientError> {
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
        let Some(gathered) = batch_of(partition, source, key, newest, &entry.value).await? else {
            // The source holds a member older than the batch: not a copy to make from it.
            blocked.push(key.clone());
            return Ok(0);
        };
        // Members the source holds a newer write for are repaired first; not those it holds
        // at the batch's write under a lower ballot (`Gathered::lower`), which are not newer.
        // A member's newest write may be a batch re-accepted under a high ballot, whose own
        // members lead back to this key: the keys on the way here (`chain`) are not repaired
        // again, or the recursion has no end.
        let newer = gathered.replaced.clone();
        let (entries, replaced) = gathered.into_copy();
        if !replaced.is_empty() {
            let chain: Vec<Bytes> = chain.iter().chain([key]).cloned().collect();
            for member in newer.iter().filter(|m| !chain.contains(m)) {
                copied += repair_fresh(partition, member, replicas, blocked, &chain).await?;
            }
            // Copied without the member, a batch never chosen could come to stand on a write
            // quorum of this key alone: half a batch. Whether it was chosen takes every
            // replica (`Store::make_chosen`).
            blocked.push(key.clone());
            return Ok(copied);
        }
        for (id, c) in lacking {
            let answer = replica::accept_batch(c, &entries, newest.ballot, None).await?;
            tracing::debug!(?key, batch = ?newest.identity, to = %id, ?answer, "repair's copy of a batch");
            match answer {
                replica::Answer::Yes => copied += 1,
                replica::Answer::No => blocked.push(key.clone()),
                replica::Answer::Held | replica::Answer::Covered => {}
            }
        }
        return Ok(copied);
    }
    for (id, c) in lacking {
        let known = held.get(id.as_str()).cloned();
        let answer = replica::accept(c, key, entry.value.clone(), newest.identity, newest.ballot, known).await?;
        tracing::debug!(?key, write = ?newest.identity, to = %id, ?answer, "repair's copy");
        match answer {
            replica::Answer::Yes => copied += 1,
            replica::Answer::No => blocked.push(key.clone()),
            replica::Answer::Held | replica::Answer::Covered => {}
        }
    }
    Ok(copied)
}

/// A batch's entries as one replica holds them (`batch_of`).
pub(crate) struct Gathered {
    /// Each member's entry of the batch's write.
    pub entries: Vec<replica::BatchEntry>,
    /// Drive keys of members the replica holds a newer write for.
    pub replaced: Vec<Bytes>,
    /// Drive keys of members it holds the batch's write for under a lower ballot than the
    /// entry read (in `entries` too): left out when that entry was accepted again under a
    /// higher ballot (a round that judged the batch chosen leaves out the members it met a
    /// write above the batch for, and an abandoning puts a chosen batch back in another's
    /// place on one key alone).
    pub lower: Vec<Bytes>,
}

impl Gathered {
    /// What a copy under the read entry's ballot (a repair's, a write-back's) may take, and
    /// the members it leaves out as replaced: the `lower` ones too, which that ballot would
    /// raise above the write they were left out for. A round (`Store::learn_batch`) takes them
    /// all, as it checks every key against the replicas that promised.
    pub fn into_copy(self) -> (Vec<replica::BatchEntry>, Vec<Bytes>) {
        let Gathered { mut entries, mut replaced, lower } = self;
        entries.retain(|(k, _, _)| !lower.contains(k));
        replaced.extend(lower);
        (entries, replaced)
    }
}

/// The entries of the batch whose entry for `key` is `value` (written as `newest`), as
/// `source` holds them, and the drive keys of members `source` holds a newer write for; `None`
/// if `source` holds a member at an older write (it does not have the batch whole). A member
/// replaced by a newer write is not copied with the batch: it must reach every replica first
/// (`repair_key` does that), or the batch would be on replicas with that member older, which
/// a reader could meet on a quorum. Left out instead (as readers leave it out when they write
/// a batch back), the key stayed behind the batch on a replica that missed it.
pub(crate) async fn batch_of(
    partition: u32,
    source: &Client,
    key: &Bytes,
    newest: Stamp,
    value: &Bytes,
) -> Result<Option<Gathered>, ClientError> {
    let tag = newest.identity;
    let Some((members, _)) = crate::batch::decode_entry(value) else { return Ok(None) };
    let mut entries = vec![(key.clone(), value.clone(), tag)];
    let (mut replaced, mut lower) = (Vec::new(), Vec::new());
    for member in members {
        let mkey = map::drive_key(partition, &member);
        if mkey == *key {
            continue;
        }
        match source.get(&mkey).await? {
            Some(e) => match Stamp::decode(&e.metadata.version) {
                Some(s) if s.identity.same_write(&tag) => {
                    if s.ballot < newest.ballot {
                        lower.push(mkey.clone());
                    }
                    entries.push((mkey, e.value, s.identity));
                }
                Some(s) if s.replaces(tag) => replaced.push(mkey),
                other => {
                    tracing::debug!(batch = ?tag, ?key, member = ?mkey, held = ?other, "the source does not hold the batch whole");
                    return Ok(None);
                }
            },
            None => {
                tracing::debug!(batch = ?tag, ?key, member = ?mkey, "the source does not hold the batch whole: a member is absent");
                return Ok(None);
            }
        }
    }
    Ok(Some(Gathered { entries, replaced, lower }))
}
