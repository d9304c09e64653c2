//! Frame and message decoding: any byte stream decodes to frames or an error, never a panic;
//! every decoded frame's Command decodes or errors too.
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
            let _ = Command::decode(bytes);
        }
    }
});
