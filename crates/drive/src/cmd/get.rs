//! GET: a key's value and metadata, or its metadata alone.

use spindle_engine::Error as EngineError;
use spindle_proto::pb::command::{Body, KeyValue};

use super::{entry_reply, metadata_kv, readable_key};
use crate::reply::{engine_error, read_error, ReadResult, Reply};
use crate::security::Caller;
use crate::state::DriveState;

/// GET (or its metadata alone).
pub fn run(state: &DriveState, caller: &Caller, kv: &KeyValue) -> ReadResult {
    let key = match readable_key(state, caller, kv) {
        Ok(key) => key,
        Err(refused) => return Ok(refused),
    };
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
