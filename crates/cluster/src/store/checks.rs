//! What the store takes from its callers: keys and values within the drives' limits, and no
//! key of the cluster's own (`map::RESERVED_PREFIX`).

use super::*;

impl Store {
    pub(super) fn check_key(key: &[u8]) -> Result<(), ClusterError> {
        if key.len() > MAX_KEY_LEN {
            return Err(ClusterError::KeyTooLong { len: key.len(), max: MAX_KEY_LEN });
        }
        if map::is_reserved(key) {
            return Err(ClusterError::ReservedKey);
        }
        Ok(())
    }

    pub(super) fn check_value(value: &[u8]) -> Result<(), ClusterError> {
        if value.len() > MAX_VALUE_LEN {
            return Err(ClusterError::ValueTooLarge { len: value.len(), max: MAX_VALUE_LEN });
        }
        Ok(())
    }
}
