//! Journal damage told apart from a crash (engine::journal_check over fjall's journal_audit).
//!
//! Damage where a journal had been synced is corruption: the store must refuse to open,
//! naming the file and offset, and change nothing; a salvage keeps every intact batch, the
//! ones after the damage too, and records what it dropped. Damage past the last sync a
//! journal proves (an unsynced tail a crash tore, reordered or left with holes) is a crash:
//! it is cut and the store opens with every acknowledged write.

use std::ops::Range;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use fjall::journal_audit::JournalScan;
use proptest::prelude::*;
use spindle_engine::journal_check::SALVAGE_LOG;
use spindle_engine::{Check, Engine, Error, FjallEngine, FjallOptions, Meta};

const KEYS: usize = 3000;
/// Writes between syncs: the journal holds a claim every this many batches.
const SYNC_EVERY: usize = 100;

fn key(i: usize) -> Vec<u8> {
    format!("damage-{i:05}").into_bytes()
}

fn value(i: usize) -> Bytes {
    Bytes::from(format!("{i:05}-").repeat(30))
}

/// Puts every key (one batch each: one writer, one put at a time), syncing as it goes, then
/// closes the store. Returns the journal that holds them.
fn filled_store(dir: &Path) -> PathBuf {
    let engine = FjallEngine::open(FjallOptions::new(dir)).unwrap();
    for i in 0..KEYS {
        engine.put(&key(i), value(i), Meta::default(), Check::Force).unwrap();
        if i % SYNC_EVERY == SYNC_EVERY - 1 {
            engine.sync().unwrap();
        }
    }
    engine.sync().unwrap();
    drop(engine);
    only_journal(dir)
}

fn only_journal(dir: &Path) -> PathBuf {
    let journals: Vec<PathBuf> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "jnl")).collect();
    assert_eq!(journals.len(), 1, "one journal expected: {journals:?}");
    journals.into_iter().next().unwrap()
}

fn overwrite(path: &Path, at: u64, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.write_all_at(bytes, at).unwrap();
}

/// Keys present after reopening, each checked for its value.
fn present(engine: &FjallEngine) -> usize {
    (0..KEYS)
        .filter(|&i| match engine.get(&key(i)).unwrap() {
            Some(entry) => {
                assert!(entry.value == value(i), "key {i} has a wrong value");
                true
            }
            None => false,
        })
        .count()
}

fn open(dir: &Path, salvage: bool) -> Result<std::sync::Arc<FjallEngine>, Error> {
    FjallEngine::open(FjallOptions { salvage_journal: salvage, ..FjallOptions::new(dir) })
}

#[test]
fn damage_where_synced_refuses_the_open_and_a_salvage_keeps_every_intact_batch() {
    let dir = tempfile::tempdir().unwrap();
    let journal = filled_store(dir.path());
    let scan = JournalScan::read(&journal).unwrap();
    assert!(scan.damaged.is_empty(), "a clean journal: {:?}", scan.damaged);
    assert!(!scan.claims().is_empty(), "syncs leave claims in the journal");
    let data_end = scan.write_batches().last().unwrap().end;
    let at = data_end / 2;
    overwrite(&journal, at, &[0xA5; 16]);
    let damaged_bytes = std::fs::read(&journal).unwrap();

    let refused = open(dir.path(), false).err().expect("a journal damaged where it was synced must stop the open");
    let message = refused.to_string();
    let name = journal.file_name().unwrap().to_str().unwrap();
    assert!(message.contains(name), "the message names the journal: {message}");
    // The damage starts at the batch boundary at or before the overwritten bytes.
    let mut batches = scan.write_batches();
    batches.extend(scan.claims().into_iter().map(|(range, _)| range));
    let batch_start = batches.iter().find(|b| b.contains(&at)).unwrap().start;
    assert!(message.contains(&format!("offset {batch_start}")), "the message gives the offset {batch_start}: {message}");
    assert!(message.contains("--salvage-journal"), "the message names the way out: {message}");
    assert_eq!(std::fs::read(&journal).unwrap(), damaged_bytes, "a refused open changes nothing");

    let engine = open(dir.path(), true).expect("a salvage opens the store");
    let kept = present(&engine);
    // 16 bytes touch one batch, or two at a boundary: every other key is kept, those after
    // the damage too.
    assert!((KEYS - 2..KEYS).contains(&kept), "{kept} of {KEYS} keys kept");
    let notices = engine.notices().join("\n");
    assert!(notices.contains("salvaged") && notices.contains(name), "the drive is told: {notices}");
    drop(engine);
    let record = std::fs::read_to_string(dir.path().join(SALVAGE_LOG)).unwrap();
    assert!(record.contains(&format!("{batch_start}..")), "the record says what was dropped: {record}");

    // The salvaged journal is clean: the next open needs no option and keeps the record.
    let engine = open(dir.path(), false).expect("opens after the salvage");
    assert_eq!(present(&engine), kept);
    assert!(engine.notices().join("\n").contains("salvaged"));
}

