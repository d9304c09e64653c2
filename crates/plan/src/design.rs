//! The chosen design, its predicted figures and which constraints shape it.

use serde::Serialize;

use crate::catalogue::{Catalogue, Scenario};
use crate::error::PlanError;
use crate::model::{Cap, Configuration, Model};
use crate::solve::{diagnose, solve, Objective, Solved, TOLERANCE};

#[derive(Debug, Clone, Serialize)]
pub struct Design {
    pub currency: String,
    /// False when the solver's time limit ran out: the design is the best found, not proven best.
    pub proven_optimal: bool,
    pub formulation: Formulation,
    pub lines: Vec<Line>,
    pub totals: Totals,
    pub constraints: Vec<ConstraintReport>,
    pub scenario: Scenario,
}

/// The integer program's size.
#[derive(Debug, Clone, Serialize)]
pub struct Formulation {
    /// (node type, drive type) pairs modelled by node and drive totals.
    pub aggregated_pairs: usize,
    /// Pairs whose throughput is not concave in the drive count: one count per configuration.
    pub explicit_pairs: usize,
    /// Their configurations left after removing dominated ones.
    pub explicit_configurations: usize,
    pub integer_variables: usize,
}

/// `nodes` identical nodes.
#[derive(Debug, Clone, Serialize)]
pub struct Line {
    pub nodes: u32,
    pub node_type: String,
    pub drive_type: String,
    pub drives_per_node: u32,
    /// What one of these nodes delivers and costs.
    pub per_node: Configuration,
}

#[derive(Debug, Clone, Serialize)]
pub struct Totals {
    pub nodes: u32,
    pub drives: u32,
    pub raw_capacity_tb: f64,
    pub usable_capacity_tb: f64,
    pub sequential_write_mb_s: f64,
    pub random_read_mb_s: f64,
    pub power_w: f64,
    pub capital_cost: f64,
    pub energy_cost: f64,
    pub total_cost: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Sense {
    #[serde(rename = ">=")]
    AtLeast,
    #[serde(rename = "<=")]
    AtMost,
}

#[derive(Debug, Clone, Serialize)]
pub struct ConstraintReport {
    pub name: String,
    pub sense: Sense,
    pub bound: f64,
    pub achieved: f64,
    /// How far the design is from the bound, in the bound's unit (never negative).
    pub slack: f64,
    /// A target is binding when no node of the design could be dropped without missing it; a
    /// cap or node count, when it is reached or when the optimum without it would be cheaper.
    pub binding: bool,
    pub note: String,
    /// For caps: how much cheaper the best design would be without this cap.
    pub cost_of_cap: Option<f64>,
}

/// Plans a storage tier: the cheapest design (capital plus power over the horizon) meeting the
/// scenario's targets within its caps.
pub fn plan(catalogue: &Catalogue, scenario: &Scenario) -> Result<Design, PlanError> {
    let model = Model::build(catalogue, scenario)?;
    let Some(solved) = solve(&model, Objective::Cost, &model.caps)? else {
        return Err(PlanError::Infeasible(diagnose(&model)?));
    };
    let lines: Vec<Line> = solved
        .lines
        .iter()
        .map(|(c, n)| Line {
            nodes: *n,
            node_type: catalogue.nodes[c.node].name.clone(),
            drive_type: catalogue.drives[c.drive].name.clone(),
            drives_per_node: c.drives,
            per_node: c.clone(),
        })
        .collect();
    let sum = |f: &dyn Fn(&Configuration) -> f64| solved.total(f);
    let totals = Totals {
        nodes: lines.iter().map(|l| l.nodes).sum(),
        drives: lines.iter().map(|l| l.nodes * l.drives_per_node).sum(),
        raw_capacity_tb: sum(&|c| f64::from(c.drives) * catalogue.drives[c.drive].capacity_tb),
        usable_capacity_tb: sum(&|c| c.capacity_tb),
        sequential_write_mb_s: sum(&|c| c.write_mb_s),
        random_read_mb_s: sum(&|c| c.read_mb_s),
        power_w: sum(&|c| c.power_w),
        capital_cost: sum(&|c| c.capital_cost),
        energy_cost: sum(&|c| c.energy_cost),
        total_cost: sum(&|c| c.cost()),
    };
    let constraints = constraints(catalogue, &model, &solved, &lines, totals.total_cost)?;
    Ok(Design {
        currency: catalogue.currency.clone(),
        proven_optimal: solved.proven_optimal,
        formulation: formulation(&model),
        lines,
        totals,
        constraints,
        scenario: scenario.clone(),
    })
}

fn formulation(model: &Model) -> Formulation {
    let aggregated_pairs = model.pairs.iter().filter(|p| p.aggregated).count();
    Formulation {
        aggregated_pairs,
        explicit_pairs: model.pairs.len() - aggregated_pairs,
        explicit_configurations: model.explicit.len(),
        integer_variables: 2 * aggregated_pairs + model.explicit.len(),
    }
}

fn near_zero(slack: f64, bound: f64) -> bool {
    slack <= TOLERANCE * bound.abs().max(1.0)
}

fn constraints(catalogue: &Catalogue, model: &Model, solved: &Solved, lines: &[Line], cost: f64) -> Result<Vec<ConstraintReport>, PlanError> {
    let mut reports = Vec::new();
    for (target, required) in &model.requirements {
        let achieved = solved.total(|c| c.covers(*target));
        let slack = (achieved - required).max(0.0);
        let exact = near_zero(slack, *required);
        // Dropping one node of any line would take away at least this much.
        let tight = lines.iter().all(|l| l.per_node.covers(*target) > slack);
        let note = if exact {
            "met exactly".to_string()
        } else if tight {
            "tight: dropping any one node of the design misses it".to_string()
        } else {
            format!("{slack:.3} {} to spare", target.unit())
        };
        reports.push(ConstraintReport { name: target.to_string(), sense: Sense::AtLeast, bound: *required, achieved, slack, binding: exact || tight, note, cost_of_cap: None });
    }
    for (i, (cap, limit)) in model.caps.iter().enumerate() {
        let achieved = solved.total(|c| c.uses(*cap));
        let slack = (limit - achieved).max(0.0);
        let others: Vec<(Cap, f64)> = model.caps.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, c)| *c).collect();
        let cost_without = match solve(model, Objective::Cost, &others)? {
            Some(free) => free.total(|c| c.cost()),
            None => cost,
        };
        let cost_of_cap = (cost - cost_without).max(0.0);
        let costs_money = cost_of_cap > TOLERANCE * cost.max(1.0);
        let note = if costs_money {
            format!("without it the design would cost {} less", money(cost_of_cap, &catalogue.currency))
        } else if near_zero(slack, *limit) {
            "reached, but the design would be the same without it".to_string()
        } else {
            match cap {
                Cap::CapitalCost => format!("{} to spare", money(slack, &catalogue.currency)),
                Cap::Power => format!("{slack:.1} W to spare"),
            }
        };
        let name = cap.to_string();
        reports.push(ConstraintReport { name, sense: Sense::AtMost, bound: *limit, achieved, slack, binding: costs_money || near_zero(slack, *limit), note, cost_of_cap: Some(cost_of_cap) });
    }
    for (node, max) in model.count_max.iter().enumerate() {
        let Some(max) = max else { continue };
        let used: u32 = lines.iter().filter(|l| l.per_node.node == node).map(|l| l.nodes).sum();
        let binding = used == *max;
        reports.push(ConstraintReport {
            name: format!("count_max of node \"{}\"", catalogue.nodes[node].name),
            sense: Sense::AtMost,
            bound: f64::from(*max),
            achieved: f64::from(used),
            slack: f64::from(max - used),
            binding,
            note: if binding { "all available nodes of this type are used".into() } else { format!("{} more available", max - used) },
            cost_of_cap: None,
        });
    }
    Ok(reports)
}

