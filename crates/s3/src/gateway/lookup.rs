//! The gateway over the object store, and the records its operations look up first: the
//! bucket, the object's manifest, the upload.

use std::sync::Arc;

use bytes::Bytes;
use s3s::{s3_error, S3Result};

use super::limits::check_key;
use crate::layout::{self, UploadId};
use crate::objects::Core;
use std::borrow::Cow;

use crate::access::{Decision, Granted};
use crate::records::{self, BucketRecord, Manifest, UploadRecord, Versioning};
use crate::kv::{Cond, Durability, KvError};
use crate::versions::Missing;

/// Attempts to change an object's record while other writers keep changing it.
const UPDATE_ATTEMPTS: usize = 5;

/// A delete marker asked for by its version id has no body: 405, as S3 answers.
pub(super) fn refuse_marker(m: &Manifest) -> S3Result<()> {
    if !m.delete_marker {
        return Ok(());
    }
    let mut e = s3_error!(MethodNotAllowed, "The specified method is not allowed against this resource.");
    e.set_headers(marker_headers(m));
    Err(e)
}

/// What S3 says of a delete marker met by a request: `x-amz-delete-marker` and its version.
pub(super) fn marker_headers(marker: &Manifest) -> http::HeaderMap {
    let mut h = http::HeaderMap::new();
    h.insert("x-amz-delete-marker", http::HeaderValue::from_static("true"));
    if let Ok(v) = http::HeaderValue::from_str(marker.version_id()) {
        h.insert("x-amz-version-id", v);
    }
    h
}

pub struct Gateway {
    pub(super) core: Arc<Core>,
}

impl Gateway {
    pub fn new(core: Arc<Core>) -> Gateway {
        Gateway { core }
    }

    pub(super) async fn bucket_exists(&self, bucket: &str) -> S3Result<()> {
        match self.core.kv.get(&layout::bucket(bucket)).await? {
            Some(_) => Ok(()),
            None => Err(s3_error!(NoSuchBucket, "The specified bucket does not exist: {bucket}")),
        }
    }

