//! The gateway's records, stored as JSON values: an object's manifest, a bucket, a multipart
//! upload and its parts, and the intent that keeps a data id's chunks accounted for.
//! JSON because the records are small beside the data and an operator can read them with
//! `spindle get`; every decoder refuses what it cannot read with an error, never a panic.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::acl::Acl;
use crate::layout::{DataId, UploadId};

#[derive(Debug, thiserror::Error)]
#[error("stored {kind} record does not decode: {reason}")]
pub struct RecordError {
    kind: &'static str,
    reason: String,
}

/// What a client sets on an object and gets back: standard headers and `x-amz-meta-*`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attributes {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_encoding: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_disposition: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_language: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_control: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
}

/// A run of an object's bytes: one data id's chunks, each `chunk` bytes but the last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Segment {
    pub data: DataId,
    pub size: u64,
    pub chunk: u32,
}

impl Segment {
    pub fn chunks(&self) -> u64 {
        if self.chunk == 0 {
            return 0;
        }
        self.size.div_ceil(u64::from(self.chunk))
    }
}

/// An object: written last, after all its chunks, so a reader finds either the whole old
/// object or the whole new one. In a versioned bucket also each version kept beside the
/// current one, and each delete marker (docs/design/s3-versioning.md).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub size: u64,
    /// As S3 gives it, without quotes: the MD5 in hex, or for a multipart object the MD5 of
    /// the parts' binary MD5s, a dash and the part count.
    pub etag: String,
    pub modified_ms: u64,
    #[serde(default)]
    pub attributes: Attributes,
    pub segments: Vec<Segment>,
    /// The multipart upload this object was completed from: a completion of it repeated
    /// after it succeeded answers as the first did, as in S3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_from: Option<u128>,
    /// The object's owner (canonical id); none: the bucket's owner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// None: private.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acl: Option<Acl>,
    /// The version id (`versions::new_id`); none: the "null" version, the only one of an
    /// unversioned bucket and the one written while versioning is suspended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// A delete marker: no data, and a GET of the key without a version finds nothing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub delete_marker: bool,
    /// The object's tags (S3 object tagging).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// The checksums of its bytes computed as they were written (a PUT that asked for one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<ObjectChecksum>,
    #[serde(flatten)]
    pub class: Class,
    /// Drawn for each swap that writes a manifest (`Core::commit`), kept when its tags or ACL
    /// are rewritten and when a kept version is made current again; none in a manifest older
    /// than the field and in a delete marker. Not the version id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap_id: Option<u64>,
    /// The `swap_id` of the manifest this one replaced: a writer whose swap raced tells from
    /// it whether its own took effect first (`Core::settle_race`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<u64>,
}

/// Where an object's data is kept: its storage class as S3 names it (none: STANDARD) and the
/// erasure-coded pool its chunks are stripes in (none: the store's replicated chunks).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Class {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
}

/// An object's checksums as S3 shows them (base64), each kept when the write computed it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectChecksum {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crc32: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crc32c: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha1: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crc64nvme: Option<String>,
}

impl Manifest {
    /// The version id as S3 shows it.
    pub fn version_id(&self) -> &str {
        self.version.as_deref().unwrap_or(NULL_VERSION)
    }

    pub fn references(&self, data: DataId) -> bool {
        self.segments.iter().any(|s| s.data == data)
    }

