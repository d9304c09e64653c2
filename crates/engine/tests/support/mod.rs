//! Shared by the engine's integration tests.

use std::path::Path;
use std::sync::Arc;

use spindle_engine::{Engine, FjallEngine, FjallOptions};

/// Checks keys `0..keys` with `check` on the live engine, syncs and closes it, reopens the
/// store with `options` and checks them all again: acknowledged writes must be readable both
/// before and after recovery. Returns the reopened engine.
pub fn check_before_and_after_reopen(
    engine: Arc<FjallEngine>,
    keys: usize,
    options: impl Fn(&Path) -> FjallOptions,
    dir: &Path,
    check: impl Fn(&FjallEngine, usize),
) -> Arc<FjallEngine> {
    for i in 0..keys {
        check(&engine, i);
    }
    engine.sync().unwrap();
    drop(engine);

    let engine = FjallEngine::open(options(dir)).unwrap();
    for i in 0..keys {
        check(&engine, i);
    }
    engine
}
