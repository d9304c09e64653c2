//! Redundancy schemes the planner weighs: R replicas (the cluster's replicated pool) or a
//! DATA+PARITY erasure code (its coded pools). A scheme sets the usable share of raw capacity,
//! the bytes drives write per client byte, how many nodes a stripe or replica set needs (one
//! per node, so that a node's loss costs each at most one piece), and what a repair reads:
//! to rebuild a lost drive's bytes a replica is copied once, a coded shard is computed from
//! DATA others.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use crate::catalogue::{Catalogue, Scenario};
use crate::design::{plan, Design};
use crate::error::PlanError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Redundancy {
    Replicas(u8),
    Code { data: u8, parity: u8 },
}

impl FromStr for Redundancy {
    type Err = String;

    /// `R3` (three replicas) or `4+2` (a code).
    fn from_str(s: &str) -> Result<Redundancy, String> {
        let bad = || format!("{s:?}: a redundancy is R<replicas> (R3) or DATA+PARITY (4+2)");
        let t = s.trim();
        if let Some(r) = t.strip_prefix(['R', 'r']) {
            let n: u8 = r.trim_start_matches('=').parse().map_err(|_| bad())?;
            return if (1..=7).contains(&n) { Ok(Redundancy::Replicas(n)) } else { Err(bad()) };
        }
        let (d, p) = t.split_once('+').ok_or_else(bad)?;
        let (data, parity): (u8, u8) = (d.trim().parse().map_err(|_| bad())?, p.trim().parse().map_err(|_| bad())?);
        if !(1..=32).contains(&data) || !(1..=16).contains(&parity) {
            return Err(bad());
        }
        Ok(Redundancy::Code { data, parity })
    }
}

impl fmt::Display for Redundancy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Redundancy::Replicas(n) => write!(f, "R{n}"),
            Redundancy::Code { data, parity } => write!(f, "{data}+{parity}"),
        }
    }
}

impl Redundancy {
    pub fn usable_fraction(&self) -> f64 {
        match *self {
            Redundancy::Replicas(n) => 1.0 / f64::from(n),
            Redundancy::Code { data, parity } => f64::from(data) / f64::from(data + parity),
        }
    }

    /// Bytes the drives write per client byte.
    pub fn write_amplification(&self) -> f64 {
        1.0 / self.usable_fraction()
    }

    /// Bytes read from the survivors per byte rebuilt after a drive is lost.
    pub fn repair_reads(&self) -> f64 {
        match *self {
            Redundancy::Replicas(_) => 1.0,
            Redundancy::Code { data, .. } => f64::from(data),
        }
    }

    /// Drives (or nodes) that may be lost without losing data.
    pub fn losses_tolerated(&self) -> u8 {
        match *self {
            Redundancy::Replicas(n) => n - 1,
            Redundancy::Code { parity, .. } => parity,
        }
    }

    /// Nodes a replica set or stripe spreads over, one piece per node.
    pub fn width(&self) -> u32 {
        match *self {
            Redundancy::Replicas(n) => u32::from(n),
            Redundancy::Code { data, parity } => u32::from(data) + u32::from(parity),
        }
    }

    /// `scenario` with this scheme's capacity share, write amplification and node count.
    pub fn applied(&self, scenario: &Scenario) -> Scenario {
        let mut s = scenario.clone();
        s.targets.usable_fraction = self.usable_fraction();
        s.targets.write_amplification = self.write_amplification();
        s.targets.nodes_min = s.targets.nodes_min.max(self.width());
        s
    }
}

/// One scheme's design and what it costs per usable TB.
#[derive(Debug, Clone, Serialize)]
pub struct Weighed {
    pub redundancy: String,
    pub usable_fraction: f64,
    pub losses_tolerated: u8,
    /// TB read from the survivors to rebuild one lost TB.
    pub repair_reads_per_tb: f64,
    pub design: Design,
    pub cost_per_usable_tb: f64,
}

/// The cheapest design under each scheme, for the same targets; a scheme that cannot meet
/// them (within the caps) gives its error.
pub fn compare(catalogue: &Catalogue, scenario: &Scenario, schemes: &[Redundancy]) -> Vec<(Redundancy, Result<Weighed, PlanError>)> {
    schemes.iter().map(|r| (*r, weigh(catalogue, scenario, *r))).collect()
}

fn weigh(catalogue: &Catalogue, scenario: &Scenario, r: Redundancy) -> Result<Weighed, PlanError> {
    let design = plan(catalogue, &r.applied(scenario))?;
    let usable = design.totals.usable_capacity_tb.max(f64::MIN_POSITIVE);
    Ok(Weighed {
        redundancy: r.to_string(),
        usable_fraction: r.usable_fraction(),
        losses_tolerated: r.losses_tolerated(),
        repair_reads_per_tb: r.repair_reads(),
        cost_per_usable_tb: design.totals.total_cost / usable,
        design,
    })
}

