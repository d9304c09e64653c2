//! What a run is asked to do: the operation (PUT, GET or the mix of GET, STAT, PUT and
//! DELETE), the object size, workers, duration, the prepared set, and its checks.

use serde::{Deserialize, Serialize};

use super::client::{self, S3Endpoint, S3Error};

/// The prepared set for GET and mixed, when not given: about this many bytes...
const PREPARED_BYTES_DEFAULT: u64 = 1 << 30;
/// ...and at most this many objects (warp's default `--objects`).
const PREPARED_OBJECTS_MAX: u64 = 2500;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum S3Op {
    Put,
    Get,
    Mixed,
}

impl S3Op {
    pub fn name(self) -> &'static str {
        match self {
            S3Op::Put => "put",
            S3Op::Get => "get",
            S3Op::Mixed => "mixed",
        }
    }
}

/// Shares of the mixed workload's operations (warp's defaults: 45, 30, 15, 10).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Mix {
    pub get: u32,
    pub stat: u32,
    pub put: u32,
    pub delete: u32,
}

impl Mix {
    pub const WARP: Mix = Mix { get: 45, stat: 30, put: 15, delete: 10 };

    /// The operation a draw in 0..total picks.
    pub(super) fn pick(&self, draw: u32) -> Kind {
        if draw < self.get {
            Kind::Get
        } else if draw < self.get + self.stat {
            Kind::Stat
        } else if draw < self.get + self.stat + self.put {
            Kind::Put
        } else {
            Kind::Delete
        }
    }

    pub(super) fn total(&self) -> u32 {
        self.get + self.stat + self.put + self.delete
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct S3BenchSpec {
    pub target: S3Endpoint,
    /// The server's name in reports ("minio", "spindle").
    pub label: String,
    pub op: S3Op,
    pub object_bytes: u64,
    pub concurrency: usize,
    pub duration_seconds: f64,
    /// Objects at or above this go up as multipart uploads in parts of this size (0: never).
    pub multipart_bytes: u64,
    /// Size of the prepared set for GET and mixed (0: about 1 GiB, at least two per worker,
    /// at most 2500).
    pub objects: u64,
    pub mix: Mix,
    /// Processes whose CPU time is the server's (a gateway and its drive, say).
    pub server_pids: Vec<u32>,
    pub seed: u64,
    /// Delete what the run wrote, afterwards.
    pub cleanup: bool,
    /// The run's key prefix (none: a fresh one): a GET run given the prefix of an earlier one
    /// kept with `cleanup` off, and `prepared`, reads that run's objects again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// The prepared set is in place under `prefix` already (uploaded by an earlier run): a
    /// GET run reads it without uploading (to measure reads with servers degraded since).
    #[serde(default)]
    pub prepared: bool,
}

impl S3BenchSpec {
    /// Objects in the prepared set.
    pub fn prepared_objects(&self) -> u64 {
        if self.objects > 0 {
            return self.objects;
        }
        let by_bytes = PREPARED_BYTES_DEFAULT / self.object_bytes.max(1);
        by_bytes.clamp(2 * self.concurrency as u64, PREPARED_OBJECTS_MAX.max(2 * self.concurrency as u64)).max(1)
    }

    pub(super) fn validate(&self) -> Result<(), S3BenchError> {
        let bad = |m: &str| Err(S3BenchError::Invalid(m.to_string()));
        if self.concurrency == 0 {
            return bad("concurrency must be at least 1");
        }
        if !(self.duration_seconds.is_finite() && self.duration_seconds > 0.0) {
            return bad("duration must be positive");
        }
        if self.object_bytes > isize::MAX as u64 / 2 {
            return bad("object size too large");
        }
        if client::uses_multipart(self.object_bytes, self.multipart_bytes) {
            client::part_ranges(self.object_bytes, self.multipart_bytes).map_err(S3BenchError::Invalid)?;
        }
        if self.op == S3Op::Mixed && (self.mix.total() == 0 || self.mix.put < self.mix.delete) {
            return bad("the mix needs some operations, and at least as many puts as deletes (else the pool runs dry)");
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum S3BenchError {
    #[error(transparent)]
    S3(#[from] S3Error),
    #[error("invalid S3 benchmark: {0}")]
    Invalid(String),
    #[error("preparing the objects to read: {failed} of {total} uploads failed; first: {first}")]
    Prepare { failed: u64, total: u64, first: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Put,
    Get,
    Stat,
    Delete,
}

impl Kind {
    pub(super) const ALL: [Kind; 4] = [Kind::Put, Kind::Get, Kind::Stat, Kind::Delete];

    pub(super) fn name(self) -> &'static str {
        match self {
            Kind::Put => "PUT",
            Kind::Get => "GET",
            Kind::Stat => "STAT",
            Kind::Delete => "DELETE",
        }
    }
}

/// `10s`, `500ms`, `2m`, `1.5` (seconds), `1h`.
pub fn parse_duration(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let n: f64 = number.parse().map_err(|_| format!("{s:?}: not a duration"))?;
    let scale = match unit.trim() {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        other => return Err(format!("{s:?}: unknown unit {other:?} (use ms, s, m or h)")),
    };
    let seconds = n * scale;
    if !(seconds.is_finite() && seconds > 0.0) {
        return Err(format!("{s:?}: must be more than zero"));
    }
    Ok(seconds)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("10s").unwrap(), 10.0);
        assert_eq!(parse_duration("10").unwrap(), 10.0);
        assert_eq!(parse_duration("500ms").unwrap(), 0.5);
        assert_eq!(parse_duration("2m").unwrap(), 120.0);
        assert_eq!(parse_duration(" 1.5s ").unwrap(), 1.5);
        assert_eq!(parse_duration("1h").unwrap(), 3600.0);
        for bad in ["", "s", "0s", "-1s", "10x", "1.2.3s"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn durations_round_trip(ms in 1u64..10_000_000) {
            let text = format!("{ms}ms");
            let seconds = parse_duration(&text).unwrap();
            prop_assert!((seconds - ms as f64 / 1000.0).abs() < 1e-9);
        }
    }

    #[test]
    fn the_mix_follows_its_shares() {
        let m = Mix::WARP;
        let mut counts = [0u32; 4];
        for d in 0..m.total() {
            counts[m.pick(d) as usize] += 1;
        }
        assert_eq!(counts, [15, 45, 30, 10], "PUT, GET, STAT, DELETE");
    }
}
