//! The integer program and its solution with `good_lp` on the pure-Rust `microlp` solver.
//!
//! Variables: n_c >= 0, integer, the number of nodes of configuration c (node type, drive type,
//! drives per node). Objective: sum of n_c x cost_c (capital + power over the horizon).
//! Constraints: for each target t, sum of n_c x covers_c(t) >= required(t); for each cap,
//! sum of n_c x uses_c(cap) <= limit; for each node type with a count_max, its nodes <= count_max.

use good_lp::{constraint, microlp, variable, Expression, ProblemVariables, ResolutionError, Solution, SolutionStatus, SolverModel, Variable, WithTimeLimit};

use crate::error::{Infeasibility, CapShortfall, PlanError};
use crate::model::{Cap, Model, Target};

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

/// Node counts per configuration of the model.
#[derive(Debug, Clone, PartialEq)]
pub struct Solved {
    pub counts: Vec<u32>,
    pub proven_optimal: bool,
}

impl Solved {
    /// Sum over the design of a per-node quantity.
    pub fn total(&self, model: &Model, per_node: impl Fn(&crate::model::Configuration) -> f64) -> f64 {
        self.counts.iter().zip(&model.configurations).map(|(n, c)| f64::from(*n) * per_node(c)).sum()
    }
}

/// The optimum under `caps` (a subset of the model's, or none); `None` when nothing is feasible.
pub fn solve(model: &Model, objective: Objective, caps: &[(Cap, f64)]) -> Result<Option<Solved>, PlanError> {
    let mut vars = ProblemVariables::new();
    let xs: Vec<Variable> = (0..model.configurations.len()).map(|c| vars.add(variable().integer().min(0).max(model.upper_bound(c)))).collect();
    let weighted = |per_node: &dyn Fn(&crate::model::Configuration) -> f64| -> Expression { xs.iter().zip(&model.configurations).map(|(x, c)| per_node(c) * *x).sum() };
    let goal = match objective {
        Objective::Cost => weighted(&|c| c.cost()),
        Objective::Least(cap) => weighted(&|c| c.uses(cap)),
    };
    let mut problem = vars.minimise(goal).using(microlp).with_time_limit(SOLVE_SECONDS_MAX);
    for (target, required) in &model.requirements {
        problem = problem.with(constraint!(weighted(&|c| c.covers(*target)) >= *required));
    }
    for (cap, limit) in caps {
        problem = problem.with(constraint!(weighted(&|c| c.uses(*cap)) <= *limit));
    }
    for (node, max) in model.count_max.iter().enumerate() {
        if let Some(max) = max {
            problem = problem.with(constraint!(weighted(&|c| if c.node == node { 1.0 } else { 0.0 }) <= *max));
        }
    }
    let solution = match problem.solve() {
        Ok(solution) => solution,
        Err(ResolutionError::Infeasible) => return Ok(None),
        Err(e) => return Err(PlanError::Solver(e.to_string())),
    };
    let proven_optimal = matches!(solution.status(), SolutionStatus::Optimal);
    let mut counts = Vec::with_capacity(xs.len());
    for x in &xs {
        let value = solution.value(*x);
        if !(value >= -TOLERANCE && (value - value.round()).abs() < 1e-6) {
            return Err(PlanError::Solver(format!("a node count came back as {value}, not a whole number")));
        }
        counts.push(value.round() as u32);
    }
    let solved = Solved { counts, proven_optimal };
    check(model, &solved, caps)?;
    Ok(Some(solved))
}

/// The solver works in floating point: confirm the rounded design meets every constraint.
fn check(model: &Model, solved: &Solved, caps: &[(Cap, f64)]) -> Result<(), PlanError> {
    for (target, required) in &model.requirements {
        let achieved = solved.total(model, |c| c.covers(*target));
        if achieved < required * (1.0 - TOLERANCE) {
            return Err(PlanError::Solver(format!("the solver's design gives {achieved} {} of {target}, under the {required} required", target.unit())));
        }
    }
    for (cap, limit) in caps {
        let used = solved.total(model, |c| c.uses(*cap));
        if used > limit * (1.0 + TOLERANCE) {
            return Err(PlanError::Solver(format!("the solver's design uses {used} against the {cap} of {limit}")));
        }
    }
    for (node, max) in model.count_max.iter().enumerate() {
        let nodes: u32 = solved.counts.iter().zip(&model.configurations).filter(|(_, c)| c.node == node).map(|(n, _)| n).sum();
        if max.is_some_and(|max| nodes > max) {
            return Err(PlanError::Solver(format!("the solver's design uses {nodes} nodes of a type limited to {max:?}")));
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
        let minimum = least.total(model, |c| c.uses(*cap));
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
        let best = model.configurations.iter().filter(|c| c.node == node).map(|c| c.covers(target)).fold(0.0, f64::max);
        match max {
            _ if best == 0.0 => {}
            None => return f64::INFINITY,
            Some(max) => total += f64::from(*max) * best,
        }
    }
    total
}
