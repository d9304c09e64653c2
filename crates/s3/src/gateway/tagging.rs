//! Object and bucket tagging: tag sets kept in the object's manifest (each version its own)
//! and in the bucket's record, checked against S3's limits, and the `x-amz-tagging` header of
//! PUT, CopyObject and CreateMultipartUpload.

use std::collections::BTreeMap;

use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result};

use super::lookup::Gateway;

/// S3's limits: tags per object and per bucket, and the lengths of a key and a value.
const MAX_OBJECT_TAGS: usize = 10;
const MAX_BUCKET_TAGS: usize = 50;
const MAX_TAG_KEY: usize = 128;
const MAX_TAG_VALUE: usize = 256;

/// A tag set as S3 takes it: unique keys of 1 to 128 characters, none under `aws:`, values
/// of at most 256, and at most `max` tags.
fn checked(pairs: Vec<(String, String)>, max: usize) -> S3Result<BTreeMap<String, String>> {
    if pairs.len() > max {
        return Err(s3_error!(InvalidTag, "at most {max} tags"));
    }
    let mut tags = BTreeMap::new();
    for (k, v) in pairs {
        if k.is_empty() || k.chars().count() > MAX_TAG_KEY || v.chars().count() > MAX_TAG_VALUE {
            return Err(s3_error!(InvalidTag, "a tag key is 1 to {MAX_TAG_KEY} characters and its value at most {MAX_TAG_VALUE}"));
        }
        if k.starts_with("aws:") {
            return Err(s3_error!(InvalidTag, "tag keys starting with aws: are reserved"));
        }
        if tags.insert(k.clone(), v).is_some() {
            return Err(s3_error!(InvalidTag, "Cannot provide multiple Tags with the same key: {k}"));
        }
    }
    Ok(tags)
}

fn of_set(set: TagSet, max: usize) -> S3Result<BTreeMap<String, String>> {
    checked(set.into_iter().map(|t| (t.key.unwrap_or_default(), t.value.unwrap_or_default())).collect(), max)
}

fn to_set(tags: &BTreeMap<String, String>) -> TagSet {
    tags.iter().map(|(k, v)| Tag { key: Some(k.clone()), value: Some(v.clone()) }).collect()
}

/// The tags of an `x-amz-tagging` header: URL-encoded `key=value` pairs joined by `&`.
pub(super) fn of_header(header: Option<&str>) -> S3Result<BTreeMap<String, String>> {
    let Some(h) = header.filter(|h| !h.is_empty()) else { return Ok(BTreeMap::new()) };
    let decode = |s: &str| urlencoding::decode(&s.replace('+', " ")).map(|c| c.into_owned()).map_err(|_| s3_error!(InvalidArgument, "x-amz-tagging is not URL-encoded UTF-8"));
    let pairs = h
        .split('&')
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            Ok((decode(k)?, decode(v)?))
        })
        .collect::<S3Result<Vec<_>>>()?;
    checked(pairs, MAX_OBJECT_TAGS)
}

impl Gateway {
    pub(super) async fn put_object_tagging_in(&self, req: S3Request<PutObjectTaggingInput>) -> S3Result<S3Response<PutObjectTaggingOutput>> {
        let granted = crate::access::granted(&req.extensions)?;
        let i = req.input;
        let tags = of_set(i.tagging.tag_set, MAX_OBJECT_TAGS)?;
        let m = self
            .update_object(&i.bucket, &i.key, i.version_id.as_deref(), &granted.object, |m| {
                m.tags = tags.clone();
                Ok(())
            })
            .await?;
        Ok(S3Response::new(PutObjectTaggingOutput { version_id: m.version }))
    }

    pub(super) async fn get_object_tagging_in(&self, req: S3Request<GetObjectTaggingInput>) -> S3Result<S3Response<GetObjectTaggingOutput>> {
        let granted = crate::access::granted(&req.extensions)?;
        let i = &req.input;
        let m = self.readable_body(&granted.object, &i.bucket, &i.key, i.version_id.as_deref()).await?;
        Ok(S3Response::new(GetObjectTaggingOutput { tag_set: to_set(&m.tags), version_id: m.version }))
    }

    pub(super) async fn delete_object_tagging_in(&self, req: S3Request<DeleteObjectTaggingInput>) -> S3Result<S3Response<DeleteObjectTaggingOutput>> {
        let granted = crate::access::granted(&req.extensions)?;
        let i = &req.input;
        let m = self
            .update_object(&i.bucket, &i.key, i.version_id.as_deref(), &granted.object, |m| {
                m.tags.clear();
                Ok(())
            })
            .await?;
        Ok(S3Response::new(DeleteObjectTaggingOutput { version_id: m.version }))
    }

    pub(super) async fn put_bucket_tagging_in(&self, req: S3Request<PutBucketTaggingInput>) -> S3Result<S3Response<PutBucketTaggingOutput>> {
        let i = req.input;
        let tags = of_set(i.tagging.tag_set, MAX_BUCKET_TAGS)?;
        self.set_in_bucket(&i.bucket, |record| record.tags = Some(tags.clone())).await?;
        Ok(S3Response::new(PutBucketTaggingOutput {}))
    }

    pub(super) async fn get_bucket_tagging_in(&self, req: S3Request<GetBucketTaggingInput>) -> S3Result<S3Response<GetBucketTaggingOutput>> {
        let record = self.bucket_record(crate::access::granted(&req.extensions)?, &req.input.bucket).await?;
        match &record.tags {
            Some(tags) => Ok(S3Response::new(GetBucketTaggingOutput { tag_set: to_set(tags) })),
            None => Err(s3_error!(NoSuchTagSet, "The TagSet does not exist")),
        }
    }

    pub(super) async fn delete_bucket_tagging_in(&self, req: S3Request<DeleteBucketTaggingInput>) -> S3Result<S3Response<DeleteBucketTaggingOutput>> {
        self.set_in_bucket(&req.input.bucket, |record| record.tags = None).await?;
        Ok(S3Response::new(DeleteBucketTaggingOutput {}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_sets_follow_s3s_limits() {
        let header = of_header(Some("project=blue%20sky&team=a+b&empty=")).unwrap();
        assert_eq!(header.get("project").map(String::as_str), Some("blue sky"));
        assert_eq!(header.get("team").map(String::as_str), Some("a b"));
        assert_eq!(header.get("empty").map(String::as_str), Some(""));
        assert!(of_header(None).unwrap().is_empty());
        let many = (0..11).map(|n| format!("k{n}=v")).collect::<Vec<_>>().join("&");
        assert!(of_header(Some(&many)).is_err());
        assert!(of_header(Some("a=1&a=2")).is_err());
        assert!(of_header(Some("aws:x=1")).is_err());
        assert!(of_header(Some(&format!("{}=v", "k".repeat(129)))).is_err());
        assert!(checked(vec![("k".into(), "v".repeat(257))], 10).is_err());
        assert_eq!(checked((0..50).map(|n| (format!("k{n}"), String::new())).collect(), MAX_BUCKET_TAGS).unwrap().len(), 50);
    }
}
