//! GetObject and HeadObject: the object after its conditions, whole, a range or a part.

use std::collections::{BTreeMap, HashMap};

use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result};

use super::checksums::{answered, of_read};
use super::conditions::check_read;
use super::convert::timestamp;
use super::limits::{part_number, MAX_LIST};
use super::lookup::Gateway;
use crate::records::Manifest;

impl Gateway {
    pub(super) async fn get_object_in(&self, req: S3Request<GetObjectInput>) -> S3Result<S3Response<GetObjectOutput>> {
        let granted = crate::access::granted(&req.extensions)?;
        let i = &req.input;
        let m = self.readable_body(&granted.object, &i.bucket, &i.key, i.version_id.as_deref()).await?;
        check_read(&m, i.if_match.as_ref(), i.if_none_match.as_ref(), i.if_modified_since.as_ref(), i.if_unmodified_since.as_ref())?;
        let (range, parts_count) = span(&m, i.part_number, i.range.as_ref())?;
        let whole = 0..m.size;
        let version_id = m.version.clone().or_else(|| i.version_id.clone());
        let r = range.clone().unwrap_or(whole);
        let body = self.core.read(m.class.pool.clone(), m.segments.clone(), r.start, r.end).ready().await?;
        let c = of_read(m.checksum.as_ref(), i.checksum_mode.as_ref(), range.is_none());
        let a = m.attributes;
        Ok(S3Response::new(GetObjectOutput {
            checksum_crc32: c.checksum_crc32,
            checksum_crc32c: c.checksum_crc32c,
            checksum_sha1: c.checksum_sha1,
            checksum_sha256: c.checksum_sha256,
            checksum_crc64nvme: c.checksum_crc64nvme,
            checksum_type: c.checksum_type,
            body: Some(StreamingBlob::wrap(body)),
            content_length: Some((r.end - r.start) as i64),
            content_range: range.map(|r| format!("bytes {}-{}/{}", r.start, r.end.saturating_sub(1), m.size)),
            accept_ranges: Some("bytes".into()),
            e_tag: Some(ETag::Strong(m.etag)),
            last_modified: Some(timestamp(m.modified_ms)),
            metadata: unsorted(&a.metadata),
            content_type: a.content_type,
            content_encoding: a.content_encoding,
            content_disposition: a.content_disposition,
            content_language: a.content_language,
            cache_control: a.cache_control,
            parts_count,
            version_id,
            tag_count: (!m.tags.is_empty()).then_some(m.tags.len() as i32),
            // S3 names the class only when it is not STANDARD.
            storage_class: m.class.storage_class.map(StorageClass::from),
            ..Default::default()
        }))
    }

    pub(super) async fn head_object_in(&self, req: S3Request<HeadObjectInput>) -> S3Result<S3Response<HeadObjectOutput>> {
        let granted = crate::access::granted(&req.extensions)?;
        let i = &req.input;
        let m = self.readable_body(&granted.object, &i.bucket, &i.key, i.version_id.as_deref()).await?;
        check_read(&m, i.if_match.as_ref(), i.if_none_match.as_ref(), i.if_modified_since.as_ref(), i.if_unmodified_since.as_ref())?;
        let (range, parts_count) = span(&m, i.part_number, i.range.as_ref())?;
        let r = range.clone().unwrap_or(0..m.size);
        let version_id = m.version.clone().or_else(|| i.version_id.clone());
        let tags = m.tags.len();
        let c = of_read(m.checksum.as_ref(), i.checksum_mode.as_ref(), range.is_none());
        let a = m.attributes;
        let mut answer = S3Response::new(HeadObjectOutput {
            checksum_crc32: c.checksum_crc32,
            checksum_crc32c: c.checksum_crc32c,
            checksum_sha1: c.checksum_sha1,
            checksum_sha256: c.checksum_sha256,
            checksum_crc64nvme: c.checksum_crc64nvme,
            checksum_type: c.checksum_type,
            content_length: Some((r.end - r.start) as i64),
            content_range: range.map(|r| format!("bytes {}-{}/{}", r.start, r.end.saturating_sub(1), m.size)),
            accept_ranges: Some("bytes".into()),
            e_tag: Some(ETag::Strong(m.etag)),
            last_modified: Some(timestamp(m.modified_ms)),
            metadata: unsorted(&a.metadata),
            content_type: a.content_type,
            content_encoding: a.content_encoding,
            content_disposition: a.content_disposition,
            content_language: a.content_language,
            cache_control: a.cache_control,
            parts_count,
            version_id,
            storage_class: m.class.storage_class.map(StorageClass::from),
            ..Default::default()
        });
        // HEAD tells the tag count as GET does (s3s' HEAD answer has no field for it).
        if tags > 0 {
            answer.headers.insert("x-amz-tagging-count", http::HeaderValue::from(tags));
        }
        Ok(answer)
    }
}