    pub fn check(&self) -> Result<(), RecordError> {
        let total = self.segments.iter().try_fold(0u64, |t, s| t.checked_add(s.size));
        if total != Some(self.size) || self.segments.iter().any(|s| s.chunk == 0 && s.size > 0) {
            return Err(RecordError { kind: "manifest", reason: format!("segments hold {total:?} bytes, the object {}", self.size) });
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketRecord {
    pub created_ms: u64,
    /// The owner's canonical id; none for a bucket of the administrators (and every bucket
    /// made before users existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// None: private (the owner has full control, nobody else anything).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acl: Option<Acl>,
    /// The bucket policy as the client gave it (checked when it was put).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_access_block: Option<PublicAccessBlock>,
    /// None: ObjectWriter (ACLs apply; see docs/design/s3-access.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ownership: Option<Ownership>,
    /// None: versioning was never enabled (a bucket cannot go back to that state).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub versioning: Option<Versioning>,
    /// None: no CORS configuration (browsers' cross-origin requests are refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cors: Option<Vec<CorsRule>>,
    /// None: no tag set (GetBucketTagging answers NoSuchTagSet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<BTreeMap<String, String>>,
    /// Lifecycle rules (PutBucketLifecycleConfiguration), applied by the lifecycle pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<Vec<Rule>>,
}

// A bucket's lifecycle rules as stored (`lifecycle` checks, converts and applies them).

/// When an action is due: some days after the object was written, or from a date on (ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum When {
    Days(u32),
    Date(u64),
}

/// Which objects a rule applies to: all of them must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Filter {
    #[serde(default)]
    pub prefix: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub larger_than: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smaller_than: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub enabled: bool,
    #[serde(default)]
    pub filter: Filter,
    /// Storage class and when, in the order given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub transitions: Vec<(String, When)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiration: Option<When>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abort_uploads_after_days: Option<u32>,
}

/// The version id of the version an unversioned or suspended bucket writes.
pub const NULL_VERSION: &str = "null";

/// A bucket's versioning, once set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Versioning {
    /// Every write makes a new version; the one it replaces is kept.
    Enabled,
    /// Writes make the "null" version, replacing an earlier null one; versions made while
    /// enabled are kept.
    Suspended,
}

impl BucketRecord {
    pub fn owner_id(&self) -> &str {
        self.owner.as_deref().unwrap_or(ADMIN_ID)
    }

    pub fn block(&self) -> PublicAccessBlock {
        self.public_access_block.unwrap_or_default()
    }

    pub fn ownership(&self) -> Ownership {
        self.ownership.unwrap_or(Ownership::ObjectWriter)
    }

    /// Whether writes keep the versions they replace (`None`: never versioned).
    pub fn versioning(&self) -> Option<Versioning> {
        self.versioning
    }
}

/// One CORS rule of a bucket (`cors` decides requests by them).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CorsRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub allowed_origins: Vec<String>,
    pub allowed_methods: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_headers: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expose_headers: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age_seconds: Option<i32>,
}

/// The administrators' canonical id: the owner of what they make.
pub const ADMIN_ID: &str = "bef122e836e0a19f5ec52856c7e3ce8416148363f03daf9b2ae218812bdabecf";

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublicAccessBlock {
    pub block_public_acls: bool,
    pub ignore_public_acls: bool,
    pub block_public_policy: bool,
    pub restrict_public_buckets: bool,
}

/// S3 Object Ownership.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Ownership {
    /// ACLs off: the bucket owner owns every object.
    BucketOwnerEnforced,
    /// The bucket owner owns objects written with bucket-owner-full-control.
    BucketOwnerPreferred,
    /// The writer owns what it writes.
    ObjectWriter,
}

impl Ownership {
    pub fn parse(s: &str) -> Option<Ownership> {
        Some(match s {
            "BucketOwnerEnforced" => Ownership::BucketOwnerEnforced,
            "BucketOwnerPreferred" => Ownership::BucketOwnerPreferred,
            "ObjectWriter" => Ownership::ObjectWriter,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Ownership::BucketOwnerEnforced => "BucketOwnerEnforced",
            Ownership::BucketOwnerPreferred => "BucketOwnerPreferred",
            Ownership::ObjectWriter => "ObjectWriter",
        }
    }
}

/// A multipart upload in progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadRecord {
    pub initiated_ms: u64,
    #[serde(default)]
    pub attributes: Attributes,
    /// Set when a CompleteMultipartUpload took the upload: no part may change after it, and an
    /// abort is refused until it is older than the sweep grace (a completion that crashed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completing: Option<Completing>,
    /// A completion gave the upload back without knowing whether its manifest swap took
    /// effect (it answered 5xx): a later completion first looks for a version completed from
    /// this upload among the key's kept versions, where a write since may have put it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub swap_unknown: bool,
    /// The object's owner and ACL once completed (as the manifest has them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acl: Option<Acl>,
    /// The object's tags once completed (x-amz-tagging at its creation).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// The class its parts are written in, and the object will have.
    #[serde(flatten)]
    pub class: Class,
}

