//! ACT-like text output, in the shape act_latency.py prints: one row per slice with, for each
//! histogram, the operations in the slice and the percent over 1, 2, 4 ... 64 ms; then `avg`
//! and `max` rows over the slices (the `max` row is the one the criteria are read from).

use std::fmt::Write as _;

use super::histogram::{SliceStats, THRESHOLDS_MS};
use super::run::Slice;

const LABEL_WIDTH: usize = 7;
const OPS_WIDTH: usize = 9;
const PERCENT_WIDTH: usize = 7;
const BLOCK_WIDTH: usize = OPS_WIDTH + PERCENT_WIDTH * THRESHOLDS_MS.len();

/// The two heading lines for histograms `names`.
pub fn header(names: &[&str]) -> String {
    let mut out = format!("{:>LABEL_WIDTH$}", "");
    for n in names {
        let _ = write!(out, "  {n:<BLOCK_WIDTH$}");
    }
    let _ = write!(out, "\n{:>LABEL_WIDTH$}", "slice");
    for _ in names {
        let _ = write!(out, "  {:>OPS_WIDTH$}", "ops");
        for t in THRESHOLDS_MS {
            let _ = write!(out, "{:>PERCENT_WIDTH$}", format!("%>{t}ms"));
        }
    }
    out.trim_end().to_string()
}

/// One row: `label` then, per histogram, operations and percents (`None` for ops leaves the
/// column blank, as in the summary rows).
pub fn row(label: &str, cells: &[(Option<f64>, [f64; THRESHOLDS_MS.len()])]) -> String {
    let mut out = format!("{label:>LABEL_WIDTH$}");
    for (ops, percents) in cells {
        match ops {
            Some(n) => {
                let _ = write!(out, "  {n:>OPS_WIDTH$.0}");
            }
            None => {
                let _ = write!(out, "  {:>OPS_WIDTH$}", "");
            }
        }
        for p in percents {
            let _ = write!(out, "{p:>PERCENT_WIDTH$.2}");
        }
    }
    out
}

/// The row of one slice.
pub fn slice_row(slice: &Slice) -> String {
    let cells: Vec<_> = slice.histograms.iter().map(|h| (Some(h.stats.ops as f64), h.stats.percent_over)).collect();
    row(&slice.index.to_string(), &cells)
}

/// The `avg` and `max` rows over `slices` (per histogram, per threshold).
pub fn summary(slices: &[Slice]) -> String {
    let Some(first) = slices.first() else { return String::new() };
    let columns = first.histograms.len();
    let stats = |h: usize| slices.iter().filter_map(move |s| s.histograms.get(h)).map(|n| &n.stats);
    let fold = |h: usize, f: &dyn Fn(&mut dyn Iterator<Item = f64>) -> f64| -> [f64; THRESHOLDS_MS.len()] {
        std::array::from_fn(|t| f(&mut stats(h).map(|s: &SliceStats| s.percent_over[t])))
    };
    let n = slices.len() as f64;
    let avg: Vec<_> = (0..columns).map(|h| (Some(stats(h).map(|s| s.ops as f64).sum::<f64>() / n), fold(h, &|it| it.sum::<f64>() / n))).collect();
    let max: Vec<_> = (0..columns).map(|h| (None, fold(h, &|it| it.fold(0.0, f64::max)))).collect();
    format!("{}\n{}\n{}", "-".repeat(LABEL_WIDTH), row("avg", &avg), row("max", &max))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::act::histogram::Buckets;
    use crate::act::run::NamedStats;
    use std::time::Duration;

    fn slice(index: usize, over: u64, total: u64) -> Slice {
        let mut b = Buckets::default();
        (0..over).for_each(|_| b.record(Duration::from_millis(3)));
        (0..total - over).for_each(|_| b.record(Duration::from_micros(200)));
        Slice { index, end_secs: index as f64, histograms: vec![NamedStats { histogram: "reads".into(), judged: true, stats: SliceStats::of(&b, 0) }] }
    }

    #[test]
    fn rows_line_up_under_the_header_and_the_summary_averages_and_maximises() {
        let h = header(&["reads"]);
        let slices = [slice(1, 10, 1000), slice(2, 30, 1000)];
        let r = slice_row(&slices[0]);
        let head = h.lines().nth(1).unwrap();
        assert_eq!(head.len(), r.len(), "\n{head}\n{r}");
        assert!(r.ends_with("   1.00   1.00   0.00   0.00   0.00   0.00   0.00"), "{r}");
        let s = summary(&slices);
        let lines: Vec<&str> = s.lines().collect();
        assert!(lines[1].starts_with("    avg       1000   2.00   2.00   0.00"), "{s}");
        assert!(lines[2].starts_with("    max              3.00   3.00   0.00"), "{s}");
    }
}