impl Gateway {
    /// GetObjectAttributes: what HEAD tells and, for a multipart object, its parts (a page of
    /// them), each part as GET ?partNumber= numbers it.
    pub(super) async fn get_object_attributes_in(&self, req: S3Request<GetObjectAttributesInput>) -> S3Result<S3Response<GetObjectAttributesOutput>> {
        let granted = crate::access::granted(&req.extensions)?;
        let i = &req.input;
        let m = self.readable_body(&granted.object, &i.bucket, &i.key, i.version_id.as_deref()).await?;
        // One header of comma-separated names, as SDKs send it, arrives as one item.
        let wanted = |a: &str| i.object_attributes.iter().flat_map(|x| x.as_str().split(',')).any(|x| x.trim() == a);
        let multipart = m.etag.contains('-');
        let parts = (wanted(ObjectAttributes::OBJECT_PARTS) && multipart).then(|| {
            let max = i.max_parts.unwrap_or(MAX_LIST).clamp(0, MAX_LIST) as usize;
            let after = i.part_number_marker.unwrap_or(0).max(0) as usize;
            let page: Vec<ObjectPart> = m.segments.iter().enumerate().skip(after).take(max).map(|(n, s)| ObjectPart { part_number: Some(n as i32 + 1), size: Some(s.size as i64), ..Default::default() }).collect();
            let truncated = after + page.len() < m.segments.len();
            GetObjectAttributesParts {
                is_truncated: Some(truncated),
                max_parts: Some(max as i32),
                next_part_number_marker: truncated.then_some((after + page.len()) as i32),
                part_number_marker: i.part_number_marker,
                parts: Some(page),
                total_parts_count: Some(m.segments.len() as i32),
            }
        });
        Ok(S3Response::new(GetObjectAttributesOutput {
            e_tag: wanted(ObjectAttributes::ETAG).then(|| ETag::Strong(m.etag.clone())),
            object_size: wanted(ObjectAttributes::OBJECT_SIZE).then_some(m.size as i64),
            storage_class: wanted(ObjectAttributes::STORAGE_CLASS).then(|| StorageClass::from(crate::classes::name(m.class.storage_class.as_deref()).to_owned())),
            object_parts: parts,
            checksum: m.checksum.as_ref().filter(|_| wanted(ObjectAttributes::CHECKSUM)).map(answered),
            last_modified: Some(timestamp(m.modified_ms)),
            version_id: m.version.clone(),
            ..Default::default()
        }))
    }
}


/// The bytes a GET or HEAD asks for (`None`: all) and, for a multipart object asked by part,
/// its part count.
fn span(m: &Manifest, part: Option<i32>, range: Option<&Range>) -> S3Result<(Option<std::ops::Range<u64>>, Option<i32>)> {
    let multipart = m.etag.contains('-');
    match (part, range) {
        (Some(_), Some(_)) => Err(s3_error!(InvalidRequest, "Cannot specify both Range header and partNumber query parameter")),
        // A single-part object is its own part 1.
        (Some(n), None) if !multipart => match part_number(n)? {
            1 => Ok((None, None)),
            _ => Err(s3_error!(InvalidPart, "The requested part number is past the object's last part (1)")),
        },
        (Some(n), None) => {
            let n = part_number(n)? as usize;
            let seg = m.segments.get(n - 1).ok_or_else(|| s3_error!(InvalidPart, "The requested part number is past the object's last part ({})", m.segments.len()))?;
            let start: u64 = m.segments[..n - 1].iter().map(|s| s.size).sum();
            Ok((Some(start..start + seg.size), Some(m.segments.len() as i32)))
        }
        (None, Some(_)) if m.size == 0 => Err(s3_error!(InvalidRange, "The requested range is not satisfiable")),
        (None, Some(r)) => Ok((Some(r.check(m.size)?), None)),
        (None, None) => Ok((None, None)),
    }
}

fn unsorted(m: &BTreeMap<String, String>) -> Option<HashMap<String, String>> {
    (!m.is_empty()).then(|| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
}
