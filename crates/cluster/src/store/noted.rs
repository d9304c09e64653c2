//! The batches an abandoning passes over while their partition moves, noted in the control
//! plane first when the drives it moves to may hold them on a write quorum
//! (`crate::abandoned`): else, after the flip, such a batch would stand on its other keys.

use super::abandon::may_have_held;
use super::*;
use crate::abandoned::NotedBatch;

impl Store {
    /// Notes each of `passed` (batches proven never chosen for `dkey`, about to be passed over)
    /// that a write quorum of the drives `partition` moves to may have held, as every replica
    /// showed it after promising (`promised`). `false`: one was not noted (the map changed, the
    /// control plane did not answer, its entry could not be read): pass over nothing.
    pub(super) async fn note_passed(&self, map: &Arc<ClusterMap>, partition: u32, dkey: &Bytes, passed: &[Tag], promised: &[(String, Held, Bytes)]) -> bool {
        let Some(new) = map.moving_to(partition) else { return true };
        let need = usize::from(map.write_quorum).min(new.len().max(1));
        for batch in passed {
            let may = promised.iter().filter(|(d, h, _)| new.contains(d) && may_have_held(h, *batch) != Some(false)).count();
            if may < need {
                continue;
            }
            let entry = promised.iter().find(|(_, h, _)| h.stamp().is_some_and(|s| s.identity.same_write(batch))).map(|(_, _, v)| v);
            let Some((members, _)) = entry.and_then(batch::decode_entry) else {
                tracing::debug!(?batch, ?dkey, "undecided: the entry of a batch to pass over while its partition moves cannot be read");
                return false;
            };
            let noted = NotedBatch::new(partition, *batch, members.iter().map(|m| m.to_vec()).collect());
            match self.control().note_abandoned(map.epoch, noted).await {
                Ok(true) => tracing::debug!(?batch, ?dkey, "a batch abandoned while its partition moves noted for the flip"),
                Ok(false) => {
                    tracing::debug!(?batch, ?dkey, "undecided: a batch to pass over while its partition moves not noted (the map changed)");
                    return false;
                }
                Err(e) => {
                    tracing::debug!(?batch, ?dkey, error = ?e, "undecided: a batch to pass over while its partition moves not noted");
                    return false;
                }
            }
        }
        true
    }
}
