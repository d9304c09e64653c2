//! `spindle bench report`: Markdown and HTML reports with SVG figures shaped like the Kinetic
//! paper's (throughput against value size on log axes, one line per target; read-latency
//! histograms in 10 ms bins) and its tables (write modes, key-not-found latency, key size),
//! from one or more `spindle bench paper` result files (one per target).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use plotters::prelude::*;
use serde_json::Value;

use crate::BenchError;

const SWEEPS: [(&str, &str); 5] = [
    ("sequential-write", "Sequential-key-order writes"),
    ("sequential-read", "Sequential reads after sequential writes"),
    ("random-read-after-sequential-write", "Random reads after sequential writes"),
    ("random-write", "Random-key-order writes"),
    ("random-read", "Random reads after random writes"),
];

const COLORS: [RGBColor; 6] = [RGBColor(31, 119, 180), RGBColor(214, 39, 40), RGBColor(44, 160, 44), RGBColor(148, 103, 189), RGBColor(255, 127, 14), RGBColor(23, 190, 207)];

fn err(e: impl std::fmt::Display) -> BenchError {
    BenchError::Invalid(e.to_string())
}

/// A results file: its target name and rows.
struct Results {
    name: String,
    doc: Value,
}

impl Results {
    fn rows<'a>(&'a self, experiment: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.doc["rows"].as_array().into_iter().flatten().filter(move |r| r["experiment"] == experiment)
    }
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

/// Writes `report.md`, `report.html` and the SVG figures into `out`; returns the files.
pub fn write_report(inputs: &[PathBuf], out: &Path) -> Result<Vec<PathBuf>, BenchError> {
    let mut all = Vec::new();
    for path in inputs {
        let doc: Value = serde_json::from_slice(&std::fs::read(path).map_err(|e| err(format!("{}: {e}", path.display())))?)
            .map_err(|e| err(format!("{}: {e}", path.display())))?;
        if doc["schema_version"] != 1 && doc["schema_version"] != 2 {
            return Err(err(format!("{}: not a `spindle bench paper` result (schema 1 or 2)", path.display())));
        }
        let name = doc["name"].as_str().or(doc["target"].as_str()).unwrap_or("?").to_string();
        all.push(Results { name, doc });
    }
    if all.is_empty() {
        return Err(err("no result files given"));
    }
    std::fs::create_dir_all(out).map_err(err)?;
    let mut files = Vec::new();
    let mut md = String::from("# Kinetic paper micro-benchmarks\n\n");
    let mut html = String::from("<!doctype html><meta charset=utf-8><title>Kinetic paper micro-benchmarks</title>\n<style>body{font-family:sans-serif;max-width:60em;margin:auto}table{border-collapse:collapse}td,th{border:1px solid #999;padding:2px 8px;text-align:right}</style>\n<h1>Kinetic paper micro-benchmarks</h1>\n");

    let machine_rows: Vec<Vec<String>> = all
        .iter()
        .map(|r| {
            let m = &r.doc["machine"];
            vec![r.name.clone(), r.doc["scale"].as_str().unwrap_or("").into(), m["cpu"].as_str().unwrap_or("").into(), m["cores"].to_string(), format!("{:.1} GiB", f(&m["memory_bytes"]) / (1u64 << 30) as f64), m["kernel"].as_str().unwrap_or("").into()]
        })
        .collect();
    table(&mut md, &mut html, "Targets and machine", &["target", "scale", "CPU", "cores", "memory", "kernel"], &machine_rows);

    for (experiment, title) in SWEEPS {
        let file = format!("{experiment}.svg");
        sweep_chart(&all, experiment, title, &out.join(&file))?;
        files.push(out.join(&file));
        let _ = writeln!(md, "## {title}\n\n![{title}]({file})\n");
        let _ = writeln!(html, "<h2>{title}</h2><img src=\"{file}\" alt=\"{title}\">");
        let mut rows = Vec::new();
        for r in &all {
            for row in r.rows(experiment) {
                let res = &row["result"];
                rows.push(vec![r.name.clone(), row["label"].as_str().unwrap_or("").into(), format!("{:.0}", f(&res["ops_per_second"])), format!("{:.1}", f(&res["megabytes_per_second"])), spread(row), res["latency_us"]["p50"].to_string(), res["latency_us"]["p99"].to_string()]);
            }
        }
        table(&mut md, &mut html, "", &["target", "value bytes", "ops/s", "MB/s", "MB/s min–max (runs)", "p50 µs", "p99 µs"], &rows);
    }
    paper_comparison(&all, &mut md, &mut html);

    let simple = |experiment: &str| -> Vec<Vec<String>> {
        let mut rows = Vec::new();
        for r in &all {
            for row in r.rows(experiment) {
                let res = &row["result"];
                let lat = &res["latency_us"];
                rows.push(vec![r.name.clone(), row["label"].as_str().unwrap_or("").into(), format!("{:.0}", f(&res["ops_per_second"])), format!("{:.1}", f(&res["megabytes_per_second"])), format!("{:.0}", f(&lat["mean"])), lat["p50"].to_string(), lat["p99"].to_string(), lat["max"].to_string()]);
            }
        }
        rows
    };
    let head = ["target", "case", "ops/s", "MB/s", "mean µs", "p50 µs", "p99 µs", "max µs"];
    table(&mut md, &mut html, "Write modes (Table IV): 4 KiB values, one request at a time", &head, &simple("write-mode"));
    table(&mut md, &mut html, "Key-not-found latency", &head, &simple("not-found"));
    table(&mut md, &mut html, "Key size: 16 B against 4 KiB keys, 4 KiB values (writes)", &head, &simple("key-size-write"));
    table(&mut md, &mut html, "Key size: 16 B against 4 KiB keys, 4 KiB values (random reads)", &head, &simple("key-size-read"));

    ycsb_section(&all, out, &mut files, &mut md, &mut html)?;

    for (n, r) in all.iter().enumerate() {
        for (i, row) in r.rows("read-latency-histogram").enumerate() {
            let label = row["label"].as_str().unwrap_or("");
            let file = format!("histogram-{n}-{}-{i}.svg", sanitize(&r.name));
            histogram_chart(&format!("{}: random reads {label}", r.name), &row["result"]["latency_us"]["bins_10ms"], &out.join(&file))?;
            files.push(out.join(&file));
            let _ = writeln!(md, "## Read latency, {}, {label}\n\n![histogram]({file})\n", r.name);
            let _ = writeln!(html, "<h2>Read latency, {}, {label}</h2><img src=\"{file}\" alt=\"histogram\">", r.name);
        }
    }

    let md_path = out.join("report.md");
    let html_path = out.join("report.html");
    std::fs::write(&md_path, md).map_err(err)?;
    std::fs::write(&html_path, html).map_err(err)?;
    files.push(md_path);
    files.push(html_path);
    Ok(files)
}

