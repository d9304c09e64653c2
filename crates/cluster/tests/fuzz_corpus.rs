//! Replays the fuzzer's corpus of replica entries (fuzz/corpus/cluster_entries, found by
//! `scripts/fuzz.sh`) through the cluster's decoders: each must return, not panic.

use std::path::PathBuf;

#[test]
fn cluster_entry_corpus_decodes_without_panic() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/cluster_entries");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("the corpus directory") {
        let bytes = std::fs::read(entry.expect("an entry").path()).expect("a corpus file");
        spindle_cluster::decode_untrusted(&bytes);
        n += 1;
    }
    assert!(n >= 4, "the corpus holds at least the seed entries, found {n}");
}
