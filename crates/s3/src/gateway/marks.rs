//! The completing mark on an upload record, taken, given back and cleared by compare-and-swap.
//! In a cluster such a write can race a reader settling the record (`KvError::Contended`: some
//! replicas took it, and it may yet stand); the record read again says whose mark is there,
//! by the token each completion draws (`Completing::by`).

use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::Bytes;
use s3s::{s3_error, S3Result};

use super::lookup::Gateway;
use super::waiting::{Left, Waiting};
use crate::kv::{Cond, Durability, KvError};
use crate::objects::Core;
use crate::records::{self, UploadRecord};

/// Times a write of the record that raced is made again on the record read back.
const MARK_ATTEMPTS: usize = 4;
/// How often a mark a failed completion may have left is looked for, to be given back: a
/// tenth of the grace, at most this.
const LOOK_FOR_LEFT_MARK: Duration = Duration::from_secs(1);
/// The most such marks a gateway looks for at once, a task each; more are left to the grace
/// (the stale-completion cleanup).
const MOST_MARKS_LOOKED_FOR: usize = 256;

/// A completion's mark on its upload, kept fresh for as long as the completion's claims and
/// commit take (waiting for the object's turn among them): the record written again every
/// quarter grace with the mark stamped now, by compare-and-swap on the version the completion
/// holds (one its own raced write left is taken up, as the token says). Otherwise the
/// stale-completion cleanup, an abort or a completion sent again would take a long completion
/// for a crashed one once the grace passed.
pub(super) struct MarkKeeper<'a> {
    gateway: &'a Gateway,
    key: &'a [u8],
    record: &'a UploadRecord,
    version: parking_lot::Mutex<Bytes>,
}

impl<'a> MarkKeeper<'a> {
    /// `record`, bearing the completion's mark, stored under `key` at `version`.
    pub(super) fn new(gateway: &'a Gateway, key: &'a [u8], record: &'a UploadRecord, version: Bytes) -> Self {
        MarkKeeper { gateway, key, record, version: parking_lot::Mutex::new(version) }
    }

    /// The version of the record the mark was last written with. A refresh whose write raced
    /// and failed may have written it since: what gives the mark back or clears it reads the
    /// record again for the token when the version does not match (`settle_record`).
    pub(super) fn version(&self) -> Bytes {
        self.version.lock().clone()
    }

    /// Runs `work`, refreshing the mark meanwhile (the first time as soon as the mark is a
    /// quarter grace old: a completion may take up its own mark from an earlier attempt). A
    /// refresh that fails is tried again at the next tick, unless the upload was taken from the
    /// completion, which then fails on its own (whoever took it released the data it claimed).
    pub(super) async fn alongside<T>(&self, work: impl std::future::Future<Output = T>) -> T {
        let every = self.gateway.core.grace / 4;
        let age = self.record.completing.as_ref().map_or(0, |c| records::now_ms().saturating_sub(c.at_ms));
        // Told to stop when the work is done, the refreshing finishes a write under way rather
        // than drop it: a round cut short is left for the next reader of the record to settle.
        let stop = tokio::sync::Notify::new();
        let refreshing = async {
            let mut wait = every.saturating_sub(Duration::from_millis(age));
            loop {
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    () = stop.notified() => return,
                }
                wait = every;
                match self.refresh().await {
                    Ok(()) => {}
                    // The work fails on its own.
                    Err(e) if *e.code() == s3s::S3ErrorCode::NoSuchUpload => {
                        tracing::info!(error = %e, "a completion's mark was taken from it");
                        return;
                    }
                    Err(e) => tracing::info!(error = %e, "a completion's mark could not be refreshed; tried again later"),
                }
            }
        };
        let working = async {
            let done = work.await;
            stop.notify_one();
            done
        };
        tokio::join!(working, refreshing).0
    }

    async fn refresh(&self) -> S3Result<()> {
        let by = mark_of(self.record);
        let mut fresh = self.record.clone();
        let mut version = self.version();
        for _ in 0..MARK_ATTEMPTS {
            if let Some(c) = fresh.completing.as_mut() {
                c.at_ms = records::now_ms();
            }
            match self.gateway.core.kv.put(self.key, records::encode(&fresh), Cond::Version(version.clone()), Durability::Through).await {
                Ok(v) => {
                    *self.version.lock() = v;
                    return Ok(());
                }
                Err(KvError::Contended(_) | KvError::Mismatch) => {}
                Err(e) => return Err(e.into()),
            }
            match self.gateway.core.kv.get(self.key).await? {
                Some(s) if bears(&s.value, by) => version = s.version,
                _ => return Err(s3_error!(NoSuchUpload, "the upload was taken from this completion (aborted, or completed by another)")),
            }
        }
        Err(s3_error!(SlowDown, "the upload record kept changing under this completion"))
    }
}

