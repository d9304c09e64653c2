//! Pools: named sets of drives with their own way of keeping data. The cluster's partitions
//! and their replicas are the replicated pool every cluster has ([`DEFAULT_POOL`], the map's
//! own placement); an erasure-coded pool spreads each stripe's `data + parity` shards over as
//! many of its drives.
//!
//! An object's stripes all go to one placement group of the pool, chosen by a hash of the
//! object's name, and shard `i` of every stripe of the group to the group's `i`-th drive. A
//! group's drives are chosen as partitions' replicas are (weighted rendezvous hashing, one
//! drive per failure domain while there are enough), but a drive once placed keeps its
//! position: when one goes, only its position is given to another, so the shards every other
//! drive holds stay where readers look for them.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::erasure::Code;
use crate::placement::{self, Candidate};
use crate::SettingError;

/// The replicated pool every cluster has: the map's partitions and replicas.
pub const DEFAULT_POOL: &str = "default";
/// Most pools a cluster may have besides the default one.
pub const MAX_POOLS: usize = 16;
/// Longest pool name (it appears in etcd keys and status lines).
pub const MAX_POOL_NAME: usize = 32;
/// Placement groups of a pool unless its creator says otherwise: enough to spread a pool of
/// a few hundred drives evenly, few enough to keep the map small.
pub const DEFAULT_GROUPS: u32 = 256;
/// Most placement groups a pool may have.
pub const MAX_GROUPS: u32 = 4096;
/// Seed of the hash that places an object in a group (fixed: changing it loses every object).
const GROUP_SEED: u64 = 0x4543_504f_4f4c_5331;

/// An erasure-coded pool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pool {
    pub code: Code,
    pub groups: u32,
    /// Group `g`'s drives at index `g`, shard `i` of its stripes on drive `i`; a group is empty
    /// while the pool has fewer drives than the code's width.
    pub placement: Vec<Vec<String>>,
    /// Positions given to another drive whose shards are not rebuilt there yet, by group:
    /// position → the drive that held it (repair.rs). Readers meanwhile find those shards
    /// absent and read parity instead.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pending: BTreeMap<u32, BTreeMap<u8, String>>,
}

impl Pool {
    pub fn new(code: Code, groups: u32) -> Result<Pool, SettingError> {
        code.check().map_err(SettingError::Code)?;
        if groups == 0 || groups > MAX_GROUPS {
            return Err(SettingError::Groups { given: groups, max: MAX_GROUPS });
        }
        Ok(Pool { code, groups, placement: vec![Vec::new(); groups as usize], pending: BTreeMap::new() })
    }

    /// The group an object's stripes go to.
    pub fn group_of(&self, object: &[u8]) -> u32 {
        (placement::hash(object, GROUP_SEED) % u64::from(self.groups)) as u32
    }

    /// Group `g`'s drives, shard order; empty if the pool cannot hold a stripe yet.
    pub fn drives_of(&self, group: u32) -> &[String] {
        self.placement.get(group as usize).map_or(&[], |v| v.as_slice())
    }

    /// Whether `drive` holds a position in any group.
    pub fn places(&self, drive: &str) -> bool {
        self.placement.iter().any(|g| g.iter().any(|d| d == drive))
    }

