//! The engine's on-disk metadata record: decoding arbitrary bytes never panics, and whatever
//! decodes re-encodes to the same bytes.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use spindle_engine::record;

fuzz_target!(|data: &[u8]| {
    if let Ok((meta, placement)) = record::decode(Bytes::copy_from_slice(data)) {
        let again = record::encode_placed(&meta, &placement).expect("a decoded record re-encodes");
        assert_eq!(&again[..], data);
    }
});
