//! GETKEYRANGE: the keys of a range the caller may see.

use spindle_engine::KeyRange;
use spindle_proto::pb::command::{Body, Range};

use super::check_key;
use crate::reply::{invalid, read_error, ReadResult, Reply};
use crate::security::{Caller, Permission};
use crate::state::DriveState;

/// GETKEYRANGE.
pub fn run(state: &DriveState, caller: &Caller, range: &Range) -> ReadResult {
    if !caller.may(Permission::Range, None) {
        return Ok(caller.refusal(Permission::Range));
    }
    let limit = state.config.limits.max_key_range_count;
    let max = match range.max_returned {
        None => limit,
        Some(n) if n < 1 => return Ok(invalid(format!("maxReturned must be at least 1, got {n}"))),
        Some(n) if n as u32 > limit => {
            return Ok(invalid(format!("maxReturned {n} exceeds maxKeyRangeCount {limit}")));
        }
        Some(n) => n as u32,
    };
    let start = match check_key(state, &range.start_key, true) {
        Ok(k) => k,
        Err(r) => return Ok(r),
    };
    let end = match &range.end_key {
        None => None,
        Some(_) => match check_key(state, &range.end_key, true) {
            Ok(k) => Some(k),
            Err(r) => return Ok(r),
        },
    };
    let query = KeyRange {
        start,
        start_inclusive: range.start_key_inclusive.unwrap_or(false),
        end,
        end_inclusive: range.end_key_inclusive.unwrap_or(false),
        reverse: range.reverse.unwrap_or(false),
        max: max as usize,
    };
    if state.config.hide_out_of_scope_keys {
        return match crate::scope_view::visible_keys(state.engine.as_ref(), caller, Permission::Range, &query) {
            Ok(keys) => Ok(Reply::ok(Some(Body { range: Some(Range { keys, ..Range::default() }), ..Body::default() }))),
            Err(e) => read_error(e),
        };
    }
    match state.engine.keys(&query) {
        Ok(mut keys) => {
            // Keys outside the caller's RANGE scopes are never revealed.
            keys.retain(|k| caller.may(Permission::Range, Some(k)));
            Ok(Reply::ok(Some(Body { range: Some(Range { keys, ..Range::default() }), ..Body::default() })))
        }
        Err(e) => read_error(e),
    }
}
