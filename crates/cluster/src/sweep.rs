//! The sweeper: data on a drive that the map does not place there (an old owner's copy after
//! a move, a move rolled back, a drive that came back after its partitions were re-replicated)
//! is found with a skip-scan and deleted. The coordinator deletes only what it has seen foreign
//! for a grace period, and only while no move is under way; its requests carry the map's
//! epoch, so a coordinator that lost leadership is refused once the next one changes the map.

use bytes::Bytes;
use futures_util::future::try_join_all;
use spindle_client::{Client, ClientError, DeleteOptions, RangeQuery, Synchronization};

use crate::map::{self, ClusterMap};

/// The partitions `drive` holds entries of that `map` does not assign to it. One range request
/// per partition with data on the drive (a skip-scan: each answer names the next partition
/// present, and those placed there are stepped over without reading them).
pub async fn foreign_partitions(map: &ClusterMap, drive: &str, client: &Client) -> Result<Vec<u32>, ClientError> {
    foreign_prefixes(map.partitions, |p| map.assigned(drive, p), client).await
}

/// The prefixes below `count` (partitions, or a pool's placement groups: both lead their
/// keys as 4 bytes) the drive holds keys of but `here` says are not placed on it.
pub async fn foreign_prefixes(count: u32, here: impl Fn(u32) -> bool, client: &Client) -> Result<Vec<u32>, ClientError> {
    let Some(last) = count.checked_sub(1) else { return Ok(Vec::new()) };
    let end = map::page_query(last, b"", false, None, 1).end;
    let mut out = Vec::new();
    let mut p = 0u32;
    while p < count {
        // Prefixes placed here are not looked into.
        if here(p) {
            p += 1;
            continue;
        }
        let query = RangeQuery { start: map::drive_key(p, b""), start_inclusive: true, end: end.clone(), end_inclusive: true, max_returned: 1, reverse: false };
        let Some(key) = client.get_key_range(query).await?.into_iter().next() else { break };
        let Some(q) = partition_of_drive_key(&key) else { break };
        if q >= count {
            break;
        }
        if !here(q) {
            out.push(q);
        }
        p = q + 1;
    }
    Ok(out)
}

fn partition_of_drive_key(key: &Bytes) -> Option<u32> {
    let prefix: [u8; map::PARTITION_PREFIX_LEN] = key.get(..map::PARTITION_PREFIX_LEN)?.try_into().ok()?;
    Some(u32::from_be_bytes(prefix))
}

/// Deletes every entry of `partition` on the drive; returns how many. A page of deletes at a
/// time, each followed by a pause as long as it took: the drive spends at most half its time
/// on the sweep, less as clients load it (their requests slow the pages down).
pub async fn wipe(partition: u32, client: &Client) -> Result<u64, ClientError> {
    let mut deleted = 0;
    loop {
        let started = tokio::time::Instant::now();
        let keys = client.get_key_range(map::page_query(partition, b"", false, None, map::KEY_PAGE)).await?;
        if keys.is_empty() {
            return Ok(deleted);
        }
        // Written back, not synced: a delete a crash loses is found by the next sweep.
        let force = DeleteOptions { force: true, sync: Synchronization::Writeback, ..DeleteOptions::default() };
        try_join_all(keys.iter().map(|k| client.delete(k, force.clone()))).await?;
        deleted += keys.len() as u64;
        tokio::time::sleep(started.elapsed()).await;
    }
}
