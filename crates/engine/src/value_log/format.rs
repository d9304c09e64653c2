//! The value log's on-disk format: segment files of records, each record a key and its value.
//!
//! ```text
//! segment:  "SPNDVLOG" u32 format (1) u32 segment id      then records, back to back
//! record:   u32 magic "VLR1"
//!           u32 CRC-32C of the 10 bytes after it and the key
//!           u16 key length   u32 value length   u32 CRC-32C of the value
//!           key bytes        value bytes
//! ```
//! Big-endian throughout. The key is there so that a segment can be read without the index
//! (garbage collection, recovery); the header's own checksum keeps a torn or damaged header
//! from being taken for lengths. A record is found by its segment and offset
//! ([`Pointer`]), which the key's metadata record holds.

use bytes::{Buf, BufMut};

/// The first bytes of every segment file.
pub const SEGMENT_MAGIC: &[u8; 8] = b"SPNDVLOG";
/// The segment format this release writes (and the only one it reads).
pub const SEGMENT_FORMAT: u32 = 1;
/// Bytes before a segment's first record.
pub const SEGMENT_HEADER_LEN: u64 = 16;
const RECORD_MAGIC: u32 = u32::from_be_bytes(*b"VLR1");
/// Bytes of a record before its key.
pub const RECORD_HEAD_LEN: usize = 4 + 4 + 2 + 4 + 4;

/// Where a value lives in the log: its segment and the offset of its record there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Pointer {
    pub segment: u32,
    pub offset: u64,
}

/// A record's header as read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordHead {
    pub key_len: usize,
    pub value_len: u32,
    pub value_crc: u32,
}

impl RecordHead {
    /// The whole record's length on disk.
    pub fn record_len(&self) -> u64 {
        record_len(self.key_len, self.value_len)
    }
}

/// A record's length on disk for a key and value of these lengths.
pub fn record_len(key_len: usize, value_len: u32) -> u64 {
    (RECORD_HEAD_LEN + key_len) as u64 + u64::from(value_len)
}

/// Where a record's value begins, for a record at `pointer` under a key of `key_len` bytes.
pub fn value_offset(pointer: Pointer, key_len: usize) -> u64 {
    pointer.offset + (RECORD_HEAD_LEN + key_len) as u64
}

/// A segment's header.
pub fn segment_header(id: u32) -> [u8; SEGMENT_HEADER_LEN as usize] {
    let mut out = [0u8; SEGMENT_HEADER_LEN as usize];
    let mut w = &mut out[..];
    w.put_slice(SEGMENT_MAGIC);
    w.put_u32(SEGMENT_FORMAT);
    w.put_u32(id);
    out
}

/// Whether `bytes` is the header of segment `id` in a format this release reads.
pub fn is_segment_header(bytes: &[u8], id: u32) -> bool {
    bytes.len() == SEGMENT_HEADER_LEN as usize && bytes[..8] == SEGMENT_MAGIC[..] && {
        let mut rest = &bytes[8..];
        rest.get_u32() == SEGMENT_FORMAT && rest.get_u32() == id
    }
}

/// The header and key of a record (the value follows them).
pub fn record_head(key: &[u8], value_len: u32, value_crc: u32) -> Vec<u8> {
    debug_assert!(key.len() <= usize::from(u16::MAX));
    let fields = head_fields(key.len() as u16, value_len, value_crc);
    let mut out = Vec::with_capacity(RECORD_HEAD_LEN + key.len());
    out.put_u32(RECORD_MAGIC);
    out.put_u32(head_crc(&fields, key));
    out.put_slice(&fields);
    out.put_slice(key);
    out
}

/// The header fields its checksum covers (with the key after them).
fn head_fields(key_len: u16, value_len: u32, value_crc: u32) -> [u8; 10] {
    let mut fields = [0u8; 10];
    let mut w = &mut fields[..];
    w.put_u16(key_len);
    w.put_u32(value_len);
    w.put_u32(value_crc);
    fields
}

fn head_crc(fields: &[u8; 10], key: &[u8]) -> u32 {
    let mut crc = crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32Iscsi);
    crc.update(fields);
    crc.update(key);
    crc.finalize() as u32
}

