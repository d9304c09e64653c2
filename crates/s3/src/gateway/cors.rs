//! A bucket's CORS configuration in S3's forms (`crate::cors` decides requests by it).

use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result};

use super::lookup::Gateway;
use crate::cors::{self, CorsRule};

impl Gateway {
    pub(super) async fn get_bucket_cors_in(&self, req: S3Request<GetBucketCorsInput>) -> S3Result<S3Response<GetBucketCorsOutput>> {
        let record = self.bucket_record(crate::access::granted(&req.extensions)?, &req.input.bucket).await?;
        let Some(rules) = &record.cors else { return Err(s3_error!(NoSuchCORSConfiguration, "The CORS configuration does not exist")) };
        let rules = rules
            .iter()
            .map(|r| CORSRule {
                id: r.id.clone(),
                allowed_origins: r.allowed_origins.clone(),
                allowed_methods: r.allowed_methods.clone(),
                allowed_headers: (!r.allowed_headers.is_empty()).then(|| r.allowed_headers.clone()),
                expose_headers: (!r.expose_headers.is_empty()).then(|| r.expose_headers.clone()),
                max_age_seconds: r.max_age_seconds,
            })
            .collect();
        Ok(S3Response::new(GetBucketCorsOutput { cors_rules: Some(rules) }))
    }

    pub(super) async fn put_bucket_cors_in(&self, req: S3Request<PutBucketCorsInput>) -> S3Result<S3Response<PutBucketCorsOutput>> {
        let i = req.input;
        let rules: Vec<CorsRule> = i
            .cors_configuration
            .cors_rules
            .into_iter()
            .map(|r| CorsRule {
                id: r.id,
                allowed_origins: r.allowed_origins,
                allowed_methods: r.allowed_methods,
                allowed_headers: r.allowed_headers.unwrap_or_default(),
                expose_headers: r.expose_headers.unwrap_or_default(),
                max_age_seconds: r.max_age_seconds,
            })
            .collect();
        cors::check(&rules).map_err(|e| s3_error!(InvalidRequest, "{e}"))?;
        self.set_in_bucket(&i.bucket, |record| record.cors = Some(rules.clone())).await?;
        Ok(S3Response::new(PutBucketCorsOutput {}))
    }

    pub(super) async fn delete_bucket_cors_in(&self, req: S3Request<DeleteBucketCorsInput>) -> S3Result<S3Response<DeleteBucketCorsOutput>> {
        self.set_in_bucket(&req.input.bucket, |record| record.cors = None).await?;
        Ok(S3Response::new(DeleteBucketCorsOutput {}))
    }
}
