//! One quorum's bookkeeping, fed with answers and doing no I/O: which replicas to ask first,
//! whom to ask next when one fails, refuses or is slow, and when the answers make the quorum.
//! `Store::ask_where` sends the requests and feeds their answers here; tests drive it with
//! answers in any order.
//!
//! While the partition moves, the quorum is joint: `needed` of its replicas and `needed` of
//! the drives it moves to (each set's need capped at its size), as in Raft's joint consensus.

use std::collections::VecDeque;

use crate::map::ClusterMap;
use crate::replica::Held;
use crate::stamp::Stamp;
use crate::tag::Tag;

/// Whether a request asks a quorum (a read: the first drives that can make it, more only as
/// needed) or every drive at once (a write).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ask {
    Quorum,
    All,
}

/// The drives of one partition a request may ask, and what they answered so far.
#[derive(Debug)]
pub(super) struct Quorum {
    replicas: Vec<String>,
    /// The drives the partition moves to, while it moves.
    joint: Option<Vec<String>>,
    needed: usize,
    /// Not asked yet, in the order to ask them.
    waiting: VecDeque<String>,
    /// Asked and not answered.
    in_flight: Vec<String>,
    /// Answered with an answer that counts toward the quorum.
    counted: Vec<String>,
}

impl Quorum {
    /// A quorum of `needed` over `replicas` (and `joint`, the drives a moving partition goes
    /// to), asking drives in `order`; returns it and the drives to ask at once.
    pub(super) fn start(replicas: &[String], joint: Option<&[String]>, needed: usize, mode: Ask, order: Vec<String>) -> (Quorum, Vec<String>) {
        let mut q = Quorum { replicas: replicas.to_vec(), joint: joint.map(<[String]>::to_vec), needed, waiting: VecDeque::new(), in_flight: Vec::new(), counted: Vec::new() };
        let first: Vec<String> = match mode {
            Ask::All => order.clone(),
            // The first drives in order that make the quorum: while the partition moves, each
            // one that counts toward a set still short of it.
            Ask::Quorum => {
                let mut picked: Vec<String> = Vec::new();
                for d in &order {
                    if q.met(picked.iter()) {
                        break;
                    }
                    let short = |set: &[String]| set.contains(d) && picked.iter().filter(|p| set.contains(p)).count() < needed.min(set.len());
                    if q.joint.is_none() || short(&q.replicas) || q.joint.as_deref().is_some_and(short) {
                        picked.push(d.clone());
                    }
                }
                picked
            }
        };
        q.waiting = order.into_iter().filter(|d| !first.contains(d)).collect();
        q.in_flight = first.clone();
        (q, first)
    }

    /// Whether `drives` make the quorum.
    fn met<'a>(&self, drives: impl Iterator<Item = &'a String> + Clone) -> bool {
        let of = |set: &[String]| drives.clone().filter(|d| set.contains(d)).count() >= self.needed.min(set.len().max(1));
        match &self.joint {
            None => drives.count() >= self.needed,
            Some(new) => of(&self.replicas) && of(new),
        }
    }

    /// Whether the answers that count make the quorum.
    pub(super) fn reached(&self) -> bool {
        self.met(self.counted.iter())
    }

    /// Whether every drive asked has answered (and the quorum, if short, can only grow by
    /// asking another).
    pub(super) fn idle(&self) -> bool {
        self.in_flight.is_empty()
    }

    /// Whether a drive is left to ask.
    pub(super) fn can_ask_more(&self) -> bool {
        !self.waiting.is_empty()
    }

    /// The next drive to ask, now marked asked.
    pub(super) fn ask_next(&mut self) -> Option<String> {
        let next = self.waiting.pop_front()?;
        self.in_flight.push(next.clone());
        Some(next)
    }

    /// `drive` answered; `counts` whether the answer counts toward the quorum. Returns the
    /// drive to ask in its place when it does not.
    pub(super) fn answered(&mut self, drive: &str, counts: bool) -> Option<String> {
        self.in_flight.retain(|d| d != drive);
        if counts {
            self.counted.push(drive.to_string());
            None
        } else {
            self.ask_next()
        }
    }

    /// `drive` failed to answer (or answered with an error): returns the drive to ask in its
    /// place.
    pub(super) fn failed(&mut self, drive: &str) -> Option<String> {
        self.in_flight.retain(|d| d != drive);
        self.ask_next()
    }

    /// The quorum is slower than the hedge allows: returns the drives still out (to suspect)
    /// and the drive to ask beside them.
    pub(super) fn hedge(&mut self) -> (Vec<String>, Option<String>) {
        let slow = self.in_flight.clone();
        (slow, self.ask_next())
    }
}

