//! A cluster replica's entry as read back from a drive that may hold anything: its version as
//! a stamp (identity, ballot, promise) or a batch record's, its value as a batch entry (member
//! keys, value).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    spindle_cluster::decode_untrusted(data);
});
