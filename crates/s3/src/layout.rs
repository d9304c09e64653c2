//! Where the gateway's records live in the store's key space. Every key starts with `ROOT`
//! so the gateway can share a cluster with other users; then one byte names the record kind.
//! A bucket's objects sort by key under one prefix (`object_prefix`), so a listing is one
//! ordered range scan; a data id's chunks sort by index, so an object streams in key order.
//! A bucket's manifests and uploads carry the bucket as a hash tag (`{bucket}`): a cluster
//! places them in one partition, so a listing asks one partition's replicas, not every drive.
//! Chunks carry no tag and spread over the whole cluster.
//! Object keys never contain NUL (refused at the boundary): NUL separates a bucket from a key
//! and a key from an upload id, and `key + [0]` is the next possible key after `key`.

use bytes::{BufMut, Bytes, BytesMut};

pub const ROOT: &[u8] = b"s3\0";
const BUCKET: u8 = b'B';
const OBJECT: u8 = b'O';
const UPLOAD: u8 = b'U';
const PART: u8 = b'P';
const DATA: u8 = b'D';
const INTENT: u8 = b'G';
const USER: u8 = b'I';
const VERSION: u8 = b'V';
const SEP: u8 = 0;

/// An object's data (one upload's chunks) is named by a random 128-bit id: two uploads of
/// the same key never share chunks, so a reader of the old object is never mixed with the new.
pub type DataId = u128;
pub type UploadId = u128;

fn key(kind: u8, capacity: usize) -> BytesMut {
    let mut k = BytesMut::with_capacity(ROOT.len() + 1 + capacity);
    k.put_slice(ROOT);
    k.put_u8(kind);
    k
}

pub fn bucket(name: &str) -> Bytes {
    let mut k = key(BUCKET, name.len());
    k.put_slice(name.as_bytes());
    k.freeze()
}

/// A user's record (`users`).
pub fn user(name: &str) -> Bytes {
    let mut k = key(USER, name.len());
    k.put_slice(name.as_bytes());
    k.freeze()
}

/// The first and last possible user record keys.
pub fn users() -> (Bytes, Bytes) {
    (key(USER, 0).freeze(), last_under(key(USER, 0)))
}

/// The first and last possible bucket record keys.
pub fn buckets() -> (Bytes, Bytes) {
    (key(BUCKET, 0).freeze(), last_under(key(BUCKET, 0)))
}

pub fn bucket_name(record_key: &[u8]) -> Option<&str> {
    let rest = record_key.strip_prefix(ROOT)?.strip_prefix(&[BUCKET])?;
    std::str::from_utf8(rest).ok()
}

/// `{bucket}` and the separator: bucket names hold no braces.
fn tagged(kind: u8, bucket: &str) -> BytesMut {
    let mut k = key(kind, bucket.len() + 3);
    k.put_u8(b'{');
    k.put_slice(bucket.as_bytes());
    k.put_u8(b'}');
    k.put_u8(SEP);
    k
}

pub fn object_prefix(bucket: &str) -> BytesMut {
    tagged(OBJECT, bucket)
}

pub fn object(bucket: &str, name: &str) -> Bytes {
    let mut k = object_prefix(bucket);
    k.put_slice(name.as_bytes());
    k.freeze()
}

/// A bucket's kept versions (noncurrent ones and delete markers), by name and then newest
/// first: `name`, NUL, the version's order key (`versions::order_key`).
pub fn version_prefix(bucket: &str) -> BytesMut {
    tagged(VERSION, bucket)
}

/// The kept version of `name` whose order key is `order`.
pub fn version(bucket: &str, name: &str, order: &str) -> Bytes {
    let mut k = versions_of_prefix(bucket, name);
    k.put_slice(order.as_bytes());
    k.freeze()
}

fn versions_of_prefix(bucket: &str, name: &str) -> BytesMut {
    let mut k = version_prefix(bucket);
    k.put_slice(name.as_bytes());
    k.put_u8(SEP);
    k
}

/// Every kept version of `name`, newest first.
pub fn versions_of(bucket: &str, name: &str) -> (Bytes, Bytes) {
    let k = versions_of_prefix(bucket, name);
    (k.clone().freeze(), last_under(k))
}