/// Whether `drives` make a quorum of `needed`: of any of the partition's drives, or while it
/// moves, of each of its two sets.
pub(super) fn quorum_met<'a>(map: &ClusterMap, partition: u32, needed: usize, moving: bool, drives: impl Iterator<Item = &'a String> + Clone) -> bool {
    if moving {
        joint_quorum(map, partition, needed, drives)
    } else {
        drives.count() >= needed
    }
}

/// Whether `drives` include `needed` of `partition`'s replicas and, while it moves, `needed`
/// of the drives it moves to (each set's need capped at its size).
pub(super) fn joint_quorum<'a>(map: &ClusterMap, partition: u32, needed: usize, drives: impl Iterator<Item = &'a String> + Clone) -> bool {
    let of = |set: &[String]| drives.clone().filter(|d| set.contains(d)).count() >= needed.min(set.len().max(1));
    of(map.replicas_of(partition)) && map.moving_to(partition).is_none_or(of)
}

/// Whether `newest`, the newest write among `answers` (what replicas of `partition` hold for
/// one key), is a batch not yet on a write quorum of them: one a read would write back.
pub(super) fn unsettled_batch<'a>(map: &ClusterMap, partition: u32, newest: &Stamp, answers: impl Iterator<Item = (&'a String, &'a Held)> + Clone) -> bool {
    let holders = answers.filter(|(_, h)| h.holds(newest.identity, newest.ballot)).map(|(d, _)| d);
    newest.identity.is_batch() && !joint_quorum(map, partition, usize::from(map.write_quorum), holders)
}

/// The batches other than `write` that stand on a write quorum of `answers` (what replicas of
/// `partition` hold for one key, `write` about to replace them there): chosen, so their
/// records are left first. Once their entries are replaced on some replicas, those entries
/// may no longer tell that they were chosen, and a record is what says so
/// (docs/design/simulation.md, Open findings).
pub(super) fn chosen_beneath<'a>(map: &ClusterMap, partition: u32, write: Tag, answers: impl Iterator<Item = (&'a String, &'a Held)> + Clone) -> Vec<Tag> {
    let mut chosen = Vec::new();
    add_chosen_beneath(map, partition, write, answers, &mut chosen);
    chosen
}

/// `chosen_beneath` for a batch `write` over several keys, `answers` holding what each
/// replica holds of every key in order.
pub(super) fn chosen_beneath_keys(map: &ClusterMap, partition: u32, write: Tag, keys: usize, answers: &std::collections::BTreeMap<String, Vec<Held>>) -> Vec<Tag> {
    let mut chosen = Vec::new();
    for i in 0..keys {
        add_chosen_beneath(map, partition, write, answers.iter().filter_map(|(d, h)| Some((d, h.get(i)?))), &mut chosen);
    }
    chosen
}

/// Adds to `chosen` the batches `chosen_beneath` finds in `answers` that it does not hold yet.
fn add_chosen_beneath<'a>(map: &ClusterMap, partition: u32, write: Tag, answers: impl Iterator<Item = (&'a String, &'a Held)> + Clone, chosen: &mut Vec<Tag>) {
    for stamp in answers.clone().filter_map(|(_, h)| h.stamp()) {
        let batch = stamp.identity;
        if batch.is_batch() && !batch.same_write(&write) && !chosen.iter().any(|c| c.same_write(&batch)) && !unsettled_batch(map, partition, &stamp, answers.clone()) {
            chosen.push(batch);
        }
    }
}

