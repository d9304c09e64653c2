//! Replays the `journal` fuzz target's corpus (fuzz/corpus/journal) through the same harness
//! on the stable toolchain: journal recovery never panics on whatever bytes a journal holds.

use std::path::PathBuf;

#[test]
fn journal_corpus_is_recovered_or_refused_without_panics() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/journal");
    let mut inputs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    inputs.sort();
    assert!(!inputs.is_empty(), "empty corpus {}", dir.display());
    for input in inputs {
        let _ = spindle_engine::testing::journal_recovery(&std::fs::read(&input).unwrap());
    }
    // And the real journal the harness starts from: whole, and with a torn end (a crash),
    // it opens. Damage in its middle lies where it had been synced (the template syncs every
    // fourth write, and a clean stop syncs the rest): the open is refused, and a salvage opens
    // with every key whose batch the damage did not touch, before the damage and after it.
    use spindle_engine::testing::{journal_recovered_keys, sample_journal};
    let journal = sample_journal();
    let end = journal.iter().rposition(|b| *b != 0).map_or(0, |i| i + 1);
    let all = journal_recovered_keys(&journal, false).expect("a clean journal opens");
    assert!(journal_recovered_keys(&journal[..end * 2 / 3], false).is_some(), "a torn end opens");
    for tenth in 1..10 {
        let middle = end * tenth / 10;
        let mut damaged = journal.clone();
        for b in &mut damaged[middle..middle + 16] {
            *b ^= 0x5a;
        }
        assert!(journal_recovered_keys(&damaged, false).is_none(), "damage at {middle} is refused");
        let salvaged = journal_recovered_keys(&damaged, true).expect("a salvage opens");
        // One put per batch: 16 bytes touch at most two.
        assert!(salvaged.len() + 2 >= all.len() && salvaged.len() < all.len(), "damage at {middle}: {} of {} keys", salvaged.len(), all.len());
        assert!(salvaged.iter().all(|k| all.contains(k)));
    }
}
