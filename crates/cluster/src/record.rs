//! Batch records: a batch's writer, once a write quorum has taken the batch and before it
//! acknowledges it, leaves on the partition's replicas a small entry saying so, under a key of
//! the partition that users cannot write (`map::RESERVED_PREFIX`).
//!
//! A record is a hint, never needed for safety: it exists only for a batch that was chosen,
//! so a reader that finds one may take the batch as chosen; a reader that finds none learns
//! nothing and decides as it did without records. That is what it is for: a batch whose
//! entries newer writes have since replaced on some replicas can leave no trace in the
//! entries of whether it ever stood on a write quorum (docs/design/simulation.md, Open
//! findings), and its record decides it when the batch was acknowledged. Being a hint, a
//! record may be lost (a drive that crashed before syncing it) or dropped: the scrub deletes
//! records older than [`RECORD_TTL_MS`], so that their number stays bounded.
//!
//! An *abandonment* record says the opposite, under a key of its own: a reader that proved a
//! batch never chosen and made the write before it stand on one of its keys leaves it, so
//! that a reader of another key, meeting the batch beneath others where the entries cannot
//! tell whether it was chosen, passes over it there too rather than stay undecided. It is a
//! hint in the same way: one that is missing says nothing.

use bytes::Bytes;
use spindle_client::{Client, ClientError, DeleteOptions, PutOptions, Synchronization};

use crate::map;
use crate::replica::Held;
use crate::tag::Tag;

/// How long a record is kept: the batches that need one are met within moments of the
/// faults that leave them undecided, and a key written again settles its batch anyway.
pub const RECORD_TTL_MS: u64 = 7 * 24 * 3600 * 1000;
/// What a record's version starts with (then its creation time, Unix milliseconds, big
/// endian): never a stamp's length, so the cluster's reads and repairs pass it by.
const RECORD_MAGIC: &[u8] = b"spindle-batch-record";

/// What a record says of its batch: each kind lies under a key of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record {
    /// The batch was chosen (left by its writer, or by a reader that made it chosen).
    Chosen,
    /// The batch was proven never chosen and passed over for one of its keys.
    Abandoned,
}

impl Record {
    /// What follows the reserved prefix in the record's user key, before the batch's tag.
    fn name(self) -> &'static [u8] {
        match self {
            Record::Chosen => b"batch/",
            Record::Abandoned => b"abandoned/",
        }
    }
}

/// The drive key of `batch`'s record in `partition` (any of its entries' tags: a member's
/// kind, value or tombstone, is not part of it).
pub fn key(partition: u32, batch: &Tag) -> Bytes {
    key_of(Record::Chosen, partition, batch)
}

/// The drive key of `batch`'s record of kind `record` in `partition`.
pub fn key_of(record: Record, partition: u32, batch: &Tag) -> Bytes {
    let batch = batch.with_kind(crate::tag::Kind::BatchValue);
    let name = record.name();
    let mut user = Vec::with_capacity(map::RESERVED_PREFIX.len() + name.len() + crate::tag::TAG_LEN);
    user.extend_from_slice(map::RESERVED_PREFIX);
    user.extend_from_slice(name);
    user.extend_from_slice(&batch.encode());
    map::drive_key(partition, &user)
}

/// A record's version, made at `now_ms`.
fn version(now_ms: u64) -> Bytes {
    let mut v = Vec::with_capacity(RECORD_MAGIC.len() + 8);
    v.extend_from_slice(RECORD_MAGIC);
    v.extend_from_slice(&now_ms.to_be_bytes());
    Bytes::from(v)
}

/// When the record holding `version` was made; `None` if it is not a record's.
pub fn made_at(version: &[u8]) -> Option<u64> {
    let time = version.strip_prefix(RECORD_MAGIC)?;
    Some(u64::from_be_bytes(time.try_into().ok()?))
}

/// Whether what a replica holds is a record older than [`RECORD_TTL_MS`] at `now_ms`.
pub fn expired(held: &Held, now_ms: u64) -> bool {
    match held {
        Held::Absent => false,
        Held::Entry { version, .. } => made_at(version).is_some_and(|t| now_ms.saturating_sub(t) > RECORD_TTL_MS),
    }
}

