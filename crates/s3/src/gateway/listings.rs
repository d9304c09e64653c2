//! Listings in S3's forms: a bucket's objects (v1 and v2), its uploads, an upload's parts,
//! each entry filled in from its record.

use futures_util::stream::{self, StreamExt};
use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result};

use super::convert::{decode_token, encode_token, encoder, initiator, owner, timestamp};
use super::limits::{LIST_FETCH, MAX_KEY_BYTES, MAX_LIST};
use super::lookup::Gateway;
use crate::layout;
use crate::listing::{self, Item, Query};
use crate::records::{self, PartRecord, UploadRecord};

impl Gateway {
    /// Lists a bucket's objects and fills in each entry from its manifest.
    /// Each object's owner is filled in (ListObjects shows it; V2 only when asked).
    async fn list_objects(&self, bucket: &str, prefix: &str, delimiter: Option<&str>, after: Option<&str>, max: i32) -> S3Result<(Vec<Object>, Vec<CommonPrefix>, bool, Option<String>)> {
        let bucket_owner = self.bucket_record_versioned(bucket).await?.0.owner_id().to_owned();
        let bucket_owner = &bucket_owner;
        if max < 0 {
            return Err(s3_error!(InvalidArgument, "max-keys must not be negative"));
        }
        // No key is longer: a longer prefix or marker would only overrun the store's key limit.
        if prefix.len() > MAX_KEY_BYTES || after.is_some_and(|a| a.len() > MAX_KEY_BYTES) {
            return Err(s3_error!(InvalidArgument, "a prefix or marker is at most {MAX_KEY_BYTES} bytes"));
        }
        let base = layout::object_prefix(bucket);
        let q = Query { base: &base, prefix, delimiter, after, start: None, max: max.min(MAX_LIST) as usize };
        let listed = listing::list(&self.core.kv, &q, |suffix| std::str::from_utf8(suffix).ok().map(str::to_owned)).await?;
        let marker = listed.marker();
        let core = &self.core;
        let entries: Vec<S3Result<Option<Object>>> = stream::iter(listed.items.clone())
            .map(|item| async move {
                match item {
                    Item::Record(k, name) => {
                        let Some(s) = core.kv.get(&k).await? else { return Ok(None) };
                        let m = records::decode_manifest(&s.value)?;
                        Ok(Some(Object {
                            key: Some(name),
                            size: Some(m.size as i64),
                            e_tag: Some(ETag::Strong(m.etag)),
                            last_modified: Some(timestamp(m.modified_ms)),
                            storage_class: Some(ObjectStorageClass::from(crate::classes::name(m.class.storage_class.as_deref()).to_owned())),
                            owner: Some(owner(m.owner.as_deref().unwrap_or(bucket_owner))),
                            ..Default::default()
                        }))
                    }
                    Item::Prefix(_) => Ok(None),
                }
            })
            .buffered(LIST_FETCH)
            .collect()
            .await;
        let mut objects = Vec::new();
        for e in entries {
            objects.extend(e?);
        }
        let prefixes = listed
            .items
            .iter()
            .filter_map(|i| match i {
                Item::Prefix(p) => Some(CommonPrefix { prefix: Some(p.clone()) }),
                Item::Record(..) => None,
            })
            .collect();
        Ok((objects, prefixes, listed.truncated, marker))
    }

    pub(super) async fn list_objects_in(&self, req: S3Request<ListObjectsInput>) -> S3Result<S3Response<ListObjectsOutput>> {
        let i = req.input;
        let prefix = i.prefix.clone().unwrap_or_default();
        let max = i.max_keys.unwrap_or(MAX_LIST);
        let (objects, prefixes, truncated, marker) = self.list_objects(&i.bucket, &prefix, i.delimiter.as_deref(), i.marker.as_deref(), max).await?;
        let enc = encoder(i.encoding_type.as_ref());
        // NextMarker is given only with a delimiter; without one clients resume after the last key.
        let next_marker = if truncated && i.delimiter.is_some() { marker.map(&enc) } else { None };
        Ok(S3Response::new(ListObjectsOutput {
            name: Some(i.bucket),
            prefix: Some(enc(prefix)),
            marker: i.marker.map(&enc),
            max_keys: Some(max),
            is_truncated: Some(truncated),
            contents: Some(objects.into_iter().map(|mut o| {
                o.key = o.key.map(&enc);
                o
            }).collect()),
            common_prefixes: Some(prefixes.into_iter().map(|p| CommonPrefix { prefix: p.prefix.map(&enc) }).collect()),
            delimiter: i.delimiter.map(&enc),
            next_marker,
            encoding_type: i.encoding_type,
            ..Default::default()
        }))
    }

