//! Write requests: what the single writer of an engine applies, in submission order.

use bytes::Bytes;

use crate::{Check, Meta, Result};

/// Called with the outcome of a write (or of a sync).
pub type Callback = Box<dyn FnOnce(Result<()>) + Send>;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteOp {
    Put { key: Bytes, value: Bytes, meta: Meta, check: Check },
    Delete { key: Bytes, check: Check },
    /// Writes nothing; with `sync`, completes once every earlier write is durable.
    Flush,
    /// Removes every entry (PIN erase). `secure` also rewrites the store so that no table or
    /// blob file holding the old data is left in the data directory.
    Erase { secure: bool },
    /// Puts and deletes applied atomically: all of them or, if one fails its check, none
    /// ([`crate::Error::BatchFailed`] names it). Checks see the batch's own earlier operations.
    Batch(Vec<WriteOp>),
}

pub struct WriteRequest {
    pub op: WriteOp,
    /// Acknowledge only once durable (WRITETHROUGH, FLUSH).
    pub sync: bool,
    /// The write is visible to readers (or failed).
    pub on_applied: Option<Callback>,
    /// The write is acknowledged: applied, and durable if `sync`.
    pub on_done: Callback,
}

impl WriteRequest {
    /// Answers the request with `result`: applied (or failed), then acknowledged.
    pub fn finish(self, result: crate::Result<()>) {
        if let Some(applied) = self.on_applied {
            applied(result.clone());
        }
        (self.on_done)(result);
    }
}

impl WriteOp {
    /// The key a put or delete writes.
    pub fn key(&self) -> Option<&Bytes> {
        match self {
            WriteOp::Put { key, .. } | WriteOp::Delete { key, .. } => Some(key),
            WriteOp::Flush | WriteOp::Batch(_) | WriteOp::Erase { .. } => None,
        }
    }

    /// Bytes this operation adds to the store, for batching limits.
    pub fn footprint(&self) -> usize {
        match self {
            WriteOp::Put { key, value, meta, .. } => key.len() + value.len() + meta.version.len() + meta.tag.len(),
            WriteOp::Delete { key, .. } => key.len(),
            WriteOp::Flush | WriteOp::Erase { .. } => 0,
            WriteOp::Batch(ops) => ops.iter().map(WriteOp::footprint).sum(),
        }
    }
}
