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
            Ok(_) => {
                tracing::debug!(?batch, partition, "a batch's record left");
                let mut known = self.inner.records.lock();
                if known.len() >= MAX_KNOWN_RECORDS {
                    known.clear();
                }
                known.insert(batch.with_kind(Kind::BatchValue));
            }
            Err(e) => tracing::debug!(?batch, partition, error = ?e, "a batch's record not left on a write quorum"),
        }
    }

    /// Leaves the record of `batch`, met chosen (on a write quorum) where a write is about to
    /// replace it, unless this client knows it left: its writer may have stopped before
    /// leaving it, and once replaced on some replicas the entries may no longer tell.
    pub(super) async fn ensure_record(&self, map: &Arc<ClusterMap>, partition: u32, batch: Tag) {
        if !self.inner.records.lock().contains(&batch.with_kind(Kind::BatchValue)) {
            self.leave_record(map, partition, batch).await;
        }
    }

    /// Leaves the abandonment records of `batches`, each proven never chosen and passed over
    /// for a key whose write before them now stands (on a write quorum, the rest in the
    /// background). One that cannot be left costs only its hint.
    pub(super) async fn leave_abandoned(&self, map: &Arc<ClusterMap>, partition: u32, batches: &[Tag]) {
        for &batch in batches {
            let left = self
                .ask(map, partition, usize::from(map.write_quorum), Ask::All, move |_, c| async move { crate::record::leave_abandoned(&c, partition, &batch).await })
                .await;
            if let Err(e) = left {
                tracing::debug!(?batch, partition, error = ?e, "a batch's abandonment record not left on a write quorum");
            }
        }
    }

    /// Whether any replica of `partition` holds the abandonment record of `batch`: then it
    /// was proven never chosen, and passed over for one of its keys. `false` says nothing.
    pub(super) async fn recorded_abandoned(&self, map: &Arc<ClusterMap>, partition: u32, batch: Tag) -> bool {
        self.ask_where(map, partition, 1, Ask::All, |held: &bool| *held, move |_, c| async move { crate::record::held_abandoned(&c, partition, &batch).await })
            .await
            .is_ok_and(|answers| answers.iter().any(|(_, held)| *held))
    }

    /// Whether any replica of `partition` holds the record of `batch`: then the batch was
    /// chosen. `false` says nothing (no record was left, or none is left now, or a replica
    /// holding one did not answer). Every replica is asked; the first that holds it answers.
    pub(super) async fn recorded(&self, map: &Arc<ClusterMap>, partition: u32, batch: Tag) -> bool {
        self.ask_where(map, partition, 1, Ask::All, |held: &bool| *held, move |_, c| async move { crate::record::held(&c, partition, &batch).await })
            .await
            .is_ok_and(|answers| answers.iter().any(|(_, held)| *held))
    }
}
