//! A batch that can never be chosen, abandoned on one of its keys.
//!
//! A batch reaches its replicas in one Kinetic batch each: a replica takes all of its keys or
//! none, so it is chosen once a write quorum took it whole. When a reader meets a batch not yet
//! on a write quorum whose member the holder shows replaced by a newer write (settled first on
//! a write quorum), that newer write stands on replicas that each refuse the batch's ballot for
//! the member, and a batch that was not chosen before then never will be. Written back on its
//! other keys it would be half a batch: a reader of the replaced member may have seen it
//! without the batch. So the reader asks every replica of the key it read, after each
//! promised a ballot above all they hold, and decides from what they hold (`Fate`):
//!
//! - fewer than a write quorum hold it and nothing newer: it was never chosen, and the key's
//!   write from before it is made chosen in its place, on every replica (a batch before it
//!   whole, with its other members, passing over this one: a replica that now holds this
//!   batch may have held that one, chosen; one no longer whole on its holder is passed over
//!   too where too few replicas may have held it);
//! - a write quorum holds it: it was chosen, and is written back without the replaced member
//!   (which took it and went on);
//! - a replica holds a newer write of the key: that write is made chosen above the batch
//!   (a newer batch settled as a reader settles it, whole), and the batch then matters no more
//!   to this key;
//! - anything else (a replica did not answer or promise, a batch before it that may have been
//!   chosen but is no longer whole on its holder): undecided, and the reader tries again.
//!   Never written back half.
//!
//! Judged whatever map the batch was written under: every move makes each write chosen before
//! it stand on a write quorum of the drives it moves to, so a chosen batch stands on a write
//! quorum of the current replicas (or its key was overwritten since), and copies of a batch
//! without a member are made only of a batch known chosen.

use super::*;
use crate::stamp::ballot_of;

/// What every replica of a key shows of a batch met there with a member overwritten.
#[derive(Debug)]
pub(super) enum Fate {
    /// Settled: the write that now stands for the key (made chosen on every replica), and its
    /// value.
    Stands((Tag, Option<Bytes>)),
    /// Chosen: a write quorum holds it.
    Chosen,
    /// Not decided: try again.
    Unknown(Undecided),
}

/// Why a batch was not decided.
#[derive(Debug, Clone, Copy)]
pub(super) enum Undecided {
    /// A replica did not answer or promise, or the batch was overwritten meanwhile: the next
    /// try may decide it.
    ForNow,
    /// The batch before it (`batch`) may have been chosen, and cannot be made chosen whole:
    /// a member overwritten on its holder, or a newer write of a member on another replica.
    /// What replicas hold cannot tell whether it took effect, and no read will decide it until
    /// the key is written again (docs/design/simulation.md, Open findings).
    Undecidable { batch: Tag },
}

impl Undecided {
    /// The attempt's error for the key `dkey` of `partition`.
    pub(super) fn error(self, partition: u32, dkey: &[u8]) -> OpError {
        match self {
            Undecided::ForNow => OpError::Changed,
            Undecided::Undecidable { batch } => match map::user_key(partition, dkey) {
                Some(key) => OpError::Undecided { key: Bytes::copy_from_slice(key), batch },
                None => undecodable(dkey),
            },
        }
    }
}

