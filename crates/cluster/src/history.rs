//! The history checker: what clients saw, checked for per-key linearizability.
//!
//! Clients under faults record each operation's invocation and response times and outcome.
//! Every write stores a value unique in the history, so a compare-and-swap on the version a
//! read returned is one on that read's value; a write whose outcome is unknown (the
//! client gave up or the quorum failed) may have taken effect at any moment after its
//! invocation, or never. Per key (linearizability is compositional), a depth-first search in
//! the manner of Wing and Gong, with Lowe's memoisation of (operations done, register state),
//! looks for an order that respects real time and register semantics. Failing means a lost
//! acknowledged write, a stale read or a value from nowhere.

use std::collections::{BTreeMap, HashSet};

/// A register's content: `None` is absent (never written, or deleted).
pub type Value = Option<u64>;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Put (Some) or delete (None).
    Write(Value),
    /// A read and what it returned.
    Read(Value),
    /// A compare-and-swap that took effect (or, unknown, may have): the register held
    /// `expect` and then `new` (a conditional delete writes `None`; "if absent" expects it).
    Cas { expect: Value, new: Value },
    /// A compare-and-swap refused: the register did not hold `expect` at its moment.
    Refused { expect: Value },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub key: u64,
    pub op: Op,
    /// Invocation time (any monotonic clock, the same for every client).
    pub call: u64,
    /// Response time; `None` for a write whose outcome is unknown.
    pub ret: Option<u64>,
}


#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub key: u64,
    pub events: Vec<Event>,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "key {}: no linearization of these {} operations:", self.key, self.events.len())?;
        for e in &self.events {
            writeln!(f, "  {:?} called {} returned {:?}", e.op, e.call, e.ret)?;
        }
        Ok(())
    }
}

/// Checks every key's history. Reads whose outcome is unknown must not be recorded.
pub fn check(events: &[Event]) -> Result<(), Violation> {
    let mut by_key: BTreeMap<u64, Vec<Event>> = BTreeMap::new();
    for e in events {
        by_key.entry(e.key).or_default().push(e.clone());
    }
    for (key, events) in by_key {
        if !check_key(&events) {
            return Err(Violation { key, events });
        }
    }
    Ok(())
}

/// Checks every key's history, and that each batch took effect on all its keys or on none:
/// `batches` lists each batch's writes as `(key, value)`. A batch whose outcome is unknown but
/// whose value some operation observed (a read, or a compare-and-swap expecting it) on one key
/// was done before that operation returned, so its writes on every key must be done by then:
/// their unknown responses become that moment, and a key where the batch never landed fails.
pub fn check_with_batches(events: &[Event], batches: &[Vec<(u64, u64)>]) -> Result<(), Violation> {
    let mut batch_of: std::collections::HashMap<u64, usize> = std::collections::HashMap::new();
    for (i, writes) in batches.iter().enumerate() {
        for &(_, value) in writes {
            batch_of.insert(value, i);
        }
    }
    let mut observed: BTreeMap<usize, u64> = BTreeMap::new();
    for e in events {
        let seen = match (&e.op, e.ret) {
            (Op::Read(Some(v)) | Op::Cas { expect: Some(v), .. }, Some(ret)) => batch_of.get(v).map(|&b| (b, ret)),
            _ => None,
        };
        if let Some((b, ret)) = seen {
            let at = observed.entry(b).or_insert(ret);
            *at = (*at).min(ret);
        }
    }
    let bounded: Vec<Event> = events
        .iter()
        .map(|e| match (&e.op, e.ret) {
            (Op::Write(Some(v)), None) => match batch_of.get(v).and_then(|b| observed.get(b)) {
                Some(&at) => Event { ret: Some(at.max(e.call)), ..e.clone() },
                None => e.clone(),
            },
            _ => e.clone(),
        })
        .collect();
    check(&bounded)
}

/// One key's history. First without the writes of unknown outcome whose value no operation
/// saw: each may be left out of a linearization (it may never have happened), and left in,
/// every one still open multiplies the states to search (lossy runs have hundreds). Only if
/// that finds no order is the whole history searched (a refused compare-and-swap may need
/// such a write to have changed the register).
pub fn check_key(events: &[Event]) -> bool {
    let mut events = events.to_vec();
    events.sort_by_key(|e| e.call);
    let saw: HashSet<Value> = events
        .iter()
        .filter_map(|e| match e.op {
            Op::Read(v) | Op::Cas { expect: v, .. } => Some(v),
            _ => None,
        })
        .collect();
    let unseen = |e: &Event| e.ret.is_none() && matches!(e.op, Op::Write(v) | Op::Cas { new: v, .. } if !saw.contains(&v));
    let seen_only: Vec<Event> = events.iter().filter(|e| !unseen(e)).cloned().collect();
    (seen_only.len() < events.len() && linearizable(&seen_only)) || linearizable(&events)
}

/// Whether `events`, sorted by invocation, have an order (`search`).
fn linearizable(events: &[Event]) -> bool {
    let mut seen = HashSet::new();
    let done = vec![0u64; events.len().div_ceil(64)];
    search(events, &done, None, &mut seen)
}

