//! Batches abandoned while their partition moves: noted in the control plane (`abandoned`
//! under the cluster's prefix) before the abandoning writes anything, and settled on every
//! member before the move flips.
//!
//! While a partition moves, a batch is chosen only on a write quorum of both replica sets, and
//! is judged against the old one. A batch that lands after the move's catch-up on a write
//! quorum of the drives the partition moves to, but not of its old replicas, was never chosen,
//! and a reader that meets it with a member overwritten abandons it on the key it read. Once
//! the move flips, those drives are the partition's replicas: on the batch's other keys it
//! stands on a write quorum of them and is taken as chosen, half a batch
//! (docs/design/simulation.md, Findings, "Half a batch across a move's flip"). So such a batch
//! is noted first, and the flip waits until every member of every batch noted at the move's
//! epoch is settled (`migrate::settle_noted`); a note made after the coordinator read them
//! fails the flip's transaction, which guards them by their revision.

use serde::{Deserialize, Serialize};

use crate::control::{decode, encode, Control};
use crate::map::ClusterMap;
use crate::plane::{Change, Guard};
use crate::tag::Tag;
use crate::ClusterError;

/// The most the notes of one move take in the control plane (etcd refuses requests over
/// 1.5 MiB by default). A batch that does not fit is left undecided by its reader, to try
/// again, and judged by the replicas after the flip like any batch nobody abandoned.
pub const MAX_NOTED_BYTES: usize = 256 * 1024;
/// Tries to add a note while other notes are added at the same time.
const NOTE_TRIES: usize = 8;

/// The batches noted during the move at `epoch`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Noted {
    pub epoch: u64,
    pub batches: Vec<NotedBatch>,
}

/// One batch abandoned while its partition moved: its tag and its members' user keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotedBatch {
    pub partition: u32,
    pub epoch: u64,
    pub counter: u64,
    pub writer: u64,
    pub members: Vec<Vec<u8>>,
}

impl NotedBatch {
    pub fn new(partition: u32, batch: Tag, members: Vec<Vec<u8>>) -> NotedBatch {
        NotedBatch { partition, epoch: batch.epoch, counter: batch.counter, writer: batch.writer, members }
    }

    /// Whether both name the same batch (its kind aside: a member's value or tombstone).
    fn same(&self, other: &NotedBatch) -> bool {
        (self.partition, self.epoch, self.counter, self.writer) == (other.partition, other.epoch, other.counter, other.writer)
    }
}

impl Control {
    /// Notes `batch` as abandoned during the move at `epoch`, if the map is still at that
    /// epoch (or the batch is noted already). `false`: not noted, because the map changed
    /// (the move may have flipped), the notes are full or others kept changing them; the
    /// abandoning then decides nothing.
    pub async fn note_abandoned(&self, epoch: u64, batch: NotedBatch) -> Result<bool, ClusterError> {
        let (map_key, note_key) = (self.key("map"), self.key("abandoned"));
        for _ in 0..NOTE_TRIES {
            let held = self.plane().get(&note_key).await?;
            let mut noted: Noted = match &held {
                Some(kv) => decode(&kv.value)?,
                None => Noted::default(),
            };
            // Noted before: a flip from this epoch settles it first, whatever the map is now.
            if noted.epoch == epoch && noted.batches.iter().any(|b| b.same(&batch)) {
                return Ok(true);
            }
            let Some(map) = self.plane().get(&map_key).await? else { return Ok(false) };
            if decode::<ClusterMap>(&map.value)?.epoch != epoch {
                return Ok(false);
            }
            if noted.epoch != epoch {
                noted = Noted { epoch, batches: Vec::new() };
            }
            noted.batches.push(batch.clone());
            let bytes = encode(&noted)?;
            if bytes.len() > MAX_NOTED_BYTES {
                return Ok(false);
            }
            let guards = vec![Guard::WrittenAt(map_key.clone(), map.mod_revision), guard_of(&note_key, held.as_ref().map(|kv| kv.mod_revision))];
            if self.plane().txn(guards, vec![Change::Put(note_key.clone(), bytes)]).await? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The batches noted during the move at `epoch`, and the guard that holds the flip's
    /// transaction to them (it fails if any is noted after this read).
    pub async fn noted_abandoned(&self, epoch: u64) -> Result<(Vec<NotedBatch>, Guard), ClusterError> {
        let note_key = self.key("abandoned");
        let held = self.plane().get(&note_key).await?;
        let batches = match &held {
            Some(kv) => decode::<Noted>(&kv.value)?,
            None => Noted::default(),
        };
        let batches = if batches.epoch == epoch { batches.batches } else { Vec::new() };
        Ok((batches, guard_of(&note_key, held.map(|kv| kv.mod_revision))))
    }
}

/// The guard that `key` is as read: written at `revision`, or absent.
fn guard_of(key: &str, revision: Option<i64>) -> Guard {
    match revision {
        Some(revision) => Guard::WrittenAt(key.to_string(), revision),
        None => Guard::Absent(key.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tag::Kind;

    #[test]
    fn a_batch_is_the_same_whatever_its_members_kind() {
        let tag = Tag { epoch: 4, counter: 9, writer: 3, kind: Kind::BatchValue };
        let a = NotedBatch::new(2, tag, vec![b"k".to_vec()]);
        assert!(a.same(&NotedBatch::new(2, Tag { kind: Kind::BatchTombstone, ..tag }, vec![])));
        assert!(!a.same(&NotedBatch::new(3, tag, vec![])));
        assert!(!a.same(&NotedBatch::new(2, Tag { counter: 10, ..tag }, vec![])));
    }

    #[test]
    fn the_most_a_move_notes_fits_an_etcd_request() {
        // The largest batch: 15 members of the longest key each.
        let members = vec![vec![0xffu8; crate::map::MAX_KEY_LEN]; crate::batch::MAX_BATCH_OPS];
        let one = encode(&NotedBatch::new(1, Tag { epoch: 1, counter: 1, writer: 1, kind: Kind::BatchValue }, members)).unwrap();
        assert!(one.len() < MAX_NOTED_BYTES, "one batch of the largest keys is {} bytes", one.len());
    }
}
