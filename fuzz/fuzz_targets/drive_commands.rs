//! Correctly framed and signed but otherwise arbitrary commands: command handling never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    spindle_drive::fuzzing::serve_signed_commands(data);
});
