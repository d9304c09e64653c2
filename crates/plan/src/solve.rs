//! The integer program and its solution with `good_lp` on the pure-Rust `microlp` solver.
//!
//! Two kinds of variables, both integer (docs/design/planner.md):
//! - for a pair (node type, drive type) whose throughput is concave in the drive count: n, its
//!   nodes, and D, their drives (n <= D <= bays x n), the drives spread evenly over the nodes;
//!   its throughput w obeys w <= s_k x D + b_k x n for every segment k of the per-node curve
//!   (the perspective of the curve, exact at whole n and D for an even spread);
//! - for any other pair, one count per configuration (drives per node), dominated ones removed.
//!
//! Objective: capital plus power over the horizon. Constraints: each target's sum >= required,
//! each cap's sum <= limit, each node type's nodes <= its count_max.

use good_lp::{constraint, microlp, variable, Expression, ProblemVariables, ResolutionError, Solution, SolutionStatus, SolverModel, Variable, WithTimeLimit};

use crate::error::{CapShortfall, Infeasibility, PlanError};
use crate::model::{Cap, Configuration, Model, Pair, Target};

/// Wall-clock limit of one solve; the best design found by then is reported as not proven optimal.
pub const SOLVE_SECONDS_MAX: f64 = 60.0;
/// Relative tolerance when checking the solver's answer against the constraints.
pub const TOLERANCE: f64 = 1e-9;

/// What a solve minimises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Objective {
    /// Capital plus power over the horizon: the planner's objective.
    Cost,
    /// One cap's quantity alone: the least it can be while meeting the targets.
    Least(Cap),
}

impl Objective {
    fn per(self, c: &Configuration) -> f64 {
        match self {
            Objective::Cost => c.cost(),
            Objective::Least(cap) => c.uses(cap),
        }
    }
}

/// A design: how many nodes of which configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Solved {
    pub lines: Vec<(Configuration, u32)>,
    pub proven_optimal: bool,
}

impl Solved {
    /// Sum over the design of a per-node quantity.
    pub fn total(&self, per_node: impl Fn(&Configuration) -> f64) -> f64 {
        self.lines.iter().map(|(c, n)| f64::from(*n) * per_node(c)).sum()
    }

    pub fn nodes_of(&self, node: usize) -> u32 {
        self.lines.iter().filter(|(c, _)| c.node == node).map(|(_, n)| n).sum()
    }
}

/// An aggregated pair's variables.
struct PairVars {
    nodes: Variable,
    drives: Variable,
}

