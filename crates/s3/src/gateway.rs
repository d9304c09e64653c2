//! The S3 operations over `objects::Core`: buckets, objects, listings, copies and multipart
//! uploads, with S3's own errors. Requests arrive authenticated (SigV4, checked by `s3s`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use bytes::Bytes;
use futures_util::stream::{self, StreamExt};
use s3s::dto::*;
use s3s::crypto::Checksum as _;
use s3s::{s3_error, S3Error, S3ErrorCode, S3Request, S3Response, S3Result, S3};

use crate::kv::{Cond, Durability, KvError, Pages};
use crate::layout::{self, UploadId};
use crate::listing::{self, Item, Query};
use crate::objects::{Core, Own};
use crate::records::{self, Attributes, BucketRecord, Manifest, Owner, PartRecord, Segment, UploadRecord};

/// S3's limits: a key's length, one PUT's size, a part's size and number, an object's size.
pub const MAX_KEY_BYTES: usize = 1024;
pub const MAX_PUT_BYTES: u64 = 5 << 30;
pub const MIN_PART_BYTES: u64 = 5 << 20;
pub const MAX_PART_BYTES: u64 = 5 << 30;
pub const MAX_PARTS: i32 = 10_000;
pub const MAX_LIST: i32 = 1000;
/// Records a listing reads at once to fill in its entries.
const LIST_FETCH: usize = 16;

pub struct Gateway {
    core: Arc<Core>,
}

impl Gateway {
    pub fn new(core: Arc<Core>) -> Gateway {
        Gateway { core }
    }

    async fn bucket_exists(&self, bucket: &str) -> S3Result<()> {
        match self.core.kv.get(&layout::bucket(bucket)).await? {
            Some(_) => Ok(()),
            None => Err(s3_error!(NoSuchBucket, "The specified bucket does not exist: {bucket}")),
        }
    }

    async fn manifest(&self, bucket: &str, key: &str) -> S3Result<Option<Manifest>> {
        match self.core.kv.get(&layout::object(bucket, key)).await? {
            Some(s) => Ok(Some(records::decode_manifest(&s.value)?)),
            None => Ok(None),
        }
    }

    /// The object, or NoSuchKey (NoSuchBucket when the bucket is missing).
    async fn existing(&self, bucket: &str, key: &str) -> S3Result<Manifest> {
        check_key(key)?;
        match self.manifest(bucket, key).await? {
            Some(m) => Ok(m),
            None => {
                self.bucket_exists(bucket).await?;
                Err(s3_error!(NoSuchKey, "The specified key does not exist."))
            }
        }
    }

    async fn upload(&self, bucket: &str, key: &str, upload_id: &str) -> S3Result<(UploadId, UploadRecord, Bytes)> {
        let no_such = || s3_error!(NoSuchUpload, "The specified upload does not exist: {upload_id}");
        let id = layout::parse_upload_id(upload_id).ok_or_else(no_such)?;
        let Some(s) = self.core.kv.get(&layout::upload(bucket, key, id)).await? else {
            self.bucket_exists(bucket).await?;
            return Err(no_such());
        };
        Ok((id, records::decode("upload", &s.value)?, s.version))
    }

    /// After a commit that failed: the data is deleted now, unless the store did not answer
    /// (the manifest may have reached a replica and surface later), when the sweeper decides
    /// after the grace.
    async fn abandon(&self, e: &S3Error, data: u128, owner: &Owner) {
        if *e.code() == S3ErrorCode::ServiceUnavailable {
            tracing::warn!(bucket = owner.bucket, key = owner.key, "a manifest write's outcome is unknown: its data is left to the sweeper");
        } else {
            self.core.discard(data, owner).await;
        }
    }

