//! The S3 operations over `objects::Core`: buckets, objects, listings, copies and multipart
//! uploads, with S3's own errors. Requests arrive authenticated (SigV4, checked by `s3s`).
//!
//! The `S3` trait's implementation here is a thin layer over the operations, each in the
//! module of its idea: `buckets`; `put`, `read` (GET and HEAD, ranges and parts), `copy`,
//! `delete`; `multipart` (creation and parts) and `finish` (completion, abort, stale
//! completions), with `waiting` (a completion waiting for another of its upload) and `marks` (its mark on the
//! upload record); `listings`; `versions` (versioning and ListObjectVersions); `cors`; `tagging`. Beside them: `lookup` (the `Gateway` and the records operations
//! look up first), `limits`, `conditions`, `checksums`, `convert` (S3's forms of stored
//! values) and `errors`.

mod acls;
mod bucket_config;
mod buckets;
mod checksums;
mod conditions;
mod convert;
mod copy;
mod cors;
mod lifecycle;
mod delete;
mod errors;
mod finish;
mod limits;
mod tidy;
mod listings;
mod lookup;
mod marks;
mod multipart;
mod put;
mod read;
mod tagging;
mod versions;
mod waiting;

use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result, S3};

pub use tidy::tidy_uploads;
pub use lookup::Gateway;
pub use limits::MIN_PART_BYTES;
pub use marks::room_for_left_marks;

#[async_trait::async_trait]
impl S3 for Gateway {
    async fn create_bucket(&self, req: S3Request<CreateBucketInput>) -> S3Result<S3Response<CreateBucketOutput>> {
        self.create_bucket_in(req).await
    }

    async fn delete_bucket(&self, req: S3Request<DeleteBucketInput>) -> S3Result<S3Response<DeleteBucketOutput>> {
        self.delete_bucket_in(req).await
    }

    async fn head_bucket(&self, req: S3Request<HeadBucketInput>) -> S3Result<S3Response<HeadBucketOutput>> {
        self.head_bucket_in(req).await
    }

    async fn get_bucket_location(&self, req: S3Request<GetBucketLocationInput>) -> S3Result<S3Response<GetBucketLocationOutput>> {
        self.get_bucket_location_in(req).await
    }

    async fn list_buckets(&self, req: S3Request<ListBucketsInput>) -> S3Result<S3Response<ListBucketsOutput>> {
        self.list_buckets_in(req).await
    }

    async fn put_object(&self, req: S3Request<PutObjectInput>) -> S3Result<S3Response<PutObjectOutput>> {
        limits::check_length_declared(&req.headers)?;
        let granted = crate::access::granted(&req.extensions)?;
        let out = self.put(req.input, req.trailing_headers, granted).await?;
        Ok(S3Response::new(out))
    }

    async fn get_object(&self, req: S3Request<GetObjectInput>) -> S3Result<S3Response<GetObjectOutput>> {
        self.get_object_in(req).await
    }

    async fn head_object(&self, req: S3Request<HeadObjectInput>) -> S3Result<S3Response<HeadObjectOutput>> {
        self.head_object_in(req).await
    }

    async fn delete_object(&self, req: S3Request<DeleteObjectInput>) -> S3Result<S3Response<DeleteObjectOutput>> {
        self.delete_object_in(req).await
    }

    async fn delete_objects(&self, req: S3Request<DeleteObjectsInput>) -> S3Result<S3Response<DeleteObjectsOutput>> {
        self.delete_objects_in(req).await
    }

    async fn copy_object(&self, req: S3Request<CopyObjectInput>) -> S3Result<S3Response<CopyObjectOutput>> {
        self.copy_object_in(req).await
    }

    async fn list_objects(&self, req: S3Request<ListObjectsInput>) -> S3Result<S3Response<ListObjectsOutput>> {
        self.list_objects_in(req).await
    }

    async fn list_objects_v2(&self, req: S3Request<ListObjectsV2Input>) -> S3Result<S3Response<ListObjectsV2Output>> {
        self.list_objects_v2_in(req).await
    }