/// The optimum under `caps` (a subset of the model's, or none); `None` when nothing is feasible.
pub fn solve(model: &Model, objective: Objective, caps: &[(Cap, f64)]) -> Result<Option<Solved>, PlanError> {
    let mut vars = ProblemVariables::new();
    let counts: Vec<Variable> = (0..model.explicit.len()).map(|c| vars.add(variable().integer().min(0).max(model.explicit_upper_bound(c)))).collect();
    let pairs: Vec<(usize, PairVars)> = (0..model.pairs.len())
        .filter(|p| model.pairs[*p].aggregated)
        .map(|p| {
            let most = model.pair_upper_bound(p);
            let nodes = vars.add(variable().integer().min(0).max(most));
            let drives = vars.add(variable().integer().min(0).max(f64::from(most) * f64::from(model.pairs[p].bays())));
            (p, PairVars { nodes, drives })
        })
        .collect();
    // Throughput of each aggregated pair, per throughput target.
    let mut throughput: Vec<(usize, Target, Variable)> = Vec::new();
    for (p, _) in &pairs {
        for (target, _) in model.requirements.iter().filter(|(t, _)| matches!(t, Target::SequentialWrite | Target::RandomRead)) {
            throughput.push((*p, *target, vars.add(variable().min(0))));
        }
    }
    // Sum over the design of a per-node quantity that is affine in the drive count.
    let affine = |per_node: &dyn Fn(&Configuration) -> f64| -> Expression {
        let mut e: Expression = counts.iter().zip(&model.explicit).map(|(x, c)| per_node(c) * *x).sum();
        for (p, v) in &pairs {
            let pair = &model.pairs[*p];
            e += per_node(&pair.node_part) * v.nodes + per_node(&pair.drive_part) * v.drives;
        }
        e
    };
    let goal = affine(&|c| objective.per(c));
    let mut problem = vars.minimise(goal).using(microlp).with_time_limit(SOLVE_SECONDS_MAX);
    for (p, v) in &pairs {
        let bays = f64::from(model.pairs[*p].bays());
        problem = problem.with(constraint!(v.drives >= v.nodes)).with(constraint!(v.drives <= bays * v.nodes));
    }
    for (p, target, w) in &throughput {
        let (nodes, drives) = pairs.iter().find(|(q, _)| q == p).map(|(_, v)| (v.nodes, v.drives)).ok_or_else(|| PlanError::Solver("internal: a throughput variable without its pair".into()))?;
        for (slope, intercept) in segments(&model.pairs[*p], *target) {
            problem = problem.with(constraint!(*w <= slope * drives + intercept * nodes));
        }
    }
    for (target, required) in &model.requirements {
        let mut sum: Expression = counts.iter().zip(&model.explicit).map(|(x, c)| c.covers(*target) * *x).sum();
        for (p, v) in &pairs {
            let pair = &model.pairs[*p];
            sum += match target {
                Target::Capacity => pair.drive_part.capacity_tb * v.drives,
                Target::Nodes => 1.0 * v.nodes,
                Target::SequentialWrite | Target::RandomRead => throughput.iter().filter(|(q, t, _)| q == p && t == target).map(|(_, _, w)| *w).sum(),
            };
        }
        problem = problem.with(constraint!(sum >= *required));
    }
    for (cap, limit) in caps {
        problem = problem.with(constraint!(affine(&|c| c.uses(*cap)) <= *limit));
    }
    for (node, max) in model.count_max.iter().enumerate() {
        if let Some(max) = max {
            let mut nodes: Expression = counts.iter().zip(&model.explicit).filter(|(_, c)| c.node == node).map(|(x, _)| *x).sum();
            for (_, v) in pairs.iter().filter(|(p, _)| model.pairs[*p].node == node) {
                nodes += v.nodes;
            }
            problem = problem.with(constraint!(nodes <= *max));
        }
    }
    let solution = match problem.solve() {
        Ok(solution) => solution,
        Err(ResolutionError::Infeasible) => return Ok(None),
        Err(e) => return Err(PlanError::Solver(e.to_string())),
    };
    let whole = |x: Variable| -> Result<u32, PlanError> {
        let value = solution.value(x);
        if value >= -TOLERANCE && (value - value.round()).abs() < 1e-6 {
            Ok(value.round() as u32)
        } else {
            Err(PlanError::Solver(format!("a count came back as {value}, not a whole number")))
        }
    };
    let mut lines = Vec::new();
    for (x, c) in counts.iter().zip(&model.explicit) {
        lines.push((c.clone(), whole(*x)?));
    }
    for (p, v) in &pairs {
        lines.extend(spread(&model.pairs[*p], whole(v.nodes)?, whole(v.drives)?)?);
    }
    lines.retain(|(_, n)| *n > 0);
    let solved = Solved { lines, proven_optimal: matches!(solution.status(), SolutionStatus::Optimal) };
    check(model, &solved, caps)?;
    Ok(Some(solved))
}

/// The lines (slope per drive, intercept per node) whose minimum is the pair's per-node
/// throughput curve, interpolated between whole drive counts: one per step from k to k + 1
/// drives (k = 0 .. bays - 1), collinear steps merged.
fn segments(pair: &Pair, target: Target) -> Vec<(f64, f64)> {
    let mut values = vec![0.0];
    values.extend(pair.configurations.iter().map(|c| c.covers(target)));
    let mut lines: Vec<(f64, f64)> = Vec::new();
    for (k, w) in values.windows(2).enumerate() {
        let slope = w[1] - w[0];
        let line = (slope, w[0] - slope * k as f64);
        if lines.last().is_none_or(|last| (last.0 - line.0).abs() > 1e-12 * line.0.abs().max(1.0) || (last.1 - line.1).abs() > 1e-9 * line.1.abs().max(1.0)) {
            lines.push(line);
        }
    }
    lines
}

