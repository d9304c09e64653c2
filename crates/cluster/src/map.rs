//! The cluster map: members, the placement table and the epoch that versions both. It lives in
//! etcd as JSON; every process computes nothing from it that another could compute differently.

use std::collections::BTreeMap;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::placement::{self, Candidate};
use crate::ClusterError;

/// Most partitions a cluster may have (the prefix on the drive is 4 bytes; more partitions
/// than this only cost map size).
pub const MAX_PARTITIONS: u32 = 65_536;
/// Most replicas per partition.
pub const MAX_REPLICAS: u8 = 7;
/// Bytes the partition prefix adds in front of every user key on a drive.
pub const PARTITION_PREFIX_LEN: usize = 4;
/// Seed of the key hash (fixed: changing it moves every key).
const KEY_SEED: u64 = 0x5350_494e_444c_4531;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Member {
    pub id: String,
    /// HOST:PORT of the drive's Kinetic port.
    pub addr: String,
    /// The drive's TLS port, if it serves one.
    #[serde(default)]
    pub tls_port: Option<u16>,
    /// Bytes the drive offers (0 if unknown); the default weight.
    #[serde(default)]
    pub capacity: u64,
    /// Share of partitions relative to other members.
    pub weight: f64,
    #[serde(default)]
    pub domain: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClusterMap {
    /// The view number: every drive's cluster version, bumped by each change of placement.
    pub epoch: u64,
    pub partitions: u32,
    pub replicas: u8,
    /// Replicas that must take a write before it is acknowledged.
    pub write_quorum: u8,
    pub members: BTreeMap<String, Member>,
    /// Partition `p`'s drives at index `p`, best first.
    pub placement: Vec<Vec<String>>,
}

impl ClusterMap {
    /// A map with no members (epoch 1: drives start at cluster version 0, so a fresh drive
    /// answers no cluster client until the coordinator has fenced it into the cluster).
    pub fn new(partitions: u32, replicas: u8, write_quorum: u8) -> Result<ClusterMap, ClusterError> {
        if partitions == 0 || partitions > MAX_PARTITIONS {
            return Err(ClusterError::Invalid(format!("partitions must be 1..={MAX_PARTITIONS}, not {partitions}")));
        }
        if replicas == 0 || replicas > MAX_REPLICAS {
            return Err(ClusterError::Invalid(format!("replicas must be 1..={MAX_REPLICAS}, not {replicas}")));
        }
        if write_quorum == 0 || write_quorum > replicas {
            return Err(ClusterError::Invalid(format!("write quorum must be 1..={replicas}, not {write_quorum}")));
        }
        if u16::from(write_quorum) * 2 <= u16::from(replicas) {
            return Err(ClusterError::Invalid(format!(
                "a write quorum of {write_quorum} of {replicas} is not a majority: two writes could miss each other"
            )));
        }
        Ok(ClusterMap { epoch: 1, partitions, replicas, write_quorum, members: BTreeMap::new(), placement: vec![Vec::new(); partitions as usize] })
    }

    /// Replicas a read must hear from so that it meets every acknowledged write.
    pub fn read_quorum(&self) -> usize {
        usize::from(self.replicas) - usize::from(self.write_quorum) + 1
    }

    pub fn partition_of(&self, key: &[u8]) -> u32 {
        (placement::hash(key, KEY_SEED) % u64::from(self.partitions)) as u32
    }

    /// The drives holding `partition`, best first.
    pub fn replicas_of(&self, partition: u32) -> &[String] {
        self.placement.get(partition as usize).map_or(&[], |v| v.as_slice())
    }

    /// The placement the members call for (what the coordinator writes with a new epoch).
    pub fn computed_placement(&self) -> Vec<Vec<String>> {
        let candidates: Vec<Candidate<'_>> =
            self.members.values().map(|m| Candidate { id: &m.id, weight: m.weight, domain: m.domain.as_deref() }).collect();
        placement::place_all(self.partitions, &candidates, usize::from(self.replicas))
    }

    /// Partitions per member (the status view).
    pub fn load(&self) -> BTreeMap<String, usize> {
        let mut out: BTreeMap<String, usize> = self.members.keys().map(|k| (k.clone(), 0)).collect();
        for replicas in &self.placement {
            for d in replicas {
                *out.entry(d.clone()).or_default() += 1;
            }
        }
        out
    }

    /// Partitions with fewer replicas than the map asks for.
    pub fn short_partitions(&self) -> usize {
        self.placement.iter().filter(|r| r.len() < usize::from(self.replicas)).count()
    }
}

/// A user key as stored on a drive: its partition (4 bytes, big-endian) first, so that one
/// partition is one contiguous key range and moves with one ranged push.
pub fn drive_key(partition: u32, key: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(PARTITION_PREFIX_LEN + key.len());
    out.extend_from_slice(&partition.to_be_bytes());
    out.extend_from_slice(key);
    Bytes::from(out)
}

/// The user key of a drive key of `partition`, if it is one.
pub fn user_key(partition: u32, drive_key: &[u8]) -> Option<&[u8]> {
    drive_key.strip_prefix(&partition.to_be_bytes()[..])
}

/// First and last drive keys of a partition: [prefix, prefix ++ 0xFF * (max key - 4)].
pub fn partition_bounds(partition: u32, max_key: usize) -> (Bytes, Bytes) {
    let start = Bytes::copy_from_slice(&partition.to_be_bytes());
    let mut end = partition.to_be_bytes().to_vec();
    end.resize(max_key.max(PARTITION_PREFIX_LEN), 0xFF);
    (start, Bytes::from(end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quorums_must_intersect() {
        assert!(ClusterMap::new(64, 3, 1).is_err());
        assert!(ClusterMap::new(64, 4, 2).is_err());
        let m = ClusterMap::new(64, 3, 2).unwrap();
        assert_eq!(m.read_quorum(), 2);
        assert_eq!(ClusterMap::new(64, 5, 3).unwrap().read_quorum(), 3);
        assert!(ClusterMap::new(0, 3, 2).is_err());
    }

    #[test]
    fn drive_keys_keep_partitions_apart_and_in_order() {
        let a = drive_key(1, b"zzz");
        let b = drive_key(2, b"");
        assert!(a < b);
        assert_eq!(user_key(1, &a), Some(&b"zzz"[..]));
        assert_eq!(user_key(2, &a), None);
        let (lo, hi) = partition_bounds(1, 4096);
        assert!(lo <= a && a <= hi && hi.len() == 4096);
    }
}
