//! A manifest swap whose outcome a race left unknown (`KvError::Contended`: some replicas took
//! it), settled by reading the object again (`Core::commit`).

use s3s::S3Result;

use crate::kv::{KvError, Stored};
use crate::layout;
use crate::objects::{Core, Own};
use crate::swap::{Raced, Settled};
use crate::records::{self, Intent, Manifest, Versioning};
use crate::versions::order_key;

impl Core {
    /// What `current`, the object read after a swap raced, says of it:
    /// - one of ours there (or ours with its tags or ACL rewritten since), it took effect;
    /// - the version it was made on still there, it is tried again;
    /// - another write there that replaced one of ours, ours took effect first;
    /// - another write there that replaced the version ours was made on (or that version with
    ///   its tags or ACL rewritten), ours never took effect (the store decided the other swap
    ///   on that version), and the write starts over above it, its condition checked again;
    /// - in a versioned bucket, where a write that replaced ours kept it as a version first:
    ///   kept, it took effect; not kept, it never did;
    /// - otherwise (a delete there, or more than one write since) the manifests do not tell
    ///   (`replaced_since` then asks the data's intents).
    ///
    /// Answering an unconditional write as done "just before the other" would be wrong: the
    /// other may be a conditional write on the version ours was made on.
    pub(crate) async fn settle_race(&self, bucket: &str, key: &str, raced: &Raced, current: Option<&Stored>, versioning: Option<Versioning>) -> S3Result<Settled> {
        if let Some(i) = raced.tried.iter().position(|(_, value)| current.is_some_and(|s| s.value == value)) {
            return Ok(Settled::Took(i));
        }
        if current.map(|s| &s.version) == raced.based.as_ref() {
            return Ok(Settled::TryAgain);
        }
        let now = current.map(|s| records::decode_manifest(&s.value)).transpose()?;
        let ours = |id: Option<u64>| id.and_then(|id| raced.tried.iter().position(|(m, _)| m.swap_id == Some(id)));
        if let Some(now) = &now {
            if let Some(i) = ours(now.swap_id).or_else(|| ours(now.replaces)) {
                return Ok(Settled::Took(i));
            }
            // The version ours was made on replaced by another write, or rewritten in place.
            if raced.based_id.is_some() && (now.replaces == raced.based_id || now.swap_id == raced.based_id) {
                return Ok(Settled::StartOver);
            }
        }
        if raced.tried.first().is_some_and(|(m, _)| Core::keeps(m, versioning)) {
            for (i, (m, _)) in raced.tried.iter().enumerate() {
                if self.kept_as_version(bucket, key, m).await? {
                    return Ok(Settled::Took(i));
                }
            }
            return Ok(Settled::StartOver);
        }
        Ok(Settled::Unknown)
    }

    /// Whether a raced swap that is not current took effect and was replaced since, told by
    /// the intents of the data it references (`own`): a write that replaces an object it does
    /// not keep as a version releases its data before its own swap, so an intent unchanged
    /// says nobody replaced ours, and ours, not current, never took effect (`Some(false)`,
    /// the intents refreshed); one changed but still live says a replacer released it
    /// (`Some(true)`). One doomed or gone: the sweeper took the data while the write
    /// stalled. `None`: no data to ask, or an intent raced another write of it.
    pub(crate) async fn replaced_since(&self, own: &mut [Own]) -> S3Result<Option<bool>> {
        if own.is_empty() {
            return Ok(None);
        }
        for o in own.iter_mut() {
            match self.try_refresh_before_swap(o.data, &o.owner, &o.intent).await {
                Ok(v) => o.intent = v,
                Err(KvError::Mismatch) => {
                    return match self.kv.get(&layout::intent(o.data)).await? {
                        Some(s) if !records::decode::<Intent>("intent", &s.value)?.doomed => Ok(Some(true)),
                        _ => Err(self.refresh_error(KvError::Mismatch)),
                    };
                }
                Err(KvError::Contended(_)) => return Ok(None),
                Err(e) => return Err(e.into()),
            }
        }
        Ok(Some(false))
    }

    /// Whether `m`, a manifest with a version id of its own, is kept among the versions of
    /// `bucket/key` (a write that replaced it kept it before its swap).
    async fn kept_as_version(&self, bucket: &str, key: &str, m: &Manifest) -> S3Result<bool> {
        Ok(self.kv.get(&layout::version(bucket, key, &order_key(m))).await?.is_some())
    }
}
