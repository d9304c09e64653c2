//! The journals' check before the database recovers from them (fjall's `journal_audit`).
//!
//! Damage where a journal had been made durable is corruption: the open stops with the file
//! and offset, and nothing is changed. The operator may then start once with a salvage, which
//! keeps every intact batch (those after the damage too) and drops the damage; what it
//! dropped is appended to [`SALVAGE_LOG`], kept across restarts and shown in the drive's log.
//! A crash's unsynced tail is cut, as recovery always did.

use crate::{Error, Result};
use std::io::Write;
use std::path::Path;

/// The record of salvages, beside the journals.
pub const SALVAGE_LOG: &str = "journal-salvage.log";
/// Lines of that record shown in the drive's log.
const SHOWN_LINES: usize = 16;

/// Checks the journals of the database at `path`; on success, the lines worth telling the
/// operator (salvages, now and before; a crash's tail cut now). `judge` sees each batch the
/// last journal had not made durable and may end the journal before it (fjall's
/// `journal_audit::check_with`).
pub fn check(path: &Path, salvage: bool, judge: &mut dyn FnMut(&[fjall::journal_audit::JournalWrite]) -> bool) -> Result<Vec<String>> {
    let audit = fjall::journal_audit::check_with(path, salvage, judge).map_err(Error::from)?;
    if let Some(first) = audit.corrupt.first() {
        return Err(Error::corrupt(format!(
            "{first}. {} journal(s) damaged; nothing was changed. Starting with --salvage-journal keeps every intact batch, \
             drops the damage and records what was dropped",
            audit.corrupt.len()
        )));
    }
    let mut notices = Vec::new();
    if let Some((journal, at, bytes)) = &audit.crash_cut {
        notices.push(format!("journal {}: {bytes} unsynced bytes a crash left after offset {at} were dropped", journal.display()));
    }
    if !audit.salvaged.is_empty() {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let mut lines = String::new();
        for s in &audit.salvaged {
            let stretches: Vec<String> = s.dropped.iter().map(|r| format!("{}..{}", r.start, r.end)).collect();
            let line = format!(
                "{now} journal {} salvaged: dropped damaged bytes at {}; kept {} intact batches ({} after the damage); dropped {} unsynced batches",
                s.path.display(),
                stretches.join(", "),
                s.kept_batches,
                s.kept_after_damage,
                s.dropped_unsynced_batches,
            );
            tracing::error!("{line}");
            lines.push_str(&line);
            lines.push('\n');
        }
        record(path, &lines)?;
    }
    notices.extend(recorded(path));
    Ok(notices)
}

/// Appends `lines` to the salvage record, durably.
fn record(path: &Path, lines: &str) -> Result<()> {
    let log = path.join(SALVAGE_LOG);
    let created = !log.exists();
    let mut file = std::fs::OpenOptions::new().create(true).append(true).open(&log)?;
    file.write_all(lines.as_bytes())?;
    file.sync_all()?;
    if created {
        crate::dirsync::sync_dir(path)?;
    }
    Ok(())
}

/// The last lines of the salvage record, if there is one.
fn recorded(path: &Path) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(path.join(SALVAGE_LOG)) else { return Vec::new() };
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(SHOWN_LINES)..].iter().map(|l| (*l).to_owned()).collect()
}
