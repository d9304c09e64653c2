use super::*;
use crate::stamp::ballot_of;
use crate::BatchError;

impl Store {

    /// Writes `ops` atomically: readers see all of them or none (batch.rs). Every key must
    /// be in one partition (a key's hash tag, `{...}`, puts related keys together); each
    /// operation's condition is checked against what a read quorum holds. Returns each
    /// operation's new version.
    pub async fn batch(&self, ops: Vec<BatchOp>) -> Result<Vec<Bytes>, ClusterError> {
        if ops.is_empty() || ops.len() > MAX_BATCH_OPS {
            return Err(BatchError::Size { given: ops.len(), max: MAX_BATCH_OPS }.into());
        }
        let keys: Vec<&Bytes> = ops.iter().map(BatchOp::key).collect();
        for k in &keys {
            Self::check_key(k)?;
        }
        let mut distinct = keys.clone();
        distinct.sort();
        distinct.dedup();
        if distinct.len() != keys.len() {
            return Err(BatchError::RepeatedKey.into());
        }
        let header = batch::header_len(&keys);
        for op in &ops {
            let len = header + op.value().len();
            if len > MAX_VALUE_LEN {
                return Err(ClusterError::ValueTooLarge { len: op.value().len(), max: MAX_VALUE_LEN.saturating_sub(header) });
            }
        }
        let ops = &ops;
        self.with_map(|map| async move { self.batch_in(&map, ops).await }).await
    }

    async fn batch_in(&self, map: &Arc<ClusterMap>, ops: &[BatchOp]) -> Result<Vec<Bytes>, OpError> {
        let partition = map.partition_of(ops[0].key());
        if let Some(other) = ops.iter().find(|op| map.partition_of(op.key()) != partition) {
            return Err(OpError::Failed(
                BatchError::Partitions {
                    first: String::from_utf8_lossy(ops[0].key()).into_owned(),
                    first_partition: partition,
                    other: String::from_utf8_lossy(other.key()).into_owned(),
                    other_partition: map.partition_of(other.key()),
                }
                .into(),
            ));
        }
        let dkeys: Arc<Vec<Bytes>> = Arc::new(ops.iter().map(|op| map::drive_key(partition, op.key())).collect());
        let conditional = ops.iter().any(|op| *op.condition() != Condition::None);
        let (ballot, known) = if conditional { self.prepare_batch(map, partition, ops, &dkeys).await? } else { self.positions(map, partition, ops, &dkeys).await? };
        let tag = ballot.with_kind(Kind::BatchValue);
        let members: Vec<&Bytes> = ops.iter().map(BatchOp::key).collect();
        let entries: Vec<BatchEntry> = ops
            .iter()
            .zip(dkeys.iter())
            .map(|(op, dkey)| {
                let kind = if op.is_delete() { Kind::BatchTombstone } else { Kind::BatchValue };
                (dkey.clone(), batch::encode_entry(&members, op.value()), tag.with_kind(kind))
            })
            .collect();
        let versions = entries.iter().map(|(_, _, t)| t.encode()).collect();
        // Other batches this replaces on a write quorum: recorded first (`chosen_beneath`).
        self.record_beneath(map, partition, chosen_beneath_keys(map, partition, tag, entries.len(), &known)).await;
        let known = Arc::new(known);
        let entries = Arc::new(entries);
        self.decided(map, partition, Judged::Write, |map| {
            let (entries, known, store) = (entries.clone(), known.clone(), self.clone());
            async move {
                let at = map.clone();
                let answers = self
                    .ask_where(&map, partition, usize::from(map.write_quorum), Ask::All, Answer::counts, move |drive, c| {
                        let (entries, known, store, at) = (entries.clone(), known.clone(), store.clone(), at.clone());
                        // A batch that landed after the write's read is decided first (`unread`).
                        async move { store.accept_deciding(&at, partition, (&drive, &c), unread::Accept::Batch { entries: &entries, ballot: tag, known: known.get(&drive).cloned() }).await }
                    })
                    .await?;
                self.judge(&map, partition, answers, Judged::Write)?;
                // Chosen: said where a reader that cannot tell from the entries will look
                // (`crate::record`), before the batch is acknowledged.
                self.leave_record(&map, partition, tag).await;
                Ok(())
            }
        })
        .await?;
        Ok(versions)
    }

