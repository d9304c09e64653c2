//! GETVERSION: a key's version alone.

use spindle_engine::Error as EngineError;
use spindle_proto::pb::command::{Body, KeyValue};

use super::readable_key;
use crate::reply::{engine_error, read_error, ReadResult, Reply};
use crate::security::Caller;
use crate::state::DriveState;

pub fn run(state: &DriveState, caller: &Caller, kv: &KeyValue) -> ReadResult {
    let key = match readable_key(state, caller, kv) {
        Ok(key) => key,
        Err(refused) => return Ok(refused),
    };
    match state.engine.get_meta(&key) {
        Ok(Some(meta)) => Ok(Reply::ok(Some(Body {
            key_value: Some(KeyValue { db_version: Some(meta.version), ..KeyValue::default() }),
            ..Body::default()
        }))),
        Ok(None) => Ok(engine_error(EngineError::NotFound)),
        Err(e) => read_error(e),
    }
}
