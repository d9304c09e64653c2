//! Journal recovery: a store whose journal holds arbitrary bytes opens, is refused or is
//! salvaged, and never panics; a store that opens answers reads.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = spindle_engine::testing::journal_recovery(data);
});
