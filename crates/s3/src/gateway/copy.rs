//! CopyObject: the source after its conditions, read into new data under the target.

use s3s::dto::*;
use s3s::{s3_error, S3ErrorCode, S3Request, S3Response, S3Result};

use super::acls::{for_new_object, Asked};
use super::conditions::check_read;
use crate::access::Granted;
use super::convert::{hex, timestamp};
use super::limits::{check_key, MAX_PUT_BYTES};
use super::lookup::Gateway;
use super::put::{segments_of, sorted};
use crate::objects::Own;
use crate::records::{self, Attributes, Manifest, Owner};

impl Gateway {
    /// The source object of a copy (its current version, or the one it names), after its
    /// conditions.
    pub(super) async fn copy_source(&self, source: &CopySource, cond: &CopyConditions, granted: &Granted) -> S3Result<(String, String, Manifest)> {
        let CopySource::Bucket { bucket, key, version_id } = source else {
            return Err(s3_error!(InvalidArgument, "copy sources are bucket/key"));
        };
        let m = match &granted.source {
            Some(decision) => self.readable(decision, bucket, key, version_id.as_deref()).await?,
            None => self.existing(bucket, key, version_id.as_deref()).await?,
        };
        if m.delete_marker {
            // A copy names a delete marker only by its version id.
            return Err(s3_error!(InvalidRequest, "The source of a copy request may not specifically refer to a delete marker by version id."));
        }
        check_read(&m, cond.if_match.as_ref(), cond.if_none_match.as_ref(), cond.if_modified_since.as_ref(), cond.if_unmodified_since.as_ref())
            .map_err(|e| if *e.code() == S3ErrorCode::NotModified { s3_error!(PreconditionFailed) } else { e })?;
        Ok((bucket.to_string(), key.to_string(), m))
    }

    pub(super) async fn copy_object_in(&self, req: S3Request<CopyObjectInput>) -> S3Result<S3Response<CopyObjectOutput>> {
        let granted = crate::access::granted(&req.extensions)?;
        let i = req.input;
        check_key(&i.key)?;
        let cond = CopyConditions {
            if_match: i.copy_source_if_match.clone(),
            if_none_match: i.copy_source_if_none_match.clone(),
            if_modified_since: i.copy_source_if_modified_since.clone(),
            if_unmodified_since: i.copy_source_if_unmodified_since.clone(),
        };
        let (src_bucket, src_key, src) = self.copy_source(&i.copy_source, &cond, granted).await?;
        let record = self.bucket_record(granted, &i.bucket).await?;
        let asked = Asked::headers(i.acl.as_ref().map(|a| a.as_str()), i.grant_read.as_ref(), None, i.grant_read_acp.as_ref(), i.grant_write_acp.as_ref(), i.grant_full_control.as_ref());
        let (object_owner, acl) = for_new_object(&granted.principal, &record, &asked)?;
        let replace = i.metadata_directive.as_ref().is_some_and(|d| d.as_str() == MetadataDirective::REPLACE);
        let new_class = i.storage_class.as_ref().is_some_and(|c| Some(c.as_str()) != Some(crate::classes::name(src.class.storage_class.as_deref())));
        if src_bucket == i.bucket && src_key == i.key && !replace && !new_class {
            return Err(s3_error!(
                InvalidRequest,
                "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes."
            ));
        }
        if src.size > MAX_PUT_BYTES {
            return Err(s3_error!(InvalidRequest, "The specified copy source is larger than the maximum allowable size for a copy source: {MAX_PUT_BYTES}"));
        }
        let attributes = if replace {
            Attributes {
                content_type: i.content_type,
                content_encoding: super::put::stored_encoding(i.content_encoding),
                content_disposition: i.content_disposition,
                content_language: i.content_language,
                cache_control: i.cache_control,
                metadata: sorted(i.metadata),
            }
        } else {
            src.attributes.clone()
        };
        // Tags go with the copy unless the request replaces them.
        let tags = match i.tagging_directive.as_ref().map(|d| d.as_str()) {
            Some(TaggingDirective::REPLACE) => super::tagging::of_header(i.tagging.as_deref())?,
            _ => src.tags.clone(),
        };
        let owner = Owner { bucket: i.bucket.clone(), key: i.key.clone(), part: None };
        // The copy's class is the one it asks for: STANDARD unless it names another.
        let class = self.core.class_of(i.storage_class.as_ref().map(|c| c.as_str()))?;
        let body = StreamingBlob::wrap(self.core.read(src.class.pool.clone(), src.segments.clone(), 0, src.size).ready().await?);
        let written = self.core.write_data(&owner, body, Default::default(), MAX_PUT_BYTES, class.pool.as_deref()).await?;
        let data = written.segment.data;
        let manifest = Manifest { size: written.segment.size, etag: hex(&written.md5), modified_ms: records::now_ms(), attributes, segments: segments_of(written.segment), completed_from: None, owner: object_owner, acl, tags, class, ..Manifest::default() };
        let own = vec![Own { data, owner: owner.clone(), intent: written.intent }];
        let committed = match self.core.commit(&i.bucket, &i.key, &manifest, |_| Ok(()), own, record.versioning()).await {
            Ok(m) => m,
            Err(e) => {
                self.abandon(&e, data, &owner).await;
                return Err(e);
            }
        };
        Ok(S3Response::new(CopyObjectOutput {
            copy_object_result: Some(CopyObjectResult { e_tag: Some(ETag::Strong(committed.etag)), last_modified: Some(timestamp(committed.modified_ms)), ..Default::default() }),
            copy_source_version_id: src.version.clone(),
            version_id: committed.version,
            ..Default::default()
        }))
    }
}

pub(super) struct CopyConditions {
    pub(super) if_match: Option<ETagCondition>,
    pub(super) if_none_match: Option<ETagCondition>,
    pub(super) if_modified_since: Option<Timestamp>,
    pub(super) if_unmodified_since: Option<Timestamp>,
}
