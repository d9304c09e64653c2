//! The completing mark on an upload record, taken, given back and cleared by compare-and-swap.
//! In a cluster such a write can race a reader settling the record (`KvError::Contended`: some
//! replicas took it, and it may yet stand); the record read again says whose mark is there,
//! by the token each completion draws (`Completing::by`).

use bytes::Bytes;
use s3s::S3Result;

use super::lookup::Gateway;
use crate::kv::{Cond, Durability, KvError};
use crate::records::{self, UploadRecord};

/// Times a write of the record that raced is made again on the record read back.
const MARK_ATTEMPTS: usize = 4;

/// The token of the mark on `record`, if any.
pub(super) fn mark_of(record: &UploadRecord) -> Option<u64> {
    record.completing.as_ref().map(|c| c.by)
}

impl Gateway {
    /// Writes `record`, which carries this completion's mark, over the record at `version`:
    /// its new version, or `None` when the record changed since. A write a race left unknown
    /// is settled from every replica (chosen now or never), and the record read says whether
    /// the mark there is ours: a mark that could stand later would hold the upload until the
    /// grace, and then the stale-completion cleanup would abort it.
    pub(super) async fn put_mark(&self, key: &[u8], record: &UploadRecord, version: Bytes) -> S3Result<Option<Bytes>> {
        match self.core.kv.put(key, records::encode(record), Cond::Version(version), Durability::Through).await {
            Ok(v) => Ok(Some(v)),
            Err(KvError::Mismatch) => Ok(None),
            // Unsettled (a replica did not answer), `None` too: the next reading of the record
            // finds the mark if it stood, and the completion takes it or gives it back.
            Err(KvError::Contended(_)) => {
                if let Err(e) = self.core.kv.settle(key).await {
                    tracing::info!(error = %e, "a raced mark could not be settled");
                    return Ok(None);
                }
                Ok(match self.core.kv.get(key).await {
                    Ok(Some(s)) if records::decode::<UploadRecord>("upload", &s.value).ok().is_some_and(|r| r.completing.is_some() && mark_of(&r) == mark_of(record)) => Some(s.version),
                    _ => None,
                })
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Gives the upload back: `record` (without the mark `by`) written over ours at
    /// `version`. Best effort: another write of the record since wins, and a mark left
    /// behind is a completion that crashed (taken over, or cleaned up, after the grace).
    pub(super) async fn give_back(&self, key: &[u8], record: &UploadRecord, by: Option<u64>, version: Bytes) {
        let write = |v: Bytes| self.core.kv.put(key, records::encode(record), Cond::Version(v), Durability::Through);
        self.settle_record(key, by, version, write).await;
    }

    /// Deletes the upload record, still at `version` with the mark `by` (a completion that
    /// took the upload since keeps it).
    pub(super) async fn clear_mark(&self, key: &[u8], by: Option<u64>, version: Bytes) {
        let delete = |v: Bytes| async move { self.core.kv.delete(key, Cond::Version(v), Durability::Through).await.map(|_| Bytes::new()) };
        self.settle_record(key, by, version, delete).await;
    }

    /// `write` made on the record at `version` until it is done, the record no longer bears
    /// the mark `by`, or the attempts run out.
    async fn settle_record<F, Fut>(&self, key: &[u8], by: Option<u64>, mut version: Bytes, write: F)
    where
        F: Fn(Bytes) -> Fut,
        Fut: std::future::Future<Output = Result<Bytes, KvError>>,
    {
        for _ in 0..MARK_ATTEMPTS {
            match write(version.clone()).await {
                Err(KvError::Contended(_)) => {}
                Ok(_) | Err(_) => return,
            }
            match self.core.kv.get(key).await {
                Ok(Some(s)) if records::decode::<UploadRecord>("upload", &s.value).ok().as_ref().is_some_and(|r| mark_of(r) == by) => version = s.version,
                Ok(_) => return,
                Err(e) => {
                    tracing::warn!(error = %e, "an upload record raced and could not be read again");
                    return;
                }
            }
        }
        tracing::warn!("an upload record's write kept racing; the mark stays until the grace");
    }
}
