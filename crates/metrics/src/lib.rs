//! Prometheus metrics for Spindle's processes (drives and cluster coordinators).
//!
//! Hot paths count into lock-free instruments ([`Histogram`], plain atomics); each process
//! describes what it exposes as a `prometheus_client` [`Collector`] that reads those at scrape
//! time, through the helpers in [`emit`]; [`serve`] answers `GET /metrics` over HTTP/1.1 in
//! Prometheus' text format. Nothing here knows what a drive or a cluster is.

#![forbid(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod emit;
mod endpoint;
mod histogram;

pub use endpoint::{render, serve, Endpoint};
pub use histogram::{Histogram, LATENCY_BUCKETS};
pub use prometheus_client::collector::Collector;
pub use prometheus_client::encoding::DescriptorEncoder;
pub use prometheus_client::registry::Registry;
