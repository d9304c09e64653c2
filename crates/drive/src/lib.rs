//! The Spindle drive: a Kinetic server over the storage engine.
//!
//! `server` opens the engine and listens; `connection` runs one client (sign-on, framing,
//! authentication, ordering, back-pressure) and hands each request to its command in `cmd/`;
//! `reply` builds every answer; `state` is what all connections share.

#![deny(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod batch;
mod capacity;
mod cmd;
pub mod config;
mod connection;
mod exporter;
pub mod memory;
mod metrics;
mod outbox;
pub mod persist;
mod pin_backoff;
mod priority;
mod reply;
mod scope_view;
mod security;
mod server;
mod state;
mod stats;
mod sysinfo;
mod tls;
#[doc(hidden)]
pub mod fuzzing;

pub use config::{ConfigError, DriveConfig, EngineKind};
pub use connection::{serve, Transport};
pub use connection::MAX_DISCARDED_VALUE;
pub use cmd::get_log::{DEVICE_LOG_ACL, DEVICE_LOG_ENGINE, NO_TEMPERATURE_SENSOR};
pub use server::{embedded, start, RunningDrive};
pub use state::DriveState;

#[derive(Debug, thiserror::Error)]
pub enum DriveError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("storage engine: {0}")]
    Engine(#[from] spindle_engine::Error),
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    #[error(transparent)]
    Settings(#[from] persist::SettingsError),
}