/// The token of the mark on `record`, if any.
pub(super) fn mark_of(record: &UploadRecord) -> Option<u64> {
    record.completing.as_ref().map(|c| c.by)
}

/// Whether the stored upload record `value` decodes and bears the mark `by` (`None`: no mark).
fn bears(value: &[u8], by: Option<u64>) -> bool {
    records::decode::<UploadRecord>("upload", value).ok().as_ref().is_some_and(|r| mark_of(r) == by)
}

/// The room for the tasks that look for marks failed completions may have left
/// (`Core::marks_looked_for`).
pub fn room_for_left_marks() -> Arc<tokio::sync::Semaphore> {
    Arc::new(tokio::sync::Semaphore::new(MOST_MARKS_LOOKED_FOR))
}

impl Gateway {
    /// Writes `record`, which carries this completion's mark, over the record at `version`
    /// (`before`, without it): its new version, or `None` when the record changed since. A
    /// write a race left unknown is settled from every replica (chosen now or never), and the
    /// record read says whether the mark there is ours: a mark that could stand later would
    /// hold the upload until the grace, and then the stale-completion cleanup would abort it.
    /// One whose outcome stays unknown is noted in `waiting`, for the completion to give back
    /// if it fails.
    pub(super) async fn put_mark(&self, key: &[u8], record: &UploadRecord, before: &UploadRecord, version: Bytes, waiting: &Waiting) -> S3Result<Option<Bytes>> {
        match self.core.kv.put(key, records::encode(record), Cond::Version(version), Durability::Through).await {
            Ok(v) => {
                waiting.holds_upload();
                Ok(Some(v))
            }
            Err(KvError::Mismatch) => Ok(None),
            // Unsettled (a replica did not answer), `None` too: the next reading of the record
            // finds the mark if it stood, and the completion takes it or gives it back.
            Err(KvError::Contended(_)) => {
                if let Err(e) = self.core.kv.settle(key).await {
                    tracing::info!(error = %e, "a raced mark could not be settled");
                    waiting.may_have_left(key, before);
                    return Ok(None);
                }
                Ok(match self.core.kv.get(key).await {
                    Ok(Some(s)) if bears(&s.value, mark_of(record)) => {
                        waiting.holds_upload();
                        Some(s.version)
                    }
                    // Settled: the mark did not stand, and never will.
                    Ok(_) => None,
                    Err(_) => {
                        waiting.may_have_left(key, before);
                        None
                    }
                })
            }
            // No quorum, or a drive without room: some replicas may have taken the mark.
            Err(e) => {
                waiting.may_have_left(key, before);
                Err(e.into())
            }
        }
    }

    /// Gives the upload back: `record` (without the mark `by`) written over ours at
    /// `version`. Best effort: another write of the record since wins, and a mark left
    /// behind is a completion that crashed (taken over, or cleaned up, after the grace).
    /// One that does not get through is noted in `waiting`, as `put_mark` notes one.
    pub(super) async fn give_back(&self, key: &[u8], record: &UploadRecord, waiting: &Waiting, version: Bytes) {
        if !self.write_over_mark(key, record, waiting.by, version).await {
            waiting.may_have_left(key, record);
        }
    }

    /// `record` written over the mark `by` at `version`, by `settle_record`.
    async fn write_over_mark(&self, key: &[u8], record: &UploadRecord, by: u64, version: Bytes) -> bool {
        let value = records::encode(record);
        let write = |v: Bytes| self.core.kv.put(key, value.clone(), Cond::Version(v), Durability::Through);
        self.settle_record(key, Some(by), version, write).await
    }

