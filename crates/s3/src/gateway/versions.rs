//! Versioning in S3's forms: a bucket's versioning configuration, and ListObjectVersions
//! over the current records and the kept versions (`crate::versions`).

use bytes::{BufMut, Bytes, BytesMut};
use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result};

use super::convert::{encoder, owner, timestamp};
use super::limits::{MAX_KEY_BYTES, MAX_LIST};
use super::lookup::Gateway;
use crate::layout;
use crate::records::{Manifest, Versioning, NULL_VERSION};
use crate::versions;

/// One entry of a version listing, in S3's order: names ascending, each name's versions
/// newest first.
enum Entry {
    Version { name: String, manifest: Box<Manifest>, latest: bool },
    Prefix(String),
}

/// Where the walk over names stands: past a name, or past every name under a common prefix.
enum Cursor {
    Start,
    After(String),
    PastPrefix(String),
}

impl Gateway {
    pub(super) async fn get_bucket_versioning_in(&self, req: S3Request<GetBucketVersioningInput>) -> S3Result<S3Response<GetBucketVersioningOutput>> {
        let versioning = self.versioning(crate::access::granted(&req.extensions)?, &req.input.bucket).await?;
        let status = versioning.map(|v| {
            BucketVersioningStatus::from_static(match v {
                Versioning::Enabled => BucketVersioningStatus::ENABLED,
                Versioning::Suspended => BucketVersioningStatus::SUSPENDED,
            })
        });
        Ok(S3Response::new(GetBucketVersioningOutput { status, mfa_delete: None }))
    }

    pub(super) async fn put_bucket_versioning_in(&self, req: S3Request<PutBucketVersioningInput>) -> S3Result<S3Response<PutBucketVersioningOutput>> {
        let c = &req.input.versioning_configuration;
        if c.mfa_delete.as_ref().is_some_and(|m| m.as_str() == MFADelete::ENABLED) {
            return Err(s3_error!(InvalidRequest, "MFA delete needs an MFA device, which this store does not support"));
        }
        let v = match c.status.as_ref().map(|s| s.as_str()) {
            Some(BucketVersioningStatus::ENABLED) => Versioning::Enabled,
            Some(BucketVersioningStatus::SUSPENDED) => Versioning::Suspended,
            _ => return Err(s3_error!(MalformedXML, "the versioning status is Enabled or Suspended")),
        };
        self.set_in_bucket(&req.input.bucket, |record| record.versioning = Some(v)).await?;
        Ok(S3Response::new(PutBucketVersioningOutput {}))
    }

    /// Every version of `name`, newest first, with whether it is the latest: the current
    /// record, then the kept versions (a kept copy of the current one skipped).
    async fn versions_of(&self, bucket: &str, name: &str) -> S3Result<Vec<(Manifest, bool)>> {
        let current = self.manifest(bucket, name).await?;
        let kept = self.core.kept(bucket, name).await?;
        let mut out = Vec::with_capacity(kept.len() + 1);
        let current_id = current.as_ref().map(|m| m.version_id().to_owned());
        if let Some(m) = current {
            out.push((m, true));
        }
        for k in kept {
            if current_id.as_deref() == Some(k.manifest.version_id()) {
                continue;
            }
            // With no current record the newest kept version is the latest (a reader makes a
            // version current again, `Core::after_miss`).
            let latest = out.is_empty();
            out.push((k.manifest, latest));
        }
        Ok(out)
    }

    /// The first name past `cursor` under `prefix` that has a current record or a kept
    /// version, grouped at the delimiter: one short range over each kind of record.
    async fn next_name(&self, bucket: &str, prefix: &str, delimiter: Option<&str>, cursor: &Cursor) -> S3Result<Option<Entry>> {
        let (objects, kept) = (layout::object_prefix(bucket), layout::version_prefix(bucket));
        let under = |base: &BytesMut, s: &str| -> BytesMut {
            let mut k = base.clone();
            k.put_slice(s.as_bytes());
            k
        };
        let (from_object, from_kept): (Bytes, Bytes) = match cursor {
            Cursor::Start => (under(&objects, prefix).freeze(), under(&kept, prefix).freeze()),
            Cursor::After(n) => {
                let mut k = under(&kept, n);
                k.put_u8(0);
                (layout::after(&under(&objects, n)), layout::after_prefix(&k))
            }
            Cursor::PastPrefix(p) => (layout::after_prefix(&under(&objects, p)), layout::after_prefix(&under(&kept, p))),
        };
        let kv = &self.core.kv;
        let end_object = layout::after_prefix(&under(&objects, prefix));
        let end_kept = layout::after_prefix(&under(&kept, prefix));
        let first_object = kv.range(&from_object.max(under(&objects, prefix).freeze()), &end_object, 1).await?;
        let first_kept = kv.range(&from_kept.max(under(&kept, prefix).freeze()), &end_kept, 1).await?;
        let a = first_object.first().and_then(|k| std::str::from_utf8(k.strip_prefix(&objects[..])?).ok().map(str::to_owned));
        let b = first_kept.first().and_then(|k| layout::version_of(&kept, k).map(|(n, _)| n.to_owned()));
        let Some(name) = [a, b].into_iter().flatten().min() else { return Ok(None) };
        let group = delimiter.filter(|d| !d.is_empty()).and_then(|d| {
            let rest = name.get(prefix.len()..)?;
            rest.find(d).map(|at| name[..prefix.len() + at + d.len()].to_owned())
        });
        Ok(Some(match group {
            Some(p) => Entry::Prefix(p),
            None => Entry::Version { name, manifest: Box::default(), latest: false },
        }))
    }

