//! The metadata record stored per key: a small fixed header, the version and tag, and for a
//! small value the value itself.
//!
//! ```text
//! u8  format (1: value in the data keyspace; 2: value inline, after the tag;
//!             3: value in the value log, its pointer after the tag)
//! u32 value length      u32 value CRC32C      i32 algorithm (-1: none)
//! u16 version length    version bytes
//! u16 tag length        tag bytes
//! (format 2) value bytes, to the end of the record
//! (format 3) u32 segment  u64 record offset (`crate::value_log::Pointer`)
//! ```
//! Big-endian throughout. Records of format 1 written by earlier releases stay readable.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::value_log::Pointer;
use crate::{Error, Meta, Result};

const FORMAT_SEPARATE: u8 = 1;
const FORMAT_INLINE: u8 = 2;
const FORMAT_LOGGED: u8 = 3;
const POINTER_LEN: usize = 4 + 8;
const NO_ALGORITHM: i32 = -1;
const FIXED_LEN: usize = 1 + 4 + 4 + 4 + 2 + 2;

/// Where a record's value lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// In the record itself.
    Inline(Bytes),
    /// Under the same key in the data keyspace (nothing there for an empty value).
    Separate,
    /// In the value log.
    Logged(Pointer),
}

impl Placement {
    /// Whether the data keyspace holds a value for this record.
    pub fn in_data(&self, meta: &Meta) -> bool {
        matches!(self, Placement::Separate) && meta.value_len > 0
    }
}

/// Encodes `meta`, with `inline` as the value when it is stored in the record.
pub fn encode(meta: &Meta, inline: Option<&[u8]>) -> Result<Bytes> {
    let format = if inline.is_some() { FORMAT_INLINE } else { FORMAT_SEPARATE };
    let value = inline.unwrap_or_default();
    debug_assert!(inline.is_none() || value.len() == meta.value_len as usize);
    let mut out = head(meta, format, value.len())?;
    out.put_slice(value);
    Ok(out.freeze())
}

/// Encodes `meta` with its value at `pointer` in the value log.
pub fn encode_logged(meta: &Meta, pointer: Pointer) -> Result<Bytes> {
    let mut out = head(meta, FORMAT_LOGGED, POINTER_LEN)?;
    out.put_u32(pointer.segment);
    out.put_u64(pointer.offset);
    Ok(out.freeze())
}

/// A record of `format` up to its tag, with room for `tail` more bytes.
fn head(meta: &Meta, format: u8, tail: usize) -> Result<BytesMut> {
    if meta.version.len() > u16::MAX as usize || meta.tag.len() > u16::MAX as usize {
        return Err(Error::Invalid("version or tag too long to store".into()));
    }
    let mut out = BytesMut::with_capacity(FIXED_LEN + meta.version.len() + meta.tag.len() + tail);
    out.put_u8(format);
    out.put_u32(meta.value_len);
    out.put_u32(meta.value_crc);
    out.put_i32(meta.algorithm.unwrap_or(NO_ALGORITHM));
    out.put_u16(meta.version.len() as u16);
    out.put_slice(&meta.version);
    out.put_u16(meta.tag.len() as u16);
    out.put_slice(&meta.tag);
    Ok(out)
}

/// Encodes a record as [`decode`] returned it.
pub fn encode_placed(meta: &Meta, placement: &Placement) -> Result<Bytes> {
    match placement {
        Placement::Inline(value) => encode(meta, Some(value)),
        Placement::Separate => encode(meta, None),
        Placement::Logged(pointer) => encode_logged(meta, *pointer),
    }
}

