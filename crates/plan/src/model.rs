//! From catalogue and scenario to the integer program's data: every configuration (node type,
//! drive type, drives per node) with what one such node delivers and costs, precomputed so the
//! program stays linear in the node counts, grouped into pairs (node type, drive type) that
//! `solve` models by node and drive totals when their throughput is concave in the drive count.

use crate::catalogue::{check_amount, Catalogue, Scenario};
use crate::error::{CatalogueError, PlanError};
pub use crate::goals::{Cap, Target};

/// 365.25 days of 24 hours: power is paid for every hour of the horizon.
pub const HOURS_PER_YEAR: f64 = 8766.0;
/// More configurations than are worth enumerating (and, for pairs that cannot be aggregated,
/// than the pure-Rust solver handles in reasonable time).
pub const CONFIGURATIONS_MAX: usize = 4096;
/// The most nodes of one configuration the model considers (the solver's integers are 32-bit);
/// targets whose smallest design needs more are refused as a likely unit mistake.
pub const NODES_MAX: u32 = 10_000_000;

/// One node of node type `node` holding `drives` drives of drive type `drive`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Configuration {
    pub node: usize,
    pub drive: usize,
    pub drives: u32,
    /// Usable TB (raw x usable fraction).
    pub capacity_tb: f64,
    /// Client-visible MB/s: min(node ceiling, drives' curve) / write amplification.
    pub write_mb_s: f64,
    pub read_mb_s: f64,
    /// The node's ceiling, not its drives, sets the figure.
    pub write_limited_by_node: bool,
    pub read_limited_by_node: bool,
    pub power_w: f64,
    pub capital_cost: f64,
    /// Electricity over the horizon, PUE included.
    pub energy_cost: f64,
}

impl Configuration {
    /// The objective's coefficient: capital plus power over the horizon.
    pub fn cost(&self) -> f64 {
        self.capital_cost + self.energy_cost
    }

    /// What one node of this configuration adds towards `target`.
    pub fn covers(&self, target: Target) -> f64 {
        match target {
            Target::Capacity => self.capacity_tb,
            Target::SequentialWrite => self.write_mb_s,
            Target::RandomRead => self.read_mb_s,
            Target::Nodes => 1.0,
        }
    }

    pub fn uses(&self, cap: Cap) -> f64 {
        match cap {
            Cap::CapitalCost => self.capital_cost,
            Cap::Power => self.power_w,
        }
    }

    /// At least as good for every target, at most as costly for the objective and every cap.
    fn at_least_as_good_as(&self, other: &Configuration) -> bool {
        Target::ALL.iter().all(|t| self.covers(*t) >= other.covers(*t))
            && self.capital_cost <= other.capital_cost
            && self.power_w <= other.power_w
            && self.cost() <= other.cost()
    }
}

/// One node type filled with one drive type: its configurations for 1 to `bays` drives.
#[derive(Debug, Clone)]
pub struct Pair {
    pub node: usize,
    pub drive: usize,
    /// Index k - 1 holds the configuration with k drives.
    pub configurations: Vec<Configuration>,
    /// The node without drives: only its capital cost, power and energy cost are used.
    pub node_part: Configuration,
    /// What each drive adds: usable capacity, capital cost, power, energy cost (throughput is
    /// not additive per drive and comes from the configurations).
    pub drive_part: Configuration,
    /// Throughput is concave in the drive count, so the pair is modelled by node and drive
    /// totals (`solve`); otherwise each configuration gets its own count.
    pub aggregated: bool,
}

impl Pair {
    pub fn bays(&self) -> u32 {
        self.configurations.len() as u32
    }

    /// The least one node of the pair adds towards `target`, whatever its drive count.
    pub fn covers_min(&self, target: Target) -> f64 {
        self.configurations.iter().map(|c| c.covers(target)).fold(f64::INFINITY, f64::min)
    }

    pub fn covers_max(&self, target: Target) -> f64 {
        self.configurations.iter().map(|c| c.covers(target)).fold(0.0, f64::max)
    }

    /// The configuration with `drives` drives (1 to bays).
    pub fn with(&self, drives: u32) -> &Configuration {
        &self.configurations[drives as usize - 1]
    }
}

/// The integer program's data.
#[derive(Debug, Clone)]
pub struct Model {
    pub pairs: Vec<Pair>,
    /// Configurations of the pairs that are not aggregated, dominated ones removed.
    pub explicit: Vec<Configuration>,
    /// The targets above zero, with their required amount.
    pub requirements: Vec<(Target, f64)>,
    pub caps: Vec<(Cap, f64)>,
    /// Per node type, the most nodes of it (its `count_max`).
    pub count_max: Vec<Option<u32>>,
}

