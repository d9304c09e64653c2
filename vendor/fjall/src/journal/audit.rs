// Spindle: tells a journal damaged where it had been made durable (corruption) from one whose
// unsynced tail a crash or power cut left torn, reordered or with holes (a crash).
//
// Recovery alone cannot tell them apart: both look like a record that does not decode or
// whose checksum fails, possibly followed by records that do. What separates them is whether
// the damaged bytes had been synced. Two facts give that:
//
// - A sealed journal (any but the last one holding records) was synced whole before the
//   next one was written to (`Writer::rotate_into`, `Writer::rotate`).
// - After every sync, the writer writes a *sync claim*: an empty batch whose seqno, with
//   `SYNC_CLAIM_BIT` set, is the offset up to which the file had then been synced. The claim
//   is handed to the OS at once and is itself synced with the next sync. An intact claim
//   anywhere in the file (even after the damage) proves its offset was durable.
//
// So damage that starts below the highest intact claim, or anywhere in a sealed journal, is
// corruption: it is reported with its file and offset, and the database is not opened unless
// the caller asks for a salvage. Damage above it is a crash: the file is cut there, as
// recovery always did. An empty batch carries no items, so an older reader replays a claim as
// nothing at all: the format stays readable both ways.

use super::entry::Entry;
use std::{
    fs::{File, OpenOptions},
    hash::Hasher,
    io::Write,
    ops::Range,
    path::{Path, PathBuf},
};

/// Set in the seqno of a sync claim. Seqnos stay below it (lsm-tree's counter stops at
/// `0x7FFF_FFFF_FFFF_FFFF`), so no batch that carries data is ever taken for a claim.
pub const SYNC_CLAIM_BIT: u64 = 1 << 63;

/// The bytes of a claim that `[0, synced)` of its file was durable.
pub(crate) fn encode_claim(synced: u64, out: &mut Vec<u8>) -> crate::Result<()> {
    Entry::Start { item_count: 0, seqno: SYNC_CLAIM_BIT | synced }.encode_into(out)?;
    Entry::End(xxhash_rust::xxh3::Xxh3::default().finish()).encode_into(out)
}

/// What one intact batch of a journal is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Record {
    /// A batch of writes (items or clears).
    Writes,
    /// A sync claim: `[0, offset)` of the file was durable when it was written.
    Claim(u64),
}

/// One journal file as read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalScan {
    /// The journal file.
    pub path: PathBuf,
    /// Intact batches, in file order, with what each is.
    batches: Vec<(Range<u64>, Record)>,
    /// Stretches that hold something other than intact batches, up to the last nonzero
    /// byte (the zeros a journal is preallocated with are its clean end).
    pub damaged: Vec<Range<u64>>,
}

impl JournalScan {
    /// Reads `path` and finds its intact batches and the damage between them.
    pub fn read(path: &Path) -> crate::Result<Self> {
        let bytes = std::fs::read(path)?;
        Ok(Self::of_bytes(path.to_path_buf(), &bytes))
    }

    /// Scans a journal's bytes: batch after batch from the start; where one does not parse,
    /// the damage runs to the next offset at which an intact batch begins (or to the last
    /// nonzero byte).
    pub fn of_bytes(path: PathBuf, bytes: &[u8]) -> Self {
        let end = bytes.iter().rposition(|&b| b != 0).map_or(0, |last| last + 1);
        let mut batches = Vec::new();
        let mut damaged = Vec::new();
        let mut at = 0;
        while at < end {
            if let Some((len, record)) = parse_batch(&bytes[at..]) {
                batches.push((at as u64..(at + len) as u64, record));
                at += len;
                continue;
            }
            let resume = (at + 1..end).find(|&p| bytes[p] == START_TAG && parse_batch(&bytes[p..]).is_some());
            let to = resume.unwrap_or(end);
            damaged.push(at as u64..to as u64);
            at = to;
        }
        Self { path, batches, damaged }
    }

    /// The intact batches of writes, in file order.
    pub fn write_batches(&self) -> Vec<Range<u64>> {
        self.writes_before(u64::MAX).cloned().collect()
    }