/// (name, order key) of a kept version's record key under `prefix` (= `version_prefix`).
pub fn version_of<'a>(prefix: &[u8], record_key: &'a [u8]) -> Option<(&'a str, &'a str)> {
    let rest = record_key.strip_prefix(prefix)?;
    let at = rest.iter().rposition(|&b| b == SEP)?;
    Some((std::str::from_utf8(&rest[..at]).ok()?, std::str::from_utf8(&rest[at + 1..]).ok()?))
}

pub fn upload_prefix(bucket: &str) -> BytesMut {
    tagged(UPLOAD, bucket)
}

/// Every upload record of every bucket.
pub fn uploads() -> (Bytes, Bytes) {
    (key(UPLOAD, 0).freeze(), last_under(key(UPLOAD, 0)))
}

/// The bucket of an upload record key.
pub fn upload_bucket(record_key: &[u8]) -> Option<&str> {
    let rest = record_key.strip_prefix(ROOT)?.strip_prefix(&[UPLOAD, b'{'])?;
    let close = rest.iter().position(|&b| b == b'}')?;
    std::str::from_utf8(&rest[..close]).ok()
}

pub fn upload(bucket: &str, name: &str, id: UploadId) -> Bytes {
    let mut k = upload_prefix(bucket);
    k.put_slice(name.as_bytes());
    k.put_u8(SEP);
    k.put_slice(upload_id_text(id).as_bytes());
    k.freeze()
}

/// The upload records of one object name.
pub fn uploads_of(bucket: &str, name: &str) -> (Bytes, Bytes) {
    let mut k = upload_prefix(bucket);
    k.put_slice(name.as_bytes());
    k.put_u8(SEP);
    (k.clone().freeze(), last_under(k))
}

/// (object name, upload id) of an upload record key under `prefix` (= `upload_prefix(bucket)`).
pub fn upload_of<'a>(prefix: &[u8], record_key: &'a [u8]) -> Option<(&'a str, UploadId)> {
    let rest = record_key.strip_prefix(prefix)?;
    let at = rest.iter().rposition(|&b| b == SEP)?;
    let name = std::str::from_utf8(&rest[..at]).ok()?;
    let id = parse_upload_id(std::str::from_utf8(&rest[at + 1..]).ok()?)?;
    Some((name, id))
}

/// Upload ids as clients see them: 32 lowercase hex digits.
pub fn upload_id_text(id: UploadId) -> String {
    format!("{id:032x}")
}

pub fn parse_upload_id(s: &str) -> Option<UploadId> {
    if s.len() != 32 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    UploadId::from_str_radix(s, 16).ok()
}

pub fn part(upload: UploadId, number: u32) -> Bytes {
    let mut k = key(PART, 20);
    k.put_u128(upload);
    k.put_u32(number);
    k.freeze()
}

/// The part records of an upload numbered `from..=to`.
pub fn parts(upload: UploadId, from: u32, to: u32) -> (Bytes, Bytes) {
    (part(upload, from), part(upload, to))
}

/// The upload a part record key belongs to.
pub fn part_upload(record_key: &[u8]) -> Option<UploadId> {
    let rest = record_key.strip_prefix(ROOT)?.strip_prefix(&[PART])?;
    Some(u128::from_be_bytes(rest.get(..16)?.try_into().ok()?))
}

pub fn part_number(record_key: &[u8]) -> Option<u32> {
    let rest = record_key.strip_prefix(ROOT)?.strip_prefix(&[PART])?;
    let n: [u8; 4] = rest.get(16..20)?.try_into().ok()?;
    Some(u32::from_be_bytes(n))
}

pub fn chunk(data: DataId, index: u32) -> Bytes {
    let mut k = key(DATA, 20);
    k.put_u128(data);
    k.put_u32(index);
    k.freeze()
}

/// `data` with its top byte naming where its chunks go: 0 for the store's replicated chunks,
/// else a tag of the erasure-coded pool's name, so that the sweeper asks only pools that may
/// hold it (data ids written before pools existed are fully random and may name any: their
/// tag's pools are asked too, and hold nothing of theirs).
pub fn tagged_data(data: DataId, pool: Option<&str>) -> DataId {
    (data & !(0xFF << 120)) | (u128::from(pool.map_or(0, pool_tag)) << 120)
}

