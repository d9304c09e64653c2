//! The sweeper's work on multipart uploads, beside its collection of unreferenced data
//! (`Core::sweep`): completions that crashed after taking their upload are finished, and part
//! records whose upload is gone are deleted.

use std::collections::BTreeSet;

use s3s::S3Result;

use super::finish::{finish_stale_completions, upload_parts_of};
use crate::kv::{Cond, Durability, Pages};
use crate::layout::{self, UploadId};
use crate::objects::{Core, PAGE};

/// The most uploads one pass judges for orphaned parts: the rest wait for the next pass, so
/// that a pass's memory is bounded whatever the store holds.
const MOST_UPLOADS_JUDGED: usize = 100_000;

/// What one pass did to uploads: completions finished, orphaned part records deleted.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tidied {
    pub completions: u64,
    pub orphans: u64,
}

/// One pass over the uploads (run by every sweeper after its pass over the intents).
pub async fn tidy_uploads(core: &Core) -> S3Result<Tidied> {
    let completions = finish_stale_completions(core).await?;
    let orphans = delete_orphaned_parts(core).await?;
    Ok(Tidied { completions, orphans })
}

/// Deletes the part records of uploads that no longer exist: left by a crash between an
/// upload record's deletion and its parts' (an abort's, a stale completion's), or by a part
/// stored while its upload ended. Their data was released before (an intent the sweeper
/// collects unless an object references it): only the records are left, and they would
/// otherwise stay for good. The parts are listed before the uploads: a part is written after
/// its upload record, and an upload id is never used again, so an upload missing from the
/// later listing has ended for good. Returns the records deleted.
async fn delete_orphaned_parts(core: &Core) -> S3Result<u64> {
    let mut with_parts: BTreeSet<UploadId> = BTreeSet::new();
    let mut parts = Pages::new(layout::all_parts(), PAGE);
    'listing: while let Some(keys) = parts.next(&core.kv).await? {
        for k in &keys {
            if let Some(id) = layout::part_upload(k) {
                if with_parts.len() >= MOST_UPLOADS_JUDGED && !with_parts.contains(&id) {
                    break 'listing;
                }
                with_parts.insert(id);
            }
        }
    }
    if with_parts.is_empty() {
        return Ok(0);
    }
    let mut uploads = Pages::new(layout::uploads(), PAGE);
    while let Some(keys) = uploads.next(&core.kv).await? {
        for k in &keys {
            if let Some((_, _, id)) = upload_parts_of(k) {
                with_parts.remove(&id);
            }
        }
    }
    let mut deleted = 0;
    for id in with_parts {
        let mut records = Pages::new(layout::parts(id, 0, u32::MAX), PAGE);
        while let Some(keys) = records.next(&core.kv).await? {
            for k in &keys {
                match core.kv.delete(k, Cond::Any, Durability::Through).await {
                    Ok(true) => deleted += 1,
                    Ok(false) => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
    }
    if deleted > 0 {
        tracing::info!(records = deleted, "sweep: part records of ended uploads deleted");
    }
    Ok(deleted)
}
