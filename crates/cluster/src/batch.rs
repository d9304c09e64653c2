//! Batches atomic within one partition: several puts and deletes that readers see all or none
//! of, built from Kinetic's own atomic batches.
//!
//! A batch's operations share one write (one tag's epoch, counter and writer; each key's
//! kind says value or tombstone) and are stored on each replica with one Kinetic batch of
//! compare-and-swap puts, so a replica holds all of them or none. Every entry a batch writes
//! carries the batch's member keys in front of its value ([`encode_entry`]), so whoever reads
//! one of them can find the others: a read that must write a batch's entry back to a write
//! quorum (ABD's second phase) writes the whole batch back, atomically on each replica, before
//! it answers. So once any read returns a batch's write, every key of the batch holds it (or
//! a newer write) on a write quorum, and no later read of any of them returns anything older.

use bytes::{BufMut, Bytes, BytesMut};

use crate::condition::Condition;

/// Most operations in one batch: the drives' published maxOperationCountPerBatch.
pub const MAX_BATCH_OPS: usize = spindle_proto::limits::MAX_OPERATION_COUNT_PER_BATCH as usize;
// A batch's entries are each at most a value's limit (`Store::batch` checks), so a full batch
// always fits the drives' maxBatchSize: no check of its total is needed.
const _: () = assert!(
    MAX_BATCH_OPS * crate::map::MAX_VALUE_LEN <= spindle_proto::limits::MAX_BATCH_SIZE as usize
);

/// One operation of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchOp {
    Put { key: Bytes, value: Bytes, condition: Condition },
    /// Writes a tombstone whether or not the key exists, unless `condition` asks otherwise.
    Delete { key: Bytes, condition: Condition },
}

impl BatchOp {
    pub fn key(&self) -> &Bytes {
        match self {
            BatchOp::Put { key, .. } | BatchOp::Delete { key, .. } => key,
        }
    }

    pub fn condition(&self) -> &Condition {
        match self {
            BatchOp::Put { condition, .. } | BatchOp::Delete { condition, .. } => condition,
        }
    }

    pub fn value(&self) -> &[u8] {
        match self {
            BatchOp::Put { value, .. } => value,
            BatchOp::Delete { .. } => &[],
        }
    }

    pub fn is_delete(&self) -> bool {
        matches!(self, BatchOp::Delete { .. })
    }
}

/// Bytes the member header adds to each entry of a batch of `keys`.
pub fn header_len<K: AsRef<[u8]>>(keys: &[K]) -> usize {
    2 + keys.iter().map(|k| 2 + k.as_ref().len()).sum::<usize>()
}

/// A batch entry as stored on a drive: the member count (u16, big-endian), each member's user
/// key (u16 length, big-endian, then the bytes), then the value.
pub fn encode_entry<K: AsRef<[u8]>>(keys: &[K], value: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(header_len(keys) + value.len());
    // Counts and lengths fit: a batch has at most MAX_BATCH_OPS keys of at most MAX_KEY_LEN.
    out.put_u16(keys.len() as u16);
    for k in keys {
        out.put_u16(k.as_ref().len() as u16);
        out.put_slice(k.as_ref());
    }
    out.put_slice(value);
    out.freeze()
}

/// The member keys and the value of a batch entry; `None` if `entry` is not one.
pub fn decode_entry(entry: &Bytes) -> Option<(Vec<Bytes>, Bytes)> {
    let take_u16 = |at: usize| -> Option<usize> { Some(usize::from(u16::from_be_bytes(entry.get(at..at + 2)?.try_into().ok()?))) };
    let count = take_u16(0)?;
    let mut at = 2;
    let mut keys = Vec::with_capacity(count.min(MAX_BATCH_OPS));
    for _ in 0..count {
        let len = take_u16(at)?;
        at += 2;
        if entry.len() < at + len {
            return None;
        }
        keys.push(entry.slice(at..at + len));
        at += len;
    }
    Some((keys, entry.slice(at..)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn entries_round_trip(keys in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 1..MAX_BATCH_OPS), value in proptest::collection::vec(any::<u8>(), 0..256)) {
            let e = encode_entry(&keys, &value);
            prop_assert_eq!(e.len(), header_len(&keys) + value.len());
            let (k, v) = decode_entry(&e).unwrap();
            prop_assert_eq!(k.iter().map(|b| b.to_vec()).collect::<Vec<_>>(), keys);
            prop_assert_eq!(&v[..], &value[..]);
        }

        #[test]
        fn any_bytes_decode_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
            let b = Bytes::from(bytes);
            if let Some((keys, value)) = decode_entry(&b) {
                prop_assert!(keys.iter().map(|k| k.len() + 2).sum::<usize>() + 2 + value.len() == b.len());
            }
        }
    }

    #[test]
    fn a_truncated_header_is_not_an_entry() {
        let e = encode_entry(&[b"abc".as_slice(), b"de"], b"v");
        for cut in 0..header_len(&[b"abc".as_slice(), b"de"]) {
            assert!(decode_entry(&e.slice(..cut)).is_none(), "cut at {cut}");
        }
    }
}