    /// The intact sync claims, in file order: where each is and the offset it claims.
    pub fn claims(&self) -> Vec<(Range<u64>, u64)> {
        self.batches
            .iter()
            .filter_map(|(range, record)| match record {
                Record::Claim(offset) => Some((range.clone(), *offset)),
                Record::Writes => None,
            })
            .collect()
    }

    /// The highest offset an intact claim proves was synced. A claim can only speak of bytes
    /// before itself: one that claims more is not believed.
    pub fn synced_end(&self) -> u64 {
        self.batches
            .iter()
            .filter_map(|(range, record)| match record {
                Record::Claim(offset) if *offset <= range.start => Some(*offset),
                _ => None,
            })
            .max()
            .unwrap_or(0)
    }

    /// Where the last batch or damage ends: the preallocated zeros follow.
    pub fn used_end(&self) -> u64 {
        let batches = self.batches.last().map_or(0, |(range, _)| range.end);
        let damage = self.damaged.last().map_or(0, |range| range.end);
        batches.max(damage)
    }

    /// Whether any batch or damage is in the file (a prepared, unused journal holds neither).
    pub fn is_used(&self) -> bool {
        !self.batches.is_empty() || !self.damaged.is_empty()
    }

    /// The damage that lies where the file had been made durable: all of it in a sealed
    /// journal, below [`Self::synced_end`] in the last one.
    pub fn corruption(&self, sealed: bool) -> Vec<Range<u64>> {
        let synced = self.synced_end();
        self.damaged.iter().filter(|d| sealed || d.start < synced).cloned().collect()
    }

    /// Where a crash's damage begins: the first damage at or past [`Self::synced_end`]. From
    /// there on nothing was promised durable, and recovery keeps what lies before it.
    pub fn crash_tail(&self) -> Option<u64> {
        let synced = self.synced_end();
        self.damaged.iter().map(|d| d.start).find(|&start| start >= synced)
    }

    /// Intact batches of writes before `limit`, which a salvage keeps.
    fn writes_before(&self, limit: u64) -> impl Iterator<Item = &Range<u64>> {
        self.batches.iter().filter(move |(range, record)| *record == Record::Writes && range.end <= limit).map(|(range, _)| range)
    }
}

/// What a salvage did to one journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Salvaged {
    /// The journal file, rewritten.
    pub path: PathBuf,
    /// The damaged stretches dropped (offsets in the file as it was).
    pub dropped: Vec<Range<u64>>,
    /// Intact batches of writes kept.
    pub kept_batches: usize,
    /// Intact batches of writes after the first damage, kept too.
    pub kept_after_damage: usize,
    /// Intact batches past a crash's tail in the last journal, dropped as a crash drops them.
    pub dropped_unsynced_batches: usize,
}

/// A journal damaged where it had been made durable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Corruption {
    /// The journal file.
    pub path: PathBuf,
    /// Damaged stretches (byte offsets) that had been synced.
    pub damaged: Vec<Range<u64>>,
    /// Intact batches of writes after the first of them.
    pub intact_after: usize,
}

impl std::fmt::Display for Corruption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let first = &self.damaged[0];
        write!(
            f,
            "journal {} is damaged at byte offset {} ({} bytes",
            self.path.display(),
            first.start,
            first.end - first.start
        )?;
        if self.damaged.len() > 1 {
            write!(f, "; {} damaged stretches in all", self.damaged.len())?;
        }
        write!(
            f,
            "), where it had been made durable; {} intact write batches follow the damage",
            self.intact_after
        )
    }
}

/// What [`check`] found and did.
#[derive(Debug, Default)]
pub struct Audit {
    /// Journals damaged where they had been made durable (left as they are).
    pub corrupt: Vec<Corruption>,
    /// Journals rewritten without their damage (only when salvaging).
    pub salvaged: Vec<Salvaged>,
    /// The last journal's crash tail: its path, where it was cut, and the bytes (not counting
    /// preallocated zeros) dropped.
    pub crash_cut: Option<(PathBuf, u64, u64)>,
}

