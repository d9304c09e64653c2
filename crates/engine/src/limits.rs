//! What the engine under Spindle can store, as named constants: the drive checks its own
//! configured limits against these when it starts, and the engine checks every write against
//! them again at its boundary, because fjall and lsm-tree *assert* them (a longer or empty key
//! panics the thread that inserts it).

use crate::{Error, Result, WriteOp};

/// Longest key fjall stores: its keys carry a 16-bit length (`fjall::batch::Item::new`,
/// `lsm_tree::InternalKey::new`).
pub const KEY_SIZE_MAX: usize = u16::MAX as usize;

/// Checks the keys of a put, delete or batch against what fjall accepts.
pub fn check_op(op: &WriteOp) -> Result<()> {
    match op {
        WriteOp::Put { key, .. } | WriteOp::Delete { key, .. } => check_key(key),
        WriteOp::Batch(ops) => ops.iter().try_for_each(check_op),
        WriteOp::Flush | WriteOp::Erase { .. } => Ok(()),
    }
}

fn check_key(key: &[u8]) -> Result<()> {
    if key.is_empty() {
        return Err(Error::Invalid("an empty key cannot be stored".into()));
    }
    if key.len() > KEY_SIZE_MAX {
        return Err(Error::Invalid(format!("a key of {} bytes is over the engine's limit of {KEY_SIZE_MAX}", key.len())));
    }
    Ok(())
}

/// A read bound for `key` that fjall can take. No stored key is longer than [`KEY_SIZE_MAX`],
/// so a longer `key` is replaced by its first `KEY_SIZE_MAX` bytes, `p`: a stored key sorts
/// after `key` exactly when it sorts after `p` (it cannot extend `p`), and before `key` exactly
/// when it sorts at or before `p`. Returns the bound key and whether it was cut.
pub(crate) fn bound_key(key: &[u8]) -> (&[u8], bool) {
    if key.len() > KEY_SIZE_MAX {
        (&key[..KEY_SIZE_MAX], true)
    } else {
        (key, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_over_the_limit_or_empty_are_refused() {
        let put = |len: usize| WriteOp::Delete { key: vec![1u8; len].into(), check: crate::Check::Force };
        assert!(check_op(&put(KEY_SIZE_MAX)).is_ok());
        assert!(matches!(check_op(&put(KEY_SIZE_MAX + 1)), Err(Error::Invalid(_))));
        assert!(matches!(check_op(&WriteOp::Batch(vec![put(1), put(0)])), Err(Error::Invalid(_))));
    }
}
