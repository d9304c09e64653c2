use bytes::Bytes;

/// What Kinetic stores beside a value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Meta {
    /// Opaque version; empty means "no version".
    pub version: Bytes,
    /// Integrity tag supplied by the client (opaque to the drive).
    pub tag: Bytes,
    /// The tag's algorithm as the protocol numbers it, if the client gave one.
    pub algorithm: Option<i32>,
    /// Length of the stored value (filled by the engine on reads).
    pub value_len: u32,
    /// CRC32C of the stored value (filled by the engine), for media scans.
    pub value_crc: u32,
}

/// An entry as read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub key: Bytes,
    pub meta: Meta,
    pub value: Bytes,
}

/// The precondition of a write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// Ignore whatever is stored.
    Force,
    /// The stored version must equal this one. A missing key matches only the empty version
    /// (so a new key is created by passing no version); an unversioned entry matches empty.
    Version(Bytes),
}

impl Check {
    /// Whether a write may proceed given the currently stored version (`None`: key absent).
    pub fn passes(&self, stored: Option<&[u8]>) -> bool {
        match self {
            Check::Force => true,
            Check::Version(expected) => match stored {
                None => expected.is_empty(),
                Some(v) => v == &expected[..],
            },
        }
    }
}

/// Lower and upper bounds of a range, as the range APIs take them.
pub(crate) type Bounds<'a> = (std::ops::Bound<&'a [u8]>, std::ops::Bound<&'a [u8]>);

/// A key range query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRange {
    pub start: Bytes,
    pub start_inclusive: bool,
    /// `None`: no upper bound.
    pub end: Option<Bytes>,
    pub end_inclusive: bool,
    pub reverse: bool,
    pub max: usize,
}

impl KeyRange {
    /// Whether `key` lies inside the bounds.
    pub fn contains(&self, key: &[u8]) -> bool {
        let after_start = if self.start_inclusive { key >= &self.start[..] } else { key > &self.start[..] };
        let before_end = match &self.end {
            None => true,
            Some(end) if self.end_inclusive => key <= &end[..],
            Some(end) => key < &end[..],
        };
        after_start && before_end
    }

    /// The bounds as fjall can take them (keys over the engine's limit cut to it, see
    /// [`crate::limits::bound_key`]), or `None` when they hold no key.
    pub(crate) fn bounds(&self) -> Option<Bounds<'_>> {
        use std::ops::Bound::*;
        if self.is_empty() {
            return None;
        }
        let (start, start_cut) = crate::limits::bound_key(&self.start);
        let lo = if self.start_inclusive && !start_cut { Included(start) } else { Excluded(start) };
        let hi = match &self.end {
            None => Unbounded,
            Some(e) => match crate::limits::bound_key(e) {
                (end, true) => Included(end),
                (end, false) if self.end_inclusive => Included(end),
                (end, false) => Excluded(end),
            },
        };
        let empty = match (lo, hi) {
            (Included(a), Included(b)) => a > b,
            (Included(a) | Excluded(a), Included(b) | Excluded(b)) => a >= b,
            _ => false,
        };
        (!empty).then_some((lo, hi))
    }

    /// An empty or inverted range, which the B-tree range APIs would panic on.
    pub(crate) fn is_empty(&self) -> bool {
        match &self.end {
            None => false,
            Some(end) => {
                self.start > end || (self.start == end && !(self.start_inclusive && self.end_inclusive))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_checks_follow_kinetic() {
        let v = |s: &'static str| Check::Version(Bytes::from_static(s.as_bytes()));
        assert!(v("").passes(None), "new key without a version");
        assert!(!v("1").passes(None), "new key with a version");
        assert!(!v("").passes(Some(b"1")), "versioned key without a version");
        assert!(v("1").passes(Some(b"1")));
        assert!(!v("2").passes(Some(b"1")));
        assert!(v("").passes(Some(b"")), "unversioned key, no version");
        assert!(Check::Force.passes(Some(b"9")));
        assert!(Check::Force.passes(None));
    }
}