    pub(super) async fn list_objects_v2_in(&self, req: S3Request<ListObjectsV2Input>) -> S3Result<S3Response<ListObjectsV2Output>> {
        let i = req.input;
        let prefix = i.prefix.clone().unwrap_or_default();
        let max = i.max_keys.unwrap_or(MAX_LIST);
        let after = match (&i.continuation_token, &i.start_after) {
            (Some(t), _) => Some(decode_token(t)?),
            (None, Some(s)) => Some(s.clone()),
            (None, None) => None,
        };
        let (objects, prefixes, truncated, marker) = self.list_objects(&i.bucket, &prefix, i.delimiter.as_deref(), after.as_deref(), max).await?;
        let enc = encoder(i.encoding_type.as_ref());
        let count = objects.len() + prefixes.len();
        Ok(S3Response::new(ListObjectsV2Output {
            name: Some(i.bucket),
            prefix: Some(enc(prefix)),
            max_keys: Some(max),
            key_count: Some(count as i32),
            continuation_token: i.continuation_token,
            next_continuation_token: if truncated { marker.map(|m| encode_token(&m)) } else { None },
            is_truncated: Some(truncated),
            contents: (!objects.is_empty()).then(|| {
                objects
                    .into_iter()
                    .map(|mut o| {
                        o.key = o.key.map(&enc);
                        if i.fetch_owner != Some(true) {
                            o.owner = None;
                        }
                        o
                    })
                    .collect()
            }),
            common_prefixes: (!prefixes.is_empty()).then(|| prefixes.into_iter().map(|p| CommonPrefix { prefix: p.prefix.map(&enc) }).collect()),
            delimiter: i.delimiter.map(&enc),
            start_after: i.start_after.map(&enc),
            encoding_type: i.encoding_type,
            ..Default::default()
        }))
    }