/// "min–max (n)" of a row's repetitions; "–" for a schema-1 row (one run, no spread).
fn spread(row: &Value) -> String {
    let rep = &row["repetitions"];
    match rep["runs"].as_u64() {
        Some(n) => format!("{:.1}–{:.1} ({n})", f(&rep["megabytes_per_second"]["min"]), f(&rep["megabytes_per_second"]["max"])),
        None => "–".into(),
    }
}

/// The paper's published drive figures beside each target's 1 MiB sequential write and read.
fn paper_comparison(all: &[Results], md: &mut String, html: &mut String) {
    let mb = |r: &Results, experiment: &str| r.rows(experiment).find(|row| row["label"] == "1048576").map(|row| format!("{:.0}", f(&row["result"]["megabytes_per_second"]))).unwrap_or_else(|| "–".into());
    let mut rows = vec![vec!["Kinetic drive, as published (ICPADS 2017)".to_string(), PAPER_SEQUENTIAL_WRITE_MBPS.to_string(), PAPER_SEQUENTIAL_READ_MBPS.to_string()]];
    rows.extend(all.iter().map(|r| vec![r.name.clone(), mb(r, "sequential-write"), mb(r, "sequential-read")]));
    table(md, html, "1 MiB sequential throughput against the paper's Kinetic drive", &["system", "write MB/s", "read MB/s"], &rows);
}

/// The Kinetic paper's averages for its drives with 1 MB values (section IV).
const PAPER_SEQUENTIAL_WRITE_MBPS: u32 = 63;
const PAPER_SEQUENTIAL_READ_MBPS: u32 = 78;