    async fn create_multipart_upload(&self, req: S3Request<CreateMultipartUploadInput>) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
        self.create_multipart_upload_in(req).await
    }

    async fn upload_part(&self, req: S3Request<UploadPartInput>) -> S3Result<S3Response<UploadPartOutput>> {
        limits::check_length_declared(&req.headers)?;
        self.upload_part_in(req).await
    }

    async fn upload_part_copy(&self, req: S3Request<UploadPartCopyInput>) -> S3Result<S3Response<UploadPartCopyOutput>> {
        self.upload_part_copy_in(req).await
    }

    async fn list_parts(&self, req: S3Request<ListPartsInput>) -> S3Result<S3Response<ListPartsOutput>> {
        self.list_parts_in(req).await
    }

    async fn list_multipart_uploads(&self, req: S3Request<ListMultipartUploadsInput>) -> S3Result<S3Response<ListMultipartUploadsOutput>> {
        self.list_multipart_uploads_in(req).await
    }

    async fn abort_multipart_upload(&self, req: S3Request<AbortMultipartUploadInput>) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        self.abort_multipart_upload_in(req).await
    }

    async fn get_bucket_acl(&self, req: S3Request<GetBucketAclInput>) -> S3Result<S3Response<GetBucketAclOutput>> {
        self.get_bucket_acl_in(req).await
    }

    async fn put_bucket_acl(&self, req: S3Request<PutBucketAclInput>) -> S3Result<S3Response<PutBucketAclOutput>> {
        self.put_bucket_acl_in(req).await
    }

    async fn get_object_acl(&self, req: S3Request<GetObjectAclInput>) -> S3Result<S3Response<GetObjectAclOutput>> {
        self.get_object_acl_in(req).await
    }

    async fn put_object_acl(&self, req: S3Request<PutObjectAclInput>) -> S3Result<S3Response<PutObjectAclOutput>> {
        self.put_object_acl_in(req).await
    }

    async fn get_bucket_policy(&self, req: S3Request<GetBucketPolicyInput>) -> S3Result<S3Response<GetBucketPolicyOutput>> {
        self.get_bucket_policy_in(req).await
    }

    async fn put_bucket_policy(&self, req: S3Request<PutBucketPolicyInput>) -> S3Result<S3Response<PutBucketPolicyOutput>> {
        self.put_bucket_policy_in(req).await
    }

    async fn delete_bucket_policy(&self, req: S3Request<DeleteBucketPolicyInput>) -> S3Result<S3Response<DeleteBucketPolicyOutput>> {
        self.delete_bucket_policy_in(req).await
    }

    async fn get_bucket_policy_status(&self, req: S3Request<GetBucketPolicyStatusInput>) -> S3Result<S3Response<GetBucketPolicyStatusOutput>> {
        self.get_bucket_policy_status_in(req).await
    }

    async fn get_public_access_block(&self, req: S3Request<GetPublicAccessBlockInput>) -> S3Result<S3Response<GetPublicAccessBlockOutput>> {
        self.get_public_access_block_in(req).await
    }

    async fn put_public_access_block(&self, req: S3Request<PutPublicAccessBlockInput>) -> S3Result<S3Response<PutPublicAccessBlockOutput>> {
        self.put_public_access_block_in(req).await
    }

    async fn delete_public_access_block(&self, req: S3Request<DeletePublicAccessBlockInput>) -> S3Result<S3Response<DeletePublicAccessBlockOutput>> {
        self.delete_public_access_block_in(req).await
    }

    async fn get_bucket_ownership_controls(&self, req: S3Request<GetBucketOwnershipControlsInput>) -> S3Result<S3Response<GetBucketOwnershipControlsOutput>> {
        self.get_bucket_ownership_controls_in(req).await
    }

    async fn put_bucket_ownership_controls(&self, req: S3Request<PutBucketOwnershipControlsInput>) -> S3Result<S3Response<PutBucketOwnershipControlsOutput>> {
        self.put_bucket_ownership_controls_in(req).await
    }

    async fn delete_bucket_ownership_controls(&self, req: S3Request<DeleteBucketOwnershipControlsInput>) -> S3Result<S3Response<DeleteBucketOwnershipControlsOutput>> {
        self.delete_bucket_ownership_controls_in(req).await
    }

    async fn get_object_tagging(&self, req: S3Request<GetObjectTaggingInput>) -> S3Result<S3Response<GetObjectTaggingOutput>> {
        self.get_object_tagging_in(req).await
    }

    async fn put_object_tagging(&self, req: S3Request<PutObjectTaggingInput>) -> S3Result<S3Response<PutObjectTaggingOutput>> {
        self.put_object_tagging_in(req).await
    }

    async fn delete_object_tagging(&self, req: S3Request<DeleteObjectTaggingInput>) -> S3Result<S3Response<DeleteObjectTaggingOutput>> {
        self.delete_object_tagging_in(req).await
    }

    async fn get_bucket_tagging(&self, req: S3Request<GetBucketTaggingInput>) -> S3Result<S3Response<GetBucketTaggingOutput>> {
        self.get_bucket_tagging_in(req).await
    }

    async fn put_bucket_tagging(&self, req: S3Request<PutBucketTaggingInput>) -> S3Result<S3Response<PutBucketTaggingOutput>> {
        self.put_bucket_tagging_in(req).await
    }

    async fn delete_bucket_tagging(&self, req: S3Request<DeleteBucketTaggingInput>) -> S3Result<S3Response<DeleteBucketTaggingOutput>> {
        self.delete_bucket_tagging_in(req).await
    }

    async fn get_object_attributes(&self, req: S3Request<GetObjectAttributesInput>) -> S3Result<S3Response<GetObjectAttributesOutput>> {
        self.get_object_attributes_in(req).await
    }

    async fn get_bucket_cors(&self, req: S3Request<GetBucketCorsInput>) -> S3Result<S3Response<GetBucketCorsOutput>> {
        self.get_bucket_cors_in(req).await
    }

    async fn put_bucket_cors(&self, req: S3Request<PutBucketCorsInput>) -> S3Result<S3Response<PutBucketCorsOutput>> {
        self.put_bucket_cors_in(req).await
    }

    async fn delete_bucket_cors(&self, req: S3Request<DeleteBucketCorsInput>) -> S3Result<S3Response<DeleteBucketCorsOutput>> {
        self.delete_bucket_cors_in(req).await
    }

    async fn get_bucket_lifecycle_configuration(&self, req: S3Request<GetBucketLifecycleConfigurationInput>) -> S3Result<S3Response<GetBucketLifecycleConfigurationOutput>> {
        self.get_bucket_lifecycle_in(req).await
    }

    async fn put_bucket_lifecycle_configuration(&self, req: S3Request<PutBucketLifecycleConfigurationInput>) -> S3Result<S3Response<PutBucketLifecycleConfigurationOutput>> {
        self.put_bucket_lifecycle_in(req).await
    }

    async fn delete_bucket_lifecycle(&self, req: S3Request<DeleteBucketLifecycleInput>) -> S3Result<S3Response<DeleteBucketLifecycleOutput>> {
        self.delete_bucket_lifecycle_in(req).await
    }

    async fn get_bucket_versioning(&self, req: S3Request<GetBucketVersioningInput>) -> S3Result<S3Response<GetBucketVersioningOutput>> {
        self.get_bucket_versioning_in(req).await
    }

    async fn put_bucket_versioning(&self, req: S3Request<PutBucketVersioningInput>) -> S3Result<S3Response<PutBucketVersioningOutput>> {
        self.put_bucket_versioning_in(req).await
    }

    async fn list_object_versions(&self, req: S3Request<ListObjectVersionsInput>) -> S3Result<S3Response<ListObjectVersionsOutput>> {
        self.list_object_versions_in(req).await
    }

    async fn complete_multipart_upload(&self, req: S3Request<CompleteMultipartUploadInput>) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        self.complete_multipart_upload_in(req).await
    }
}

