//! Bucket operations: create, delete (when empty), head, location, list.

use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result};

use super::acls::{for_new_bucket, Asked};
use super::convert::timestamp;
use crate::access::Principal;
use super::lookup::Gateway;
use crate::kv::{Cond, Durability, KvError, Pages};
use crate::layout;
use crate::records::{self, BucketRecord};

impl Gateway {
    pub(super) async fn create_bucket_in(&self, req: S3Request<CreateBucketInput>) -> S3Result<S3Response<CreateBucketOutput>> {
        let principal = &crate::access::granted(&req.extensions)?.principal;
        let i = &req.input;
        let bucket = &i.bucket;
        super::limits::check_bucket_name(bucket)?;
        let asked = Asked::headers(i.acl.as_ref().map(|a| a.as_str()), i.grant_read.as_ref(), i.grant_write.as_ref(), i.grant_read_acp.as_ref(), i.grant_write_acp.as_ref(), i.grant_full_control.as_ref());
        let record = for_new_bucket(principal, &asked, i.object_ownership.as_ref().map(|o| o.as_str()))?;
        match self.core.kv.put(&layout::bucket(bucket), records::encode(&record), Cond::Absent, Durability::Through).await {
            Ok(_) => Ok(S3Response::new(CreateBucketOutput { location: Some(format!("/{bucket}")) })),
            Err(KvError::Mismatch) => match self.bucket_record_versioned(bucket).await {
                Ok((existing, _)) if existing.owner_id() != record.owner_id() => Err(s3_error!(BucketAlreadyExists, "The requested bucket name is not available. Please select a different name and try again.")),
                _ => Err(s3_error!(BucketAlreadyOwnedByYou, "Your previous request to create the named bucket succeeded and you already own it.")),
            },
            Err(e) => Err(e.into()),
        }
    }

    pub(super) async fn delete_bucket_in(&self, req: S3Request<DeleteBucketInput>) -> S3Result<S3Response<DeleteBucketOutput>> {
        let bucket = req.input.bucket;
        self.bucket_exists(&bucket).await?;
        let kv = &self.core.kv;
        let objects = layout::object_prefix(&bucket);
        let uploads = layout::upload_prefix(&bucket);
        let kept = layout::version_prefix(&bucket);
        let has_object = !kv.range(&objects.clone().freeze(), &layout::last_under(objects), 1).await?.is_empty();
        // Versions and delete markers count: S3 deletes a bucket only once every one is gone.
        let has_version = !kv.range(&kept.clone().freeze(), &layout::last_under(kept), 1).await?.is_empty();
        if has_object || has_version {
            return Err(s3_error!(BucketNotEmpty, "The bucket you tried to delete is not empty"));
        }
        // Uploads left unfinished go with the bucket, as in S3, Ceph and MinIO: each aborted
        // as AbortMultipartUpload aborts it (its parts' data released to the sweeper). One
        // being completed right now is about to make an object: the bucket is not empty.
        let mut pages = Pages::new((uploads.clone().freeze(), layout::last_under(uploads)), super::limits::LIST_FETCH);
        while let Some(keys) = pages.next(kv).await? {
            for k in keys {
                let Some(s) = kv.get(&k).await? else { continue };
                let record: records::UploadRecord = records::decode("upload", &s.value)?;
                if record.completing.is_some_and(|c| c.younger_than(self.core.grace)) {
                    return Err(s3_error!(BucketNotEmpty, "an upload in the bucket is being completed"));
                }
                let Some((_, key, id)) = super::finish::upload_parts_of(&k) else { continue };
                match Gateway::abort(&self.core, &bucket, &key, id, s.version).await {
                    Ok(()) => {}
                    // Completed or aborted meanwhile: the object check below decides.
                    Err(e) if *e.code() == s3s::S3ErrorCode::NoSuchUpload => {}
                    Err(e) => return Err(e),
                }
            }
        }
        let objects = layout::object_prefix(&bucket);
        if !kv.range(&objects.clone().freeze(), &layout::last_under(objects), 1).await?.is_empty() {
            return Err(s3_error!(BucketNotEmpty, "The bucket you tried to delete is not empty"));
        }
        kv.delete(&layout::bucket(&bucket), Cond::Any, Durability::Through).await?;
        Ok(S3Response::new(DeleteBucketOutput {}))
    }

    pub(super) async fn head_bucket_in(&self, req: S3Request<HeadBucketInput>) -> S3Result<S3Response<HeadBucketOutput>> {
        self.bucket_exists(&req.input.bucket).await?;
        Ok(S3Response::new(HeadBucketOutput::default()))
    }

    pub(super) async fn get_bucket_location_in(&self, req: S3Request<GetBucketLocationInput>) -> S3Result<S3Response<GetBucketLocationOutput>> {
        self.bucket_exists(&req.input.bucket).await?;
        Ok(S3Response::new(GetBucketLocationOutput::default()))
    }

    /// Each requester sees the buckets it owns (the administrators every bucket).
    pub(super) async fn list_buckets_in(&self, req: S3Request<ListBucketsInput>) -> S3Result<S3Response<ListBucketsOutput>> {
        let principal = &crate::access::granted(&req.extensions)?.principal;
        let me = principal.id().unwrap_or(records::ADMIN_ID);
        let mut pages = Pages::new(layout::buckets(), crate::objects::PAGE);
        let mut buckets = Vec::new();
        while let Some(keys) = pages.next(&self.core.kv).await? {
            for k in &keys {
                let Some(name) = layout::bucket_name(k) else { continue };
                let Some(s) = self.core.kv.get(k).await? else { continue };
                let record: BucketRecord = records::decode("bucket", &s.value)?;
                if *principal != Principal::Admin && record.owner_id() != me {
                    continue;
                }
                buckets.push(Bucket { name: Some(name.to_owned()), creation_date: Some(timestamp(record.created_ms)), bucket_region: None });
            }
        }
        Ok(S3Response::new(ListBucketsOutput {
            buckets: Some(buckets),
            owner: Some(Owner { display_name: Some(principal.display_name().to_owned()), id: Some(me.to_owned()) }),
            ..Default::default()
        }))
    }
}