/// A completion under way: when it took the upload, and the parts (number, ETag) it chose.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Completing {
    pub at_ms: u64,
    pub parts: Vec<(u32, String)>,
    /// Drawn by the completion: it tells its own mark from another's when a race left its
    /// write of the record unknown.
    #[serde(default)]
    pub by: u64,
}

impl Completing {
    /// Whether the mark was taken less than `within` ago (by this gateway's clock).
    pub fn younger_than(&self, within: std::time::Duration) -> bool {
        u128::from(now_ms().saturating_sub(self.at_ms)) < within.as_millis()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartRecord {
    /// Hex MD5 of the part.
    pub etag: String,
    pub modified_ms: u64,
    pub segment: Segment,
}

/// Who may still reference a data id: the object, or a part of one of its uploads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    pub bucket: String,
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part: Option<(UploadId, u32)>,
}

/// Written before a data id's first chunk and whenever its chunks may have lost their last
/// reference: the sweeper deletes the chunks of a data id whose intent is older than the
/// grace and which no owner references. An upload in progress keeps its intent fresh.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Intent {
    pub touched_ms: u64,
    pub owner: Owner,
    /// The sweeper has found the data unreferenced and is deleting it: nothing may revive it.
    #[serde(default)]
    pub doomed: bool,
    /// Written by a swap of the owner's object that may change whether it references the data
    /// (the refresh just before a swap that references it, or the release before one that
    /// replaces it): the swap may stand on a replica that reads do not ask, and be chosen
    /// later, so the sweeper settles the object from every replica before it judges.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub swapping: bool,
}

pub fn encode<T: Serialize>(record: &T) -> Bytes {
    // Serializing these plain structs to a vector cannot fail.
    Bytes::from(serde_json::to_vec(record).unwrap_or_default())
}

pub fn decode<T: for<'de> Deserialize<'de>>(kind: &'static str, bytes: &[u8]) -> Result<T, RecordError> {
    serde_json::from_slice(bytes).map_err(|e| RecordError { kind, reason: e.to_string() })
}

pub fn decode_manifest(bytes: &[u8]) -> Result<Manifest, RecordError> {
    let m: Manifest = decode("manifest", bytes)?;
    m.check()?;
    Ok(m)
}

/// Unix milliseconds now, by the cluster's wall clock: the system's, or the one whoever embeds
/// the gateway set (the simulator's, each gateway's skewed as its host's).
pub fn now_ms() -> u64 {
    spindle_cluster::clock::now_ms()
}

pub fn time_of(ms: u64) -> SystemTime {
    UNIX_EPOCH + std::time::Duration::from_millis(ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn segment() -> impl Strategy<Value = Segment> {
        (any::<u128>(), 0u64..1 << 40, 1u32..=1 << 20).prop_map(|(data, size, chunk)| Segment { data, size, chunk })
    }

    proptest! {
        #[test]
        fn manifests_round_trip(segments in proptest::collection::vec(segment(), 0..20), etag in "[0-9a-f]{32}(-[0-9]{1,5})?",
                                meta in proptest::collection::btree_map("[a-z-]{1,10}", "\\PC{0,20}", 0..4)) {
            let size = segments.iter().map(|s| s.size).sum();
            let m = Manifest { size, etag, modified_ms: 7, attributes: Attributes { metadata: meta, ..Attributes::default() }, segments, version: Some("v".into()), ..Manifest::default() };
            prop_assert_eq!(decode_manifest(&encode(&m)).unwrap(), m);
        }

        #[test]
        fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = decode_manifest(&bytes);
            let _ = decode::<Intent>("intent", &bytes);
            let _ = decode::<UploadRecord>("upload", &bytes);
            let _ = decode::<PartRecord>("part", &bytes);
        }
    }

    #[test]
    fn a_manifest_whose_segments_disagree_is_refused() {
        let m = Manifest { size: 10, etag: "x".into(), segments: vec![Segment { data: 1, size: 9, chunk: 4 }], ..Manifest::default() };
        assert!(decode_manifest(&encode(&m)).is_err());
        assert_eq!(Segment { data: 1, size: 9, chunk: 4 }.chunks(), 3);
    }
}
