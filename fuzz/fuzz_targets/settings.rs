//! The drive's settings file: decoding arbitrary bytes never panics, and whatever decodes as a
//! checksummed file re-encodes to the same bytes (nothing damaged passes for settings).
#![no_main]

use libfuzzer_sys::fuzz_target;
use spindle_drive::persist;

fuzz_target!(|data: &[u8]| {
    if let Ok(stored) = persist::decode(data) {
        if data.starts_with(persist::MAGIC) {
            assert_eq!(persist::encode(&stored), data);
        }
    }
});