    /// An unconditional batch's tag: above every position a read quorum shows for any of its
    /// keys (as an unconditional put's), with what each replica read held. A key whose newest
    /// write there is a batch on a write quorum has its record left; one not yet on a write
    /// quorum is settled first, as by a read, and the keys read again (once: `write` says why).
    async fn positions(&self, map: &Arc<ClusterMap>, partition: u32, ops: &[BatchOp], dkeys: &Arc<Vec<Bytes>>) -> Result<(Tag, BTreeMap<String, Vec<Held>>), OpError> {
        let mut settled = false;
        loop {
            let k = dkeys.clone();
            let answers = self
                .ask(map, partition, map.read_quorum(), Ask::Quorum, move |_, c| {
                    let k = k.clone();
                    async move { replica::held_many(&c, &k).await }
                })
                .await?;
            // Each key's batch on top decided before it is replaced (`write` says why; one on
            // a write quorum is recorded as the accept starts, `batch_in`).
            let mut unsettled = Vec::new();
            for (i, op) in ops.iter().enumerate() {
                let of_key = answers.iter().filter_map(|(d, h)| Some((d, h.get(i)?)));
                let newest = of_key.clone().filter_map(|(_, h)| h.stamp().filter(|s| s.identity != NOTHING)).max_by_key(Stamp::order);
                if newest.is_some_and(|n| unsettled_batch(map, partition, &n, of_key)) {
                    unsettled.push(op.key());
                }
            }
            if !settled && !unsettled.is_empty() {
                settled = true;
                for key in unsettled {
                    if let Err(e) = self.settle_key(map, key.clone()).await {
                        tracing::debug!(?key, error = ?e, "a batch on top not settled before a batch over it");
                    }
                }
                continue;
            }
            let top = answers.iter().flat_map(|(_, h)| h.iter().filter_map(Held::stamp)).map(|s| s.position()).max();
            return Ok((Tag::next(top.as_ref(), map.epoch, self.writer_id(), Kind::BatchValue), answers.into_iter().collect()));
        }
    }

