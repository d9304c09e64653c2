//! The scrub's settling of a key a replica's promise holds back: the key's current write
//! accepted again by every replica under one new ballot.

use super::*;

impl Store {
    /// Makes `key`'s current write stand on every replica of its partition, under a ballot
    /// above every position they hold: a round like a reader's (`round`, `Proposal::Learn`)
    /// whose prepare and accept go to every replica, not a quorum. What the sweeper's scrub
    /// needs where a replica promised a ballot above the newest write (a round that never
    /// finished): that replica refuses the write's late accept for good, and a read finds the
    /// write chosen already and writes nothing. Safe as any round is: every replica promised
    /// before the accept, and the write accepted is the highest any of them holds.
    ///
    /// A batch's write is accepted again whole, with its other members (`learn_batch` over
    /// every replica); without a member a holder shows overwritten only once proven chosen,
    /// and abandoned where proven never chosen (`abandon`). Does nothing while the partition moves (a move's catch-up settles such
    /// keys), or when a replica does not promise or something newer turns up (another write or
    /// round is under way; the next scrub tries again).
    pub async fn restamp(&self, key: &[u8]) -> Result<(), ClusterError> {
        Self::check_key(key)?;
        self.with_map(|map| async move {
            match self.restamp_at(&map, key).await {
                // Refused by a ballot above this one: another round settles the key. Undecided,
                // it is left to readers and the key's next write.
                Err(OpError::Changed | OpError::Undecided { .. }) => Ok(()),
                other => other,
            }
        })
        .await
    }

    async fn restamp_at(&self, map: &Arc<ClusterMap>, key: &[u8]) -> Result<(), OpError> {
        let partition = map.partition_of(key);
        if map.moving_to(partition).is_some() {
            return Ok(());
        }
        let all = map.replicas_of(partition).len();
        let dkey = map::drive_key(partition, key);
        let k = dkey.clone();
        let read = self
            .ask(map, partition, all, Ask::All, move |_, c| {
                let k = k.clone();
                async move { replica::held_with_value(&c, &k).await }
            })
            .await?;
        let newest = read.iter().filter_map(|(d, (h, v))| h.stamp().filter(|s| s.identity != NOTHING).map(|s| (s, d, v))).max_by_key(|(s, _, _)| s.order());
        if let Some((newest, holder, entry)) = newest.filter(|(s, _, _)| s.identity.is_batch()) {
            // As the holder has it, members it holds a newer write for left out (as readers
            // leave them out); none if it no longer has the batch whole.
            let c = self.connection(map, holder, Lane::Writes).await.map_err(|e| OpError::from_client(holder, e))?;
            let batch = crate::repair::batch_of(partition, &c, &dkey, newest, entry).await.map_err(|e| OpError::from_client(holder, e))?;
            let Some(crate::repair::Gathered { entries, replaced, .. }) = batch else { return Ok(()) };
            if !replaced.is_empty() {
                // Accepted again without a member only if it was chosen (`abandon`).
                for member in replaced {
                    let Some(key) = map::user_key(partition, &member) else { continue };
                    self.settle_key(map, Bytes::copy_from_slice(key)).await?;
                }
                match self.abandon(map, partition, &dkey, newest.identity).await? {
                    Fate::Chosen => {}
                    Fate::Stands(_) | Fate::Unknown(_) => return Ok(()),
                }
            }
            return self.learn_batch(map, partition, Arc::new(entries), Reach::Every, (&[], NOTHING)).await.and_then(Learned::done);
        }
        let top = read.iter().filter_map(|(_, (h, _))| h.stamp()).map(|s| s.position()).max();
        let ballot = Tag::next(top.as_ref(), map.epoch, self.round_id(), Kind::Value);
        let known: Arc<BTreeMap<String, (Held, Bytes)>> = Arc::new(read.into_iter().collect());
        let k = dkey.clone();
        let promised = self
            .ask_where(map, partition, all, Ask::All, Option::is_some, move |drive, c| {
                let (k, known) = (k.clone(), known.get(&drive).cloned());
                async move { replica::promise(&c, &k, ballot, known).await }
            })
            .await?;
        let promised: Vec<(String, Held, Bytes)> = promised.into_iter().filter_map(|(d, p)| p.map(|(h, v)| (d, h, v))).collect();
        if promised.len() < all {
            return Ok(());
        }
        let current = promised.iter().filter_map(|(_, h, v)| h.stamp().filter(|s| s.identity != NOTHING).map(|s| (s, v))).max_by_key(|(s, _)| s.order());
        let Some((current, value)) = current else { return Ok(()) };
        if current.identity.is_batch() {
            // A batch landed since the read: the next scrub settles it whole.
            return Ok(());
        }
        let value = value.clone();
        let after: Arc<BTreeMap<String, Held>> = Arc::new(promised.iter().map(|(d, h, _)| (d.clone(), h.promised(ballot))).collect());
        self.accept_decided(map, partition, &dkey, (&value, current.identity, ballot), after, Judged::Settle).await
    }

    /// `make_chosen` under `map`: the newest write any replica of the key's partition holds
    /// (every replica answering, the drives a move adds included), settled as a read settles
    /// it.
    pub(super) async fn make_chosen_at(&self, map: &Arc<ClusterMap>, key: &[u8]) -> Result<(), OpError> {
        let partition = map.partition_of(key);
        let dkey = map::drive_key(partition, key);
        let all = map.writers_of(partition).len();
        let k = dkey.clone();
        let answers = self
            .ask(map, partition, all, Ask::All, move |_, c| {
                let k = k.clone();
                async move { replica::held(&c, &k).await }
            })
            .await?;
        if answers.len() < all {
            tracing::debug!(?dkey, answered = ?answers.iter().map(|(d, _)| d).collect::<Vec<_>>(), "not made chosen: a replica did not answer");
            return Err(OpError::Changed);
        }
        let Some(newest) = answers.iter().filter_map(|(_, h)| h.stamp().filter(|s| s.identity != NOTHING)).max_by_key(Stamp::order) else {
            return Ok(());
        };
        let known: BTreeMap<String, Held> = answers.into_iter().collect();
        self.settle(map, partition, key, &dkey, newest, None, false, known)
            .await
            .map(drop)
            .inspect_err(|e| tracing::debug!(?dkey, ?newest, error = ?e, "not made chosen"))
    }
}
