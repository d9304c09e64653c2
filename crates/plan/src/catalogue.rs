//! The catalogue file (TOML): node types, drive types with their throughput curves, and the
//! scenario (targets, caps, costs) that command-line flags may override.

use std::collections::HashSet;
use std::path::Path;

use serde::Deserialize;

use crate::curve::{Curve, Point};
use crate::error::CatalogueError;
use crate::figures::{JsonRef, PaperRef, ResultFiles};

/// More bays than any enclosure has (the largest JBODs hold about a hundred drives): a typo.
pub const BAYS_MAX: u32 = 1024;

/// A server, enclosure or Kinetic chassis that holds drives.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct NodeType {
    pub name: String,
    /// Purchase price of the node without drives.
    pub capital_cost: f64,
    /// Draw of the node without drives, W.
    pub power_w: f64,
    pub bays: u32,
    /// The node's network, MB/s each way (caps both reads and writes).
    pub network_mb_s: Option<f64>,
    /// Other write ceiling of the node (CPU, controller), MB/s.
    pub write_mb_s_max: Option<f64>,
    /// Other read ceiling of the node, MB/s.
    pub read_mb_s_max: Option<f64>,
    /// How many of these nodes can be had (stock, rack space); none: no limit.
    pub count_max: Option<u32>,
}

impl NodeType {
    /// The most the node moves in writes, whatever its drives do.
    pub fn write_ceiling_mb_s(&self) -> f64 {
        self.network_mb_s.unwrap_or(f64::INFINITY).min(self.write_mb_s_max.unwrap_or(f64::INFINITY))
    }

