//! What one replica's entry says of its key, as an acceptor of the key's Paxos instances: the
//! write it holds (`identity`, the version clients see), the ballot under which it accepted
//! that write, and the highest ballot it promised to a conditional write's prepare.
//!
//! Ballots and identities are tags. An unconditional write is accepted under its own tag
//! (ballot = identity), and so is a conditional write; a later round that makes an accepted
//! write chosen accepts it again under its own, higher ballot and keeps its identity. The
//! promise is the highest the replica ever made for the key, kept when it accepts a write
//! above it: whether a replica ever promised above a write's ballot decides whether a newer
//! write it holds may stand for that write (`Stamp::covers`). The common entry (no promise
//! ever, ballot = identity) is stored as the 25-byte tag alone, as every entry was before
//! conditional writes took part in Paxos; the rest take 76 bytes.

use bytes::Bytes;

use crate::tag::{Kind, Tag, TAG_LEN};

/// First byte of an extended stamp. A plain tag starts with the high byte of its epoch, and
/// its length (25) tells the two apart anyway.
const EXTENDED: u8 = 0xF1;
const EXTENDED_LEN: usize = 1 + 3 * TAG_LEN;

/// The identity of "no write accepted": the entry a promise leaves on a key that held
/// nothing. A tombstone below every real tag, so readers take it for an absent key.
pub const NOTHING: Tag = Tag { epoch: 0, counter: 0, writer: 0, kind: Kind::Tombstone };
/// The promise field of an extended stamp that never promised (a real ballot's counter is 1
/// or more).
const NO_PROMISE: Tag = Tag { epoch: 0, counter: 0, writer: 0, kind: Kind::Value };

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Stamp {
    /// The write this replica holds.
    pub identity: Tag,
    /// The ballot it was accepted under (kind always `Value`: ballots order by rank only).
    pub ballot: Tag,
    /// The highest ballot this replica ever promised for the key, if it promised one.
    pub promise: Option<Tag>,
}

/// A tag as a ballot: one write's entries of several kinds share one ballot.
pub fn ballot_of(tag: Tag) -> Tag {
    tag.with_kind(Kind::Value)
}

impl Stamp {
    /// A write accepted under its own tag, nothing promised.
    pub fn plain(identity: Tag) -> Stamp {
        Stamp { identity, ballot: ballot_of(identity), promise: None }
    }

    /// `identity` accepted under `ballot` by a replica that stood at `self`: the promise stays.
    pub fn accept(&self, identity: Tag, ballot: Tag) -> Stamp {
        Stamp { identity, ballot: ballot_of(ballot), promise: self.promise }
    }

    /// The replica's place in ballot order: nothing below it may be accepted any more.
    pub fn position(&self) -> Tag {
        self.promise.map_or(self.ballot, |p| p.max(self.ballot))
    }

    /// The order of accepted writes across replicas: by ballot, then identity.
    pub fn order(&self) -> (Tag, Tag) {
        (self.ballot, self.identity)
    }

    /// Whether this replica holds the write `identity` accepted at `ballot` or later.
    pub fn holds(&self, identity: Tag, ballot: Tag) -> bool {
        self.identity == identity && self.ballot >= ballot_of(ballot)
    }

    /// Whether the replica may accept a write under `ballot`: it accepted nothing at or above
    /// it and promised nothing above it.
    pub fn admits(&self, ballot: Tag) -> bool {
        let ballot = ballot_of(ballot);
        self.ballot < ballot && self.promise.is_none_or(|p| p <= ballot)
    }

    /// Whether a write under `ballot` that this replica refused may count it as if it had
    /// taken it and then the newer write it holds (as ABD counts a replica holding a newer
    /// tag): it holds a write accepted above the ballot and never promised above it. Then no
    /// round above the ballot prepared here before the refusal, so any round that prepares
    /// here later sees the newer write, and none can build on a write older than this one
    /// with a ballot above it (docs/design/conditional-writes.md). Never a batch's write: one
    /// not chosen can be abandoned, and the key then falls back to the write before it, below
    /// the one refused (`store/abandon.rs`); counted, that one would be acknowledged and lost.
    pub fn covers(&self, ballot: Tag) -> bool {
        let ballot = ballot_of(ballot);
        !self.identity.is_batch() && self.ballot > ballot && self.promise.is_none_or(|p| p < ballot)
    }

    /// Whether this entry of a batch's member holds another write accepted after the batch
    /// `batch` (the write's tag): under a ballot above the batch's own. Not above the ballot
    /// the key the batch was read from stands at: that key may have been accepted again alone
    /// since, under a higher ballot (a chosen batch made to stand in place of an abandoned
    /// one, `store/abandon.rs`).
    pub fn replaces(&self, batch: Tag) -> bool {
        !self.identity.same_write(&batch) && self.ballot > ballot_of(batch)
    }

