//! The ACT-style figure: for each run (one row per rating) and each histogram (one column),
//! the percent of operations over 1, 2, 4 ... 64 ms per slice on a log axis, with the
//! criteria's limits (5% over 1 ms, 1% over 8 ms, 0.1% over 64 ms) dashed in the colours of
//! their thresholds. A slice with no operation over a threshold is drawn at the axis floor.

use std::path::Path;

use plotters::prelude::*;

use super::criteria::CRITERIA;
use super::histogram::THRESHOLDS_MS;
use super::{ActError, RunReport};

const PANEL: (u32, u32) = (520, 300);
/// Percentages below this sit on the floor of the log axis.
const PERCENT_FLOOR: f64 = 0.001;
/// One colour per threshold, from cool (1 ms) to hot (64 ms).
const COLORS: [RGBColor; 7] = [
    RGBColor(31, 119, 180),
    RGBColor(23, 190, 207),
    RGBColor(44, 160, 44),
    RGBColor(188, 189, 34),
    RGBColor(255, 127, 14),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
];

fn err(e: impl std::fmt::Display) -> ActError {
    ActError::Plot(e.to_string())
}

/// Draws `runs` into an SVG file at `path`; `title` names the target.
pub fn plot(runs: &[RunReport], title: &str, path: &Path) -> Result<(), ActError> {
    let columns = runs.iter().map(|r| r.outcome.totals.len()).max().unwrap_or(1).max(1);
    let rows = runs.len().max(1);
    let size = (PANEL.0 * columns as u32, PANEL.1 * rows as u32 + 40);
    let root = SVGBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let root = root.titled(title, ("sans-serif", 20)).map_err(err)?;
    let panels = root.split_evenly((rows, columns));
    for (r, run) in runs.iter().enumerate() {
        let x_max = run.outcome.slices.last().map(|s| s.end_secs).unwrap_or(1.0).max(1e-3);
        for (c, total) in run.outcome.totals.iter().enumerate() {
            let area = &panels[r * columns + c];
            let verdict = if run.verdict.passed { "pass" } else { "FAIL" };
            let caption = format!("{}x {} ({verdict})", run.rating, total.histogram);
            let mut chart = ChartBuilder::on(area)
                .caption(caption, ("sans-serif", 15))
                .margin(8)
                .x_label_area_size(32)
                .y_label_area_size(52)
                .build_cartesian_2d(0f64..x_max, (PERCENT_FLOOR..100f64).log_scale())
                .map_err(err)?;
            chart
                .configure_mesh()
                .x_desc("seconds (slice end)")
                .y_desc("% over threshold")
                .y_label_formatter(&|v| if *v >= 1.0 { format!("{v:.0}") } else { format!("{v}") })
                .draw()
                .map_err(err)?;
            for (t, threshold) in THRESHOLDS_MS.iter().enumerate() {
                let color = COLORS[t];
                let points: Vec<(f64, f64)> = run.outcome.slices.iter().filter_map(|s| s.histograms.get(c).map(|h| (s.end_secs, h.stats.percent_over[t].max(PERCENT_FLOOR)))).collect();
                chart
                    .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
                    .map_err(err)?
                    .label(format!("> {threshold} ms"))
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2)));
                chart.draw_series(points.iter().map(|p| Circle::new(*p, 3, color.filled()))).map_err(err)?;
                if total.judged {
                    if let Some(limit) = CRITERIA.iter().find(|k| k.threshold_ms == *threshold) {
                        let line = [(0.0, limit.max_percent), (x_max, limit.max_percent)];
                        chart.draw_series(DashedLineSeries::new(line, 6, 4, color.stroke_width(1))).map_err(err)?;
                    }
                }
            }
            chart.configure_series_labels().position(SeriesLabelPosition::UpperRight).background_style(WHITE.mix(0.8)).border_style(BLACK).label_font(("sans-serif", 10)).draw().map_err(err)?;
        }
    }
    root.present().map_err(err)?;
    Ok(())
}