/// Checks every journal in `folder` before the database recovers from them. A crash's torn
/// tail is cut off (what recovery would do, but also where a record there passes decoding
/// and fails its checksum, which stops recovery). Corruption is reported and left alone;
/// with `salvage`, each corrupt journal is instead rewritten (synced, then renamed over it)
/// with its intact batches of writes, in order, and the damage dropped.
pub fn check(folder: &Path, salvage: bool) -> crate::Result<Audit> {
    check_with(folder, salvage, &mut |_| true)
}

/// One write of a batch, as [`check_with`]'s judge sees it.
#[derive(Debug, Clone)]
pub struct JournalWrite {
    /// The keyspace written to.
    pub keyspace_id: u64,
    /// The key written.
    pub key: crate::Slice,
    /// The value (empty for a removal).
    pub value: crate::Slice,
    /// A value, or which kind of removal.
    pub value_type: lsm_tree::ValueType,
}

/// [`check`], with the unsynced batches of the last journal (those past its last sync claim,
/// before any crash damage) shown in order to `judge`: the first it refuses, and everything
/// after it, is cut off as a crash's tail. That is for records whose meaning rests on data
/// outside the journal (a value log written beside it): where a crash kept the record but
/// not its data, recovery must end before the record, as if the crash had come earlier.
/// Batches the journal had made durable are never shown: what must be durable before them
/// is synced first (`Config::before_journal_sync`).
pub fn check_with(folder: &Path, salvage: bool, judge: &mut dyn FnMut(&[JournalWrite]) -> bool) -> crate::Result<Audit> {
    let mut journals = Vec::new();
    if folder.try_exists()? {
        for dirent in std::fs::read_dir(folder)? {
            let path = dirent?.path();
            let id = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".jnl"))
                .and_then(|n| n.parse::<u64>().ok());
            if let (Some(id), true) = (id, path.is_file()) {
                journals.push((id, path));
            }
        }
    }
    journals.sort();
    let scans = journals.iter().map(|(_, path)| JournalScan::read(path)).collect::<crate::Result<Vec<_>>>()?;
    // Journals after the last used one are prepared and empty: the last used one is where
    // writes were going when the process stopped.
    let last = scans.iter().rposition(JournalScan::is_used);
    let mut audit = Audit::default();
    for (index, scan) in scans.iter().enumerate() {
        let sealed = Some(index) != last;
        let corrupt = scan.corruption(sealed);
        let tail = if sealed { None } else { scan.crash_tail() };
        if !corrupt.is_empty() {
            let first = corrupt[0].start;
            let limit = tail.unwrap_or(u64::MAX);
            let intact_after = scan.writes_before(limit).filter(|r| r.start >= first).count();
            if !salvage {
                audit.corrupt.push(Corruption { path: scan.path.clone(), damaged: corrupt, intact_after });
                continue;
            }
            let kept: Vec<Range<u64>> = scan.writes_before(limit).cloned().collect();
            rewrite(&scan.path, &kept)?;
            audit.salvaged.push(Salvaged {
                path: scan.path.clone(),
                dropped: scan.damaged.clone(),
                kept_batches: kept.len(),
                kept_after_damage: intact_after,
                dropped_unsynced_batches: scan.writes_before(u64::MAX).filter(|r| r.start >= limit).count(),
            });
        } else if let Some(cut) = first_refused(scan, sealed, tail, judge)?.or(tail) {
            let file = OpenOptions::new().write(true).open(&scan.path)?;
            let dropped = scan.used_end() - cut;
            file.set_len(cut)?;
            file.sync_all()?;
            log::warn!("Cut the unsynced tail of journal {} at {cut} ({dropped} bytes), as a crash left it", scan.path.display());
            audit.crash_cut = Some((scan.path.clone(), cut, dropped));
        }
    }
    Ok(audit)
}

