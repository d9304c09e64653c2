//! Results as Markdown: one run's table, and result files side by side with each server's
//! ratio to a baseline.

use super::client;
use super::results::{OpStats, Quantiles, S3BenchResult, S3ResultView, SCHEMA_VERSION};
use super::spec::{S3BenchError, S3Op};

/// A size for tables: `1 MiB`, `64 MiB`, `4 KiB`, `1000 B`.
pub fn size_label(bytes: u64) -> String {
    for (unit, shift) in [("GiB", 30), ("MiB", 20), ("KiB", 10)] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{} {unit}", bytes >> shift);
        }
    }
    format!("{bytes} B")
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "–".to_string(), |x| format!("{x:.digits$}"))
}

/// One run as Markdown: a row per operation type, then the server's CPU.
pub fn markdown(r: &S3BenchResult) -> String {
    let s = &r.spec;
    let mut out = format!(
        "S3 {} against {} ({}): {} objects, {} workers, {:.1} s{}.\n\n",
        s.op.name().to_uppercase(),
        s.label,
        s.target.endpoint,
        size_label(s.object_bytes),
        s.concurrency,
        r.seconds,
        if client::uses_multipart(s.object_bytes, s.multipart_bytes) { format!(", multipart in parts of {}", size_label(s.multipart_bytes)) } else { String::new() }
    );
    out.push_str("| op | objects | MiB/s | obj/s | median 1-s MiB/s | p50 ms | p90 ms | p99 ms | TTFB p50 ms | TTFB p99 ms | errors |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    for o in &r.operations {
        out.push_str(&format!(
            "| {} | {} | {:.1} | {:.1} | {} | {:.2} | {:.2} | {:.2} | {} | {} | {} |\n",
            o.op,
            o.objects,
            o.mib_per_second,
            o.objects_per_second,
            opt(o.median_1s_mib_per_second, 1),
            o.latency_ms.p50,
            o.latency_ms.p90,
            o.latency_ms.p99,
            opt(o.ttfb_ms.map(|t| t.p50), 2),
            opt(o.ttfb_ms.map(|t| t.p99), 2),
            o.errors
        ));
    }
    out.push('\n');
    match (r.server_cpu_seconds, r.server_cpu_seconds_per_mib) {
        (Some(c), per) => out.push_str(&format!("Server CPU (PIDs {:?}): {c:.2} s, {} s/MiB. ", s.server_pids, opt(per, 4))),
        (None, _) => out.push_str(&format!("Server CPU: {}. ", r.server_cpu_note.as_deref().unwrap_or("not measured (no --server-pid)"))),
    }
    out.push_str(&format!("Load generator CPU: {:.2} s.\n", r.bench_cpu_seconds));
    if let Some(p) = &r.prepare {
        out.push_str(&format!("Prepared set: {} objects, {:.1} MiB/s (not timed).\n", p.objects, p.mib_per_second));
    }
    for e in &r.error_samples {
        out.push_str(&format!("error: {e}\n"));
    }
    out
}

/// Side-by-side Markdown of result files: for each cell (operation, object size, workers) the
/// row of each server and, for each other server, its ratio to `baseline` (higher is better
/// for rates, lower for latency and CPU: the ratio is given plainly, candidate ÷ baseline).
pub fn compare_markdown(results: &[S3ResultView], baseline: &str) -> Result<String, S3BenchError> {
    for r in results {
        if r.kind != "s3" || r.schema_version != SCHEMA_VERSION {
            return Err(S3BenchError::Invalid(format!("{}: not a schema-{SCHEMA_VERSION} S3 result", r.spec.label)));
        }
    }
    type Cell = (S3Op, u64, usize, String);
    let mut cells: Vec<Cell> = Vec::new();
    for r in results {
        for o in &r.operations {
            let cell = (r.spec.op, r.spec.object_bytes, r.spec.concurrency, o.op.clone());
            if !cells.contains(&cell) {
                cells.push(cell);
            }
        }
    }
    let mut out = String::from(
        "| op | object | workers | server | MiB/s | obj/s | p50 ms | p99 ms | TTFB p50 ms | TTFB p99 ms | server CPU s/MiB | errors |\n|---|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|\n",
    );
    for (op, size, workers, kind) in &cells {
        let rows: Vec<(&S3ResultView, &OpStats)> = results
            .iter()
            .filter(|r| r.spec.op == *op && r.spec.object_bytes == *size && r.spec.concurrency == *workers)
            .filter_map(|r| r.operations.iter().find(|o| &o.op == kind).map(|o| (r, o)))
            .collect();
        let cell = format!("| {}{} | {} | {} ", kind, if *op == S3Op::Mixed { " (mixed)" } else { "" }, size_label(*size), workers);
        for (r, o) in &rows {
            out.push_str(&format!(
                "{cell}| {} | {:.1} | {:.1} | {:.2} | {:.2} | {} | {} | {} | {} |\n",
                r.spec.label,
                o.mib_per_second,
                o.objects_per_second,
                o.latency_ms.p50,
                o.latency_ms.p99,
                opt(o.ttfb_ms.map(|t| t.p50), 2),
                opt(o.ttfb_ms.map(|t| t.p99), 2),
                opt(r.server_cpu_seconds_per_mib, 4),
                o.errors
            ));
        }
        let Some((base_r, base)) = rows.iter().find(|(r, _)| r.spec.label == baseline) else { continue };
        for (r, o) in rows.iter().filter(|(r, _)| r.spec.label != baseline) {
            let ttfb = |f: fn(&Quantiles) -> f64| o.ttfb_ms.zip(base.ttfb_ms).map(|(a, b)| ratio(f(&a), f(&b)));
            out.push_str(&format!(
                "{cell}| **{} ÷ {}** | {} | {} | {} | {} | {} | {} | {} | |\n",
                r.spec.label,
                baseline,
                ratio_text(ratio(o.mib_per_second, base.mib_per_second)),
                ratio_text(ratio(o.objects_per_second, base.objects_per_second)),
                ratio_text(ratio(o.latency_ms.p50, base.latency_ms.p50)),
                ratio_text(ratio(o.latency_ms.p99, base.latency_ms.p99)),
                ratio_text(ttfb(|q| q.p50).flatten()),
                ratio_text(ttfb(|q| q.p99).flatten()),
                ratio_text(r.server_cpu_seconds_per_mib.zip(base_r.server_cpu_seconds_per_mib).and_then(|(a, b)| ratio(a, b))),
            ));
        }
    }
    Ok(out)
}

/// `a ÷ b`, when both are finite and b is not zero.
pub fn ratio(a: f64, b: f64) -> Option<f64> {
    (a.is_finite() && b.is_finite() && b != 0.0).then(|| a / b)
}

fn ratio_text(r: Option<f64>) -> String {
    r.map_or_else(|| "–".to_string(), |x| format!("{x:.2}×"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_label_exactly() {
        assert_eq!(size_label(1 << 20), "1 MiB");
        assert_eq!(size_label(64 << 20), "64 MiB");
        assert_eq!(size_label(4096), "4 KiB");
        assert_eq!(size_label(1000), "1000 B");
        assert_eq!(size_label((1 << 20) + 1), "1048577 B");
    }
}
