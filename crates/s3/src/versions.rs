//! Object versions over the store (docs/design/s3-versioning.md). The current version of a
//! key is its manifest record (`layout::object`), as in an unversioned bucket, so reads and
//! listings of current objects cost what they always did. Every other version, and every
//! delete marker, is a manifest kept under `layout::version`, ordered newest first by its
//! order key. A key whose newest version is a delete marker has no current record: listings
//! of objects skip it without reading anything.
//!
//! Crash safety rests on one order: a version is kept before the record it replaces is
//! changed, and a kept version is taken away only after it became current again. A crash
//! between the two leaves a kept copy of the current version (same version id), which
//! readers ignore and the next write overwrites with itself.

use bytes::Bytes;
use s3s::{s3_error, S3Result};

use crate::kv::{Cond, Durability, KvError, Pages};
use crate::layout::{self, UploadId};
use crate::objects::{Core, PAGE};
use crate::records::{self, Manifest, Owner, Versioning, NULL_VERSION};
use crate::swap::Duels;

/// Attempts to remove a version while other writers keep changing the key.
const REMOVE_ATTEMPTS: usize = 32;

/// A new version id for a version made at `ms`: its first 16 hex digits sort newer versions
/// first, the rest (`draw`, random) keeps two gateways' ids apart.
pub fn new_id(ms: u64, draw: u64) -> String {
    format!("{:016x}{:016x}", u64::MAX - ms, draw)
}

/// Where a version is kept among its key's versions: its id, or for the null version the
/// same time prefix followed by "null".
pub fn order_key(m: &Manifest) -> String {
    match &m.version {
        Some(id) => id.clone(),
        None => format!("{:016x}{NULL_VERSION}", u64::MAX - m.modified_ms),
    }
}

/// Whether `id` is a version id this store could have made: "null" or 32 hex digits.
pub fn valid_id(id: &str) -> bool {
    id == NULL_VERSION || (id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()))
}

/// What a key with no current record shows (`Core::after_miss`).
pub enum Missing {
    Marker(Manifest),
    Current(Manifest),
    Nothing,
}

/// A kept version as stored: its record key, store version and manifest.
pub struct Kept {
    pub key: Bytes,
    pub stored: Bytes,
    pub manifest: Manifest,
}

/// The time of a version from its order key (its first 16 hex digits).
fn time_of(order: &str) -> Option<u64> {
    Some(u64::MAX - u64::from_str_radix(order.get(..16)?, 16).ok()?)
}

impl Core {
    /// Prepares `manifest` to become the newest version of its key under `versioning`: its
    /// time after `newest` (the newest version's time, current or kept), so versions sort by
    /// the order they were made even when two share a millisecond or clocks disagree, and,
    /// when versioning is enabled, a new version id (`draw` its random part: `Core::draw`).
    pub fn stamp(manifest: &Manifest, newest: Option<u64>, versioning: Option<Versioning>, draw: u64) -> Manifest {
        let mut m = manifest.clone();
        if versioning.is_some() {
            m.modified_ms = newest.map_or(m.modified_ms, |n| m.modified_ms.max(n.saturating_add(1)));
            m.version = (versioning == Some(Versioning::Enabled)).then(|| new_id(m.modified_ms, draw));
        }
        m
    }

    /// The newest version's time under `versioning` (none for an unversioned bucket): the
    /// current one's, or a kept one's if newer (a delete marker whose delete was cut short),
    /// read off the kept record's key.
    pub async fn newest_time(&self, bucket: &str, key: &str, current: Option<&Manifest>, versioning: Option<Versioning>) -> S3Result<Option<u64>> {
        if versioning.is_none() {
            return Ok(None);
        }
        let (start, end) = layout::versions_of(bucket, key);
        let prefix = layout::version_prefix(bucket);
        let kept = self.kv.range(&start, &end, 1).await?.first().and_then(|k| layout::version_of(&prefix, k).and_then(|(_, order)| time_of(order)));
        Ok(current.map(|m| m.modified_ms).max(kept))
    }