/// Where the first unsynced batch of the last journal that `judge` refuses begins.
fn first_refused(scan: &JournalScan, sealed: bool, tail: Option<u64>, judge: &mut dyn FnMut(&[JournalWrite]) -> bool) -> crate::Result<Option<u64>> {
    let synced = scan.synced_end();
    let limit = tail.unwrap_or(u64::MAX);
    let unsynced: Vec<Range<u64>> = scan.writes_before(limit).filter(|r| r.start >= synced).cloned().collect();
    if sealed || unsynced.is_empty() {
        return Ok(None);
    }
    let bytes = std::fs::read(&scan.path)?;
    for range in unsynced {
        let mut reader = &bytes[range.start as usize..range.end as usize];
        let mut writes = Vec::new();
        while let Ok(entry) = Entry::decode_from(&mut reader) {
            match entry {
                Entry::Item { keyspace_id, key, value, value_type, .. } => writes.push(JournalWrite { keyspace_id, key, value, value_type }),
                Entry::End(_) => break,
                Entry::Start { .. } | Entry::Clear { .. } => {}
            }
        }
        if !judge(&writes) {
            return Ok(Some(range.start));
        }
    }
    Ok(None)
}

/// Replaces the journal at `path` with its batches at `kept` and a claim that all of it is
/// durable: written beside it, synced, renamed over it, the folder synced.
fn rewrite(path: &Path, kept: &[Range<u64>]) -> crate::Result<()> {
    let bytes = std::fs::read(path)?;
    let mut out = Vec::with_capacity(kept.iter().map(|r| (r.end - r.start) as usize).sum::<usize>() + 32);
    for range in kept {
        out.extend_from_slice(&bytes[range.start as usize..range.end as usize]);
    }
    let synced = out.len() as u64;
    encode_claim(synced, &mut out)?;
    let mut staged = path.as_os_str().to_owned();
    staged.push(".salvaged");
    let staged = PathBuf::from(staged);
    let mut file = File::create(&staged)?;
    file.write_all(&out)?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&staged, path)?;
    let folder = path.parent().expect("a journal is in a folder");
    crate::file::fsync_directory(folder)?;
    Ok(())
}

const START_TAG: u8 = 1;
/// An item's fixed head: tag, value type, compression (a byte each), keyspace id (8), key
/// length (2), value length (4), stored value length (4).
const ITEM_HEAD: usize = 1 + 1 + 1 + 8 + 2 + 4 + 4;
const ITEM_TAG: u8 = 2;

/// The length and kind of the intact batch at the start of `bytes`, if one is there: a start,
/// as many items as it says, and an end whose checksum matches them.
fn parse_batch(bytes: &[u8]) -> Option<(usize, Record)> {
    let mut reader = bytes;
    let Ok(Entry::Start { item_count, seqno }) = Entry::decode_from(&mut reader) else { return None };
    let mut hasher = xxhash_rust::xxh3::Xxh3::default();
    for _ in 0..item_count {
        let item_start = bytes.len() - reader.len();
        // Lengths read from damage are not trusted with an allocation: the item must fit.
        if reader.first() == Some(&ITEM_TAG) {
            let head = reader.get(..ITEM_HEAD)?;
            let key_len = usize::from(u16::from_le_bytes([head[11], head[12]]));
            let stored = u32::from_le_bytes([head[17], head[18], head[19], head[20]]) as usize;
            if ITEM_HEAD + key_len + stored > reader.len() {
                return None;
            }
        }
        match Entry::decode_from(&mut reader) {
            Ok(Entry::Item { .. } | Entry::Clear { .. }) => {}
            _ => return None,
        }
        hasher.update(&bytes[item_start..bytes.len() - reader.len()]);
    }
    let Ok(Entry::End(checksum)) = Entry::decode_from(&mut reader) else { return None };
    if checksum != hasher.finish() {
        return None;
    }
    let len = bytes.len() - reader.len();
    let record = if item_count == 0 && seqno & SYNC_CLAIM_BIT != 0 { Record::Claim(seqno & !SYNC_CLAIM_BIT) } else { Record::Writes };
    Some((len, record))
}