    /// Stores a part's data under its record, releasing the data it replaces.
    async fn commit_part(&self, bucket: &str, key: &str, id: UploadId, number: u32, record: &PartRecord, mut intent: Bytes) -> S3Result<()> {
        let owner = Owner { bucket: bucket.to_owned(), key: key.to_owned(), part: Some((id, number)) };
        let pkey = layout::part(id, number);
        let data = record.segment.data;
        let mut committed = None;
        for _ in 0..8 {
            let current = self.core.kv.get(&pkey).await?;
            if let Some(c) = &current {
                let old: PartRecord = records::decode("part", &c.value)?;
                self.core.release(old.segment.data, &owner).await?;
            }
            // Data the sweeper took while the part stalled is never recorded.
            intent = self.core.refresh_before_swap(data, &owner, &intent).await?;
            let cond = current.map_or(Cond::Absent, |c| Cond::Version(c.version));
            match self.core.kv.put(&pkey, records::encode(record), cond, Durability::Through).await {
                Ok(v) => {
                    committed = Some(v);
                    break;
                }
                Err(KvError::Mismatch) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        let Some(version) = committed else {
            self.core.discard(data, &owner).await;
            return Err(s3_error!(SlowDown, "part {number} was replaced concurrently too often"));
        };
        match self.core.kv.get(&layout::upload(bucket, key, id)).await? {
            Some(u) if records::decode::<UploadRecord>("upload", &u.value)?.completing.is_none() => {
                // Lost in a crash, the intent is dropped by the sweeper (the data is referenced).
                let _ = self.core.kv.delete(&layout::intent(data), Cond::Version(intent), Durability::Lazy).await;
                Ok(())
            }
            _ => {
                // Completed or aborted meanwhile. A completion may have read this record and
                // reference the data, so it is released (collected after the grace if nothing
                // references it), not deleted now.
                let _ = self.core.kv.delete(&pkey, Cond::Version(version), Durability::Through).await;
                self.core.release(data, &owner).await?;
                Err(s3_error!(NoSuchUpload, "the upload was aborted or completed while this part was uploaded"))
            }
        }
    }

    /// An upload's part records, in number order.
    async fn parts_of(core: &Core, id: UploadId) -> S3Result<Vec<(u32, Bytes, PartRecord)>> {
        let mut pages = Pages::new(layout::parts(id, 0, u32::MAX), crate::objects::PAGE);
        let mut parts = Vec::new();
        while let Some(keys) = pages.next(&core.kv).await? {
            for k in &keys {
                let (Some(n), Some(s)) = (layout::part_number(k), core.kv.get(k).await?) else { continue };
                parts.push((n, k.clone(), records::decode("part", &s.value)?));
            }
        }
        Ok(parts)
    }

    /// Aborts an upload. Every part's data is released first, so that a crash at any point
    /// leaves intents for the sweeper; then the record goes (by compare-and-swap: a completion
    /// that took the upload meanwhile wins), then the part records. The data is collected
    /// after the grace unless an object references it (a completion got through).
    pub async fn abort(core: &Core, bucket: &str, key: &str, id: UploadId, version: Bytes) -> S3Result<()> {
        let parts = Self::parts_of(core, id).await?;
        let owners: Vec<(u128, Owner)> = parts
            .iter()
            .map(|(n, _, p)| (p.segment.data, Owner { bucket: bucket.to_owned(), key: key.to_owned(), part: Some((id, *n)) }))
            .collect();
        let mut marks = stream::iter(owners).map(|(d, o)| async move { core.release(d, &o).await }).buffer_unordered(LIST_FETCH);
        while let Some(r) = marks.next().await {
            r?;
        }
        match core.kv.delete(&layout::upload(bucket, key, id), Cond::Version(version), Durability::Through).await {
            Ok(_) => {}
            Err(KvError::Mismatch) => return Err(s3_error!(NoSuchUpload, "the upload changed while it was aborted")),
            Err(e) => return Err(e.into()),
        }
        let keys: Vec<Bytes> = parts.into_iter().map(|(_, k, _)| k).collect();
        let mut deletes = stream::iter(keys).map(|k| async move { core.kv.delete(&k, Cond::Any, Durability::Through).await }).buffer_unordered(LIST_FETCH);
        while let Some(r) = deletes.next().await {
            r?;
        }
        Ok(())
    }

    /// Lists a bucket's objects and fills in each entry from its manifest.
    async fn list_objects(&self, bucket: &str, prefix: &str, delimiter: Option<&str>, after: Option<&str>, max: i32) -> S3Result<(Vec<Object>, Vec<CommonPrefix>, bool, Option<String>)> {
        self.bucket_exists(bucket).await?;
        if max < 0 {
            return Err(s3_error!(InvalidArgument, "max-keys must not be negative"));
        }
        // No key is longer: a longer prefix or marker would only overrun the store's key limit.
        if prefix.len() > MAX_KEY_BYTES || after.is_some_and(|a| a.len() > MAX_KEY_BYTES) {
            return Err(s3_error!(InvalidArgument, "a prefix or marker is at most {MAX_KEY_BYTES} bytes"));
        }
        let base = layout::object_prefix(bucket);
        let q = Query { base: &base, prefix, delimiter, after, start: None, max: max.min(MAX_LIST) as usize };
        let listed = listing::list(&self.core.kv, &q, |suffix| std::str::from_utf8(suffix).ok().map(str::to_owned)).await?;
        let marker = listed.marker();
        let core = &self.core;
        let entries: Vec<S3Result<Option<Object>>> = stream::iter(listed.items.clone())
            .map(|item| async move {
                match item {
                    Item::Record(k, name) => {
                        let Some(s) = core.kv.get(&k).await? else { return Ok(None) };
                        let m = records::decode_manifest(&s.value)?;
                        Ok(Some(Object {
                            key: Some(name),
                            size: Some(m.size as i64),
                            e_tag: Some(ETag::Strong(m.etag)),
                            last_modified: Some(timestamp(m.modified_ms)),
                            storage_class: Some(ObjectStorageClass::from_static(ObjectStorageClass::STANDARD)),
                            ..Default::default()
                        }))
                    }
                    Item::Prefix(_) => Ok(None),
                }
            })
            .buffered(LIST_FETCH)
            .collect()
            .await;
        let mut objects = Vec::new();
        for e in entries {
            objects.extend(e?);
        }
        let prefixes = listed
            .items
            .iter()
            .filter_map(|i| match i {
                Item::Prefix(p) => Some(CommonPrefix { prefix: Some(p.clone()) }),
                Item::Record(..) => None,
            })
            .collect();
        Ok((objects, prefixes, listed.truncated, marker))
    }

    /// Writes the object's data from `body` and makes it the object, as PutObject does.
    async fn put(&self, input: PutObjectInput, trailers: Option<s3s::TrailingHeaders>) -> S3Result<PutObjectOutput> {
        let (bucket, key) = (input.bucket.clone(), input.key.clone());
        check_key(&key)?;
        self.bucket_exists(&bucket).await?;
        if input.content_length.is_some_and(|n| n as u64 > MAX_PUT_BYTES) {
            return Err(s3_error!(EntityTooLarge, "a single PUT is at most {MAX_PUT_BYTES} bytes; use a multipart upload"));
        }
        let (if_match, if_none_match) = (input.if_match.clone(), input.if_none_match.clone());
        // Fail before the upload when the condition already fails; checked again at the swap.
        check_write(self.manifest(&bucket, &key).await?.as_ref(), if_match.as_ref(), if_none_match.as_ref())?;
        let wanted = Checksums::of_put(&input);
        let Some(body) = input.body else { return Err(s3_error!(IncompleteBody)) };
        let owner = Owner { bucket: bucket.clone(), key: key.clone(), part: None };
        let written = self.core.write_data(&owner, body, wanted.hasher(), MAX_PUT_BYTES).await?;
        let data = written.segment.data;
        let verified = verify(&written, input.content_md5.as_deref(), wanted, trailers);
        if let Err(e) = verified {
            self.core.discard(data, &owner).await;
            return Err(e);
        }
        let attributes = Attributes {
            content_type: input.content_type,
            content_encoding: input.content_encoding,
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
        };
        let committed = self
            .core
            .commit(&bucket, &key, &manifest, |old| check_write(old, if_match.as_ref(), if_none_match.as_ref()), if_match.is_some() || if_none_match.is_some(), vec![Own { data, owner: owner.clone(), intent: written.intent.clone() }])
            .await;
        if let Err(e) = committed {
            self.abandon(&e, data, &owner).await;
            return Err(e);
        }
        let c = written.checksum;
        Ok(PutObjectOutput {
            e_tag: Some(ETag::Strong(manifest.etag)),
            checksum_crc32: c.checksum_crc32,
            checksum_crc32c: c.checksum_crc32c,
            checksum_sha1: c.checksum_sha1,
            checksum_sha256: c.checksum_sha256,
            checksum_crc64nvme: c.checksum_crc64nvme,
            ..Default::default()
        })
    }

    /// The source object of a copy, after its conditions.
    async fn copy_source(&self, source: &CopySource, cond: &CopyConditions) -> S3Result<(String, String, Manifest)> {
        let CopySource::Bucket { bucket, key, version_id } = source else {
            return Err(s3_error!(InvalidArgument, "copy sources are bucket/key"));
        };
        if version_id.is_some() {
            return Err(s3_error!(InvalidArgument, "this store keeps no object versions"));
        }
        let m = self.existing(bucket, key).await?;
        check_read(&m, cond.if_match.as_ref(), cond.if_none_match.as_ref(), cond.if_modified_since.as_ref(), cond.if_unmodified_since.as_ref())
            .map_err(|e| if *e.code() == S3ErrorCode::NotModified { s3_error!(PreconditionFailed) } else { e })?;
        Ok((bucket.to_string(), key.to_string(), m))
    }
}

struct CopyConditions {
    if_match: Option<ETagCondition>,
    if_none_match: Option<ETagCondition>,
    if_modified_since: Option<Timestamp>,
    if_unmodified_since: Option<Timestamp>,
}

/// The bytes a GET or HEAD asks for (`None`: all) and, for a multipart object asked by part,
/// its part count.
fn span(m: &Manifest, part: Option<i32>, range: Option<&Range>) -> S3Result<(Option<std::ops::Range<u64>>, Option<i32>)> {
    let multipart = m.etag.contains('-');
    match (part, range) {
        (Some(_), Some(_)) => Err(s3_error!(InvalidRequest, "Cannot specify both Range header and partNumber query parameter")),
        // A single-part object is its own part 1.
        (Some(n), None) if !multipart => match part_number(n)? {
            1 => Ok((None, None)),
            _ => Err(s3_error!(InvalidRange, "The requested partnumber is not satisfiable")),
        },
        (Some(n), None) => {
            let n = part_number(n)? as usize;
            let seg = m.segments.get(n - 1).ok_or_else(|| s3_error!(InvalidRange, "The requested partnumber is not satisfiable"))?;
            let start: u64 = m.segments[..n - 1].iter().map(|s| s.size).sum();
            Ok((Some(start..start + seg.size), Some(m.segments.len() as i32)))
        }
        (None, Some(_)) if m.size == 0 => Err(s3_error!(InvalidRange, "The requested range is not satisfiable")),
        (None, Some(r)) => Ok((Some(r.check(m.size)?), None)),
        (None, None) => Ok((None, None)),
    }
}

fn check_key(key: &str) -> S3Result<()> {
    if key.is_empty() {
        return Err(s3_error!(InvalidArgument, "an object key must not be empty"));
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(s3_error!(KeyTooLongError, "an object key is at most {MAX_KEY_BYTES} bytes"));
    }
    if key.contains('\0') {
        return Err(s3_error!(InvalidArgument, "an object key must not contain NUL"));
    }
    Ok(())
}

fn segments_of(s: Segment) -> Vec<Segment> {
    if s.size == 0 {
        Vec::new()
    } else {
        vec![s]
    }
}

fn sorted(m: Option<HashMap<String, String>>) -> BTreeMap<String, String> {
    m.unwrap_or_default().into_iter().collect()
}

fn unsorted(m: &BTreeMap<String, String>) -> Option<HashMap<String, String>> {
    (!m.is_empty()).then(|| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

/// HTTP dates have whole seconds: compare modification times at that precision.
fn timestamp(ms: u64) -> Timestamp {
    Timestamp::from(records::time_of(ms / 1000 * 1000))
}

fn etag_matches(m: &Manifest, c: &ETagCondition) -> bool {
    match c {
        ETagCondition::Any => true,
        ETagCondition::ETag(e) => e.value() == m.etag,
    }
}

/// GET/HEAD conditions, in RFC 7232's order.
fn check_read(m: &Manifest, if_match: Option<&ETagCondition>, if_none_match: Option<&ETagCondition>, modified_since: Option<&Timestamp>, unmodified_since: Option<&Timestamp>) -> S3Result<()> {
    let modified = timestamp(m.modified_ms);
    match if_match {
        Some(c) if !etag_matches(m, c) => return Err(s3_error!(PreconditionFailed, "If-Match does not match the object's ETag")),
        Some(_) => {}
        None => {
            if unmodified_since.is_some_and(|t| modified > *t) {
                return Err(s3_error!(PreconditionFailed, "modified since If-Unmodified-Since"));
            }
        }
    }
    match if_none_match {
        Some(c) if etag_matches(m, c) => return Err(s3_error!(NotModified)),
        Some(_) => {}
        None => {
            if modified_since.is_some_and(|t| modified <= *t) {
                return Err(s3_error!(NotModified));
            }
        }
    }
    Ok(())
}

/// PUT/complete conditions against the object a write would replace.
fn check_write(old: Option<&Manifest>, if_match: Option<&ETagCondition>, if_none_match: Option<&ETagCondition>) -> S3Result<()> {
    if let Some(c) = if_match {
        match old {
            Some(m) if etag_matches(m, c) => {}
            Some(_) => return Err(s3_error!(PreconditionFailed, "If-Match does not match the object's ETag")),
            None => return Err(s3_error!(NoSuchKey, "If-Match names an object that does not exist")),
        }
    }
    if let (Some(c), Some(m)) = (if_none_match, old) {
        if etag_matches(m, c) {
            return Err(s3_error!(PreconditionFailed, "If-None-Match: the object exists"));
        }
    }
    Ok(())
}

/// The checksums a client asked the gateway to verify (`x-amz-checksum-*`, `x-amz-sdk-checksum-algorithm`).
#[derive(Default)]
struct Checksums {
    crc32: Option<String>,
    crc32c: Option<String>,
    sha1: Option<String>,
    sha256: Option<String>,
    crc64nvme: Option<String>,
    algorithm: Option<ChecksumAlgorithm>,
}

impl Checksums {
    fn of_put(i: &PutObjectInput) -> Checksums {
        Checksums {
            crc32: i.checksum_crc32.clone(),
            crc32c: i.checksum_crc32c.clone(),
            sha1: i.checksum_sha1.clone(),
            sha256: i.checksum_sha256.clone(),
            crc64nvme: i.checksum_crc64nvme.clone(),
            algorithm: i.checksum_algorithm.clone(),
        }
    }

    fn of_part(i: &UploadPartInput) -> Checksums {
        Checksums {
            crc32: i.checksum_crc32.clone(),
            crc32c: i.checksum_crc32c.clone(),
            sha1: i.checksum_sha1.clone(),
            sha256: i.checksum_sha256.clone(),
            crc64nvme: i.checksum_crc64nvme.clone(),
            algorithm: i.checksum_algorithm.clone(),
        }
    }

    fn hasher(&self) -> s3s::checksum::ChecksumHasher {
        let mut h = s3s::checksum::ChecksumHasher::default();
        let alg = self.algorithm.as_ref().map(|a| a.as_str().to_owned()).unwrap_or_default();
        if self.crc32.is_some() || alg == ChecksumAlgorithm::CRC32 {
            h.crc32 = Some(Default::default());
        }
        if self.crc32c.is_some() || alg == ChecksumAlgorithm::CRC32C {
            h.crc32c = Some(Default::default());
        }
        if self.sha1.is_some() || alg == ChecksumAlgorithm::SHA1 {
            h.sha1 = Some(Default::default());
        }
        if self.sha256.is_some() || alg == ChecksumAlgorithm::SHA256 {
            h.sha256 = Some(Default::default());
        }
        if self.crc64nvme.is_some() || alg == ChecksumAlgorithm::CRC64NVME {
            h.crc64nvme = Some(Default::default());
        }
        h
    }
}

/// Checks what the client declared about the body it sent: its Content-MD5 and any
/// `x-amz-checksum-*` (in headers or in the trailer of an aws-chunked body).
fn verify(w: &crate::objects::Written, content_md5: Option<&str>, mut wanted: Checksums, trailers: Option<s3s::TrailingHeaders>) -> S3Result<()> {
    if let Some(md5) = content_md5 {
        let declared = base64_md5(md5).ok_or_else(|| s3_error!(InvalidDigest, "Content-MD5 is not a base64 MD5"))?;
        if declared != w.md5 {
            return Err(s3_error!(BadDigest, "the Content-MD5 you specified did not match what was received"));
        }
    }
    if let Some(t) = trailers.and_then(|t| t.take()) {
        let get = |name: &str| t.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
        wanted.crc32 = get("x-amz-checksum-crc32").or(wanted.crc32);
        wanted.crc32c = get("x-amz-checksum-crc32c").or(wanted.crc32c);
        wanted.sha1 = get("x-amz-checksum-sha1").or(wanted.sha1);
        wanted.sha256 = get("x-amz-checksum-sha256").or(wanted.sha256);
        wanted.crc64nvme = get("x-amz-checksum-crc64nvme").or(wanted.crc64nvme);
    }
    let c = &w.checksum;
    let pairs = [
        ("CRC32", &wanted.crc32, &c.checksum_crc32),
        ("CRC32C", &wanted.crc32c, &c.checksum_crc32c),
        ("SHA1", &wanted.sha1, &c.checksum_sha1),
        ("SHA256", &wanted.sha256, &c.checksum_sha256),
        ("CRC64NVME", &wanted.crc64nvme, &c.checksum_crc64nvme),
    ];
    for (name, declared, computed) in pairs {
        if let Some(d) = declared {
            if Some(d) != computed.as_ref() {
                return Err(s3_error!(BadDigest, "the {name} checksum you specified did not match what was received"));
            }
        }
    }
    Ok(())
}

/// A Content-MD5 header's 16 bytes.
fn base64_md5(s: &str) -> Option<[u8; 16]> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(s.trim()).ok()?.try_into().ok()
}

/// Percent-encodes a name for `encoding-type=url` listings: everything but unreserved
/// characters and '/'.
fn url_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn encoder(encoding: Option<&EncodingType>) -> impl Fn(String) -> String {
    let url = encoding.is_some_and(|e| e.as_str() == EncodingType::URL);
    move |s| if url { url_encode(&s) } else { s }
}

fn owner() -> s3s::dto::Owner {
    s3s::dto::Owner { display_name: Some("spindle".into()), id: Some("spindle".into()) }
}

fn part_number(n: i32) -> S3Result<u32> {
    if !(1..=MAX_PARTS).contains(&n) {
        return Err(s3_error!(InvalidArgument, "Part number must be an integer between 1 and {MAX_PARTS}, inclusive"));
    }
    Ok(n as u32)
}

#[async_trait::async_trait]
impl S3 for Gateway {
    async fn create_bucket(&self, req: S3Request<CreateBucketInput>) -> S3Result<S3Response<CreateBucketOutput>> {
        let bucket = req.input.bucket;
        let record = BucketRecord { created_ms: records::now_ms() };
        match self.core.kv.put(&layout::bucket(&bucket), records::encode(&record), Cond::Absent, Durability::Through).await {
            Ok(_) => Ok(S3Response::new(CreateBucketOutput { location: Some(format!("/{bucket}")) })),
            Err(KvError::Mismatch) => Err(s3_error!(BucketAlreadyOwnedByYou, "Your previous request to create the named bucket succeeded and you already own it.")),
            Err(e) => Err(e.into()),
        }
    }

    async fn delete_bucket(&self, req: S3Request<DeleteBucketInput>) -> S3Result<S3Response<DeleteBucketOutput>> {
        let bucket = req.input.bucket;
        self.bucket_exists(&bucket).await?;
        let kv = &self.core.kv;
        let objects = layout::object_prefix(&bucket);
        let uploads = layout::upload_prefix(&bucket);
        let has_object = !kv.range(&objects.clone().freeze(), &layout::last_under(objects), 1).await?.is_empty();
        let has_upload = !kv.range(&uploads.clone().freeze(), &layout::last_under(uploads), 1).await?.is_empty();
        if has_object || has_upload {
            return Err(s3_error!(BucketNotEmpty, "The bucket you tried to delete is not empty"));
        }
        kv.delete(&layout::bucket(&bucket), Cond::Any, Durability::Through).await?;
        Ok(S3Response::new(DeleteBucketOutput {}))
    }

    async fn head_bucket(&self, req: S3Request<HeadBucketInput>) -> S3Result<S3Response<HeadBucketOutput>> {
        self.bucket_exists(&req.input.bucket).await?;
        Ok(S3Response::new(HeadBucketOutput::default()))
    }

    async fn get_bucket_location(&self, req: S3Request<GetBucketLocationInput>) -> S3Result<S3Response<GetBucketLocationOutput>> {
        self.bucket_exists(&req.input.bucket).await?;
        Ok(S3Response::new(GetBucketLocationOutput::default()))
    }

    async fn list_buckets(&self, _req: S3Request<ListBucketsInput>) -> S3Result<S3Response<ListBucketsOutput>> {
        let mut pages = Pages::new(layout::buckets(), crate::objects::PAGE);
        let mut buckets = Vec::new();
        while let Some(keys) = pages.next(&self.core.kv).await? {
            for k in &keys {
                let Some(name) = layout::bucket_name(k) else { continue };
                let Some(s) = self.core.kv.get(k).await? else { continue };
                let record: BucketRecord = records::decode("bucket", &s.value)?;
                buckets.push(Bucket { name: Some(name.to_owned()), creation_date: Some(timestamp(record.created_ms)), bucket_region: None });
            }
        }
        Ok(S3Response::new(ListBucketsOutput { buckets: Some(buckets), owner: Some(owner()), ..Default::default() }))
    }

    async fn put_object(&self, req: S3Request<PutObjectInput>) -> S3Result<S3Response<PutObjectOutput>> {
        let out = self.put(req.input, req.trailing_headers).await.map_err(closing)?;
        Ok(S3Response::new(out))
    }

    async fn get_object(&self, req: S3Request<GetObjectInput>) -> S3Result<S3Response<GetObjectOutput>> {
        let i = req.input;
        let m = self.existing(&i.bucket, &i.key).await?;
        check_read(&m, i.if_match.as_ref(), i.if_none_match.as_ref(), i.if_modified_since.as_ref(), i.if_unmodified_since.as_ref())?;
        let (range, parts_count) = span(&m, i.part_number, i.range.as_ref())?;
        let whole = 0..m.size;
        let r = range.clone().unwrap_or(whole);
        let body = self.core.read(m.segments.clone(), r.start, r.end);
        let a = m.attributes;
        Ok(S3Response::new(GetObjectOutput {
            body: Some(StreamingBlob::wrap(body)),
            content_length: Some((r.end - r.start) as i64),
            content_range: range.map(|r| format!("bytes {}-{}/{}", r.start, r.end.saturating_sub(1), m.size)),
            accept_ranges: Some("bytes".into()),
            e_tag: Some(ETag::Strong(m.etag)),
            last_modified: Some(timestamp(m.modified_ms)),
            metadata: unsorted(&a.metadata),
            content_type: a.content_type,
            content_encoding: a.content_encoding,
            content_disposition: a.content_disposition,
            content_language: a.content_language,
            cache_control: a.cache_control,
            parts_count,
            ..Default::default()
        }))
    }

    async fn head_object(&self, req: S3Request<HeadObjectInput>) -> S3Result<S3Response<HeadObjectOutput>> {
        let i = req.input;
        let m = self.existing(&i.bucket, &i.key).await?;
        check_read(&m, i.if_match.as_ref(), i.if_none_match.as_ref(), i.if_modified_since.as_ref(), i.if_unmodified_since.as_ref())?;
        let (range, parts_count) = span(&m, i.part_number, i.range.as_ref())?;
        let r = range.clone().unwrap_or(0..m.size);
        let a = m.attributes;
        Ok(S3Response::new(HeadObjectOutput {
            content_length: Some((r.end - r.start) as i64),
            content_range: range.map(|r| format!("bytes {}-{}/{}", r.start, r.end.saturating_sub(1), m.size)),
            accept_ranges: Some("bytes".into()),
            e_tag: Some(ETag::Strong(m.etag)),
            last_modified: Some(timestamp(m.modified_ms)),
            metadata: unsorted(&a.metadata),
            content_type: a.content_type,
            content_encoding: a.content_encoding,
            content_disposition: a.content_disposition,
            content_language: a.content_language,
            cache_control: a.cache_control,
            parts_count,
            ..Default::default()
        }))
    }

    async fn delete_object(&self, req: S3Request<DeleteObjectInput>) -> S3Result<S3Response<DeleteObjectOutput>> {
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

    async fn delete_objects(&self, req: S3Request<DeleteObjectsInput>) -> S3Result<S3Response<DeleteObjectsOutput>> {
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
                let r = match check_key(&o.key) {
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

    async fn copy_object(&self, req: S3Request<CopyObjectInput>) -> S3Result<S3Response<CopyObjectOutput>> {
        let i = req.input;
        check_key(&i.key)?;
        let cond = CopyConditions {
            if_match: i.copy_source_if_match.clone(),
            if_none_match: i.copy_source_if_none_match.clone(),
            if_modified_since: i.copy_source_if_modified_since.clone(),
            if_unmodified_since: i.copy_source_if_unmodified_since.clone(),
        };
        let (src_bucket, src_key, src) = self.copy_source(&i.copy_source, &cond).await?;
        self.bucket_exists(&i.bucket).await?;
        let replace = i.metadata_directive.as_ref().is_some_and(|d| d.as_str() == MetadataDirective::REPLACE);
        if src_bucket == i.bucket && src_key == i.key && !replace {
            return Err(s3_error!(
                InvalidRequest,
                "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes."
            ));
        }
        if src.size > MAX_PUT_BYTES {
            return Err(s3_error!(InvalidRequest, "The specified copy source is larger than the maximum allowable size for a copy source: {MAX_PUT_BYTES}"));
        }
        let attributes = if replace {
            Attributes {
                content_type: i.content_type,
                content_encoding: i.content_encoding,
                content_disposition: i.content_disposition,
                content_language: i.content_language,
                cache_control: i.cache_control,
                metadata: sorted(i.metadata),
            }
        } else {
            src.attributes.clone()
        };
        let owner = Owner { bucket: i.bucket.clone(), key: i.key.clone(), part: None };
        let body = StreamingBlob::wrap(self.core.read(src.segments.clone(), 0, src.size));
        let written = self.core.write_data(&owner, body, Default::default(), MAX_PUT_BYTES).await?;
        let data = written.segment.data;
        let manifest = Manifest { size: written.segment.size, etag: hex(&written.md5), modified_ms: records::now_ms(), attributes, segments: segments_of(written.segment) };
        if let Err(e) = self.core.commit(&i.bucket, &i.key, &manifest, |_| Ok(()), false, vec![Own { data, owner: owner.clone(), intent: written.intent }]).await {
            self.abandon(&e, data, &owner).await;
            return Err(e);
        }
        Ok(S3Response::new(CopyObjectOutput {
            copy_object_result: Some(CopyObjectResult { e_tag: Some(ETag::Strong(manifest.etag)), last_modified: Some(timestamp(manifest.modified_ms)), ..Default::default() }),
            ..Default::default()
        }))
    }

    async fn list_objects(&self, req: S3Request<ListObjectsInput>) -> S3Result<S3Response<ListObjectsOutput>> {
        let i = req.input;
        let prefix = i.prefix.clone().unwrap_or_default();
        let max = i.max_keys.unwrap_or(MAX_LIST);
        let (objects, prefixes, truncated, marker) = self.list_objects(&i.bucket, &prefix, i.delimiter.as_deref(), i.marker.as_deref(), max).await?;
        let enc = encoder(i.encoding_type.as_ref());
        // NextMarker is given only with a delimiter; without one clients resume after the last key.
        let next_marker = if truncated && i.delimiter.is_some() { marker.map(&enc) } else { None };
        Ok(S3Response::new(ListObjectsOutput {
            name: Some(i.bucket),
            prefix: Some(enc(prefix)),
            marker: i.marker.map(&enc),
            max_keys: Some(max),
            is_truncated: Some(truncated),
            contents: Some(objects.into_iter().map(|mut o| {
                o.key = o.key.map(&enc);
                o
            }).collect()),
            common_prefixes: Some(prefixes.into_iter().map(|p| CommonPrefix { prefix: p.prefix.map(&enc) }).collect()),
            delimiter: i.delimiter.map(&enc),
            next_marker,
            encoding_type: i.encoding_type,
            ..Default::default()
        }))
    }

    async fn list_objects_v2(&self, req: S3Request<ListObjectsV2Input>) -> S3Result<S3Response<ListObjectsV2Output>> {
        let i = req.input;
        let prefix = i.prefix.clone().unwrap_or_default();
        let max = i.max_keys.unwrap_or(MAX_LIST);
        let after = match (&i.continuation_token, &i.start_after) {
            (Some(t), _) => Some(decode_token(t)?),
            (None, Some(s)) => Some(s.clone()),
            (None, None) => None,
        };
        let (objects, prefixes, truncated, marker) = self.list_objects(&i.bucket, &prefix, i.delimiter.as_deref(), after.as_deref(), max).await?;
        let enc = encoder(i.encoding_type.as_ref());
        let count = objects.len() + prefixes.len();
        Ok(S3Response::new(ListObjectsV2Output {
            name: Some(i.bucket),
            prefix: Some(enc(prefix)),
            max_keys: Some(max),
            key_count: Some(count as i32),
            continuation_token: i.continuation_token,
            next_continuation_token: if truncated { marker.map(|m| encode_token(&m)) } else { None },
            is_truncated: Some(truncated),
            contents: (!objects.is_empty()).then(|| {
                objects
                    .into_iter()
                    .map(|mut o| {
                        o.key = o.key.map(&enc);
                        if i.fetch_owner == Some(true) {
                            o.owner = Some(owner());
                        }
                        o
                    })
                    .collect()
            }),
            common_prefixes: (!prefixes.is_empty()).then(|| prefixes.into_iter().map(|p| CommonPrefix { prefix: p.prefix.map(&enc) }).collect()),
            delimiter: i.delimiter.map(&enc),
            start_after: i.start_after.map(&enc),
            encoding_type: i.encoding_type,
            ..Default::default()
        }))
    }

    async fn create_multipart_upload(&self, req: S3Request<CreateMultipartUploadInput>) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
        let i = req.input;
        check_key(&i.key)?;
        self.bucket_exists(&i.bucket).await?;
        let id: UploadId = rand::random();
        let record = UploadRecord {
            initiated_ms: records::now_ms(),
            attributes: Attributes {
                content_type: i.content_type,
                content_encoding: i.content_encoding,
                content_disposition: i.content_disposition,
                content_language: i.content_language,
                cache_control: i.cache_control,
                metadata: sorted(i.metadata),
            },
            completing: None,
        };
        self.core.kv.put(&layout::upload(&i.bucket, &i.key, id), records::encode(&record), Cond::Absent, Durability::Through).await?;
        Ok(S3Response::new(CreateMultipartUploadOutput {
            bucket: Some(i.bucket),
            key: Some(i.key),
            upload_id: Some(layout::upload_id_text(id)),
            ..Default::default()
        }))
    }

    async fn upload_part(&self, req: S3Request<UploadPartInput>) -> S3Result<S3Response<UploadPartOutput>> {
        self.upload_part_in(req).await.map_err(closing)
    }

    async fn upload_part_copy(&self, req: S3Request<UploadPartCopyInput>) -> S3Result<S3Response<UploadPartCopyOutput>> {
        self.upload_part_copy_in(req).await
    }

    async fn list_parts(&self, req: S3Request<ListPartsInput>) -> S3Result<S3Response<ListPartsOutput>> {
        self.list_parts_in(req).await
    }

    async fn list_multipart_uploads(&self, req: S3Request<ListMultipartUploadsInput>) -> S3Result<S3Response<ListMultipartUploadsOutput>> {
        let i = req.input;
        self.bucket_exists(&i.bucket).await?;
        let base = layout::upload_prefix(&i.bucket);
        let prefix = i.prefix.clone().unwrap_or_default();
        let max = i.max_uploads.unwrap_or(MAX_LIST).clamp(0, MAX_LIST) as usize;
        if prefix.len() > MAX_KEY_BYTES || i.key_marker.as_ref().is_some_and(|k| k.len() > MAX_KEY_BYTES) {
            return Err(s3_error!(InvalidArgument, "a prefix or marker is at most {MAX_KEY_BYTES} bytes"));
        }
        // After a key marker: that key's uploads after the upload-id marker, then later keys.
        let start = i.key_marker.as_ref().map(|k| {
            let mut s = bytes::BytesMut::from(&base[..]);
            s.extend_from_slice(k.as_bytes());
            s.extend_from_slice(&[0]);
            match i.upload_id_marker.as_deref().and_then(layout::parse_upload_id) {
                Some(id) => layout::after(&layout::upload(&i.bucket, k, id)),
                None => layout::after_prefix(&s),
            }
        });
        let q = Query { base: &base, prefix: &prefix, delimiter: i.delimiter.as_deref(), after: i.key_marker.as_deref(), start, max };
        let listed = listing::list(&self.core.kv, &q, |suffix| {
            let at = suffix.iter().rposition(|&b| b == 0)?;
            std::str::from_utf8(&suffix[..at]).ok().map(str::to_owned)
        })
        .await?;
        let (mut uploads, mut prefixes) = (Vec::new(), Vec::new());
        let mut next = (None, None);
        for item in &listed.items {
            match item {
                Item::Record(k, name) => {
                    let Some((_, id)) = layout::upload_of(&base, k) else { continue };
                    let Some(s) = self.core.kv.get(k).await? else { continue };
                    let r: UploadRecord = records::decode("upload", &s.value)?;
                    next = (Some(name.clone()), Some(layout::upload_id_text(id)));
                    uploads.push(MultipartUpload {
                        key: Some(name.clone()),
                        upload_id: Some(layout::upload_id_text(id)),
                        initiated: Some(timestamp(r.initiated_ms)),
                        owner: Some(owner()),
                        initiator: Some(Initiator { display_name: Some("spindle".into()), id: Some("spindle".into()) }),
                        storage_class: Some(StorageClass::from_static(StorageClass::STANDARD)),
                        ..Default::default()
                    });
                }
                Item::Prefix(p) => {
                    next = (Some(p.clone()), None);
                    prefixes.push(CommonPrefix { prefix: Some(p.clone()) });
                }
            }
        }
        let enc = encoder(i.encoding_type.as_ref());
        Ok(S3Response::new(ListMultipartUploadsOutput {
            bucket: Some(i.bucket),
            prefix: Some(enc(prefix)),
            delimiter: i.delimiter.map(&enc),
            key_marker: i.key_marker.map(&enc),
            upload_id_marker: i.upload_id_marker,
            next_key_marker: if listed.truncated { next.0.map(&enc) } else { None },
            next_upload_id_marker: if listed.truncated { next.1 } else { None },
            max_uploads: Some(max as i32),
            is_truncated: Some(listed.truncated),
            uploads: Some(uploads.into_iter().map(|mut u| {
                u.key = u.key.map(&enc);
                u
            }).collect()),
            common_prefixes: (!prefixes.is_empty()).then(|| prefixes.into_iter().map(|p| CommonPrefix { prefix: p.prefix.map(&enc) }).collect()),
            encoding_type: i.encoding_type,
            ..Default::default()
        }))
    }

    async fn abort_multipart_upload(&self, req: S3Request<AbortMultipartUploadInput>) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        let i = req.input;
        let (id, record, version) = self.upload(&i.bucket, &i.key, &i.upload_id).await?;
        if let Some(c) = &record.completing {
            if u128::from(records::now_ms().saturating_sub(c.at_ms)) < self.core.grace.as_millis() {
                return Err(s3_error!(InvalidRequest, "the upload is being completed"));
            }
        }
        Self::abort(&self.core, &i.bucket, &i.key, id, version).await?;
        Ok(S3Response::new(AbortMultipartUploadOutput::default()))
    }

    async fn complete_multipart_upload(&self, req: S3Request<CompleteMultipartUploadInput>) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        let i = req.input;
        let (bucket, key) = (i.bucket.clone(), i.key.clone());
        let (id, mut record, version) = self.upload(&bucket, &key, &i.upload_id).await?;
        let listed = i.multipart_upload.and_then(|m| m.parts).unwrap_or_default();
        if listed.is_empty() {
            return Err(s3_error!(MalformedXML, "You must specify at least one part"));
        }
        // The parts named, each as uploaded.
        let mut chosen: Vec<(u32, PartRecord)> = Vec::with_capacity(listed.len());
        for p in &listed {
            let n = part_number(p.part_number.ok_or_else(|| s3_error!(InvalidPart, "a part has no number"))?)?;
            if chosen.last().is_some_and(|(last, _)| *last >= n) {
                return Err(s3_error!(InvalidPartOrder, "The list of parts was not in ascending order. The parts list must be specified in order by part number."));
            }
            let Some(s) = self.core.kv.get(&layout::part(id, n)).await? else {
                return Err(s3_error!(InvalidPart, "part {n} was not uploaded"));
            };
            let record: PartRecord = records::decode("part", &s.value)?;
            if p.e_tag.as_ref().is_some_and(|e| e.value() != record.etag) || p.e_tag.is_none() {
                return Err(s3_error!(InvalidPart, "part {n}'s ETag does not match the uploaded part's"));
            }
            chosen.push((n, record));
        }
        for (n, p) in &chosen[..chosen.len() - 1] {
            if p.segment.size < MIN_PART_BYTES {
                return Err(s3_error!(EntityTooSmall, "part {n} is {} bytes; every part but the last is at least {MIN_PART_BYTES}", p.segment.size));
            }
        }
        let (if_match, if_none_match) = (i.if_match.clone(), i.if_none_match.clone());
        check_write(self.manifest(&bucket, &key).await?.as_ref(), if_match.as_ref(), if_none_match.as_ref())?;
        // Take the upload with a fresh mark by compare-and-swap: from then no part changes, and
        // an abort (or the sweeper's cleanup of a stale completion) that read the record before
        // fails. A retry of the same completion may take it again; another one may not.
        let wanted: Vec<(u32, String)> = chosen.iter().map(|(n, p)| (*n, p.etag.clone())).collect();
        if let Some(c) = &record.completing {
            let fresh = u128::from(records::now_ms().saturating_sub(c.at_ms)) < self.core.grace.as_millis();
            if fresh && c.parts != wanted {
                return Err(s3_error!(InvalidRequest, "another completion of this upload, with other parts, is under way"));
            }
        }
        let before = record.completing.take();
        record.completing = Some(records::Completing { at_ms: records::now_ms(), parts: wanted });
        let upload_key = layout::upload(&bucket, &key, id);
        let version = match self.core.kv.put(&upload_key, records::encode(&record), Cond::Version(version), Durability::Through).await {
            Ok(v) => v,
            Err(KvError::Mismatch) => return Err(s3_error!(NoSuchUpload, "the upload was aborted or completed meanwhile")),
            Err(e) => return Err(e.into()),
        };
        // The chosen data is guarded as an upload's own: intents refreshed just before the swap.
        let mut own = Vec::with_capacity(chosen.len());
        for (n, p) in &chosen {
            let owner = Owner { bucket: bucket.clone(), key: key.clone(), part: Some((id, *n)) };
            let intent = self.core.put_intent(p.segment.data, &owner, None).await?;
            own.push(Own { data: p.segment.data, owner, intent });
        }
        let mut md5s = Vec::with_capacity(chosen.len() * 16);
        for (_, p) in &chosen {
            md5s.extend(unhex(&p.etag).ok_or_else(|| s3_error!(InternalError, "a stored part ETag is not hex"))?);
        }
        let mut h = s3s::crypto::Md5::new();
        h.update(&md5s);
        let etag = format!("{}-{}", hex(&h.finalize()), chosen.len());
        let segments: Vec<Segment> = chosen.iter().map(|(_, p)| p.segment).collect();
        let size = segments.iter().map(|s| s.size).sum();
        let manifest = Manifest { size, etag, modified_ms: records::now_ms(), attributes: record.attributes.clone(), segments };
        let conditional = if_match.is_some() || if_none_match.is_some();
        let committed = self.core.commit(&bucket, &key, &manifest, |old| check_write(old, if_match.as_ref(), if_none_match.as_ref()), conditional, own).await;
        if let Err(e) = committed {
            // The upload is given back as it was (its parts still referenced by their records).
            record.completing = before;
            let _ = self.core.kv.put(&upload_key, records::encode(&record), Cond::Version(version), Durability::Through).await;
            return Err(e);
        }
        // Part records go; data the object does not use (parts left out, parts uploaded again
        // after the completion read them) is released.
        for (n, k, p) in Self::parts_of(&self.core, id).await? {
            if !manifest.references(p.segment.data) {
                self.core.release(p.segment.data, &Owner { bucket: bucket.clone(), key: key.clone(), part: Some((id, n)) }).await?;
            }
            self.core.kv.delete(&k, Cond::Any, Durability::Through).await?;
        }
        let _ = self.core.kv.delete(&upload_key, Cond::Version(version), Durability::Through).await;
        Ok(S3Response::new(CompleteMultipartUploadOutput {
            bucket: Some(bucket.clone()),
            key: Some(key.clone()),
            e_tag: Some(ETag::Strong(manifest.etag)),
            location: Some(format!("/{bucket}/{key}")),
            ..Default::default()
        }))
    }
}

impl Gateway {
    async fn upload_part_in(&self, req: S3Request<UploadPartInput>) -> S3Result<S3Response<UploadPartOutput>> {
        let trailers = req.trailing_headers;
        let i = req.input;
        let number = part_number(i.part_number)?;
        let (id, record, _) = self.upload(&i.bucket, &i.key, &i.upload_id).await?;
        if record.completing.is_some() {
            return Err(s3_error!(NoSuchUpload, "the upload is being completed"));
        }
        if i.content_length.is_some_and(|n| n as u64 > MAX_PART_BYTES) {
            return Err(s3_error!(EntityTooLarge, "a part is at most {MAX_PART_BYTES} bytes"));
        }
        let wanted = Checksums::of_part(&i);
        let Some(body) = i.body else { return Err(s3_error!(IncompleteBody)) };
        let owner = Owner { bucket: i.bucket.clone(), key: i.key.clone(), part: Some((id, number)) };
        let written = self.core.write_data(&owner, body, wanted.hasher(), MAX_PART_BYTES).await?;
        if let Err(e) = verify(&written, i.content_md5.as_deref(), wanted, trailers) {
            self.core.discard(written.segment.data, &owner).await;
            return Err(e);
        }
        let part = PartRecord { etag: hex(&written.md5), modified_ms: records::now_ms(), segment: written.segment };
        self.commit_part(&i.bucket, &i.key, id, number, &part, written.intent.clone()).await?;
        let c = written.checksum;
        Ok(S3Response::new(UploadPartOutput {
            e_tag: Some(ETag::Strong(part.etag)),
            checksum_crc32: c.checksum_crc32,
            checksum_crc32c: c.checksum_crc32c,
            checksum_sha1: c.checksum_sha1,
            checksum_sha256: c.checksum_sha256,
            checksum_crc64nvme: c.checksum_crc64nvme,
            ..Default::default()
        }))
    }

    async fn upload_part_copy_in(&self, req: S3Request<UploadPartCopyInput>) -> S3Result<S3Response<UploadPartCopyOutput>> {
        let i = req.input;
        let number = part_number(i.part_number)?;
        let (id, record, _) = self.upload(&i.bucket, &i.key, &i.upload_id).await?;
        if record.completing.is_some() {
            return Err(s3_error!(NoSuchUpload, "the upload is being completed"));
        }
        let cond = CopyConditions {
            if_match: i.copy_source_if_match.clone(),
            if_none_match: i.copy_source_if_none_match.clone(),
            if_modified_since: i.copy_source_if_modified_since.clone(),
            if_unmodified_since: i.copy_source_if_unmodified_since.clone(),
        };
        let (_, _, src) = self.copy_source(&i.copy_source, &cond).await?;
        let range = match &i.copy_source_range {
            Some(r) => {
                let r = Range::parse(r).map_err(|_| s3_error!(InvalidArgument, "x-amz-copy-source-range must be bytes=first-last"))?;
                r.check(src.size)?
            }
            None => 0..src.size,
        };
        if range.end - range.start > MAX_PART_BYTES {
            return Err(s3_error!(EntityTooLarge, "a part is at most {MAX_PART_BYTES} bytes"));
        }
        let owner = Owner { bucket: i.bucket.clone(), key: i.key.clone(), part: Some((id, number)) };
        let body = StreamingBlob::wrap(self.core.read(src.segments.clone(), range.start, range.end));
        let written = self.core.write_data(&owner, body, Default::default(), MAX_PART_BYTES).await?;
        let part = PartRecord { etag: hex(&written.md5), modified_ms: records::now_ms(), segment: written.segment };
        self.commit_part(&i.bucket, &i.key, id, number, &part, written.intent.clone()).await?;
        Ok(S3Response::new(UploadPartCopyOutput {
            copy_part_result: Some(CopyPartResult { e_tag: Some(ETag::Strong(part.etag)), last_modified: Some(timestamp(part.modified_ms)), ..Default::default() }),
            ..Default::default()
        }))
    }

    async fn list_parts_in(&self, req: S3Request<ListPartsInput>) -> S3Result<S3Response<ListPartsOutput>> {
        let i = req.input;
        let (id, _, _) = self.upload(&i.bucket, &i.key, &i.upload_id).await?;
        let max = i.max_parts.unwrap_or(MAX_LIST).clamp(0, MAX_LIST) as usize;
        let marker = i.part_number_marker.unwrap_or(0).max(0) as u32;
        let (start, end) = layout::parts(id, marker.saturating_add(1), u32::MAX);
        let keys = self.core.kv.range(&start, &end, max + 1).await?;
        let truncated = keys.len() > max;
        let mut parts = Vec::new();
        for k in keys.iter().take(max) {
            let (Some(n), Some(s)) = (layout::part_number(k), self.core.kv.get(k).await?) else { continue };
            let p: PartRecord = records::decode("part", &s.value)?;
            parts.push(Part { part_number: Some(n as i32), e_tag: Some(ETag::Strong(p.etag)), size: Some(p.segment.size as i64), last_modified: Some(timestamp(p.modified_ms)), ..Default::default() });
        }
        let next = parts.last().and_then(|p| p.part_number);
        Ok(S3Response::new(ListPartsOutput {
            bucket: Some(i.bucket),
            key: Some(i.key),
            upload_id: Some(i.upload_id),
            part_number_marker: i.part_number_marker,
            next_part_number_marker: if truncated { next } else { None },
            max_parts: Some(max as i32),
            is_truncated: Some(truncated),
            parts: Some(parts),
            owner: Some(owner()),
            initiator: Some(Initiator { display_name: Some("spindle".into()), id: Some("spindle".into()) }),
            storage_class: Some(StorageClass::from_static(StorageClass::STANDARD)),
            ..Default::default()
        }))
    }

}

/// An error answered while the request body may still be unread: the connection cannot
/// carry another request, and the answer says so (`Connection: close`).
fn closing(mut e: S3Error) -> S3Error {
    let mut headers = http::HeaderMap::new();
    headers.insert(http::header::CONNECTION, http::HeaderValue::from_static("close"));
    headers.insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/xml"));
    e.set_headers(headers);
    e
}

/// Continuation tokens are opaque to clients: the resume name, hex-encoded so that any name
/// survives a query string.
fn encode_token(name: &str) -> String {
    hex(name.as_bytes())
}

fn decode_token(token: &str) -> S3Result<String> {
    unhex(token).and_then(|b| String::from_utf8(b).ok()).ok_or_else(|| s3_error!(InvalidArgument, "The continuation token provided is incorrect"))
}

/// Completions that crashed after taking their upload: once older than the grace, their
/// part records and upload record are cleaned away (the object keeps what it references).
pub async fn finish_stale_completions(core: &Core) -> S3Result<u64> {
    let mut pages = Pages::new(layout::uploads(), crate::objects::PAGE);
    let mut finished = 0;
    while let Some(keys) = pages.next(&core.kv).await? {
        for k in &keys {
            let Some(s) = core.kv.get(k).await? else { continue };
            let Ok(r) = records::decode::<UploadRecord>("upload", &s.value) else { continue };
            let Some(c) = r.completing else { continue };
            if u128::from(records::now_ms().saturating_sub(c.at_ms)) < core.grace.as_millis() {
                continue;
            }
            let Some((bucket, key, id)) = upload_parts_of(k) else { continue };
            match Gateway::abort(core, &bucket, &key, id, s.version).await {
                Ok(()) => finished += 1,
                Err(e) => tracing::warn!(bucket, key, upload = %layout::upload_id_text(id), error = %e, "a stale completion was not cleaned up"),
            }
        }
    }
    Ok(finished)
}

/// (bucket, key, upload id) of an upload record key.
fn upload_parts_of(k: &[u8]) -> Option<(String, String, UploadId)> {
    let bucket = layout::upload_bucket(k)?.to_owned();
    let (key, id) = layout::upload_of(&layout::upload_prefix(&bucket), k)?;
    Some((bucket, key.to_owned(), id))
}

impl From<S3Error> for crate::GatewayError {
    fn from(e: S3Error) -> Self {
        crate::GatewayError::S3(format!("{}: {}", e.code().as_str(), e.message().unwrap_or("")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(etag: &str, modified_ms: u64) -> Manifest {
        Manifest { size: 0, etag: etag.into(), modified_ms, attributes: Attributes::default(), segments: Vec::new() }
    }

    #[test]
    fn read_conditions_follow_rfc_7232() {
        let m = manifest("abc", 10_000);
        let same = ETagCondition::ETag(ETag::Strong("abc".into()));
        let other = ETagCondition::ETag(ETag::Strong("def".into()));
        assert!(check_read(&m, Some(&same), None, None, None).is_ok());
        assert_eq!(*check_read(&m, Some(&other), None, None, None).unwrap_err().code(), S3ErrorCode::PreconditionFailed);
        assert_eq!(*check_read(&m, None, Some(&same), None, None).unwrap_err().code(), S3ErrorCode::NotModified);
        assert!(check_read(&m, None, Some(&other), None, None).is_ok());
        let before = timestamp(5_000);
        let after = timestamp(20_000);
        assert_eq!(*check_read(&m, None, None, Some(&after), None).unwrap_err().code(), S3ErrorCode::NotModified);
        assert!(check_read(&m, None, None, Some(&before), None).is_ok());
        assert_eq!(*check_read(&m, None, None, None, Some(&before)).unwrap_err().code(), S3ErrorCode::PreconditionFailed);
        // If-Match that holds overrides If-Unmodified-Since.
        assert!(check_read(&m, Some(&same), None, None, Some(&before)).is_ok());
    }

    #[test]
    fn write_conditions() {
        let m = manifest("abc", 0);
        assert!(check_write(None, None, Some(&ETagCondition::Any)).is_ok());
        assert_eq!(*check_write(Some(&m), None, Some(&ETagCondition::Any)).unwrap_err().code(), S3ErrorCode::PreconditionFailed);
        assert_eq!(*check_write(None, Some(&ETagCondition::Any), None).unwrap_err().code(), S3ErrorCode::NoSuchKey);
        assert!(check_write(Some(&m), Some(&ETagCondition::ETag(ETag::Strong("abc".into()))), None).is_ok());
    }

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
    }
}
