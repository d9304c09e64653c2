//! A worker's measurements of one operation type: counts, HdrHistograms of latency and
//! time to first byte, and one-second windows; merged across workers, then summarised.

use std::time::Duration;

use hdrhistogram::Histogram;

use super::results::{OpStats, Quantiles, MIB};
use super::spec::Kind;

fn new_histogram() -> Histogram<u64> {
    // 1 us to 1 hour at 3 significant digits.
    Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds")
}

/// One operation type's measurements, per worker, merged at the end.
pub(super) struct Recorder {
    pub(super) objects: u64,
    pub(super) errors: u64,
    pub(super) bytes: u64,
    latency: Histogram<u64>,
    ttfb: Histogram<u64>,
    /// Bytes and objects per one-second window since the start, each operation spread over the
    /// windows it spanned.
    window_bytes: Vec<f64>,
    window_objects: Vec<f64>,
}

impl Recorder {
    pub(super) fn new() -> Recorder {
        Recorder { objects: 0, errors: 0, bytes: 0, latency: new_histogram(), ttfb: new_histogram(), window_bytes: Vec::new(), window_objects: Vec::new() }
    }

    /// A completed operation that ran from `from` to `to` (seconds since the start).
    pub(super) fn done(&mut self, from: f64, to: f64, bytes: u64, ttfb: Option<Duration>) {
        self.objects += 1;
        self.bytes += bytes;
        self.latency.saturating_record(((to - from) * 1e6).max(1.0) as u64);
        if let Some(t) = ttfb {
            self.ttfb.saturating_record(t.as_micros().max(1) as u64);
        }
        spread(&mut self.window_bytes, from, to, bytes as f64);
        spread(&mut self.window_objects, from, to, 1.0);
    }

    pub(super) fn merge(&mut self, other: Recorder) {
        self.objects += other.objects;
        self.errors += other.errors;
        self.bytes += other.bytes;
        self.latency.add(&other.latency).expect("same bounds");
        self.ttfb.add(&other.ttfb).expect("same bounds");
        for (mine, theirs) in [(&mut self.window_bytes, other.window_bytes), (&mut self.window_objects, other.window_objects)] {
            if mine.len() < theirs.len() {
                mine.resize(theirs.len(), 0.0);
            }
            for (m, t) in mine.iter_mut().zip(theirs) {
                *m += t;
            }
        }
    }

    pub(super) fn stats(&self, kind: Kind, seconds: f64, whole_windows: usize) -> OpStats {
        let s = seconds.max(1e-9);
        let median = |w: &[f64]| {
            let mut v: Vec<f64> = (0..whole_windows).map(|i| w.get(i).copied().unwrap_or(0.0)).collect();
            median_of(&mut v)
        };
        OpStats {
            op: kind.name().to_string(),
            objects: self.objects,
            errors: self.errors,
            bytes: self.bytes,
            seconds,
            mib_per_second: self.bytes as f64 / MIB / s,
            objects_per_second: self.objects as f64 / s,
            median_1s_mib_per_second: median(&self.window_bytes).map(|b| b / MIB),
            median_1s_objects_per_second: median(&self.window_objects),
            latency_ms: Quantiles::of(&self.latency),
            ttfb_ms: (kind == Kind::Get).then(|| Quantiles::of(&self.ttfb)),
        }
    }
}

/// Adds `amount` to the one-second windows that [from, to) spans, in proportion to the time
/// spent in each (all of it to the window of `from` for an instantaneous operation).
pub fn spread(windows: &mut Vec<f64>, from: f64, to: f64, amount: f64) {
    let from = from.max(0.0);
    let to = to.max(from);
    let last = to.floor() as usize;
    if windows.len() <= last {
        windows.resize(last + 1, 0.0);
    }
    let span = to - from;
    if span <= 0.0 {
        windows[from.floor() as usize] += amount;
        return;
    }
    let mut t = from;
    while t < to {
        let w = t.floor();
        let end = (w + 1.0).min(to);
        windows[w as usize] += amount * (end - t) / span;
        t = end;
    }
}

/// The median (mean of the middle two for an even count); None for no values.
pub fn median_of(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn windows_share_an_operation_by_time() {
        let mut w = Vec::new();
        spread(&mut w, 0.5, 2.5, 4.0);
        assert_eq!(w, vec![1.0, 2.0, 1.0]);
        spread(&mut w, 1.2, 1.2, 3.0);
        assert_eq!(w, vec![1.0, 5.0, 1.0]);
        assert_eq!(median_of(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median_of(&mut [4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median_of(&mut []), None);
    }

    proptest! {
        #[test]
        fn spreading_keeps_the_amount(from in 0.0f64..100.0, len in 0.0f64..10.0, amount in 0.0f64..1e9) {
            let mut w = Vec::new();
            spread(&mut w, from, from + len, amount);
            let total: f64 = w.iter().sum();
            prop_assert!((total - amount).abs() <= 1e-6 * amount.max(1.0));
            prop_assert!(w.iter().all(|x| *x >= 0.0));
            prop_assert_eq!(w.len(), (from + len).floor() as usize + 1);
        }
    }

    #[test]
    fn recorders_merge_and_summarise() {
        let mut a = Recorder::new();
        a.done(0.0, 0.5, 1 << 20, Some(Duration::from_millis(2)));
        a.done(0.5, 1.5, 1 << 20, Some(Duration::from_millis(4)));
        let mut b = Recorder::new();
        b.done(1.5, 2.0, 1 << 20, None);
        b.errors = 1;
        a.merge(b);
        let s = a.stats(Kind::Get, 2.0, 2);
        assert_eq!((s.objects, s.errors, s.bytes), (3, 1, 3 << 20));
        assert!((s.mib_per_second - 1.5).abs() < 1e-9);
        assert!((s.objects_per_second - 1.5).abs() < 1e-9);
        // Windows: [1 + 0.5, 0.5 + 1] MiB.
        assert!((s.median_1s_mib_per_second.unwrap() - 1.5).abs() < 1e-9);
        assert!((s.latency_ms.p50 - 500.0).abs() < 1.0, "{:?}", s.latency_ms);
        assert!(s.ttfb_ms.is_some() && a.stats(Kind::Put, 2.0, 2).ttfb_ms.is_none());
        assert_eq!(Recorder::new().stats(Kind::Put, 0.5, 0).median_1s_mib_per_second, None);
    }
}
