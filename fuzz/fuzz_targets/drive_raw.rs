//! Raw bytes into a drive connection: the connection task never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    spindle_drive::fuzzing::serve_raw(data);
});
