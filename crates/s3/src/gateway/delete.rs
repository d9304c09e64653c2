//! DeleteObject and DeleteObjects.

use futures_util::stream::{self, StreamExt};
use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result};

use super::conditions::etag_matches;
use super::limits::{check_key, LIST_FETCH, MAX_LIST};
use super::lookup::Gateway;

impl Gateway {
    pub(super) async fn delete_object_in(&self, req: S3Request<DeleteObjectInput>) -> S3Result<S3Response<DeleteObjectOutput>> {
        let i = req.input;
        check_key(&i.key)?;
        self.bucket_exists(&i.bucket).await?;
        let if_match = i.if_match.clone();
        self.core
            .remove(
                &i.bucket,
                &i.key,
                |old| match (&if_match, old) {
                    (Some(c), Some(m)) if !etag_matches(m, c) => Err(s3_error!(PreconditionFailed, "If-Match does not match the object's ETag")),
                    _ => Ok(()),
                },
                if_match.is_some(),
            )
            .await?;
        Ok(S3Response::new(DeleteObjectOutput::default()))
    }

    pub(super) async fn delete_objects_in(&self, req: S3Request<DeleteObjectsInput>) -> S3Result<S3Response<DeleteObjectsOutput>> {
        let granted = crate::access::granted(&req.extensions)?.clone();
        let granted = &granted;
        let i = req.input;
        self.bucket_exists(&i.bucket).await?;
        if i.delete.objects.len() > MAX_LIST as usize {
            return Err(s3_error!(MalformedXML, "at most {MAX_LIST} keys per DeleteObjects"));
        }
        let quiet = i.delete.quiet.unwrap_or(false);
        let (mut deleted, mut errors) = (Vec::new(), Vec::new());
        let bucket = &i.bucket;
        let results: Vec<(String, S3Result<()>)> = stream::iter(i.delete.objects)
            .map(|o| async move {
                let r = match check_key(&o.key).and_then(|()| granted.key_allowed(&o.key, "DeleteObject")) {
                    Ok(()) => self.core.remove(bucket, &o.key, |_| Ok(()), false).await.map(|_| ()),
                    Err(e) => Err(e),
                };
                (o.key, r)
            })
            .buffered(LIST_FETCH)
            .collect()
            .await;
        for (key, r) in results {
            match r {
                Ok(()) if !quiet => deleted.push(DeletedObject { key: Some(key), ..Default::default() }),
                Ok(()) => {}
                Err(e) => errors.push(Error { key: Some(key), code: Some(e.code().as_str().to_owned()), message: e.message().map(str::to_owned), version_id: None }),
            }
        }
        Ok(S3Response::new(DeleteObjectsOutput {
            deleted: (!deleted.is_empty()).then_some(deleted),
            errors: (!errors.is_empty()).then_some(errors),
            ..Default::default()
        }))
    }
}