/// Whether `pool` may hold stripes of `data`.
pub fn may_hold(pool: &str, data: DataId) -> bool {
    (data >> 120) as u8 == pool_tag(pool)
}

/// 1 to 255 from a pool's name (FNV-1a): stable across processes and versions.
fn pool_tag(pool: &str) -> u8 {
    let h = pool.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    (h % 255) as u8 + 1
}

/// All chunk keys of one data id.
pub fn chunks(data: DataId) -> (Bytes, Bytes) {
    (chunk(data, 0), chunk(data, u32::MAX))
}

/// Every manifest of every bucket: objects' current versions and their kept ones.
pub fn manifests() -> [(Bytes, Bytes); 2] {
    [(key(OBJECT, 0).freeze(), last_under(key(OBJECT, 0))), (key(VERSION, 0).freeze(), last_under(key(VERSION, 0)))]
}

/// Every part record of every multipart upload.
pub fn all_parts() -> (Bytes, Bytes) {
    (part(UploadId::MIN, 0), part(UploadId::MAX, u32::MAX))
}

/// Every chunk key, of every data id.
pub fn all_chunks() -> (Bytes, Bytes) {
    (chunk(DataId::MIN, 0), chunk(DataId::MAX, u32::MAX))
}

/// The data id a chunk key belongs to.
pub fn chunk_data(record_key: &[u8]) -> Option<DataId> {
    let rest = record_key.strip_prefix(ROOT)?.strip_prefix(&[DATA])?;
    Some(u128::from_be_bytes(rest.get(..16)?.try_into().ok()?))
}

pub fn intent(data: DataId) -> Bytes {
    let mut k = key(INTENT, 16);
    k.put_u128(data);
    k.freeze()
}

/// Every intent key. Not `last_under`: a data id is binary, and one whose first byte is 0xFF
/// sorts after the prefix with 0xFF (such intents, 1 in 256, were never swept).
pub fn intents() -> (Bytes, Bytes) {
    (intent(DataId::MIN), intent(DataId::MAX))
}

pub fn intent_data(record_key: &[u8]) -> Option<DataId> {
    let rest = record_key.strip_prefix(ROOT)?.strip_prefix(&[INTENT])?;
    Some(u128::from_be_bytes(rest.try_into().ok()?))
}

/// The last key of a range that holds every key starting with `prefix` followed by UTF-8
/// (names, upload ids in hex), which never contains 0xFF; not for binary suffixes.
pub fn last_under(mut prefix: BytesMut) -> Bytes {
    prefix.put_u8(0xFF);
    prefix.freeze()
}

/// The smallest key greater than `key` and every key it prefixes: the resume point after
/// a common prefix (UTF-8 never holds 0xFF).
pub fn after_prefix(key: &[u8]) -> Bytes {
    let mut k = BytesMut::from(key);
    k.put_u8(0xFF);
    k.freeze()
}

