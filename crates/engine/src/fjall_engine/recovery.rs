//! Recovery's judge of unsynced journal records: a record whose value the value log does not
//! hold whole (a power cut kept the record, which the OS may write back at any time, and lost
//! the value) ends the journal there, as if the crash had come just before it. Only records
//! past the journal's last sync claim are judged: every earlier one was synced after its value
//! (`ValueLog::sync` runs before every journal sync), so its value is there.
//!
//! A value the log cannot be *read* for (an I/O error, not bytes missing) decides nothing:
//! cutting there would drop that record and every later one for good on what may be a passing
//! fault. The judge keeps that record and all after it, and the open is refused with the error
//! (`Judge::failure`) before anything is recovered; the next open judges them again.

use bytes::Bytes;

use crate::record::{self, Placement};
use crate::value_log::ValueLog;
use crate::Error;

/// The judge for a store whose pointers are in keyspace `index` (`None`: no value was ever
/// logged, so every record stands).
pub(super) struct Judge<'a> {
    log: &'a ValueLog,
    index: Option<u64>,
    /// The first error reading the log; from then on every record is kept.
    pub failure: Option<Error>,
}

impl<'a> Judge<'a> {
    pub fn new(log: &'a ValueLog, index: Option<u64>) -> Self {
        Judge { log, index, failure: None }
    }

    /// Whether the batch of `writes` stands (fjall's `journal_audit::check_with` judge).
    pub fn judge(&mut self, writes: &[fjall::journal_audit::JournalWrite]) -> bool {
        let Some(index) = self.index else { return true };
        if self.failure.is_some() {
            return true;
        }
        for write in writes {
            if write.keyspace_id != index || write.value_type != lsm_tree::ValueType::Value {
                continue;
            }
            let Ok((meta, Placement::Logged(pointer))) = record::decode(Bytes::copy_from_slice(&write.value)) else { continue };
            match self.log.holds(pointer, &write.key, meta.value_len, meta.value_crc) {
                Ok(true) => {}
                Ok(false) => return false,
                Err(e) => {
                    tracing::error!("could not read the value log to check an unsynced journal record: {e}");
                    self.failure = Some(e);
                    return true;
                }
            }
        }
        true
    }
}
