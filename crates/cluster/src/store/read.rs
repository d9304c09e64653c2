use super::*;

impl Store {
    /// The ABD read: the newest write among a read quorum (by ballot), made to stand on a
    /// write quorum first if fewer hold it (`settle`). `None` for an absent or deleted key.
    pub(super) async fn read(&self, map: &Arc<ClusterMap>, key: &[u8], with_value: bool) -> Result<Option<Versioned>, OpError> {
        let partition = map.partition_of(key);
        let dkey = map::drive_key(partition, key);
        let first = self.replicas(map, partition).into_iter().next();
        let k = dkey.clone();
        let answers = self
            .ask(map, partition, map.read_quorum(), Ask::Quorum, move |drive, c| {
                let k = k.clone();
                // One replica sends the value; the others only their versions.
                let full = with_value && Some(&drive) == first.as_ref();
                async move {
                    if full {
                        Ok(match c.get(&k).await? {
                            None => ReadAnswer { drive, held: Held::Absent, value: None },
                            Some(e) => ReadAnswer { drive, held: Held::from_version(e.metadata.version), value: Some(e.value) },
                        })
                    } else {
                        Ok(ReadAnswer { drive, held: replica::held(&c, &k).await?, value: None })
                    }
                }
            })
            .await?;
        let answers: Vec<ReadAnswer> = answers.into_iter().map(|(_, a)| a).collect();
        let newest = answers.iter().filter_map(|a| a.held.stamp().filter(|s| s.identity != NOTHING)).max_by_key(Stamp::order);
        let Some(newest) = newest else {
            // Nothing tagged in a read quorum: no acknowledged write (entries without a tag
            // were not written through the cluster and are not its data).
            return Ok(None);
        };
        let value = answers.iter().find(|a| a.held.holds(newest.identity, newest.ballot)).and_then(|a| a.value.clone());
        let known: BTreeMap<String, Held> = answers.into_iter().map(|a| (a.drive, a.held)).collect();
        let (identity, value) = self.settle(map, partition, key, &dkey, newest, value, with_value, known).await?;
        if identity == NOTHING {
            return Ok(None);
        }
        // What a get read is worth remembering; a range's checks of every key it passes are not.
        if with_value && map.single_writer(partition) && identity == newest.identity {
            self.remember(&dkey, newest);
        }
        if identity.is_tombstone() {
            return Ok(None);
        }
        let value = match value {
            // A batch's entry carries its members before the value.
            Some(entry) if identity.is_batch() => batch::decode_entry(&entry).map(|(_, v)| v).ok_or_else(|| undecodable(&dkey))?,
            Some(v) => v,
            // Not asked for (a range's check of the key).
            None => Bytes::new(),
        };
        Ok(Some(Versioned { value, version: identity.encode() }))
    }

    /// What makes a read's answer stand: unless a write quorum already holds `newest`, it is
    /// accepted again under its own ballot by every replica that has not moved past it (ABD's
    /// second phase, as a late accept of the round that wrote it), so no later read can return
    /// anything older. Where too many replicas stand above that ballot (a round's promise), a
    /// round of this read's own makes the key's current write chosen, which may be another:
    /// the write that stands is returned, with its value (`value` if the read brought it,
    /// else fetched from a holder) when it was written back or `with_value` asks for it.
    #[allow(clippy::too_many_arguments, reason = "one read's state, passed once from two callers")]
    pub(super) async fn settle(
        &self,
        map: &Arc<ClusterMap>,
        partition: u32,
        key: &[u8],
        dkey: &Bytes,
        newest: Stamp,
        value: Option<Bytes>,
        with_value: bool,
        known: BTreeMap<String, Held>,
    ) -> Result<(Tag, Option<Bytes>), OpError> {
        let tag = newest.identity;
        let holders: Vec<String> = known.iter().filter(|(_, h)| h.holds(tag, newest.ballot)).map(|(d, _)| d.clone()).collect();
        // While the partition moves, the newest must be on a write quorum of the drives it
        // moves to as well: else the flip could leave it on too few of them, and a read after
        // it return something older than this one did.
        let write_back = !joint_quorum(map, partition, usize::from(map.write_quorum), holders.iter());
        tracing::trace!(?dkey, write = ?tag, epoch = map.epoch, ?holders, write_back, "settle");
        let mut value = value;
        // A batch's tombstone has a value too: its members, needed to write the batch back.
        if value.is_none() && (with_value || write_back) && (!tag.is_tombstone() || tag.is_batch()) {
            value = Some(self.fetch_any(map, &holders, dkey, newest).await?);
        }
        if write_back && tag.is_batch() {
            let entry = value.clone().unwrap_or_default();
            // From the first holder that answers (one may have died since the read).
            let mut last = None;
            for holder in &holders {
                match self.write_back_batch(map, partition, holder, dkey, newest, &entry, known.clone()).await {
                    Err(e) if unanswered(&e) => {
                        self.suspect(holder);
                        last = Some(e);
                    }
                    Err(e) => return Err(e),
                    Ok(None) => {
                        last = None;
                        break;
                    }
                    // Abandoned: the write that stands in its place.
                    Ok(Some(stands)) => return Ok(stands),
                }
            }
            if let Some(e) = last {
                return Err(e);
            }
        } else if write_back {
            if let Some(stands) = self.store_or_round(map, partition, key, dkey, value.clone().unwrap_or_default(), newest, known).await? {
                return Ok(stands);
            }
        }
        Ok((tag, value))
    }

