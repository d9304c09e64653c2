//! PUT: a key's value and metadata, written through the engine's writer.

use bytes::Bytes;
use spindle_engine::{Meta, WriteOp};
use spindle_proto::pb::command::KeyValue;
use spindle_proto::{StatusCode, Synchronization};

use super::{check_key, check_version, synchronization, write_check, Writes};
use crate::reply::{invalid, Reply};
use crate::security::{Caller, Permission};
use crate::state::DriveState;

/// Checks a PUT and hands it to `to` (towards the engine), or refuses it there.
pub fn run(state: &DriveState, caller: &Caller, kv: KeyValue, value: Bytes, to: &mut dyn Writes) {
    match prepare(state, caller, kv, value) {
        Ok((op, sync)) => to.write(op, sync),
        Err(refused) => to.refuse(refused),
    }
}

fn prepare(state: &DriveState, caller: &Caller, kv: KeyValue, value: Bytes) -> Result<(WriteOp, bool), Reply> {
    let key = check_key(state, &kv.key, false)?;
    if !caller.may(Permission::Write, Some(&key)) {
        return Err(caller.refusal(Permission::Write));
    }
    let version = check_version(state, "newVersion", &kv.new_version)?;
    let tag = kv.tag.clone().unwrap_or_default();
    let max_tag = state.config.limits.max_tag_size as usize;
    if tag.len() > max_tag {
        return Err(invalid(format!("tag of {} bytes exceeds maxTagSize {max_tag}", tag.len())));
    }
    let max_value = state.config.limits.max_value_size as usize;
    if value.len() > max_value {
        return Err(invalid(format!("value of {} bytes exceeds maxValueSize {max_value}", value.len())));
    }
    let sync = synchronization(&kv)?;
    let check = write_check(state, &kv)?;
    let meta = Meta { version, tag, algorithm: kv.algorithm, ..Meta::default() };
    let op = WriteOp::Put { key, value, meta, check };
    if !state.capacity.admit(op.footprint() as u64, || state.engine_disk_usage()) {
        return Err(Reply::error(StatusCode::NoSpace, "the drive is full"));
    }
    Ok((op, sync != Synchronization::Writeback))
}
