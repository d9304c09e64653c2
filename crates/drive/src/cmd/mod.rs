//! The drive's commands, one file each, with the same verbs: a command takes the drive
//! ([`DriveState`]), the authenticated caller and its request, checks the request against the
//! drive's limits and the caller's permissions, and runs it. Reads answer at once (or say they
//! need the disk: [`crate::reply::NeedsDisk`]); writes go from the command to the engine's
//! writer through [`Writes`]; the others answer when done. The connection picks the command
//! for a message type, in one place (`connection::Connection::dispatch`).

use bytes::Bytes;
use spindle_engine::{Check, Entry, Meta, WriteOp};
use spindle_proto::pb::command::{Body, KeyValue};
use spindle_proto::{MessageType, StatusCode, Synchronization};

use crate::pin_backoff::PinCheck;
use crate::reply::{invalid, Reply};
use crate::security::{Caller, Permission};
use crate::state::DriveState;

pub mod batch;
pub mod delete;
pub mod flush;
pub mod get;
pub mod get_log;
pub mod get_version;
pub mod key_range;
pub mod media_optimize;
pub mod media_scan;
pub mod neighbour;
pub mod noop;
pub mod p2p;
pub mod pin_op;
pub mod power;
pub mod put;
pub mod security;
pub mod setup;

/// Where a write command's outcome goes: the write itself to the engine's writer (through the
/// connection, which orders it among the connection's requests, or into an open batch), or
/// the refusal that stopped it.
pub trait Writes {
    /// Hands `op` on towards the engine; `sync` when it must be durable before its answer.
    fn write(&mut self, op: WriteOp, sync: bool);
    /// Answers a write refused before it reached the engine.
    fn refuse(&mut self, reply: Reply);
}

/// Whether a request type only reads keys and values (GET, GETVERSION, GETNEXT, GETPREVIOUS,
/// GETKEYRANGE): the requests the connection may answer out of its order when they need the
/// disk.
pub fn is_key_read(kind: MessageType) -> bool {
    matches!(
        kind,
        MessageType::Get | MessageType::Getversion | MessageType::Getnext | MessageType::Getprevious | MessageType::Getkeyrange
    )
}



/// The permission a request type needs whatever its keys (per-key checks happen where the
/// keys are known).
pub fn permission(kind: MessageType) -> Option<Permission> {
    Some(match kind {
        MessageType::Getlog => Permission::Getlog,
        MessageType::Setup => Permission::Setup,
        MessageType::Security => Permission::Security,
        MessageType::Peer2peerpush => Permission::P2pop,
        MessageType::SetPowerLevel => Permission::PowerManagement,
        MessageType::Flushalldata | MessageType::StartBatch | MessageType::EndBatch | MessageType::AbortBatch => Permission::Write,
        MessageType::Mediascan | MessageType::Mediaoptimize => Permission::Range,
        _ => return None,
    })
}

/// Checks a key against the drive's limit; `allow_empty` for positional lookups
/// (GETNEXT/GETPREVIOUS from the very start or end).
pub fn check_key(state: &DriveState, key: &Option<Bytes>, allow_empty: bool) -> Result<Bytes, Reply> {
    let key = key.clone().unwrap_or_default();
    if key.is_empty() && !allow_empty {
        return Err(invalid("a key is required"));
    }
    let max = state.config.limits.max_key_size as usize;
    if key.len() > max {
        return Err(invalid(format!("key of {} bytes exceeds maxKeySize {max}", key.len())));
    }
    Ok(key)
}

pub fn check_version(state: &DriveState, name: &str, v: &Option<Bytes>) -> Result<Bytes, Reply> {
    let v = v.clone().unwrap_or_default();
    let max = state.config.limits.max_version_size as usize;
    if v.len() > max {
        return Err(invalid(format!("{name} of {} bytes exceeds maxVersionSize {max}", v.len())));
    }
    Ok(v)
}

pub fn metadata_kv(key: Bytes, meta: &Meta) -> KeyValue {
    KeyValue {
        key: Some(key),
        db_version: Some(meta.version.clone()),
        tag: Some(meta.tag.clone()),
        algorithm: meta.algorithm,
        ..KeyValue::default()
    }
}

pub fn entry_reply(entry: Entry, with_value: bool) -> Reply {
    let kv = metadata_kv(entry.key, &entry.meta);
    let mut reply = Reply::ok(Some(Body { key_value: Some(kv), ..Body::default() }));
    if with_value {
        reply.value = entry.value;
    }
    reply
}

/// The request's key, if the caller may read it: checked against the drive's limit and the
/// caller's READ scopes (the answer to give otherwise).
pub fn readable_key(state: &DriveState, caller: &Caller, kv: &KeyValue) -> Result<Bytes, Reply> {
    let key = check_key(state, &kv.key, false)?;
    if !caller.may(Permission::Read, Some(&key)) {
        return Err(caller.refusal(Permission::Read));
    }
    Ok(key)
}

/// WRITETHROUGH when absent: the safe reading of a request that did not say.
pub fn synchronization(kv: &KeyValue) -> Result<Synchronization, Reply> {
    match kv.synchronization {
        None => Ok(Synchronization::Writethrough),
        Some(s) => match Synchronization::try_from(s) {
            Ok(Synchronization::InvalidSynchronization) | Err(_) => Err(invalid(format!("invalid synchronization {s}"))),
            Ok(s) => Ok(s),
        },
    }
}

pub fn write_check(state: &DriveState, kv: &KeyValue) -> Result<Check, Reply> {
    // A forced write still has the size of the version it sent checked.
    let version = check_version(state, "dbVersion", &kv.db_version)?;
    Ok(if kv.force.unwrap_or(false) { Check::Force } else { Check::Version(version) })
}

/// A PIN refused: the NOT_AUTHORIZED answer, and how long to wait before sending it.
pub struct PinRefused {
    pub reply: Reply,
    pub answer_after: std::time::Duration,
}

/// Checks `given` against `stored` under the drive-wide back-off (`pin_backoff`): refused
/// while checks are paused (answered at once), or for a wrong PIN, which opens a new pause
/// (answered when it ends).
pub fn check_pin(state: &DriveState, stored: &Bytes, given: &Bytes) -> Result<(), PinRefused> {
    let checked = state.pin_attempts.lock().check(stored, given, std::time::Instant::now());
    match checked {
        PinCheck::Right => Ok(()),
        PinCheck::Paused { left } => {
            let left = left.as_millis().max(1);
            let reply = Reply::error(StatusCode::NotAuthorized, format!("permission denied: PIN checks paused for {left} ms after wrong PINs"));
            Err(PinRefused { reply, answer_after: std::time::Duration::ZERO })
        }
        PinCheck::Wrong { pause, failures } => {
            state.event(format!("wrong PIN ({failures} in a row); PIN checks paused for {pause:?}"));
            Err(PinRefused { reply: Reply::error(StatusCode::NotAuthorized, "permission denied: wrong PIN"), answer_after: pause })
        }
    }
}

/// Stores the drive's settings (persist.rs) before a change takes effect.
pub fn save_settings(state: &DriveState, settings: &spindle_proto::spindle::DriveState) -> Result<(), Reply> {
    crate::persist::store(&state.config.data_dir, settings).map_err(|e| {
        // A full disk is the client's to know as such; nothing changed.
        let status = if e.kind() == std::io::ErrorKind::StorageFull { StatusCode::NoSpace } else { StatusCode::InternalError };
        Reply::error(status, format!("cannot save the drive's settings: {e}"))
    })
}