impl Store {
    /// What stands for `dkey` where `batch` was met with a member overwritten (`Fate`).
    pub(super) async fn abandon(&self, map: &Arc<ClusterMap>, partition: u32, dkey: &Bytes, batch: Tag) -> Result<Fate, OpError> {
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
            // A drive of another view: decided under the map it holds, not tried again here.
            Err(OpError::StaleView) => return Err(OpError::StaleView),
            _ => {
                tracing::debug!(?batch, "undecided: a replica did not answer");
                return Ok(Fate::Unknown(Undecided::ForNow));
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
            Err(OpError::StaleView) => return Err(OpError::StaleView),
            Err(_) => Vec::new(),
        };
        if promised.len() < writers.len() {
            tracing::debug!(?batch, "undecided: a replica did not promise");
            return Ok(Fate::Unknown(Undecided::ForNow));
        }
        let judged = Judge { replicas: map.replicas_of(partition), write_quorum: usize::from(map.write_quorum), ballot };
        // Batches proven never chosen (up to this ballot: a round above it may take one up
        // again), passed over in turn while the write before each is a batch not on a write
        // quorum.
        let mut passed = vec![batch];
        let mut verdict = judged.verdict(&promised, batch);
        // Passed over, it would be proven never chosen; its record says it was (accepted again
        // for a key alone above a write that replaced it: `learn_beneath`).
        if matches!(verdict, Verdict::Beneath(_) | Verdict::Never(_)) && self.recorded(map, partition, batch).await {
            tracing::debug!(?batch, ?dkey, "a batch recorded chosen");
            return Ok(Fate::Chosen);
        }
        while let Verdict::Beneath(under) = verdict {
            // Boxed: rarely taken, and inline it would grow every read's future.
            match Box::pin(self.learn_beneath(map, partition, dkey, &passed, under, &promised, &judged)).await? {
                Some(fate) => return Ok(fate),
                None => {
                    passed.push(under.identity);
                    verdict = judged.before(&promised, &passed);
                }
            }
        }
        let passing = matches!(verdict, Verdict::Never(_));
        let (write, value) = match verdict {
            Verdict::Chosen => return Ok(Fate::Chosen),
            Verdict::Unknown => {
                tracing::debug!(?batch, held = ?promised.iter().map(|(d, h, _)| (d, h.stamp())).collect::<Vec<_>>(), "undecided");
                return Ok(Fate::Unknown(Undecided::ForNow));
            }
            Verdict::Newer(stamp, value) if !stamp.identity.is_batch() => {
                tracing::debug!(?batch, write = ?stamp.identity, ?dkey, "a newer write than the batch made chosen");
                (stamp.identity, value)
            }
            Verdict::Newer(stamp, entry) => {
                // A newer batch: settled as a reader settles it (written back whole, with its
                // other members, or itself judged; tags grow along this recursion).
                tracing::debug!(?batch, newer = ?stamp.identity, ?dkey, "a newer batch than the batch settled first");
                let Some((holder, _, _)) = promised.iter().find(|(_, h, _)| h.holds(stamp.identity, stamp.ballot)) else { return Ok(Fate::Unknown(Undecided::ForNow)) };
                let known: BTreeMap<String, Held> = promised.iter().map(|(d, h, _)| (d.clone(), h.promised(ballot))).collect();
                let settled = Box::pin(self.write_back_batch(map, partition, holder, dkey, stamp, &entry, known)).await?;
                return Ok(Fate::Stands(settled.unwrap_or((stamp.identity, Some(entry)))));
            }
            Verdict::Beneath(_) => unreachable!("decided above"),
            Verdict::Never(_) if !Box::pin(self.note_passed(map, partition, dkey, &passed, &promised)).await => return Ok(Fate::Unknown(Undecided::ForNow)),
            Verdict::Never(Some((stamp, value))) => {
                tracing::debug!(?batch, write = ?stamp.identity, ?dkey, held = ?promised.iter().map(|(d, h, _)| (d, h.stamp())).collect::<Vec<_>>(), replicas = ?judged.replicas, "a batch that can never be chosen abandoned: the write before it stands");
                (stamp.identity, value)
            }
            // Nothing before the batch: the key is absent, a tombstone in its place.
            Verdict::Never(None) => (ballot.with_kind(Kind::Tombstone), Bytes::new()),
        };
        let after: Arc<BTreeMap<String, Held>> = Arc::new(promised.iter().map(|(d, h, _)| (d.clone(), h.promised(ballot))).collect());
        self.accept_decided(map, partition, dkey, (&value, write, ballot), after, Judged::Settle).await?;
        if passing {
            Box::pin(self.leave_abandoned(map, partition, &passed)).await;
        }
        Ok(Fate::Stands((write, Some(value))))
    }

