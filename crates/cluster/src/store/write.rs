use super::*;

impl Store {

    /// What the single replica of `dkey`'s partition was last seen holding.
    pub(super) fn remember(&self, dkey: &Bytes, stamp: Stamp) {
        let mut versions = self.inner.versions.lock();
        if versions.len() >= MAX_REMEMBERED_VERSIONS {
            versions.clear();
        }
        versions.insert(crate::placement::hash(dkey, VERSIONS_SEED), stamp);
    }

    /// What an unconditional put may expect the replica to hold without asking: the stamp this
    /// client last saw for the key, or, for a key it has not seen, nothing at all when that
    /// guess has been right lately. `None`: ask first.
    fn expectation(&self, dkey: &Bytes) -> Option<Held> {
        use std::sync::atomic::Ordering::Relaxed;
        if let Some(stamp) = self.inner.versions.lock().get(&crate::placement::hash(dkey, VERSIONS_SEED)) {
            return Some(Held::from_version(stamp.encode()));
        }
        let probe = self.inner.unseen.fetch_add(1, Relaxed).is_multiple_of(FRESH_PROBE);
        (probe || self.inner.fresh.load(Relaxed) >= FRESH_TRY).then_some(Held::Absent)
    }

    fn guessed_fresh(&self, right: bool) {
        use std::sync::atomic::Ordering::Relaxed;
        let _ = self.inner.fresh.fetch_update(Relaxed, Relaxed, |f| Some(if right { (f + 1).min(FRESH_MAX) } else { f.saturating_sub(4) }));
    }

    /// An unconditional put to a partition that one drive alone holds (R=1, not moving), in
    /// one round trip when the guess of what it holds is right: a tag above the expected one
    /// stored by compare-and-swap. `None`: refused, nothing written; the put reads and goes
    /// the usual way.
    ///
    /// This is safe only with one replica. There a try either lands whole or, refused, leaves
    /// nothing a reader could have returned, so the usual write after it is the put's only
    /// effect; and the drive orders the try after every write it took before, with a higher
    /// tag. With several replicas a try can land on some and not others, and neither keeping
    /// it nor writing it again above later writes is right (`write`). A try that fails without
    /// the drive's answer may have landed, so it is not made again: the put fails.
    async fn write_single(&self, map: &Arc<ClusterMap>, partition: u32, dkey: &Bytes, value: &Bytes) -> Result<Option<Bytes>, OpError> {
        let Some(expected) = self.expectation(dkey) else { return Ok(None) };
        // Above the replica's promise too, which the new entry keeps.
        let acceptor = expected.stamp().unwrap_or(Stamp::plain(NOTHING));
        let tag = Tag::next(Some(&acceptor.position()), map.epoch, self.writer_id(), Kind::Value);
        let stamp = acceptor.accept(tag, tag);
        let (k, v, e) = (dkey.clone(), value.clone(), expected.clone());
        let needed = if cfg!(feature = "mutant-retag") { usize::from(map.write_quorum) } else { 1 };
        let answers = self
            .ask(map, partition, needed, Ask::All, move |_, c| {
                let (k, v, e) = (k.clone(), v.clone(), e.clone());
                async move { replica::store_expecting(&c, &k, v, stamp, &e).await }
            })
            .await?;
        let landed = if cfg!(feature = "mutant-retag") {
            joint_quorum(map, partition, needed, answers.iter().filter(|(_, s)| *s == Stored::Written).map(|(d, _)| d))
        } else {
            answers.iter().any(|(_, s)| *s == Stored::Written)
        };
        if expected == Held::Absent {
            self.guessed_fresh(landed);
        }
        let counter = if landed { &self.inner.counts.one_round_trip } else { &self.inner.counts.retried };
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if !landed {
            return Ok(None);
        }
        self.remember(dkey, stamp);
        Ok(Some(tag.encode()))
    }

