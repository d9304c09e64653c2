//! Storage-tier design by integer programming.
//!
//! Given a catalogue of node types and drive types (cost, power, capacity, measured throughput
//! curves) and targets (usable capacity, sequential-write and random-read MB/s, with an optional
//! capital-cost or power cap), [`plan`] chooses how many nodes of each type and how many drives
//! per node, minimising capital cost plus the cost of power over a horizon. The formulation is
//! in `docs/design/planner.md`. This crate knows nothing of the network or of
//! the other Spindle crates: bench results reach it as JSON files.

#![forbid(unsafe_code)]

pub mod catalogue;
pub mod curve;
pub mod design;
pub mod error;
pub mod goals;
pub mod figures;
pub mod model;
pub mod redundancy;
pub mod solve;

pub use catalogue::{Catalogue, Scenario};
pub use design::{plan, render_text, Design};
pub use error::{CatalogueError, Infeasibility, PlanError};