    /// The bucket's record, or NoSuchBucket: the one the request's access decision read, or
    /// read now (the administrators' requests are not decided by it).
    pub(super) async fn bucket_record<'a>(&self, granted: &'a Granted, bucket: &str) -> S3Result<Cow<'a, BucketRecord>> {
        match granted.record_of(bucket) {
            Some(record) => Ok(Cow::Borrowed(record)),
            None => Ok(Cow::Owned(self.bucket_record_versioned(bucket).await?.0)),
        }
    }

    pub(super) async fn bucket_record_versioned(&self, bucket: &str) -> S3Result<(BucketRecord, Bytes)> {
        match self.core.kv.get(&layout::bucket(bucket)).await? {
            Some(s) => Ok((records::decode("bucket", &s.value)?, s.version)),
            None => Err(s3_error!(NoSuchBucket, "The specified bucket does not exist: {bucket}")),
        }
    }

    /// The object (its current version, or `version`), if the request's access decision lets
    /// it be read (a missing object is AccessDenied to a requester who may not list the
    /// bucket, as in S3).
    pub(super) async fn readable(&self, decision: &Decision, bucket: &str, key: &str, version: Option<&str>) -> S3Result<Manifest> {
        match self.existing(bucket, key, version).await {
            Ok(m) => {
                decision.object(Some(&m))?;
                Ok(m)
            }
            Err(e) if matches!(e.code(), s3s::S3ErrorCode::NoSuchKey | s3s::S3ErrorCode::NoSuchVersion) => {
                decision.object(None)?;
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    /// `readable`, and not a delete marker (which has no body: 405).
    pub(super) async fn readable_body(&self, decision: &Decision, bucket: &str, key: &str, version: Option<&str>) -> S3Result<Manifest> {
        let m = self.readable(decision, bucket, key, version).await?;
        refuse_marker(&m)?;
        Ok(m)
    }

    pub(super) async fn manifest(&self, bucket: &str, key: &str) -> S3Result<Option<Manifest>> {
        match self.core.kv.get(&layout::object(bucket, key)).await? {
            Some(s) => Ok(Some(records::decode_manifest(&s.value)?)),
            None => Ok(None),
        }
    }

    /// The object's current version, or NoSuchKey (NoSuchBucket when the bucket is missing;
    /// with the delete marker's headers when one hides the key). With `version`: that
    /// version, a delete marker included, or NoSuchVersion.
    pub(super) async fn existing(&self, bucket: &str, key: &str, version: Option<&str>) -> S3Result<Manifest> {
        check_key(key)?;
        if let Some(id) = version {
            if !crate::versions::valid_id(id) {
                return Err(s3_error!(InvalidArgument, "Invalid version id specified"));
            }
            return match self.core.version(bucket, key, id).await? {
                Some(m) => Ok(m),
                None => {
                    self.bucket_exists(bucket).await?;
                    Err(s3_error!(NoSuchVersion, "The specified version does not exist."))
                }
            };
        }
        match self.manifest(bucket, key).await? {
            Some(m) => Ok(m),
            None => {
                self.bucket_exists(bucket).await?;
                let mut e = s3_error!(NoSuchKey, "The specified key does not exist.");
                match self.core.after_miss(bucket, key).await? {
                    Missing::Current(m) => return Ok(m),
                    Missing::Marker(marker) => e.set_headers(marker_headers(&marker)),
                    // What S3 says of a key no marker hides.
                    Missing::Nothing => e.set_headers(http::HeaderMap::from_iter([(http::HeaderName::from_static("x-amz-delete-marker"), http::HeaderValue::from_static("false"))])),
                }
                Err(e)
            }
        }
    }

    /// Changes the object's current version, or the version named (current or kept), by a
    /// compare-and-swap of its record, retried while other writers race; `decision` says
    /// whether the requester may (an absent object is AccessDenied to one who may not list).
    /// Returns the manifest as changed.
    pub(super) async fn update_object(&self, bucket: &str, key: &str, version: Option<&str>, decision: &Decision, change: impl Fn(&mut Manifest) -> S3Result<()>) -> S3Result<Manifest> {
        check_key(key)?;
        if version.is_some_and(|id| !crate::versions::valid_id(id)) {
            return Err(s3_error!(InvalidArgument, "Invalid version id specified"));
        }
        for _ in 0..UPDATE_ATTEMPTS {
            let found = match version {
                None => self.core.kv.get(&layout::object(bucket, key)).await?.map(|s| (layout::object(bucket, key), records::decode_manifest(&s.value), s.version)),
                Some(id) => self.core.version_record(bucket, key, id).await?.map(|k| (k.key, Ok(k.manifest), k.stored)),
            };
            let Some((record_key, m, stored)) = found else {
                decision.object(None)?;
                self.bucket_exists(bucket).await?;
                return Err(match version {
                    None => s3_error!(NoSuchKey, "The specified key does not exist."),
                    Some(_) => s3_error!(NoSuchVersion, "The specified version does not exist."),
                });
            };
            let mut m = m?;
            refuse_marker(&m)?;
            decision.object(Some(&m))?;
            change(&mut m)?;
            match self.core.kv.put(&record_key, records::encode(&m), Cond::Version(stored), Durability::Through).await {
                Ok(_) => return Ok(m),
                Err(KvError::Mismatch) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(s3_error!(OperationAborted, "A conflicting conditional operation is currently in progress against this resource. Please try again."))
    }

    /// The bucket's versioning (`None`: never enabled).
    pub(super) async fn versioning(&self, granted: &Granted, bucket: &str) -> S3Result<Option<Versioning>> {
        Ok(self.bucket_record(granted, bucket).await?.versioning())
    }

    pub(super) async fn upload(&self, bucket: &str, key: &str, upload_id: &str) -> S3Result<(UploadId, UploadRecord, Bytes)> {
        let no_such = || s3_error!(NoSuchUpload, "The specified upload does not exist: {upload_id}");
        let id = layout::parse_upload_id(upload_id).ok_or_else(no_such)?;
        let Some(s) = self.core.kv.get(&layout::upload(bucket, key, id)).await? else {
            self.bucket_exists(bucket).await?;
            return Err(no_such());
        };
        Ok((id, records::decode("upload", &s.value)?, s.version))
    }
}