    pub(super) async fn list_multipart_uploads_in(&self, req: S3Request<ListMultipartUploadsInput>) -> S3Result<S3Response<ListMultipartUploadsOutput>> {
        let i = req.input;
        let bucket_owner = self.bucket_record_versioned(&i.bucket).await?.0.owner_id().to_owned();
        let base = layout::upload_prefix(&i.bucket);
        let prefix = i.prefix.clone().unwrap_or_default();
        let max = i.max_uploads.unwrap_or(MAX_LIST).clamp(0, MAX_LIST) as usize;
        if prefix.len() > MAX_KEY_BYTES || i.key_marker.as_ref().is_some_and(|k| k.len() > MAX_KEY_BYTES) {
            return Err(s3_error!(InvalidArgument, "a prefix or marker is at most {MAX_KEY_BYTES} bytes"));
        }
        // After a key marker: that key's uploads after the upload-id marker, then later keys.
        let start = i.key_marker.as_ref().map(|k| {
            let mut s = bytes::BytesMut::from(&base[..]);
            s.extend_from_slice(k.as_bytes());
            s.extend_from_slice(&[0]);
            match i.upload_id_marker.as_deref().and_then(layout::parse_upload_id) {
                Some(id) => layout::after(&layout::upload(&i.bucket, k, id)),
                None => layout::after_prefix(&s),
            }
        });
        let q = Query { base: &base, prefix: &prefix, delimiter: i.delimiter.as_deref(), after: i.key_marker.as_deref(), start, max };
        let listed = listing::list(&self.core.kv, &q, |suffix| {
            let at = suffix.iter().rposition(|&b| b == 0)?;
            std::str::from_utf8(&suffix[..at]).ok().map(str::to_owned)
        })
        .await?;
        let (mut uploads, mut prefixes) = (Vec::new(), Vec::new());
        let mut next = (None, None);
        for item in &listed.items {
            match item {
                Item::Record(k, name) => {
                    let Some((_, id)) = layout::upload_of(&base, k) else { continue };
                    let Some(s) = self.core.kv.get(k).await? else { continue };
                    let r: UploadRecord = records::decode("upload", &s.value)?;
                    next = (Some(name.clone()), Some(layout::upload_id_text(id)));
                    uploads.push(MultipartUpload {
                        key: Some(name.clone()),
                        upload_id: Some(layout::upload_id_text(id)),
                        initiated: Some(timestamp(r.initiated_ms)),
                        owner: Some(owner(r.owner.as_deref().unwrap_or(&bucket_owner))),
                        initiator: Some(initiator(r.owner.as_deref().unwrap_or(&bucket_owner))),
                        storage_class: Some(StorageClass::from(crate::classes::name(r.class.storage_class.as_deref()).to_owned())),
                        ..Default::default()
                    });
                }
                Item::Prefix(p) => {
                    next = (Some(p.clone()), None);
                    prefixes.push(CommonPrefix { prefix: Some(p.clone()) });
                }
            }
        }
        let enc = encoder(i.encoding_type.as_ref());
        Ok(S3Response::new(ListMultipartUploadsOutput {
            bucket: Some(i.bucket),
            prefix: Some(enc(prefix)),
            delimiter: i.delimiter.map(&enc),
            key_marker: i.key_marker.map(&enc),
            upload_id_marker: i.upload_id_marker,
            next_key_marker: if listed.truncated { next.0.map(&enc) } else { None },
            next_upload_id_marker: if listed.truncated { next.1 } else { None },
            max_uploads: Some(max as i32),
            is_truncated: Some(listed.truncated),
            uploads: Some(uploads.into_iter().map(|mut u| {
                u.key = u.key.map(&enc);
                u
            }).collect()),
            common_prefixes: (!prefixes.is_empty()).then(|| prefixes.into_iter().map(|p| CommonPrefix { prefix: p.prefix.map(&enc) }).collect()),
            encoding_type: i.encoding_type,
            ..Default::default()
        }))
    }

    pub(super) async fn list_parts_in(&self, req: S3Request<ListPartsInput>) -> S3Result<S3Response<ListPartsOutput>> {
        let i = req.input;
        let (id, upload, _) = self.upload(&i.bucket, &i.key, &i.upload_id).await?;
        let class = StorageClass::from(crate::classes::name(upload.class.storage_class.as_deref()).to_owned());
        let upload_owner = match upload.owner {
            Some(o) => o,
            None => self.bucket_record_versioned(&i.bucket).await?.0.owner_id().to_owned(),
        };
        let max = i.max_parts.unwrap_or(MAX_LIST).clamp(0, MAX_LIST) as usize;
        let marker = i.part_number_marker.unwrap_or(0).max(0) as u32;
        let (start, end) = layout::parts(id, marker.saturating_add(1), u32::MAX);
        let keys = self.core.kv.range(&start, &end, max + 1).await?;
        let truncated = keys.len() > max;
        let mut parts = Vec::new();
        for k in keys.iter().take(max) {
            let (Some(n), Some(s)) = (layout::part_number(k), self.core.kv.get(k).await?) else { continue };
            let p: PartRecord = records::decode("part", &s.value)?;
            parts.push(Part { part_number: Some(n as i32), e_tag: Some(ETag::Strong(p.etag)), size: Some(p.segment.size as i64), last_modified: Some(timestamp(p.modified_ms)), ..Default::default() });
        }
        let next = parts.last().and_then(|p| p.part_number);
        Ok(S3Response::new(ListPartsOutput {
            bucket: Some(i.bucket),
            key: Some(i.key),
            upload_id: Some(i.upload_id),
            part_number_marker: i.part_number_marker,
            next_part_number_marker: if truncated { next } else { None },
            max_parts: Some(max as i32),
            is_truncated: Some(truncated),
            parts: Some(parts),
            owner: Some(owner(&upload_owner)),
            initiator: Some(initiator(&upload_owner)),
            storage_class: Some(class),
            ..Default::default()
        }))
    }
}