    /// A conditional batch's prepare, as a round's (`round`) over all of its keys at once:
    /// a read quorum promises the ballot for every key, each key's current write is the
    /// highest they accepted, and every operation's condition is checked against it (one
    /// refusal refuses all). A current write not yet on a write quorum is settled by a read
    /// first, and the batch decides again. Returns the ballot and what each promising replica
    /// holds after its promise.
    async fn prepare_batch(&self, map: &Arc<ClusterMap>, partition: u32, ops: &[BatchOp], dkeys: &Arc<Vec<Bytes>>) -> Result<(Tag, BTreeMap<String, Vec<Held>>), OpError> {
        let (ballot, promised) = self.promise_keys(map, partition, dkeys, Reach::Quorum).await?;
        let mut chosen = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            let current = promised.iter().filter_map(|(_, h)| h[i].stamp().filter(|s| s.identity != NOTHING)).max_by_key(Stamp::order);
            if let Some(s) = current {
                let holders = promised.iter().filter(|(_, h)| h[i].holds(s.identity, s.ballot)).map(|(d, _)| d);
                if !joint_quorum(map, partition, usize::from(map.write_quorum), holders) {
                    self.settle_key(map, op.key().clone()).await?;
                    return Err(OpError::Changed);
                }
            }
            let live = current.map(|s| s.identity).filter(|t| !t.is_tombstone());
            if !op.condition().admits(live) {
                return Err(OpError::Failed(ClusterError::VersionMismatch { current: live.map(|t| t.encode()) }));
            }
            if let Some(s) = current.filter(|s| s.identity.is_batch() && !chosen.contains(&s.identity)) {
                chosen.push(s.identity);
            }
        }
        // Chosen batches about to be replaced: their records first (`write` says why).
        for batch in chosen {
            self.ensure_record(map, partition, batch).await;
        }
        let after = promised
            .into_iter()
            .map(|(d, held)| (d, held.iter().map(|h| h.promised(ballot)).collect()))
            .collect();
        Ok((ballot, after))
    }

    /// A round's prepare over several keys of one partition at once: a ballot above every
    /// position a read quorum (or every replica, `reach`) shows for any of them, promised by
    /// as many for all of them; what each promising replica held for each key before its
    /// promise.
    async fn promise_keys(&self, map: &Arc<ClusterMap>, partition: u32, dkeys: &Arc<Vec<Bytes>>, reach: Reach) -> Result<(Tag, Vec<(String, Vec<Held>)>), OpError> {
        let (quorum, mode) = match reach {
            Reach::Quorum => (map.read_quorum(), Ask::Quorum),
            Reach::Every => (map.writers_of(partition).len(), Ask::All),
        };
        let moving = map.moving_to(partition).is_some();
        let k = dkeys.clone();
        let read = self
            .ask(map, partition, quorum, mode, move |_, c| {
                let k = k.clone();
                async move { replica::held_many_with_values(&c, &k).await }
            })
            .await?;
        let top = read.iter().flat_map(|(_, h)| h.iter().filter_map(|(h, _)| h.stamp())).map(|s| s.position()).max();
        let ballot = Tag::next(top.as_ref(), map.epoch, self.round_id(), Kind::BatchValue);
        let known: Arc<BTreeMap<String, Vec<(Held, Bytes)>>> = Arc::new(read.into_iter().collect());
        let k = dkeys.clone();
        let promised = self
            .ask_where(map, partition, quorum, mode, Option::is_some, move |drive, c| {
                let (k, known) = (k.clone(), known.get(&drive).cloned());
                async move { replica::promise_many(&c, &k, ballot, known).await }
            })
            .await?;
        let promised: Vec<(String, Vec<Held>)> = promised.into_iter().filter_map(|(d, p)| p.map(|h| (d, h.into_iter().map(|(h, _)| h).collect()))).collect();
        let short = match reach {
            Reach::Quorum => !quorum_met(map, partition, quorum, moving, promised.iter().map(|(d, _)| d)),
            Reach::Every => promised.len() < quorum,
        };
        if short {
            // A higher ballot stands on too many replicas: another round is under way.
            tracing::debug!(partition, ?ballot, promised = ?promised.iter().map(|(d, _)| d).collect::<Vec<_>>(), "a batch's round not promised by enough replicas");
            return Err(OpError::Changed);
        }
        Ok((ballot, promised))
    }

    /// A round that makes a batch chosen whose write-back a replica's promise refused:
    /// `entries` are its members at one write, as a holder has them (members replaced by a
    /// newer write already settled and left out). A read quorum (or every replica, `reach`)
    /// promises a ballot above every position it holds for the batch's keys; if no key's
    /// highest accepted write among them is above the batch (`leaves_room`), the entries are accepted again,
    /// whole, under that ballot (their identities kept), by every replica that answers (a
    /// write quorum at least). Anything above the batch met on the way: nothing accepted, and
    /// the members it was met for named (`Learned::Overtaken`). Writes proven never
    /// chosen up to a ballot (`passed_over`: with the abandoning's ballot, above the batch
    /// on some replica) do not count as a key's current write, and are overwritten; accepted
    /// again above that ballot (a round took one up since), they count.
    pub(super) async fn learn_batch(
        &self,
        map: &Arc<ClusterMap>,
        partition: u32,
        entries: Arc<Vec<BatchEntry>>,
        reach: Reach,
        passed_over: (&[Tag], Tag),
    ) -> Result<Learned, OpError> {
        let dkeys: Arc<Vec<Bytes>> = Arc::new(entries.iter().map(|(k, _, _)| k.clone()).collect());
        let (ballot, promised) = self.promise_keys(map, partition, &dkeys, reach).await?;
        let counts = |s: &Stamp| counts_as_current(s, passed_over);
        let currents: Vec<(Tag, Option<Stamp>)> = entries
            .iter()
            .enumerate()
            .map(|(i, (_, _, tag))| (*tag, promised.iter().filter_map(|(_, h)| h[i].stamp().filter(counts)).max_by_key(Stamp::order)))
            .collect();
        if let Some(newer) = overtaken(&currents) {
            tracing::debug!(batch = ?currents[0].0, currents = ?currents.iter().map(|(_, c)| c).collect::<Vec<_>>(), "a batch's round met a newer write");
            return Ok(Learned::Overtaken { newer });
        }
        let after: Arc<BTreeMap<String, Vec<Held>>> =
            Arc::new(promised.into_iter().map(|(d, held)| (d, held.iter().map(|h| h.promised(ballot)).collect())).collect());
        let batch_tag = entries.first().map(|(_, _, tag)| *tag);
        if let Some(tag) = batch_tag {
            self.record_beneath(map, partition, chosen_beneath_keys(map, partition, tag, entries.len(), &after)).await;
        }
        self.decided(map, partition, Judged::Settle, |map| {
            let (entries, after) = (entries.clone(), after.clone());
            async move {
                let answers = self
                    .ask_where(&map, partition, usize::from(map.write_quorum), Ask::All, Answer::counts, move |drive, c| {
                        let (entries, known) = (entries.clone(), after.get(&drive).cloned());
                        async move { replica::accept_batch(&c, &entries, ballot, known).await }
                    })
                    .await?;
                self.judge(&map, partition, answers, Judged::Settle)?;
                // Chosen whole: recorded as its writer records it (`crate::record`).
                if let Some(tag) = batch_tag {
                    self.leave_record(&map, partition, tag).await;
                }
                Ok(())
            }
        })
        .await
        .map(|()| Learned::Done)
    }
}

