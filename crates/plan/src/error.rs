//! What can go wrong: a malformed catalogue, unusable targets, or an instance with no design.

use std::path::PathBuf;

use crate::goals::{Cap, Target};

/// The catalogue file, or a result file it refers to, cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CatalogueError {
    #[error("{path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}: not a valid catalogue: {message}")]
    Syntax { path: PathBuf, message: String },
    /// A field's value is out of its range: `context` names the entry ("drive \"hdd-8tb\"").
    #[error("{context}: {field} {problem}")]
    Field { context: String, field: &'static str, problem: String },
    #[error("the catalogue lists no {0}")]
    Empty(&'static str),
    #[error("two {kind} entries are named \"{name}\"")]
    DuplicateName { kind: &'static str, name: String },
    /// A throughput figure does not say where its number comes from, or says it twice.
    #[error("{context}: {problem}")]
    Figure { context: String, problem: String },
    /// A bench result file a figure refers to cannot be read or does not hold the figure.
    #[error("{context}: {path}: {problem}")]
    Reference { context: String, path: PathBuf, problem: String },
}

/// The instance cannot be planned (before or after solving).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    #[error("targets: {field} {problem}")]
    Target { field: &'static str, problem: String },
    #[error("nothing to plan: give at least one of capacity_tb, sequential_write_mb_s, random_read_mb_s")]
    NoTarget,
    /// A throughput curve cannot be evaluated for the asked workload.
    #[error("drive \"{drive}\", {curve}: {problem}")]
    Curve { drive: String, curve: &'static str, problem: String },
    #[error("{count} configurations (node type x drive type x drives per node) exceed the limit of {max}: fewer bays or types")]
    TooManyConfigurations { count: usize, max: usize },
    #[error("infeasible: {0}")]
    Infeasible(#[from] Infeasibility),
    #[error("the MILP solver failed: {0}")]
    Solver(String),
}

/// Why no design meets the targets within the caps.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Infeasibility {
    /// Even with unlimited spend (the node types' `count_max` bound how many nodes exist).
    #[error("{target} target of {required:.3} {unit} cannot be met even with unlimited spend: the node counts the catalogue allows reach at most {maximum:.3} {unit}", unit = target.unit())]
    TargetUnreachable { target: Target, required: f64, maximum: f64 },
    #[error("each target can be met alone, but not all together within the node counts the catalogue allows (count_max)")]
    TargetsTogether,
    /// The cap is below the least its quantity can be for a design that meets the targets.
    #[error("{}", shortfalls.iter().map(|s| s.to_string()).collect::<Vec<_>>().join("; "))]
    CapsTooLow { shortfalls: Vec<CapShortfall> },
    #[error("each cap can be met alone, but not {} together", caps.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(" and "))]
    CapsTogether { caps: Vec<Cap> },
}

/// One cap that no design meeting the targets can stay under.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CapShortfall {
    pub cap: Cap,
    pub limit: f64,
    /// The least the capped quantity can be while meeting every target.
    pub minimum: f64,
}

impl std::fmt::Display for CapShortfall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let amount = |v: f64| match self.cap.unit() {
            "" => format!("{v:.2}"),
            unit => format!("{v:.2} {unit}"),
        };
        write!(f, "{} of {} is too low: meeting the targets needs at least {}", self.cap, amount(self.limit), amount(self.minimum))
    }
}
