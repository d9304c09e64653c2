//! SET_POWER_LEVEL: operational, hibernate (only this command accepted), or shutdown.

use std::sync::atomic::Ordering;

use spindle_proto::pb::command::PowerLevel;

use crate::reply::{invalid, Reply};
use crate::state::DriveState;

/// SET_POWER_LEVEL.
pub fn run(state: &DriveState, level: Option<i32>) -> Reply {
    match level.and_then(|l| PowerLevel::try_from(l).ok()) {
        Some(l @ (PowerLevel::Operational | PowerLevel::Hibernate)) => {
            state.power_level.store(l as i32, Ordering::Release);
            state.event(format!("power level {}", l.as_str_name()));
            Reply::ok(None)
        }
        Some(PowerLevel::Shutdown) => {
            state.power_level.store(PowerLevel::Shutdown as i32, Ordering::Release);
            state.event("shutdown requested by SET_POWER_LEVEL".into());
            // notify_one stores a permit, so the waiter sees it even if it is not waiting yet.
            state.shutdown.notify_one();
            Reply::ok(None)
        }
        _ => invalid("power level must be OPERATIONAL, HIBERNATE or SHUTDOWN"),
    }
}