    /// The placement the pool's `drives` call for, each group's drives kept at their
    /// positions where they are still wanted. A group placed once stays placed: with fewer
    /// drives than its width it keeps the ones it has (its stripes read from parity), since
    /// placing it afresh later could put shards where readers do not look for them.
    pub fn computed(&self, drives: &[Candidate<'_>]) -> Vec<Vec<String>> {
        let width = self.code.width();
        (0..self.groups)
            .map(|g| {
                let wanted = placement::place(g, drives, width);
                let old = self.drives_of(g);
                if wanted.len() < width {
                    return old.to_vec();
                }
                in_place(old, wanted)
            })
            .collect()
    }

    /// Takes `placement` as the pool's, noting as pending every position of a placed group
    /// that changes drive (the first holder kept if it was pending already). `true` if any
    /// changed.
    pub fn take(&mut self, placement: Vec<Vec<String>>) -> bool {
        if placement == self.placement {
            return false;
        }
        for (g, (old, new)) in self.placement.iter().zip(&placement).enumerate() {
            if old.len() != new.len() {
                continue;
            }
            for (i, (o, n)) in old.iter().zip(new).enumerate() {
                if o != n {
                    self.pending.entry(g as u32).or_default().entry(i as u8).or_insert_with(|| o.clone());
                }
            }
        }
        self.placement = placement;
        true
    }

    /// How many failure domains the pool's `drives` span, and whether that is fewer than a
    /// stripe's width (then some stripes have two shards in one domain, and the loss of one
    /// domain costs them two).
    pub fn domains(&self, drives: &[Candidate<'_>]) -> (usize, bool) {
        let domains: BTreeSet<&str> = drives.iter().map(|d| d.domain.unwrap_or(d.id)).collect();
        (domains.len(), domains.len() < self.code.width())
    }
}

/// `wanted` (a group's drives, best first) ordered so that every drive of `old` it keeps stays
/// at its index; the newcomers take the freed indices in rank order.
fn in_place(old: &[String], wanted: Vec<String>) -> Vec<String> {
    if old.len() != wanted.len() {
        return wanted;
    }
    let mut out: Vec<Option<String>> = old.iter().map(|d| wanted.contains(d).then(|| d.clone())).collect();
    let mut newcomers = wanted.into_iter().filter(|d| !old.contains(d));
    for slot in out.iter_mut().filter(|s| s.is_none()) {
        *slot = newcomers.next();
    }
    out.into_iter().flatten().collect()
}

/// Refuses names that would break the etcd layout or read ambiguously in status lines.
pub fn check_name(name: &str) -> Result<(), SettingError> {
    let ok = !name.is_empty() && name.len() <= MAX_POOL_NAME && name != DEFAULT_POOL && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !ok {
        return Err(SettingError::PoolName { name: name.to_string(), max: MAX_POOL_NAME });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidates(ids: &[String]) -> Vec<Candidate<'_>> {
        ids.iter().map(|id| Candidate { id, weight: 1.0, domain: None }).collect()
    }

    fn ids(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("d{i}")).collect()
    }

    #[test]
    fn a_lost_drive_frees_only_its_own_positions() {
        let mut pool = Pool::new(Code { data: 4, parity: 2 }, 64).unwrap();
        let all = ids(9);
        pool.placement = pool.computed(&candidates(&all));
        assert!(pool.placement.iter().all(|g| g.len() == 6 && g.iter().collect::<BTreeSet<_>>().len() == 6));
        let survivors: Vec<String> = all.iter().filter(|d| *d != "d3").cloned().collect();
        let next = pool.computed(&candidates(&survivors));
        for (before, after) in pool.placement.iter().zip(&next) {
            for (i, (b, a)) in before.iter().zip(after).enumerate() {
                if b != "d3" {
                    assert_eq!(a, b, "position {i} moved");
                } else {
                    assert!(!before.contains(a), "{a} took d3's place but held another");
                }
            }
        }
        // A drive joining takes whole positions, and only where it now ranks among the best.
        let mut more = all.clone();
        more.push("d9".into());
        let joined = pool.computed(&candidates(&more));
        for (before, after) in pool.placement.iter().zip(&joined) {
            let changed: Vec<usize> = (0..6).filter(|&i| before[i] != after[i]).collect();
            assert!(changed.iter().all(|&i| after[i] == "d9") && changed.len() <= 1);
        }
    }

    #[test]
    fn changed_positions_are_pending_until_rebuilt() {
        let mut pool = Pool::new(Code { data: 4, parity: 2 }, 16).unwrap();
        let all = ids(8);
        let first = pool.computed(&candidates(&all));
        // Placed for the first time: nothing to rebuild.
        assert!(pool.take(first.clone()) && pool.pending.is_empty());
        assert!(!pool.take(first.clone()));
        let survivors: Vec<String> = all.iter().filter(|d| *d != "d2").cloned().collect();
        let next = pool.computed(&candidates(&survivors));
        assert!(pool.take(next));
        for (g, positions) in &pool.pending {
            for (i, was) in positions {
                assert_eq!((was.as_str(), first[*g as usize][usize::from(*i)].as_str()), ("d2", "d2"));
            }
        }
        let expected = first.iter().filter(|g| g.iter().any(|d| d == "d2")).count();
        assert_eq!(pool.pending.len(), expected);
    }

    #[test]
    fn a_pool_narrower_than_its_code_places_nothing_and_keeps_what_it_placed() {
        let mut pool = Pool::new(Code { data: 4, parity: 2 }, 8).unwrap();
        let five = ids(5);
        assert!(pool.computed(&candidates(&five)).iter().all(Vec::is_empty));
        let six = ids(6);
        pool.placement = pool.computed(&candidates(&six));
        // One of six gone: every group keeps its six, the lost one read from parity.
        assert_eq!(pool.computed(&candidates(&five)), pool.placement);
        let names = ["a", "b", "c", "d", "e", "f"];
        let racked: Vec<Candidate<'_>> = names.iter().enumerate().map(|(i, id)| Candidate { id, weight: 1.0, domain: Some(["r1", "r2"][i % 2]) }).collect();
        assert_eq!(pool.domains(&racked), (2, true));
        assert_eq!(pool.domains(&candidates(&ids(6))), (6, false));
    }

    #[test]
    fn names_and_shapes_are_checked() {
        assert!(check_name("cold-1").is_ok());
        for bad in ["", "default", "a/b", "a b", &"x".repeat(33)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        assert!(Pool::new(Code { data: 4, parity: 2 }, 0).is_err());
        assert!(Pool::new(Code { data: 0, parity: 2 }, 8).is_err());
        let pool = Pool::new(Code { data: 4, parity: 2 }, 8).unwrap();
        assert!(pool.group_of(b"x") < 8);
    }
}