/// Two tiers for one workload: `hot_share` of the capacity in a hot tier that serves the
/// workload's reads and writes, the rest in a cold tier that takes the same write stream (every
/// object moves down in time) and few reads.
#[derive(Debug, Clone, Serialize)]
pub struct TwoTier {
    pub hot: Weighed,
    pub cold: Weighed,
    pub total_cost: f64,
    pub cost_per_usable_tb: f64,
    /// The same capacity and targets in the hot tier's scheme alone, for comparison.
    pub hot_only_cost: Option<f64>,
}

pub fn two_tier(catalogue: &Catalogue, scenario: &Scenario, hot_share: f64, hot: Redundancy, cold: Redundancy) -> Result<TwoTier, PlanError> {
    let share = hot_share.clamp(0.0, 1.0);
    let mut hot_scenario = scenario.clone();
    hot_scenario.targets.capacity_tb = scenario.targets.capacity_tb * share;
    let mut cold_scenario = scenario.clone();
    cold_scenario.targets.capacity_tb = scenario.targets.capacity_tb * (1.0 - share);
    cold_scenario.targets.random_read_mb_s = 0.0;
    let hot_w = weigh(catalogue, &hot_scenario, hot)?;
    let cold_w = weigh(catalogue, &cold_scenario, cold)?;
    let total_cost = hot_w.design.totals.total_cost + cold_w.design.totals.total_cost;
    let usable = (hot_w.design.totals.usable_capacity_tb + cold_w.design.totals.usable_capacity_tb).max(f64::MIN_POSITIVE);
    let hot_only_cost = weigh(catalogue, scenario, hot).ok().map(|w| w.design.totals.total_cost);
    Ok(TwoTier { hot: hot_w, cold: cold_w, total_cost, cost_per_usable_tb: total_cost / usable, hot_only_cost })
}

/// The comparison as a table.
pub fn render_compare(rows: &[(Redundancy, Result<Weighed, PlanError>)]) -> String {
    let mut out = format!("{:<8} {:>7} {:>6} {:>7} {:>6} {:>8} {:>10} {:>14} {:>14} {:>12}\n", "SCHEME", "USABLE", "LOSSES", "REPAIR", "NODES", "DRIVES", "RAW TB", "TOTAL COST", "PER USABLE TB", "WRITE MB/S");
    for (r, w) in rows {
        match w {
            Ok(w) => {
                let t = &w.design.totals;
                let cur = &w.design.currency;
                out.push_str(&format!(
                    "{:<8} {:>6.0}% {:>6} {:>6.0}x {:>6} {:>8} {:>10.1} {:>14} {:>14} {:>12.0}\n",
                    w.redundancy,
                    w.usable_fraction * 100.0,
                    w.losses_tolerated,
                    w.repair_reads_per_tb,
                    t.nodes,
                    t.drives,
                    t.raw_capacity_tb,
                    crate::design::money(t.total_cost, cur),
                    crate::design::money(w.cost_per_usable_tb, cur),
                    t.sequential_write_mb_s
                ));
            }
            Err(e) => out.push_str(&format!("{r:<8} no design: {e}\n")),
        }
    }
    out.push_str("REPAIR: TB read from the survivors per TB rebuilt after a drive is lost.\n");
    out
}

pub fn render_two_tier(t: &TwoTier) -> String {
    let cur = &t.hot.design.currency;
    let mut out = String::new();
    for (name, w) in [("hot", &t.hot), ("cold", &t.cold)] {
        let d = &w.design.totals;
        out.push_str(&format!(
            "{name} tier ({}): {} nodes, {} drives, {:.1} TB usable of {:.1} raw, {} in all\n",
            w.redundancy,
            d.nodes,
            d.drives,
            d.usable_capacity_tb,
            d.raw_capacity_tb,
            crate::design::money(d.total_cost, cur)
        ));
    }
    out.push_str(&format!("both: {} in all, {} per usable TB", crate::design::money(t.total_cost, cur), crate::design::money(t.cost_per_usable_tb, cur)));
    if let Some(c) = t.hot_only_cost {
        out.push_str(&format!("; the hot tier's scheme alone: {}", crate::design::money(c, cur)));
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemes_parse_and_cost_what_they_should() {
        let r3: Redundancy = "R3".parse().unwrap();
        let ec: Redundancy = "4+2".parse().unwrap();
        assert_eq!((r3.to_string(), ec.to_string()), ("R3".into(), "4+2".into()));
        assert!((r3.write_amplification() - 3.0).abs() < 1e-9 && (ec.write_amplification() - 1.5).abs() < 1e-9);
        assert_eq!((r3.losses_tolerated(), ec.losses_tolerated()), (2, 2));
        assert_eq!((r3.repair_reads(), ec.repair_reads()), (1.0, 4.0));
        assert_eq!(ec.applied(&Scenario::default()).targets.nodes_min, 6);
        for bad in ["R0", "R9", "4", "0+2", "4+0", "x+y"] {
            assert!(bad.parse::<Redundancy>().is_err(), "{bad}");
        }
    }
}