    /// The batches `passed` proven never chosen, with `under` the write before them, a batch
    /// not on a write quorum: proven never chosen too if too few replicas may have held it
    /// (`None`: look below it). Else made chosen whole in their place (a round over every
    /// replica for all of its keys, `passed` passed over) from a holder that has it whole;
    /// undecided when whole on none (a member overwritten since) or when that round meets a
    /// newer write of a member. Judged first, a batch whole on its holder but overtaken on a
    /// member elsewhere, never chosen, is passed over; before, every read made the same round
    /// again (`cluster.rs::batches_never_chosen_neither_stand_for_older_writes_nor_stop_reads`).
    #[allow(clippy::too_many_arguments, reason = "one abandoning's state")]
    async fn learn_beneath(
        &self,
        map: &Arc<ClusterMap>,
        partition: u32,
        dkey: &Bytes,
        passed: &[Tag],
        under: Stamp,
        promised: &[(String, Held, Bytes)],
        judged: &Judge<'_>,
    ) -> Result<Option<Fate>, OpError> {
        let holders = promised.iter().filter(|(_, h, _)| h.stamp().is_some_and(|s| s.identity == under.identity));
        let mut whole = None;
        let mut entry = None;
        for (holder, _, value) in holders {
            entry = Some(value);
            // A holder that does not answer, or has it no longer whole: the next one may.
            let Ok(c) = self.connection(map, holder, Lane::Writes).await else { continue };
            if let Ok(Some(crate::repair::Gathered { entries, replaced, .. })) = crate::repair::batch_of(partition, &c, dkey, under, value).await {
                if replaced.is_empty() {
                    whole = Some(entries);
                    break;
                }
            }
        }
        let Some(entry) = entry else { return Ok(Some(Fate::Unknown(Undecided::ForNow))) };
        // Its writer recorded it chosen (`crate::record`): it stands for this key, whatever
        // became of its other members (each chosen with it, or replaced since by newer
        // writes), and is accepted again here alone, above what every replica promised. A
        // recorded batch is never passed over.
        // Both records at once (the abandonment record is looked at below).
        let found = Box::pin(self.records_of(map, partition, under.identity)).await;
        let recorded = found.chosen;
        // Not known (a replica did not answer either): undecided, as any such abandoning.
        if !recorded && !self.may_have_been_chosen(map, partition, dkey, under, entry, promised, judged).await.unwrap_or(true) {
            return Ok(None);
        }
        // Proven never chosen where it was passed over for another key (its abandonment
        // record): passed over here too, rather than made chosen whole (a round that the
        // write standing on that key would refuse) or left undecided when neither its entries
        // nor a record of it chosen decide it (docs/design/simulation.md, seed 64).
        if !recorded && found.abandoned {
            tracing::debug!(?passed, under = ?under.identity, ?dkey, "the batch before them recorded abandoned: passed over too");
            return Ok(None);
        }
        // Passed over from here on, while the partition moves: noted first (`noted.rs`).
        if recorded {
            if !Box::pin(self.note_passed(map, partition, dkey, passed, promised)).await {
                return Ok(Some(Fate::Unknown(Undecided::ForNow)));
            }
            tracing::debug!(?passed, under = ?under.identity, ?dkey, "the batch before them recorded chosen: it stands for this key");
            let after: Arc<BTreeMap<String, Held>> = Arc::new(promised.iter().map(|(d, h, _)| (d.clone(), h.promised(judged.ballot))).collect());
            return match self.accept_decided(map, partition, dkey, (entry, under.identity, judged.ballot), after, Judged::Settle).await {
                Ok(()) => {
                    Box::pin(self.leave_abandoned(map, partition, passed)).await;
                    Ok(Some(Fate::Stands((under.identity, Some(entry.clone())))))
                }
                Err(OpError::Changed) => Ok(Some(Fate::Unknown(Undecided::ForNow))),
                Err(e) => Err(e),
            };
        }
        let Some(entries) = whole else {
            tracing::debug!(?passed, under = ?under.identity, held = ?promised.iter().map(|(d, h, _)| (d, h.stamp())).collect::<Vec<_>>(), "undecided: the batch before it is not whole on its holder");
            return Ok(Some(Fate::Unknown(Undecided::Undecidable { batch: under.identity })));
        };
        if !Box::pin(self.note_passed(map, partition, dkey, passed, promised)).await {
            return Ok(Some(Fate::Unknown(Undecided::ForNow)));
        }
        tracing::debug!(?passed, under = ?under.identity, ?dkey, "batches that can never be chosen abandoned: the batch before them made chosen whole");
        Ok(Some(match self.learn_batch(map, partition, Arc::new(entries), Reach::Every, (passed, judged.ballot)).await {
            Ok(Learned::Done) => {
                Box::pin(self.leave_abandoned(map, partition, passed)).await;
                Fate::Stands((under.identity, Some(entry.clone())))
            }
            // A replica holds a newer write of one of its members: it cannot be made chosen
            // whole, and it may have been chosen.
            Ok(Learned::Overtaken { .. }) => {
                tracing::debug!(?passed, under = ?under.identity, ?dkey, "undecided: the batch before it is overtaken on a member");
                Fate::Unknown(Undecided::Undecidable { batch: under.identity })
            }
            Err(OpError::Changed) => Fate::Unknown(Undecided::ForNow),
            Err(e) => return Err(e),
        }))
    }

