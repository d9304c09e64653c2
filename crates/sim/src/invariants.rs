//! What a settled cluster must show on its drives, asked of each drive directly (Kinetic, as
//! the coordinator asks them): every key's value a final read returned stands on a write
//! quorum of the key's replicas (so the loss of any other replica keeps it), no member holds
//! a partition it is not placed on once the sweeper has had its time, and every replica holds
//! it once the sweeper's scrub has passed.

use std::collections::BTreeMap;
use std::time::Duration;

use spindle_client::{Client, RangeQuery};
use spindle_cluster::migrate::Drives;
use spindle_cluster::map::{self, ClusterMap, KEY_PAGE, PARTITION_PREFIX_LEN};
use spindle_cluster::replica;
use spindle_cluster::tag::Tag;

/// Longest, in simulated time, the checks may take once the cluster has settled (the sweeper
/// deleting what members hold of partitions placed elsewhere: it runs every second with a
/// two-second grace; drives answering at the map's epoch): only a defect exceeds it.
pub const SETTLED_WITHIN: Duration = Duration::from_secs(120);


/// What a check found: a broken invariant, or a drive that could not answer (the map moved
/// on under the check, say), to be asked again.
pub enum Found {
    Broken(String),
    Unanswered(String),
    /// The value read of this key is on fewer than a write quorum, and a replica holds a
    /// newer write: one whose writer never learnt its outcome, landed after the read. Looked
    /// at again until its replicas agree on one write (`Agreement::MovedOn`).
    Overtaken(String),
}

/// The first key whose read value does not stand on a write quorum of its replicas. `read`
/// holds, by key, the version a final read returned (`None`: absent).
pub async fn quorum_holds(map: &ClusterMap, drives: &Drives, read: &BTreeMap<String, Option<Vec<u8>>>) -> Result<(), Found> {
    for (key, version) in read {
        let Some(version) = version else { continue };
        let tag = Tag::decode(version).ok_or_else(|| Found::Broken(format!("key {key}: the read returned an undecodable version")))?;
        let partition = map.partition_of(key.as_bytes());
        let dkey = map::drive_key(partition, key.as_bytes());
        let mut holders = Vec::new();
        let mut seen = Vec::new();
        let mut overtaken = false;
        for drive in map.replicas_of(partition) {
            let client = drives.get(drive).ok_or_else(|| Found::Unanswered(format!("replica {drive} of key {key} could not be reached")))?;
            let held = replica::held(client, &dkey).await.map_err(|e| Found::Unanswered(format!("replica {drive} of key {key}: {e}")))?;
            if held.tag().is_some_and(|t| t.same_write(&tag)) {
                holders.push(drive.clone());
            }
            overtaken |= held.tag().is_some_and(|t| !t.same_write(&tag) && t > tag);
            seen.push(format!("{drive}: {:?}", held.stamp()));
        }
        if holders.len() < usize::from(map.write_quorum) && overtaken {
            return Err(Found::Overtaken(key.clone()));
        }
        if holders.len() < usize::from(map.write_quorum) {
            return Err(Found::Broken(format!("key {key}: the value read ({tag:?}) stands on {holders:?} only, fewer than a write quorum; the replicas hold {}", seen.join(", "))));
        }
    }
    Ok(())
}

/// What the replicas of the keys show against a final read.
pub enum Agreement {
    /// Every replica of every key holds the value read.
    Agree,
    /// The replicas of a key do not all hold one write yet (said how).
    Apart(String),
    /// Every replica of this key holds one write, not the one read: one left on a replica
    /// alone whose outcome its writer never learnt, which the scrub carried to the others
    /// after the read. It may stand, linearizable or not as the history says: read again.
    MovedOn(String),
}

/// Whether every replica holds the write a final read returned: the third replica of a write
/// acknowledged by two may lag behind, until a read, a repair or the sweeper's scrub (a
/// partition a round) brings it the newest write, through the cluster client where a replica
/// promised a ballot above it, or where a batch was abandoned (the write standing in its
/// place accepted above it).
pub async fn replicas_agree(map: &ClusterMap, drives: &Drives, read: &BTreeMap<String, Option<Vec<u8>>>) -> Result<Agreement, Found> {
    for (key, version) in read {
        let Some(version) = version else { continue };
        let tag = Tag::decode(version).ok_or_else(|| Found::Broken(format!("key {key}: the read returned an undecodable version")))?;
        let partition = map.partition_of(key.as_bytes());
        let dkey = map::drive_key(partition, key.as_bytes());
        let mut seen = Vec::new();
        let mut held_tags = Vec::new();
        for drive in map.replicas_of(partition) {
            let client = drives.get(drive).ok_or_else(|| Found::Unanswered(format!("replica {drive} of key {key} could not be reached")))?;
            let held = replica::held(client, &dkey).await.map_err(|e| Found::Unanswered(format!("replica {drive} of key {key}: {e}")))?;
            held_tags.push(held.tag());
            seen.push(format!("{drive}: {:?}", held.stamp()));
        }
        if held_tags.iter().all(|t| t.is_some_and(|t| t.same_write(&tag))) {
            continue;
        }
        let one = held_tags.first().copied().flatten();
        if one.is_some() && held_tags.iter().all(|t| t.zip(one).is_some_and(|(t, o)| t.same_write(&o))) {
            return Ok(Agreement::MovedOn(key.clone()));
        }
        return Ok(Agreement::Apart(format!("key {key}: the replicas hold other writes than the value read ({tag:?}): {}", seen.join(", "))));
    }
    Ok(Agreement::Agree)
}

/// Partitions each member holds keys of without being placed there: `(drive, partition)`.
pub async fn foreign(map: &ClusterMap, drives: &Drives) -> Result<Vec<(String, u32)>, Found> {
    let mut found = Vec::new();
    for (drive, client) in drives {
        if !map.members.contains_key(drive) {
            continue;
        }
        for partition in partitions_held(client).await.map_err(|e| Found::Unanswered(format!("listing {drive}: {e}")))? {
            if !map.assigned(drive, partition) {
                found.push((drive.clone(), partition));
            }
        }
    }
    Ok(found)
}

/// The partitions a drive holds any key of, by walking its whole key space a page at a time.
async fn partitions_held(client: &Client) -> Result<Vec<u32>, spindle_client::ClientError> {
    let mut held = Vec::new();
    let mut start = bytes::Bytes::new();
    let mut inclusive = true;
    loop {
        let query = RangeQuery { start: start.clone(), start_inclusive: inclusive, end: None, end_inclusive: false, max_returned: KEY_PAGE, reverse: false };
        let keys = client.get_key_range(query).await?;
        for key in &keys {
            if let Some(prefix) = key.get(..PARTITION_PREFIX_LEN) {
                let partition = u32::from_be_bytes(prefix.try_into().unwrap_or_default());
                if held.last() != Some(&partition) {
                    held.push(partition);
                }
            }
        }
        match keys.last() {
            Some(last) if keys.len() == KEY_PAGE as usize => {
                start = last.clone();
                inclusive = false;
            }
            _ => return Ok(held),
        }
    }
}
