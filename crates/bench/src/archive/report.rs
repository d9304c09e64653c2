//! Text output of archive runs: Markdown tables of the fitted laws and of the measured rows,
//! and the merge of several result files (one per envelope, repeats to their median).

use super::envelope::Envelope;
use super::{fit, model, ArchiveError, ModelSummary, Row, SCHEMA_VERSION};

/// The rows of `spindle bench archive run` result documents (JSON), to merge runs made on
/// separate (fresh) drives, one per envelope. Repeats (rows of the same envelope, level and
/// workload) become one: the run with the median MB/s (the lower middle for an even count), so
/// every figure of a row still comes from one run. Rows keep the order they first appear in.
pub fn rows_of(documents: &[serde_json::Value]) -> Result<Vec<Row>, ArchiveError> {
    let mut groups: Vec<Vec<Row>> = Vec::new();
    for row in all_rows(documents)? {
        match groups.iter_mut().find(|g| g[0].envelope == row.envelope && g[0].level == row.level && g[0].workload == row.workload) {
            Some(g) => g.push(row),
            None => groups.push(vec![row]),
        }
    }
    Ok(groups
        .into_iter()
        .filter_map(|mut g| {
            g.sort_by(|a, b| a.mb_per_second.total_cmp(&b.mb_per_second));
            let middle = (g.len() - 1) / 2;
            g.into_iter().nth(middle)
        })
        .collect())
}

fn all_rows(documents: &[serde_json::Value]) -> Result<Vec<Row>, ArchiveError> {
    let mut rows = Vec::new();
    for (i, d) in documents.iter().enumerate() {
        if d["kind"] != "archive" || d["schema_version"] != SCHEMA_VERSION {
            return Err(ArchiveError::Invalid(format!("document {}: not a schema-{SCHEMA_VERSION} archive result", i + 1)));
        }
        let part: Vec<Row> = serde_json::from_value(d["rows"].clone()).map_err(|e| ArchiveError::Invalid(format!("document {}: {e}", i + 1)))?;
        rows.extend(part);
    }
    Ok(rows)
}

/// The rows as a Markdown table (one row per envelope, level and workload).
pub fn table(rows: &[Row]) -> String {
    let mut out = String::from("| envelope | level | workload | fileset files | fileset MB | drive used MB | ops | MB/s | files/s | errors | cache dropped |\n|---|--:|---|--:|--:|--:|--:|--:|--:|--:|---|\n");
    for r in rows {
        out.push_str(&format!(
            "| {} | {:.0}% | {} | {} | {:.1} | {:.1} | {} | {:.1} | {:.1} | {} | {} |\n",
            r.envelope.name(),
            r.level * 100.0,
            r.workload,
            r.fileset_files,
            r.fileset_bytes as f64 / 1e6,
            r.drive_used_bytes as f64 / 1e6,
            r.measured.files,
            r.mb_per_second,
            r.files_per_second,
            r.measured.errors,
            if r.page_cache_dropped { "yes" } else { "no" }
        ));
    }
    out
}

/// The fitted laws as Markdown: both families' fits and the three envelope laws.
pub fn model_table(m: &ModelSummary) -> String {
    let e = &m.envelopes;
    let mut out = format!(
        "Model from {} ({} files); workloads use the {} fit; envelopes: {} bootstrap replicates of {} files, the fits at the {}th and {}th percentile of mean file size.\n",
        m.source, m.files, e.family, e.replicates, e.resample_files, e.percentile, 100.0 - e.percentile
    );
    if m.fits.generalized_gamma.model.power_p <= fit::POWER_MIN * 1.01 {
        out.push_str("The generalized Gamma's power p sits at its lower search bound: the data are close to lognormal (the family's p -> 0 limit), so its scale a is tiny and only meaningful with d and p.\n");
    }
    out.push('\n');
    out.push_str("| law | scale a (bytes) | d = k p | p | empty files | mean size (bytes) | log-likelihood | AIC |\n|---|--:|--:|--:|--:|--:|--:|--:|\n");
    let law = |name: &str, s: &model::SizeModel, fit: Option<&fit::Fit>| {
        let (ll, aic) = fit.map_or(("".to_string(), "".to_string()), |f| (format!("{:.1}", f.log_likelihood), format!("{:.1}", f.aic)));
        format!("| {name} | {:.4e} | {:.4} | {:.4} | {:.2}% | {:.0} | {ll} | {aic} |\n", s.scale_bytes, s.stacy_d(), s.power_p, s.zero_fraction * 100.0, s.mean_bytes())
    };
    out.push_str(&law("gamma fit", &m.fits.gamma.model, Some(&m.fits.gamma)));
    out.push_str(&law("generalized gamma fit", &m.fits.generalized_gamma.model, Some(&m.fits.generalized_gamma)));
    for e in [Envelope::Small, Envelope::Large] {
        out.push_str(&law(&format!("envelope: {}", e.name()), m.envelopes.model(e), None));
    }
    out
}