/// "12,345.67 USD": thousands separated, cents kept (small designs and unit costs matter).
pub fn money(amount: f64, currency: &str) -> String {
    let cents = (amount * 100.0).round() as i128;
    let (whole, fraction) = (cents.abs() / 100, cents.abs() % 100);
    let digits = whole.to_string();
    let mut grouped = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(ch);
    }
    let sign = if cents < 0 { "-" } else { "" };
    format!("{sign}{grouped}.{fraction:02}{}{currency}", if currency.is_empty() { "" } else { " " })
}

/// The design as a storage engineer reads it.
pub fn render_text(d: &Design) -> String {
    use std::fmt::Write;
    let m = |amount: f64| money(amount, &d.currency);
    let mut out = String::new();
    let optimality = if d.proven_optimal { "proven optimal" } else { "best found within the time limit, NOT proven optimal" };
    let f = &d.formulation;
    let _ = writeln!(out, "Design ({optimality}; {} integer variables):", f.integer_variables);
    for l in &d.lines {
        let c = &l.per_node;
        let limit = |by_node: bool| if by_node { "node ceiling" } else { "drives" };
        let _ = writeln!(out, "  {} x node \"{}\" with {} x drive \"{}\"", l.nodes, l.node_type, l.drives_per_node, l.drive_type);
        let _ = writeln!(
            out,
            "      each: {:.3} TB usable, sequential-write {:.1} MB/s ({}), random-read {:.1} MB/s ({}), {:.1} W, capital {}, power over the horizon {}",
            c.capacity_tb,
            c.write_mb_s,
            limit(c.write_limited_by_node),
            c.read_mb_s,
            limit(c.read_limited_by_node),
            c.power_w,
            m(c.capital_cost),
            m(c.energy_cost)
        );
    }
    let t = &d.totals;
    let _ = writeln!(out, "Totals: {} nodes, {} drives; {:.3} TB raw, {:.3} TB usable", t.nodes, t.drives, t.raw_capacity_tb, t.usable_capacity_tb);
    let _ = writeln!(out, "Predicted: sequential-write {:.1} MB/s, random-read {:.1} MB/s, power {:.1} W", t.sequential_write_mb_s, t.random_read_mb_s, t.power_w);
    let years = d.scenario.costs.years.unwrap_or(0.0);
    let _ = writeln!(out, "Cost: capital {} + power {} over {years} years (PUE {}) = {}", m(t.capital_cost), m(t.energy_cost), d.scenario.costs.pue, m(t.total_cost));
    let _ = writeln!(out, "Constraints:");
    for c in &d.constraints {
        let sense = match c.sense {
            Sense::AtLeast => ">=",
            Sense::AtMost => "<=",
        };
        let status = if c.binding { "BINDING" } else { "slack" };
        let _ = writeln!(out, "  {:<32} {sense} {:>14.3}  achieved {:>14.3}  {status}: {}", c.name, c.bound, c.achieved, c.note);
    }
    out
}
