//! YCSB: the core workloads A-F with YCSB's semantics (operation mix, request distributions,
//! key naming, field layout). This module holds the generators and workload definitions; the
//! runner that drives them against targets comes with the rest of the bench lab.

pub mod generators;
pub mod runner;
pub mod workload;
