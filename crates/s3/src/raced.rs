//! A manifest swap whose outcome a race left unknown (`KvError::Contended`: some replicas took
//! it), settled by reading the object again (`Core::commit`).

use s3s::{s3_error, S3Result};

use crate::kv::Stored;
use crate::layout;
use crate::objects::{Core, Raced, Settled};
use crate::records::{Manifest, Versioning};
use crate::versions::order_key;

impl Core {
    /// What `current`, the object read after a swap raced, says of it: one of ours there, it
    /// took effect; the version it was made on still there, it is tried again; another write
    /// there, ours never will be chosen. Then a conditional write cannot say whether its
    /// condition held and answers 503. An unconditional one took effect just before that write,
    /// or did and was replaced by it; no reader can tell the two apart unless the write that
    /// replaced it kept it as a version: where ours would have been kept and was not, it never
    /// took effect, and the write starts over above the one now there.
    pub(crate) async fn settle_race(&self, bucket: &str, key: &str, raced: &Raced, current: Option<&Stored>, conditional: bool, versioning: Option<Versioning>) -> S3Result<Settled> {
        if let Some(i) = raced.tried.iter().position(|(_, value)| current.is_some_and(|s| s.value == value)) {
            return Ok(Settled::Took(i));
        }
        if current.map(|s| &s.version) == raced.based.as_ref() {
            return Ok(Settled::TryAgain);
        }
        if conditional {
            return Err(s3_error!(ServiceUnavailable, "the write raced another and its condition cannot be known to have held; read the object"));
        }
        let Some(((last, _), i)) = raced.tried.last().zip(raced.tried.len().checked_sub(1)) else { return Ok(Settled::StartOver) };
        if !Core::keeps(last, versioning) {
            return Ok(Settled::Took(i));
        }
        for (i, (ours, _)) in raced.tried.iter().enumerate() {
            if self.kept_as_version(bucket, key, ours).await? {
                return Ok(Settled::Took(i));
            }
        }
        Ok(Settled::StartOver)
    }

    /// Whether `m`, a manifest with a version id of its own, is kept among the versions of
    /// `bucket/key` (a write that replaced it kept it before its swap).
    async fn kept_as_version(&self, bucket: &str, key: &str, m: &Manifest) -> S3Result<bool> {
        Ok(self.kv.get(&layout::version(bucket, key, &order_key(m))).await?.is_some())
    }
}