impl Model {
    pub fn build(catalogue: &Catalogue, scenario: &Scenario) -> Result<Model, PlanError> {
        let (requirements, caps, energy_per_w) = check_scenario(scenario)?;
        let t = &scenario.targets;
        let count = catalogue.nodes.iter().map(|n| n.bays as usize * catalogue.drives.len()).sum::<usize>();
        if count > CONFIGURATIONS_MAX {
            return Err(PlanError::TooManyConfigurations { count, max: CONFIGURATIONS_MAX });
        }
        let mut pairs = Vec::new();
        for (n, node) in catalogue.nodes.iter().enumerate() {
            for (d, drive) in catalogue.drives.iter().enumerate() {
                let part = |drives: u32, capital_cost: f64, power_w: f64, capacity_tb: f64| Configuration {
                    node: n,
                    drive: d,
                    drives,
                    capacity_tb,
                    write_mb_s: 0.0,
                    read_mb_s: 0.0,
                    write_limited_by_node: false,
                    read_limited_by_node: false,
                    power_w,
                    capital_cost,
                    energy_cost: power_w * energy_per_w,
                };
                let node_part = part(0, node.capital_cost, node.power_w, 0.0);
                let drive_part = part(1, drive.capital_cost, drive.power_w, drive.capacity_tb * t.usable_fraction);
                let mut configurations = Vec::with_capacity(node.bays as usize);
                for k in 1..=node.bays {
                    let curve_error = |curve: &'static str| move |problem: String| PlanError::Curve { drive: drive.name.clone(), curve, problem };
                    let write_drives = drive.sequential_write.at(k, t.value_size).map_err(curve_error("sequential_write"))?;
                    let read_drives = drive.random_read.at(k, t.value_size).map_err(curve_error("random_read"))?;
                    let (write_ceiling, read_ceiling) = (node.write_ceiling_mb_s(), node.read_ceiling_mb_s());
                    let drives = f64::from(k);
                    configurations.push(Configuration {
                        write_mb_s: write_drives.min(write_ceiling) / t.write_amplification,
                        read_mb_s: read_drives.min(read_ceiling),
                        write_limited_by_node: write_ceiling < write_drives,
                        read_limited_by_node: read_ceiling < read_drives,
                        ..part(k, node.capital_cost + drives * drive.capital_cost, node.power_w + drives * drive.power_w, drives * drive_part.capacity_tb)
                    });
                }
                let aggregated = concave(configurations.iter().map(|c| c.write_mb_s)) && concave(configurations.iter().map(|c| c.read_mb_s));
                pairs.push(Pair { node: n, drive: d, configurations, node_part, drive_part, aggregated });
            }
        }
        let count_max: Vec<Option<u32>> = catalogue.nodes.iter().map(|n| n.count_max).collect();
        let explicit = pairs.iter().filter(|p| !p.aggregated).flat_map(|p| p.configurations.iter().cloned()).collect();
        let explicit = without_dominated(explicit, &count_max);
        for (target, required) in &requirements {
            let best = pairs.iter().map(|p| p.covers_max(*target)).fold(0.0, f64::max);
            if required / best > f64::from(NODES_MAX) {
                return Err(PlanError::Target {
                    field: "targets",
                    problem: format!("{target} of {required} {} needs more than {NODES_MAX} nodes of the best configuration: check the units", target.unit()),
                });
            }
        }
        Ok(Model { pairs, explicit, requirements, caps, count_max })
    }

    /// The most nodes an optimal design holds of something whose every node adds at least
    /// `covers(target)`: enough to meet every target alone, since one node fewer would still
    /// meet them and cost no more.
    fn enough(&self, node: usize, covers: impl Fn(Target) -> f64) -> u32 {
        let enough = self.requirements.iter().map(|(t, required)| (required / covers(*t)).ceil()).fold(0.0, f64::max);
        let bound = enough.min(f64::from(NODES_MAX)) as u32;
        self.count_max[node].map_or(bound, |m| bound.min(m))
    }

    pub fn explicit_upper_bound(&self, c: usize) -> u32 {
        let config = &self.explicit[c];
        self.enough(config.node, |t| config.covers(t))
    }

