//! How a multipart upload ends: completed into an object, aborted, or, when a completion
//! crashed, cleaned away after the grace.

use bytes::Bytes;
use futures_util::stream::{self, StreamExt};
use s3s::crypto::Checksum as _;
use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result};

use super::conditions::check_write;
use super::convert::{hex, unhex};
use super::limits::{part_number, LIST_FETCH};
use super::lookup::Gateway;
use crate::kv::{Cond, Durability, KvError, Pages};
use crate::layout::{self, UploadId};
use crate::objects::{Core, Own};
use crate::records::{self, Manifest, Owner, PartRecord, Segment, UploadRecord};

impl Gateway {
    pub(super) async fn complete_multipart_upload_in(&self, req: S3Request<CompleteMultipartUploadInput>) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        let granted = crate::access::granted(&req.extensions)?;
        let i = req.input;
        let (bucket, key) = (i.bucket.clone(), i.key.clone());
        let versioning = self.bucket_record(granted, &bucket).await?.versioning();
        let (id, mut record, version) = match self.upload(&bucket, &key, &i.upload_id).await {
            Ok(upload) => upload,
            Err(e) if *e.code() == s3s::S3ErrorCode::NoSuchUpload => return self.completed_already(&bucket, &key, &i.upload_id).await.ok_or(e),
            Err(e) => return Err(e),
        };
        let listed = i.multipart_upload.and_then(|m| m.parts).unwrap_or_default();
        if listed.is_empty() {
            return Err(s3_error!(MalformedXML, "You must specify at least one part"));
        }
        // The parts named, each as uploaded.
        let mut chosen: Vec<(u32, PartRecord)> = Vec::with_capacity(listed.len());
        for p in &listed {
            let n = part_number(p.part_number.ok_or_else(|| s3_error!(InvalidPart, "a part has no number"))?)?;
            if chosen.last().is_some_and(|(last, _)| *last >= n) {
                return Err(s3_error!(InvalidPartOrder, "The list of parts was not in ascending order. The parts list must be specified in order by part number."));
            }
            let Some(s) = self.core.kv.get(&layout::part(id, n)).await? else {
                return Err(s3_error!(InvalidPart, "part {n} was not uploaded"));
            };
            let record: PartRecord = records::decode("part", &s.value)?;
            if p.e_tag.as_ref().is_some_and(|e| e.value() != record.etag) || p.e_tag.is_none() {
                return Err(s3_error!(InvalidPart, "part {n}'s ETag does not match the uploaded part's"));
            }
            chosen.push((n, record));
        }
        for (n, p) in &chosen[..chosen.len() - 1] {
            if p.segment.size < self.core.min_part {
                return Err(s3_error!(EntityTooSmall, "part {n} is {} bytes; every part but the last is at least {}", p.segment.size, self.core.min_part));
            }
        }
        let mut md5s = Vec::with_capacity(chosen.len() * 16);
        for (_, p) in &chosen {
            md5s.extend(unhex(&p.etag).ok_or_else(|| s3_error!(InternalError, "a stored part ETag is not hex"))?);
        }
        let mut h = s3s::crypto::Md5::new();
        h.update(&md5s);
        let etag = format!("{}-{}", hex(&h.finalize()), chosen.len());
        let (if_match, if_none_match) = (i.if_match.clone(), i.if_none_match.clone());
        check_write(self.manifest(&bucket, &key).await?.as_ref(), if_match.as_ref(), if_none_match.as_ref())?;
        // Take the upload with a fresh mark by compare-and-swap: from then no part changes, and
        // an abort (or the sweeper's cleanup of a stale completion) that read the record before
        // fails. A retry of the same completion may take it again; another one may not.
        let wanted: Vec<(u32, String)> = chosen.iter().map(|(n, p)| (*n, p.etag.clone())).collect();
        if let Some(c) = &record.completing {
            let fresh = u128::from(records::now_ms().saturating_sub(c.at_ms)) < self.core.grace.as_millis();
            if fresh && c.parts != wanted {
                return Err(s3_error!(InvalidRequest, "another completion of this upload, with other parts, is under way"));
            }
        }
        let before = record.completing.take();
        record.completing = Some(records::Completing { at_ms: records::now_ms(), parts: wanted });
        let upload_key = layout::upload(&bucket, &key, id);
        let version = match self.core.kv.put(&upload_key, records::encode(&record), Cond::Version(version), Durability::Through).await {
            Ok(v) => v,
            Err(KvError::Mismatch) => return Err(s3_error!(NoSuchUpload, "the upload was aborted or completed meanwhile")),
            Err(e) => return Err(e.into()),
        };
        let segments: Vec<Segment> = chosen.iter().map(|(_, p)| p.segment).collect();
        let size = segments.iter().map(|s| s.size).sum();
        let manifest = Manifest { size, etag, modified_ms: records::now_ms(), attributes: record.attributes.clone(), segments, completed_from: Some(id), owner: record.owner.clone(), acl: record.acl.clone(), tags: record.tags.clone(), class: record.class.clone(), ..Manifest::default() };
        // The chosen data is guarded as an upload's own (its intents taken over, refreshed just
        // before the swap), then the manifest swapped in. Either failing gives the upload back
        // as it was (its parts still referenced by their records), so that it can go on or be
        // aborted.
        let swapped = async {
            let mut own = Vec::with_capacity(chosen.len());
            for (n, p) in &chosen {
                let owner = Owner { bucket: bucket.clone(), key: key.clone(), part: Some((id, *n)) };
                let intent = self.core.claim(p.segment.data, &owner).await?;
                own.push(Own { data: p.segment.data, owner, intent });
            }
            self.core.commit(&bucket, &key, &manifest, |old| check_write(old, if_match.as_ref(), if_none_match.as_ref()), own, versioning).await
        };
        let committed = match swapped.await {
            Ok(m) => m,
            Err(e) => {
                record.completing = before;
                let _ = self.core.kv.put(&upload_key, records::encode(&record), Cond::Version(version), Durability::Through).await;
                return Err(e);
            }
        };
        // Part records go; data the object does not use (parts left out, parts uploaded again
        // after the completion read them) is released.
        for (n, k, p) in Self::parts_of(&self.core, id).await? {
            if !manifest.references(p.segment.data) {
                self.core.release(p.segment.data, &Owner { bucket: bucket.clone(), key: key.clone(), part: Some((id, n)) }).await?;
            }
            self.core.kv.delete(&k, Cond::Any, Durability::Through).await?;
        }
        let _ = self.core.kv.delete(&upload_key, Cond::Version(version), Durability::Through).await;
        Ok(S3Response::new(completed(&bucket, &key, committed)))
    }

    /// A completion of an upload that is gone: if the object is the one this upload was
    /// completed into, the answer the completion gave (a client retrying a completion whose
    /// answer it lost must not be told the upload does not exist); `None` otherwise.
    async fn completed_already(&self, bucket: &str, key: &str, upload_id: &str) -> Option<S3Response<CompleteMultipartUploadOutput>> {
        let id = layout::parse_upload_id(upload_id)?;
        let m = self.manifest(bucket, key).await.ok()??;
        (m.completed_from == Some(id)).then(|| S3Response::new(completed(bucket, key, m)))
    }

    pub(super) async fn abort_multipart_upload_in(&self, req: S3Request<AbortMultipartUploadInput>) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        let i = req.input;
        let (id, record, version) = self.upload(&i.bucket, &i.key, &i.upload_id).await?;
        if let Some(c) = &record.completing {
            if u128::from(records::now_ms().saturating_sub(c.at_ms)) < self.core.grace.as_millis() {
                return Err(s3_error!(InvalidRequest, "the upload is being completed"));
            }
        }
        Self::abort(&self.core, &i.bucket, &i.key, id, version).await?;
        Ok(S3Response::new(AbortMultipartUploadOutput::default()))
    }

    /// An upload's part records, in number order.
    async fn parts_of(core: &Core, id: UploadId) -> S3Result<Vec<(u32, Bytes, PartRecord)>> {
        let mut pages = Pages::new(layout::parts(id, 0, u32::MAX), crate::objects::PAGE);
        let mut parts = Vec::new();
        while let Some(keys) = pages.next(&core.kv).await? {
            for k in &keys {
                let (Some(n), Some(s)) = (layout::part_number(k), core.kv.get(k).await?) else { continue };
                parts.push((n, k.clone(), records::decode("part", &s.value)?));
            }
        }
        Ok(parts)
    }

    /// Aborts an upload. Every part's data is released first, so that a crash at any point
    /// leaves intents for the sweeper; then the record goes (by compare-and-swap: a completion
    /// that took the upload meanwhile wins), then the part records. The data is collected
    /// after the grace unless an object references it (a completion got through).
    pub async fn abort(core: &Core, bucket: &str, key: &str, id: UploadId, version: Bytes) -> S3Result<()> {
        let parts = Self::parts_of(core, id).await?;
        let owners: Vec<(u128, Owner)> = parts
            .iter()
            .map(|(n, _, p)| (p.segment.data, Owner { bucket: bucket.to_owned(), key: key.to_owned(), part: Some((id, *n)) }))
            .collect();
        let mut marks = stream::iter(owners).map(|(d, o)| async move { core.release(d, &o).await }).buffer_unordered(LIST_FETCH);
        while let Some(r) = marks.next().await {
            r?;
        }
        match core.kv.delete(&layout::upload(bucket, key, id), Cond::Version(version), Durability::Through).await {
            Ok(_) => {}
            Err(KvError::Mismatch) => return Err(s3_error!(NoSuchUpload, "the upload changed while it was aborted")),
            Err(e) => return Err(e.into()),
        }
        let keys: Vec<Bytes> = parts.into_iter().map(|(_, k, _)| k).collect();
        let mut deletes = stream::iter(keys).map(|k| async move { core.kv.delete(&k, Cond::Any, Durability::Through).await }).buffer_unordered(LIST_FETCH);
        while let Some(r) = deletes.next().await {
            r?;
        }
        Ok(())
    }
}

