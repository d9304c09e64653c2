//! ACT's latency histograms: power-of-two millisecond buckets (bucket 0 holds latencies under
//! 1 ms, bucket b >= 1 holds 2^(b-1) ms <= latency < 2^b ms, on the latency cut to whole
//! milliseconds), counted cumulatively while the test runs and differenced into time slices,
//! each reported as the percentage of operations over 1, 2, 4, ... 64 ms (act_latency.py).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;

/// 65 buckets cover every u64 millisecond count.
pub const BUCKETS: usize = 65;
/// The thresholds reported: 2^0 .. 2^6 ms.
pub const THRESHOLDS_MS: [u64; 7] = [1, 2, 4, 8, 16, 32, 64];

/// The bucket of a latency: 0 under 1 ms, else the position of the highest set bit of the
/// whole milliseconds, plus one.
pub fn bucket_of(latency: Duration) -> usize {
    let ms = latency.as_millis().min(u64::MAX as u128) as u64;
    (u64::BITS - ms.leading_zeros()) as usize
}

/// Counts per bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Buckets(pub [u64; BUCKETS]);

impl Default for Buckets {
    fn default() -> Self {
        Buckets([0; BUCKETS])
    }
}

impl Buckets {
    pub fn record(&mut self, latency: Duration) {
        self.0[bucket_of(latency)] += 1;
    }

    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    /// What was counted since `earlier` (a previous snapshot of the same cumulative counts).
    pub fn since(&self, earlier: &Buckets) -> Buckets {
        let mut out = Buckets::default();
        for (i, o) in out.0.iter_mut().enumerate() {
            *o = self.0[i].saturating_sub(earlier.0[i]);
        }
        out
    }

    /// Operations whose whole-millisecond latency is at least `threshold_ms` (a power of two):
    /// the buckets above the threshold's index, as act_latency.py counts them. So 999 us is not
    /// over 1 ms, and 1000 us is.
    pub fn over(&self, threshold_ms: u64) -> u64 {
        debug_assert!(threshold_ms.is_power_of_two());
        let first = threshold_ms.trailing_zeros() as usize + 1;
        self.0[first.min(BUCKETS)..].iter().sum()
    }

    /// Percent of operations over each of [`THRESHOLDS_MS`] (0 when nothing was counted).
    pub fn percent_over(&self) -> [f64; THRESHOLDS_MS.len()] {
        let total = self.total();
        THRESHOLDS_MS.map(|t| if total == 0 { 0.0 } else { 100.0 * self.over(t) as f64 / total as f64 })
    }
}

/// Cumulative counts shared by the threads recording into them.
#[derive(Debug)]
pub struct AtomicBuckets {
    counts: [AtomicU64; BUCKETS],
    errors: AtomicU64,
}

impl Default for AtomicBuckets {
    fn default() -> Self {
        AtomicBuckets { counts: std::array::from_fn(|_| AtomicU64::new(0)), errors: AtomicU64::new(0) }
    }
}

impl AtomicBuckets {
    pub fn record(&self, latency: Duration) {
        self.counts[bucket_of(latency)].fetch_add(1, Ordering::Relaxed);
    }

    /// A failed operation: counted with its latency, and as an error.
    pub fn record_error(&self, latency: Duration) {
        self.record(latency);
        self.errors.fetch_add(1, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> (Buckets, u64) {
        (Buckets(std::array::from_fn(|i| self.counts[i].load(Ordering::Relaxed))), self.errors.load(Ordering::Relaxed))
    }
}

/// One histogram's figures for one slice (or a whole run).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SliceStats {
    pub ops: u64,
    pub errors: u64,
    /// Percent over 1, 2, 4, 8, 16, 32, 64 ms.
    pub percent_over: [f64; THRESHOLDS_MS.len()],
    /// The non-empty buckets as (bucket, count), as ACT dumps them.
    pub buckets: Vec<(usize, u64)>,
}

impl SliceStats {
    pub fn of(b: &Buckets, errors: u64) -> SliceStats {
        SliceStats {
            ops: b.total(),
            errors,
            percent_over: b.percent_over(),
            buckets: b.0.iter().enumerate().filter(|(_, c)| **c > 0).map(|(i, c)| (i, *c)).collect(),
        }
    }

    /// The percent over `threshold_ms`, one of [`THRESHOLDS_MS`].
    pub fn over(&self, threshold_ms: u64) -> Option<f64> {
        THRESHOLDS_MS.iter().position(|t| *t == threshold_ms).map(|i| self.percent_over[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(x: f64) -> Duration {
        Duration::from_micros((x * 1000.0).round() as u64)
    }

    #[test]
    fn buckets_are_powers_of_two_of_whole_milliseconds() {
        assert_eq!(bucket_of(ms(0.0)), 0);
        assert_eq!(bucket_of(ms(0.999)), 0);
        assert_eq!(bucket_of(ms(1.0)), 1);
        assert_eq!(bucket_of(ms(1.999)), 1);
        assert_eq!(bucket_of(ms(2.0)), 2);
        assert_eq!(bucket_of(ms(3.9)), 2);
        assert_eq!(bucket_of(ms(4.0)), 3);
        assert_eq!(bucket_of(ms(64.0)), 7);
        assert_eq!(bucket_of(ms(127.9)), 7);
        assert_eq!(bucket_of(Duration::MAX), 64);
    }

    #[test]
    fn over_counts_latencies_at_or_above_the_threshold_in_whole_milliseconds() {
        let mut b = Buckets::default();
        // Exactly at each threshold, and just under it.
        for t in THRESHOLDS_MS {
            b.record(ms(t as f64));
            b.record(ms(t as f64 - 0.001));
        }
        // 1 ms: 13 of the 14 are at least 1 ms (only 0.999 ms is under).
        assert_eq!(b.over(1), 13);
        // 8 ms: 8, 15.999, 16, 31.999, 32, 63.999, 64 (7.999 ms is 7 whole milliseconds).
        assert_eq!(b.over(8), 7);
        assert_eq!(b.over(64), 1);
        let p = b.percent_over();
        assert!((p[0] - 100.0 * 13.0 / 14.0).abs() < 1e-9 && (p[6] - 100.0 / 14.0).abs() < 1e-9, "{p:?}");
    }

    #[test]
    fn slices_are_differences_of_cumulative_snapshots() {
        let shared = AtomicBuckets::default();
        for _ in 0..90 {
            shared.record(ms(0.2));
        }
        shared.record_error(ms(9.0));
        let (first, e1) = shared.snapshot();
        for _ in 0..5 {
            shared.record(ms(70.0));
        }
        let (second, e2) = shared.snapshot();
        let slice = second.since(&first);
        assert_eq!((first.total(), e1), (91, 1));
        assert_eq!((slice.total(), e2 - e1), (5, 0));
        assert_eq!(slice.percent_over(), [100.0; 7]);
        let stats = SliceStats::of(&first, e1);
        assert_eq!(stats.buckets, vec![(0, 90), (4, 1)]);
        assert_eq!(stats.over(8), Some(100.0 / 91.0));
        assert_eq!(stats.over(3), None);
    }

    #[test]
    fn an_empty_slice_reports_zero_percent() {
        assert_eq!(Buckets::default().percent_over(), [0.0; 7]);
    }
}
