//! Conditional writes: one round of Paxos over a key's replicas (CASPaxos: a register changed
//! by a function of its current write, one single-decree round per change), with the drives
//! as acceptors through their own compare-and-swap (Disk Paxos).
//!
//! A round reads a read quorum's entries, picks a ballot above every ballot and promise it
//! saw, and has a read quorum promise it (`replica::promise`): none of them will accept
//! anything below it from then on. The highest write they had accepted is the key's current
//! write; the condition is checked against it, and the new write (or, when the condition
//! fails and the current write is not yet on a write quorum, the current write itself) is
//! accepted under the ballot by a write quorum. Two rounds from the same current write cannot
//! both succeed: the later ballot's promises refuse the earlier one's accepts, or its prepare
//! sees the earlier one's write. An unconditional write needs no prepare (its value does not
//! depend on what it replaces): it is accepted under a tag above every position its read
//! quorum showed, and a replica that promised or accepted a higher ballot refuses it.

use super::*;

/// What a round does with the key's current write.
pub(super) enum Proposal<'a> {
    /// Make the current write chosen and return it (a read that met one not yet on a write
    /// quorum which it could not write back; a refused condition).
    Learn,
    /// Store `value` as a write of `kind` if `condition` admits the current write.
    Write { value: &'a Bytes, kind: Kind, condition: &'a Condition },
}

pub(super) enum Outcome {
    /// The write was chosen under this tag.
    Wrote(Tag),
    /// The key's current write, chosen (`NOTHING` when there is none), and its value.
    Current { identity: Tag, value: Bytes },
}

impl Store {
    /// One round for `key` (drive key `dkey`): `Err(OpError::Changed)` when a higher ballot
    /// got in the way (the caller starts again, deciding anew: nothing of this round can be
    /// chosen any more) or a batch's write must be settled first.
    pub(super) async fn round(&self, map: &Arc<ClusterMap>, key: &[u8], dkey: &Bytes, proposal: Proposal<'_>) -> Result<Outcome, OpError> {
        let partition = map.partition_of(key);
        let moving = map.moving_to(partition).is_some();
        let quorum = map.read_quorum();
        // What a read quorum holds, values included: each promise rewrites the value it read.
        let k = dkey.clone();
        let read = self
            .ask(map, partition, quorum, Ask::Quorum, move |_, c| {
                let k = k.clone();
                async move { replica::held_with_value(&c, &k).await }
            })
            .await?;
        let top = read.iter().filter_map(|(_, (h, _))| h.stamp()).map(|s| s.position()).max();
        let kind = match &proposal {
            Proposal::Write { kind, .. } => *kind,
            Proposal::Learn => Kind::Value,
        };
        let ballot = Tag::next(top.as_ref(), map.epoch, self.round_id(), kind);
        let known: Arc<BTreeMap<String, (Held, Bytes)>> = Arc::new(read.into_iter().collect());
        let k = dkey.clone();
        let promised = self
            .ask_where(map, partition, quorum, Ask::Quorum, Option::is_some, move |drive, c| {
                let (k, known) = (k.clone(), known.get(&drive).cloned());
                async move { replica::promise(&c, &k, ballot, known).await }
            })
            .await?;
        let promised: Vec<(String, Held, Bytes)> = promised.into_iter().filter_map(|(d, p)| p.map(|(h, v)| (d, h, v))).collect();
        if !quorum_met(map, partition, quorum, moving, promised.iter().map(|(d, _, _)| d)) {
            // A higher ballot stands on too many replicas: another round is under way (the
            // caller pauses before it tries again).
            return Err(OpError::Changed);
        }
        // The current write: the highest any promising replica accepted.
        let current = promised.iter().filter_map(|(_, h, v)| h.stamp().filter(|s| s.identity != NOTHING).map(|s| (s, v))).max_by_key(|(s, _)| s.order());
        let (current, value) = match current {
            Some((s, v)) => (Some(s), v.clone()),
            None => (None, Bytes::new()),
        };
        let holders = promised.iter().filter(|(_, h, _)| current.is_some_and(|s| h.holds(s.identity, s.ballot))).map(|(d, _, _)| d);
        let chosen = current.is_none() || joint_quorum(map, partition, usize::from(map.write_quorum), holders);
        if let Some(batch) = current.filter(|s| s.identity.is_batch() && !chosen) {
            // A batch's write is made whole on every member before any of them is built on;
            // one recorded chosen stands for this key whatever became of its other members,
            // and is accepted again here alone (as `abandon` accepts it).
            if !self.recorded(map, partition, batch.identity).await {
                self.settle_key(map, Bytes::copy_from_slice(key)).await?;
                return Err(OpError::Changed);
            }
        }
        let identity = current.map_or(NOTHING, |s| s.identity);
        let live = Some(identity).filter(|t| *t != NOTHING && !t.is_tombstone());
        let (write, value) = match proposal {
            Proposal::Write { value, kind, condition } if condition.admits(live) => (ballot.with_kind(kind), value.clone()),
            _ if chosen => return Ok(Outcome::Current { identity, value }),
            // Not on a write quorum yet: accepted again under this ballot, it is chosen.
            _ => (identity, value),
        };
        // A chosen batch about to be replaced: its record first (`write` says why).
        if write != identity && identity.is_batch() {
            self.ensure_record(map, partition, identity).await;
        }
        // The accept, on every replica; those that promised are known to hold the promise.
        let after: Arc<BTreeMap<String, Held>> = Arc::new(
            promised
                .iter()
                .map(|(d, h, _)| (d.clone(), h.promised(ballot)))
                .collect(),
        );
        let judged = if write == identity { Judged::Settle } else { Judged::Write };
        self.accept_decided(map, partition, dkey, (&value, write, ballot), after, judged).await?;
        Ok(if write == identity { Outcome::Current { identity, value } } else { Outcome::Wrote(write) })
    }

