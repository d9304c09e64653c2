//! A seed replays exactly: two runs of one seed, one after the other, make the same history.
//! In a test binary of its own, so that no other simulation runs in the process meanwhile
//! (runs on other threads of one process can change a run's course: docs/design/simulation.md,
//! "Known limits").

use spindle_sim::{run, Options};

#[test]
fn a_seed_replays_exactly() {
    let options = Options { seed: 5, ops: 150, ..Options::default() };
    let (first, second) = (run(&options).unwrap(), run(&options).unwrap());
    assert!(!first.faults.is_empty(), "seed 5 drew no fault");
    assert_eq!(first.faults, second.faults);
    assert_eq!((first.events, first.digest), (second.events, second.digest), "the same seed ran differently");
}
