//! The metadata record stored per key: a small fixed header and the version and tag.
//!
//! ```text
//! u8  format (1)
//! u32 value length      u32 value CRC32C      i32 algorithm (-1: none)
//! u16 version length    version bytes
//! u16 tag length        tag bytes
//! ```
//! Big-endian throughout. The format byte lets a later release change the layout.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::{Error, Meta, Result};

const FORMAT: u8 = 1;
const NO_ALGORITHM: i32 = -1;
const FIXED_LEN: usize = 1 + 4 + 4 + 4 + 2 + 2;

pub fn encode(meta: &Meta) -> Result<Bytes> {
    if meta.version.len() > u16::MAX as usize || meta.tag.len() > u16::MAX as usize {
        return Err(Error::Corrupt("version or tag too long to store".into()));
    }
    let mut out = BytesMut::with_capacity(FIXED_LEN + meta.version.len() + meta.tag.len());
    out.put_u8(FORMAT);
    out.put_u32(meta.value_len);
    out.put_u32(meta.value_crc);
    out.put_i32(meta.algorithm.unwrap_or(NO_ALGORITHM));
    out.put_u16(meta.version.len() as u16);
    out.put_slice(&meta.version);
    out.put_u16(meta.tag.len() as u16);
    out.put_slice(&meta.tag);
    Ok(out.freeze())
}

pub fn decode(mut raw: Bytes) -> Result<Meta> {
    let corrupt = |what: &str| Error::Corrupt(format!("metadata record: {what}"));
    if raw.len() < FIXED_LEN {
        return Err(corrupt("too short"));
    }
    if raw.get_u8() != FORMAT {
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
    if raw.len() != tag_len {
        return Err(corrupt("bad tag length"));
    }
    Ok(Meta { version, tag: raw, algorithm, value_len, value_crc })
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
                       value_len in any::<u32>(), value_crc in any::<u32>()) {
            let meta = Meta { version: version.into(), tag: tag.into(), algorithm, value_len, value_crc };
            prop_assert_eq!(decode(encode(&meta).unwrap()).unwrap(), meta);
        }

        #[test]
        fn garbage_is_an_error_not_a_panic(raw in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode(Bytes::from(raw));
        }
    }
}
