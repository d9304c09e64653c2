//! A bucket's lifecycle configuration in S3's forms (`crate::lifecycle` checks and applies it).

use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result};

use super::lookup::Gateway;

impl Gateway {
    pub(super) async fn get_bucket_lifecycle_in(&self, req: S3Request<GetBucketLifecycleConfigurationInput>) -> S3Result<S3Response<GetBucketLifecycleConfigurationOutput>> {
        let record = self.bucket_record(crate::access::granted(&req.extensions)?, &req.input.bucket).await?;
        let Some(rules) = &record.lifecycle else { return Err(s3_error!(NoSuchLifecycleConfiguration, "The lifecycle configuration does not exist")) };
        Ok(S3Response::new(GetBucketLifecycleConfigurationOutput { rules: Some(crate::lifecycle::to_s3(rules)), ..Default::default() }))
    }

    pub(super) async fn put_bucket_lifecycle_in(&self, req: S3Request<PutBucketLifecycleConfigurationInput>) -> S3Result<S3Response<PutBucketLifecycleConfigurationOutput>> {
        let i = req.input;
        let Some(config) = i.lifecycle_configuration else { return Err(s3_error!(MalformedXML, "no LifecycleConfiguration")) };
        let rules = crate::lifecycle::from_s3(config.rules, &self.core.classes)?;
        self.set_in_bucket(&i.bucket, |record| record.lifecycle = Some(rules.clone())).await?;
        Ok(S3Response::new(PutBucketLifecycleConfigurationOutput::default()))
    }

    pub(super) async fn delete_bucket_lifecycle_in(&self, req: S3Request<DeleteBucketLifecycleInput>) -> S3Result<S3Response<DeleteBucketLifecycleOutput>> {
        self.set_in_bucket(&req.input.bucket, |record| record.lifecycle = None).await?;
        Ok(S3Response::new(DeleteBucketLifecycleOutput {}))
    }
}
