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
//! fails the flip's transaction, which compares the revision of the last note.

use serde::{Deserialize, Serialize};

use crate::control::{decode, encode, Control};
use crate::map::ClusterMap;
use crate::plane::{Change, Guard};
use crate::tag::Tag;
use crate::ClusterError;

/// Where the notes are kept, under the cluster's prefix: one key per batch,
/// `abandoned/<epoch>/<partition>/<tag>`, so that notes made at once never contend.
const NOTES: &str = "abandoned/";
/// Written with every note: the flip's transaction compares its revision, so that a note
/// made after the coordinator read them fails it.
const NOTED_LAST: &str = "abandoned-last";
/// The largest note etcd takes in one request (1.5 MiB by default); a batch of the largest
/// keys takes about a sixth of it.
pub const MAX_NOTE_BYTES: usize = 1024 * 1024;

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
}

impl Control {
    /// Notes `batch` as abandoned during the move at `epoch`, if the map is still at that
    /// epoch when the note is made (the map's revision is compared in its transaction).
    /// `false`: not noted, because the map changed (the move may have flipped or rolled
    /// back); the abandoning then decides nothing.
    pub async fn note_abandoned(&self, epoch: u64, batch: NotedBatch) -> Result<bool, ClusterError> {
        let bytes = encode(&batch)?;
        if bytes.len() > MAX_NOTE_BYTES {
            return Ok(false);
        }
        let map_key = self.key("map");
        let Some(map) = self.plane().get(&map_key).await? else { return Ok(false) };
        if decode::<ClusterMap>(&map.value)?.epoch != epoch {
            return Ok(false);
        }
        let key = self.key(&format!("{NOTES}{epoch}/{}/{:016x}{:016x}{:016x}", batch.partition, batch.epoch, batch.counter, batch.writer));
        // Noted at this epoch already (by a reader, or by the coordinator's own settling): the
        // flip settles it, or that note was made after the flip read them and failed it.
        // Noting it again would fail the flip once more for nothing.
        if self.plane().get(&key).await?.is_some() {
            return Ok(true);
        }
        let changes = vec![Change::Put(key, bytes), Change::Put(self.key(NOTED_LAST), epoch.to_string().into_bytes())];
        self.plane().txn(vec![Guard::WrittenAt(map_key, map.mod_revision)], changes).await
    }

    /// The batches noted during the move at `epoch`, and the guard that holds the flip's
    /// transaction to them (it fails if any is noted after this read).
    pub async fn noted_abandoned(&self, epoch: u64) -> Result<(Vec<NotedBatch>, Guard), ClusterError> {
        let last_key = self.key(NOTED_LAST);
        let guard = match self.plane().get(&last_key).await? {
            Some(kv) => Guard::WrittenAt(last_key, kv.mod_revision),
            None => Guard::Absent(last_key),
        };
        let noted = self.plane().list(&self.key(&format!("{NOTES}{epoch}/"))).await?;
        Ok((noted.iter().map(|kv| decode(&kv.value)).collect::<Result<_, _>>()?, guard))
    }

    /// Deletes the notes of moves before `epoch` (after a flip or a rollback: nothing waits
    /// for them any more).
    pub async fn drop_notes_before(&self, epoch: u64) -> Result<(), ClusterError> {
        let prefix = self.key(NOTES);
        for kv in self.plane().list(&prefix).await? {
            let at = kv.key.strip_prefix(&prefix).and_then(|rest| rest.split('/').next()).and_then(|e| e.parse::<u64>().ok());
            if at.is_none_or(|at| at < epoch) {
                self.plane().delete(&kv.key).await?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tag::Kind;

    #[test]
    fn the_largest_batch_is_one_note_etcd_takes() {
        // 15 members of the longest key each.
        let members = vec![vec![0xffu8; crate::map::MAX_KEY_LEN]; crate::batch::MAX_BATCH_OPS];
        let tag = Tag { epoch: u64::MAX, counter: u64::MAX, writer: u64::MAX, kind: Kind::BatchValue };
        let one = encode(&NotedBatch::new(u32::MAX, tag, members)).unwrap();
        assert!(one.len() <= MAX_NOTE_BYTES, "a batch of the largest keys is {} bytes", one.len());
    }
}
