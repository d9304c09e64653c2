//! ACT's standard pass/fail criteria: in every slice, fewer than 5% of transactions over 1 ms,
//! fewer than 1% over 8 ms and fewer than 0.1% over 64 ms. A run also fails when it stopped
//! early (it could not keep the load: max-lag) or an operation failed.

use serde::Serialize;

use super::histogram::SliceStats;

/// A limit: the percent of operations over `threshold_ms` must stay below `max_percent`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Criterion {
    pub threshold_ms: u64,
    pub max_percent: f64,
}

pub const CRITERIA: [Criterion; 3] = [
    Criterion { threshold_ms: 1, max_percent: 5.0 },
    Criterion { threshold_ms: 8, max_percent: 1.0 },
    Criterion { threshold_ms: 64, max_percent: 0.1 },
];

/// One histogram of one slice, as the judge sees it.
#[derive(Debug, Clone)]
pub struct Judged<'a> {
    pub slice: usize,
    pub histogram: &'a str,
    pub stats: &'a SliceStats,
}

/// Why a run did not pass.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Failure {
    OverLimit { slice: usize, histogram: String, threshold_ms: u64, percent: f64, max_percent: f64 },
    /// A slice in which a histogram that should have seen operations saw none.
    NoOperations { slice: usize, histogram: String },
    Errors { histogram: String, errors: u64 },
    Stopped { reason: String },
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::OverLimit { slice, histogram, threshold_ms, percent, max_percent } => {
                write!(f, "slice {slice}: {percent:.2}% of {histogram} over {threshold_ms} ms (must be under {max_percent}%)")
            }
            Failure::NoOperations { slice, histogram } => write!(f, "slice {slice}: no {histogram} completed"),
            Failure::Errors { histogram, errors } => write!(f, "{errors} {histogram} failed"),
            Failure::Stopped { reason } => write!(f, "stopped early: {reason}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    pub passed: bool,
    pub failures: Vec<Failure>,
}

/// Applies [`CRITERIA`] to every judged histogram of every slice. "Fewer than" is strict: a
/// slice at exactly 5.00% over 1 ms fails.
pub fn judge<'a>(slices: impl IntoIterator<Item = Judged<'a>>, stopped: Option<&str>) -> Verdict {
    let mut failures = Vec::new();
    let mut errors: Vec<(String, u64)> = Vec::new();
    for j in slices {
        if j.stats.ops == 0 {
            failures.push(Failure::NoOperations { slice: j.slice, histogram: j.histogram.to_string() });
            continue;
        }
        for c in CRITERIA {
            let percent = j.stats.over(c.threshold_ms).unwrap_or(0.0);
            if percent >= c.max_percent {
                failures.push(Failure::OverLimit { slice: j.slice, histogram: j.histogram.to_string(), threshold_ms: c.threshold_ms, percent, max_percent: c.max_percent });
            }
        }
        if j.stats.errors > 0 {
            match errors.iter_mut().find(|(h, _)| h == j.histogram) {
                Some((_, n)) => *n += j.stats.errors,
                None => errors.push((j.histogram.to_string(), j.stats.errors)),
            }
        }
    }
    failures.extend(errors.into_iter().map(|(histogram, errors)| Failure::Errors { histogram, errors }));
    if let Some(reason) = stopped {
        failures.push(Failure::Stopped { reason: reason.to_string() });
    }
    Verdict { passed: failures.is_empty(), failures }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::act::histogram::Buckets;
    use std::time::Duration;

    /// A slice of `n` operations of which `over1`, `over8`, `over64` took 1, 8 and 64 ms (the
    /// rest 100 us).
    fn slice(n: u64, over1: u64, over8: u64, over64: u64) -> SliceStats {
        let mut b = Buckets::default();
        let mut put = |count: u64, us: u64| (0..count).for_each(|_| b.record(Duration::from_micros(us)));
        put(over1, 1000);
        put(over8, 8000);
        put(over64, 64_000);
        put(n - over1 - over8 - over64, 100);
        SliceStats::of(&b, 0)
    }

    fn verdict(stats: &[SliceStats]) -> Verdict {
        judge(stats.iter().enumerate().map(|(i, s)| Judged { slice: i + 1, histogram: "reads", stats: s }), None)
    }

    #[test]
    fn just_under_every_limit_passes() {
        // 10,000 ops: 4.99% at or over 1 ms, 0.99% over 8 ms, 0.09% over 64 ms.
        let v = verdict(&[slice(10_000, 400, 90, 9)]);
        assert!(v.passed, "{v:?}");
    }

    #[test]
    fn exactly_at_a_limit_fails_because_the_criteria_say_fewer_than() {
        // Exactly 5% over 1 ms (500 of 10,000).
        let v = verdict(&[slice(10_000, 500, 0, 0)]);
        assert!(!v.passed);
        assert_eq!(v.failures, vec![Failure::OverLimit { slice: 1, histogram: "reads".into(), threshold_ms: 1, percent: 5.0, max_percent: 5.0 }]);
        // Exactly 1% over 8 ms (also 1% over 1 ms, which is fine).
        let v = verdict(&[slice(10_000, 0, 100, 0)]);
        assert_eq!(v.failures.len(), 1, "{v:?}");
        assert!(matches!(v.failures[0], Failure::OverLimit { threshold_ms: 8, .. }));
        // Exactly 0.1% over 64 ms.
        let v = verdict(&[slice(10_000, 0, 0, 10)]);
        assert!(matches!(v.failures[..], [Failure::OverLimit { threshold_ms: 64, .. }]), "{v:?}");
    }

    #[test]
    fn one_bad_slice_fails_the_run_however_good_the_others_are() {
        let good = slice(10_000, 10, 0, 0);
        let bad = slice(100, 6, 0, 0);
        let v = verdict(&[good.clone(), good.clone(), bad, good]);
        assert!(matches!(v.failures[..], [Failure::OverLimit { slice: 3, threshold_ms: 1, .. }]), "{v:?}");
    }

    #[test]
    fn empty_slices_errors_and_early_stops_fail() {
        let empty = SliceStats::of(&Buckets::default(), 0);
        assert!(matches!(verdict(&[empty])
            .failures[..], [Failure::NoOperations { slice: 1, .. }]));
        let mut errs = slice(1000, 0, 0, 0);
        errs.errors = 3;
        assert!(matches!(verdict(&[errs.clone(), errs]).failures[..], [Failure::Errors { errors: 6, .. }]));
        let fine = slice(1000, 0, 0, 0);
        let v = judge([Judged { slice: 1, histogram: "reads", stats: &fine }], Some("can't keep up"));
        assert!(!v.passed && matches!(v.failures[..], [Failure::Stopped { .. }]));
    }
}
