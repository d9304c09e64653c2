//! Frame and message decoding: any byte stream decodes to frames or an error, never a panic;
//! every decoded frame's Command decodes or errors too, and so does its header-and-status
//! view (accepting whatever the full decode accepts).
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use prost::Message as _;
use spindle_proto::pb::Command;
use spindle_proto::FrameDecoder;

fuzz_target!(|data: &[u8]| {
    let mut decoder = FrameDecoder::new(1 << 20, 1 << 20);
    let mut buf = BytesMut::from(data);
    while let Ok(Some(frame)) = decoder.decode(&mut buf) {
        if let Some(bytes) = frame.message.command_bytes {
            let head = spindle_proto::decode_command_head(&bytes);
            if let Ok(command) = Command::decode(bytes) {
                let (header, status) = head.expect("the head of a decodable command decodes");
                assert_eq!(header, command.header.unwrap_or_default());
                assert_eq!(status, command.status);
            }
        }
    }
});
