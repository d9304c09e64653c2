//! What a write requires of a key's current version (puts, deletes, batches' operations).

use bytes::Bytes;

use crate::tag::Tag;

/// What a put requires of the key's current version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Condition {
    None,
    /// The key must hold exactly this version.
    Version(Bytes),
    /// The key must not exist.
    Absent,
}

impl Condition {
    /// Whether a key whose newest live write (not a tombstone) is `live` meets the condition.
    pub fn admits(&self, live: Option<Tag>) -> bool {
        match self {
            Condition::None => true,
            Condition::Absent => live.is_none(),
            Condition::Version(v) => live.map(|t| t.encode()).as_ref() == Some(v),
        }
    }
}
