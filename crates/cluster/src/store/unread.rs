//! A batch that lands on a replica while a write over the same key is under way: the write
//! read the key before the batch came, and its accept would replace the batch's entry
//! without anyone having decided whether the batch was chosen. Replaced so on each of its
//! holders, a batch chosen but not yet recorded leaves its other keys in a state no read
//! decides (docs/design/simulation.md, Open findings). So a write's accept stops before an
//! entry of a batch it did not read (`replica::accept_unless`), has the batch settled as a
//! read settles it (made chosen whole and recorded, or judged), and goes on.

use super::*;
use crate::replica::Accepted;

/// Batches one replica's accept decides before it replaces what is left: each costs a read,
/// and a key overwritten by batch after batch must not hold a write back for ever.
const MAX_UNREAD_BATCHES: usize = 4;

/// What one replica is asked to accept, with what the write read there (taken by the first
/// try; later tries read again).
pub(super) enum Accept<'a> {
    One { key: &'a Bytes, value: Bytes, identity: Tag, ballot: Tag, known: Option<Held> },
    Batch { entries: &'a [BatchEntry], ballot: Tag, known: Option<Vec<Held>> },
}

impl Accept<'_> {
    /// The batches the write read on this replica: its own decision covers them.
    fn read(&self) -> Vec<Tag> {
        let tags: Vec<Option<Tag>> = match self {
            Accept::One { known, .. } => vec![known.as_ref().and_then(Held::tag)],
            Accept::Batch { known, .. } => known.iter().flatten().map(Held::tag).collect(),
        };
        tags.into_iter().flatten().filter(Tag::is_batch).collect()
    }

    async fn try_once(&mut self, c: &Client, decided: Option<&[Tag]>) -> Result<Accepted, ClientError> {
        match self {
            Accept::One { key, value, identity, ballot, known } => replica::accept_unless(c, key, value.clone(), *identity, *ballot, known.take(), decided).await,
            Accept::Batch { entries, ballot, known } => replica::accept_batch_unless(c, entries, *ballot, known.take(), decided).await,
        }
    }
}

/// How the settle of a batch met under a write ended (`Store::settle_unread`), in the order
/// of what tells most: of several members' settles, the greatest is the batch's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Settle {
    /// Decided (made chosen whole and recorded, or judged), or no longer there to decide:
    /// the accept goes on and replaces what is left.
    Done,
    /// Undecidable already (a member overwritten on its holders, no record): the write's own
    /// entry is what settles the key from here on, so the accept goes on.
    Undecidable,
    /// Not decided for now (replicas that did not answer, a round that met another): replaced
    /// now, the batch would lose its entry here while it may be chosen.
    NotYet,
    /// A drive of a newer view answered: the write goes on under it.
    Stale,
}

impl Store {
    /// A write's accept on one replica (`replica::accept`, `replica::accept_batch`), deciding
    /// first each batch that landed there after the write's read. The batch is replaced once
    /// decided, or when it can no longer be (the write's entry then settles its key). When its
    /// settle fails otherwise, this replica's accept fails, so that no replica loses an entry
    /// of a batch that may be chosen before anyone decided it: the write goes on if it reaches
    /// a write quorum elsewhere (the batch is then decided when it is next met), and under the
    /// new map when the settle met a drive of a newer view.
    pub(super) fn accept_deciding<'a>(
        &'a self,
        map: &'a Arc<ClusterMap>,
        partition: u32,
        (drive, c): (&'a str, &'a Client),
        accept: Accept<'a>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Answer, ClientError>> + Send + 'a>> {
        // Boxed and named Send: the compiler cannot see that a settle's accepts never come
        // back here (they are write-backs, not writes).
        Box::pin(async move {
            let mut accept = accept;
            // What the write read is its own to replace; `known` is only the first guess of
            // what the replica holds, and later tries read it again.
            let mut decided = accept.read();
            let read = decided.len();
            loop {
                let guard = (decided.len() - read < MAX_UNREAD_BATCHES).then_some(decided.as_slice());
                match accept.try_once(c, guard).await? {
                    Accepted::Answered(answer) => return Ok(answer),
                    Accepted::Met { key, batch } => {
                        decided.push(batch.identity);
                        match self.settle_unread(map, partition, (drive, c), &key, batch).await {
                            Settle::Done | Settle::Undecidable => {}
                            // Left as a drive of that view would leave it: the write, if it
                            // needs this replica, goes on under the new map, where the batch
                            // is settled before it is replaced.
                            Settle::Stale => {
                                return Err(ClientError::Status { code: StatusCode::VersionFailure, message: format!("a batch met on {drive} not settled under epoch {}: the map changed", map.epoch) });
                            }
                            Settle::NotYet => {
                                self.inner.counts.batch_left.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                                return Err(ClientError::Status { code: StatusCode::ServiceBusy, message: format!("a batch met on {drive} ({:?}) not yet decided: left in place", batch.identity) });
                            }
                        }
                    }
                }
            }
        })
    }

    /// Settles the batch `batch`, met on `drive` for `dkey` under a write
    /// (nothing to do when this client knows it recorded). Settled through one of its other
    /// members, as a read of that member settles it: `dkey` itself may already hold the write
    /// on a write quorum, and a batch overtaken on the key it is read by is not judged there.
    /// `drive`'s entry of that member is what the settle starts from: the write's read did not
    /// see the batch, and a read quorum that does not ask `drive` may not either.
    async fn settle_unread(&self, map: &Arc<ClusterMap>, partition: u32, (drive, c): (&str, &Client), dkey: &Bytes, batch: Stamp) -> Settle {
        if self.known_recorded(batch.identity) {
            return Settle::Done;
        }
        let members = match c.get(dkey).await {
            Ok(Some(e)) if Held::from_version(e.metadata.version.clone()).holds(batch.identity, batch.ballot) => batch::decode_entry(&e.value).map(|(m, _)| m),
            // Gone or changed since: the accept reads it again.
            Ok(_) => return Settle::Done,
            Err(e) => return Settle::failed_on(&e),
        };
        let Some(met) = map::user_key(partition, dkey) else { return Settle::Done };
        // What the tries through its members came to (the most telling: `Settle`'s order).
        let mut outcome = Settle::Done;
        for member in members.unwrap_or_default().iter().filter(|m| m.as_ref() != met) {
            let mkey = map::drive_key(partition, member);
            let held = match replica::held(c, &mkey).await {
                Ok(held) => held,
                Err(e) => return Settle::failed_on(&e),
            };
            let Some(stamp) = held.stamp().filter(|s| s.identity.same_write(&batch.identity)) else { continue };
            tracing::debug!(?dkey, batch = ?batch.identity, drive, "a batch that landed under a write settled before the write replaces it");
            let known = BTreeMap::from([(drive.to_string(), held)]);
            let failed = match self.settle(map, partition, member, &mkey, stamp, None, false, known).await {
                Ok(_) => return Settle::Done,
                Err(OpError::StaleView) => Settle::Stale,
                Err(OpError::Undecided { .. }) => Settle::Undecidable,
                Err(e) => {
                    tracing::debug!(?mkey, batch = ?batch.identity, error = ?e, "a batch that landed under a write not settled");
                    Settle::NotYet
                }
            };
            outcome = outcome.max(failed);
        }
        outcome
    }
}

impl Settle {
    /// A request to the replica itself failed.
    fn failed_on(e: &ClientError) -> Settle {
        if e.status() == Some(StatusCode::VersionFailure) { Settle::Stale } else { Settle::NotYet }
    }
}
