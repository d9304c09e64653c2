//! The wall clock the cluster stamps its records with (a drive's last answer, a move's
//! progress) and judges their age by: the system's, unless whoever embeds the cluster sets
//! another once per process (the simulator sets its simulated clock, so that a replayed run
//! sees the same times).

use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

static WALL: OnceLock<fn() -> u64> = OnceLock::new();

/// Sets the wall clock (Unix milliseconds) for the rest of the process; false if one was set.
pub fn set_wall_clock(clock: fn() -> u64) -> bool {
    WALL.set(clock).is_ok()
}

/// Unix milliseconds now.
pub fn now_ms() -> u64 {
    match WALL.get() {
        Some(clock) => clock(),
        None => SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64),
    }
}
