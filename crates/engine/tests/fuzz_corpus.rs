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
    // And the real journal the harness starts from: whole and with a torn end it opens as a
    // crash does. Damage in the middle is not yet told apart from a crash's torn tail: fjall
    // (as vendored, unchanged here) keeps the valid prefix when the damage breaks a record's
    // framing, and refuses to open when a batch decodes but fails its checksum. Either way
    // nothing panics, and a store that opens reads back every key the damage did not reach.
    use spindle_engine::testing::{journal_recovered_keys, journal_recovery, sample_journal};
    let journal = sample_journal();
    let end = journal.iter().rposition(|b| *b != 0).map_or(0, |i| i + 1);
    assert!(journal_recovery(&journal), "a clean journal");
    assert!(journal_recovery(&journal[..end * 2 / 3]), "a torn end");
    let mut opened = 0;
    for tenth in 1..10 {
        let middle = end * tenth / 10;
        let before_damage = journal_recovered_keys(&journal[..middle]).expect("the prefix before the damage opens");
        assert!(!before_damage.is_empty(), "the damage at {middle} leaves a prefix");
        let mut damaged = journal.clone();
        for b in &mut damaged[middle..middle + 16] {
            *b ^= 0x5a;
        }
        if let Some(recovered) = journal_recovered_keys(&damaged) {
            opened += 1;
            for key in &before_damage {
                assert!(recovered.contains(key), "damage at {middle}: {key:?}, written before it, is gone");
            }
        }
    }
    // The present mix (one of the nine opens); a change to it is a change of behaviour.
    assert!(opened >= 1, "no damaged journal opened with its prefix");
}