    /// Whether a write under `versioning` keeps the version `old` it replaces (or releases
    /// its data): every version is kept but a null one replaced while suspended, and nothing
    /// is kept in a bucket never versioned.
    pub fn keeps(old: &Manifest, versioning: Option<Versioning>) -> bool {
        match versioning {
            None => false,
            Some(Versioning::Enabled) => true,
            Some(Versioning::Suspended) => old.version.is_some(),
        }
    }

    /// Keeps `m` among the versions of `bucket/key` (idempotent: the record's key is the
    /// version's own).
    pub async fn keep(&self, bucket: &str, key: &str, m: &Manifest) -> S3Result<()> {
        self.kv.put(&layout::version(bucket, key, &order_key(m)), records::encode(m), Cond::Any, Durability::Through).await?;
        Ok(())
    }

    /// The kept versions of `bucket/key`, newest first.
    pub async fn kept(&self, bucket: &str, key: &str) -> S3Result<Vec<Kept>> {
        let mut pages = Pages::new(layout::versions_of(bucket, key), PAGE);
        let mut out = Vec::new();
        while let Some(keys) = pages.next(&self.kv).await? {
            for k in keys {
                if let Some(s) = self.kv.get(&k).await? {
                    out.push(Kept { key: k, manifest: records::decode_manifest(&s.value)?, stored: s.version });
                }
            }
        }
        Ok(out)
    }

    /// The kept version of `bucket/key` completed from upload `upload`, if any (the first
    /// found: a completion makes one object of an upload).
    pub async fn kept_from_upload(&self, bucket: &str, key: &str, upload: UploadId) -> S3Result<Option<Manifest>> {
        let mut pages = Pages::new(layout::versions_of(bucket, key), PAGE);
        while let Some(keys) = pages.next(&self.kv).await? {
            for k in keys {
                // A version that does not decode is not this upload's answer (reads of it say why).
                if let Some(m) = self.kv.get(&k).await?.and_then(|s| records::decode_manifest(&s.value).ok()) {
                    if m.completed_from == Some(upload) {
                        return Ok(Some(m));
                    }
                }
            }
        }
        Ok(None)
    }

    /// The newest kept version of `bucket/key`.
    async fn newest_kept(&self, bucket: &str, key: &str) -> S3Result<Option<Kept>> {
        let (start, end) = layout::versions_of(bucket, key);
        for k in self.kv.range(&start, &end, 1).await? {
            if let Some(s) = self.kv.get(&k).await? {
                return Ok(Some(Kept { key: k, manifest: records::decode_manifest(&s.value)?, stored: s.version }));
            }
        }
        Ok(None)
    }

    /// What stands in for a key with no current record: the delete marker that hides it, or
    /// the newest kept version, made current again here (a delete of the current version cut
    /// short before it promoted the next), or nothing.
    pub async fn after_miss(&self, bucket: &str, key: &str) -> S3Result<Missing> {
        let Some(newest) = self.newest_kept(bucket, key).await? else { return Ok(Missing::Nothing) };
        if newest.manifest.delete_marker {
            return Ok(Missing::Marker(newest.manifest));
        }
        self.promote(bucket, key).await?;
        match self.kv.get(&layout::object(bucket, key)).await? {
            Some(s) => Ok(Missing::Current(records::decode_manifest(&s.value)?)),
            None => Ok(Missing::Nothing),
        }
    }

    /// Where version `id` of `bucket/key` is stored: its record key, store version and
    /// manifest (the current record, or a kept one).
    pub async fn version_record(&self, bucket: &str, key: &str, id: &str) -> S3Result<Option<Kept>> {
        let object = layout::object(bucket, key);
        if let Some(s) = self.kv.get(&object).await? {
            let m = records::decode_manifest(&s.value)?;
            if m.version_id() == id {
                return Ok(Some(Kept { key: object, stored: s.version, manifest: m }));
            }
        }
        self.kept_version(bucket, key, id).await
    }

