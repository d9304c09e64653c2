//! The store's side of batch records (`crate::record`): left by a batch's writer once a write
//! quorum took the batch, looked for by a reader that cannot tell from the entries whether a
//! batch was chosen; abandonment records likewise, left by a reader that proved a batch never
//! chosen.

use super::*;
use crate::record::Record;

/// What the replicas asked hold of one batch's records.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Found {
    pub(super) chosen: bool,
    pub(super) abandoned: bool,
}

impl Store {
    /// Leaves the record of `batch` on the replicas of `partition` under `map` (every writer;
    /// returns once a write quorum has it, the rest in the background). A record that cannot
    /// be left costs only its hint: the batch stands whatever becomes of it.
    pub(super) async fn leave_record(&self, map: &Arc<ClusterMap>, partition: u32, batch: Tag) {
        if self.leave(map, partition, batch, Record::Chosen).await {
            let mut known = self.inner.records.lock();
            if known.len() >= MAX_KNOWN_RECORDS {
                known.clear();
            }
            known.insert(batch.with_kind(Kind::BatchValue));
        }
    }

    /// Leaves the record of `batch`, met chosen (on a write quorum) where a write is about to
    /// replace it, unless this client knows it left: its writer may have stopped before
    /// leaving it, and once replaced on some replicas the entries may no longer tell.
    pub(super) async fn ensure_record(&self, map: &Arc<ClusterMap>, partition: u32, batch: Tag) {
        if !self.known_recorded(batch) {
            self.leave_record(map, partition, batch).await;
        }
    }

    /// Leaves the records of `batches` (`quorum::chosen_beneath`: chosen, about to be replaced
    /// on some replicas), each unless this client knows it left.
    pub(super) async fn record_beneath(&self, map: &Arc<ClusterMap>, partition: u32, batches: Vec<Tag>) {
        for batch in batches {
            self.ensure_record(map, partition, batch).await;
        }
    }

    /// Whether this client left `batch`'s record or saw it left.
    pub(super) fn known_recorded(&self, batch: Tag) -> bool {
        self.inner.records.lock().contains(&batch.with_kind(Kind::BatchValue))
    }

    /// Leaves the abandonment records of `batches`, each proven never chosen and passed over
    /// for a key whose write before them now stands (all at once, each on a write quorum, the
    /// rest in the background). One that cannot be left costs only its hint.
    pub(super) async fn leave_abandoned(&self, map: &Arc<ClusterMap>, partition: u32, batches: &[Tag]) {
        futures_util::future::join_all(batches.iter().map(|&batch| self.leave(map, partition, batch, Record::Abandoned))).await;
    }

    /// Leaves `batch`'s record of kind `record` on a write quorum of `partition`'s replicas;
    /// whether it did.
    async fn leave(&self, map: &Arc<ClusterMap>, partition: u32, batch: Tag, record: Record) -> bool {
        let left = self
            .ask(map, partition, usize::from(map.write_quorum), Ask::All, move |_, c| async move { crate::record::leave(&c, record, partition, &batch).await })
            .await;
        match left {
            Ok(_) => tracing::debug!(?batch, ?record, partition, "a batch's record left"),
            Err(ref e) => tracing::debug!(?batch, ?record, partition, error = ?e, "a batch's record not left on a write quorum"),
        }
        left.is_ok()
    }

    /// Whether any replica of `partition` holds the record of `batch`: then the batch was
    /// chosen. `false` says nothing (no record was left, or none is left now, or a replica
    /// holding one did not answer). Every replica is asked; the first that holds it answers.
    pub(super) async fn recorded(&self, map: &Arc<ClusterMap>, partition: u32, batch: Tag) -> bool {
        self.ask_where(map, partition, 1, Ask::All, |held: &bool| *held, move |_, c| async move { crate::record::held(&c, Record::Chosen, partition, &batch).await })
            .await
            .is_ok_and(|answers| answers.iter().any(|(_, held)| *held))
    }

    /// Both records of `batch` at once, each replica asked for the two together: a record of
    /// it chosen, or one of it proven never chosen (`false` for either says nothing, as in
    /// `recorded`). The first replica that holds either answers.
    pub(super) async fn records_of(&self, map: &Arc<ClusterMap>, partition: u32, batch: Tag) -> Found {
        let both = move |_, c: Client| async move {
            let (chosen, abandoned) = tokio::try_join!(crate::record::held(&c, Record::Chosen, partition, &batch), crate::record::held(&c, Record::Abandoned, partition, &batch))?;
            Ok::<_, ClientError>(Found { chosen, abandoned })
        };
        match self.ask_where(map, partition, 1, Ask::All, |f: &Found| f.chosen || f.abandoned, both).await {
            Ok(answers) => answers.iter().fold(Found::default(), |all, (_, f)| Found { chosen: all.chosen || f.chosen, abandoned: all.abandoned || f.abandoned }),
            Err(_) => Found::default(),
        }
    }
}