/// Leaves `batch`'s record of kind `record` on one replica (written back, not synced: a
/// hint); one already there is kept.
pub async fn leave(client: &Client, record: Record, partition: u32, batch: &Tag) -> Result<(), ClientError> {
    let options = PutOptions { db_version: Bytes::new(), new_version: version(crate::clock::now_ms()), force: false, sync: Synchronization::Writeback, ..PutOptions::default() };
    match client.put(&key_of(record, partition, batch), Bytes::new(), options).await {
        Ok(()) => Ok(()),
        Err(e) if e.is_version_mismatch() => Ok(()),
        Err(e) => Err(e),
    }
}

/// Whether one replica holds `batch`'s record of kind `record`.
pub async fn held(client: &Client, record: Record, partition: u32, batch: &Tag) -> Result<bool, ClientError> {
    Ok(client.get_metadata(&key_of(record, partition, batch)).await?.is_some_and(|m| made_at(&m.version).is_some()))
}

/// Deletes an expired record from one replica, unless it changed meanwhile.
pub async fn drop_expired(client: &Client, dkey: &[u8], held: &Held) -> Result<(), ClientError> {
    match client.delete(dkey, DeleteOptions { db_version: held.version(), force: false, sync: Synchronization::Writeback }).await {
        Ok(_) => Ok(()),
        Err(e) if e.is_version_mismatch() => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stamp::Stamp;
    use crate::tag::Kind;

    #[test]
    fn a_record_is_never_read_as_a_stamp_and_ages_from_its_making() {
        let v = version(1_000);
        assert_eq!(Stamp::decode(&v), None);
        assert_eq!(made_at(&v), Some(1_000));
        assert_eq!(made_at(b"spindle-batch-recor"), None);
        let held = Held::from_version(v);
        assert!(!expired(&held, 1_000 + RECORD_TTL_MS));
        assert!(expired(&held, 1_001 + RECORD_TTL_MS));
        // A user's entry, or a stamp, is never taken for an expired record.
        let tag = Tag { epoch: 3, counter: 9, writer: 1, kind: Kind::BatchValue };
        assert!(!expired(&Held::from_version(tag.encode()), u64::MAX));
        assert!(!expired(&Held::Absent, u64::MAX));
    }

    proptest::proptest! {
        #[test]
        fn any_version_is_read_without_panicking_and_a_record_only_with_its_magic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40)) {
            let made = made_at(&bytes);
            proptest::prop_assert_eq!(made.is_some(), bytes.len() == RECORD_MAGIC.len() + 8 && bytes.starts_with(RECORD_MAGIC));
            crate::decode_untrusted(&bytes);
        }

        #[test]
        fn every_making_time_reads_back(time in proptest::prelude::any::<u64>()) {
            let v = version(time);
            proptest::prop_assert_eq!(made_at(&v), Some(time));
            crate::decode_untrusted(&v);
        }
    }

    #[test]
    fn a_record_lies_in_its_batchs_partition_under_the_reserved_prefix() {
        let tag = Tag { epoch: 3, counter: 9, writer: 1, kind: Kind::BatchValue };
        let k = key(17, &tag);
        let user = map::user_key(17, &k).unwrap();
        assert!(map::is_reserved(user));
        assert!(user.len() <= map::MAX_KEY_LEN);
        assert_ne!(key(17, &Tag { counter: 10, ..tag }), k);
        assert_eq!(key(17, &Tag { kind: Kind::BatchTombstone, ..tag }), k);
        // An abandonment record: reserved too, and never the chosen record's key.
        let a = key_of(Record::Abandoned, 17, &tag);
        assert!(map::is_reserved(map::user_key(17, &a).unwrap()));
        assert!(map::user_key(17, &a).unwrap().len() <= map::MAX_KEY_LEN);
        assert_ne!(a, k);
        assert_eq!(key_of(Record::Abandoned, 17, &Tag { kind: Kind::BatchTombstone, ..tag }), a);
    }
}
