//! An async Kinetic client: handshake, pipelining (any number of requests in flight on one
//! connection, answers matched by ackSequence), every key-value command, typed errors.
//!
//! ```no_run
//! # async fn demo() -> Result<(), spindle_client::ClientError> {
//! use spindle_client::{Client, ClientConfig, PutOptions};
//! let client = Client::connect("127.0.0.1:8123", ClientConfig::default()).await?;
//! client.put(b"hello", b"world".to_vec(), PutOptions::default()).await?;
//! let entry = client.get(b"hello").await?.expect("just stored");
//! assert_eq!(&entry.value[..], b"world");
//! # Ok(()) }
//! ```

#![forbid(unsafe_code)]
// No `unwrap`/`expect` outside tests: a failure that can happen is a typed error, and an
// invariant that cannot fail says why at an `#[allow]`. Tests, benches and doctests may unwrap.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod admin;
mod batch;
mod client;
mod connect;
mod error;
mod p2p;
mod pipeline;
mod types;

pub use admin::{AclEntry, AclScope};
pub use batch::Batch;
pub use spindle_proto::pb::command::pin_operation::PinOpType;
pub use spindle_proto::pb::command::security::Acl;
pub use spindle_proto::pb::command::PowerLevel;
pub use client::{Client, Response};
pub use connect::{ClientConfig, Dial, Dialer, Duplex};
pub use error::ClientError;
pub use p2p::{Peer, PushOp, PushOutcome, PushResult};
pub use pipeline::Pipeline;
pub use spindle_proto::pb::command::get_log::Type as LogType;
pub use spindle_proto::pb::command::{Algorithm, GetLog};
pub use spindle_proto::{MessageType, StatusCode, Synchronization};
pub use types::{DeleteOptions, Entry, Metadata, PutOptions, RangeQuery};

/// Every GETLOG type except DEVICE (which needs a name): what "the whole log" means.
pub const ALL_LOG_TYPES: [LogType; 7] = [
    LogType::Utilizations,
    LogType::Temperatures,
    LogType::Capacities,
    LogType::Configuration,
    LogType::Statistics,
    LogType::Messages,
    LogType::Limits,
];