/// The smallest key greater than `key`.
pub fn after(key: &[u8]) -> Bytes {
    let mut k = BytesMut::from(key);
    k.put_u8(0);
    k.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_chunk_key_falls_in_the_range_of_all_chunks_and_names_its_data() {
        let (start, end) = all_chunks();
        for data in [DataId::MIN, 1, 0xFF << 120, DataId::MAX] {
            for index in [0, 7, u32::MAX] {
                let k = chunk(data, index);
                assert!(start <= k && k <= end, "chunk {index} of {data:x} outside the range");
                assert_eq!(chunk_data(&k), Some(data));
            }
        }
        // Neither an intent nor a part is taken for a chunk.
        assert_eq!(chunk_data(&intent(5)), None);
        assert!(part(1, 1) < all_parts().1 && part(1, 1) > all_parts().0);
        assert_eq!((part_upload(&part(7, 3)), part_number(&part(7, 3))), (Some(7), Some(3)));
        assert_eq!(chunk_data(&part(1, 1)), None);
    }

    #[test]
    fn a_pools_data_is_tagged_for_it_and_replicated_data_for_none() {
        let d = tagged_data(u128::MAX, Some("cold"));
        assert!(may_hold("cold", d));
        assert_eq!(d << 8, u128::MAX << 8);
        assert_eq!(tagged_data(u128::MAX, None) >> 120, 0);
        assert!(!may_hold("cold", tagged_data(7, None)));
        assert!((0..64).map(|i| pool_tag(&format!("p{i}"))).all(|t| t != 0));
    }

    #[test]
    fn records_parse_back() {
        assert!(object("b", "dir/ä x").starts_with(&object_prefix("b")));
        assert_eq!(bucket_name(&bucket("my-bucket")), Some("my-bucket"));
        let up = upload_prefix("b");
        assert_eq!(upload_of(&up, &upload("b", "k/1", 77)), Some(("k/1", 77)));
        assert_eq!(part_number(&part(5, 10_000)), Some(10_000));
        assert_eq!(intent_data(&intent(u128::MAX)), Some(u128::MAX));
        // The sweeper's range holds the extremes (a data id starting with 0xFF included).
        let (start, end) = intents();
        assert!(start <= intent(0) && intent(u128::MAX) <= end && intent(0xFF << 120) <= end);
        assert_eq!(parse_upload_id(&upload_id_text(12345)), Some(12345));
        assert_eq!(parse_upload_id("xyz"), None);
        let vp = version_prefix("b");
        assert_eq!(version_of(&vp, &version("b", "k/1", "ff00")), Some(("k/1", "ff00")));
        let (first, last) = versions_of("b", "k");
        assert!(first <= version("b", "k", "0") && version("b", "k", "ffnull") <= last);
        // A longer name's versions lie outside: "k" and "k0" are apart.
        assert!(version("b", "k0", "0") > last);
    }

    #[test]
    fn buckets_do_not_interleave() {
        // Each bucket's objects lie in [prefix, last_under(prefix)], and the ranges of "a" and
        // "a-b" do not overlap.
        let (a, b) = (object_prefix("a"), object_prefix("a-b"));
        let (a_end, b_end) = (last_under(a.clone()), last_under(b.clone()));
        assert!(a_end < b.clone().freeze() || b_end < a.clone().freeze());
        assert!(object("a", "\u{10FFFF}") < a_end);
        assert_eq!(upload_bucket(&upload("a-b", "k", 1)), Some("a-b"));
    }

    proptest::proptest! {
        /// Every intent lies in the range the sweeper walks, whatever its data id's bytes.
        #[test]
        fn every_intent_is_in_the_intents_range(data: u128) {
            let (start, end) = intents();
            let k = intent(data);
            proptest::prop_assert!(start <= k && k <= end, "intent {data:032x} outside the intents range");
        }

        /// An object's uploads lie in its range, and no other object's do (the sweeper reads
        /// them for data a part may still name).
        #[test]
        fn an_objects_uploads_are_in_its_range_and_no_others(a in "\\PC{0,12}", b in "\\PC{0,12}", id: u128) {
            proptest::prop_assume!(!a.contains('\0') && !b.contains('\0'));
            let (start, end) = uploads_of("bk", &a);
            let own = upload("bk", &a, id);
            proptest::prop_assert!(start <= own && own <= end);
            let k = upload("bk", &b, id);
            proptest::prop_assert_eq!(start <= k && k <= end, a == b);
            proptest::prop_assert_eq!(upload_of(&upload_prefix("bk"), &k), Some((b.as_str(), id)));
        }

        #[test]
        fn object_keys_sort_as_names(a in "\\PC{0,12}", b in "\\PC{0,12}") {
            proptest::prop_assume!(!a.contains('\0') && !b.contains('\0'));
            proptest::prop_assert_eq!(a.as_bytes().cmp(b.as_bytes()), object("bk", &a).cmp(&object("bk", &b)));
            // Everything under a name as a prefix lies in [name, after_prefix(name)).
            let under = format!("{a}{b}");
            proptest::prop_assert!(object("bk", &under) < after_prefix(&object("bk", &a)));
            proptest::prop_assert!(after(&object("bk", &a)) <= object("bk", &under) || b.is_empty());
        }
    }
}
