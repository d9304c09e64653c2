//! MEDIAOPTIMIZE: compacts the store, which also gives a full drive its space back after
//! deletes (the engine's `compact`). fjall compacts whole keyspaces, so the range only bounds
//! what the caller must be allowed to touch (RANGE, checked with the request type's).

use spindle_proto::StatusCode;

use crate::reply::{engine_error, Reply};
use crate::state::DriveState;

/// MEDIAOPTIMIZE: compacts the store (fjall compacts whole keyspaces, so the range only
/// bounds what the caller must be allowed to touch).
pub async fn run(state: &std::sync::Arc<DriveState>) -> Reply {
    let engine = state.engine.clone();
    let result = tokio::task::spawn_blocking(move || engine.compact()).await;
    // It freed space (or tried): the next write must see the filesystem as it is now.
    state.capacity.invalidate();
    match result {
        Ok(Ok(())) => Reply::ok(None),
        Ok(Err(e)) => engine_error(e),
        Err(e) => Reply::error(StatusCode::InternalError, e.to_string()),
    }
}