    pub fn read_ceiling_mb_s(&self) -> f64 {
        self.network_mb_s.unwrap_or(f64::INFINITY).min(self.read_mb_s_max.unwrap_or(f64::INFINITY))
    }
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct DriveType {
    pub name: String,
    pub capital_cost: f64,
    /// Average draw under load, W.
    pub power_w: f64,
    /// Raw capacity, TB (10^12 bytes).
    pub capacity_tb: f64,
    pub sequential_write: Curve,
    pub random_read: Curve,
}

/// What the design must deliver. Throughputs are client-visible MB/s (10^6 bytes/s).
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Targets {
    /// Usable capacity, TB.
    pub capacity_tb: f64,
    /// Usable share of raw capacity: 1/3 for three replicas, 8/10 for 8+2 erasure coding.
    pub usable_fraction: f64,
    pub sequential_write_mb_s: f64,
    pub random_read_mb_s: f64,
    /// Bytes the drives write per client byte (replicas, parity): 3 for three replicas.
    pub write_amplification: f64,
    /// The workload's value (file or chunk) size, bytes, for curves measured per value size.
    pub value_size: Option<u64>,
    /// At least this many nodes (e.g. one per replica, to survive a node's loss).
    pub nodes_min: u32,
}

impl Default for Targets {
    fn default() -> Self {
        Targets { capacity_tb: 0.0, usable_fraction: 1.0, sequential_write_mb_s: 0.0, random_read_mb_s: 0.0, write_amplification: 1.0, value_size: None, nodes_min: 0 }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Caps {
    /// Most the equipment may cost to buy.
    pub capital_cost_max: Option<f64>,
    /// Most the equipment may draw, W (IT power, before PUE).
    pub power_w_max: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Costs {
    /// Horizon over which power is paid for.
    pub years: Option<f64>,
    pub electricity_per_kwh: Option<f64>,
    /// Power usage effectiveness: facility draw per W of equipment (cooling, distribution).
    pub pue: f64,
}

impl Default for Costs {
    fn default() -> Self {
        Costs { years: None, electricity_per_kwh: None, pue: 1.0 }
    }
}

/// Targets, caps and costs: in the catalogue file, overridable from the command line.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Scenario {
    pub targets: Targets,
    pub caps: Caps,
    pub costs: Costs,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Catalogue {
    /// Label printed beside money amounts ("USD", "EUR", ...).
    pub currency: String,
    pub nodes: Vec<NodeType>,
    pub drives: Vec<DriveType>,
    pub scenario: Scenario,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogueFile {
    #[serde(default)]
    currency: String,
    #[serde(default)]
    node: Vec<NodeType>,
    #[serde(default)]
    drive: Vec<DriveFile>,
    #[serde(default)]
    targets: Targets,
    #[serde(default)]
    caps: Caps,
    #[serde(default)]
    costs: Costs,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DriveFile {
    name: String,
    capital_cost: f64,
    power_w: f64,
    capacity_tb: f64,
    sequential_write: CurveFile,
    random_read: CurveFile,
}

/// A curve is one MB/s-per-drive figure or a list of measured points.
#[derive(Deserialize)]
#[serde(untagged)]
enum CurveFile {
    PerDrive(f64),
    Points(Vec<PointFile>),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PointFile {
    /// Drives in the node when measured (default 1).
    drives: Option<u32>,
    value_size: Option<u64>,
    /// The figure: exactly one of these three.
    mb_s: Option<f64>,
    bench_paper: Option<PaperRef>,
    result: Option<JsonRef>,
}

impl Catalogue {
    /// Reads a catalogue file; result files it refers to are read relative to its directory.
    pub fn load(path: &Path) -> Result<Catalogue, CatalogueError> {
        let text = std::fs::read_to_string(path).map_err(|source| CatalogueError::Read { path: path.to_path_buf(), source })?;
        let base = path.parent().unwrap_or(Path::new("."));
        Catalogue::parse(&text, path, base)
    }

    /// `path` is for messages; `base` is where relative result-file paths start.
    pub fn parse(text: &str, path: &Path, base: &Path) -> Result<Catalogue, CatalogueError> {
        let file: CatalogueFile = toml::from_str(text).map_err(|e| CatalogueError::Syntax { path: path.to_path_buf(), message: e.to_string() })?;
        if file.node.is_empty() {
            return Err(CatalogueError::Empty("node types ([[node]])"));
        }
        if file.drive.is_empty() {
            return Err(CatalogueError::Empty("drive types ([[drive]])"));
        }
        unique_names("node", file.node.iter().map(|n| n.name.as_str()))?;
        unique_names("drive", file.drive.iter().map(|d| d.name.as_str()))?;
        for node in &file.node {
            check_node(node)?;
        }
        let mut results = ResultFiles::new(base);
        let drives = file.drive.into_iter().map(|d| drive(d, &mut results)).collect::<Result<Vec<_>, _>>()?;
        Ok(Catalogue { currency: file.currency, nodes: file.node, drives, scenario: Scenario { targets: file.targets, caps: file.caps, costs: file.costs } })
    }
}

fn unique_names<'a>(kind: &'static str, names: impl Iterator<Item = &'a str>) -> Result<(), CatalogueError> {
    let mut seen = HashSet::new();
    for name in names {
        if !seen.insert(name) {
            return Err(CatalogueError::DuplicateName { kind, name: name.to_string() });
        }
    }
    Ok(())
}

/// `value` must be finite and at least zero (`positive`: above zero).
pub(crate) fn check_amount(context: &str, field: &'static str, value: f64, positive: bool) -> Result<(), CatalogueError> {
    let ok = value.is_finite() && if positive { value > 0.0 } else { value >= 0.0 };
    if ok {
        return Ok(());
    }
    let wanted = if positive { "a positive finite number" } else { "a finite number, zero or more" };
    Err(CatalogueError::Field { context: context.to_string(), field, problem: format!("must be {wanted}, got {value}") })
}

fn check_node(node: &NodeType) -> Result<(), CatalogueError> {
    let context = format!("node \"{}\"", node.name);
    check_amount(&context, "capital_cost", node.capital_cost, false)?;
    check_amount(&context, "power_w", node.power_w, false)?;
    if node.bays == 0 || node.bays > BAYS_MAX {
        return Err(CatalogueError::Field { context, field: "bays", problem: format!("must be 1 to {BAYS_MAX}, got {}", node.bays) });
    }
    for (field, ceiling) in [("network_mb_s", node.network_mb_s), ("write_mb_s_max", node.write_mb_s_max), ("read_mb_s_max", node.read_mb_s_max)] {
        if let Some(value) = ceiling {
            check_amount(&context, field, value, true)?;
        }
    }
    Ok(())
}

fn drive(d: DriveFile, results: &mut ResultFiles) -> Result<DriveType, CatalogueError> {
    let context = format!("drive \"{}\"", d.name);
    check_amount(&context, "capital_cost", d.capital_cost, false)?;
    check_amount(&context, "power_w", d.power_w, false)?;
    check_amount(&context, "capacity_tb", d.capacity_tb, true)?;
    let sequential_write = curve(&format!("{context}, sequential_write"), d.sequential_write, results)?;
    let random_read = curve(&format!("{context}, random_read"), d.random_read, results)?;
    Ok(DriveType { name: d.name, capital_cost: d.capital_cost, power_w: d.power_w, capacity_tb: d.capacity_tb, sequential_write, random_read })
}

fn curve(context: &str, c: CurveFile, results: &mut ResultFiles) -> Result<Curve, CatalogueError> {
    let points = match c {
        CurveFile::PerDrive(mb_s) => vec![Point { drives: 1, value_size: None, mb_s, origin: "inline".into() }],
        CurveFile::Points(points) => points.into_iter().map(|p| point(context, p, results)).collect::<Result<Vec<_>, _>>()?,
    };
    Curve::new(context, points)
}

fn point(context: &str, p: PointFile, results: &mut ResultFiles) -> Result<Point, CatalogueError> {
    let figure = |problem: String| CatalogueError::Figure { context: context.to_string(), problem };
    let (mb_s, origin) = match (p.mb_s, p.bench_paper, p.result) {
        (Some(mb_s), None, None) => (mb_s, "inline".to_string()),
        (None, Some(paper), None) => {
            let label = match (&paper.label, p.value_size) {
                (Some(label), _) => label.clone(),
                (None, Some(size)) => size.to_string(),
                (None, None) => return Err(figure("bench_paper needs a label, or a value_size on the point".into())),
            };
            results.paper(context, &paper, &label)?
        }
        (None, None, Some(json)) => results.json(context, &json)?,
        _ => return Err(figure("each point needs exactly one of mb_s, bench_paper = { path, experiment }, result = { path, pointer }".into())),
    };
    Ok(Point { drives: p.drives.unwrap_or(1), value_size: p.value_size, mb_s, origin })
}
