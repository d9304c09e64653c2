//! GETNEXT and GETPREVIOUS: the key after or before a given one.

use bytes::Bytes;
use spindle_engine::{Error as EngineError, KeyRange};
use spindle_proto::pb::command::KeyValue;

use super::{check_key, entry_reply};
use crate::reply::{engine_error, read_error, ReadResult};
use crate::security::{Caller, Permission};
use crate::state::DriveState;

/// GETNEXT.
pub fn next(state: &DriveState, caller: &Caller, kv: &KeyValue) -> ReadResult {
    neighbour(state, caller, kv, true)
}

/// GETPREVIOUS.
pub fn previous(state: &DriveState, caller: &Caller, kv: &KeyValue) -> ReadResult {
    neighbour(state, caller, kv, false)
}

fn neighbour(state: &DriveState, caller: &Caller, kv: &KeyValue, forward: bool) -> ReadResult {
    let key = match check_key(state, &kv.key, true) {
        Ok(k) => k,
        Err(r) => return Ok(r),
    };
    if state.config.hide_out_of_scope_keys {
        return hidden_neighbour(state, caller, key, forward, kv.metadata_only.unwrap_or(false));
    }
    let found = if forward { state.engine.next(&key) } else { state.engine.previous(&key) };
    match found {
        // The neighbour's key is revealed only to a caller that may read it.
        Ok(Some(entry)) if !caller.may(Permission::Read, Some(&entry.key)) => Ok(caller.refusal(Permission::Read)),
        Ok(Some(entry)) => Ok(entry_reply(entry, !kv.metadata_only.unwrap_or(false))),
        Ok(None) => Ok(engine_error(EngineError::NotFound)),
        Err(e) => read_error(e),
    }
}

/// GETNEXT / GETPREVIOUS on a drive that hides out-of-scope keys: the nearest key the caller
/// may read, as if no other key existed.
fn hidden_neighbour(state: &DriveState, caller: &Caller, key: Bytes, forward: bool, metadata_only: bool) -> ReadResult {
    let query = if forward {
        KeyRange { start: key, start_inclusive: false, end: None, end_inclusive: false, reverse: false, max: 1 }
    } else {
        KeyRange { start: Bytes::new(), start_inclusive: true, end: Some(key), end_inclusive: false, reverse: true, max: 1 }
    };
    // A key deleted between finding it and reading it: look again (a few times; every retry
    // means a concurrent delete).
    for _ in 0..3 {
        let found = match crate::scope_view::visible_keys(state.engine.as_ref(), caller, Permission::Read, &query) {
            Ok(keys) => keys.into_iter().next(),
            Err(e) => return read_error(e),
        };
        let Some(found) = found else { return Ok(engine_error(EngineError::NotFound)) };
        match state.engine.get(&found) {
            Ok(Some(entry)) => return Ok(entry_reply(entry, !metadata_only)),
            Ok(None) => continue,
            Err(e) => return read_error(e),
        }
    }
    Ok(engine_error(EngineError::NotFound))
}
