//! Kinetic framing: one PDU is a 9-byte header (magic `'F'`, big-endian message length,
//! big-endian value length), the serialized `Message`, then the value bytes.
//!
//! Both lengths are checked against the limits from the header alone, before any buffer for
//! the body is reserved, so a hostile header cannot make the reader allocate.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use prost::Message as _;

use crate::pb::message::AuthType;
use crate::pb::Message;

/// First byte of every frame.
pub const MAGIC: u8 = b'F';
/// Size of the fixed frame header.
pub const HEADER_LEN: usize = 9;

/// Why a frame could not be decoded. Every variant is fatal for the connection: after a bad
/// header the byte stream can no longer be re-synchronised.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FrameError {
    #[error("bad magic byte 0x{0:02x} (expected 'F')")]
    BadMagic(u8),
    #[error("negative length {0} in frame header")]
    NegativeLength(i32),
    #[error("message of {len} bytes exceeds the limit of {max}")]
    MessageTooLarge { len: u32, max: u32 },
    #[error("value of {len} bytes exceeds the limit of {max}")]
    ValueTooLarge { len: u32, max: u32 },
    #[error("undecodable protobuf message: {0}")]
    BadMessage(String),
    #[error("connection closed in the middle of a frame")]
    Truncated,
}

/// A parsed and limit-checked frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    pub message_len: u32,
    pub value_len: u32,
}

impl FrameHeader {
    /// Parses the 9 header bytes and checks both lengths against the limits.
    pub fn parse(raw: &[u8; HEADER_LEN], max_message: u32, max_value: u32) -> Result<Self, FrameError> {
        if raw[0] != MAGIC {
            return Err(FrameError::BadMagic(raw[0]));
        }
        let message_len = i32::from_be_bytes([raw[1], raw[2], raw[3], raw[4]]);
        let value_len = i32::from_be_bytes([raw[5], raw[6], raw[7], raw[8]]);
        for len in [message_len, value_len] {
            if len < 0 {
                return Err(FrameError::NegativeLength(len));
            }
        }
        let (message_len, value_len) = (message_len as u32, value_len as u32);
        if message_len > max_message {
            return Err(FrameError::MessageTooLarge { len: message_len, max: max_message });
        }
        if value_len > max_value {
            return Err(FrameError::ValueTooLarge { len: value_len, max: max_value });
        }
        Ok(FrameHeader { message_len, value_len })
    }

    /// Bytes of the frame after the header.
    pub fn body_len(&self) -> usize {
        self.message_len as usize + self.value_len as usize
    }
}

/// One decoded PDU.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    pub message: Message,
    pub value: Bytes,
}

impl Frame {
    /// Decodes the protobuf part of a frame whose body is already split off. Decoding from
    /// `Bytes` lets `commandBytes` share the buffer instead of being copied.
    pub fn from_parts(message: Bytes, value: Bytes) -> Result<Self, FrameError> {
        let message = Message::decode(message).map_err(|e| FrameError::BadMessage(e.to_string()))?;
        Ok(Frame { message, value })
    }
}

/// Incremental decoder over a growing byte buffer (a socket's read buffer, a fuzz input).
#[derive(Debug, Clone, Copy)]
pub struct FrameDecoder {
    max_message: u32,
    max_value: u32,
    pending: Option<FrameHeader>,
}

impl FrameDecoder {
    pub fn new(max_message: u32, max_value: u32) -> Self {
        FrameDecoder { max_message, max_value, pending: None }
    }

    /// The header of the frame being assembled, once it has been read: lets the caller
    /// reserve exactly the (limit-checked) body size.
    pub fn pending(&self) -> Option<FrameHeader> {
        self.pending
    }

    /// Takes one whole frame off the front of `buf`, or returns `Ok(None)` when more bytes are
    /// needed. On error the connection must be dropped.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
        let header = match self.pending {
            Some(h) => h,
            None => {
                if buf.len() < HEADER_LEN {
                    return Ok(None);
                }
                let mut raw = [0u8; HEADER_LEN];
                raw.copy_from_slice(&buf[..HEADER_LEN]);
                let h = FrameHeader::parse(&raw, self.max_message, self.max_value)?;
                buf.advance(HEADER_LEN);
                self.pending = Some(h);
                h
            }
        };
        if buf.len() < header.body_len() {
            return Ok(None);
        }
        self.pending = None;
        let message = buf.split_to(header.message_len as usize).freeze();
        let value = buf.split_to(header.value_len as usize).freeze();
        Frame::from_parts(message, value).map(Some)
    }

    /// Decodes exactly one frame that must fill `input` completely.
    pub fn decode_one(input: &[u8], max_message: u32, max_value: u32) -> Result<Frame, FrameError> {
        let mut decoder = FrameDecoder::new(max_message, max_value);
        let mut buf = BytesMut::from(input);
        match decoder.decode(&mut buf)? {
            Some(frame) if buf.is_empty() => Ok(frame),
            Some(_) => Err(FrameError::BadMessage(format!("{} trailing bytes", buf.len()))),
            None => Err(FrameError::Truncated),
        }
    }
}

