//! What the drive counts for Prometheus on the request path: every answer by request type and
//! status with its latency (frame read to answer handed to the socket). `exporter` reads these
//! and the drive's and engine's figures at scrape time.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use spindle_metrics::Histogram;
use spindle_proto::{MessageType, StatusCode};

/// Message types are small numbers (responses odd, requests even): one slot per number.
pub const TYPE_SLOTS: usize = 64;
/// Status codes run from -1 (INVALID_STATUS_CODE) up; one slot per code, shifted by one.
const STATUS_SLOTS: usize = 32;

/// Answers by type and status, and their latency by type: atomics only, one add or three per
/// answer, so that counting costs the hot path next to nothing.
pub struct RequestMetrics {
    answers: Box<[[AtomicU64; STATUS_SLOTS]; TYPE_SLOTS]>,
    pub(crate) latency: Box<[Histogram; TYPE_SLOTS]>,
}

impl Default for RequestMetrics {
    fn default() -> Self {
        RequestMetrics {
            answers: Box::new(std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0)))),
            latency: Box::new(std::array::from_fn(|_| Histogram::default())),
        }
    }
}

impl RequestMetrics {
    /// One answer of `response_type` with `status`, `elapsed` after its request's frame was read.
    pub fn record(&self, response_type: i32, status: i32, elapsed: Duration) {
        let (Ok(t), Ok(s)) = (usize::try_from(response_type), usize::try_from(status.saturating_add(1))) else { return };
        if t < TYPE_SLOTS && s < STATUS_SLOTS {
            self.answers[t][s].fetch_add(1, Ordering::Relaxed);
            self.latency[t].observe(elapsed);
        }
    }

    /// (request type, status, count) for every pair seen.
    pub fn answers(&self) -> Vec<(&'static str, &'static str, u64)> {
        let mut out = Vec::new();
        for (t, row) in self.answers.iter().enumerate() {
            for (s, n) in row.iter().enumerate() {
                let n = n.load(Ordering::Relaxed);
                if n > 0 {
                    out.push((request_name(t), status_name(s as i32 - 1), n));
                }
            }
        }
        out
    }
}

/// The request's name for a response type (each response's number is its request's less one).
pub fn request_name(response_type: usize) -> &'static str {
    i32::try_from(response_type + 1).ok().and_then(|t| MessageType::try_from(t).ok()).map_or("OTHER", |t| t.as_str_name())
}

fn status_name(code: i32) -> &'static str {
    StatusCode::try_from(code).map_or("OTHER", |c| c.as_str_name())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_counted_under_their_request_and_status() {
        let m = RequestMetrics::default();
        m.record(MessageType::PutResponse as i32, StatusCode::Success as i32, Duration::from_micros(80));
        m.record(MessageType::PutResponse as i32, StatusCode::Success as i32, Duration::from_micros(90));
        m.record(MessageType::GetResponse as i32, StatusCode::NotFound as i32, Duration::from_micros(10));
        m.record(MessageType::GetResponse as i32, StatusCode::InvalidStatusCode as i32, Duration::from_micros(10));
        // Out of range: ignored, never a panic.
        m.record(-3, 1, Duration::ZERO);
        m.record(1000, 1, Duration::ZERO);
        m.record(1, 1000, Duration::ZERO);
        m.record(1, i32::MAX, Duration::ZERO);
        let mut a = m.answers();
        a.sort();
        assert_eq!(a, vec![("GET", "INVALID_STATUS_CODE", 1), ("GET", "NOT_FOUND", 1), ("PUT", "SUCCESS", 2)]);
        assert_eq!(m.latency[MessageType::PutResponse as usize].count(), 2);
    }
}
