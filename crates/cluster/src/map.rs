//! The cluster map: members, the placement table and the epoch that versions both. It lives in
//! etcd as JSON; every process computes nothing from it that another could compute differently.

use std::collections::BTreeMap;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use spindle_client::RangeQuery;

use crate::placement::{self, Candidate};
use crate::pool::Pool;
use crate::{ClusterError, SettingError};

/// Most partitions a cluster may have (the prefix on the drive is 4 bytes; more partitions
/// than this only cost map size).
pub const MAX_PARTITIONS: u32 = 65_536;
/// Most replicas per partition.
pub const MAX_REPLICAS: u8 = 7;
/// Bytes the partition prefix adds in front of every user key on a drive.
pub const PARTITION_PREFIX_LEN: usize = 4;
/// The longest key every Kinetic drive takes (the protocol's published limit).
pub const MAX_DRIVE_KEY: usize = spindle_proto::limits::MAX_KEY_SIZE as usize;
/// The longest user key: a drive key less the partition prefix.
pub const MAX_KEY_LEN: usize = MAX_DRIVE_KEY - PARTITION_PREFIX_LEN;
/// The largest value every Kinetic drive takes (the protocol's published limit).
pub const MAX_VALUE_LEN: usize = spindle_proto::limits::MAX_VALUE_SIZE as usize;
/// Keys per GETKEYRANGE page: the protocol's published maxKeyRangeCount, which every drive takes.
pub const KEY_PAGE: i32 = spindle_proto::limits::MAX_KEY_RANGE_COUNT as i32;
/// Longest member id (it names etcd keys and appears in every status line).
pub const MAX_MEMBER_ID: usize = 64;
/// User keys that begin so are the cluster's own (batch records, `record.rs`): a user's key
/// may not, and ranges of user keys pass them by.
pub const RESERVED_PREFIX: &[u8] = b"\xff\x00spindle\x00";
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
    /// Asked to leave (`remove-drive`): placed nowhere, drained by a move, and dropped from
    /// the map once nothing of the cluster's is left on it.
    #[serde(default)]
    pub leaving: bool,
    /// The erasure-coded pool the drive serves; none: the replicated default pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
}

impl Member {
    /// Refuses what would break the etcd layout or could never be reached: an id that is
    /// empty, too long or holds '/' or whitespace; an address that is not HOST:PORT; a weight
    /// that is not a positive number.
    pub fn validate(&self) -> Result<(), ClusterError> {
        let id_ok = !self.id.is_empty()
            && self.id.len() <= MAX_MEMBER_ID
            && !self.id.contains('/')
            && !self.id.chars().any(char::is_whitespace);
        if !id_ok {
            return Err(SettingError::MemberId { id: self.id.clone(), max: MAX_MEMBER_ID }.into());
        }
        let port_ok = self.addr.rsplit_once(':').is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0));
        if !port_ok {
            return Err(SettingError::Address(self.addr.clone()).into());
        }
        if !(self.weight.is_finite() && self.weight > 0.0) {
            return Err(SettingError::Weight(self.weight).into());
        }
        Ok(())
    }
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
    /// Whether keys are placed by their hash tag (`hash_tag`). Set by `init` from this version
    /// on; a map written before hash tags existed has none and keeps hashing whole keys, so
    /// that no stored key moves to another partition.
    #[serde(default)]
    pub hash_tags: bool,
    /// The move under way: each moving partition and the replicas it will have once the
    /// move flips. Until then `placement` stays its replicas (reads ask them), and writes go
    /// to both sets, acknowledged once a write quorum of each holds them (migrate.rs).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub moving: BTreeMap<u32, Vec<String>>,
    /// A secured cluster (`init --credentials`): its identity's number and its CA's
    /// fingerprint (never the key). Every connection to its drives, pushes between drives
    /// included, is TLS checked against that CA, as that identity; members' addresses are
    /// their drives' TLS ports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security: Option<crate::credentials::Fingerprint>,
    /// Erasure-coded pools by name, beside the replicated default pool that the partitions
    /// above are (pool.rs).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pools: BTreeMap<String, Pool>,
    /// Remote pools (external S3 buckets) by name; one namespace with `pools` (remote.rs).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub remotes: BTreeMap<String, crate::remote::RemotePool>,
}