    /// Whether a write quorum of the replicas may have held `batch` (met for `dkey` with
    /// `entry`), every replica having promised above it for `dkey`: its holders, and each
    /// replica that stands above it for `dkey` unless one of the batch's other keys stands
    /// below it there (a replica takes a batch whole, and a key's ballot only grows).
    #[allow(clippy::too_many_arguments, reason = "one abandoning's state")]
    async fn may_have_been_chosen(
        &self,
        map: &Arc<ClusterMap>,
        partition: u32,
        dkey: &Bytes,
        batch: Stamp,
        entry: &Bytes,
        promised: &[(String, Held, Bytes)],
        judged: &Judge<'_>,
    ) -> Result<bool, OpError> {
        let Some((members, _)) = batch::decode_entry(entry) else { return Err(undecodable(dkey)) };
        let others: Vec<Bytes> = members.iter().map(|m| map::drive_key(partition, m)).filter(|k| k != dkey).collect();
        let mut may = 0;
        for (drive, held, _) in promised.iter().filter(|(d, _, _)| judged.replicas.contains(d)) {
            let held_it = match may_have_held(held, batch.identity) {
                Some(known) => known,
                None => {
                    let c = self.connection(map, drive, Lane::Writes).await.map_err(|e| OpError::from_client(drive, e))?;
                    let members = replica::held_many(&c, &others).await.map_err(|e| OpError::from_client(drive, e))?;
                    members.iter().all(|m| may_have_held(m, batch.identity) != Some(false))
                }
            };
            may += usize::from(held_it);
        }
        Ok(may >= judged.write_quorum.min(judged.replicas.len().max(1)))
    }
}

/// Whether a replica holding `held` for one of `batch`'s keys may have held the batch:
/// `Some(true)` it holds it, `Some(false)` it never took it (nothing there, or a ballot below
/// the lowest the batch is accepted under: a key's ballot on a replica only grows), `None`
/// it stands above it and may have held it before.
pub(super) fn may_have_held(held: &Held, batch: Tag) -> Option<bool> {
    let Some(s) = held.stamp() else { return Some(false) };
    if s.identity.same_write(&batch) {
        return Some(true);
    }
    if s.ballot >= ballot_of(batch) { None } else { Some(false) }
}

/// What every replica's holding (after promising) proves of a batch.
#[derive(Debug)]
enum Verdict {
    /// Never chosen: the write before it (`None`: there was none), to stand in its place.
    Never(Option<(Stamp, Bytes)>),
    /// Never chosen, and the write before it a batch not on a write quorum, which may have
    /// been chosen (a replica holding this batch may have held it): made chosen whole.
    Beneath(Stamp),
    /// Chosen: on a write quorum.
    Chosen,
    /// A replica holds a newer write of the key: the highest any replica accepted, which a
    /// round may make chosen (a batch's whole, with its other members).
    Newer(Stamp, Bytes),
    Unknown,
}

/// What a batch is judged against: the partition's replicas (the old set while it moves) and
/// its write quorum.
struct Judge<'a> {
    replicas: &'a [String],
    write_quorum: usize,
    /// The abandoning's ballot, promised by every replica: what it proves never chosen is
    /// proven up to it.
    ballot: Tag,
}

