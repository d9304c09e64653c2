//! A batch that can never be chosen, abandoned on one of its keys.
//!
//! A batch reaches its replicas in one Kinetic batch each: a replica takes all of its keys or
//! none, so it is chosen once a write quorum took it whole. When a reader meets a batch not yet
//! on a write quorum whose member the holder shows replaced by a newer write (settled first on
//! a write quorum), that newer write stands on replicas that each refuse the batch's ballot for
//! the member, and a batch that was not chosen before then never will be. Written back on its
//! other keys it would be half a batch: a reader of the replaced member may have seen it
//! without the batch. So the reader asks every replica of the key it read; where it can prove
//! the batch was never chosen there (fewer than a write quorum hold it, and no replica's entry
//! is a newer write that could have overwritten it), it makes the key's write from before the
//! batch chosen in its place, on every replica, with a round above everything they hold (a
//! batch before it only if a write quorum holds it: chosen, whole). Where it cannot (a replica
//! did not answer or refused the round, a newer write covers a replica, the write before is
//! itself a batch on fewer than a write quorum, the batch was written under an earlier map),
//! the batch is written back as before.

use super::*;

impl Store {
    /// The write that stands for `dkey` in place of `batch` once it is abandoned, or `None`
    /// when the batch cannot be proven never chosen (it is then written back as before).
    pub(super) async fn abandon(&self, map: &Arc<ClusterMap>, partition: u32, dkey: &Bytes, batch: Tag) -> Result<Option<(Tag, Option<Bytes>)>, OpError> {
        let writers = map.writers_of(partition);
        let k = dkey.clone();
        let read = match self
            .ask(map, partition, writers.len(), Ask::All, move |_, c| {
                let k = k.clone();
                async move { replica::held_with_value(&c, &k).await }
            })
            .await
        {
            Ok(read) if read.len() == writers.len() => read,
            _ => {
                tracing::debug!(?batch, "not abandoned: a replica did not answer");
                return Ok(None);
            }
        };
        let top = read.iter().filter_map(|(_, (h, _))| h.stamp()).map(|s| s.position()).max();
        let ballot = Tag::next(top.as_ref(), map.epoch, self.round_id(), Kind::Value);
        let known: Arc<BTreeMap<String, (Held, Bytes)>> = Arc::new(read.into_iter().collect());
        let k = dkey.clone();
        // Promised by every replica: none takes the batch's ballot any more, so what they
        // hold now says whether it was chosen.
        let promised: Vec<(String, Held, Bytes)> = match self
            .ask_where(map, partition, writers.len(), Ask::All, Option::is_some, move |drive, c| {
                let (k, known) = (k.clone(), known.get(&drive).cloned());
                async move { replica::promise(&c, &k, ballot, known).await }
            })
            .await
        {
            Ok(answers) => answers.into_iter().filter_map(|(d, p)| p.map(|(h, v)| (d, h, v))).collect(),
            Err(_) => Vec::new(),
        };
        if promised.len() < writers.len() {
            tracing::debug!(?batch, "not abandoned: a replica did not promise");
            return Ok(None);
        }
        let judged = Judge { epoch: map.epoch, replicas: map.replicas_of(partition), write_quorum: usize::from(map.write_quorum) };
        let Some(before) = judged.never_chosen(&promised, batch) else {
            tracing::debug!(?batch, held = ?promised.iter().map(|(d, h, _)| (d, h.stamp())).collect::<Vec<_>>(), "not abandoned: not proven never chosen");
            return Ok(None);
        };
        let (write, value) = match before {
            Some((stamp, value)) => (stamp.identity, value),
            // Nothing before the batch: the key is absent, a tombstone in its place.
            None => (ballot.with_kind(Kind::Tombstone), Bytes::new()),
        };
        tracing::debug!(?batch, ?write, ?dkey, "a batch that can never be chosen abandoned: the write before it stands");
        let after: Arc<BTreeMap<String, Held>> = Arc::new(promised.iter().map(|(d, h, _)| (d.clone(), h.promised(ballot))).collect());
        self.accept_decided(map, partition, dkey, (&value, write, ballot), after, Judged::Settle).await?;
        Ok(Some((write, Some(value))))
    }
}

/// What a batch is judged against: the map's epoch, the partition's replicas (the old set
/// while it moves) and its write quorum.
struct Judge<'a> {
    epoch: u64,
    replicas: &'a [String],
    write_quorum: usize,
}