    /// Gives back, once the record can be settled, the mark a completion that failed may have
    /// left standing (`by` its token): looked for every tenth of the grace for a grace, by a
    /// task of its own (at most `MOST_MARKS_LOOKED_FOR` at once; past that, or past the grace,
    /// the mark is the stale-completion cleanup's). Without it such a mark, chosen by a later
    /// read, holds the upload for the grace: completions sent again wait for it and answer
    /// SlowDown, and then the cleanup aborts the upload.
    pub(super) fn give_back_later(&self, left: Left, by: u64) {
        let Ok(permit) = self.core.marks_looked_for.clone().try_acquire_owned() else {
            tracing::warn!("too many completions' marks looked for at once; this one is left to the grace");
            return;
        };
        // The task lasts no longer than the gateway: it holds the core only while it looks.
        let core = Arc::downgrade(&self.core);
        tokio::spawn(async move {
            let _permit = permit;
            give_back_when_settled(core, left, by).await;
        });
    }
}

/// `give_back_later`'s task. A read of a quorum that finds the mark has made it stand (the
/// read settles what it returns), so the mark is given back then, even with a replica down;
/// that the mark never stood is known only from a read after a settle that every replica
/// answered.
async fn give_back_when_settled(core: Weak<Core>, Left { key, record }: Left, by: u64) {
    let Some(grace) = core.upgrade().map(|c| c.grace) else { return };
    let every = LOOK_FOR_LEFT_MARK.min(grace / 10);
    let until = tokio::time::Instant::now() + grace;
    let mut settled = false;
    loop {
        tokio::time::sleep(every).await;
        let Some(core) = core.upgrade() else { return };
        let gateway = Gateway { core };
        match gateway.core.kv.get(&key).await {
            Ok(Some(s)) if bears(&s.value, Some(by)) => {
                if gateway.write_over_mark(&key, &record, by, s.version).await {
                    tracing::info!("a failed completion's mark, left standing, was given back");
                    return;
                }
            }
            // Not there once every replica answered: it never stood, or the record moved on.
            Ok(_) if settled => return,
            Ok(_) => settled = gateway.core.kv.settle(&key).await.is_ok(),
            Err(_) => {}
        }
        if tokio::time::Instant::now() >= until {
            tracing::warn!("a failed completion's mark could not be looked for within the grace; the stale-completion cleanup takes it");
            return;
        }
    }
}

impl Gateway {
    /// Deletes the upload record, still at `version` with the mark `by` (a completion that
    /// took the upload since keeps it).
    pub(super) async fn clear_mark(&self, key: &[u8], by: Option<u64>, version: Bytes) {
        let delete = |v: Bytes| async move { self.core.kv.delete(key, Cond::Version(v), Durability::Through).await.map(|_| Bytes::new()) };
        // One left is the stale-completion cleanup's after the grace: the object is made.
        let _ = self.settle_record(key, by, version, delete).await;
    }

    /// `write` made on the record at `version` until it is done, the record no longer bears
    /// the mark `by`, or the attempts run out. Whether it ended so (`false`: the mark may still
    /// stand, the store failing or the write racing throughout).
    async fn settle_record<F, Fut>(&self, key: &[u8], by: Option<u64>, mut version: Bytes, write: F) -> bool
    where
        F: Fn(Bytes) -> Fut,
        Fut: std::future::Future<Output = Result<Bytes, KvError>>,
    {
        for _ in 0..MARK_ATTEMPTS {
            match write(version.clone()).await {
                // Raced, or the record written since: read again for the mark.
                Err(KvError::Contended(_) | KvError::Mismatch) => {}
                Ok(_) => return true,
                Err(e) => {
                    tracing::warn!(error = %e, "an upload record's write failed; its mark may stand");
                    return false;
                }
            }
            match self.core.kv.get(key).await {
                Ok(Some(s)) if bears(&s.value, by) => version = s.version,
                Ok(_) => return true,
                Err(e) => {
                    tracing::warn!(error = %e, "an upload record raced and could not be read again");
                    return false;
                }
            }
        }
        tracing::warn!("an upload record's write kept racing; its mark may stand");
        false
    }
}