/// What a batch's round (`learn_batch`) came to.
pub(super) enum Learned {
    /// Accepted again whole: chosen.
    Done,
    /// A member's highest write on the promising replicas is above the batch: nothing
    /// accepted. `newer`: the entries whose write there is a newer one (the rest, an older
    /// write a round took up above the batch's ballot).
    Overtaken { newer: Vec<usize> },
}

impl Learned {
    /// For a caller that reads again whatever stopped the round.
    pub(super) fn done(self) -> Result<(), OpError> {
        match self {
            Learned::Done => Ok(()),
            Learned::Overtaken { .. } => Err(OpError::Changed),
        }
    }
}

/// Whether a replica's write `s` counts as its key's current write in a round that passes over
/// `passed_over` (writes proven never chosen up to a ballot).
fn counts_as_current(s: &Stamp, (passed, up_to): (&[Tag], Tag)) -> bool {
    s.identity != NOTHING && !passed.iter().any(|x| s.identity.same_write(x) && s.ballot <= ballot_of(up_to))
}

/// Whether a round may make the batch write `tag` chosen for a key whose highest accepted
/// write on the promising replicas is `current`: the batch's own, or one ordered below the
/// batch's tag, or none. Below it, the promising replicas never took the batch for this key
/// (a holder outside them has it whole): the batch's accept replaces that older write there
/// as its writer's own accept would have, and anything chosen for the key would stand on one
/// of them. A write ordered above the batch's tag (a newer write, or a round that made an
/// older one chosen under a higher ballot) leaves no room for it.
fn leaves_room(current: Option<Stamp>, tag: Tag) -> bool {
    current.is_none_or(|s| s.identity.same_write(&tag) || s.order() < Stamp::plain(tag).order())
}

