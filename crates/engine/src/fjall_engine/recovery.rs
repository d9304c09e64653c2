//! Recovery's judge of unsynced journal records: a record whose value the value log does not
//! hold whole (a power cut kept the record, which the OS may write back at any time, and lost
//! the value) ends the journal there, as if the crash had come just before it. Only records
//! past the journal's last sync claim are judged: every earlier one was synced after its value
//! (`ValueLog::sync` runs before every journal sync), so its value is there.

use bytes::Bytes;

use crate::record::{self, Placement};
use crate::value_log::ValueLog;

/// The judge for a store whose pointers are in keyspace `index` (`None`: no value was ever
/// logged, so every record stands).
pub(super) fn judge<'a>(log: &'a ValueLog, index: Option<u64>) -> impl FnMut(&[fjall::journal_audit::JournalWrite]) -> bool + 'a {
    move |writes| {
        let Some(index) = index else { return true };
        writes.iter().all(|write| {
            if write.keyspace_id != index || write.value_type != lsm_tree::ValueType::Value {
                return true;
            }
            match record::decode(Bytes::copy_from_slice(&write.value)) {
                Ok((meta, Placement::Logged(pointer))) => match log.holds(pointer, &write.key, meta.value_len, meta.value_crc) {
                    Ok(held) => held,
                    Err(e) => {
                        tracing::warn!("could not read the value log to check an unsynced record: {e}");
                        false
                    }
                },
                _ => true,
            }
        })
    }
}
