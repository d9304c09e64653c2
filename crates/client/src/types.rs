use bytes::Bytes;
use spindle_proto::Synchronization;

/// What a drive stores beside a value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Metadata {
    pub version: Bytes,
    pub tag: Bytes,
    /// The protocol's algorithm number, if one was stored.
    pub algorithm: Option<i32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub key: Bytes,
    pub metadata: Metadata,
    pub value: Bytes,
}

#[derive(Debug, Clone)]
pub struct PutOptions {
    /// Version the entry gets (empty: none).
    pub new_version: Bytes,
    /// Version the stored entry must have (empty: none, i.e. a new or unversioned key).
    pub db_version: Bytes,
    pub force: bool,
    pub tag: Bytes,
    pub algorithm: Option<i32>,
    pub sync: Synchronization,
}

impl Default for PutOptions {
    fn default() -> Self {
        PutOptions {
            new_version: Bytes::new(),
            db_version: Bytes::new(),
            force: false,
            tag: Bytes::new(),
            algorithm: None,
            sync: Synchronization::Writethrough,
        }
    }
}

impl PutOptions {
    /// A forced put with the given synchronization.
    pub fn forced(sync: Synchronization) -> Self {
        PutOptions { force: true, sync, ..PutOptions::default() }
    }
}

#[derive(Debug, Clone)]
pub struct DeleteOptions {
    pub db_version: Bytes,
    pub force: bool,
    pub sync: Synchronization,
}

impl Default for DeleteOptions {
    fn default() -> Self {
        DeleteOptions { db_version: Bytes::new(), force: false, sync: Synchronization::Writethrough }
    }
}

/// A GETKEYRANGE query.
#[derive(Debug, Clone)]
pub struct RangeQuery {
    pub start: Bytes,
    pub start_inclusive: bool,
    /// `None`: to the end of the key space.
    pub end: Option<Bytes>,
    pub end_inclusive: bool,
    pub max_returned: i32,
    pub reverse: bool,
}

impl RangeQuery {
    /// Keys from `start` to `end`, both included, up to `max` of them.
    pub fn inclusive(start: impl Into<Bytes>, end: impl Into<Bytes>, max: i32) -> Self {
        RangeQuery {
            start: start.into(),
            start_inclusive: true,
            end: Some(end.into()),
            end_inclusive: true,
            max_returned: max,
            reverse: false,
        }
    }
}