    /// `newest` (with `value`) written back to `dkey` under its own ballot; refused by a
    /// write quorum (a round's promise), a round decides what stands: `Some`, that write.
    #[allow(clippy::too_many_arguments, reason = "one read's state, as settle has it")]
    async fn store_or_round(
        &self,
        map: &Arc<ClusterMap>,
        partition: u32,
        key: &[u8],
        dkey: &Bytes,
        value: Bytes,
        newest: Stamp,
        known: BTreeMap<String, Held>,
    ) -> Result<Option<(Tag, Option<Bytes>)>, OpError> {
        match self.store(map, partition, dkey, value, newest.identity, newest.ballot, Arc::new(known), Judged::Settle).await {
            Err(OpError::Changed) => match self.round(map, key, dkey, Proposal::Learn).await? {
                Outcome::Current { identity, value } => Ok(Some((identity, Some(value)))),
                Outcome::Wrote(_) => Err(OpError::Changed),
            },
            stored => stored.map(|()| None),
        }
    }

    /// The judgement of a batch that can no longer be made chosen whole (`abandon`): never
    /// chosen, the write that stands in its place; chosen, or undecided, the read starts over.
    async fn abandon_or_again(&self, map: &Arc<ClusterMap>, partition: u32, dkey: &Bytes, tag: Tag) -> Result<Option<(Tag, Option<Bytes>)>, OpError> {
        match self.abandon(map, partition, dkey, tag).await? {
            Fate::Stands(stands) => Ok(Some(stands)),
            Fate::Chosen => Err(OpError::Changed),
            Fate::Unknown(why) => Err(why.error(partition, dkey)),
        }
    }