/// `drives` drives over `nodes` nodes as evenly as possible: some nodes one drive more.
fn spread(pair: &Pair, nodes: u32, drives: u32) -> Result<Vec<(Configuration, u32)>, PlanError> {
    if nodes == 0 {
        return Ok(Vec::new());
    }
    let (each, more) = (drives / nodes, drives % nodes);
    if each == 0 || (each == pair.bays() && more > 0) || each > pair.bays() {
        return Err(PlanError::Solver(format!("{drives} drives do not fit {nodes} nodes of {} bays", pair.bays())));
    }
    let mut lines = vec![(pair.with(each).clone(), nodes - more)];
    if more > 0 {
        lines.push((pair.with(each + 1).clone(), more));
    }
    Ok(lines)
}

/// The solver works in floating point: confirm the rounded design meets every constraint.
fn check(model: &Model, solved: &Solved, caps: &[(Cap, f64)]) -> Result<(), PlanError> {
    for (target, required) in &model.requirements {
        let achieved = solved.total(|c| c.covers(*target));
        if achieved < required * (1.0 - TOLERANCE) {
            return Err(PlanError::Solver(format!("the solver's design gives {achieved} {} of {target}, under the {required} required", target.unit())));
        }
    }
    for (cap, limit) in caps {
        let used = solved.total(|c| c.uses(*cap));
        if used > limit * (1.0 + TOLERANCE) {
            return Err(PlanError::Solver(format!("the solver's design uses {used} against the {cap} of {limit}")));
        }
    }
    for (node, max) in model.count_max.iter().enumerate() {
        let nodes = solved.nodes_of(node);
        if let Some(max) = max.filter(|max| nodes > *max) {
            return Err(PlanError::Solver(format!("the solver's design uses {nodes} nodes of a type limited to {max}")));
        }
    }
    Ok(())
}

/// Why the model with all its caps has no solution: a target no spend reaches, targets that
/// only the node counts keep apart, caps below the least the targets need, or caps that only
/// conflict together.
pub fn diagnose(model: &Model) -> Result<Infeasibility, PlanError> {
    for (target, required) in &model.requirements {
        let maximum = reachable(model, *target);
        if maximum < *required {
            return Ok(Infeasibility::TargetUnreachable { target: *target, required: *required, maximum });
        }
    }
    if solve(model, Objective::Cost, &[])?.is_none() {
        return Ok(Infeasibility::TargetsTogether);
    }
    let mut shortfalls = Vec::new();
    for (cap, limit) in &model.caps {
        let Some(least) = solve(model, Objective::Least(*cap), &[])? else {
            return Ok(Infeasibility::TargetsTogether);
        };
        let minimum = least.total(|c| c.uses(*cap));
        if minimum > limit * (1.0 + TOLERANCE) {
            shortfalls.push(CapShortfall { cap: *cap, limit: *limit, minimum });
        }
    }
    if shortfalls.is_empty() {
        Ok(Infeasibility::CapsTogether { caps: model.caps.iter().map(|(cap, _)| *cap).collect() })
    } else {
        Ok(Infeasibility::CapsTooLow { shortfalls })
    }
}

/// The most of `target` any design can have: unbounded unless every node type has a count_max.
fn reachable(model: &Model, target: Target) -> f64 {
    let mut total = 0.0;
    for (node, max) in model.count_max.iter().enumerate() {
        let best = model.pairs.iter().filter(|p| p.node == node).map(|p| p.covers_max(target)).fold(0.0, f64::max);
        match max {
            _ if best == 0.0 => {}
            None => return f64::INFINITY,
            Some(max) => total += f64::from(*max) * best,
        }
    }
    total
}