/// Whether a write decided under `decision` (its read or prepare asked quorums of that map's
/// replica sets) may have its accept carried to `now`: only where every write quorum of `now`
/// includes one of a set it asked, whose replicas hold the promises and writes it was decided
/// against. A partition that moved to drives the decision never asked (they hold what the
/// move copied, without the promises) cannot take it.
pub(super) fn carries(decision: &ClusterMap, now: &ClusterMap, partition: u32) -> bool {
    let replicas = now.replicas_of(partition);
    replicas == decision.replicas_of(partition) || decision.moving_to(partition).is_some_and(|to| to == replicas)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn names(n: usize, prefix: &str) -> Vec<String> {
        (0..n).map(|i| format!("{prefix}{i}")).collect()
    }

    /// How each asked drive answers, by its index in `order`.
    #[derive(Debug, Clone, Copy)]
    enum Reply {
        Counts,
        Refuses,
        Fails,
    }

    /// Runs a quorum to its end with the answers `replies` (indexed by drive, in order) coming
    /// back in the order `pick` chooses among the drives out, hedging when `hedges` says;
    /// returns whether it was reached, the drives asked (in order) and those counted.
    fn run(q: &mut Quorum, first: Vec<String>, order: &[String], replies: &[Reply], pick: &[usize], hedges: &[bool]) -> (bool, Vec<String>, Vec<String>) {
        let mut asked = first.clone();
        let mut out = first;
        let mut counted = Vec::new();
        let mut step = 0;
        while !q.reached() {
            if out.is_empty() {
                match q.ask_next() {
                    Some(d) => {
                        asked.push(d.clone());
                        out.push(d);
                    }
                    None => break,
                }
                continue;
            }
            if hedges.get(step).copied().unwrap_or(false) && q.can_ask_more() {
                let (slow, next) = q.hedge();
                assert_eq!(slow.len(), out.len(), "the slow ones are the drives out");
                if let Some(d) = next {
                    asked.push(d.clone());
                    out.push(d);
                }
            }
            let i = pick.get(step).copied().unwrap_or(0) % out.len();
            step += 1;
            let drive = out.remove(i);
            let reply = replies[order.iter().position(|d| *d == drive).unwrap()];
            let next = match reply {
                Reply::Counts => {
                    counted.push(drive.clone());
                    q.answered(&drive, true)
                }
                Reply::Refuses => q.answered(&drive, false),
                Reply::Fails => q.failed(&drive),
            };
            if let Some(d) = next {
                asked.push(d.clone());
                out.push(d);
            }
            // Outside a move, a drive that fails or refuses is replaced at once: while drives
            // are left, enough are out to make the quorum if they all answer.
            if q.joint.is_none() && !q.reached() && q.can_ask_more() {
                assert!(out.len() + counted.len() >= q.needed, "{} out and {} counted, {} needed", out.len(), counted.len(), q.needed);
            }
        }
        (q.reached(), asked, counted)
    }

    fn reply() -> impl Strategy<Value = Reply> {
        prop_oneof![4 => Just(Reply::Counts), 1 => Just(Reply::Refuses), 1 => Just(Reply::Fails)]
    }

    proptest! {
        /// Whatever the answers and their order: no drive is asked twice; the quorum is
        /// reported reached exactly when `needed` counted answers came (of each set while
        /// the partition moves); and a quorum short at the end has asked every drive.
        #[test]
        fn a_quorum_is_reached_exactly_when_enough_count(
            replicas in 1usize..=5,
            moving in any::<bool>(),
            joining in 1usize..=3,
            needed_raw in 1usize..=5,
            all in any::<bool>(),
            replies in proptest::collection::vec(reply(), 8),
            pick in proptest::collection::vec(0usize..8, 0..40),
            hedges in proptest::collection::vec(any::<bool>(), 0..40),
        ) {
            let needed = needed_raw.min(replicas);
            let old = names(replicas, "r");
            // The drives it moves to: some of the replicas stay, and `joining` are new.
            let new: Vec<String> = old.iter().skip(1).cloned().chain(names(joining, "n")).collect();
            let joint = moving.then_some(new.as_slice());
            let mut order = old.clone();
            if moving {
                order.extend(names(joining, "n"));
            }
            let mode = if all { Ask::All } else { Ask::Quorum };
            let (mut q, first) = Quorum::start(&old, joint, needed, mode, order.clone());
            if all {
                prop_assert_eq!(&first, &order, "a write asks every drive at once");
            }
            let (reached, asked, counted) = run(&mut q, first, &order, &replies, &pick, &hedges);
            let mut distinct = asked.clone();
            distinct.sort();
            distinct.dedup();
            prop_assert_eq!(distinct.len(), asked.len(), "a drive was asked twice: {:?}", asked);
            let of = |set: &[String]| counted.iter().filter(|d| set.contains(d)).count() >= needed.min(set.len());
            let enough = of(&old) && (!moving || of(&new));
            prop_assert_eq!(reached, enough, "counted {:?}", counted);
            if !reached {
                prop_assert_eq!(asked.len(), order.len(), "a short quorum left a drive unasked");
            }
        }
    }

    /// A read asks only the drives that can make its quorum; while the partition moves, it
    /// asks the replicas that stay first, then what the drives it moves to still lack.
    #[test]
    fn a_read_asks_no_more_than_its_quorum_needs() {
        let old = names(3, "r");
        let (_, first) = Quorum::start(&old, None, 2, Ask::Quorum, old.clone());
        assert_eq!(first, vec!["r0", "r1"]);
        // r1 and r2 stay, n0 joins: r1 and r2 make 2 of each set.
        let new = vec!["r1".to_string(), "r2".to_string(), "n0".to_string()];
        let order = vec!["r1".to_string(), "r2".to_string(), "r0".to_string(), "n0".to_string()];
        let (_, first) = Quorum::start(&old, Some(&new), 2, Ask::Quorum, order);
        assert_eq!(first, vec!["r1", "r2"]);
    }

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_write_is_carried_only_to_maps_whose_quorums_meet_a_set_it_asked() {
        let mut old = ClusterMap::new(1, 3, 2).unwrap();
        old.placement = vec![ids(&["a", "b", "c"])];
        let mut joint = old.clone();
        joint.moving.insert(0, ids(&["a", "b", "d"]));
        let mut flipped = old.clone();
        flipped.placement = vec![ids(&["a", "b", "d"])];
        // Fenced with nothing moved, or into a move (the old set still makes every quorum).
        assert!(carries(&old, &old, 0) && carries(&old, &joint, 0));
        // Decided during the move: the drives it moved to were asked too.
        assert!(carries(&joint, &flipped, 0) && carries(&joint, &old, 0));
        // Decided before the move, after its flip: d never promised anything it was asked.
        assert!(!carries(&old, &flipped, 0));
    }

    #[test]
    fn a_moving_partition_needs_a_quorum_of_both_sets() {
        let mut map = ClusterMap::new(1, 3, 2).unwrap();
        map.placement = vec![ids(&["a", "b", "c"])];
        let q = |map: &ClusterMap, held: &[&str]| joint_quorum(map, 0, 2, ids(held).iter());
        assert!(q(&map, &["b", "c"]));
        assert!(!q(&map, &["c", "d"]));
        map.moving.insert(0, ids(&["a", "b", "d"]));
        // Two of the old replicas, one of the new: not enough while it moves.
        assert!(!q(&map, &["b", "c"]));
        assert!(q(&map, &["a", "b"]));
        assert!(q(&map, &["b", "c", "d"]));
        assert!(!q(&map, &["a", "d"]));
        // A set smaller than the quorum needs all of itself.
        map.moving.insert(0, ids(&["d"]));
        assert!(q(&map, &["a", "b", "d"]));
        assert!(!q(&map, &["a", "b"]));
    }

    #[test]
    fn only_other_batches_on_a_write_quorum_of_both_sets_are_chosen_beneath() {
        use crate::tag::Kind;
        let mut map = ClusterMap::new(1, 3, 2).unwrap();
        map.placement = vec![ids(&["a", "b", "c"])];
        let tag = |counter, kind| Tag { epoch: 1, counter, writer: 7, kind };
        let (batch, other, write) = (tag(10, Kind::BatchValue), tag(12, Kind::BatchTombstone), tag(20, Kind::Value));
        let held = |t: Tag| Held::from_version(Stamp::plain(t).encode());
        let answers = |v: &[(&str, Tag)]| v.iter().map(|(d, t)| (d.to_string(), held(*t))).collect::<Vec<_>>();
        let beneath = |map: &ClusterMap, write: Tag, v: &[(String, Held)]| chosen_beneath(map, 0, write, v.iter().map(|(d, h)| (d, h)));
        // On two of three: chosen, once, whatever writes beside it.
        let two = answers(&[("a", batch), ("b", batch), ("c", write)]);
        assert_eq!(beneath(&map, write, &two), vec![batch]);
        // The batch being written back itself is not another batch.
        assert!(beneath(&map, batch, &two).is_empty());
        // On one: not known chosen, no record to leave; a plain write never has one.
        assert!(beneath(&map, write, &answers(&[("a", batch), ("b", other), ("c", write)])).is_empty());
        assert!(beneath(&map, batch, &answers(&[("a", write), ("b", write), ("c", batch)])).is_empty());
        // While the partition moves, a write quorum of each set.
        map.moving.insert(0, ids(&["a", "d", "e"]));
        assert!(beneath(&map, write, &two).is_empty());
        let joint = answers(&[("a", batch), ("b", batch), ("d", batch), ("e", write)]);
        assert_eq!(beneath(&map, write, &joint), vec![batch]);
    }
}
