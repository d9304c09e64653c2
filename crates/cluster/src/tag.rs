//! The version every replica of a key carries: which write it holds, in an order all clients
//! agree on. Kinetic versions are opaque bytes compared for equality only; the cluster gives
//! them a structure so that replicas can be compared and the newest kept.
//!
//! A tag is (epoch, counter, writer, kind), 25 bytes big-endian. Tags order by epoch first:
//! a drive refuses requests from another epoch (its cluster version), so every write that can
//! still be acknowledged in a new epoch is ordered after all writes of older ones, even those a
//! fenced-off drive took but never acknowledged. Within an epoch, a write's counter is one more
//! than the highest counter a read quorum holds, and the writer id breaks ties between
//! concurrent writers.

use bytes::Bytes;

/// Encoded length of a tag.
pub const TAG_LEN: usize = 25;

/// What a replica's entry stands for: a value, or the fact that the key was deleted. A delete
/// must leave a tagged entry behind, or a replica that missed it would bring the value back.
/// The batch kinds are the same written by a batch: their entries carry the batch's member
/// keys before the value (batch.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Value = 0,
    Tombstone = 1,
    BatchValue = 2,
    BatchTombstone = 3,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Tag {
    pub epoch: u64,
    pub counter: u64,
    pub writer: u64,
    pub kind: Kind,
}

impl Tag {
    /// The tag of a write that follows `latest` (the newest a read quorum holds, if any).
    pub fn next(latest: Option<&Tag>, epoch: u64, writer: u64, kind: Kind) -> Tag {
        let counter = latest.map_or(0, |t| t.counter) + 1;
        Tag { epoch: epoch.max(latest.map_or(0, |t| t.epoch)), counter, writer, kind }
    }

    pub fn encode(&self) -> Bytes {
        let mut out = Vec::with_capacity(TAG_LEN);
        out.extend_from_slice(&self.epoch.to_be_bytes());
        out.extend_from_slice(&self.counter.to_be_bytes());
        out.extend_from_slice(&self.writer.to_be_bytes());
        out.push(self.kind as u8);
        Bytes::from(out)
    }

    /// `None` for bytes that are not a tag: an entry some other client wrote without one.
    pub fn decode(bytes: &[u8]) -> Option<Tag> {
        if bytes.len() != TAG_LEN {
            return None;
        }
        let word = |i: usize| u64::from_be_bytes(bytes[i..i + 8].try_into().unwrap_or([0; 8]));
        let kind = match bytes[24] {
            0 => Kind::Value,
            1 => Kind::Tombstone,
            2 => Kind::BatchValue,
            3 => Kind::BatchTombstone,
            _ => return None,
        };
        Some(Tag { epoch: word(0), counter: word(8), writer: word(16), kind })
    }

    /// The order of writes; `kind` takes no part (one write has one tag).
    fn rank(&self) -> (u64, u64, u64) {
        (self.epoch, self.counter, self.writer)
    }

    pub fn is_tombstone(&self) -> bool {
        matches!(self.kind, Kind::Tombstone | Kind::BatchTombstone)
    }

    /// Written by a batch: the entry's value starts with the batch's member keys.
    pub fn is_batch(&self) -> bool {
        matches!(self.kind, Kind::BatchValue | Kind::BatchTombstone)
    }

    /// Whether two tags are the same write (keys of one batch share it, with their own kinds).
    pub fn same_write(&self, other: &Tag) -> bool {
        self.rank() == other.rank()
    }

    /// This write's tag for a key of another kind (a batch's tombstones beside its values).
    pub fn with_kind(self, kind: Kind) -> Tag {
        Tag { kind, ..self }
    }
}

impl PartialOrd for Tag {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Tag {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.rank().cmp(&other.rank()).then((self.kind as u8).cmp(&(other.kind as u8)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tag() -> impl Strategy<Value = Tag> {
        (any::<u64>(), any::<u64>(), any::<u64>(), 0..4u8).prop_map(|(epoch, counter, writer, k)| Tag {
            epoch,
            counter,
            writer,
            kind: [Kind::Value, Kind::Tombstone, Kind::BatchValue, Kind::BatchTombstone][usize::from(k)],
        })
    }

    proptest! {
        #[test]
        fn encoding_round_trips_and_keeps_the_order(a in tag(), b in tag()) {
            prop_assert_eq!(Tag::decode(&a.encode()), Some(a));
            // Byte order is tag order, so a range of tags could be scanned on a drive.
            prop_assert_eq!(a.encode().cmp(&b.encode()), a.cmp(&b));
        }

        #[test]
        fn a_next_tag_is_newer(a in tag(), epoch in any::<u32>(), writer in any::<u64>()) {
            prop_assume!(a.counter < u64::MAX);
            let n = Tag::next(Some(&a), epoch as u64, writer, Kind::Value);
            prop_assert!(n > a);
        }

        #[test]
        fn anything_else_is_not_a_tag(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            if let Some(t) = Tag::decode(&bytes) {
                prop_assert_eq!(&t.encode()[..], &bytes[..]);
            }
        }
    }
}
