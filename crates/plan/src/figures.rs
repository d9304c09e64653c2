//! Where a throughput figure comes from: inline, a `spindle bench paper` result file, or any
//! JSON result file with a JSON pointer (`spindle bench archive` results and the like).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::error::CatalogueError;

/// The `spindle bench paper` result schema this reader understands (`schema_version`).
pub const PAPER_SCHEMA_VERSION: u64 = 1;

/// A row of a `spindle bench paper` result file: experiment name and row label (the value size
/// in bytes for the value-size sweeps, e.g. "sequential-write" / "1048576").
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaperRef {
    pub path: PathBuf,
    pub experiment: String,
    /// The row's label; defaults to the point's `value_size`.
    pub label: Option<String>,
}

/// Any number in any JSON file, addressed by an RFC 6901 JSON pointer.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonRef {
    pub path: PathBuf,
    pub pointer: String,
}

/// Result files read once per catalogue, keyed by resolved path.
#[derive(Default)]
pub struct ResultFiles {
    base: PathBuf,
    loaded: HashMap<PathBuf, Value>,
}

impl ResultFiles {
    /// Relative paths in the catalogue are relative to the catalogue's directory.
    pub fn new(base: &Path) -> Self {
        ResultFiles { base: base.to_path_buf(), loaded: HashMap::new() }
    }

    fn load(&mut self, context: &str, path: &Path) -> Result<(PathBuf, &Value), CatalogueError> {
        let full = self.base.join(path);
        if !self.loaded.contains_key(&full) {
            let reference = |problem: String| CatalogueError::Reference { context: context.to_string(), path: full.clone(), problem };
            let text = std::fs::read_to_string(&full).map_err(|e| reference(e.to_string()))?;
            let json: Value = serde_json::from_str(&text).map_err(|e| reference(format!("not JSON: {e}")))?;
            self.loaded.insert(full.clone(), json);
        }
        let value = &self.loaded[&full];
        Ok((full, value))
    }

    /// The number at `pointer`; `origin` says where it came from, for the report.
    pub fn json(&mut self, context: &str, r: &JsonRef) -> Result<(f64, String), CatalogueError> {
        let (full, json) = self.load(context, &r.path)?;
        let found = json.pointer(&r.pointer);
        let number = found.and_then(Value::as_f64).ok_or_else(|| CatalogueError::Reference {
            context: context.to_string(),
            path: full.clone(),
            problem: match found {
                None => format!("nothing at JSON pointer \"{}\"", r.pointer),
                Some(v) => format!("JSON pointer \"{}\" holds {v}, not a number", r.pointer),
            },
        })?;
        Ok((number, format!("{}#{}", full.display(), r.pointer)))
    }

    /// `result.megabytes_per_second` of the row `experiment`/`label` of a bench paper file.
    pub fn paper(&mut self, context: &str, r: &PaperRef, label: &str) -> Result<(f64, String), CatalogueError> {
        let (full, json) = self.load(context, &r.path)?;
        let fail = |problem: String| CatalogueError::Reference { context: context.to_string(), path: full.clone(), problem };
        match json.get("schema_version").and_then(Value::as_u64) {
            Some(PAPER_SCHEMA_VERSION) => {}
            Some(v) => return Err(fail(format!("bench paper schema_version {v}; this planner reads version {PAPER_SCHEMA_VERSION}"))),
            None => return Err(fail("not a `spindle bench paper` result (no schema_version)".into())),
        }
        let rows = json.get("rows").and_then(Value::as_array).ok_or_else(|| fail("no \"rows\" array".into()))?;
        let of_experiment: Vec<&Value> = rows.iter().filter(|row| row.get("experiment").and_then(Value::as_str) == Some(r.experiment.as_str())).collect();
        if of_experiment.is_empty() {
            return Err(fail(format!("no rows of experiment \"{}\"", r.experiment)));
        }
        let row = of_experiment.iter().find(|row| row.get("label").and_then(Value::as_str) == Some(label)).ok_or_else(|| {
            let labels: Vec<&str> = of_experiment.iter().filter_map(|row| row.get("label").and_then(Value::as_str)).collect();
            fail(format!("experiment \"{}\" has no row labelled \"{label}\" (labels: {})", r.experiment, labels.join(", ")))
        })?;
        // A run whose operations failed measured errors, not throughput.
        if let Some(errors) = row.pointer("/result/errors").and_then(Value::as_u64).filter(|e| *e > 0) {
            return Err(fail(format!("row \"{}\"/\"{label}\" had {errors} failed operations: its MB/s is not a throughput", r.experiment)));
        }
        let mb_s = row
            .pointer("/result/megabytes_per_second")
            .and_then(Value::as_f64)
            .ok_or_else(|| fail(format!("row \"{}\"/\"{label}\" has no result.megabytes_per_second", r.experiment)))?;
        Ok((mb_s, format!("{} {} {label}", full.display(), r.experiment)))
    }
}
