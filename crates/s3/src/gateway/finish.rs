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
use super::marks::{self, MarkKeeper};
use super::waiting::{Taken, Waiting};
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
        let listed = i.multipart_upload.and_then(|m| m.parts).unwrap_or_default();
        if listed.is_empty() {
            return Err(s3_error!(MalformedXML, "You must specify at least one part"));
        }
        // The parts asked for: (number, ETag), in ascending order.
        let mut wanted: Vec<(u32, String)> = Vec::with_capacity(listed.len());
        for p in &listed {
            let n = part_number(p.part_number.ok_or_else(|| s3_error!(InvalidPart, "a part has no number"))?)?;
            if wanted.last().is_some_and(|(last, _)| *last >= n) {
                return Err(s3_error!(InvalidPartOrder, "The list of parts was not in ascending order. The parts list must be specified in order by part number."));
            }
            let etag = p.e_tag.as_ref().ok_or_else(|| s3_error!(InvalidPart, "part {n}'s ETag does not match the uploaded part's"))?;
            wanted.push((n, etag.value().to_owned()));
        }
        let conditions = (i.if_match.clone(), i.if_none_match.clone());
        // This completion's token, on its mark; one wait for all its attempts.
        let waiting = Waiting::new(self.core.draw());
        let done = self.complete_upload((&bucket, &key, &i.upload_id), &wanted, conditions, versioning, &waiting).await;
        // Failed, it may have left its mark standing (a write of unknown outcome): that is
        // given back once the store settles it, not left to hold the upload for the grace.
        if done.is_err() {
            if let Some(left) = waiting.take_left() {
                self.give_back_later(left, waiting.by);
            }
        }
        done
    }

    /// The completion of upload `upload_id` of `bucket/key` from the parts `wanted`, once parsed.
    async fn complete_upload(&self, (bucket, key, upload_id): (&str, &str, &str), wanted: &[(u32, String)], (if_match, if_none_match): (Option<ETagCondition>, Option<ETagCondition>), versioning: Option<records::Versioning>, waiting: &Waiting) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        let by = waiting.by;
        let mut taken = None;
        for _ in 0..TAKE_ATTEMPTS {
            // Another completion of the upload under way is waited for, never joined: two
            // could both swap the upload in, two objects (two versions) on one upload's data.
            let upload = match self.upload_to_complete(bucket, key, upload_id, wanted, waiting).await? {
                Taken::Free(upload) => upload,
                Taken::Completed(m) => return Ok(S3Response::new(completed(bucket, key, m))),
            };
            // Our own mark already there (an earlier write of it raced and stood): if this
            // attempt fails, the upload is given back rather than left marked.
            let ours = (upload.1.completing.as_ref().map(|c| c.by) == Some(by)).then(|| (upload.0, upload.1.clone(), upload.2.clone()));
            let took = self.take_upload(bucket, key, upload, (wanted, waiting), if_match.as_ref(), if_none_match.as_ref()).await;
            if let (Err(_), Some((id, mut record, version))) = (&took, ours) {
                record.completing = None;
                self.give_back(&layout::upload(bucket, key, id), &record, waiting, version).await;
            }
            match took? {
                Took::Taken(t) => {
                    taken = Some(t);
                    break;
                }
                Took::Completed(m) => return Ok(S3Response::new(completed(bucket, key, m))),
                Took::Changed => {}
            }
        }
        let Some(Upload { id, mut record, version, chosen, etag }) = taken else {
            return Err(s3_error!(SlowDown, "the upload kept changing while it was being completed; send the completion again"));
        };
        let upload_key = layout::upload(bucket, key, id);
        let segments: Vec<Segment> = chosen.iter().map(|(_, p)| p.segment).collect();
        let size = segments.iter().map(|s| s.size).sum();
        let manifest = Manifest { size, etag, modified_ms: records::now_ms(), attributes: record.attributes.clone(), segments, completed_from: Some(id), owner: record.owner.clone(), acl: record.acl.clone(), tags: record.tags.clone(), class: record.class.clone(), ..Manifest::default() };
        // A completion of this upload found taking effect meanwhile (one stalled past the
        // grace, its mark taken over) is not swapped in again: its object is the answer. (The
        // commit's own raced tries are settled before the check, never seen by it.)
        let found: std::sync::Mutex<Option<Manifest>> = std::sync::Mutex::new(None);
        let check = |old: Option<&Manifest>| match old {
            Some(m) if m.completed_from == Some(id) => {
                *found.lock().unwrap_or_else(|e| e.into_inner()) = Some(m.clone());
                Err(s3_error!(SlowDown, "another completion of this upload took effect meanwhile"))
            }
            old => check_write(old, if_match.as_ref(), if_none_match.as_ref()),
        };
        // The chosen data is guarded as an upload's own (its intents taken over, refreshed just
        // before the swap), then the manifest swapped in, the mark kept fresh all the while.
        // Either failing gives the upload back as it was (its parts still referenced by their
        // records), so that it can go on or be aborted; noting, after a swap that answered 5xx,
        // that it may have taken effect.
        let keeper = MarkKeeper::new(self, &upload_key, &record, version);
        let outcome = keeper
            .alongside(async {
                let mut own = Vec::with_capacity(chosen.len());
                for (n, p) in &chosen {
                    let owner = Owner { bucket: bucket.to_owned(), key: key.to_owned(), part: Some((id, *n)) };
                    let intent = self.core.claim(p.segment.data, &owner).await.map_err(|e| (e, false))?;
                    own.push(Own { data: p.segment.data, owner, intent });
                }
                self.core.commit(bucket, key, &manifest, &check, own, versioning).await.map_err(|e| (e, true))
            })
            .await;
        let version = keeper.version();
        let committed = match outcome {
            Ok(m) => m,
            Err((_, true)) if found.lock().unwrap_or_else(|e| e.into_inner()).is_some() => {
                let m = found.into_inner().unwrap_or_else(|e| e.into_inner()).unwrap_or_default();
                self.finish_after_swap(bucket, key, id, &m, &upload_key, (Some(by), version)).await;
                return Ok(S3Response::new(completed(bucket, key, m)));
            }
            Err((e, committing)) => {
                record.completing = None;
                record.swap_unknown |= committing && !e.status_code().is_some_and(|s| s.is_client_error());
                self.give_back(&upload_key, &record, waiting, version).await;
                return Err(e);
            }
        };
        self.finish_after_swap(bucket, key, id, &manifest, &upload_key, (Some(by), version)).await;
        Ok(S3Response::new(completed(bucket, key, committed)))
    }

    /// Takes upload `id` (its record, read at store version `version`) for a completion of the parts
    /// `wanted`: checks them, and marks the record by compare-and-swap; or finds the upload
    /// completed already by an earlier completion, or its record changed meanwhile.
    async fn take_upload(&self, bucket: &str, key: &str, (id, mut record, version): (UploadId, UploadRecord, Bytes), (wanted, waiting): (&[(u32, String)], &Waiting), if_match: Option<&ETagCondition>, if_none_match: Option<&ETagCondition>) -> S3Result<Took> {
        let upload_key = layout::upload(bucket, key, id);
        let by = waiting.by;
        // A completion before this one may have swapped the upload in (its answer lost, or a
        // 5xx while its outcome was unknown): then the answer is that object, as S3 answers a
        // completion sent again, and the upload is finished as that completion would have.
        // Where such a swap may stand on some replicas only, the object is settled from every
        // replica first, so that it is chosen now (and found) or never.
        let unknown = record.swap_unknown || record.completing.as_ref().is_some_and(|c| c.by != by);
        if unknown {
            self.core.kv.settle(&layout::object(bucket, key)).await?;
        }
        let current = self.manifest(bucket, key).await?;
        let before = match current.as_ref().filter(|m| m.completed_from == Some(id)) {
            Some(m) => Some(m.clone()),
            None if unknown => self.core.kept_from_upload(bucket, key, id).await?,
            None => None,
        };
        if let Some(m) = before {
            self.finish_after_swap(bucket, key, id, &m, &upload_key, (marks::mark_of(&record), version)).await;
            return Ok(Took::Completed(m));
        }
        // The parts named, each as uploaded.
        let mut chosen: Vec<(u32, PartRecord)> = Vec::with_capacity(wanted.len());
        for (n, etag) in wanted {
            let Some(s) = self.core.kv.get(&layout::part(id, *n)).await? else {
                return Err(s3_error!(InvalidPart, "part {n} was not uploaded"));
            };
            let part: PartRecord = records::decode("part", &s.value)?;
            if *etag != part.etag {
                return Err(s3_error!(InvalidPart, "part {n}'s ETag does not match the uploaded part's"));
            }
            chosen.push((*n, part));
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
        check_write(current.as_ref(), if_match, if_none_match)?;
        // Take the upload with a fresh mark by compare-and-swap: from then no part changes, and
        // an abort (or the sweeper's cleanup of a stale completion) that read the record before
        // fails, and so does another completion that read it.
        // Our own mark, from a write that raced and stood: taken as it is while fresh (one
        // near the grace is written again, so that the stale cleanup does not take it).
        if record.completing.as_ref().is_some_and(|c| c.by == by && c.younger_than(self.core.grace / 2)) {
            return Ok(Took::Taken(Upload { id, record, version, chosen, etag }));
        }
        // The record to give back over this mark if it is left: without this completion's own
        // older mark (written again here, near the grace).
        let mut before = record.clone();
        if marks::mark_of(&before) == Some(by) {
            before.completing = None;
        }
        record.completing = Some(records::Completing { at_ms: records::now_ms(), parts: wanted.to_vec(), by });
        Ok(match self.put_mark(&upload_key, &record, &before, version, waiting).await? {
            Some(version) => Took::Taken(Upload { id, record, version, chosen, etag }),
            None => Took::Changed,
        })
    }

    /// `finish_parts` once the object is made, whatever it answers: a cleanup cut short is
    /// the stale-completion cleanup's to finish after the grace (the mark stays).
    async fn finish_after_swap(&self, bucket: &str, key: &str, id: UploadId, manifest: &Manifest, upload_key: &[u8], mark: (Option<u64>, Bytes)) {
        if let Err(e) = self.finish_parts(bucket, key, id, manifest, upload_key, mark).await {
            tracing::warn!(bucket, key, error = %e, "a completed upload's records were not all cleaned up; the stale-completion cleanup finishes them after the grace");
        }
    }

    /// After the swap: part records go; data the object does not use (parts left out, parts
    /// uploaded again after the completion read them) is released; then the upload record
    /// (at `version` with the mark `by`, so that a completion that took it since keeps it).
    async fn finish_parts(&self, bucket: &str, key: &str, id: UploadId, manifest: &Manifest, upload_key: &[u8], (by, version): (Option<u64>, Bytes)) -> S3Result<()> {
        for (n, k, p) in Self::parts_of(&self.core, id).await? {
            if !manifest.references(p.segment.data) {
                self.core.release(p.segment.data, &Owner { bucket: bucket.to_owned(), key: key.to_owned(), part: Some((id, n)) }).await?;
            }
            self.core.kv.delete(&k, Cond::Any, Durability::Through).await?;
        }
        self.clear_mark(upload_key, by, version).await;
        Ok(())
    }

    pub(super) async fn abort_multipart_upload_in(&self, req: S3Request<AbortMultipartUploadInput>) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        let i = req.input;
        let (id, record, version) = self.upload(&i.bucket, &i.key, &i.upload_id).await?;
        if let Some(c) = &record.completing {
            if c.younger_than(self.core.grace) {
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

/// Times a completion reads its upload again when the record changed as it took it.
const TAKE_ATTEMPTS: usize = 4;

/// An upload taken for a completion: its record as marked and the store version of that,
/// the parts chosen, and the object's ETag.
struct Upload {
    id: UploadId,
    record: UploadRecord,
    version: Bytes,
    chosen: Vec<(u32, PartRecord)>,
    etag: String,
}

enum Took {
    Taken(Upload),
    /// An earlier completion of the upload swapped it in: this object.
    Completed(Manifest),
    /// The record changed between its read and the mark.
    Changed,
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
            if c.younger_than(core.grace) {
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

pub(super) fn completed(bucket: &str, key: &str, m: Manifest) -> CompleteMultipartUploadOutput {
    CompleteMultipartUploadOutput {
        bucket: Some(bucket.to_owned()),
        key: Some(key.to_owned()),
        e_tag: Some(ETag::Strong(m.etag)),
        version_id: m.version,
        location: Some(format!("/{bucket}/{key}")),
        ..Default::default()
    }
}