    /// A round's accept of `write` (with `value`) under `ballot`, on every replica, carried to
    /// the map it lands under (`decided`); `after` is what each promising replica holds.
    pub(super) async fn accept_decided(
        &self,
        map: &Arc<ClusterMap>,
        partition: u32,
        dkey: &Bytes,
        (value, write, ballot): (&Bytes, Tag, Tag),
        after: Arc<BTreeMap<String, Held>>,
        judged: Judged,
    ) -> Result<(), OpError> {
        // Other batches this replaces on a write quorum: recorded first (`chosen_beneath`).
        self.record_beneath(map, partition, chosen_beneath(map, partition, write, after.iter())).await;
        let (k, value) = (dkey.clone(), value.clone());
        self.decided(map, partition, judged, |map| {
            let (k, value, after) = (k.clone(), value.clone(), after.clone());
            async move {
                let (store, at) = (self.clone(), map.clone());
                let answers = self
                    .ask_where(&map, partition, usize::from(map.write_quorum), Ask::All, Answer::counts, move |drive, c| {
                        let (store, at, k, value, known) = (store.clone(), at.clone(), k.clone(), value.clone(), after.get(&drive).cloned());
                        async move {
                            match judged {
                                // A batch that landed after the round's read is decided first (`unread`).
                                Judged::Write => store.accept_deciding(&at, partition, (&drive, &c), unread::Accept::One { key: &k, value, identity: write, ballot, known }).await,
                                Judged::Settle => replica::accept(&c, &k, value, write, ballot, known).await,
                            }
                        }
                    })
                    .await?;
                self.judge(&map, partition, answers, judged)
            }
        })
        .await
    }

    /// Whether an accept was chosen: `Ok` when a write quorum took it or covers it (`Answer`).
    /// When every replica answered and none took it, it is nowhere, and the caller may decide
    /// again (`Changed`). When some took it and others refused it, it may yet be chosen by
    /// another's hand (a reader writing it back, a round that finds it the newest): a write's
    /// outcome is then unknown (`Contended`), as it is when replicas did not answer
    /// (`NoQuorum`). A write-back (`Settle`) that was refused goes on with a round of its own.
    pub(super) fn judge(&self, map: &ClusterMap, partition: u32, answers: Vec<(String, Answer)>, of: Judged) -> Result<(), OpError> {
        let moving = map.moving_to(partition).is_some();
        let w = usize::from(map.write_quorum);
        if quorum_met(map, partition, w, moving, answers.iter().filter(|(_, a)| a.counts()).map(|(d, _)| d)) {
            return Ok(());
        }
        let all_answered = answers.len() == map.writers_of(partition).len();
        // Replicas that hold the write itself: with none, it is nowhere.
        let reached = answers.iter().filter(|(_, a)| matches!(a, Answer::Yes | Answer::Held)).count();
        let refused = answers.iter().any(|(_, a)| *a == Answer::No);
        if (all_answered && reached == 0) || (of == Judged::Settle && (all_answered || refused)) {
            return Err(OpError::Changed);
        }
        // A replica refused it for a higher ballot: it raced another write or round (whether
        // or not every replica answered).
        if refused {
            return Err(OpError::Failed(ClusterError::Contended { partition }));
        }
        Err(OpError::Failed(ClusterError::NoQuorum { partition, needed: w, reached, out_of_space: 0, last_error: "replicas did not answer the accept".into() }))
    }
}

/// What an accept `judge`d was for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Judged {
    /// A write's own accept: taken by some and refused by the rest, its outcome is unknown.
    Write,
    /// A read's write-back of a write already accepted somewhere: refused, a round decides.
    Settle,
}