/// YCSB throughput per workload and target, one figure and table per record size.
fn ycsb_section(all: &[Results], out: &Path, files: &mut Vec<PathBuf>, md: &mut String, html: &mut String) -> Result<(), BenchError> {
    let rows_of = |r: &Results| r.doc["ycsb"].as_array().cloned().unwrap_or_default();
    let mut sizes: Vec<u64> = all.iter().flat_map(|r| rows_of(r).iter().filter_map(|y| y["record_size"].as_u64()).collect::<Vec<_>>()).collect();
    sizes.sort_unstable();
    sizes.dedup();
    for size in sizes {
        let title = format!("YCSB, {} records", bytes_label(size as f64));
        // (target, [(phase/workload label, ops/s)])
        let series: Vec<(String, Vec<(String, f64)>)> = all
            .iter()
            .map(|r| {
                let bars = rows_of(r)
                    .iter()
                    .filter(|y| y["record_size"].as_u64() == Some(size))
                    .map(|y| (ycsb_label(y), f(&y["result"]["throughput_ops_per_second"])))
                    .collect();
                (r.name.clone(), bars)
            })
            .collect();
        let file = format!("ycsb-{size}.svg");
        ycsb_chart(&title, &series, &out.join(&file))?;
        files.push(out.join(&file));
        let _ = writeln!(md, "## {title}

![{title}]({file})
");
        let _ = writeln!(html, "<h2>{title}</h2><img src=\"{file}\" alt=\"{title}\">");
        let mut rows = Vec::new();
        for r in all {
            for y in rows_of(r).iter().filter(|y| y["record_size"].as_u64() == Some(size)) {
                let ops = &y["result"]["operations"];
                let p99 = |name: &str| ops[name]["p99_us"].as_u64().map(|v| v.to_string()).unwrap_or_else(|| "–".into());
                let failures: u64 = ops.as_object().into_iter().flatten().map(|(_, s)| s["failures"].as_u64().unwrap_or(0)).sum();
                let t = &y["throughput"];
                rows.push(vec![r.name.clone(), ycsb_label(y), format!("{:.0}", f(&y["result"]["throughput_ops_per_second"])), format!("{:.0}–{:.0}", f(&t["min"]), f(&t["max"])), p99("READ"), p99("UPDATE"), p99("INSERT"), p99("SCAN"), failures.to_string()]);
            }
        }
        table(md, html, "", &["target", "workload", "ops/s", "min–max", "READ p99 µs", "UPDATE p99 µs", "INSERT p99 µs", "SCAN p99 µs", "failures"], &rows);
    }
    Ok(())
}

fn ycsb_label(y: &Value) -> String {
    match y["phase"].as_str() {
        Some("load") => "load".into(),
        _ => y["workload"].as_str().unwrap_or("?").trim_start_matches("workload").to_string(),
    }
}

/// Grouped bars: one group per workload, one bar per target, throughput on a log axis.
fn ycsb_chart(title: &str, series: &[(String, Vec<(String, f64)>)], path: &Path) -> Result<(), BenchError> {
    let mut groups: Vec<String> = Vec::new();
    for (_, bars) in series {
        for (label, _) in bars {
            if !groups.contains(label) {
                groups.push(label.clone());
            }
        }
    }
    let max = series.iter().flat_map(|(_, b)| b.iter().map(|(_, v)| *v)).fold(1.0, f64::max) * 2.0;
    let root = SVGBackend::new(path, (800, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..groups.len().max(1) as f64, (1f64..max).log_scale())
        .map_err(err)?;
    let names = groups.clone();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(groups.len().max(1) * 2 + 1)
        .x_label_formatter(&move |x| {
            let i = x.floor() as usize;
            if (x - x.floor() - 0.5).abs() < 0.01 { names.get(i).cloned().unwrap_or_default() } else { String::new() }
        })
        .x_desc("workload")
        .y_desc("operations/s")
        .draw()
        .map_err(err)?;
    let width = 0.8 / series.len().max(1) as f64;
    for (t, (name, bars)) in series.iter().enumerate() {
        let color = COLORS[t % COLORS.len()];
        let rects: Vec<_> = bars
            .iter()
            .filter_map(|(label, v)| {
                let g = groups.iter().position(|x| x == label)? as f64;
                let x0 = g + 0.1 + t as f64 * width;
                Some(Rectangle::new([(x0, 1.0), (x0 + width * 0.9, v.max(1.0))], color.filled()))
            })
            .collect();
        chart
            .draw_series(rects)
            .map_err(err)?
            .label(name.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 15, y + 5)], color.filled()));
    }
    chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw().map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

