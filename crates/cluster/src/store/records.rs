//! The store's side of batch records (`crate::record`): left by a batch's writer once a write
//! quorum took the batch, looked for by a reader that cannot tell from the entries whether a
//! batch was chosen.

use super::*;

impl Store {
    /// Leaves the record of `batch` on the replicas of `partition` under `map` (every writer;
    /// returns once a write quorum has it, the rest in the background). A record that cannot
    /// be left costs only its hint: the batch stands whatever becomes of it.
    pub(super) async fn leave_record(&self, map: &Arc<ClusterMap>, partition: u32, batch: Tag) {
        let left = self
            .ask(map, partition, usize::from(map.write_quorum), Ask::All, move |_, c| async move { crate::record::leave(&c, partition, &batch).await })
            .await;
        match left {
            Ok(_) => tracing::debug!(?batch, partition, "a batch's record left"),
            Err(e) => tracing::debug!(?batch, partition, error = ?e, "a batch's record not left on a write quorum"),
        }
    }

    /// Whether any replica of `partition` holds the record of `batch`: then the batch was
    /// chosen. `false` says nothing (no record was left, or none is left now, or a replica
    /// holding one did not answer).
    pub(super) async fn recorded(&self, map: &Arc<ClusterMap>, partition: u32, batch: Tag) -> bool {
        let writers = map.writers_of(partition).len();
        let found = AtomicFound::default();
        let seen = found.clone();
        // Every replica asked; an error (one did not answer) leaves what the others said.
        let _ = self
            .ask(map, partition, writers, Ask::All, move |_, c| {
                let seen = seen.clone();
                async move {
                    let held = crate::record::held(&c, partition, &batch).await?;
                    if held {
                        seen.store(true, std::sync::atomic::Ordering::Relaxed);
                    }
                    Ok(held)
                }
            })
            .await;
        found.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Set by whichever replica's answer shows the record, whatever the others answer.
type AtomicFound = Arc<std::sync::atomic::AtomicBool>;