impl ClusterMap {
    /// A map with no members (epoch 1: drives start at cluster version 0, so a fresh drive
    /// answers no cluster client until the coordinator has fenced it into the cluster).
    pub fn new(partitions: u32, replicas: u8, write_quorum: u8) -> Result<ClusterMap, ClusterError> {
        if partitions == 0 || partitions > MAX_PARTITIONS {
            return Err(SettingError::Partitions { given: partitions, max: MAX_PARTITIONS }.into());
        }
        if replicas == 0 || replicas > MAX_REPLICAS {
            return Err(SettingError::Replicas { given: replicas, max: MAX_REPLICAS }.into());
        }
        if write_quorum == 0 || write_quorum > replicas {
            return Err(SettingError::WriteQuorum { given: write_quorum, replicas }.into());
        }
        if u16::from(write_quorum) * 2 <= u16::from(replicas) {
            return Err(SettingError::NotAMajority { write_quorum, replicas }.into());
        }
        Ok(ClusterMap {
            epoch: 1,
            partitions,
            replicas,
            write_quorum,
            members: BTreeMap::new(),
            placement: vec![Vec::new(); partitions as usize],
            hash_tags: true,
            moving: BTreeMap::new(),
            security: None,
            pools: BTreeMap::new(),
            remotes: BTreeMap::new(),
        })
    }

    /// Replicas a read must hear from so that it meets every acknowledged write.
    pub fn read_quorum(&self) -> usize {
        usize::from(self.replicas) - usize::from(self.write_quorum) + 1
    }

    pub fn partition_of(&self, key: &[u8]) -> u32 {
        let placed_by = if self.hash_tags { hash_tag(key) } else { key };
        (placement::hash(placed_by, KEY_SEED) % u64::from(self.partitions)) as u32
    }

    /// The one partition every key in `[start, end]` is placed in, when hash tags place them
    /// all together: both ends begin with the same prefix through the first tag's closing
    /// brace, so every key between them does too, and has that tag.
    pub fn partition_of_range(&self, start: &[u8], end: Option<&[u8]>) -> Option<u32> {
        let end = end?;
        if !self.hash_tags {
            return None;
        }
        let open = start.iter().position(|&b| b == b'{')?;
        let len = start[open + 1..].iter().position(|&b| b == b'}')?;
        if len == 0 {
            return None;
        }
        let through = open + len + 2;
        (end.get(..through) == Some(&start[..through])).then(|| self.partition_of(start))
    }

    /// The drives holding `partition`, best first.
    pub fn replicas_of(&self, partition: u32) -> &[String] {
        self.placement.get(partition as usize).map_or(&[], |v| v.as_slice())
    }

    /// The drives `partition` will have when the move under way flips, if it is moving.
    pub fn moving_to(&self, partition: u32) -> Option<&[String]> {
        self.moving.get(&partition).map(Vec::as_slice)
    }

    /// Every drive a write to `partition` goes to: its replicas, and while it moves, the
    /// drives it moves to.
    pub fn writers_of(&self, partition: u32) -> Vec<String> {
        let mut out = self.replicas_of(partition).to_vec();
        for d in self.moving_to(partition).unwrap_or_default() {
            if !out.contains(d) {
                out.push(d.clone());
            }
        }
        out
    }

    /// Whether one drive alone takes `partition`'s writes: one replica, not moving.
    pub fn single_writer(&self, partition: u32) -> bool {
        self.replicas_of(partition).len() == 1 && self.moving_to(partition).is_none()
    }

    /// Whether `drive` holds (or is being given) any of `partition`'s data under this map.
    pub fn assigned(&self, drive: &str, partition: u32) -> bool {
        self.replicas_of(partition).iter().any(|d| d == drive) || self.moving_to(partition).is_some_and(|m| m.iter().any(|d| d == drive))
    }

    /// The placement the members call for, leaving out those leaving and `failed` (drives
    /// down too long, whose replicas the survivors take over).
    pub fn computed_placement(&self, failed: &std::collections::BTreeSet<String>) -> Vec<Vec<String>> {
        placement::place_all(self.partitions, &self.candidates(None, failed), usize::from(self.replicas))
    }

