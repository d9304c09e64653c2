//! SVG figures of an archive run: per workload, MB/s and files/s against the utilisation level,
//! one line per envelope.

use std::path::{Path, PathBuf};

use plotters::prelude::*;

use super::envelope::Envelope;
use super::Row;

const COLORS: [RGBColor; 3] = [RGBColor(31, 119, 180), RGBColor(44, 160, 44), RGBColor(214, 39, 40)];
pub const WORKLOADS: [&str; 3] = ["sequential-write", "random-read", "fragment-read"];

#[derive(Debug, thiserror::Error)]
#[error("plot {path}: {reason}")]
pub struct PlotError {
    path: String,
    reason: String,
}

/// Writes `<workload>-mbps.svg` and `<workload>-files.svg` into `dir`; returns the files.
pub fn write_plots(rows: &[Row], dir: &Path) -> Result<Vec<PathBuf>, PlotError> {
    std::fs::create_dir_all(dir).map_err(|e| PlotError { path: dir.display().to_string(), reason: e.to_string() })?;
    let mut files = Vec::new();
    for workload in WORKLOADS {
        for (suffix, label, per_second) in [("mbps", "MB/s", true), ("files", "files/s", false)] {
            let series: Vec<(Envelope, Vec<(f64, f64)>)> = Envelope::ALL
                .iter()
                .map(|e| {
                    let points = rows
                        .iter()
                        .filter(|r| r.envelope == *e && r.workload == workload)
                        .map(|r| (r.level * 100.0, if per_second { r.mb_per_second } else { r.files_per_second }))
                        .collect();
                    (*e, points)
                })
                .filter(|(_, p): &(Envelope, Vec<(f64, f64)>)| !p.is_empty())
                .collect();
            if series.is_empty() {
                continue;
            }
            let path = dir.join(format!("{workload}-{suffix}.svg"));
            chart(&format!("{workload}: {label} by capacity utilisation"), label, &series, &path).map_err(|reason| PlotError { path: path.display().to_string(), reason })?;
            files.push(path);
        }
    }
    Ok(files)
}

fn chart(title: &str, y_label: &str, series: &[(Envelope, Vec<(f64, f64)>)], path: &Path) -> Result<(), String> {
    let e = |e: &dyn std::fmt::Display| e.to_string();
    let max_y = series.iter().flat_map(|(_, p)| p.iter().map(|(_, y)| *y)).fold(1e-3, f64::max) * 1.15;
    let root = SVGBackend::new(path, (800, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let mut c = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..100f64, 0f64..max_y)
        .map_err(|x| e(&x))?;
    c.configure_mesh().x_desc("capacity utilisation (%)").y_desc(y_label).draw().map_err(|x| e(&x))?;
    for (envelope, points) in series {
        let color = COLORS[Envelope::ALL.iter().position(|x| x == envelope).unwrap_or(0)];
        c.draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .map_err(|x| e(&x))?
            .label(envelope.name())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        c.draw_series(points.iter().map(|p| Circle::new(*p, 4, color.filled()))).map_err(|x| e(&x))?;
    }
    c.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw().map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))?;
    Ok(())
}
