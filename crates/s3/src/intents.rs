//! Intents, the records that account for data no record references yet (an upload's) or may
//! no longer reference (a replaced object's): written, refreshed by compare-and-swap while an
//! upload runs, and released for the sweeper (docs/design/s3-gateway.md).

use bytes::Bytes;
use futures_util::stream::StreamExt;
use s3s::{s3_error, S3Result};

use crate::kv::{Cond, Durability, KvError};
use crate::layout::{self, DataId};
use crate::objects::{Core, Own, RELEASES_AT_ONCE};
use crate::records::{self, Intent, Owner};
use crate::swap;

/// Times a release that raced another write of its intent is made again.
const RELEASE_ATTEMPTS: usize = 8;

impl Core {
    /// Writes or refreshes the intent of `data`: with `version`, only if nobody (the sweeper)
    /// changed it since; returns its new version.
    pub async fn put_intent(&self, data: DataId, owner: &Owner, version: Option<Bytes>) -> Result<Bytes, KvError> {
        self.store_intent(data, owner, version, Durability::Through, false).await
    }

    async fn store_intent(&self, data: DataId, owner: &Owner, version: Option<Bytes>, durability: Durability, swapping: bool) -> Result<Bytes, KvError> {
        self.write_intent(data, owner, version.map_or(Cond::Any, Cond::Version), durability, swapping).await
    }

    /// Writes a fresh intent of `data` if `cond` holds.
    pub(crate) async fn store_intent_if(&self, data: DataId, owner: &Owner, cond: Cond, durability: Durability) -> Result<Bytes, KvError> {
        self.write_intent(data, owner, cond, durability, false).await
    }

    async fn write_intent(&self, data: DataId, owner: &Owner, cond: Cond, durability: Durability, swapping: bool) -> Result<Bytes, KvError> {
        let intent = Intent { touched_ms: records::now_ms(), owner: owner.clone(), doomed: false, swapping };
        self.kv.put(&layout::intent(data), records::encode(&intent), cond, durability).await
    }

    /// Guards data a part record names for the completion about to reference it: the intent
    /// there is taken over by compare-and-swap, and data whose intent the sweeper has doomed
    /// (its chunks being deleted) is refused rather than guarded again.
    pub async fn claim(&self, data: DataId, owner: &Owner) -> S3Result<Bytes> {
        let cond = match self.kv.get(&layout::intent(data)).await? {
            Some(stored) => {
                if records::decode::<Intent>("intent", &stored.value)?.doomed {
                    return Err(s3_error!(InvalidPart, "a part's data is being collected; upload the part again"));
                }
                Cond::Version(stored.version)
            }
            None => Cond::Absent,
        };
        match self.store_intent_if(data, owner, cond, Durability::Through).await {
            Ok(v) => Ok(v),
            Err(KvError::Mismatch) => Err(s3_error!(SlowDown, "a part's data changed hands during the completion; retry it")),
            Err(e) => Err(e.into()),
        }
    }

    /// Refreshes the intent of `data` during its upload, if nobody (the sweeper) changed it
    /// since `version`; returns its new version.
    pub async fn refresh(&self, data: DataId, owner: &Owner, version: &Bytes) -> S3Result<Bytes> {
        self.refresh_with(data, owner, version, Durability::Through, false).await
    }

    /// The refresh just before a swap that references `data`: its compare-and-swap proves the
    /// sweeper has not doomed the intent (it dooms only an intent it has watched unchanged for
    /// the grace, so not one refreshed since, whatever the clocks say). Written back: if a crash
    /// loses it, the swap that follows either reached the disk, and the sweeper finds the data
    /// referenced before it would doom anything, or it did not, and the upload failed anyway.
    pub async fn refresh_before_swap(&self, data: DataId, owner: &Owner, version: &Bytes) -> S3Result<Bytes> {
        self.refresh_with(data, owner, version, Durability::Lazy, true).await
    }

