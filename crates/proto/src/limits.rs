//! The drive's published limits. Defaults are those of the real Kinetic drive; a drive may
//! override them from its configuration, and reports them through GETLOG LIMITS and the sign-on.

/// Largest key, in bytes.
pub const MAX_KEY_SIZE: u32 = 4096;
/// Largest value, in bytes (1 MiB).
pub const MAX_VALUE_SIZE: u32 = 1024 * 1024;
/// Largest version (dbVersion / newVersion), in bytes.
pub const MAX_VERSION_SIZE: u32 = 2048;
/// Largest tag, in bytes.
pub const MAX_TAG_SIZE: u32 = 128;
/// Most keys one GETKEYRANGE returns.
pub const MAX_KEY_RANGE_COUNT: u32 = 200;
/// Largest serialized `Message` (the protobuf part of a frame), in bytes. The protocol gives
/// 1 MiB for each part of a PDU; the message part of any legitimate request is far smaller.
pub const MAX_MESSAGE_SIZE: u32 = 1024 * 1024;
/// Concurrent client connections.
pub const MAX_CONNECTIONS: u32 = 1024;
/// Requests read from one connection but not yet answered, reads and writes separately.
pub const MAX_OUTSTANDING_READ_REQUESTS: u32 = 256;
pub const MAX_OUTSTANDING_WRITE_REQUESTS: u32 = 256;
/// Identities in the ACL.
pub const MAX_IDENTITY_COUNT: u32 = 64;
/// Lock and erase PINs, in bytes.
pub const MAX_PIN_SIZE: u32 = 32;
/// Batch limits (enforced by the batch implementation).
pub const MAX_OPERATION_COUNT_PER_BATCH: u32 = 15;
pub const MAX_BATCH_COUNT_PER_DEVICE: u32 = 5;
pub const MAX_BATCH_SIZE: u32 = 16 * 1024 * 1024;
pub const MAX_DELETES_PER_BATCH: u32 = 15;

/// The limits one drive enforces. With the `serde` feature they are read from a table keyed by
/// these field names (the drive's `[limits]`); a field the table leaves out keeps its default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize, serde::Serialize), serde(default, deny_unknown_fields))]
pub struct Limits {
    pub max_key_size: u32,
    pub max_value_size: u32,
    pub max_version_size: u32,
    pub max_tag_size: u32,
    pub max_connections: u32,
    pub max_outstanding_read_requests: u32,
    pub max_outstanding_write_requests: u32,
    pub max_message_size: u32,
    pub max_key_range_count: u32,
    pub max_identity_count: u32,
    /// Always `MAX_PIN_SIZE`: a settings table naming it is refused, as the drive's
    /// configuration file has never offered it.
    #[cfg_attr(feature = "serde", serde(skip))]
    pub max_pin_size: u32,
    pub max_operation_count_per_batch: u32,
    pub max_batch_count_per_device: u32,
    pub max_batch_size: u32,
    pub max_deletes_per_batch: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_key_size: MAX_KEY_SIZE,
            max_value_size: MAX_VALUE_SIZE,
            max_version_size: MAX_VERSION_SIZE,
            max_tag_size: MAX_TAG_SIZE,
            max_connections: MAX_CONNECTIONS,
            max_outstanding_read_requests: MAX_OUTSTANDING_READ_REQUESTS,
            max_outstanding_write_requests: MAX_OUTSTANDING_WRITE_REQUESTS,
            max_message_size: MAX_MESSAGE_SIZE,
            max_key_range_count: MAX_KEY_RANGE_COUNT,
            max_identity_count: MAX_IDENTITY_COUNT,
            max_pin_size: MAX_PIN_SIZE,
            max_operation_count_per_batch: MAX_OPERATION_COUNT_PER_BATCH,
            max_batch_count_per_device: MAX_BATCH_COUNT_PER_DEVICE,
            max_batch_size: MAX_BATCH_SIZE,
            max_deletes_per_batch: MAX_DELETES_PER_BATCH,
        }
    }
}

impl Limits {
    /// The limits as the GETLOG LIMITS message carries them.
    pub fn to_proto(&self) -> crate::pb::command::get_log::Limits {
        crate::pb::command::get_log::Limits {
            max_key_size: Some(self.max_key_size),
            max_value_size: Some(self.max_value_size),
            max_version_size: Some(self.max_version_size),
            max_tag_size: Some(self.max_tag_size),
            max_connections: Some(self.max_connections),
            max_outstanding_read_requests: Some(self.max_outstanding_read_requests),
            max_outstanding_write_requests: Some(self.max_outstanding_write_requests),
            max_message_size: Some(self.max_message_size),
            max_key_range_count: Some(self.max_key_range_count),
            max_identity_count: Some(self.max_identity_count),
            max_pin_size: Some(self.max_pin_size),
            max_operation_count_per_batch: Some(self.max_operation_count_per_batch),
            max_batch_count_per_device: Some(self.max_batch_count_per_device),
            max_batch_size: Some(self.max_batch_size),
            max_deletes_per_batch: Some(self.max_deletes_per_batch),
        }
    }
}
