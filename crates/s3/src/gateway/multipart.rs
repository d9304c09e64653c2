//! A multipart upload under way: its creation, and its parts, uploaded or copied, each
//! stored under its record.

use bytes::Bytes;
use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result};

use super::acls::{for_new_object, Asked};
use super::checksums::{verify, Checksums};
use super::convert::{hex, timestamp};
use super::copy::CopyConditions;
use super::limits::{check_key, part_number, MAX_PART_BYTES};
use super::lookup::Gateway;
use super::put::sorted;
use crate::kv::{Cond, Durability, KvError};
use crate::layout::{self, UploadId};
use crate::records::{self, Attributes, Owner, PartRecord, UploadRecord};

impl Gateway {
    pub(super) async fn create_multipart_upload_in(&self, req: S3Request<CreateMultipartUploadInput>) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
        let granted = crate::access::granted(&req.extensions)?;
        let (owner, acl) = {
            let i = &req.input;
            check_key(&i.key)?;
            let bucket = self.bucket_record(granted, &i.bucket).await?;
            let asked = Asked::headers(i.acl.as_ref().map(|a| a.as_str()), i.grant_read.as_ref(), None, i.grant_read_acp.as_ref(), i.grant_write_acp.as_ref(), i.grant_full_control.as_ref());
            for_new_object(&granted.principal, &bucket, &asked)?
        };
        let i = req.input;
        let tags = super::tagging::of_header(i.tagging.as_deref())?;
        let class = self.core.class_of(i.storage_class.as_ref().map(|c| c.as_str()))?;
        let id: UploadId = self.core.draw();
        let record = UploadRecord {
            initiated_ms: records::now_ms(),
            attributes: Attributes {
                content_type: i.content_type,
                content_encoding: super::put::stored_encoding(i.content_encoding),
                content_disposition: i.content_disposition,
                content_language: i.content_language,
                cache_control: i.cache_control,
                metadata: sorted(i.metadata),
            },
            completing: None,
            swap_unknown: false,
            owner,
            acl,
            tags,
            class,
        };
        self.core.kv.put(&layout::upload(&i.bucket, &i.key, id), records::encode(&record), Cond::Absent, Durability::Through).await?;
        Ok(S3Response::new(CreateMultipartUploadOutput {
            bucket: Some(i.bucket),
            key: Some(i.key),
            upload_id: Some(layout::upload_id_text(id)),
            ..Default::default()
        }))
    }

    pub(super) async fn upload_part_in(&self, req: S3Request<UploadPartInput>) -> S3Result<S3Response<UploadPartOutput>> {
        let trailers = req.trailing_headers;
        let i = req.input;
        let number = part_number(i.part_number)?;
        let (id, record, _) = self.upload(&i.bucket, &i.key, &i.upload_id).await?;
        if record.completing.is_some() {
            return Err(s3_error!(NoSuchUpload, "the upload is being completed"));
        }
        if i.content_length.is_some_and(|n| n as u64 > MAX_PART_BYTES) {
            return Err(s3_error!(EntityTooLarge, "a part is at most {MAX_PART_BYTES} bytes"));
        }
        let wanted = Checksums::of_part(&i);
        let Some(body) = i.body else { return Err(s3_error!(IncompleteBody)) };
        let owner = Owner { bucket: i.bucket.clone(), key: i.key.clone(), part: Some((id, number)) };
        let written = self.core.write_data(&owner, body, wanted.hasher(), MAX_PART_BYTES, record.class.pool.as_deref()).await?;
        if let Err(e) = verify(&written, i.content_md5.as_deref(), wanted, trailers) {
            self.core.discard(written.segment.data, &owner).await;
            return Err(e);
        }
        let part = PartRecord { etag: hex(&written.md5), modified_ms: records::now_ms(), segment: written.segment };
        self.commit_part(&i.bucket, &i.key, id, number, &part, written.intent.clone()).await?;
        let c = written.checksum;
        Ok(S3Response::new(UploadPartOutput {
            e_tag: Some(ETag::Strong(part.etag)),
            checksum_crc32: c.checksum_crc32,
            checksum_crc32c: c.checksum_crc32c,
            checksum_sha1: c.checksum_sha1,
            checksum_sha256: c.checksum_sha256,
            checksum_crc64nvme: c.checksum_crc64nvme,
            ..Default::default()
        }))
    }

    pub(super) async fn upload_part_copy_in(&self, req: S3Request<UploadPartCopyInput>) -> S3Result<S3Response<UploadPartCopyOutput>> {
        let granted = crate::access::granted(&req.extensions)?.clone();
        let i = req.input;
        let number = part_number(i.part_number)?;
        let (id, record, _) = self.upload(&i.bucket, &i.key, &i.upload_id).await?;
        if record.completing.is_some() {
            return Err(s3_error!(NoSuchUpload, "the upload is being completed"));
        }
        let cond = CopyConditions {
            if_match: i.copy_source_if_match.clone(),
            if_none_match: i.copy_source_if_none_match.clone(),
            if_modified_since: i.copy_source_if_modified_since.clone(),
            if_unmodified_since: i.copy_source_if_unmodified_since.clone(),
        };
        let (_, _, src) = self.copy_source(&i.copy_source, &cond, &granted).await?;
        let range = match &i.copy_source_range {
            Some(r) => {
                let r = Range::parse(r).map_err(|_| s3_error!(InvalidArgument, "x-amz-copy-source-range must be bytes=first-last"))?;
                r.check(src.size)?
            }
            None => 0..src.size,
        };
        if range.end - range.start > MAX_PART_BYTES {
            return Err(s3_error!(EntityTooLarge, "a part is at most {MAX_PART_BYTES} bytes"));
        }
        let owner = Owner { bucket: i.bucket.clone(), key: i.key.clone(), part: Some((id, number)) };
        let body = StreamingBlob::wrap(self.core.read(src.class.pool.clone(), src.segments.clone(), range.start, range.end).ready().await?);
        let written = self.core.write_data(&owner, body, Default::default(), MAX_PART_BYTES, record.class.pool.as_deref()).await?;
        let part = PartRecord { etag: hex(&written.md5), modified_ms: records::now_ms(), segment: written.segment };
        self.commit_part(&i.bucket, &i.key, id, number, &part, written.intent.clone()).await?;
        Ok(S3Response::new(UploadPartCopyOutput {
            copy_part_result: Some(CopyPartResult { e_tag: Some(ETag::Strong(part.etag)), last_modified: Some(timestamp(part.modified_ms)), ..Default::default() }),
            ..Default::default()
        }))
    }

    /// Stores a part's data under its record, releasing the data it replaces.
    pub(super) async fn commit_part(&self, bucket: &str, key: &str, id: UploadId, number: u32, record: &PartRecord, mut intent: Bytes) -> S3Result<()> {
        let owner = Owner { bucket: bucket.to_owned(), key: key.to_owned(), part: Some((id, number)) };
        let pkey = layout::part(id, number);
        let data = record.segment.data;
        let mut committed = None;
        for _ in 0..8 {
            let current = self.core.kv.get(&pkey).await?;
            if let Some(c) = &current {
                let old: PartRecord = records::decode("part", &c.value)?;
                self.core.release(old.segment.data, &owner).await?;
            }
            // Data the sweeper took while the part stalled is never recorded.
            intent = self.core.refresh_before_swap(data, &owner, &intent).await?;
            let cond = current.map_or(Cond::Absent, |c| Cond::Version(c.version));
            match self.core.kv.put(&pkey, records::encode(record), cond, Durability::Through).await {
                Ok(v) => {
                    committed = Some(v);
                    break;
                }
                Err(KvError::Mismatch) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        let Some(version) = committed else {
            self.core.discard(data, &owner).await;
            return Err(s3_error!(SlowDown, "part {number} was replaced concurrently too often"));
        };
        match self.core.kv.get(&layout::upload(bucket, key, id)).await? {
            Some(u) if records::decode::<UploadRecord>("upload", &u.value)?.completing.is_none() => {
                // Lost in a crash, the intent is dropped by the sweeper (the data is referenced).
                let _ = self.core.kv.delete(&layout::intent(data), Cond::Version(intent), Durability::Lazy).await;
                Ok(())
            }
            _ => {
                // Completed or aborted meanwhile. A completion may have read this record and
                // reference the data, so it is released (collected after the grace if nothing
                // references it), not deleted now.
                let _ = self.core.kv.delete(&pkey, Cond::Version(version), Durability::Through).await;
                self.core.release(data, &owner).await?;
                Err(s3_error!(NoSuchUpload, "the upload was aborted or completed while this part was uploaded"))
            }
        }
    }
}
