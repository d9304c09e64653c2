//! Measured throughput of a drive type: MB/s of one node's drives as a function of how many
//! drives the node holds and, optionally, of the value (file) size of the workload.
//!
//! Between measured drive counts the curve is linear (through the origin below the first
//! point); beyond the last measured count it goes on with the slope of its last segment (never
//! downwards), i.e. it assumes no better scaling than the last measured step (the node's own
//! ceiling caps it anyway); a single point therefore scales per drive. Between
//! measured value sizes it is linear in log2(value size), since bench sweeps double the size;
//! outside the measured value sizes it refuses rather than extrapolates.

use crate::error::CatalogueError;

/// One measurement: `mb_s` (10^6 bytes/s) of `drives` drives of one node together.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Point {
    pub drives: u32,
    pub value_size: Option<u64>,
    pub mb_s: f64,
    /// "inline" or the result file (and row or pointer) the figure was read from.
    pub origin: String,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Curve {
    points: Vec<Point>,
}

impl Curve {
    /// Checks the points: at least one, positive finite MB/s, drive counts from 1, value sizes
    /// on all points or on none, no two points for the same (drives, value size).
    pub fn new(context: &str, mut points: Vec<Point>) -> Result<Curve, CatalogueError> {
        let figure = |problem: String| CatalogueError::Figure { context: context.to_string(), problem };
        if points.is_empty() {
            return Err(figure("the curve has no points".into()));
        }
        for p in &points {
            if !(p.mb_s.is_finite() && p.mb_s > 0.0) {
                return Err(figure(format!("MB/s must be a positive finite number, got {} (from {})", p.mb_s, p.origin)));
            }
            if p.drives == 0 {
                return Err(figure("drives must be at least 1".into()));
            }
            if p.value_size == Some(0) {
                return Err(figure("value_size must be at least 1 byte".into()));
            }
        }
        let sized = points.iter().filter(|p| p.value_size.is_some()).count();
        if sized != 0 && sized != points.len() {
            return Err(figure("give value_size on every point of the curve or on none".into()));
        }
        points.sort_by_key(|p| (p.value_size, p.drives));
        if let Some(w) = points.windows(2).find(|w| (w[0].value_size, w[0].drives) == (w[1].value_size, w[1].drives)) {
            return Err(figure(format!("two points for {} drives{}", w[0].drives, w[0].value_size.map(|v| format!(" at value size {v}")).unwrap_or_default())));
        }
        Ok(Curve { points })
    }

    pub fn points(&self) -> &[Point] {
        &self.points
    }

    /// True when the figures depend on the workload's value size.
    pub fn by_value_size(&self) -> bool {
        self.points.first().is_some_and(|p| p.value_size.is_some())
    }

    /// MB/s of `drives` drives in one node for values of `value_size` bytes.
    pub fn at(&self, drives: u32, value_size: Option<u64>) -> Result<f64, String> {
        if !self.by_value_size() {
            return Ok(by_drives(&self.points, drives));
        }
        let v = value_size.ok_or("the curve is measured per value size: set targets.value_size")?;
        let sizes = self.sizes();
        let (lowest, highest) = (sizes[0], sizes[sizes.len() - 1]);
        if v < lowest || v > highest {
            return Err(format!("measured for value sizes {lowest}..{highest} B; {v} B is outside (add a point for it)"));
        }
        let at_size = |size: u64| {
            let group: Vec<Point> = self.points.iter().filter(|p| p.value_size == Some(size)).cloned().collect();
            by_drives(&group, drives)
        };
        let upper = sizes.iter().position(|s| *s >= v).unwrap_or(sizes.len() - 1);
        if sizes[upper] == v || upper == 0 {
            return Ok(at_size(sizes[upper]));
        }
        let (s0, s1) = (sizes[upper - 1], sizes[upper]);
        let t = ((v as f64).log2() - (s0 as f64).log2()) / ((s1 as f64).log2() - (s0 as f64).log2());
        let (f0, f1) = (at_size(s0), at_size(s1));
        Ok(f0 + t * (f1 - f0))
    }

    fn sizes(&self) -> Vec<u64> {
        let mut sizes: Vec<u64> = self.points.iter().filter_map(|p| p.value_size).collect();
        sizes.dedup();
        sizes
    }
}