/// Whether a batch's round must stop, given each entry's tag and its key's current write on
/// the promising replicas: `None` when every key leaves room for the batch (`leaves_room`),
/// else the entries whose current write is a newer one (the rest that stop it hold an older
/// write a round took up above the batch's ballot).
fn overtaken(currents: &[(Tag, Option<Stamp>)]) -> Option<Vec<usize>> {
    if currents.iter().all(|(tag, current)| leaves_room(*current, *tag)) {
        return None;
    }
    // A newer write is accepted under a ballot at least its tag: it never leaves room.
    Some(currents.iter().enumerate().filter(|(_, (tag, current))| current.is_some_and(|s| s.identity > *tag)).map(|(i, _)| i).collect())
}

/// How many replicas a batch's round asks to promise.
#[derive(Clone, Copy)]
pub(super) enum Reach {
    /// A read quorum, as any round (a reader's write-back refused by a promise).
    Quorum,
    /// Every replica (the scrub's, which must reach the one a promise held back).
    Every,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_passed_over_counts_again_once_accepted_above_the_ballot_it_was_proven_at() {
        let tag = |counter| Tag { epoch: 3, counter, writer: 1, kind: Kind::BatchValue };
        let (passed, proven_at) = (tag(10), tag(20).with_kind(Kind::Value));
        let at = |ballot: u64| Stamp { identity: passed, ballot: tag(ballot).with_kind(Kind::Value), promise: None };
        assert!(!counts_as_current(&at(10), (&[passed], proven_at)));
        assert!(!counts_as_current(&at(20), (&[passed], proven_at)));
        // Taken up by a round above the abandoning's ballot: chosen maybe, so it counts.
        assert!(counts_as_current(&at(21), (&[passed], proven_at)));
        // Another write counts whatever is passed over.
        assert!(counts_as_current(&Stamp::plain(tag(11).with_kind(Kind::Value)), (&[passed], proven_at)));
        assert!(!counts_as_current(&Stamp::plain(NOTHING), (&[], NOTHING)));
    }

    #[test]
    fn a_round_names_the_members_a_newer_write_overtook() {
        let tag = |counter, kind| Tag { epoch: 7, counter, writer: 1, kind };
        let batch = tag(82, Kind::BatchValue);
        let plain = |identity: Tag, ballot: u64| Some(Stamp { identity, ballot: tag(ballot, Kind::Value), promise: None });
        // Room on every key: the round goes on.
        assert_eq!(overtaken(&[(batch, None), (batch, plain(tag(23, Kind::Value), 23))]), None);
        // A newer write of the second key: named.
        assert_eq!(overtaken(&[(batch, None), (batch, plain(tag(85, Kind::Value), 85))]), Some(vec![1]));
        // An older write taken up above the batch's ballot stops it too, unnamed: it proves
        // the batch not chosen there, and nothing newer is to be settled.
        assert_eq!(overtaken(&[(batch, plain(tag(23, Kind::Value), 90)), (batch, None)]), Some(vec![]));
    }

    #[test]
    fn a_batch_is_made_chosen_over_older_writes_but_never_over_newer_ones() {
        // --churn --slow --concurrency 8 --keys 64 seed 15: the batch whole on a holder outside
        // the promising replicas, which hold an older write for one of its keys.
        let tag = |counter, kind| Tag { epoch: 7, counter, writer: 1, kind };
        let batch = tag(82, Kind::BatchValue);
        let at = |identity: Tag, ballot: u64| Stamp { identity, ballot: tag(ballot, Kind::Value), promise: Some(tag(96, Kind::Value)) };
        assert!(leaves_room(None, batch));
        assert!(leaves_room(Some(at(batch, 82)), batch));
        assert!(leaves_room(Some(at(batch.with_kind(Kind::BatchTombstone), 90)), batch));
        assert!(leaves_room(Some(at(tag(23, Kind::BatchValue), 23)), batch));
        // Newer, or an older write made chosen under a ballot above the batch's.
        assert!(!leaves_room(Some(at(tag(85, Kind::Value), 85)), batch));
        assert!(!leaves_room(Some(at(tag(23, Kind::Value), 90)), batch));
    }
}
