//! Anti-entropy for one partition: every key any reachable replica holds, brought to its
//! newest tag on every reachable replica. Used when a drive comes back (the writes it missed)
//! and when placement gives a partition a new replica. Safe under concurrent client writes:
//! every copy is a store-if-newer, so a repair never replaces a newer write with an older one.
//! The partition is walked a page of keys at a time, so its size bounds no memory.

use std::collections::BTreeMap;

use bytes::Bytes;
use spindle_client::{Client, ClientError};

use crate::map;
use crate::replica::{self, Held};
use crate::tag::Tag;

/// Repairs `partition` over `replicas` (drive id and connection; unreachable ones left out).
/// Returns the number of entries written to replicas that lacked the newest.
pub async fn repair_partition(partition: u32, replicas: &[(String, Client)]) -> Result<u64, ClientError> {
    let mut copied = 0;
    let mut from: Option<Bytes> = None;
    loop {
        let query = map::page_query(partition, from.as_deref().unwrap_or_default(), from.is_some(), None);
        let mut answers = Vec::with_capacity(replicas.len());
        for (_, c) in replicas {
            answers.push(c.get_key_range(query.clone()).await?);
        }
        let (keys, next) = map::page_union(partition, answers);
        for key in keys {
            copied += repair_key(&map::drive_key(partition, &key), replicas).await?;
        }
        match next {
            Some(n) => from = Some(n),
            None => return Ok(copied),
        }
    }
}

/// Brings one drive key to its newest tag on every replica; returns the copies made.
async fn repair_key(key: &Bytes, replicas: &[(String, Client)]) -> Result<u64, ClientError> {
    let mut held: BTreeMap<&str, Held> = BTreeMap::new();
    for (id, c) in replicas {
        held.insert(id, replica::held(c, key).await?);
    }
    let Some(newest) = held.values().filter_map(Held::tag).max() else { return Ok(0) };
    let Some((_, source)) = replicas.iter().find(|(id, _)| held[id.as_str()].tag() == Some(newest)) else { return Ok(0) };
    let lacking: Vec<&(String, Client)> = replicas.iter().filter(|(id, _)| held[id.as_str()].tag() != Some(newest)).collect();
    if lacking.is_empty() {
        return Ok(0);
    }
    let Some(entry) = source.get(key).await? else { return Ok(0) };
    if Tag::decode(&entry.metadata.version) != Some(newest) {
        // Overwritten meanwhile by a newer write, which reaches every replica itself.
        return Ok(0);
    }
    let mut copied = 0;
    for (id, c) in lacking {
        let known = held.get(id.as_str()).cloned();
        if replica::store_if_newer(c, key, entry.value.clone(), newest, known).await? == replica::Stored::Written {
            copied += 1;
        }
    }
    Ok(copied)
}