fn is_done(done: &[u64], i: usize) -> bool {
    done[i / 64] & (1 << (i % 64)) != 0
}

/// Depth-first: `done` marks the operations already placed, `state` the register after them.
fn search(events: &[Event], done: &[u64], state: Value, seen: &mut HashSet<(Vec<u64>, Value)>) -> bool {
    // The first operation not placed; everything before it is (events are sorted by call).
    let Some(first) = (0..events.len()).find(|&i| !is_done(done, i)) else { return true };
    // Finished when every operation with a known outcome is placed; unknown writes may be left.
    if (first..events.len()).all(|i| is_done(done, i) || events[i].ret.is_none()) {
        return true;
    }
    if !seen.insert((done.to_vec(), state)) {
        return false;
    }
    // An operation may go next only if none still to place returned before it was called.
    let horizon = (first..events.len()).filter(|&i| !is_done(done, i)).filter_map(|i| events[i].ret).min().unwrap_or(u64::MAX);
    for i in first..events.len() {
        let e = &events[i];
        if e.call > horizon {
            break;
        }
        if is_done(done, i) {
            continue;
        }
        let next = match e.op {
            Op::Write(v) => v,
            Op::Read(v) if v == state => state,
            Op::Read(_) => continue,
            Op::Cas { expect, new } if expect == state => new,
            Op::Cas { .. } => continue,
            Op::Refused { expect } if expect != state => state,
            Op::Refused { .. } => continue,
        };
        let mut placed = done.to_vec();
        placed[i / 64] |= 1 << (i % 64);
        if search(events, &placed, next, seen) {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    #[test]
    fn writes_of_unknown_outcome_no_one_saw_do_not_multiply_the_search() {
        // A write of 1, then 200 writes given up on, all open together and none read, then
        // reads of 1: a search that carries them tries every subset of them placed before
        // giving up on placing any (2^200); none are left to place once they are left out.
        let mut events = vec![Event { key: 0, op: Op::Write(Some(1)), call: 0, ret: Some(1) }];
        events.extend((0..200).map(|i| Event { key: 0, op: Op::Write(Some(1000 + i)), call: 2 + i, ret: None }));
        events.extend((0..200).map(|i| Event { key: 0, op: Op::Read(Some(1)), call: 400 + 2 * i, ret: Some(401 + 2 * i) }));
        assert!(check(&events).is_ok());
        // Still a violation: a read of a value before it was written.
        events.push(Event { key: 0, op: Op::Read(Some(2)), call: 900, ret: Some(901) });
        events.push(Event { key: 0, op: Op::Write(Some(2)), call: 950, ret: Some(951) });
        let known: Vec<Event> = events.iter().filter(|e| e.ret.is_some()).cloned().collect();
        assert!(check(&known).is_err());
    }

    #[test]
    fn a_refused_compare_and_swap_may_need_a_write_no_one_read() {
        // The register held 1; a write of 2 given up on; a swap expecting 1 refused: only the
        // unseen write explains the refusal.
        let events = vec![
            Event { key: 0, op: Op::Write(Some(1)), call: 0, ret: Some(1) },
            Event { key: 0, op: Op::Write(Some(2)), call: 2, ret: None },
            Event { key: 0, op: Op::Refused { expect: Some(1) }, call: 3, ret: Some(4) },
        ];
        assert!(check(&events).is_ok());
    }

    #[test]
    fn a_batch_seen_on_one_key_must_be_done_on_every_key() {
        let w = |key, v, call, ret| Event { key, op: Op::Write(Some(v)), call, ret };
        let r = |key, v, call, ret| Event { key, op: Op::Read(v), call, ret: Some(ret) };
        // Batch {0: 10, 1: 11}, outcome unknown; key 0 reads it at 5..6.
        let batch = vec![vec![(0, 10), (1, 11)]];
        let seen_on_both = vec![w(0, 10, 1, None), w(1, 11, 1, None), r(0, Some(10), 5, 6), r(1, Some(11), 7, 8)];
        assert!(check_with_batches(&seen_on_both, &batch).is_ok());
        // Key 1 read absent after key 0 showed the batch: half a batch.
        let half = vec![w(0, 10, 1, None), w(1, 11, 1, None), r(0, Some(10), 5, 6), r(1, None, 7, 8)];
        assert!(check(&half).is_ok(), "per key, each history alone is linearizable");
        assert_eq!(check_with_batches(&half, &batch).map_err(|v| v.key), Err(1));
        // Read absent on key 1 before key 0 showed it: the batch may have landed in between.
        let before = vec![w(0, 10, 1, None), w(1, 11, 1, None), r(1, None, 2, 3), r(0, Some(10), 5, 6)];
        assert!(check_with_batches(&before, &batch).is_ok());
    }

    use super::*;

    fn w(v: Value, call: u64, ret: Option<u64>) -> Event {
        Event { key: 1, op: Op::Write(v), call, ret }
    }
    fn r(v: Value, call: u64, ret: u64) -> Event {
        Event { key: 1, op: Op::Read(v), call, ret: Some(ret) }
    }

    #[test]
    fn sequential_histories() {
        assert!(check(&[w(Some(1), 0, Some(1)), r(Some(1), 2, 3), w(None, 4, Some(5)), r(None, 6, 7)]).is_ok());
        // A lost acknowledged write.
        assert!(check(&[w(Some(1), 0, Some(1)), r(None, 2, 3)]).is_err());
        // A stale read after a newer one.
        let h = [w(Some(1), 0, Some(1)), w(Some(2), 2, Some(3)), r(Some(2), 4, 5), r(Some(1), 6, 7)];
        assert!(check(&h).is_err());
        // A value nobody wrote.
        assert!(check(&[r(Some(9), 0, 1)]).is_err());
    }

    #[test]
    fn concurrency_allows_either_order_but_not_both() {
        // Two overlapping writes; reads after both may see either, but must then agree.
        let base = [w(Some(1), 0, Some(10)), w(Some(2), 1, Some(11))];
        let mut a = base.to_vec();
        a.extend([r(Some(1), 12, 13), r(Some(1), 14, 15)]);
        assert!(check(&a).is_ok());
        let mut b = base.to_vec();
        b.extend([r(Some(2), 12, 13), r(Some(1), 14, 15)]);
        assert!(check(&b).is_err());
        // A read overlapping a write may see old or new.
        assert!(check(&[w(Some(1), 0, Some(1)), w(Some(2), 2, Some(6)), r(Some(1), 3, 4), r(Some(2), 5, 7)]).is_ok());
    }

    #[test]
    fn unknown_writes_may_or_may_not_happen() {
        assert!(check(&[w(Some(1), 0, None), r(None, 1, 2)]).is_ok());
        assert!(check(&[w(Some(1), 0, None), r(Some(1), 1, 2)]).is_ok());
        // Once seen, it cannot disappear again without another write.
        assert!(check(&[w(Some(1), 0, None), r(Some(1), 1, 2), r(None, 3, 4)]).is_err());
        // It cannot take effect before it was called.
        assert!(check(&[r(Some(1), 0, 1), w(Some(1), 2, None)]).is_err());
    }

    fn cas(expect: Value, new: Value, call: u64, ret: Option<u64>) -> Event {
        Event { key: 1, op: Op::Cas { expect, new }, call, ret }
    }
    fn refused(expect: Value, call: u64, ret: u64) -> Event {
        Event { key: 1, op: Op::Refused { expect }, call, ret: Some(ret) }
    }

    #[test]
    fn compare_and_swap_needs_its_expected_value() {
        assert!(check(&[w(Some(1), 0, Some(1)), cas(Some(1), Some(2), 2, Some(3)), r(Some(2), 4, 5)]).is_ok());
        assert!(check(&[w(Some(1), 0, Some(1)), cas(Some(7), Some(2), 2, Some(3))]).is_err());
        // The race the cluster once lost: "if absent" and a put, both acknowledged, overlapping;
        // the conditional one cannot come second, so reads may not keep its value.
        let race = [cas(None, Some(2), 0, Some(10)), w(Some(1), 1, Some(11)), r(Some(2), 12, 13)];
        assert!(check(&race).is_err());
        let fine = [cas(None, Some(2), 0, Some(10)), w(Some(1), 1, Some(11)), r(Some(1), 12, 13)];
        assert!(check(&fine).is_ok());
        // Two compare-and-swaps from one value cannot both succeed.
        let both = [w(Some(1), 0, Some(1)), cas(Some(1), Some(2), 2, Some(10)), cas(Some(1), Some(3), 3, Some(11))];
        assert!(check(&both).is_err());
        // A refusal needs another value at its moment; an unknown one may or may not happen.
        assert!(check(&[w(Some(1), 0, Some(1)), refused(Some(1), 2, 3)]).is_err());
        assert!(check(&[w(Some(1), 0, Some(1)), refused(None, 2, 3), cas(Some(1), None, 4, None), r(None, 5, 6)]).is_ok());
        assert!(check(&[w(Some(1), 0, Some(1)), cas(Some(5), None, 4, None), r(None, 5, 6)]).is_err());
    }

    #[test]
    fn keys_are_checked_apart() {
        let mut h = vec![w(Some(1), 0, Some(1))];
        h.push(Event { key: 2, op: Op::Read(None), call: 2, ret: Some(3) });
        assert!(check(&h).is_ok());
    }

    #[test]
    fn long_histories_are_checked_whole() {
        // A thousand sequential writes each read back, then one stale read at the end.
        let mut h: Vec<Event> = Vec::new();
        for i in 0..1000u64 {
            h.push(w(Some(i), i * 4, Some(i * 4 + 1)));
            h.push(r(Some(i), i * 4 + 2, i * 4 + 3));
        }
        assert!(check_key(&h));
        h.push(r(Some(998), 5000, 5001));
        assert!(!check_key(&h));
    }
}