    /// The members of `pool` (none: the default pool) placement may count on: not leaving,
    /// not `failed`.
    pub fn candidates(&self, pool: Option<&str>, failed: &std::collections::BTreeSet<String>) -> Vec<Candidate<'_>> {
        self.members
            .values()
            .filter(|m| m.pool.as_deref() == pool && !m.leaving && !failed.contains(&m.id))
            .map(|m| Candidate { id: &m.id, weight: m.weight, domain: m.domain.as_deref() })
            .collect()
    }

    /// Every erasure-coded pool's placement as its members call for, where it differs from
    /// the map's; `true` if any changed.
    pub fn place_pools(&mut self, failed: &std::collections::BTreeSet<String>) -> bool {
        let computed: Vec<(String, Vec<Vec<String>>)> = self.pools.iter().map(|(name, pool)| (name.clone(), pool.computed(&self.candidates(Some(name), failed)))).collect();
        let mut changed = false;
        for (name, placement) in computed {
            if let Some(pool) = self.pools.get_mut(&name) {
                changed |= pool.take(placement);
            }
        }
        changed
    }

    /// Whether `drive` serves an erasure-coded pool (then the default pool's partitions,
    /// moves and sweeps leave it alone).
    pub fn in_pool(&self, drive: &str) -> bool {
        self.members.get(drive).is_some_and(|m| m.pool.is_some())
    }

    /// The erasure-coded pool `name`.
    /// Whether `name` is a pool of either kind.
    pub fn has_pool(&self, name: &str) -> bool {
        self.pools.contains_key(name) || self.remotes.contains_key(name)
    }

    pub fn pool(&self, name: &str) -> Result<&Pool, ClusterError> {
        match self.pools.get(name) {
            Some(p) => Ok(p),
            None if self.remotes.contains_key(name) => Err(SettingError::RemoteNotStriped(name.to_string()).into()),
            None => Err(SettingError::UnknownPool(name.to_string()).into()),
        }
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

}

/// The part of a key that places it: what lies between its first `{` and the next `}` when
/// that is not empty (Redis Cluster's hash tags: `{user42}/name` and `{user42}/mail` share a
/// partition, so one batch can write both), else the whole key.
pub fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{') {
        if let Some(len) = key[open + 1..].iter().position(|&b| b == b'}') {
            if len > 0 {
                return &key[open + 1..open + 1 + len];
            }
        }
    }
    key
}

/// A user key as stored on a drive: its partition (4 bytes, big-endian) first, so that one
/// partition is one contiguous key range and moves with one ranged push.
pub fn drive_key(partition: u32, key: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(PARTITION_PREFIX_LEN + key.len());
    out.extend_from_slice(&partition.to_be_bytes());
    out.extend_from_slice(key);
    Bytes::from(out)
}

/// Whether a user key is one of the cluster's own (`RESERVED_PREFIX`).
pub fn is_reserved(user_key: &[u8]) -> bool {
    user_key.starts_with(RESERVED_PREFIX)
}

/// The user key of a drive key of `partition`, if it is one.
pub fn user_key(partition: u32, drive_key: &[u8]) -> Option<&[u8]> {
    drive_key.strip_prefix(&partition.to_be_bytes()[..])
}

/// The GETKEYRANGE query for one page of `partition`'s drive keys: user keys from `from`
/// (`after`: excluding it) to `end` (or the partition's last possible key), at most `page`
/// of them (1 to [`KEY_PAGE`]; a scan wanting a few keys asks each partition for no more).
pub fn page_query(partition: u32, from: &[u8], after: bool, end: Option<&[u8]>, page: i32) -> RangeQuery {
    let end = match end {
        Some(e) => drive_key(partition, e),
        None => {
            let mut last = partition.to_be_bytes().to_vec();
            last.resize(MAX_DRIVE_KEY, 0xFF);
            Bytes::from(last)
        }
    };
    let max_returned = page.clamp(1, KEY_PAGE);
    RangeQuery { start: drive_key(partition, from), start_inclusive: !after, end: Some(end), end_inclusive: true, max_returned, reverse: false }
}

