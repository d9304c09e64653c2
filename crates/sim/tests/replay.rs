//! A seed replays exactly: runs of one seed make the same history, whatever ran in the process
//! before them. One test, its runs one after another: tasks spawned beside a run would take
//! numbers from tokio's counter in the middle of it.

use spindle_sim::{run, Options};

#[test]
fn a_seed_replays_exactly_whatever_ran_before_it() {
    // A run with faults, twice.
    let options = Options { seed: 5, ops: 150, ..Options::default() };
    let (first, second) = (run(&options).unwrap(), run(&options).unwrap());
    assert!(!first.faults.is_empty(), "seed 5 drew no fault");
    assert_eq!(first.faults, second.faults);
    assert_eq!((first.events, first.digest), (second.events, second.digest), "the same seed ran differently");

    // With S3 gateways: their data, upload and version ids come from the seed too, and so do
    // their crashes.
    let options = Options { seed: 3, ops: 100, gateways: 2, gateway_crashes: true, multipart: true, ..Options::default() };
    let (first, second) = (run(&options).unwrap(), run(&options).unwrap());
    assert!(first.faults.iter().any(|f| f.contains("gateway")), "seed 3 crashed no gateway");
    assert_eq!(first.faults, second.faults);
    assert_eq!((first.events, first.digest), (second.events, second.digest), "the same seed with gateways ran differently");

    // Tokio numbers tasks from one counter for the whole process, and how a crashed host's
    // tasks are dropped depends on their numbers (docs/design/simulation.md, "Replay"): seed
    // 42 with member changes ran three different courses depending on the counter's remainder
    // by four at its start, before runs aligned it.
    let options = Options { ops: 200, ..Options::churn(42) };
    let first = run(&options).unwrap();
    for shift in 1..4 {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(async {
            for _ in 0..shift {
                tokio::spawn(async {}).await.unwrap();
            }
        });
        let again = run(&options).unwrap();
        assert_eq!((first.events, first.digest), (again.events, again.digest), "seed 42 ran differently after {shift} more tasks");
    }
}
