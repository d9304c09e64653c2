//! Deleting an object: its data released (or kept as a version) and its record deleted by
//! compare-and-swap, a delete whose outcome a race left unknown settled by reading the object
//! again (`Core::settle_removal`, for unversioned and versioned buckets alike).

use bytes::Bytes;
use s3s::{s3_error, S3Result};

use crate::kv::{Cond, Durability, KvError, Stored};
use crate::layout;
use crate::objects::{Core, COMMIT_ATTEMPTS};
use crate::records::{self, Manifest, Owner};
use crate::swap::Duels;

impl Core {
    /// Deletes the object `bucket/key` if `check` accepts it; its data is released. `None`
    /// when there was no object. A delete that raced another write is settled by reading the
    /// object again (`Core::settle_removal`).
    pub async fn remove(&self, bucket: &str, key: &str, check: impl Fn(Option<&Manifest>) -> S3Result<()>, conditional: bool) -> S3Result<Option<Manifest>> {
        let object = layout::object(bucket, key);
        let owner = Owner { bucket: bucket.to_owned(), key: key.to_owned(), part: None };
        // Once a delete raced: the version it was made on, and that version's manifest.
        let mut raced: Option<(Bytes, Manifest)> = None;
        let _turn = self.turns.take(&object).await;
        let mut duels = Duels::default();
        for _ in 0..COMMIT_ATTEMPTS {
            self.back_off(&mut duels).await;
            let current = self.kv.get(&object).await?;
            if let Some((based, removed)) = &raced {
                if current.as_ref().map(|s| &s.version) != Some(based) {
                    if Core::settle_removal(current.as_ref(), removed.swap_id, conditional)? {
                        return Ok(raced.map(|(_, removed)| removed));
                    }
                    raced = None;
                }
            }
            let Some(current) = current else {
                check(None)?;
                return Ok(None);
            };
            let old = records::decode_manifest(&current.value)?;
            check(Some(&old))?;
            self.release_all(old.segments.iter().map(|s| s.data).collect(), &owner).await?;
            match self.kv.delete(&object, Cond::Version(current.version.clone()), Durability::Through).await {
                Ok(_) => return Ok(Some(old)),
                Err(KvError::Mismatch) => continue,
                Err(KvError::Contended(_)) => {
                    duels.dueled();
                    raced = Some((current.version, old));
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(s3_error!(SlowDown, "the object was replaced {COMMIT_ATTEMPTS} times while this delete tried to remove it"))
    }

    /// A delete that raced, the object read again and no longer the version the delete was
    /// made on (whose `Manifest::swap_id` is `based_id`): `true`, it is answered as done; `false`,
    /// it never took effect, the write now there having replaced that version, and the delete
    /// goes on against that write (its condition checked again).
    /// - Nothing there: ours, or another delete with an unconditional one of ours a moment
    ///   after it (a delete of nothing changes nothing).
    /// - The version ours was made on there, its tags or ACL rewritten: ours never took effect.
    /// - A write there made on nothing, after the version ours was made on: there was no
    ///   object just before it, and an unconditional delete fits there.
    /// - Otherwise nothing tells, nor for a conditional delete whose condition may not have
    ///   held where it would fit: 503.
    pub(crate) fn settle_removal(current: Option<&Stored>, based_id: Option<u64>, conditional: bool) -> S3Result<bool> {
        let unknown = || s3_error!(ServiceUnavailable, "the delete raced another write and whether it took effect cannot be known; read the object");
        let Some(current) = current else { return if conditional { Err(unknown()) } else { Ok(true) } };
        let now = records::decode_manifest(&current.value)?;
        if based_id.is_some() && (now.replaces == based_id || now.swap_id == based_id) {
            return Ok(false);
        }
        if based_id.is_some() && now.swap_id.is_some() && now.replaces.is_none() && !conditional {
            return Ok(true);
        }
        Err(unknown())
    }
}