#[cfg(test)]
mod tests {
    use super::checksums::base64_md5;
    use super::convert::{decode_token, encode_token, hex, unhex, url_encode};
    use super::finish::upload_parts_of;
    use super::limits::{check_key, MAX_KEY_BYTES};
    use crate::layout;

    #[test]
    fn encodings() {
        assert_eq!(url_encode("a b/ä+c"), "a%20b/%C3%A4%2Bc");
        assert_eq!(decode_token(&encode_token("dir/ä x")).unwrap(), "dir/ä x");
        assert!(decode_token("zz").is_err());
        assert_eq!(unhex(&hex(&[0, 255, 16])).unwrap(), vec![0, 255, 16]);
        assert_eq!(base64_md5("1B2M2Y8AsgTpgAmY7PhCfg=="), Some([0xd4, 0x1d, 0x8c, 0xd9, 0x8f, 0x00, 0xb2, 0x04, 0xe9, 0x80, 0x09, 0x98, 0xec, 0xf8, 0x42, 0x7e]));
        assert!(check_key("a\0b").is_err());
        assert!(check_key(&"k".repeat(MAX_KEY_BYTES + 1)).is_err());
        assert_eq!(upload_parts_of(&layout::upload("bk", "a/b", 9)), Some(("bk".into(), "a/b".into(), 9)));
        assert_eq!(super::put::stored_encoding(Some("gzip, aws-chunked".into())).as_deref(), Some("gzip"));
        assert_eq!(super::put::stored_encoding(Some("aws-chunked".into())), None);
        assert_eq!(super::put::stored_encoding(Some("br".into())).as_deref(), Some("br"));
    }
}