#[test]
fn damage_in_a_sealed_journal_is_corruption_wherever_it_lies() {
    // Garbage past the last claim, which in the last journal would be a crash's tail (next
    // test), is corruption in a sealed one: rotation synced it whole.
    let dir = tempfile::tempdir().unwrap();
    let journal = filled_store(dir.path());
    let scan = JournalScan::read(&journal).unwrap();
    let end = scan.used_end();
    overwrite(&journal, end, &[0x3C; 37]);
    // A newer journal with a batch in it makes this one sealed.
    let bytes = std::fs::read(&journal).unwrap();
    let batch = scan.write_batches()[0].clone();
    std::fs::write(journal.with_file_name("100.jnl"), &bytes[batch.start as usize..batch.end as usize]).unwrap();
    let message = open(dir.path(), false).err().expect("refused").to_string();
    assert!(message.contains(&format!("offset {end}")), "{message}");
}

#[test]
fn an_unsynced_tail_a_crash_tore_is_cut_and_every_acknowledged_write_stays() {
    let dir = tempfile::tempdir().unwrap();
    let journal = filled_store(dir.path());
    let scan = JournalScan::read(&journal).unwrap();
    let end = scan.used_end();
    // Past the last claim: garbage (a torn write), then a whole batch that reached the disk
    // before the one the garbage stands for (write-back reorders unsynced pages).
    let bytes = std::fs::read(&journal).unwrap();
    let batch = scan.write_batches()[7].clone();
    let mut tail = vec![0x3C_u8; 37];
    tail.extend_from_slice(&bytes[batch.start as usize..batch.end as usize]);
    overwrite(&journal, end, &tail);

    let engine = open(dir.path(), false).expect("a crash's tail does not stop the open");
    assert_eq!(present(&engine), KEYS);
    let notices = engine.notices().join("\n");
    assert!(notices.contains("unsynced bytes"), "the cut is told: {notices}");
}

#[test]
fn a_claim_after_the_damage_proves_it_was_synced() {
    let dir = tempfile::tempdir().unwrap();
    let journal = filled_store(dir.path());
    let scan = JournalScan::read(&journal).unwrap();
    let (claim, _) = scan.claims().last().unwrap().clone();
    let end = scan.used_end();
    // Garbage past the last claim, then a claim that part of the garbage was synced (a claim
    // speaks only of bytes before itself): corruption.
    let bytes = std::fs::read(&journal).unwrap();
    let mut forged = bytes[claim.start as usize..claim.end as usize].to_vec();
    // The claim's offset is the start entry's seqno (after its tag and item count); an empty
    // batch's checksum does not cover it.
    forged[5..13].copy_from_slice(&(fjall::journal_audit::SYNC_CLAIM_BIT | (end + 10)).to_le_bytes());
    let mut tail = vec![0x3C_u8; 37];
    tail.extend_from_slice(&forged);
    overwrite(&journal, end, &tail);
    let message = open(dir.path(), false).err().expect("refused").to_string();
    assert!(message.contains(&format!("offset {end}")), "{message}");
}

/// One journal's bytes from real writes, built once for the property below.
fn sample_journal() -> &'static (Vec<u8>, Vec<Range<u64>>) {
    static SAMPLE: std::sync::OnceLock<(Vec<u8>, Vec<Range<u64>>)> = std::sync::OnceLock::new();
    SAMPLE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let engine = FjallEngine::open(FjallOptions::new(dir.path())).unwrap();
        for i in 0..200 {
            engine.put(&key(i), value(i), Meta::default(), Check::Force).unwrap();
            if i % 10 == 0 {
                engine.sync().unwrap();
            }
        }
        drop(engine);
        let journal = only_journal(dir.path());
        let bytes = std::fs::read(&journal).unwrap();
        let scan = JournalScan::of_bytes(journal, &bytes);
        let end = scan.write_batches().last().unwrap().end as usize + 64;
        (bytes[..end].to_vec(), scan.write_batches())
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Whatever the damage, every batch it does not touch is still found intact (so a salvage
    /// keeps it), and the damage is reported where it is.
    #[test]
    fn damage_loses_only_the_batches_it_touches(start_frac in 0.0f64..1.0, noise in proptest::collection::vec(any::<u8>(), 1..48)) {
        let (clean, batches) = sample_journal();
        let mut bytes = clean.clone();
        let at = ((bytes.len() - noise.len()) as f64 * start_frac) as usize;
        bytes[at..at + noise.len()].copy_from_slice(&noise);
        let hit = at as u64..(at + noise.len()) as u64;
        let scan = JournalScan::of_bytes(PathBuf::from("0.jnl"), &bytes);
        let found = scan.write_batches();
        for batch in batches.iter().filter(|b| b.end <= hit.start || b.start >= hit.end) {
            prop_assert!(found.contains(batch), "untouched batch {batch:?} lost (damage at {hit:?})");
        }
        // Only a batch's seqno is outside its checksum: a change that touched nothing else
        // may go unseen; any other is reported where it is.
        let seqno_fields: Vec<Range<usize>> = found.iter().cloned().chain(scan.claims().into_iter().map(|(r, _)| r))
            .map(|b| b.start as usize + 5..b.start as usize + 13).collect();
        let unseen_allowed = (at..at + noise.len()).all(|p| bytes[p] == clean[p] || seqno_fields.iter().any(|f| f.contains(&p)));
        if !unseen_allowed {
            let covered = scan.damaged.iter().any(|d| d.start < hit.end && d.end > hit.start);
            prop_assert!(covered, "damage at {hit:?} not reported: {:?}", scan.damaged);
        }
    }
}