    pub fn pair_upper_bound(&self, p: usize) -> u32 {
        let pair = &self.pairs[p];
        self.enough(pair.node, |t| pair.covers_min(t))
    }
}

/// Non-increasing steps from (0, 0) through the values for 1, 2, ... drives.
fn concave(values: impl Iterator<Item = f64>) -> bool {
    let values: Vec<f64> = std::iter::once(0.0).chain(values).collect();
    let scale = values.iter().fold(1.0, |m: f64, v| m.max(v.abs()));
    values.windows(3).all(|w| (w[2] - w[1]) - (w[1] - w[0]) <= 1e-9 * scale)
}

/// Validated targets (those above zero), caps, and the energy cost of one W over the horizon.
type CheckedScenario = (Vec<(Target, f64)>, Vec<(Cap, f64)>, f64);

fn check_scenario(s: &Scenario) -> Result<CheckedScenario, PlanError> {
    let field = |e: CatalogueError| match e {
        CatalogueError::Field { field, problem, .. } => PlanError::Target { field, problem },
        other => PlanError::Target { field: "targets", problem: other.to_string() },
    };
    let t = &s.targets;
    check_amount("targets", "capacity_tb", t.capacity_tb, false).map_err(field)?;
    check_amount("targets", "sequential_write_mb_s", t.sequential_write_mb_s, false).map_err(field)?;
    check_amount("targets", "random_read_mb_s", t.random_read_mb_s, false).map_err(field)?;
    if !(t.usable_fraction > 0.0 && t.usable_fraction <= 1.0) {
        return Err(PlanError::Target { field: "usable_fraction", problem: format!("must be above 0 and at most 1, got {}", t.usable_fraction) });
    }
    if !(t.write_amplification.is_finite() && t.write_amplification >= 1.0) {
        return Err(PlanError::Target { field: "write_amplification", problem: format!("must be a finite number of at least 1, got {}", t.write_amplification) });
    }
    let requirements: Vec<(Target, f64)> = [
        (Target::Capacity, t.capacity_tb),
        (Target::SequentialWrite, t.sequential_write_mb_s),
        (Target::RandomRead, t.random_read_mb_s),
        (Target::Nodes, f64::from(t.nodes_min)),
    ]
    .into_iter()
    .filter(|(_, required)| *required > 0.0)
    .collect();
    if requirements.iter().all(|(target, _)| *target == Target::Nodes) {
        return Err(PlanError::NoTarget);
    }
    let mut caps = Vec::new();
    for (cap, name, limit) in [(Cap::CapitalCost, "capital_cost_max", s.caps.capital_cost_max), (Cap::Power, "power_w_max", s.caps.power_w_max)] {
        if let Some(limit) = limit {
            check_amount("caps", name, limit, true).map_err(field)?;
            caps.push((cap, limit));
        }
    }
    let c = &s.costs;
    let years = c.years.ok_or(PlanError::Target { field: "costs.years", problem: "is not set (the horizon over which power is paid; 0 for capital cost only)".into() })?;
    let price = c.electricity_per_kwh.ok_or(PlanError::Target { field: "costs.electricity_per_kwh", problem: "is not set".into() })?;
    check_amount("costs", "years", years, false).map_err(field)?;
    check_amount("costs", "electricity_per_kwh", price, false).map_err(field)?;
    if !(c.pue.is_finite() && c.pue >= 1.0) {
        return Err(PlanError::Target { field: "costs.pue", problem: format!("must be a finite number of at least 1, got {}", c.pue) });
    }
    let energy_per_w = HOURS_PER_YEAR * years / 1000.0 * price * c.pue;
    Ok((requirements, caps, energy_per_w))
}

/// Drops every configuration another one is at least as good as (the later of two equal ones):
/// replacing its nodes by the other's keeps every target met, every cap kept and the cost no
/// higher, so an optimum without it exists. The replacement must be possible, so a
/// configuration of another node type only replaces it when that type has no `count_max`.
fn without_dominated(configurations: Vec<Configuration>, count_max: &[Option<u32>]) -> Vec<Configuration> {
    let dominated = |i: usize, a: &Configuration| {
        configurations.iter().enumerate().any(|(j, b)| {
            j != i && (b.node == a.node || count_max[b.node].is_none()) && b.at_least_as_good_as(a) && (j < i || !a.at_least_as_good_as(b))
        })
    };
    configurations.iter().enumerate().filter(|(i, a)| !dominated(*i, a)).map(|(_, a)| a.clone()).collect()
}