/// Decodes the fixed part of a record header (its first [`RECORD_HEAD_LEN`] bytes); the
/// header's checksum is verified with the key by [`head_checks`].
pub fn decode_head(bytes: &[u8]) -> Option<(u32, RecordHead)> {
    if bytes.len() < RECORD_HEAD_LEN {
        return None;
    }
    let mut r = bytes;
    if r.get_u32() != RECORD_MAGIC {
        return None;
    }
    let crc = r.get_u32();
    let key_len = usize::from(r.get_u16());
    let value_len = r.get_u32();
    let value_crc = r.get_u32();
    Some((crc, RecordHead { key_len, value_len, value_crc }))
}

/// Whether a header's checksum `crc` matches its fields and `key`.
pub fn head_checks(crc: u32, head: &RecordHead, key: &[u8]) -> bool {
    key.len() == head.key_len && head_crc(&head_fields(head.key_len as u16, head.value_len, head.value_crc), key) == crc
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn headers_round_trip(key in proptest::collection::vec(any::<u8>(), 0..300), value_len in any::<u32>(), value_crc in any::<u32>()) {
            let raw = record_head(&key, value_len, value_crc);
            prop_assert_eq!(raw.len(), RECORD_HEAD_LEN + key.len());
            let (crc, head) = decode_head(&raw).unwrap();
            prop_assert_eq!(&head, &RecordHead { key_len: key.len(), value_len, value_crc });
            prop_assert!(head_checks(crc, &head, &raw[RECORD_HEAD_LEN..]));
        }

        /// Any change to a header or its key is caught (or the magic no longer reads).
        #[test]
        fn damaged_headers_are_caught(key in proptest::collection::vec(any::<u8>(), 1..64), at in any::<prop::sample::Index>(), flip in 1u8..=255) {
            let mut raw = record_head(&key, 1 << 20, 7);
            let at = at.index(raw.len());
            raw[at] ^= flip;
            if let Some((crc, head)) = decode_head(&raw) {
                let key = raw.get(RECORD_HEAD_LEN..RECORD_HEAD_LEN + head.key_len).unwrap_or(&[]);
                prop_assert!(!head_checks(crc, &head, key));
            }
        }

        #[test]
        fn checksums_of_any_bytes_are_crc32c(data in proptest::collection::vec(any::<u8>(), 0..5000), key in proptest::collection::vec(any::<u8>(), 0..300)) {
            prop_assert_eq!(crc_fast::crc32_iscsi(&data), crc32c_reference(&data));
            let fields = head_fields(key.len() as u16, data.len() as u32, crc_fast::crc32_iscsi(&data));
            prop_assert_eq!(head_crc(&fields, &key), crc32c_reference(&[&fields[..], &key[..]].concat()));
        }

        #[test]
        fn garbage_is_no_header(raw in proptest::collection::vec(any::<u8>(), 0..40)) {
            if let Some((crc, head)) = decode_head(&raw) {
                let key = raw.get(RECORD_HEAD_LEN..RECORD_HEAD_LEN + head.key_len).unwrap_or(&[]);
                let _ = head_checks(crc, &head, key);
            }
        }
    }

    /// CRC-32C (Castagnoli, reflected), bit by bit: what every record's checksums are.
    fn crc32c_reference(data: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &b in data {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 == 1 { (crc >> 1) ^ 0x82F6_3B78 } else { crc >> 1 };
            }
        }
        !crc
    }

    /// The checksums stay CRC-32C whatever the library computing them: values and headers
    /// written by earlier releases go on verifying. Sizes around the library's block sizes
    /// and a shard's size, at every alignment the library special-cases.
    #[test]
    fn checksums_are_crc32c() {
        assert_eq!(crc_fast::crc32_iscsi(b"123456789"), 0xe306_9283);
        let data: Vec<u8> = (0..(1usize << 20) + 64).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        for len in [0, 1, 7, 15, 16, 31, 63, 64, 127, 128, 255, 256, 511, 1023, 4096 + 7, 262_160, 1 << 20] {
            for start in [0, 1, 3, 8, 33] {
                let slice = &data[start..start + len];
                assert_eq!(crc_fast::crc32_iscsi(slice), crc32c_reference(slice), "{len} bytes from {start}");
            }
        }
        let fields = head_fields(5, 1 << 20, 0xdead_beef);
        assert_eq!(head_crc(&fields, b"a key"), crc32c_reference(&[&fields[..], b"a key"].concat()));
    }

    #[test]
    fn segment_headers_name_their_segment() {
        let h = segment_header(42);
        assert!(is_segment_header(&h, 42));
        assert!(!is_segment_header(&h, 43));
        assert!(!is_segment_header(&h[..8], 42));
    }
}