    /// Whether the replica may promise `ballot`: nothing at or above it accepted or promised.
    pub fn may_promise(&self, ballot: Tag) -> bool {
        self.position() < ballot_of(ballot)
    }

    pub fn with_promise(self, ballot: Tag) -> Stamp {
        Stamp { promise: Some(ballot_of(ballot)), ..self }
    }

    pub fn encode(&self) -> Bytes {
        if self.promise.is_none() && self.ballot == ballot_of(self.identity) {
            return self.identity.encode();
        }
        let mut out = Vec::with_capacity(EXTENDED_LEN);
        out.push(EXTENDED);
        out.extend_from_slice(&self.identity.encode());
        out.extend_from_slice(&self.ballot.encode());
        out.extend_from_slice(&self.promise.unwrap_or(NO_PROMISE).encode());
        Bytes::from(out)
    }

    /// `None` for version bytes that are neither: an entry written outside the cluster.
    pub fn decode(bytes: &[u8]) -> Option<Stamp> {
        if bytes.len() == TAG_LEN {
            return Tag::decode(bytes).map(Stamp::plain);
        }
        if bytes.len() != EXTENDED_LEN || bytes[0] != EXTENDED {
            return None;
        }
        let part = |i: usize| Tag::decode(&bytes[1 + i * TAG_LEN..1 + (i + 1) * TAG_LEN]);
        let (identity, ballot, promise) = (part(0)?, part(1)?, part(2)?);
        let ballot = ballot_of(ballot);
        Some(Stamp { identity, ballot, promise: (promise != NO_PROMISE).then_some(ballot_of(promise)) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tag() -> impl Strategy<Value = Tag> {
        (0..4u64, 0..4u64, 0..4u64, 0..4u8).prop_map(|(epoch, counter, writer, k)| Tag {
            epoch,
            counter,
            writer,
            kind: [Kind::Value, Kind::Tombstone, Kind::BatchValue, Kind::BatchTombstone][usize::from(k)],
        })
    }

    fn stamp() -> impl Strategy<Value = Stamp> {
        (tag(), tag(), proptest::option::of(tag())).prop_map(|(identity, ballot, promise)| {
            let ballot = ballot_of(ballot.max(identity));
            Stamp { identity, ballot, promise: promise.map(ballot_of).filter(|p| *p != NO_PROMISE) }
        })
    }

    #[test]
    fn a_member_is_replaced_by_a_write_accepted_above_the_batch_itself() {
        let at = |counter| Tag { epoch: 1, counter, writer: 1, kind: Kind::Value };
        let batch = Tag { kind: Kind::BatchValue, ..at(10) };
        // Another write accepted above the batch replaces it, even below a ballot the batch's
        // other key was accepted again under since (12).
        assert!(Stamp::plain(at(11)).replaces(batch));
        assert!(!Stamp::plain(at(9)).replaces(batch));
        // The batch itself, accepted again under a higher ballot, does not.
        assert!(!Stamp { identity: batch.with_kind(Kind::BatchTombstone), ballot: at(12), promise: None }.replaces(batch));
        // An older write accepted again above the batch (a round that made it chosen) does.
        assert!(Stamp { identity: at(9), ballot: at(11), promise: None }.replaces(batch));
    }

    proptest! {
        #[test]
        fn stamps_round_trip(s in stamp()) {
            prop_assert_eq!(Stamp::decode(&s.encode()), Some(s));
        }

        #[test]
        fn a_plain_stamp_is_the_tag_alone(t in tag()) {
            prop_assert_eq!(Stamp::plain(t).encode(), t.encode());
        }

        #[test]
        fn a_replica_admits_only_above_its_position(s in stamp(), b in tag()) {
            // Accepting needs a ballot above the accepted one and not below the promise;
            // promising needs one above both.
            if s.may_promise(b) {
                prop_assert!(s.admits(b));
            }
            if s.admits(b) {
                prop_assert!(ballot_of(b) >= s.position());
            }
            // A replica never both takes a ballot and stands for it with a newer write.
            prop_assert!(!(s.admits(b) && s.covers(b)));
            if s.covers(b) {
                prop_assert!(s.promise.is_none_or(|p| p < ballot_of(b)));
                prop_assert!(!s.identity.is_batch());
            }
        }

        #[test]
        fn other_bytes_are_not_stamps(bytes in proptest::collection::vec(any::<u8>(), 0..90)) {
            if let Some(s) = Stamp::decode(&bytes) {
                prop_assert_eq!(Stamp::decode(&s.encode()), Some(s));
            }
        }
    }
}