/// How a message authenticates its `commandBytes`: its `authType` and `hmacAuth` fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signature<'a> {
    /// HMACAUTH with the identity and, unless the sender has no key to sign with, the tag.
    Hmac { identity: i64, hmac: Option<&'a [u8]> },
    /// PINAUTH as the drive answers it: no PIN echoed back.
    Pin,
    /// UNSOLICITEDSTATUS: the drive's sign-on and termination notices.
    Unsolicited,
}

/// Appends the header and `Message` of a frame carrying `command_bytes`, signed as `signature`,
/// whose `value_len` value bytes the caller writes after it. Writes the message's fields
/// directly: byte for byte what prost writes for the equivalent `Message` (tested), without
/// building one, so a signed request or response needs no copy of its command bytes.
pub fn encode_message_head(signature: Signature<'_>, command_bytes: &[u8], value_len: u32, out: &mut BytesMut) {
    use prost::encoding::{encode_key, encode_varint, encoded_len_varint, key_len, WireType};
    const AUTH_TYPE: u32 = 4;
    const HMAC_AUTH: u32 = 5;
    const COMMAND_BYTES: u32 = 7;
    const IDENTITY: u32 = 1;
    const HMAC: u32 = 2;
    let bytes_len = |tag: u32, len: usize| key_len(tag) + encoded_len_varint(len as u64) + len;
    let auth_type = match signature {
        Signature::Hmac { .. } => AuthType::Hmacauth,
        Signature::Pin => AuthType::Pinauth,
        Signature::Unsolicited => AuthType::Unsolicitedstatus,
    } as i32;
    let hmac_auth_len = match signature {
        Signature::Hmac { identity, hmac } => {
            Some(key_len(IDENTITY) + encoded_len_varint(identity as u64) + hmac.map_or(0, |h| bytes_len(HMAC, h.len())))
        }
        _ => None,
    };
    let message_len = key_len(AUTH_TYPE)
        + encoded_len_varint(auth_type as i64 as u64)
        + hmac_auth_len.map_or(0, |len| bytes_len(HMAC_AUTH, len))
        + bytes_len(COMMAND_BYTES, command_bytes.len());
    out.reserve(HEADER_LEN + message_len);
    out.put_u8(MAGIC);
    out.put_u32(message_len as u32);
    out.put_u32(value_len);
    encode_key(AUTH_TYPE, WireType::Varint, out);
    encode_varint(auth_type as i64 as u64, out);
    if let (Signature::Hmac { identity, hmac }, Some(len)) = (signature, hmac_auth_len) {
        encode_key(HMAC_AUTH, WireType::LengthDelimited, out);
        encode_varint(len as u64, out);
        encode_key(IDENTITY, WireType::Varint, out);
        encode_varint(identity as u64, out);
        if let Some(hmac) = hmac {
            encode_key(HMAC, WireType::LengthDelimited, out);
            encode_varint(hmac.len() as u64, out);
            out.put_slice(hmac);
        }
    }
    encode_key(COMMAND_BYTES, WireType::LengthDelimited, out);
    encode_varint(command_bytes.len() as u64, out);
    out.put_slice(command_bytes);
}

/// Appends one frame (header, message, value) to `out`.
pub fn encode_frame(message: &Message, value: &[u8], out: &mut BytesMut) {
    out.reserve(HEADER_LEN + message.encoded_len() + value.len());
    encode_frame_head(message, value.len() as u32, out);
    out.put_slice(value);
}

