//! DeleteObject and DeleteObjects: an object removed, or in a versioned bucket hidden by a
//! delete marker, or one version of it removed for good.

use futures_util::stream::{self, StreamExt};
use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result};

use super::conditions::etag_matches;
use super::limits::{check_key, LIST_FETCH, MAX_LIST};
use super::lookup::Gateway;
use crate::records::{Manifest, Versioning};
use crate::versions;

/// What a delete did: the version it removed or the delete marker it made.
#[derive(Default)]
struct Deleted {
    version_id: Option<String>,
    delete_marker: bool,
}

impl Gateway {
    /// Deletes `key` (its current version, or `version` for good) under `versioning`.
    async fn delete_one(&self, bucket: &str, key: &str, version: Option<&str>, versioning: Option<Versioning>, if_match: Option<&ETagCondition>) -> S3Result<Deleted> {
        check_key(key)?;
        let check = |old: Option<&Manifest>| match (if_match, old) {
            (Some(c), Some(m)) if !etag_matches(m, c) => Err(s3_error!(PreconditionFailed, "If-Match does not match the object's ETag")),
            // As S3 answers a conditional delete of a key with no current object.
            (Some(_), None) => Err(s3_error!(NoSuchKey, "If-Match names an object that does not exist")),
            _ => Ok(()),
        };
        if let Some(id) = version {
            if !versions::valid_id(id) {
                return Err(s3_error!(InvalidArgument, "Invalid version id specified"));
            }
            // A version that does not exist is deleted already: 204, as S3 answers.
            let removed = self.core.remove_version(bucket, key, id).await?;
            return Ok(Deleted { version_id: Some(id.to_owned()), delete_marker: removed.is_some_and(|m| m.delete_marker) });
        }
        match versioning {
            None => {
                self.core.remove(bucket, key, check, if_match.is_some()).await?;
                Ok(Deleted::default())
            }
            Some(v) => {
                let marker = self.core.delete_versioned(bucket, key, v, check, if_match.is_some()).await?;
                Ok(Deleted { version_id: Some(marker.version_id().to_owned()), delete_marker: true })
            }
        }
    }

    pub(super) async fn delete_object_in(&self, req: S3Request<DeleteObjectInput>) -> S3Result<S3Response<DeleteObjectOutput>> {
        let granted = crate::access::granted(&req.extensions)?;
        let i = &req.input;
        let versioning = self.versioning(granted, &i.bucket).await?;
        let d = self.delete_one(&i.bucket, &i.key, i.version_id.as_deref(), versioning, i.if_match.as_ref()).await?;
        Ok(S3Response::new(DeleteObjectOutput { version_id: d.version_id, delete_marker: d.delete_marker.then_some(true), ..Default::default() }))
    }

    pub(super) async fn delete_objects_in(&self, req: S3Request<DeleteObjectsInput>) -> S3Result<S3Response<DeleteObjectsOutput>> {
        let granted = crate::access::granted(&req.extensions)?.clone();
        let granted = &granted;
        let i = req.input;
        let versioning = self.versioning(granted, &i.bucket).await?;
        if i.delete.objects.len() > MAX_LIST as usize {
            return Err(s3_error!(MalformedXML, "at most {MAX_LIST} keys per DeleteObjects"));
        }
        let quiet = i.delete.quiet.unwrap_or(false);
        let (mut deleted, mut errors) = (Vec::new(), Vec::new());
        let bucket = &i.bucket;
        let results: Vec<(ObjectIdentifier, S3Result<Deleted>)> = stream::iter(i.delete.objects)
            .map(|o| async move {
                let r = match granted.key_allowed(&o.key, "DeleteObject", o.version_id.is_some()) {
                    Ok(()) => self.delete_one(bucket, &o.key, o.version_id.as_deref(), versioning, None).await,
                    Err(e) => Err(e),
                };
                (o, r)
            })
            .buffered(LIST_FETCH)
            .collect()
            .await;
        for (o, r) in results {
            match r {
                Ok(d) if !quiet => {
                    // The version asked for, and the marker made or removed.
                    let marker_id = d.version_id.filter(|_| d.delete_marker);
                    deleted.push(DeletedObject { key: Some(o.key), version_id: o.version_id, delete_marker: d.delete_marker.then_some(true), delete_marker_version_id: marker_id });
                }
                Ok(_) => {}
                Err(e) => errors.push(Error { key: Some(o.key), code: Some(e.code().as_str().to_owned()), message: e.message().map(str::to_owned), version_id: o.version_id }),
            }
        }
        Ok(S3Response::new(DeleteObjectsOutput {
            deleted: (!deleted.is_empty()).then_some(deleted),
            errors: (!errors.is_empty()).then_some(errors),
            ..Default::default()
        }))
    }
}
