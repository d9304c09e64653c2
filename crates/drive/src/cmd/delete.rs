//! DELETE: a key removed through the engine's writer.

use spindle_engine::WriteOp;
use spindle_proto::pb::command::KeyValue;
use spindle_proto::Synchronization;

use super::{check_key, synchronization, write_check, Writes};
use crate::reply::Reply;
use crate::security::{Caller, Permission};
use crate::state::DriveState;

/// Checks a DELETE and hands it to `to` (towards the engine), or refuses it there.
pub fn run(state: &DriveState, caller: &Caller, kv: KeyValue, to: &mut dyn Writes) {
    match prepare(state, caller, kv) {
        Ok((op, sync)) => to.write(op, sync),
        Err(refused) => to.refuse(refused),
    }
}

fn prepare(state: &DriveState, caller: &Caller, kv: KeyValue) -> Result<(WriteOp, bool), Reply> {
    let key = check_key(state, &kv.key, false)?;
    if !caller.may(Permission::Delete, Some(&key)) {
        return Err(caller.refusal(Permission::Delete));
    }
    let (sync, check) = (synchronization(&kv)?, write_check(state, &kv)?);
    Ok((WriteOp::Delete { key, check }, sync != Synchronization::Writeback))
}