    /// The version `id` of `bucket/key` (a delete marker included), current or kept.
    pub async fn version(&self, bucket: &str, key: &str, id: &str) -> S3Result<Option<Manifest>> {
        Ok(self.version_record(bucket, key, id).await?.map(|k| k.manifest))
    }

    /// The kept version `id`: found by its key, the null one by a walk of the key's versions.
    async fn kept_version(&self, bucket: &str, key: &str, id: &str) -> S3Result<Option<Kept>> {
        if id == NULL_VERSION {
            return Ok(self.kept(bucket, key).await?.into_iter().find(|k| k.manifest.version.is_none()));
        }
        let k = layout::version(bucket, key, id);
        match self.kv.get(&k).await? {
            Some(s) => Ok(Some(Kept { key: k, manifest: records::decode_manifest(&s.value)?, stored: s.version })),
            None => Ok(None),
        }
    }

    /// After a write of a null version made at `ms` while suspended: a null version kept from
    /// before it is replaced, its data released (a newer one, written by a later request that
    /// finished first, stays).
    pub async fn drop_kept_null(&self, bucket: &str, key: &str, ms: u64) -> S3Result<()> {
        let owner = Owner { bucket: bucket.to_owned(), key: key.to_owned(), part: None };
        for k in self.kept(bucket, key).await? {
            if k.manifest.version.is_some() || k.manifest.modified_ms >= ms {
                continue;
            }
            self.release_all(k.manifest.segments.iter().map(|s| s.data).collect(), &owner).await?;
            match self.kv.delete(&k.key, Cond::Version(k.stored), Durability::Through).await {
                Ok(_) | Err(KvError::Mismatch) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// DeleteObject without a version in a versioned bucket: the current version is kept (or,
    /// a null one while suspended, released) and a delete marker becomes the newest version.
    /// The marker is written before the current record goes, so a delete cut short leaves the
    /// object as it was (and a marker older readers see as not latest), never a key with
    /// neither. Returns the marker. A delete of the current record that raced is settled as
    /// an unversioned delete is (`Core::settle_removal`; `conditional`: `check` is a condition).
    pub async fn delete_versioned(&self, bucket: &str, key: &str, versioning: Versioning, check: impl Fn(Option<&Manifest>) -> S3Result<()>, conditional: bool) -> S3Result<Manifest> {
        let object = layout::object(bucket, key);
        let owner = Owner { bucket: bucket.to_owned(), key: key.to_owned(), part: None };
        // A marker written and a delete of the current record sent that may have taken effect,
        // with the version it was made on and that version's swap id: kept until settled.
        let mut sent: Option<(Manifest, Bytes, Option<u64>)> = None;
        let _turn = self.turns.take(&object).await;
        let mut duels = Duels::default();
        for _ in 0..REMOVE_ATTEMPTS {
            self.back_off(&mut duels).await;
            let current = self.kv.get(&object).await?;
            if let Some((marker, based, based_id)) = &sent {
                if current.as_ref().map(|s| &s.version) == Some(based) {
                    // Still there: the same marker stands, and the delete is sent again.
                    match self.kv.delete(&object, Cond::Version(based.clone()), Durability::Through).await {
                        Ok(_) => return Ok(marker.clone()),
                        Err(KvError::Mismatch) => continue,
                        Err(KvError::Contended(_)) => {
                            duels.dueled();
                            continue;
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
                if Core::settle_removal(current.as_ref(), *based_id, conditional)? {
                    return Ok(marker.clone());
                }
                // Replaced by another write before ours took effect: the marker goes, and the
                // delete starts over.
                self.unkeep(bucket, key, marker).await?;
                sent = None;
            }
            let old = match &current {
                Some(s) => Some(records::decode_manifest(&s.value)?),
                None => None,
            };
            check(old.as_ref())?;
            let base = Manifest { delete_marker: true, modified_ms: records::now_ms(), ..Manifest::default() };
            let newest = self.newest_time(bucket, key, old.as_ref(), Some(versioning)).await?;
            let marker = Core::stamp(&base, newest, Some(versioning), self.draw());
            match &old {
                Some(o) if Core::keeps(o, Some(versioning)) => self.keep(bucket, key, o).await?,
                Some(o) => self.release_all(o.segments.iter().map(|s| s.data).collect(), &owner).await?,
                None => {}
            }
            if versioning == Versioning::Suspended {
                self.drop_kept_null(bucket, key, marker.modified_ms).await?;
            }
            self.keep(bucket, key, &marker).await?;
            let Some(s) = current else { return Ok(marker) };
            match self.kv.delete(&object, Cond::Version(s.version.clone()), Durability::Through).await {
                Ok(_) => return Ok(marker),
                // Replaced meanwhile: this try's marker goes, and the delete starts over.
                Err(KvError::Mismatch) => self.unkeep(bucket, key, &marker).await?,
                Err(KvError::Contended(_)) => {
                    duels.dueled();
                    sent = Some((marker, s.version, old.and_then(|o| o.swap_id)));
                }
                Err(e) => return Err(e.into()),
            }
        }
        if sent.is_some() {
            // Its marker kept, as a delete cut short leaves it.
            return Err(s3_error!(ServiceUnavailable, "the delete raced others and whether it took effect cannot be known; read the object"));
        }
        Err(s3_error!(SlowDown, "the object was replaced {REMOVE_ATTEMPTS} times while this delete tried to remove it"))
    }

    /// Takes away a marker this request kept and did not make the newest version after all.
    async fn unkeep(&self, bucket: &str, key: &str, marker: &Manifest) -> S3Result<()> {
        self.kv.delete(&layout::version(bucket, key, &order_key(marker)), Cond::Any, Durability::Through).await?;
        Ok(())
    }

    /// DeleteObject of version `id`: gone for good, its data released. When it was the
    /// current version (or the delete marker hiding the key), the newest version left
    /// becomes current. `None`: no such version.
    pub async fn remove_version(&self, bucket: &str, key: &str, id: &str) -> S3Result<Option<Manifest>> {
        let object = layout::object(bucket, key);
        let owner = Owner { bucket: bucket.to_owned(), key: key.to_owned(), part: None };
        // The current version, once a delete of it was sent that may have taken effect.
        let mut removed: Option<Manifest> = None;
        let _turn = self.turns.take(&object).await;
        let mut duels = Duels::default();
        for _ in 0..REMOVE_ATTEMPTS {
            self.back_off(&mut duels).await;
            let current = match self.kv.get(&object).await? {
                Some(s) => Some((records::decode_manifest(&s.value)?, s.version)),
                None => None,
            };
            let still = current.as_ref().is_some_and(|(m, _)| m.version_id() == id);
            if let (Some(gone), false) = (&removed, still) {
                // A kept copy of it (a write that crashed between keeping and replacing).
                if let Some(k) = self.kept_version(bucket, key, id).await? {
                    let _ = self.kv.delete(&k.key, Cond::Version(k.stored), Durability::Through).await;
                }
                self.promote(bucket, key).await?;
                return Ok(Some(gone.clone()));
            }
            if let (Some((m, stored)), true) = (current, still) {
                self.release_all(m.segments.iter().map(|s| s.data).collect(), &owner).await?;
                match self.kv.delete(&object, Cond::Version(stored), Durability::Through).await {
                    // Settled by the next read of the key.
                    Ok(_) => removed = Some(m),
                    Err(KvError::Contended(_)) => {
                        duels.dueled();
                        removed = Some(m);
                    }
                    Err(KvError::Mismatch) => {}
                    Err(e) => return Err(e.into()),
                }
                continue;
            }
            let Some(k) = self.kept_version(bucket, key, id).await? else {
                // Not kept: unless a promotion moved it to current after the first read (it is
                // written there before it leaves the kept ones), there is no such version.
                let current = self.kv.get(&object).await?.map(|s| records::decode_manifest(&s.value)).transpose()?;
                if current.is_some_and(|m| m.version_id() == id) {
                    continue;
                }
                return Ok(None);
            };
            self.release_all(k.manifest.segments.iter().map(|s| s.data).collect(), &owner).await?;
            match self.kv.delete(&k.key, Cond::Version(k.stored), Durability::Through).await {
                Ok(true) => {}
                // Gone meanwhile: promoted to current, perhaps; the next read finds it there.
                Ok(false) | Err(KvError::Mismatch) => continue,
                Err(e) => return Err(e.into()),
            }
            self.promote(bucket, key).await?;
            return Ok(Some(k.manifest));
        }
        Err(s3_error!(SlowDown, "the object changed {REMOVE_ATTEMPTS} times while this delete tried to remove a version of it"))
    }

    /// A key with no current record whose newest kept version is not a delete marker gets
    /// that version back as current (after its current version or the delete marker hiding
    /// it was removed for good): written current first, then its kept copy dropped.
    ///
    /// A kept version removed for good while it was being promoted (its kept record gone or
    /// changed when the promotion drops it) must not come back: the promotion takes its
    /// current record away again and looks at the next newest.
    async fn promote(&self, bucket: &str, key: &str) -> S3Result<()> {
        let object = layout::object(bucket, key);
        // No turn taken here: a removal holding the object's turn promotes.
        for _ in 0..REMOVE_ATTEMPTS {
            let Some(newest) = self.newest_kept(bucket, key).await? else { return Ok(()) };
            if newest.manifest.delete_marker {
                return Ok(());
            }
            let written = match self.kv.put(&object, records::encode(&newest.manifest), Cond::Absent, Durability::Through).await {
                Ok(v) => v,
                // A write made the key current meanwhile: the kept version stays kept.
                Err(KvError::Mismatch) => return Ok(()),
                Err(e) => return Err(e.into()),
            };
            match self.kv.delete(&newest.key, Cond::Version(newest.stored), Durability::Through).await {
                Ok(true) => return Ok(()),
                Ok(false) | Err(KvError::Mismatch) => {
                    // Undone unless another write replaced it already.
                    match self.kv.delete(&object, Cond::Version(written), Durability::Through).await {
                        Ok(_) | Err(KvError::Mismatch) => {}
                        Err(e) => return Err(e.into()),
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(s3_error!(SlowDown, "the versions of the object changed {REMOVE_ATTEMPTS} times while the newest was made current"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_sort_newest_first_and_parse() {
        let (old, new) = (new_id(1_000, 7), new_id(2_000, 7));
        assert!(new < old);
        assert!(valid_id(&old) && valid_id(NULL_VERSION));
        assert!(!valid_id("xyz") && !valid_id(&old.to_uppercase()) && !valid_id(""));
        let null_later = Manifest { modified_ms: 3_000, ..Manifest::default() };
        let null_earlier = Manifest { modified_ms: 500, ..Manifest::default() };
        assert!(order_key(&null_later) < new && order_key(&null_earlier) > old);
    }

    #[test]
    fn a_new_version_is_newer_than_the_one_it_replaces() {
        let old = Manifest { modified_ms: 5_000, version: Some(new_id(5_000, 7)), ..Manifest::default() };
        let m = Manifest { modified_ms: 4_000, ..Manifest::default() };
        let stamped = Core::stamp(&m, Some(old.modified_ms), Some(Versioning::Enabled), 9);
        assert_eq!(stamped.modified_ms, 5_001);
        assert!(order_key(&stamped) < order_key(&old));
        assert_eq!(time_of(&order_key(&stamped)), Some(5_001));
        let suspended = Core::stamp(&m, Some(old.modified_ms), Some(Versioning::Suspended), 9);
        assert_eq!(suspended.version, None);
        assert_eq!(time_of(&order_key(&suspended)), Some(5_001));
        assert_eq!(Core::stamp(&m, Some(old.modified_ms), None, 9), m);
        assert!(Core::keeps(&old, Some(Versioning::Suspended)) && !Core::keeps(&suspended, Some(Versioning::Suspended)));
        assert!(Core::keeps(&suspended, Some(Versioning::Enabled)) && !Core::keeps(&old, None));
    }
}
