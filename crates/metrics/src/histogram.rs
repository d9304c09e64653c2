//! A latency histogram that costs a few relaxed atomic adds per observation (no lock, no
//! allocation), read at scrape time as the encoder takes it: observations per bucket, which
//! it accumulates into Prometheus' cumulative `le` buckets.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Bucket upper bounds in seconds: 50 µs (a cached read on loopback) to 10 s (a request's
/// timeout), about three to a decade so that quantiles interpolate within a factor of ~2.5.
pub const LATENCY_BUCKETS: [f64; 17] =
    [0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// The same bounds in nanoseconds, for the hot path's comparisons.
const BOUNDS_NS: [u64; 17] = [
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
    10_000_000_000,
];

/// Observations per bucket (the last slot is +Inf) and their sum.
#[derive(Debug)]
pub struct Histogram {
    counts: [AtomicU64; BOUNDS_NS.len() + 1],
    sum_ns: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram { counts: std::array::from_fn(|_| AtomicU64::new(0)), sum_ns: AtomicU64::new(0) }
    }
}

impl Histogram {
    pub fn observe(&self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let slot = BOUNDS_NS.partition_point(|&b| b < ns);
        self.counts[slot].fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// Sum in seconds, count, and `(upper bound, observations above the previous bound and at
    /// or below this one)` per bucket, +Inf last: the count is the buckets' total, so the two
    /// always agree.
    pub fn snapshot(&self) -> (f64, u64, Vec<(f64, u64)>) {
        let mut total = 0;
        let mut buckets = Vec::with_capacity(self.counts.len());
        for (i, c) in self.counts.iter().enumerate() {
            let n = c.load(Ordering::Relaxed);
            total += n;
            buckets.push((LATENCY_BUCKETS.get(i).copied().unwrap_or(f64::INFINITY), n));
        }
        let sum = self.sum_ns.load(Ordering::Relaxed) as f64 / 1e9;
        (sum, total, buckets)
    }

    pub fn count(&self) -> u64 {
        self.counts.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn bounds_agree() {
        for (s, ns) in LATENCY_BUCKETS.iter().zip(BOUNDS_NS) {
            assert_eq!((s * 1e9).round() as u64, ns);
        }
        assert!(BOUNDS_NS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn an_observation_on_a_bound_counts_in_that_bucket() {
        let h = Histogram::default();
        h.observe(Duration::from_millis(1));
        let (_, _, buckets) = h.snapshot();
        assert_eq!(buckets[3], (0.0005, 0));
        assert_eq!(buckets[4], (0.001, 1));
        assert_eq!(buckets[5], (0.0025, 0));
    }

    proptest! {
        #[test]
        fn bucket_counts_match_the_observations(obs in proptest::collection::vec(0u64..20_000_000_000, 0..200)) {
            let h = Histogram::default();
            for &ns in &obs {
                h.observe(Duration::from_nanos(ns));
            }
            let (sum, count, buckets) = h.snapshot();
            prop_assert_eq!(count, obs.len() as u64);
            prop_assert_eq!(h.count(), count);
            prop_assert_eq!(buckets.iter().map(|b| b.1).sum::<u64>(), count);
            prop_assert!(buckets.last().is_some_and(|b| b.0.is_infinite()));
            let mut lower = -1.0;
            for (bound, n) in &buckets {
                let expected = obs.iter().filter(|&&ns| (ns as f64) > lower * 1e9 + 0.5 && (ns as f64) <= bound * 1e9 + 0.5).count() as u64;
                prop_assert_eq!(*n, expected);
                lower = *bound;
            }
            let expected_sum = obs.iter().sum::<u64>() as f64 / 1e9;
            prop_assert!((sum - expected_sum).abs() < 1e-6);
        }
    }
}