impl Judge<'_> {
    /// What every replica held (after promising) proves of `batch`.
    fn verdict(&self, promised: &[(String, Held, Bytes)], batch: Tag) -> Verdict {
        let Some(held_at) = promised.iter().filter_map(|(_, h, _)| h.stamp().filter(|s| s.identity.same_write(&batch))).map(|s| s.ballot).max() else {
            return Verdict::Unknown;
        };
        if self.stands(promised, batch) {
            return Verdict::Chosen;
        }
        // A replica whose entry is a newer write may have held the batch before it: the
        // highest write any replica accepted is what a round over all of them makes chosen.
        let newest = promised
            .iter()
            .filter_map(|(_, h, v)| h.stamp().filter(|s| s.identity != NOTHING && !s.identity.same_write(&batch) && s.ballot > held_at).map(|s| (s, v)))
            .max_by_key(|(s, _)| s.order());
        if let Some((s, v)) = newest {
            return Verdict::Newer(s, v.clone());
        }
        self.before(promised, &[batch])
    }

    /// What stands in place of the batches `passed`, each proven never chosen: the newest
    /// write any replica holds besides them.
    fn before(&self, promised: &[(String, Held, Bytes)], passed: &[Tag]) -> Verdict {
        let before = promised
            .iter()
            .filter_map(|(_, h, v)| h.stamp().filter(|s| s.identity != NOTHING && !passed.iter().any(|p| s.identity.same_write(p))).map(|s| (s, v.clone())))
            .max_by_key(|(s, _)| s.order());
        match before {
            // A batch not yet chosen below it: accepted again alone it would be half a batch. One
            // on a write quorum was chosen whole (each replica took all of its keys at once), and
            // stands in the abandoned batch's place as any chosen write does.
            Some((s, _)) if s.identity.is_batch() && !self.stands(promised, s.identity) => Verdict::Beneath(s),
            other => Verdict::Never(other),
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

    /// The verdict of replicas a, b and c (write quorum 2) on `batch`, as a comparable value.
    fn verdict(held: &[(String, Held, Bytes)], batch: Tag) -> Judged3 {
        let replicas: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        match (Judge { replicas: &replicas, write_quorum: 2, ballot: NOTHING }).verdict(held, batch) {
            Verdict::Never(before) => Judged3::Never(before.map(|(s, _)| s.identity)),
            Verdict::Beneath(s) => Judged3::Beneath(s.identity),
            Verdict::Chosen => Judged3::Chosen,
            Verdict::Newer(s, _) => Judged3::Newer(s.identity),
            Verdict::Unknown => Judged3::Unknown,
        }
    }

    #[derive(Debug, PartialEq)]
    enum Judged3 {
        Never(Option<Tag>),
        Beneath(Tag),
        Chosen,
        Newer(Tag),
        Unknown,
    }

    #[test]
    fn an_undecidable_batch_names_its_key_and_batch() {
        let batch = tag(10, Kind::BatchValue);
        let dkey = map::drive_key(3, b"{g}key-5");
        match (Undecided::Undecidable { batch }).error(3, &dkey) {
            OpError::Undecided { key, batch: named } => {
                assert_eq!(&key[..], b"{g}key-5");
                assert_eq!(named, batch);
            }
            other => panic!("{other:?}"),
        }
        // A drive key of another partition has no user key here: the entry met is not one of
        // this partition's, and the error says its entry cannot be read as a batch's.
        assert!(matches!((Undecided::Undecidable { batch }).error(4, &dkey), OpError::Failed(ClusterError::UndecodableBatch { .. })));
        assert!(matches!(Undecided::ForNow.error(3, &dkey), OpError::Changed));
    }

    #[test]
    fn a_batch_on_fewer_than_a_write_quorum_with_nothing_newer_was_never_chosen() {
        let batch = tag(10, Kind::BatchValue);
        let old = tag(5, Kind::Value);
        let held = [holding("a", batch), holding("b", old), holding("c", old)];
        assert_eq!(verdict(&held, batch), Judged3::Never(Some(old)));
        // Nothing before it: the key is absent in its place.
        let held = [holding("a", batch), empty("b"), empty("c")];
        assert_eq!(verdict(&held, batch), Judged3::Never(None));
        // Written under an earlier map: judged alike (moves keep a chosen write on a write
        // quorum of the replicas they move to).
        let earlier = Tag { epoch: EPOCH - 3, ..batch };
        let older = Tag { epoch: EPOCH - 4, ..old };
        let held = [holding("a", earlier), holding("b", older), holding("c", older)];
        assert_eq!(verdict(&held, earlier), Judged3::Never(Some(older)));
    }

    #[test]
    fn a_replica_may_have_held_a_batch_only_if_every_key_stands_at_or_above_it() {
        let batch = tag(10, Kind::BatchValue);
        let stamp = |identity: Tag, ballot: Tag| Held::from_version(Stamp { identity, ballot, promise: None }.encode());
        assert_eq!(may_have_held(&holding("a", batch).1, batch), Some(true));
        assert_eq!(may_have_held(&Held::Absent, batch), Some(false));
        assert_eq!(may_have_held(&holding("a", tag(9, Kind::Value)).1, batch), Some(false));
        assert_eq!(may_have_held(&holding("a", tag(12, Kind::Value)).1, batch), None);
        // Written back under a later ballot: still may, from its own tag up.
        let later = tag(14, Kind::Value);
        assert_eq!(may_have_held(&stamp(batch, later), batch), Some(true));
        assert_eq!(may_have_held(&stamp(tag(5, Kind::Value), tag(10, Kind::Value)), batch), None);
    }

    #[test]
    fn a_batch_on_a_write_quorum_was_chosen() {
        let batch = tag(10, Kind::BatchValue);
        let old = tag(5, Kind::Value);
        let held = [holding("a", batch), holding("b", batch), holding("c", old)];
        assert_eq!(verdict(&held, batch), Judged3::Chosen);
    }

    #[test]
    fn a_newer_write_of_the_key_is_what_a_round_makes_chosen() {
        let batch = tag(10, Kind::BatchValue);
        let old = tag(5, Kind::Value);
        let newer = tag(12, Kind::Value);
        let held = [holding("a", batch), holding("b", newer), holding("c", old)];
        assert_eq!(verdict(&held, batch), Judged3::Newer(newer));
        // A newer batch too (settled whole, as a reader settles it).
        let newer = tag(12, Kind::BatchValue);
        let held = [holding("a", batch), holding("b", newer), holding("c", old)];
        assert_eq!(verdict(&held, batch), Judged3::Newer(newer));
    }

    #[test]
    fn an_unsettled_batch_before_it_is_made_chosen_whole() {
        // The write before it is a batch not yet chosen: alone it would be half a batch, and
        // a replica holding the batch may have held it (--lossy seed 16).
        let batch = tag(10, Kind::BatchValue);
        let old = tag(5, Kind::Value);
        let before = tag(8, Kind::BatchValue);
        let held = [holding("a", batch), holding("b", before), holding("c", old)];
        assert_eq!(verdict(&held, batch), Judged3::Beneath(before));
    }

    #[test]
    fn a_batch_no_longer_held_leaves_it_undecided() {
        let batch = tag(10, Kind::BatchValue);
        let old = tag(5, Kind::Value);
        // Overwritten everywhere since the read: read again.
        let held = [holding("a", old), holding("b", old), holding("c", old)];
        assert_eq!(verdict(&held, batch), Judged3::Unknown);
    }

    #[test]
    fn a_chosen_batch_before_it_stands_in_its_place() {
        // Seed 50: batch A on a write quorum (b, c), batch B over it on a alone, B's other key
        // since overwritten. A was chosen whole; B never was.
        let batch = tag(62, Kind::BatchValue);
        let chosen = tag(60, Kind::BatchValue);
        let held = [holding("a", batch), holding("b", chosen), holding("c", chosen)];
        assert_eq!(verdict(&held, batch), Judged3::Never(Some(chosen)));
        // On a write quorum only with a drive the partition moves to: not known chosen, made
        // chosen whole.
        let held = [holding("a", batch), holding("b", chosen), holding("c", tag(58, Kind::Value)), holding("d", chosen)];
        assert_eq!(verdict(&held, batch), Judged3::Beneath(chosen));
    }

    #[test]
    fn copies_on_drives_a_partition_moves_to_do_not_count() {
        // Replicas a, b, c; d and e hold what a push copied: never chosen, and not chosen by
        // their copies either.
        let batch = tag(10, Kind::BatchValue);
        let old = tag(5, Kind::Value);
        let held = [holding("a", batch), holding("b", old), holding("c", old), holding("d", batch), holding("e", batch)];
        assert_eq!(verdict(&held, batch), Judged3::Never(Some(old)));
    }
}
