//! A bucket's access configuration: its policy, public access block and object ownership,
//! each kept in the bucket's record and answered with S3's "not configured" errors when unset.

use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result};

use super::lookup::Gateway;
use crate::access;
use crate::access::policy::Policy as BucketPolicy;
use crate::records::{BucketRecord, Ownership, PublicAccessBlock as Block};

impl Gateway {
    /// Sets part of the bucket's record, with nothing to check on the way.
    pub(super) async fn set_in_bucket(&self, bucket: &str, set: impl Fn(&mut BucketRecord)) -> S3Result<()> {
        self.update_bucket(bucket, |record| {
            set(record);
            Ok(())
        })
        .await
        .map(|_| ())
    }

    pub(super) async fn get_bucket_policy_in(&self, req: S3Request<GetBucketPolicyInput>) -> S3Result<S3Response<GetBucketPolicyOutput>> {
        let record = self.bucket_record(access::granted(&req.extensions)?, &req.input.bucket).await?.into_owned();
        match record.policy {
            Some(policy) => Ok(S3Response::new(GetBucketPolicyOutput { policy: Some(policy) })),
            None => Err(s3_error!(NoSuchBucketPolicy, "The bucket policy does not exist")),
        }
    }

    pub(super) async fn put_bucket_policy_in(&self, req: S3Request<PutBucketPolicyInput>) -> S3Result<S3Response<PutBucketPolicyOutput>> {
        let i = req.input;
        let parsed = BucketPolicy::parse(&i.policy, &i.bucket).map_err(|e| s3_error!(MalformedPolicy, "{e}"))?;
        self.update_bucket(&i.bucket, |record| {
            if record.block().block_public_policy && parsed.is_public() {
                return Err(s3_error!(AccessDenied, "public policies are blocked on this bucket (BlockPublicPolicy)"));
            }
            record.policy = Some(i.policy.clone());
            Ok(())
        })
        .await?;
        Ok(S3Response::new(PutBucketPolicyOutput {}))
    }

    pub(super) async fn delete_bucket_policy_in(&self, req: S3Request<DeleteBucketPolicyInput>) -> S3Result<S3Response<DeleteBucketPolicyOutput>> {
        self.set_in_bucket(&req.input.bucket, |record| record.policy = None).await?;
        Ok(S3Response::new(DeleteBucketPolicyOutput {}))
    }

    pub(super) async fn get_bucket_policy_status_in(&self, req: S3Request<GetBucketPolicyStatusInput>) -> S3Result<S3Response<GetBucketPolicyStatusOutput>> {
        let record = self.bucket_record(access::granted(&req.extensions)?, &req.input.bucket).await?.into_owned();
        let i = req.input;
        let Some(text) = record.policy else { return Err(s3_error!(NoSuchBucketPolicy, "The bucket policy does not exist")) };
        let public = BucketPolicy::parse(&text, &i.bucket).is_ok_and(|p| p.is_public());
        Ok(S3Response::new(GetBucketPolicyStatusOutput { policy_status: Some(PolicyStatus { is_public: Some(public) }) }))
    }

    pub(super) async fn get_public_access_block_in(&self, req: S3Request<GetPublicAccessBlockInput>) -> S3Result<S3Response<GetPublicAccessBlockOutput>> {
        let record = self.bucket_record(access::granted(&req.extensions)?, &req.input.bucket).await?.into_owned();
        let Some(b) = record.public_access_block else {
            let mut e = s3s::S3Error::with_message(s3s::S3ErrorCode::Custom("NoSuchPublicAccessBlockConfiguration".into()), "The public access block configuration was not found");
            e.set_status_code(http::StatusCode::NOT_FOUND);
            return Err(e);
        };
        Ok(S3Response::new(GetPublicAccessBlockOutput {
            public_access_block_configuration: Some(PublicAccessBlockConfiguration {
                block_public_acls: Some(b.block_public_acls),
                ignore_public_acls: Some(b.ignore_public_acls),
                block_public_policy: Some(b.block_public_policy),
                restrict_public_buckets: Some(b.restrict_public_buckets),
            }),
        }))
    }

    pub(super) async fn put_public_access_block_in(&self, req: S3Request<PutPublicAccessBlockInput>) -> S3Result<S3Response<PutPublicAccessBlockOutput>> {
        let c = &req.input.public_access_block_configuration;
        let block = Block {
            block_public_acls: c.block_public_acls.unwrap_or(false),
            ignore_public_acls: c.ignore_public_acls.unwrap_or(false),
            block_public_policy: c.block_public_policy.unwrap_or(false),
            restrict_public_buckets: c.restrict_public_buckets.unwrap_or(false),
        };
        self.set_in_bucket(&req.input.bucket, |record| record.public_access_block = Some(block)).await?;
        Ok(S3Response::new(PutPublicAccessBlockOutput {}))
    }

    pub(super) async fn delete_public_access_block_in(&self, req: S3Request<DeletePublicAccessBlockInput>) -> S3Result<S3Response<DeletePublicAccessBlockOutput>> {
        self.set_in_bucket(&req.input.bucket, |record| record.public_access_block = None).await?;
        Ok(S3Response::new(DeletePublicAccessBlockOutput {}))
    }

    pub(super) async fn get_bucket_ownership_controls_in(&self, req: S3Request<GetBucketOwnershipControlsInput>) -> S3Result<S3Response<GetBucketOwnershipControlsOutput>> {
        let record = self.bucket_record(access::granted(&req.extensions)?, &req.input.bucket).await?.into_owned();
        let Some(o) = record.ownership else {
            return Err(s3_error!(OwnershipControlsNotFoundError, "The bucket ownership controls were not found"));
        };
        let rule = OwnershipControlsRule { object_ownership: ObjectOwnership::from(o.as_str().to_owned()) };
        Ok(S3Response::new(GetBucketOwnershipControlsOutput { ownership_controls: Some(OwnershipControls { rules: vec![rule] }) }))
    }

    pub(super) async fn put_bucket_ownership_controls_in(&self, req: S3Request<PutBucketOwnershipControlsInput>) -> S3Result<S3Response<PutBucketOwnershipControlsOutput>> {
        let rules = &req.input.ownership_controls.rules;
        let [rule] = rules.as_slice() else { return Err(s3_error!(MalformedXML, "ownership controls have exactly one rule")) };
        let o = Ownership::parse(rule.object_ownership.as_str()).ok_or_else(|| s3_error!(MalformedXML, "unknown object ownership {}", rule.object_ownership.as_str()))?;
        self.set_in_bucket(&req.input.bucket, |record| record.ownership = Some(o)).await?;
        Ok(S3Response::new(PutBucketOwnershipControlsOutput {}))
    }

    pub(super) async fn delete_bucket_ownership_controls_in(&self, req: S3Request<DeleteBucketOwnershipControlsInput>) -> S3Result<S3Response<DeleteBucketOwnershipControlsOutput>> {
        self.set_in_bucket(&req.input.bucket, |record| record.ownership = None).await?;
        Ok(S3Response::new(DeleteBucketOwnershipControlsOutput {}))
    }
}