impl Judge<'_> {
    /// What every replica held (after promising) proves of `batch`: `Some` of the write before
    /// it (`None` within: there was none) when it was never chosen; `None` when that is not
    /// proven.
    fn never_chosen(&self, promised: &[(String, Held, Bytes)], batch: Tag) -> Option<Option<(Stamp, Bytes)>> {
        // Written under an earlier map, it may have been chosen on replicas that have since
        // left (what moves copied tells nothing of that): only a batch of this map's epoch is
        // judged.
        if batch.epoch != self.epoch {
            return None;
        }
        let held_at = promised.iter().filter_map(|(_, h, _)| h.stamp().filter(|s| s.identity.same_write(&batch))).map(|s| s.ballot).max()?;
        // A replica whose entry is a newer write may have held the batch before it.
        if promised.iter().any(|(_, h, _)| h.stamp().is_some_and(|s| !s.identity.same_write(&batch) && s.identity != NOTHING && s.ballot > held_at)) {
            return None;
        }
        if self.stands(promised, batch) {
            return None;
        }
        let before = promised
            .iter()
            .filter_map(|(_, h, v)| h.stamp().filter(|s| s.identity != NOTHING && !s.identity.same_write(&batch)).map(|s| (s, v.clone())))
            .max_by_key(|(s, _)| s.order());
        match before {
            // A batch not yet chosen below it: accepted again alone it would be half a batch. One
            // on a write quorum was chosen whole (each replica took all of its keys at once), and
            // stands in the abandoned batch's place as any chosen write does.
            Some((s, _)) if s.identity.is_batch() && !self.stands(promised, s.identity) => None,
            other => Some(other),
        }
    }

    /// Whether a write quorum of the replicas holds `write` (the old set while the partition
    /// moves: the drives it moves to hold what pushes copied, chosen or not; a batch written
    /// during the move, under this map, is on a write quorum of both).
    fn stands(&self, promised: &[(String, Held, Bytes)], write: Tag) -> bool {
        let holders = promised.iter().filter(|(d, h, _)| self.replicas.contains(d) && h.tag().is_some_and(|t| t.same_write(&write))).count();
        holders >= self.write_quorum.min(self.replicas.len().max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EPOCH: u64 = 7;

    fn tag(counter: u64, kind: Kind) -> Tag {
        Tag { epoch: EPOCH, counter, writer: 1, kind }
    }

    /// A replica holding `identity` accepted under its own tag.
    fn holding(drive: &str, identity: Tag) -> (String, Held, Bytes) {
        let stamp = Stamp { identity, ballot: identity.with_kind(Kind::Value), promise: None };
        (drive.to_string(), Held::from_version(stamp.encode()), Bytes::from(format!("{}", identity.counter)))
    }

    fn empty(drive: &str) -> (String, Held, Bytes) {
        (drive.to_string(), Held::Absent, Bytes::new())
    }

    fn judge(replicas: &[String]) -> Judge<'_> {
        Judge { epoch: EPOCH, replicas, write_quorum: 2 }
    }

    fn before(found: Option<Option<(Stamp, Bytes)>>) -> Option<Option<Tag>> {
        found.map(|b| b.map(|(s, _)| s.identity))
    }

    #[test]
    fn a_batch_on_fewer_than_a_write_quorum_with_nothing_newer_was_never_chosen() {
        let replicas: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let batch = tag(10, Kind::BatchValue);
        let old = tag(5, Kind::Value);
        let held = [holding("a", batch), holding("b", old), holding("c", old)];
        assert_eq!(before(judge(&replicas).never_chosen(&held, batch)), Some(Some(old)));
        // Nothing before it: the key is absent in its place.
        let held = [holding("a", batch), empty("b"), empty("c")];
        assert_eq!(before(judge(&replicas).never_chosen(&held, batch)), Some(None));
    }

    #[test]
    fn what_may_have_been_chosen_is_not_abandoned() {
        let replicas: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let batch = tag(10, Kind::BatchValue);
        let old = tag(5, Kind::Value);
        // On a write quorum.
        let held = [holding("a", batch), holding("b", batch), holding("c", old)];
        assert_eq!(before(judge(&replicas).never_chosen(&held, batch)), None);
        // A newer write on a replica may have overwritten it there.
        let held = [holding("a", batch), holding("b", tag(12, Kind::BatchValue)), holding("c", old)];
        assert_eq!(before(judge(&replicas).never_chosen(&held, batch)), None);
        // The write before it is a batch not yet chosen: alone it would be half a batch.
        let held = [holding("a", batch), holding("b", tag(8, Kind::BatchValue)), holding("c", old)];
        assert_eq!(before(judge(&replicas).never_chosen(&held, batch)), None);
        // Written under an earlier map.
        let earlier = Tag { epoch: EPOCH - 1, ..batch };
        let held = [holding("a", earlier), holding("b", old), holding("c", old)];
        assert_eq!(before(judge(&replicas).never_chosen(&held, earlier)), None);
    }

    #[test]
    fn a_chosen_batch_before_it_stands_in_its_place() {
        // Seed 50: batch A on a write quorum (b, c), batch B over it on a alone, B's other key
        // since overwritten. A was chosen whole; B never was.
        let replicas: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let batch = tag(62, Kind::BatchValue);
        let chosen = tag(60, Kind::BatchValue);
        let held = [holding("a", batch), holding("b", chosen), holding("c", chosen)];
        assert_eq!(before(judge(&replicas).never_chosen(&held, batch)), Some(Some(chosen)));
        // On a write quorum only with a drive the partition moves to: not known chosen.
        let held = [holding("a", batch), holding("b", chosen), holding("c", tag(58, Kind::Value)), holding("d", chosen)];
        assert_eq!(before(judge(&replicas).never_chosen(&held, batch)), None);
    }

    #[test]
    fn copies_on_drives_a_partition_moves_to_do_not_count() {
        // Replicas a, b, c; d and e hold what a push copied.
        let replicas: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let batch = tag(10, Kind::BatchValue);
        let old = tag(5, Kind::Value);
        let held = [holding("a", batch), holding("b", old), holding("c", old), holding("d", batch), holding("e", batch)];
        assert_eq!(before(judge(&replicas).never_chosen(&held, batch)), Some(Some(old)));
    }
}
