//! PutObject: the body written as the object's data, checked against what the client
//! declared, then made the object by its manifest.

use std::collections::{BTreeMap, HashMap};

use s3s::dto::*;
use s3s::{s3_error, S3Error, S3Result};

use super::acls::{for_new_object, Asked};
use super::checksums::{verify, Checksums};
use crate::access::Granted;
use super::conditions::check_write;
use super::convert::hex;
use super::limits::{check_key, MAX_PUT_BYTES};
use super::lookup::Gateway;
use crate::objects::Own;
use crate::records::{self, Attributes, Manifest, Owner, Segment};

impl Gateway {
    /// After a commit that failed: the data is deleted now when the write was refused (a 4xx:
    /// nothing of it was stored), and otherwise left to the sweeper, which decides after the
    /// grace (the store did not answer, gave up or was full, and the manifest may have reached
    /// a replica and surface later).
    pub(super) async fn abandon(&self, e: &S3Error, data: u128, owner: &Owner) {
        if !e.status_code().is_some_and(|s| s.is_client_error()) {
            tracing::warn!(bucket = owner.bucket, key = owner.key, "a manifest write's outcome is unknown: its data is left to the sweeper");
        } else {
            self.core.discard(data, owner).await;
        }
    }

    /// Writes the object's data from `body` and makes it the object, as PutObject does.
    pub(super) async fn put(&self, input: PutObjectInput, trailers: Option<s3s::TrailingHeaders>, granted: &Granted) -> S3Result<PutObjectOutput> {
        let (bucket, key) = (input.bucket.clone(), input.key.clone());
        check_key(&key)?;
        let record = self.bucket_record(granted, &bucket).await?;
        let asked = Asked::headers(input.acl.as_ref().map(|a| a.as_str()), input.grant_read.as_ref(), None, input.grant_read_acp.as_ref(), input.grant_write_acp.as_ref(), input.grant_full_control.as_ref());
        let (object_owner, acl) = for_new_object(&granted.principal, &record, &asked)?;
        if input.content_length.is_some_and(|n| n as u64 > MAX_PUT_BYTES) {
            return Err(s3_error!(EntityTooLarge, "a single PUT is at most {MAX_PUT_BYTES} bytes; use a multipart upload"));
        }
        let (if_match, if_none_match) = (input.if_match.clone(), input.if_none_match.clone());
        // A conditional PUT fails before the upload when its condition already fails (checked
        // again at the swap); an unconditional one reads nothing it does not need.
        if if_match.is_some() || if_none_match.is_some() {
            check_write(self.manifest(&bucket, &key).await?.as_ref(), if_match.as_ref(), if_none_match.as_ref())?;
        }
        let tags = super::tagging::of_header(input.tagging.as_deref())?;
        let class = self.core.class_of(input.storage_class.as_ref().map(|c| c.as_str()))?;
        let wanted = Checksums::of_put(&input);
        let Some(body) = input.body else { return Err(s3_error!(IncompleteBody)) };
        let owner = Owner { bucket: bucket.clone(), key: key.clone(), part: None };
        let written = self.core.write_data(&owner, body, wanted.hasher(), MAX_PUT_BYTES, class.pool.as_deref()).await?;
        let data = written.segment.data;
        let verified = verify(&written, input.content_md5.as_deref(), wanted, trailers);
        if let Err(e) = verified {
            self.core.discard(data, &owner).await;
            return Err(e);
        }
        let attributes = Attributes {
            content_type: input.content_type,
            content_encoding: stored_encoding(input.content_encoding),
            content_disposition: input.content_disposition,
            content_language: input.content_language,
            cache_control: input.cache_control,
            metadata: sorted(input.metadata),
        };
        let manifest = Manifest {
            size: written.segment.size,
            etag: hex(&written.md5),
            modified_ms: records::now_ms(),
            attributes,
            segments: segments_of(written.segment),
            completed_from: None,
            owner: object_owner,
            acl,
            tags,
            checksum: super::checksums::kept(&written.checksum),
            class,
            ..Manifest::default()
        };
        let own = vec![Own { data, owner: owner.clone(), intent: written.intent.clone() }];
        let committed = match self.core.commit(&bucket, &key, &manifest, |old| check_write(old, if_match.as_ref(), if_none_match.as_ref()), own, record.versioning()).await {
            Ok(m) => m,
            Err(e) => {
                self.abandon(&e, data, &owner).await;
                return Err(e);
            }
        };
        let c = written.checksum;
        Ok(PutObjectOutput {
            e_tag: Some(ETag::Strong(manifest.etag)),
            version_id: committed.version,
            checksum_crc32: c.checksum_crc32,
            checksum_crc32c: c.checksum_crc32c,
            checksum_sha1: c.checksum_sha1,
            checksum_sha256: c.checksum_sha256,
            checksum_crc64nvme: c.checksum_crc64nvme,
            ..Default::default()
        })
    }
}

/// The Content-Encoding an object keeps: as sent, less `aws-chunked`, which says how the
/// request's body was framed, not what the object is (none when nothing else is left).
pub(super) fn stored_encoding(sent: Option<String>) -> Option<String> {
    let kept: Vec<&str> = sent.as_deref()?.split(',').map(str::trim).filter(|e| !e.is_empty() && !e.eq_ignore_ascii_case("aws-chunked")).collect();
    (!kept.is_empty()).then(|| kept.join(", "))
}

pub(super) fn segments_of(s: Segment) -> Vec<Segment> {
    if s.size == 0 {
        Vec::new()
    } else {
        vec![s]
    }
}

pub(super) fn sorted(m: Option<HashMap<String, String>>) -> BTreeMap<String, String> {
    m.unwrap_or_default().into_iter().collect()
}
