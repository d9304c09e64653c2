//! GET: a key's value and metadata, or its metadata alone.

use spindle_engine::Error as EngineError;
use spindle_proto::pb::command::{Body, KeyValue};

use super::{check_key, entry_reply, metadata_kv};
use crate::reply::{engine_error, read_error, ReadResult, Reply};
use crate::security::{Caller, Permission};
use crate::state::DriveState;

/// GET (or its metadata alone).
pub fn run(state: &DriveState, caller: &Caller, kv: &KeyValue) -> ReadResult {
    let key = match check_key(state, &kv.key, false) {
        Ok(k) => k,
        Err(r) => return Ok(r),
    };
    if !caller.may(Permission::Read, Some(&key)) {
        return Ok(caller.refusal(Permission::Read));
    }
    if kv.metadata_only.unwrap_or(false) {
        return match state.engine.get_meta(&key) {
            Ok(Some(meta)) => Ok(Reply::ok(Some(Body { key_value: Some(metadata_kv(key, &meta)), ..Body::default() }))),
            Ok(None) => Ok(engine_error(EngineError::NotFound)),
            Err(e) => read_error(e),
        };
    }
    match state.engine.get(&key) {
        Ok(Some(entry)) => Ok(entry_reply(entry, true)),
        Ok(None) => Ok(engine_error(EngineError::NotFound)),
        Err(e) => read_error(e),
    }
}
