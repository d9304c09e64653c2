//! The simulator in the test command: a fixed budget of seeds (about a minute and a half on
//! two busy cores in a debug build), and the proof that a seed replays exactly. Longer runs:
//! `cargo run --release -p spindle-sim -- --seeds 1000` (docs/design/simulation.md).

use spindle_sim::{run, Options};

/// Seeds run by the test command, and operations per client in each.
const SEEDS: u64 = 16;
const OPS: u64 = 300;

#[test]
fn a_budget_of_seeds_keeps_every_history_linearizable() {
    let (mut operations, mut faults) = (0, 0);
    for seed in 0..SEEDS {
        let report = run(&Options { seed, ops: OPS, ..Options::default() })
            .unwrap_or_else(|failure| panic!("seed {seed}: {failure}\nreplay: cargo run -p spindle-sim -- --seed {seed} --ops {OPS}"));
        operations += report.events;
        faults += report.faults.len();
    }
    // The budget means something only if the runs did work under faults.
    assert!(operations as u64 > SEEDS * OPS, "only {operations} operations in {SEEDS} seeds");
    assert!(faults as u64 > SEEDS * 5, "only {faults} faults in {SEEDS} seeds");
}

#[test]
fn a_seed_replays_exactly() {
    let options = Options { seed: 3, ops: 150, ..Options::default() };
    let (first, second) = (run(&options).unwrap(), run(&options).unwrap());
    assert!(!first.faults.is_empty(), "seed 3 drew no fault");
    assert_eq!(first.faults, second.faults);
    assert_eq!((first.events, first.digest), (second.events, second.digest), "the same seed ran differently");
}