    /// A put or delete. A conditional one is a Paxos round (`round`). An unconditional one
    /// reads the positions of a read quorum, takes a tag above all of them and has it
    /// accepted by every replica, acknowledged by a write quorum: its value depends on nothing
    /// it read, so it needs no promise, and a replica standing above its tag refuses it (a
    /// round's promise, or a newer write). Refused by a write quorum, it can never be chosen,
    /// and it is decided again above what refused it.
    ///
    /// Every write reads first. A put that stored a guessed tag without the read (the tag
    /// this client last saw, plus one) could not be abandoned: once its entry is on any
    /// replica a reader may return it, and a second tag for the same value, above a write
    /// ordered after that read, brings the value back after it; nor can it always stand, for a
    /// write completed before the put began may be newer.
    pub(super) async fn write(&self, map: &Arc<ClusterMap>, key: &[u8], value: Bytes, kind: Kind, condition: &Condition) -> Result<Bytes, OpError> {
        let partition = map.partition_of(key);
        let dkey = map::drive_key(partition, key);
        // Mutant: every partition tries the one-round-trip put, which retags a value above a
        // later write when the try is refused.
        let single = map.single_writer(partition) || cfg!(feature = "mutant-retag");
        // Mutant: a conditional write checked against a read and written as an unconditional
        // one, racing an unconditional write for the same tag.
        let cas_mutant = cfg!(feature = "mutant-cas") && *condition != Condition::None;
        if *condition != Condition::None && !cas_mutant {
            return match self.round(map, key, &dkey, Proposal::Write { value: &value, kind, condition }).await? {
                Outcome::Wrote(tag) => Ok(tag.encode()),
                Outcome::Current { identity, .. } => {
                    let live = Some(identity).filter(|t| *t != NOTHING && !t.is_tombstone());
                    Err(OpError::Failed(ClusterError::VersionMismatch { current: live.map(|t| t.encode()) }))
                }
            };
        }
        if single && kind == Kind::Value && !cas_mutant {
            if let Some(version) = self.write_single(map, partition, &dkey, &value).await? {
                return Ok(version);
            }
        }
        let mut settled = false;
        let (answers, newest) = loop {
            let k = dkey.clone();
            let answers = self
                .ask(map, partition, map.read_quorum(), Ask::Quorum, move |_, c| {
                    let k = k.clone();
                    async move { replica::held(&c, &k).await }
                })
                .await?;
            let newest = answers.iter().filter_map(|(_, h)| h.stamp().filter(|s| s.identity != NOTHING)).max_by_key(Stamp::order);
            // A batch on top is decided before it is replaced: on a write quorum, its record
            // left as the accept starts (`store`, `chosen_beneath`: its writer may have stopped
            // before leaving it); not yet, settled as a read settles it (made chosen whole and
            // recorded, or judged), and read again. Replaced undecided on its holders, it
            // could leave a state no read decides (docs/design/simulation.md, Open findings).
            // Settled once: whatever the settle says, the write goes on as before.
            if let Some(n) = newest.filter(|n| !settled && unsettled_batch(map, partition, n, answers.iter().map(|(d, h)| (d, h)))) {
                settled = true;
                let known = answers.into_iter().collect();
                if let Err(e) = self.settle(map, partition, key, &dkey, n, None, false, known).await {
                    tracing::debug!(?dkey, batch = ?n.identity, error = ?e, "a batch on top not settled before a write over it");
                }
                continue;
            }
            break (answers, newest);
        };
        let top = answers.iter().filter_map(|(_, h)| h.stamp()).map(|s| s.position()).max();
        let live = newest.map(|s| s.identity).filter(|t| !t.is_tombstone());
        let known: BTreeMap<String, Held> = answers.into_iter().collect();
        // An unconditional delete of a key that is not there writes nothing and says so; the
        // refusal reports what the quorum read, so it must stand as a read does.
        if (kind == Kind::Tombstone && live.is_none()) || (cas_mutant && !condition.admits(live)) {
            if let Some(n) = newest {
                let settled = self.settle(map, partition, key, &dkey, n, None, false, known).await?;
                if settled.0 != n.identity {
                    return Err(OpError::Changed);
                }
            }
            return Err(OpError::Failed(ClusterError::VersionMismatch { current: live.map(|t| t.encode()) }));
        }
        let tag = Tag::next(top.as_ref(), map.epoch, self.writer_id(), kind);
        let known = Arc::new(known);
        self.decided(map, partition, Judged::Write, |map| {
            let (dkey, value, known) = (&dkey, value.clone(), known.clone());
            async move { self.store(&map, partition, dkey, value, tag, tag, known, Judged::Write).await }
        })
        .await?;
        if single {
            // What the one replica holds now, as far as its read showed.
            let before = known.values().next().and_then(Held::stamp).unwrap_or(Stamp::plain(NOTHING));
            self.remember(&dkey, before.accept(tag, tag));
        }
        Ok(tag.encode())
    }

    /// Has every replica accept the write `identity` under `ballot`; returns once a write
    /// quorum holds it (`judge`). Replicas that answer later go on in the background.
    ///
    /// A replica that was not read is expected to hold the newest entry the others did (it
    /// mostly does): its compare-and-swap goes out at once, and only a refused one reads what
    /// it holds first. Exact compare-and-swap makes a wrong guess cost a round trip, never a
    /// wrong store. A guess is only tried, never taken for the replica's answer.
    #[allow(clippy::too_many_arguments, reason = "one write's state")]
    pub(super) async fn store(
        &self,
        map: &Arc<ClusterMap>,
        partition: u32,
        dkey: &Bytes,
        value: Bytes,
        identity: Tag,
        ballot: Tag,
        known: Arc<BTreeMap<String, Held>>,
        of: Judged,
    ) -> Result<(), OpError> {
        // Other batches this replaces on a write quorum: recorded first (`chosen_beneath`).
        self.record_beneath(map, partition, chosen_beneath(map, partition, identity, known.iter())).await;
        let (k, store, at) = (dkey.clone(), self.clone(), map.clone());
        // Mutant (the simulator's proof that it bites): a guess that cannot take the ballot
        // stands in for an unread replica, so a write-back counts a replica never asked.
        let guess = known
            .values()
            .max_by_key(|h| h.stamp().map(|s| s.position()))
            .filter(|h| cfg!(feature = "mutant-writeback") || h.stamp().is_none_or(|s| s.admits(ballot)))
            .cloned();
        let answers = self
            .ask_where(map, partition, usize::from(map.write_quorum), Ask::All, Answer::counts, move |drive, c| {
                let (store, at, k, value) = (store.clone(), at.clone(), k.clone(), value.clone());
                let expected = known.get(&drive).cloned().or_else(|| guess.clone());
                async move {
                    match of {
                        // A batch that landed after the write's read is decided first (`unread`).
                        Judged::Write => store.accept_deciding(&at, partition, (&drive, &c), unread::Accept::One { key: &k, value, identity, ballot, known: expected }).await,
                        Judged::Settle => replica::accept(&c, &k, value, identity, ballot, expected).await,
                    }
                }
            })
            .await?;
        self.judge(map, partition, answers, of)
    }
}
