//! Anti-entropy for one partition: every key any reachable replica holds, brought to its
//! newest tag on every reachable replica. Used when a drive comes back (the writes it missed)
//! and when placement gives a partition a new replica. Safe under concurrent client writes:
//! every copy is a store-if-newer, so a repair never replaces a newer write with an older one.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use spindle_client::{Client, ClientError, RangeQuery};

use crate::map;
use crate::replica::{self, Held};
use crate::tag::Tag;

/// Keys per GETKEYRANGE page while listing a partition: the protocol's published
/// maxKeyRangeCount (200), which every Kinetic drive accepts.
const LIST_PAGE: i32 = 200;

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RepairReport {
    pub keys: u64,
    /// Entries written to replicas that lacked the newest.
    pub copied: u64,
    pub bytes: u64,
}

/// Every drive key of `partition` on `client`.
pub async fn list(client: &Client, partition: u32) -> Result<Vec<Bytes>, ClientError> {
    let (first, last) = map::partition_bounds(partition, 4096);
    let mut out = Vec::new();
    let mut from = first;
    let mut inclusive = true;
    loop {
        let q = RangeQuery { start: from.clone(), start_inclusive: inclusive, end: Some(last.clone()), end_inclusive: true, max_returned: LIST_PAGE, reverse: false };
        let keys = client.get_key_range(q).await?;
        let full = keys.len() as i32 >= LIST_PAGE;
        if let Some(k) = keys.last() {
            from = k.clone();
            inclusive = false;
        }
        out.extend(keys);
        if !full {
            return Ok(out);
        }
    }
}

/// Repairs `partition` over `replicas` (drive id and connection; unreachable ones left out).
pub async fn repair_partition(partition: u32, replicas: &[(String, Client)]) -> Result<RepairReport, ClientError> {
    let mut keys = BTreeSet::new();
    for (_, c) in replicas {
        keys.extend(list(c, partition).await?);
    }
    let mut report = RepairReport::default();
    for key in keys {
        report.keys += 1;
        let mut held: BTreeMap<&str, Held> = BTreeMap::new();
        for (id, c) in replicas {
            held.insert(id, replica::held(c, &key).await?);
        }
        let Some(newest) = held.values().filter_map(Held::tag).max() else { continue };
        let lacking: Vec<&(String, Client)> = replicas.iter().filter(|(id, _)| held[id.as_str()].tag() != Some(newest)).collect();
        if lacking.is_empty() {
            continue;
        }
        let Some((_, source)) = replicas.iter().find(|(id, _)| held[id.as_str()].tag() == Some(newest)) else { continue };
        let Some(entry) = source.get(&key).await? else { continue };
        if Tag::decode(&entry.metadata.version) != Some(newest) {
            // Overwritten meanwhile by a newer write, which reaches every replica itself.
            continue;
        }
        for (id, c) in lacking {
            let known = held.get(id.as_str()).cloned();
            if replica::store_if_newer(c, &key, entry.value.clone(), newest, known).await? == replica::Stored::Written {
                report.copied += 1;
                report.bytes += entry.value.len() as u64;
            }
        }
    }
    Ok(report)
}
