//! Many Kinetic drives as one store. `placement` decides which drives hold each partition,
//! `map` is the cluster map kept in etcd, `control` the etcd layout, `tag` the versions that
//! order replicas' writes, `replica` one replica's reads and stores, `store` the cluster client
//! (per-key linearizable reads and writes at quorums), `batch` (writes of several keys of
//! one partition that readers see all or none of), `repair` anti-entropy for a partition, `record` the hints a batch's writer leaves that it was chosen,
//! `coordinator` the elected process that watches drives and owns the map (`metrics` what it
//! reports to Prometheus), `migrate` its moves of partitions between drives, `sweep` its
//! removal of data drives no longer hold, `history` the checker of what clients saw, `together`
//! the few requests of one quorum polled in the task that waits for them.

#![forbid(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod abandoned;
pub mod batch;
pub mod ca;
pub mod clock;
mod condition;
pub mod control;
pub mod coordinator;
pub mod erasure;
pub mod provision;
pub mod credentials;
pub mod etcd_auth;
mod fence;
mod error;
pub mod history;
pub mod map;
pub mod metrics;
pub mod migrate;
pub mod placement;
pub mod plane;
pub mod pool;
pub mod rebuild;
pub mod record;
pub mod remote;
pub mod repair;
pub mod stamp;
pub mod replica;
mod secret_file;
pub use secret_file::write_new_secret_file;
pub mod store;
pub mod sweep;
mod sweeper;
pub mod tag;
pub mod together;

pub use control::Control;
pub use credentials::Credentials;
pub use error::{BatchError, ClusterError, CredentialsError, ProvisionError, SettingError, StripeError};
pub use map::{ClusterMap, Member};
pub use batch::BatchOp;
pub use store::{Condition, Stalls, Store, StoreConfig, Versioned};

/// Decodes `bytes` as everything a replica's entry may hold (a version as a stamp, a value as a
/// batch entry), checking that what decodes encodes back the same: the fuzz target's and the
/// corpus replay's entry point. Never panics on any input.
pub fn decode_untrusted(bytes: &[u8]) {
    if let Some(s) = stamp::Stamp::decode(bytes) {
        assert_eq!(stamp::Stamp::decode(&s.encode()), Some(s), "a decoded stamp encodes back to the same");
    }
    if let Some(t) = tag::Tag::decode(bytes) {
        assert_eq!(&t.encode()[..], bytes, "a decoded tag encodes back to the same bytes");
    }
    let _ = batch::decode_entry(&bytes::Bytes::copy_from_slice(bytes));
    // A batch record's version: never also a stamp.
    if record::made_at(bytes).is_some() {
        assert_eq!(stamp::Stamp::decode(bytes), None, "a record's version read as a stamp");
    }
}
