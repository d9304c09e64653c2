//! The header and status of a `Command` without its body: what a load generator needs from a
//! response (which request it answers and how it went), at a fraction of a full decode.

use bytes::Buf;
use prost::encoding::{decode_key, message, skip_field, DecodeContext};
use prost::DecodeError;

use crate::pb::command::{Header, Status};

const HEADER: u32 = 1;
const STATUS: u32 = 3;

/// Decodes fields `header` (1) and `status` (3) of a `Command` and skips the rest, with the
/// same checks as a full decode of those fields.
pub fn decode_command_head(mut buf: &[u8]) -> Result<(Header, Option<Status>), DecodeError> {
    let mut header = Header::default();
    let mut status = None;
    while buf.has_remaining() {
        let (tag, wire_type) = decode_key(&mut buf)?;
        match tag {
            HEADER => message::merge(wire_type, &mut header, &mut buf, DecodeContext::default())?,
            STATUS => message::merge(wire_type, status.get_or_insert_with(Status::default), &mut buf, DecodeContext::default())?,
            _ => skip_field(wire_type, tag, &mut buf, DecodeContext::default())?,
        }
    }
    Ok((header, status))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb::command::{Body, KeyValue};
    use crate::pb::Command;
    use prost::Message as _;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn agrees_with_a_full_decode(ack in any::<i64>(), code in -1..40i32, key in proptest::collection::vec(any::<u8>(), 0..64),
                                     with_status in any::<bool>(), message in ".{0,20}") {
            let command = Command {
                header: Some(Header { ack_sequence: Some(ack), connection_id: Some(7), ..Header::default() }),
                body: Some(Body { key_value: Some(KeyValue { key: Some(key.into()), ..KeyValue::default() }), ..Body::default() }),
                status: with_status.then(|| Status { code: Some(code), status_message: Some(message), ..Status::default() }),
            };
            let bytes = command.encode_to_vec();
            let (header, status) = decode_command_head(&bytes).unwrap();
            prop_assert_eq!(Some(header), command.header);
            prop_assert_eq!(status, command.status);
        }

        #[test]
        fn accepts_and_agrees_wherever_a_full_decode_does(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            // Never panics; whatever a full decode accepts, the head decode accepts and agrees with.
            let head = decode_command_head(&bytes);
            if let Ok(command) = Command::decode(&bytes[..]) {
                let (header, status) = head.expect("accepted by a full decode");
                prop_assert_eq!(header, command.header.unwrap_or_default());
                prop_assert_eq!(status, command.status);
            }
        }
    }
}
