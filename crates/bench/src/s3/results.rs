//! What a run reports: per operation type its rates, latency and time-to-first-byte
//! quantiles and errors; for the run its totals and CPU; and the part of a result file
//! that comparisons read.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::spec::S3BenchSpec;
use crate::paper::Machine;

/// Version of the result document's layout.
pub const SCHEMA_VERSION: u32 = 1;
pub(super) const MIB: f64 = (1u64 << 20) as f64;

/// Latency quantiles, milliseconds.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Quantiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
}

impl Quantiles {
    pub(super) fn of(h: &Histogram<u64>) -> Quantiles {
        if h.is_empty() {
            return Quantiles::default();
        }
        let ms = |us: u64| us as f64 / 1000.0;
        Quantiles { p50: ms(h.value_at_quantile(0.5)), p90: ms(h.value_at_quantile(0.9)), p99: ms(h.value_at_quantile(0.99)), max: ms(h.max()), mean: h.mean() / 1000.0 }
    }
}

/// One operation type's figures over the timed phase.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OpStats {
    /// "PUT", "GET", "STAT" or "DELETE".
    pub op: String,
    pub objects: u64,
    pub errors: u64,
    pub bytes: u64,
    pub seconds: f64,
    pub mib_per_second: f64,
    pub objects_per_second: f64,
    /// Median over the whole one-second windows of the run (None: shorter than one second).
    pub median_1s_mib_per_second: Option<f64>,
    pub median_1s_objects_per_second: Option<f64>,
    pub latency_ms: Quantiles,
    /// GET only: request sent to first body byte.
    pub ttfb_ms: Option<Quantiles>,
}

#[derive(Debug, Clone, Serialize)]
pub struct S3BenchResult {
    pub schema_version: u32,
    pub kind: &'static str,
    pub machine: Machine,
    pub spec: S3BenchSpec,
    /// Every key of the run starts with it.
    pub prefix: String,
    /// Start of the timed phase to the end of its last operation.
    pub seconds: f64,
    pub operations: Vec<OpStats>,
    /// All operations: payload MiB moved per second, objects per second, errors.
    pub mib_per_second: f64,
    pub objects_per_second: f64,
    pub errors: u64,
    /// The untimed upload of the prepared set (GET and mixed).
    pub prepare: Option<OpStats>,
    /// CPU seconds the server's processes spent in the timed phase, and per MiB moved.
    pub server_cpu_seconds: Option<f64>,
    pub server_cpu_seconds_per_mib: Option<f64>,
    /// `server_cpu_seconds` by process, in the order of the PIDs given.
    #[serde(default)]
    pub server_cpu_seconds_each: Vec<f64>,
    /// Why server CPU is missing although PIDs were given.
    pub server_cpu_note: Option<String>,
    /// This process' CPU over the timed phase (the load generator's cost).
    pub bench_cpu_seconds: f64,
    pub error_samples: Vec<String>,
    pub cleanup_deleted: u64,
    pub cleanup_errors: u64,
}

/// The parts of a result file that comparisons read.
#[derive(Debug, Clone, Deserialize)]
pub struct S3ResultView {
    pub kind: String,
    pub schema_version: u32,
    pub spec: S3BenchSpec,
    pub operations: Vec<OpStats>,
    pub server_cpu_seconds_per_mib: Option<f64>,
    pub errors: u64,
}
