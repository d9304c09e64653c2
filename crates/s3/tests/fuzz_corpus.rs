//! Replays the fuzzer's corpus of stored records (fuzz/corpus/s3_records, found by
//! `scripts/fuzz.sh`) through the gateway's decoders: each must return, not panic.

use std::path::PathBuf;

#[test]
fn s3_record_corpus_decodes_without_panic() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/s3_records");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("the corpus directory") {
        let bytes = std::fs::read(entry.expect("an entry").path()).expect("a corpus file");
        spindle_s3::decode_untrusted(&bytes);
        n += 1;
    }
    assert!(n >= 3, "the corpus holds at least the seed records, found {n}");
}