pub fn decode(mut raw: Bytes) -> Result<(Meta, Placement)> {
    let corrupt = |what: &str| Error::corrupt(format!("metadata record: {what}"));
    if raw.len() < FIXED_LEN {
        return Err(corrupt("too short"));
    }
    let format = raw.get_u8();
    if ![FORMAT_SEPARATE, FORMAT_INLINE, FORMAT_LOGGED].contains(&format) {
        return Err(corrupt("unknown format"));
    }
    let value_len = raw.get_u32();
    let value_crc = raw.get_u32();
    let algorithm = Some(raw.get_i32()).filter(|a| *a != NO_ALGORITHM);
    let version_len = raw.get_u16() as usize;
    if raw.len() < version_len + 2 {
        return Err(corrupt("truncated version"));
    }
    let version = raw.split_to(version_len);
    let tag_len = raw.get_u16() as usize;
    let after_tag = match format {
        FORMAT_INLINE => value_len as usize,
        FORMAT_LOGGED => POINTER_LEN,
        _ => 0,
    };
    if tag_len.checked_add(after_tag) != Some(raw.len()) {
        return Err(corrupt("bad tag or value length"));
    }
    let tag = raw.split_to(tag_len);
    let placement = match format {
        FORMAT_INLINE => Placement::Inline(raw),
        FORMAT_LOGGED => Placement::Logged(Pointer { segment: raw.get_u32(), offset: raw.get_u64() }),
        _ => Placement::Separate,
    };
    Ok((Meta { version, tag, algorithm, value_len, value_crc }, placement))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn round_trips(version in proptest::collection::vec(any::<u8>(), 0..2048),
                       tag in proptest::collection::vec(any::<u8>(), 0..128),
                       algorithm in proptest::option::of(0i32..1000),
                       value in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..600)),
                       separate_len in any::<u32>(), value_crc in any::<u32>(),
                       logged in proptest::option::of((any::<u32>(), any::<u64>()))) {
            let value_len = value.as_ref().map_or(separate_len, |v| v.len() as u32);
            let meta = Meta { version: version.into(), tag: tag.into(), algorithm, value_len, value_crc };
            let placement = match (&value, logged) {
                (Some(v), _) => Placement::Inline(Bytes::from(v.clone())),
                (None, Some((segment, offset))) => Placement::Logged(Pointer { segment, offset }),
                (None, None) => Placement::Separate,
            };
            let raw = encode_placed(&meta, &placement).unwrap();
            if !matches!(placement, Placement::Logged(_)) {
                prop_assert_eq!(&encode(&meta, value.as_deref()).unwrap(), &raw);
            }
            prop_assert_eq!(decode(raw).unwrap(), (meta, placement));
        }

        #[test]
        fn garbage_is_an_error_not_a_panic(raw in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode(Bytes::from(raw));
        }

        /// Every truncation or extension of a valid record is an error, never a wrong record.
        #[test]
        fn truncated_or_extended_records_are_errors(value in proptest::collection::vec(any::<u8>(), 0..64),
                                                    format in 0u8..3, cut in any::<prop::sample::Index>()) {
            let meta = Meta { version: Bytes::from_static(b"v1"), tag: Bytes::from_static(b"t"), algorithm: None,
                              value_len: value.len() as u32, value_crc: 7 };
            let raw = match format {
                0 => encode(&meta, None),
                1 => encode(&meta, Some(&value[..])),
                _ => encode_logged(&meta, Pointer { segment: 3, offset: 99 }),
            }.unwrap();
            let cut = cut.index(raw.len());
            prop_assert!(decode(raw.slice(..cut)).is_err());
            let mut longer = raw.to_vec();
            longer.push(0);
            prop_assert!(decode(Bytes::from(longer)).is_err());
        }
    }

    #[test]
    fn records_of_the_first_format_still_decode() {
        // A format-1 record as earlier releases wrote it: 10-byte value elsewhere, version "7".
        let raw = [&[1u8][..], &10u32.to_be_bytes(), &99u32.to_be_bytes(), &(-1i32).to_be_bytes(), &[0, 1, b'7', 0, 0]].concat();
        let (meta, placement) = decode(Bytes::from(raw)).unwrap();
        assert_eq!((meta.value_len, meta.value_crc, meta.algorithm, &meta.version[..]), (10, 99, None, &b"7"[..]));
        assert_eq!(placement, Placement::Separate);
        assert!(placement.in_data(&meta));
    }
}
