//! Spindle's S3 gateway: the S3 API (through the `s3s` crate) over a Spindle cluster or one
//! Kinetic drive. Objects are split into chunks no larger than the store's value limit,
//! written under a fresh data id, and made visible by a manifest written last
//! (docs/design/s3-gateway.md).

#![forbid(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod access;
pub mod acl;
pub mod cors;
pub mod admission;
mod auth;
mod chunker;
pub mod classes;
mod embedded;
mod intents;
mod gateway;
mod kv;
mod layout;
pub mod lifecycle;
pub mod lifecycle_pass;
mod listing;
mod md5_lanes;
mod objects;
mod orphans;
mod raced;
mod records;
mod references;
mod removal;
pub mod remote;
mod request_log;
mod server;
mod stall;
mod stripes;
mod swap;
mod sweeper;
mod tls;
pub mod users;
mod versions;

use std::time::Duration;

pub use admission::Limits;
pub use auth::{Auth, Keys};
pub use embedded::{Census, Embedded};
pub use kv::{Drive, Kv};
pub use md5_lanes::{Md5Lanes, Md5Stream};
pub use orphans::{Scanned, SCAN_WINDOW};
pub use server::{serve, Config};
pub use tls::CertFiles;

#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error("{0}")]
    Store(#[from] kv::KvError),
    #[error("{0}")]
    S3(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Invalid(String),
    /// A record in the store that does not decode.
    #[error("{0}")]
    Record(#[from] records::RecordError),
}

/// Defaults of the sweeper (`Config`).
pub const SWEEP_GRACE: Duration = Duration::from_secs(600);
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(60);
/// How often the sweeper scans for orphaned data (`orphans`): a walk of every data id, so
/// rarely.
pub const ORPHAN_SCAN_INTERVAL: Duration = Duration::from_secs(86_400);

/// Feeds arbitrary bytes to every decoder of stored records and keys: the fuzz target's and
/// the corpus replay's entry point. Never panics.
#[doc(hidden)]
pub fn decode_untrusted(bytes: &[u8]) {
    let _ = records::decode_manifest(bytes);
    let _ = records::decode::<records::Intent>("intent", bytes);
    let _ = records::decode::<records::UploadRecord>("upload", bytes);
    let _ = records::decode::<records::PartRecord>("part", bytes);
    let _ = records::decode::<records::BucketRecord>("bucket", bytes);
    let _ = records::decode::<users::UserRecord>("user", bytes);
    if let Ok(s) = std::str::from_utf8(bytes) {
        let _ = access::policy::Policy::parse(s, "bucket");
    }
    let _ = layout::bucket_name(bytes);
    let _ = layout::part_number(bytes);
    let _ = layout::intent_data(bytes);
    let _ = layout::upload_of(&layout::upload_prefix("bucket"), bytes);
    if let Ok(s) = std::str::from_utf8(bytes) {
        let _ = layout::parse_upload_id(s);
    }
}
