//! GETVERSION: a key's version alone.

use spindle_engine::Error as EngineError;
use spindle_proto::pb::command::{Body, KeyValue};

use super::check_key;
use crate::reply::{engine_error, read_error, ReadResult, Reply};
use crate::security::{Caller, Permission};
use crate::state::DriveState;

pub fn run(state: &DriveState, caller: &Caller, kv: &KeyValue) -> ReadResult {
    let key = match check_key(state, &kv.key, false) {
        Ok(k) => k,
        Err(r) => return Ok(r),
    };
    if !caller.may(Permission::Read, Some(&key)) {
        return Ok(caller.refusal(Permission::Read));
    }
    match state.engine.get_meta(&key) {
        Ok(Some(meta)) => Ok(Reply::ok(Some(Body {
            key_value: Some(KeyValue { db_version: Some(meta.version), ..KeyValue::default() }),
            ..Body::default()
        }))),
        Ok(None) => Ok(engine_error(EngineError::NotFound)),
        Err(e) => read_error(e),
    }
}
