//! The Kinetic write rules, decided here once for every engine.
//!
//! - A put or delete carries a check: forced, or the version the key must have now (compare and
//!   swap, where an empty version means "absent"). A forced put does not read the key at all.
//! - A forced delete of a missing key succeeds; an unforced one is NOT_FOUND.
//! - A batch holds only puts and deletes, checked in order against the state the earlier ones
//!   leave, and is applied whole or not at all: an engine applies what it staged only when
//!   [`stage`] succeeded.
//! - A stored value's length and CRC are stamped into its metadata here.
//!
//! An engine says how to read a key's state (after what it has staged so far) and how to stage
//! a change ([`Staging`]); this module decides.

use bytes::Bytes;

use crate::{Check, Error, Meta, Result, WriteOp};

/// What an engine offers for the rules to be decided against it.
pub(crate) trait Staging {
    /// What the engine knows of a stored key.
    type Stored;
    /// The key's stored version.
    fn version(stored: &Self::Stored) -> &[u8];
    /// The key's state after everything staged so far, or in the store (`None`: absent).
    fn current(&mut self, key: &Bytes) -> Result<Option<Self::Stored>>;
    /// Stages a put that passed its check. `stored` is the key's state when it was read: never
    /// for a forced put (`forced`).
    fn put(&mut self, key: &Bytes, value: &Bytes, meta: Meta, stored: Option<Self::Stored>, forced: bool) -> Result<()>;
    /// Stages the delete of a stored key that passed its check.
    fn delete(&mut self, key: &Bytes, stored: Self::Stored) -> Result<()>;
}

/// Decides `op` against `staging` and stages its changes. On an error nothing the engine
/// should apply was decided; with a batch, the engine must drop what earlier operations of it
/// staged.
pub(crate) fn stage<S: Staging>(staging: &mut S, op: &WriteOp) -> Result<()> {
    match op {
        WriteOp::Put { key, value, meta, check } => {
            let meta = stamped(meta, value)?;
            let forced = *check == Check::Force;
            let stored = if forced { None } else { staging.current(key)? };
            if !check.passes(stored.as_ref().map(S::version)) {
                return Err(Error::VersionMismatch);
            }
            staging.put(key, value, meta, stored, forced)
        }
        WriteOp::Delete { key, check } => {
            let Some(stored) = staging.current(key)? else {
                return if *check == Check::Force { Ok(()) } else { Err(Error::NotFound) };
            };
            if !check.passes(Some(S::version(&stored))) {
                return Err(Error::VersionMismatch);
            }
            staging.delete(key, stored)
        }
        WriteOp::Flush => Ok(()),
        WriteOp::Erase { .. } => Err(Error::Internal("an erase is never staged with writes")),
        WriteOp::Batch(ops) => {
            for (index, op) in ops.iter().enumerate() {
                let staged = match op {
                    WriteOp::Put { .. } | WriteOp::Delete { .. } => stage(staging, op),
                    WriteOp::Batch(_) | WriteOp::Flush | WriteOp::Erase { .. } => Err(Error::Internal("only puts and deletes batch")),
                };
                staged.map_err(|cause| Error::BatchFailed { index, cause: Box::new(cause) })?;
            }
            Ok(())
        }
    }
}

/// `meta` with the value's length and CRC-32C, which reads check the value against.
fn stamped(meta: &Meta, value: &Bytes) -> Result<Meta> {
    let mut meta = meta.clone();
    meta.value_len = u32::try_from(value.len()).map_err(|_| Error::Invalid("a value over 4 GiB".into()))?;
    meta.value_crc = crc_fast::crc32_iscsi(value);
    Ok(meta)
}