/// Appends the header and message of a frame whose `value_len` value bytes the caller writes
/// itself (so a large value need not be copied into the same buffer).
pub fn encode_frame_head(message: &Message, value_len: u32, out: &mut BytesMut) {
    let message_len = message.encoded_len();
    out.reserve(HEADER_LEN + message_len);
    out.put_u8(MAGIC);
    out.put_u32(message_len as u32);
    out.put_u32(value_len);
    #[allow(clippy::expect_used, reason = "encode fails only when the buffer cannot grow; a BytesMut always can")]
    message
        .encode(out)
        .expect("BytesMut grows on demand, so encoding cannot run out of space");
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MAX: u32 = 1024 * 1024;

    fn sample(command: Vec<u8>, identity: i64) -> Message {
        Message {
            auth_type: Some(AuthType::Hmacauth as i32),
            hmac_auth: Some(crate::pb::message::HmaCauth { identity: Some(identity), hmac: Some(vec![7u8; 20].into()) }),
            pin_auth: None,
            command_bytes: Some(command.into()),
        }
    }

    fn encoded(message: &Message, value: &[u8]) -> Vec<u8> {
        let mut out = BytesMut::new();
        encode_frame(message, value, &mut out);
        out.to_vec()
    }

    #[test]
    fn rejects_wrong_magic() {
        let mut bytes = encoded(&sample(vec![1, 2], 1), b"v");
        bytes[0] = b'G';
        assert_eq!(FrameDecoder::decode_one(&bytes, MAX, MAX), Err(FrameError::BadMagic(b'G')));
    }

    #[test]
    fn rejects_oversize_lengths_from_header_alone() {
        // Only the header is present: the limit check must not wait for (or allocate) the body.
        let mut header = vec![MAGIC];
        header.extend_from_slice(&(MAX + 1).to_be_bytes());
        header.extend_from_slice(&0u32.to_be_bytes());
        let mut buf = BytesMut::from(&header[..]);
        let err = FrameDecoder::new(MAX, MAX).decode(&mut buf).unwrap_err();
        assert_eq!(err, FrameError::MessageTooLarge { len: MAX + 1, max: MAX });

        let mut header = vec![MAGIC];
        header.extend_from_slice(&0u32.to_be_bytes());
        header.extend_from_slice(&u32::MAX.to_be_bytes());
        let err = FrameDecoder::decode_one(&header, MAX, MAX).unwrap_err();
        assert_eq!(err, FrameError::NegativeLength(-1));
    }

    #[test]
    fn waits_for_the_whole_frame() {
        let bytes = encoded(&sample(vec![9; 40], 3), &[5; 100]);
        let mut decoder = FrameDecoder::new(MAX, MAX);
        let mut buf = BytesMut::new();
        for (i, b) in bytes.iter().enumerate() {
            assert_eq!(decoder.decode(&mut buf).unwrap(), None, "byte {i}");
            buf.put_u8(*b);
        }
        let frame = decoder.decode(&mut buf).unwrap().unwrap();
        assert_eq!(frame.value.len(), 100);
        assert!(buf.is_empty());
    }

    proptest! {
        #[test]
        fn round_trips(command in proptest::collection::vec(any::<u8>(), 0..300),
                       value in proptest::collection::vec(any::<u8>(), 0..3000),
                       identity in any::<i64>()) {
            let message = sample(command, identity);
            let bytes = encoded(&message, &value);
            let frame = FrameDecoder::decode_one(&bytes, MAX, MAX).unwrap();
            prop_assert_eq!(frame.message, message);
            prop_assert_eq!(&frame.value[..], &value[..]);
        }

        #[test]
        fn every_truncation_is_an_error(command in proptest::collection::vec(any::<u8>(), 0..100),
                                         value in proptest::collection::vec(any::<u8>(), 0..100)) {
            let bytes = encoded(&sample(command, 1), &value);
            for cut in 0..bytes.len() {
                prop_assert!(FrameDecoder::decode_one(&bytes[..cut], MAX, MAX).is_err());
            }
        }

        #[test]
        fn corruption_never_panics(command in proptest::collection::vec(any::<u8>(), 0..100),
                                   value in proptest::collection::vec(any::<u8>(), 0..100),
                                   flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8)) {
            let mut bytes = encoded(&sample(command, 1), &value);
            for (at, xor) in flips {
                let i = at % bytes.len();
                bytes[i] ^= xor.max(1);
            }
            // Decoding may succeed (a flipped value byte is still a valid frame) but must not panic,
            // and a successful decode must have consumed exactly the declared lengths.
            let _ = FrameDecoder::decode_one(&bytes, MAX, MAX);
        }

        #[test]
        fn message_head_matches_prost(command in proptest::collection::vec(any::<u8>(), 0..300),
                                      identity in any::<i64>(),
                                      hmac in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)),
                                      kind in 0..3u8,
                                      value_len in any::<u32>()) {
            use crate::pb::message::HmaCauth;
            let (signature, message) = match kind {
                0 => (
                    Signature::Hmac { identity, hmac: hmac.as_deref() },
                    Message {
                        auth_type: Some(AuthType::Hmacauth as i32),
                        hmac_auth: Some(HmaCauth { identity: Some(identity), hmac: hmac.clone().map(Bytes::from) }),
                        pin_auth: None,
                        command_bytes: Some(command.clone().into()),
                    },
                ),
                1 => (Signature::Pin, Message { auth_type: Some(AuthType::Pinauth as i32), command_bytes: Some(command.clone().into()), ..Message::default() }),
                _ => (Signature::Unsolicited, Message { auth_type: Some(AuthType::Unsolicitedstatus as i32), command_bytes: Some(command.clone().into()), ..Message::default() }),
            };
            let mut direct = BytesMut::new();
            encode_message_head(signature, &command, value_len, &mut direct);
            let mut via_prost = BytesMut::new();
            encode_frame_head(&message, value_len, &mut via_prost);
            prop_assert_eq!(direct, via_prost);
        }

        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..2000)) {
            let mut decoder = FrameDecoder::new(MAX, MAX);
            let mut buf = BytesMut::from(&bytes[..]);
            while let Ok(Some(_)) = decoder.decode(&mut buf) {}
        }
    }
}