/// Axis ticks fall on powers of ten: 1000 -> "1 kB", 1000000 -> "1 MB".
fn bytes_label(v: f64) -> String {
    let units = [(1e6, "MB"), (1e3, "kB")];
    for (scale, unit) in units {
        if v >= scale {
            return format!("{} {unit}", (v / scale * 10.0).round() / 10.0);
        }
    }
    format!("{v:.0} B")
}

fn sanitize(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect()
}

fn table(md: &mut String, html: &mut String, title: &str, head: &[&str], rows: &[Vec<String>]) {
    if !title.is_empty() {
        let _ = writeln!(md, "## {title}\n");
        let _ = writeln!(html, "<h2>{title}</h2>");
    }
    let _ = writeln!(md, "| {} |", head.join(" | "));
    let _ = writeln!(md, "|{}", "---|".repeat(head.len()));
    html.push_str("<table><tr>");
    for h in head {
        let _ = write!(html, "<th>{h}</th>");
    }
    html.push_str("</tr>\n");
    for row in rows {
        let _ = writeln!(md, "| {} |", row.join(" | "));
        html.push_str("<tr>");
        for c in row {
            let _ = write!(html, "<td>{}</td>", c.replace('<', "&lt;"));
        }
        html.push_str("</tr>\n");
    }
    md.push('\n');
    html.push_str("</table>\n");
}

/// Throughput (MB/s) against value size, both on log axes, one line per target.
fn sweep_chart(all: &[Results], experiment: &str, title: &str, path: &Path) -> Result<(), BenchError> {
    let series: Vec<(String, Vec<(f64, f64)>)> = all
        .iter()
        .map(|r| {
            let points = r.rows(experiment).map(|row| (f(&row["result"]["spec"]["value_size"]), f(&row["result"]["megabytes_per_second"]).max(1e-3))).collect();
            (r.name.clone(), points)
        })
        .collect();
    let max_y = series.iter().flat_map(|(_, p)| p.iter().map(|(_, y)| *y)).fold(1.0, f64::max) * 2.0;
    let min_y = series.iter().flat_map(|(_, p)| p.iter().map(|(_, y)| *y)).fold(max_y, f64::min).max(1e-3) / 2.0;
    let root = SVGBackend::new(path, (800, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((64f64..2_000_000f64).log_scale(), (min_y..max_y).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("value size")
        .y_desc("MB/s")
        .x_label_formatter(&|v| bytes_label(*v))
        .y_label_formatter(&|v| if *v >= 1.0 { format!("{v:.0}") } else { format!("{v}") })
        .draw()
        .map_err(err)?;
    for (i, (name, points)) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .map_err(err)?
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        chart.draw_series(points.iter().map(|p| Circle::new(*p, 4, color.filled()))).map_err(err)?;
    }
    chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw().map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

/// Operations per 10 ms bin, as bars.
fn histogram_chart(title: &str, bins: &Value, path: &Path) -> Result<(), BenchError> {
    let counts: Vec<f64> = bins.as_array().into_iter().flatten().map(f).collect();
    let max = counts.iter().copied().fold(1.0, f64::max) * 1.1;
    let root = SVGBackend::new(path, (800, 400)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..(counts.len().max(1) as f64 * 10.0), 0f64..max)
        .map_err(err)?;
    chart.configure_mesh().x_desc("latency (ms, 10 ms bins; last bin: 100 ms and more)").y_desc("operations").draw().map_err(err)?;
    chart
        .draw_series(counts.iter().enumerate().map(|(i, c)| {
            let x = i as f64 * 10.0;
            Rectangle::new([(x + 1.0, 0.0), (x + 9.0, *c)], COLORS[0].filled())
        }))
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}
