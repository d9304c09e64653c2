//! Frame and message decoding: any byte stream decodes to frames or an error, never a panic;
//! every decoded frame's Command decodes or errors too, and so does its header-and-status
//! view (accepting whatever the full decode accepts).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| spindle_drive::fuzzing::decode_frames(data));
