//! A completion that finds its upload being completed by another (a client sending its
//! CompleteMultipartUpload again when the first timed out, as SDKs do) waits for that one
//! rather than join it: two completions of one upload could each swap a manifest in, two
//! objects, or two versions, on the same data, and deleting one would take the other's bytes.
//! It answers as the other ended: the object it made, or the upload given back to take.

use std::time::Duration;

use bytes::Bytes;
use s3s::{s3_error, S3ErrorCode, S3Result};

use super::lookup::Gateway;
use crate::layout::{self, UploadId};
use crate::records::{Manifest, UploadRecord};

/// How long a completion waits for another completion of its upload, over all its attempts,
/// and how often it reads the upload record: well inside the minute an SDK waits for an
/// answer by default.
const WAIT_FOR_COMPLETION: Duration = Duration::from_secs(20);
const LOOK_EVERY: Duration = Duration::from_millis(200);
/// Every this many looks the object is read too (a completion whose gateway died after its
/// swap leaves its mark): reads of a record being written can race its writer's swap.
const OBJECT_EVERY_LOOKS: u32 = 10;

/// A mark a completion that failed may have left standing (a write of it whose outcome is
/// unknown, or a give-back that did not get through), and the record to write over it if it
/// does: the one it was made on, or the one a give-back was writing (`Gateway::put_mark`,
/// `give_back_later`).
pub(super) struct Left {
    pub(super) key: Bytes,
    pub(super) record: UploadRecord,
}

/// One completion's waiting: its token, its deadline, and a mark it may have left.
pub(super) struct Waiting {
    pub(super) by: u64,
    until: tokio::time::Instant,
    left: std::sync::Mutex<Option<Left>>,
}

impl Waiting {
    pub(super) fn new(by: u64) -> Waiting {
        Waiting { by, until: tokio::time::Instant::now() + WAIT_FOR_COMPLETION, left: std::sync::Mutex::new(None) }
    }

    /// Notes that this completion may have left its mark standing on the record at `key`,
    /// and the record to write over it if so.
    pub(super) fn may_have_left(&self, key: &[u8], record: &UploadRecord) {
        *self.left.lock().unwrap_or_else(|e| e.into_inner()) = Some(Left { key: Bytes::copy_from_slice(key), record: record.clone() });
    }

    /// Notes that the upload is this completion's own now: no mark of it is left elsewhere.
    pub(super) fn holds_upload(&self) {
        *self.left.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    pub(super) fn take_left(&self) -> Option<Left> {
        self.left.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

pub(super) enum Taken {
    /// The upload, no completion under way (or one stalled past the grace, taken over): its
    /// id, record and the record's store version.
    Free((UploadId, UploadRecord, Bytes)),
    /// The upload was completed into this object.
    Completed(Manifest),
}

impl Gateway {
    /// Upload `upload_id` of `bucket/key` for a completion of the parts `wanted`, once no other
    /// completion of it is under way; the object a completion made of it, if one did and the
    /// object is still that upload's. Another completion of other parts under way refuses
    /// this one; one of the same parts still under way at the end of `waiting` answers
    /// SlowDown (send it again).
    pub(super) async fn upload_to_complete(&self, bucket: &str, key: &str, upload_id: &str, wanted: &[(u32, String)], waiting: &Waiting) -> S3Result<Taken> {
        let mut looks = 0;
        loop {
            let (id, record, version) = match self.upload(bucket, key, upload_id).await {
                Ok(upload) => upload,
                Err(e) if *e.code() == S3ErrorCode::NoSuchUpload => return self.completed_already(bucket, key, upload_id).await.map(Taken::Completed).ok_or(e),
                Err(e) => return Err(e),
            };
            let under_way = record.completing.as_ref().filter(|c| c.younger_than(self.core.grace));
            // No mark, one stalled past the grace, or this completion's own (its write of the
            // mark raced a reader and stood after all).
            let Some(other) = under_way.filter(|c| c.by != waiting.by) else { return Ok(Taken::Free((id, record, version))) };
            if other.parts != wanted {
                return Err(s3_error!(InvalidRequest, "another completion of this upload, with other parts, is under way"));
            }
            let last = tokio::time::Instant::now() >= waiting.until;
            if looks % OBJECT_EVERY_LOOKS == 0 || last {
                if let Some(m) = self.manifest(bucket, key).await?.filter(|m| m.completed_from == Some(id)) {
                    return Ok(Taken::Completed(m));
                }
            }
            if last {
                return Err(s3_error!(SlowDown, "another completion of this upload is under way; send the completion again later"));
            }
            looks += 1;
            tokio::time::sleep(LOOK_EVERY).await;
        }
    }

    /// A completion of an upload that is gone: the object this upload was completed into, if
    /// it is still there (current, or a kept version), as S3 answers a client that sends again
    /// a completion whose answer it lost; `None` otherwise.
    async fn completed_already(&self, bucket: &str, key: &str, upload_id: &str) -> Option<Manifest> {
        let id = layout::parse_upload_id(upload_id)?;
        match self.manifest(bucket, key).await.ok()? {
            Some(m) if m.completed_from == Some(id) => Some(m),
            _ => self.core.kept_from_upload(bucket, key, id).await.ok()?,
        }
    }
}