/// Merges several replicas' answers to one [`page_query`] of `page` keys: the union of their
/// keys, in order, as far as it is complete (a replica that filled its page knows nothing past
/// its last key), and the user key the next page starts after, if any replica had more.
pub fn page_union(partition: u32, answers: Vec<Vec<Bytes>>, page: i32) -> (Vec<Bytes>, Option<Bytes>) {
    let page = page.clamp(1, KEY_PAGE) as usize;
    let complete_to = answers.iter().filter(|keys| keys.len() >= page).filter_map(|keys| keys.last().cloned()).min();
    let mut keys: Vec<Bytes> = answers.into_iter().flatten().filter(|k| complete_to.as_ref().is_none_or(|c| k <= c)).collect();
    keys.sort();
    keys.dedup();
    let users = keys.iter().filter_map(|k| user_key(partition, k).map(Bytes::copy_from_slice)).collect();
    let next = complete_to.and_then(|c| user_key(partition, &c).map(Bytes::copy_from_slice));
    (users, next)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_tags_place_related_keys_together_in_maps_that_use_them() {
        let m = ClusterMap::new(4096, 3, 2).unwrap();
        assert_eq!(m.partition_of(b"{user42}/name"), m.partition_of(b"{user42}/mail"));
        assert_eq!(m.partition_of(b"{user42}"), m.partition_of(b"user42"));
        // An empty tag, or none closed, places by the whole key.
        assert_eq!(hash_tag(b"{}x"), b"{}x");
        assert_eq!(hash_tag(b"{abc"), b"{abc");
        assert_eq!(hash_tag(b"a{b}c{d}"), b"b");
        // A range whose ends share the prefix through the tag lies in the tag's partition.
        assert_eq!(m.partition_of_range(b"x{tag}\0a", Some(b"x{tag}\0\xff")), Some(m.partition_of(b"{tag}")));
        assert_eq!(m.partition_of_range(b"x{tag}a", Some(b"x{tah}")), None);
        assert_eq!(m.partition_of_range(b"x{tag}a", None), None);
        assert_eq!(m.partition_of_range(b"x{}a", Some(b"x{}b")), None);
        // A map stored before hash tags hashes whole keys, so its keys stay where they are.
        let mut json = serde_json::to_value(&m).unwrap();
        json.as_object_mut().unwrap().remove("hash_tags");
        let old: ClusterMap = serde_json::from_value(json).unwrap();
        assert!(!old.hash_tags);
        let spread = (0..64).map(|i| old.partition_of(format!("{{user42}}/{i}").as_bytes())).collect::<std::collections::BTreeSet<_>>();
        assert!(spread.len() > 1);
    }

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
        let q = page_query(1, b"", false, None, KEY_PAGE);
        let hi = q.end.unwrap();
        assert!(q.start <= a && a <= hi && hi.len() == MAX_DRIVE_KEY);
        assert!(drive_key(0, &[0xFF; MAX_KEY_LEN]) < q.start);
    }

    #[test]
    fn a_page_union_stops_where_a_full_page_ends() {
        let k = |s: &str| drive_key(3, s.as_bytes());
        // One replica filled its page up to "k199"; another has "k2" beyond it and "a" before.
        let full: Vec<Bytes> = (0..KEY_PAGE).map(|i| k(&format!("k{i:03}"))).collect();
        let (keys, next) = page_union(3, vec![full.clone(), vec![k("a"), k("k2")]], KEY_PAGE);
        assert_eq!(keys.len(), KEY_PAGE as usize + 1);
        assert_eq!((&keys[0][..], next.as_deref()), (&b"a"[..], Some(&b"k199"[..])));
        // A smaller page is full at its own size.
        let (keys, next) = page_union(3, vec![vec![k("a"), k("c")], vec![k("b")]], 2);
        assert_eq!((keys, next), (vec![Bytes::from("a"), Bytes::from("b"), Bytes::from("c")], Some(Bytes::from("c"))));
        // No full page: everything, and no next page.
        let (keys, next) = page_union(3, vec![vec![k("b"), k("a")], vec![k("a")]], KEY_PAGE);
        assert_eq!((keys, next), (vec![Bytes::from("a"), Bytes::from("b")], None));
    }

    #[test]
    fn members_are_checked_before_they_reach_etcd() {
        let good = Member { id: "d1".into(), addr: "10.0.0.1:8123".into(), tls_port: None, capacity: 0, weight: 1.0, domain: None, leaving: false, pool: None };
        assert!(good.validate().is_ok());
        for (id, addr, weight) in [("", "h:1", 1.0), ("a/b", "h:1", 1.0), ("a b", "h:1", 1.0), (&"x".repeat(65)[..], "h:1", 1.0), ("d", "h", 1.0), ("d", "h:0", 1.0), ("d", ":1", 1.0), ("d", "h:1", 0.0), ("d", "h:1", f64::NAN)] {
            let m = Member { id: id.into(), addr: addr.into(), weight, ..good.clone() };
            assert!(m.validate().is_err(), "{m:?} passed");
        }
    }
}
