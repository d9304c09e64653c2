//! The S3 gateway's stored records and keys, as read back from a store that may hold anything.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    spindle_s3::decode_untrusted(data);
});