    pub(super) async fn list_object_versions_in(&self, req: S3Request<ListObjectVersionsInput>) -> S3Result<S3Response<ListObjectVersionsOutput>> {
        let record = self.bucket_record(crate::access::granted(&req.extensions)?, &req.input.bucket).await?.into_owned();
        let i = req.input;
        let prefix = i.prefix.clone().unwrap_or_default();
        let max = i.max_keys.unwrap_or(MAX_LIST).clamp(0, MAX_LIST) as usize;
        if prefix.len() > MAX_KEY_BYTES || i.key_marker.as_ref().is_some_and(|k| k.len() > MAX_KEY_BYTES) {
            return Err(s3_error!(InvalidArgument, "a prefix or marker is at most {MAX_KEY_BYTES} bytes"));
        }
        let key_marker = i.key_marker.clone().filter(|k| !k.is_empty());
        let version_marker = i.version_id_marker.clone().filter(|v| !v.is_empty());
        if version_marker.is_some() && key_marker.is_none() {
            return Err(s3_error!(InvalidArgument, "A version-id marker cannot be specified without a key marker."));
        }
        if version_marker.as_deref().is_some_and(|v| !versions::valid_id(v)) {
            return Err(s3_error!(InvalidArgument, "Invalid version id marker specified"));
        }
        let bucket = &i.bucket;
        let mut entries: Vec<Entry> = Vec::new();
        let mut truncated = false;
        // The marker key's versions after the marker version, then the names after it.
        if let (Some(k), Some(vm)) = (&key_marker, &version_marker) {
            let all = self.versions_of(bucket, k).await?;
            // Versions list in their order keys' order, so a page resumes after its marker
            // even when the marker version was deleted meanwhile (as a client emptying a
            // bucket page by page does); the null version is found by its id.
            // A null marker version gone meanwhile: the key's versions are listed from its
            // newest (some again, rather than any skipped).
            let after = match vm.as_str() {
                NULL_VERSION => all.iter().find(|(m, _)| m.version.is_none()).map(|(m, _)| versions::order_key(m)).unwrap_or_default(),
                id => id.to_owned(),
            };
            for (m, latest) in all.into_iter().filter(|(m, _)| versions::order_key(m) > after) {
                if entries.len() == max {
                    truncated = max > 0;
                    break;
                }
                entries.push(Entry::Version { name: k.clone(), manifest: Box::new(m), latest });
            }
        }
        let mut cursor = key_marker.map_or(Cursor::Start, Cursor::After);
        'names: while !truncated && max > 0 {
            let Some(next) = self.next_name(bucket, &prefix, i.delimiter.as_deref(), &cursor).await? else { break };
            // A page that ended on a common prefix resumes past it.
            if let Entry::Prefix(p) = &next {
                if i.key_marker.as_ref().is_some_and(|m| p.as_str() <= m.as_str()) {
                    cursor = Cursor::PastPrefix(p.clone());
                    continue;
                }
            }
            if entries.len() == max {
                truncated = true;
                break;
            }
            match next {
                Entry::Prefix(p) => {
                    cursor = Cursor::PastPrefix(p.clone());
                    entries.push(Entry::Prefix(p));
                }
                Entry::Version { name, .. } => {
                    for (m, latest) in self.versions_of(bucket, &name).await? {
                        if entries.len() == max {
                            truncated = true;
                            break 'names;
                        }
                        entries.push(Entry::Version { name: name.clone(), manifest: Box::new(m), latest });
                    }
                    cursor = Cursor::After(name);
                }
            }
        }
        let enc = encoder(i.encoding_type.as_ref());
        let (next_key, next_version) = match entries.last() {
            Some(Entry::Version { name, manifest, .. }) if truncated => (Some(name.clone()), Some(manifest.version_id().to_owned())),
            Some(Entry::Prefix(p)) if truncated => (Some(p.clone()), None),
            _ => (None, None),
        };
        let (mut found, mut markers, mut prefixes) = (Vec::new(), Vec::new(), Vec::new());
        for e in entries {
            match e {
                Entry::Prefix(p) => prefixes.push(CommonPrefix { prefix: Some(enc(p)) }),
                Entry::Version { name, manifest: m, latest } if m.delete_marker => markers.push(DeleteMarkerEntry {
                    is_latest: Some(latest),
                    key: Some(enc(name)),
                    last_modified: Some(timestamp(m.modified_ms)),
                    owner: Some(owner(m.owner.as_deref().unwrap_or(record.owner_id()))),
                    version_id: Some(m.version_id().to_owned()),
                }),
                Entry::Version { name, manifest: m, latest } => found.push(ObjectVersion {
                    e_tag: Some(ETag::Strong(m.etag.clone())),
                    is_latest: Some(latest),
                    key: Some(enc(name)),
                    last_modified: Some(timestamp(m.modified_ms)),
                    owner: Some(owner(m.owner.as_deref().unwrap_or(record.owner_id()))),
                    size: Some(m.size as i64),
                    storage_class: Some(ObjectVersionStorageClass::from(crate::classes::name(m.class.storage_class.as_deref()).to_owned())),
                    version_id: Some(m.version_id().to_owned()),
                    ..Default::default()
                }),
            }
        }
        Ok(S3Response::new(ListObjectVersionsOutput {
            name: Some(i.bucket),
            prefix: Some(enc(prefix)),
            delimiter: i.delimiter.map(&enc),
            key_marker: i.key_marker.map(&enc),
            version_id_marker: i.version_id_marker,
            next_key_marker: next_key.map(&enc),
            next_version_id_marker: next_version,
            max_keys: Some(max as i32),
            is_truncated: Some(truncated),
            versions: (!found.is_empty()).then_some(found),
            delete_markers: (!markers.is_empty()).then_some(markers),
            common_prefixes: (!prefixes.is_empty()).then_some(prefixes),
            encoding_type: i.encoding_type,
            ..Default::default()
        }))
    }
}