/// Piecewise linear through (0, 0) and the points (sorted by drives); beyond the last point,
/// the last segment's slope if it rises, flat otherwise. `points` is non-empty.
fn by_drives(points: &[Point], drives: u32) -> f64 {
    let k = f64::from(drives);
    let (mut before, mut last) = ((0.0, 0.0), (0.0, 0.0));
    for p in points {
        let d = f64::from(p.drives);
        if k <= d {
            let (d0, m0) = last;
            return m0 + (k - d0) / (d - d0) * (p.mb_s - m0);
        }
        (before, last) = (last, (d, p.mb_s));
    }
    let slope = ((last.1 - before.1) / (last.0 - before.0)).max(0.0);
    last.1 + slope * (k - last.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(drives: u32, value_size: Option<u64>, mb_s: f64) -> Point {
        Point { drives, value_size, mb_s, origin: "inline".into() }
    }

    #[test]
    fn one_figure_scales_per_drive() {
        let c = Curve::new("t", vec![point(1, None, 150.0)]).unwrap();
        assert_eq!(c.at(1, None).unwrap(), 150.0);
        assert_eq!(c.at(4, None).unwrap(), 600.0);
        // A value size given for a size-independent curve changes nothing.
        assert_eq!(c.at(2, Some(4096)).unwrap(), 300.0);
    }

    #[test]
    fn drive_counts_interpolate_then_keep_the_last_step() {
        // Measured: 1 drive 200, 4 drives 500 (contention): 2 drives lie on the segment, and
        // beyond 4 drives each adds what each added between 1 and 4 (100 MB/s).
        let c = Curve::new("t", vec![point(4, None, 500.0), point(1, None, 200.0)]).unwrap();
        assert_eq!(c.at(1, None).unwrap(), 200.0);
        assert_eq!(c.at(2, None).unwrap(), 300.0);
        assert_eq!(c.at(4, None).unwrap(), 500.0);
        assert_eq!(c.at(8, None).unwrap(), 900.0);
        // A falling last step does not extrapolate downwards.
        let c = Curve::new("t", vec![point(1, None, 200.0), point(2, None, 150.0)]).unwrap();
        assert_eq!(c.at(6, None).unwrap(), 150.0);
        // Below the first measured count: through the origin.
        let c = Curve::new("t", vec![point(2, None, 300.0)]).unwrap();
        assert_eq!(c.at(1, None).unwrap(), 150.0);
    }

    #[test]
    fn value_sizes_interpolate_in_log2_and_refuse_outside() {
        let c = Curve::new("t", vec![point(1, Some(4096), 100.0), point(1, Some(1 << 20), 900.0)]).unwrap();
        assert_eq!(c.at(1, Some(4096)).unwrap(), 100.0);
        assert_eq!(c.at(1, Some(1 << 20)).unwrap(), 900.0);
        // 64 KiB is half-way in log2 between 4 KiB (2^12) and 1 MiB (2^20).
        assert!((c.at(1, Some(1 << 16)).unwrap() - 500.0).abs() < 1e-9);
        assert!((c.at(3, Some(1 << 16)).unwrap() - 1500.0).abs() < 1e-9);
        assert!(c.at(1, Some(1024)).unwrap_err().contains("outside"));
        assert!(c.at(1, Some(8 << 20)).unwrap_err().contains("outside"));
        assert!(c.at(1, None).unwrap_err().contains("targets.value_size"));
    }

    #[test]
    fn malformed_curves_are_refused() {
        assert!(Curve::new("t", vec![]).is_err());
        assert!(Curve::new("t", vec![point(1, None, 0.0)]).is_err());
        assert!(Curve::new("t", vec![point(1, None, f64::NAN)]).is_err());
        assert!(Curve::new("t", vec![point(0, None, 10.0)]).is_err());
        assert!(Curve::new("t", vec![point(1, Some(4096), 10.0), point(2, None, 10.0)]).is_err());
        let e = Curve::new("t", vec![point(2, None, 10.0), point(2, None, 12.0)]).unwrap_err();
        assert!(e.to_string().contains("two points for 2 drives"), "{e}");
    }
}
