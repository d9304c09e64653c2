//! Which drives hold each partition: weighted rendezvous hashing (highest random weight) with
//! failure domains.
//!
//! Every (partition, drive) pair gets a score from a hash of both, scaled by the drive's weight
//! as `-weight / ln(u)` with `u` the hash mapped into (0, 1): the drive with the highest score
//! wins with probability proportional to its weight. A partition's replicas are its R best
//! drives, taking at most one per failure domain while unused domains remain. A drive that
//! joins takes a partition only where it now scores among the best, so replicas move only to
//! it; a drive that leaves gives up only its own replicas. No table to keep, no tokens to tune.

use std::collections::BTreeSet;

use xxhash_rust::xxh3::xxh3_64_with_seed;

/// A drive as placement sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate<'a> {
    pub id: &'a str,
    /// Relative share of partitions (capacity, usually); must be positive.
    pub weight: f64,
    /// Drives in one domain (a host, a rack) can fail together: replicas avoid sharing one.
    pub domain: Option<&'a str>,
}

/// The stable 64-bit hash keys and placement use (xxh3; never change it, or every key moves).
pub fn hash(bytes: &[u8], seed: u64) -> u64 {
    xxh3_64_with_seed(bytes, seed)
}

fn score(partition: u32, drive: &Candidate<'_>) -> f64 {
    let h = hash(drive.id.as_bytes(), u64::from(partition) ^ 0x5350_4e44_504c_4143);
    // Top 53 bits into (0, 1): never 0 (ln(0)) and never 1 (ln(1) = 0).
    let u = ((h >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
    -drive.weight / u.ln()
}

/// The `replicas` drives that hold `partition`, best first. Fewer when there are fewer drives.
pub fn place(partition: u32, drives: &[Candidate<'_>], replicas: usize) -> Vec<String> {
    let mut ranked: Vec<(f64, &Candidate<'_>)> = drives.iter().filter(|d| d.weight > 0.0).map(|d| (score(partition, d), d)).collect();
    // Ties (equal scores) are broken by id, so every process computes the same map.
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.id.cmp(b.1.id)));
    let domains: BTreeSet<&str> = ranked.iter().map(|(_, d)| d.domain.unwrap_or(d.id)).collect();
    let mut chosen: Vec<&Candidate<'_>> = Vec::with_capacity(replicas);
    let mut used: BTreeSet<&str> = BTreeSet::new();
    // First pass: distinct domains (a drive without one is its own domain).
    for (_, d) in &ranked {
        if chosen.len() == replicas {
            break;
        }
        if used.insert(d.domain.unwrap_or(d.id)) {
            chosen.push(d);
        }
    }
    // Fewer domains than replicas: the rest go to the best drives left, on distinct drives.
    if chosen.len() < replicas && domains.len() < replicas {
        for (_, d) in &ranked {
            if chosen.len() == replicas {
                break;
            }
            if !chosen.iter().any(|c| c.id == d.id) {
                chosen.push(d);
            }
        }
    }
    chosen.into_iter().map(|d| d.id.to_string()).collect()
}

/// The whole table: partition `p`'s replicas at index `p`.
pub fn place_all(partitions: u32, drives: &[Candidate<'_>], replicas: usize) -> Vec<Vec<String>> {
    (0..partitions).map(|p| place(p, drives, replicas)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn drives(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("drive-{i}")).collect()
    }

    fn uniform(ids: &[String]) -> Vec<Candidate<'_>> {
        ids.iter().map(|id| Candidate { id, weight: 1.0, domain: None }).collect()
    }

    fn load(table: &[Vec<String>]) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for replicas in table {
            for d in replicas {
                *counts.entry(d.clone()).or_default() += 1;
            }
        }
        counts
    }

    /// Replicas (partition, drive) in `b` and not in `a`.
    fn moved(a: &[Vec<String>], b: &[Vec<String>]) -> Vec<(usize, String)> {
        let mut out = Vec::new();
        for (p, (old, new)) in a.iter().zip(b).enumerate() {
            for d in new {
                if !old.contains(d) {
                    out.push((p, d.clone()));
                }
            }
        }
        out
    }

    #[test]
    fn equal_drives_get_equal_shares() {
        let ids = drives(8);
        let table = place_all(4096, &uniform(&ids), 3);
        let mean = 4096.0 * 3.0 / 8.0;
        for (d, n) in load(&table) {
            // 1,536 expected; a binomial's spread is about 37, so 10 % is over 4 standard deviations.
            assert!((n as f64 - mean).abs() < mean * 0.10, "{d} holds {n}, mean {mean}");
        }
    }

    #[test]
    fn shares_follow_weights() {
        let ids = drives(4);
        let mut c = uniform(&ids);
        c[0].weight = 2.0;
        let table = place_all(8192, &c, 1);
        let l = load(&table);
        let ratio = l["drive-0"] as f64 / l["drive-1"] as f64;
        assert!((1.8..2.2).contains(&ratio), "weight 2 took {ratio}x a weight-1 drive's share");
    }

    #[test]
    fn replicas_spread_over_domains() {
        let ids = drives(9);
        let racks = ["a", "b", "c"];
        let c: Vec<Candidate<'_>> =
            ids.iter().enumerate().map(|(i, id)| Candidate { id, weight: 1.0, domain: Some(racks[i % 3]) }).collect();
        for (p, replicas) in place_all(1024, &c, 3).iter().enumerate() {
            let used: BTreeSet<_> = replicas.iter().map(|r| c.iter().find(|d| d.id == r).unwrap().domain).collect();
            assert_eq!(used.len(), 3, "partition {p}: {replicas:?}");
        }
        // Two domains for three replicas: both used, three distinct drives.
        let two: Vec<Candidate<'_>> =
            ids.iter().enumerate().map(|(i, id)| Candidate { id, weight: 1.0, domain: Some(racks[i % 2]) }).collect();
        for replicas in place_all(256, &two, 3) {
            let used: BTreeSet<_> = replicas.iter().map(|r| two.iter().find(|d| d.id == r).unwrap().domain).collect();
            assert_eq!((used.len(), replicas.iter().collect::<BTreeSet<_>>().len()), (2, 3));
        }
    }

    #[test]
    fn fewer_drives_than_replicas_places_on_all() {
        let ids = drives(2);
        assert_eq!(place(7, &uniform(&ids), 3).len(), 2);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        /// A joining drive takes replicas only for itself, about its fair share of them.
        #[test]
        fn a_join_moves_replicas_only_to_the_new_drive(n in 3usize..12, partitions in 256u32..1024) {
            let before_ids = drives(n);
            let after_ids = drives(n + 1);
            let a = place_all(partitions, &uniform(&before_ids), 3);
            let b = place_all(partitions, &uniform(&after_ids), 3);
            let m = moved(&a, &b);
            prop_assert!(m.iter().all(|(_, d)| *d == after_ids[n]));
            let fair = partitions as f64 * 3.0 / (n + 1) as f64;
            prop_assert!((m.len() as f64) < fair * 1.3 + 10.0, "moved {} for a fair share of {fair}", m.len());
        }

        /// A leaving drive's replicas go elsewhere; nothing else moves.
        #[test]
        fn a_leave_moves_only_the_leavers_replicas(n in 4usize..12, gone in 0usize..4) {
            let ids = drives(n);
            let a = place_all(512, &uniform(&ids), 3);
            let rest: Vec<String> = ids.iter().filter(|d| **d != ids[gone]).cloned().collect();
            let b = place_all(512, &uniform(&rest), 3);
            for (old, new) in a.iter().zip(&b) {
                let kept: Vec<_> = old.iter().filter(|d| **d != ids[gone]).collect();
                prop_assert!(kept.iter().all(|d| new.contains(d)), "{old:?} -> {new:?}");
            }
        }

        /// Replicas are distinct drives, and the same input gives the same table.
        #[test]
        fn replicas_are_distinct_and_deterministic(n in 1usize..10, p in any::<u32>()) {
            let ids = drives(n);
            let r = place(p, &uniform(&ids), 3);
            prop_assert_eq!(r.iter().collect::<BTreeSet<_>>().len(), r.len());
            prop_assert_eq!(r.len(), n.min(3));
            prop_assert_eq!(r, place(p, &uniform(&ids), 3));
        }
    }
}