    /// Writes the batch whose entry for `dkey` is `entry` (tagged `tag`, read from `holder`)
    /// back to a write quorum, whole (`None`). A batch with a member overwritten is written
    /// back without it only once proven chosen; proven never chosen, it is abandoned, and the
    /// write standing in its place is returned (`abandon`). Whole: each member's entry of the same write, as `holder` has
    /// it (a replica stores a batch all at once, so it has every member at this write or a
    /// newer one, which leaves that member out), stored atomically on each replica. A member
    /// left out for a newer write is first read as any key is (its newer write settled on a
    /// write quorum, its own batch whole), so that it holds that write or a newer one on a
    /// quorum whatever became of the writer: left out unsettled, a reader of it could still
    /// get the value from before this batch after this read returned the batch.
    #[allow(clippy::too_many_arguments, reason = "one read's state, as settle has it")]
    pub(super) async fn write_back_batch(
        &self,
        map: &Arc<ClusterMap>,
        partition: u32,
        holder: &str,
        dkey: &Bytes,
        newest: Stamp,
        entry: &Bytes,
        known: BTreeMap<String, Held>,
    ) -> Result<Option<(Tag, Option<Bytes>)>, OpError> {
        let tag = newest.identity;
        if batch::decode_entry(entry).is_none() {
            return Err(undecodable(dkey));
        }
        let c = self.connection(map, holder, Lane::Writes).await.map_err(|e| OpError::from_client(holder, e))?;
        let gathered = crate::repair::batch_of(partition, &c, dkey, newest, entry).await.map_err(|e| OpError::from_client(holder, e))?;
        // The holder no longer has the batch whole (overwritten under the read, or a copy of
        // one key alone). Recorded chosen, it was accepted again for this key alone
        // (`abandon`): written back so.
        let Some(gathered) = gathered else {
            if self.recorded(map, partition, tag).await {
                // Refused by a promise, a round accepts it above (`round` takes a recorded batch
                // up for a key alone).
                let key = map::user_key(partition, dkey).ok_or_else(|| undecodable(dkey))?;
                return self.store_or_round(map, partition, key, dkey, entry.clone(), newest, known).await;
            }
            // Not recorded: judged on `dkey` from every replica (`abandon`). Never chosen, the
            // write before it stands; else read again. Before, every read met on top a copy of
            // one key alone that no record covers, and none could write it back.
            return self.abandon_or_again(map, partition, dkey, tag).await;
        };
        // Members replaced by a newer write since (`Stamp::replaces`): settled, then left out.
        // Tags only grow along this recursion (each newer than the batch that led to it).
        let newer = gathered.replaced.clone();
        for mkey in &newer {
            let Some(member) = map::user_key(partition, mkey) else { return Err(undecodable(mkey)) };
            self.settle_key(map, Bytes::copy_from_slice(member)).await?;
        }
        if !newer.is_empty() {
            // Written back without the member only if it was chosen; never chosen, it never
            // will be, and is abandoned; undecided, read again (`abandon`).
            match self.abandon(map, partition, dkey, tag).await? {
                Fate::Stands(stands) => return Ok(Some(stands)),
                Fate::Chosen => {}
                Fate::Unknown(why) => return Err(why.error(partition, dkey)),
            }
        }
        // Members the holder has at the batch's write under a lower ballot (left out of a round
        // that took the batch up again, `Gathered::lower`) are not newer: a read of one writes
        // the batch back from the replica where that member is highest, where this key may be
        // the lower one, and so on without end. A round takes them with the rest, as it takes
        // an overtaken batch, leaving out what it finds newer.
        if !gathered.lower.is_empty() {
            let all = Arc::new(gathered.entries);
            return Box::pin(self.learn_overtaken(map, partition, dkey, tag, all)).await;
        }
        let (entries, _) = gathered.into_copy();
        // Other batches this replaces on a write quorum: recorded first (`chosen_beneath`).
        self.record_beneath(map, partition, chosen_beneath(map, partition, tag, known.iter())).await;
        // What each replica held is known for `dkey` only: the store reads the rest.
        let known = Arc::new(known);
        let entries = Arc::new(entries);
        let ballot = newest.ballot;
        let to_accept = entries.clone();
        let answers = self
            .ask_where(map, partition, usize::from(map.write_quorum), Ask::All, Answer::counts, move |drive, c| {
                let (entries, known) = (to_accept.clone(), known.clone());
                async move {
                    let known = match known.get(&drive) {
                        Some(h) if entries.len() == 1 => Some(vec![h.clone()]),
                        _ => None,
                    };
                    replica::accept_batch(&c, &entries, ballot, known).await
                }
            })
            .await?;
        let refused = answers.iter().any(|(_, a)| *a == Answer::No);
        match self.judge(map, partition, answers, Judged::Settle) {
            // A replica's promise (a round's, maybe one that never finished) refuses the
            // batch's own ballot: a round above it makes the batch chosen, as a single key's
            // refused write-back goes on with a round.
            // Boxed: its state would otherwise grow every read's future, on a path rarely taken.
            Err(OpError::Changed) if refused => Box::pin(self.learn_overtaken(map, partition, dkey, tag, entries)).await,
            Ok(()) => {
                // Chosen by this write-back, whose writer may never have acknowledged it: its
                // record, as its writer leaves one (`crate::record`).
                self.leave_record(map, partition, tag).await;
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// The round of a batch whose write-back was refused (`learn_batch`), and when it meets
    /// newer writes of some members on the replicas that promised: those members settled
    /// (their newer writes on a write quorum), the batch judged on `dkey` with every replica
    /// (`abandon`), and, chosen, made chosen again without them; abandoned, the write that
    /// stands for `dkey` returned. Without the judgement such a batch was tried again and
    /// again, each round meeting the same newer write. A newer write of `dkey` itself: read
    /// again (it is the read's answer now, not the batch), once a round over every replica
    /// shows it too.
    async fn learn_overtaken(&self, map: &Arc<ClusterMap>, partition: u32, dkey: &Bytes, tag: Tag, entries: Arc<Vec<BatchEntry>>) -> Result<Option<(Tag, Option<Bytes>)>, OpError> {
        let mut entries = entries;
        let mut reach = Reach::Quorum;
        // Each pass leaves at least one member out, or ends; one more for the round over
        // every replica.
        for _ in 0..=entries.len() {
            let newer = match self.learn_batch(map, partition, entries.clone(), reach, (&[], NOTHING)).await {
                Ok(Learned::Done) => return Ok(None),
                Ok(Learned::Overtaken { newer }) => newer,
                // A replica that does not answer stops only the round over every replica: the
                // read starts again, as it did without that round.
                Err(OpError::Failed(e @ ClusterError::NoQuorum { .. })) if matches!(reach, Reach::Every) => {
                    tracing::debug!(?dkey, error = %e, "a batch's round over every replica not answered by all");
                    return Err(OpError::Changed);
                }
                Err(e) => return Err(e),
            };
            if newer.is_empty() {
                // Overtaken only by older writes a round took up above the batch's ballot: on
                // those members it can no longer be chosen. Judged on `dkey` as any batch that
                // can no longer be chosen whole (`abandon`): never chosen, the write before it
                // stands; chosen, it cannot be made whole again, and the read starts over.
                return self.abandon_or_again(map, partition, dkey, tag).await;
            }
            if newer.iter().any(|i| entries[*i].0 == *dkey) {
                // The read found the batch above every write of `dkey` its replicas hold; a
                // quorum that promised without the replica holding it there can show a write
                // newer by tag but accepted under a lower ballot (a copy made where that
                // batch's round never reached). Read again, every read meets the batch above
                // it again, and every round misses it: no end. Over every replica, the highest
                // accepted write decides, as in any round.
                // A replica marked down or suspected would hold every such try for its timeout.
                if matches!(reach, Reach::Every) || !self.all_answering(map, partition) {
                    return Err(OpError::Changed);
                }
                reach = Reach::Every;
                continue;
            }
            for i in &newer {
                let Some(key) = map::user_key(partition, &entries[*i].0) else { return Err(undecodable(&entries[*i].0)) };
                // Tags only grow along this recursion (each member's write newer than the batch).
                self.settle_key(map, Bytes::copy_from_slice(key)).await?;
            }
            match self.abandon(map, partition, dkey, tag).await? {
                Fate::Stands(stands) => return Ok(Some(stands)),
                Fate::Unknown(why) => return Err(why.error(partition, dkey)),
                Fate::Chosen => {
                    tracing::debug!(batch = ?tag, ?dkey, left_out = newer.len(), "a batch overtaken on some members judged chosen: made chosen without them");
                    let kept = entries.iter().enumerate().filter(|(i, _)| !newer.contains(i)).map(|(_, e)| e.clone()).collect();
                    entries = Arc::new(kept);
                }
            }
        }
        Err(OpError::Changed)
    }

    /// Whether no drive that holds or receives `partition` is marked down or suspected.
    fn all_answering(&self, map: &ClusterMap, partition: u32) -> bool {
        let down = self.inner.down.read();
        let suspects = self.inner.suspects.lock();
        let now = Instant::now();
        map.writers_of(partition).iter().all(|d| !down.contains(d) && suspects.get(d).is_none_or(|until| *until <= now))
    }

    /// A read of `key` for what it settles (boxed: reads and batch write-backs recurse). A
    /// member's newest write may be a batch re-accepted under a high ballot whose own members
    /// lead back to a key this operation is already settling: that read is not made again
    /// (the operation starts over, `Changed`), or the recursion has no end.
    pub(super) fn settle_key<'a>(
        &'a self,
        map: &'a Arc<ClusterMap>,
        key: Bytes,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), OpError>> + Send + 'a>> {
        Box::pin(async move {
            let entered = SETTLING.try_with(|keys| {
                let mut keys = keys.borrow_mut();
                let fresh = !keys.contains(&key);
                if fresh {
                    keys.push(key.clone());
                }
                fresh
            });
            match entered {
                Ok(false) => {
                    tracing::debug!(?key, "a member's settle leads back to a key being settled: read again");
                    Err(OpError::Changed)
                }
                Ok(true) => {
                    let _leave = Settling(key.clone());
                    self.read(map, &key, false).await.map(drop)
                }
                Err(_) => SETTLING.scope(std::cell::RefCell::new(vec![key.clone()]), self.read(map, &key, false)).await.map(drop),
            }
        })
    }
}

tokio::task_local! {
    /// The keys one operation's batch write-backs are settling (`Store::settle_key`).
    static SETTLING: std::cell::RefCell<Vec<Bytes>>;
}

/// A key's place among those being settled, given up when its read ends or is dropped.
struct Settling(Bytes);

impl Drop for Settling {
    fn drop(&mut self) {
        let _ = SETTLING.try_with(|keys| keys.borrow_mut().retain(|k| *k != self.0));
    }
}