    /// `refresh_before_swap`, its failure as the store gave it: a swap that raced may have
    /// been chosen since, and a writer that found it so released this data (`Core::commit`).
    pub(crate) async fn try_refresh_before_swap(&self, data: DataId, owner: &Owner, version: &Bytes) -> Result<Bytes, KvError> {
        self.store_intent(data, owner, Some(version.clone()), Durability::Lazy, true).await
    }

    async fn refresh_with(&self, data: DataId, owner: &Owner, version: &Bytes, durability: Durability, swapping: bool) -> S3Result<Bytes> {
        self.store_intent(data, owner, Some(version.clone()), durability, swapping).await.map_err(|e| self.refresh_error(e))
    }

    /// A refresh that failed: a changed intent is the sweeper's (the upload stalled).
    pub(crate) fn refresh_error(&self, e: KvError) -> s3s::S3Error {
        match e {
            KvError::Mismatch => s3_error!(InternalError, "the upload stalled longer than the sweep grace ({:?}) and its data was collected", self.grace),
            e => e.into(),
        }
    }

    /// Refreshes the intents of the data a write will reference, a few at a time, each by
    /// compare-and-swap on the version `own` holds (`swapping`: just before the swap); their
    /// new versions, in `own`'s order.
    pub(crate) async fn refresh_own(&self, own: &[Own], durability: Durability, swapping: bool) -> Vec<Result<Bytes, KvError>> {
        let intents: Vec<(DataId, Owner, Bytes)> = own.iter().map(|o| (o.data, o.owner.clone(), o.intent.clone())).collect();
        futures_util::stream::iter(intents)
            .map(|(d, o, v)| async move { self.store_intent(d, &o, Some(v), durability, swapping).await })
            .buffered(RELEASES_AT_ONCE)
            .collect()
            .await
    }

    /// Waits for the turn of the object stored under `object` at its swap (`Turns`), refreshing
    /// the intents of the data the write will reference every quarter grace meanwhile, as an
    /// upload does while it streams: a write queued behind others is not taken for a stalled
    /// one. The wait keeps its place in the queue while it refreshes.
    pub(crate) async fn turn_for(&self, object: &[u8], own: &mut [Own]) -> S3Result<tokio::sync::MutexGuard<'_, ()>> {
        let take = self.turns.take(object);
        tokio::pin!(take);
        loop {
            tokio::select! {
                turn = &mut take => return Ok(turn),
                () = tokio::time::sleep(self.grace / 4) => {
                    let refreshed = self.refresh_own(own, Durability::Through, false).await;
                    for (o, v) in own.iter_mut().zip(refreshed) {
                        o.intent = v.map_err(|e| match e {
                            // Nothing of the write was swapped in yet: its outcome is known.
                            KvError::Contended(_) => s3_error!(ServiceUnavailable, "the write's data could not be kept while it waited for its turn; nothing was changed, send it again"),
                            e => self.refresh_error(e),
                        })?;
                    }
                }
            }
        }
    }

    /// Marks data that may have lost its last reference: the sweeper checks it after the grace.
    /// A mark that raced another write of the intent (most often another writer releasing the
    /// same replaced data) is made again: one mark over another changes nothing.
    pub async fn release(&self, data: DataId, owner: &Owner) -> S3Result<()> {
        let core: &Core = self;
        // Released before the swap that replaces the data's record, which may then stand on
        // some replicas only: the sweeper settles the object first.
        let mark = move || core.store_intent(data, owner, None, Durability::Through, true);
        swap::past_duels(RELEASE_ATTEMPTS, || core.draw(), mark).await?;
        Ok(())
    }

    /// `release` of many data ids, a few at a time (a multipart object has up to 10,000).
    pub async fn release_all(&self, data: Vec<DataId>, owner: &Owner) -> S3Result<()> {
        let mut marks = futures_util::stream::iter(data).map(|d| async move { self.release(d, owner).await }).buffer_unordered(RELEASES_AT_ONCE);
        while let Some(r) = marks.next().await {
            r?;
        }
        Ok(())
    }
}