/// Completions that crashed after taking their upload: once older than the grace, their
/// part records and upload record are cleaned away (the object keeps what it references).
pub(super) async fn finish_stale_completions(core: &Core) -> S3Result<u64> {
    let mut pages = Pages::new(layout::uploads(), crate::objects::PAGE);
    let mut finished = 0;
    while let Some(keys) = pages.next(&core.kv).await? {
        for k in &keys {
            let Some(s) = core.kv.get(k).await? else { continue };
            let Ok(r) = records::decode::<UploadRecord>("upload", &s.value) else { continue };
            let Some(c) = r.completing else { continue };
            if u128::from(records::now_ms().saturating_sub(c.at_ms)) < core.grace.as_millis() {
                continue;
            }
            let Some((bucket, key, id)) = upload_parts_of(k) else { continue };
            match Gateway::abort(core, &bucket, &key, id, s.version).await {
                Ok(()) => finished += 1,
                Err(e) => tracing::warn!(bucket, key, upload = %layout::upload_id_text(id), error = %e, "a stale completion was not cleaned up"),
            }
        }
    }
    Ok(finished)
}

/// (bucket, key, upload id) of an upload record key.
pub(super) fn upload_parts_of(k: &[u8]) -> Option<(String, String, UploadId)> {
    let bucket = layout::upload_bucket(k)?.to_owned();
    let (key, id) = layout::upload_of(&layout::upload_prefix(&bucket), k)?;
    Some((bucket, key.to_owned(), id))
}

fn completed(bucket: &str, key: &str, m: Manifest) -> CompleteMultipartUploadOutput {
    CompleteMultipartUploadOutput {
        bucket: Some(bucket.to_owned()),
        key: Some(key.to_owned()),
        e_tag: Some(ETag::Strong(m.etag)),
        version_id: m.version,
        location: Some(format!("/{bucket}/{key}")),
        ..Default::default()
    }
}
