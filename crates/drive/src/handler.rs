//! Executes one authenticated command against the drive and builds its response.

use std::sync::Arc;

use bytes::Bytes;
use spindle_engine::{Check, Entry, Error as EngineError, KeyRange, Meta, WriteOp};
use spindle_proto::pb::command::{self, Body, KeyValue, Range};
use spindle_proto::{MessageType, StatusCode, Synchronization};

use crate::security::{Caller, Permission};
use crate::state::DriveState;

/// A response before it is addressed, signed and framed.
pub struct Reply {
    pub status: StatusCode,
    pub message: String,
    /// Boxed: a Body is large, and replies move around by value.
    pub body: Option<Box<Body>>,
    pub value: Bytes,
}

impl Reply {
    pub fn ok(body: Option<Body>) -> Self {
        Reply { status: StatusCode::Success, message: String::new(), body: body.map(Box::new), value: Bytes::new() }
    }

    pub fn error(status: StatusCode, message: impl Into<String>) -> Self {
        Reply { status, message: message.into(), body: None, value: Bytes::new() }
    }

    /// The status part alone (for statuses nested inside other messages).
    pub fn into_status(self) -> Option<command::Status> {
        Some(command::Status {
            code: Some(self.status as i32),
            status_message: (!self.message.is_empty()).then_some(self.message),
            ..command::Status::default()
        })
    }
}

/// What executing a request amounts to.
pub enum Outcome {
    /// Answered at once (reads, rejected requests).
    Reply(Reply),
    /// A write for the engine's writer; answered when it completes (after the sync if `sync`).
    Write { op: WriteOp, sync: bool },
    /// A read run under [`spindle_engine::CachedReadsOnly`] that needs the disk: nothing was
    /// answered; run it again where blocking is allowed.
    NeedsDisk,
}

/// A read's answer, or [`NeedsDisk`] when it was refused under `CachedReadsOnly`.
pub type ReadResult = Result<Reply, NeedsDisk>;

/// See [`Outcome::NeedsDisk`].
#[derive(Debug)]
pub struct NeedsDisk;

impl From<ReadResult> for Outcome {
    fn from(r: ReadResult) -> Self {
        match r {
            Ok(reply) => Outcome::Reply(reply),
            Err(NeedsDisk) => Outcome::NeedsDisk,
        }
    }
}

fn read_error(e: EngineError) -> ReadResult {
    match e {
        EngineError::WouldBlock => Err(NeedsDisk),
        e => Ok(engine_error(e)),
    }
}

impl From<Reply> for Outcome {
    fn from(r: Reply) -> Self {
        Outcome::Reply(r)
    }
}

fn invalid(message: impl Into<String>) -> Reply {
    Reply::error(StatusCode::InvalidRequest, message)
}

pub fn engine_error(e: EngineError) -> Reply {
    match e {
        EngineError::NotFound => Reply::error(StatusCode::NotFound, "key not found"),
        EngineError::VersionMismatch => Reply::error(StatusCode::VersionMismatch, "stored version differs from dbVersion"),
        EngineError::NoSpace => Reply::error(StatusCode::NoSpace, "the drive is full"),
        EngineError::Corrupt { detail, .. } => Reply::error(StatusCode::PermDataError, detail),
        e @ (EngineError::Io(_) | EngineError::Storage(_) | EngineError::Stopped(_) | EngineError::Internal(_)) => {
            Reply::error(StatusCode::InternalError, e.to_string())
        }
        EngineError::Invalid(m) => Reply::error(StatusCode::InvalidRequest, m),
        EngineError::Unavailable(m) => Reply::error(StatusCode::ServiceBusy, m),
        // Reads under CachedReadsOnly are retried where they may block; never a client's answer
        // unless that retry is skipped.
        EngineError::WouldBlock => Reply::error(StatusCode::ServiceBusy, "the read needs the disk; retry"),
        e @ EngineError::BatchFailed { .. } => Reply::error(StatusCode::InvalidBatch, e.to_string()),
    }
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

/// Whether a request type writes (and so goes through the engine's writer).
pub fn is_write(kind: MessageType) -> bool {
    matches!(kind, MessageType::Put | MessageType::Delete | MessageType::Flushalldata)
}

/// Runs a request of type `kind`. `value` is the frame's value section.
pub fn execute(state: &Arc<DriveState>, caller: &Caller, kind: MessageType, body: Option<Body>, value: Bytes) -> Outcome {
    let body = body.unwrap_or_default();
    match kind {
        MessageType::Get => get(state, caller, body.key_value.unwrap_or_default()).into(),
        MessageType::Getversion => get_version(state, caller, body.key_value.unwrap_or_default()).into(),
        MessageType::Getnext => neighbour(state, caller, body.key_value.unwrap_or_default(), true).into(),
        MessageType::Getprevious => neighbour(state, caller, body.key_value.unwrap_or_default(), false).into(),
        MessageType::Getkeyrange => key_range(state, caller, body.range.unwrap_or_default()).into(),
        MessageType::Put => put(state, caller, body.key_value.unwrap_or_default(), value),
        MessageType::Delete => delete(state, caller, body.key_value.unwrap_or_default()),
        MessageType::Noop => Reply::ok(None).into(),
        MessageType::Flushalldata => Outcome::Write { op: WriteOp::Flush, sync: true },
        MessageType::Getlog => {
            let mut out = command::GetLog::default();
            let (status, message, value) = crate::getlog::fill(state, caller, &body.get_log.unwrap_or_default(), &mut out);
            Reply { status, message, body: Some(Box::new(Body { get_log: Some(Box::new(out)), ..Body::default() })), value }.into()
        }
        MessageType::Setup | MessageType::Security => invalid(format!("{} is run by the connection", kind.as_str_name())).into(),
        MessageType::Pinop => invalid("PINOP needs PIN authentication (PINAUTH) over TLS").into(),
        MessageType::SetPowerLevel => invalid("SET_POWER_LEVEL is run by the connection").into(),
        MessageType::Mediascan => crate::media::scan(state, caller, body.range.unwrap_or_default(), None).into(),
        MessageType::Mediaoptimize => invalid("MEDIAOPTIMIZE is run by the connection").into(),
        // Run by the connection: it owns its batches, and a push runs beside the connection.
        MessageType::Peer2peerpush => invalid("PEER2PEERPUSH is run by the connection").into(),
        // Batch commands are run by the connection, which owns its batches.
        MessageType::StartBatch | MessageType::EndBatch | MessageType::AbortBatch => {
            invalid(format!("{} needs a batchID", kind.as_str_name())).into()
        }
        _ => invalid(format!("{} is not a request message type", kind.as_str_name())).into(),
    }
}

/// Checks a key against the drive's limit; `allow_empty` for positional lookups
/// (GETNEXT/GETPREVIOUS from the very start or end).
fn check_key(state: &DriveState, key: &Option<Bytes>, allow_empty: bool) -> Result<Bytes, Reply> {
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

fn check_version(state: &DriveState, name: &str, v: &Option<Bytes>) -> Result<Bytes, Reply> {
    let v = v.clone().unwrap_or_default();
    let max = state.config.limits.max_version_size as usize;
    if v.len() > max {
        return Err(invalid(format!("{name} of {} bytes exceeds maxVersionSize {max}", v.len())));
    }
    Ok(v)
}

fn metadata_kv(key: Bytes, meta: &Meta) -> KeyValue {
    KeyValue {
        key: Some(key),
        db_version: Some(meta.version.clone()),
        tag: Some(meta.tag.clone()),
        algorithm: meta.algorithm,
        ..KeyValue::default()
    }
}

fn entry_reply(entry: Entry, with_value: bool) -> Reply {
    let kv = metadata_kv(entry.key, &entry.meta);
    let mut reply = Reply::ok(Some(Body { key_value: Some(kv), ..Body::default() }));
    if with_value {
        reply.value = entry.value;
    }
    reply
}

fn get(state: &DriveState, caller: &Caller, kv: KeyValue) -> ReadResult {
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

fn get_version(state: &DriveState, caller: &Caller, kv: KeyValue) -> ReadResult {
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

fn neighbour(state: &DriveState, caller: &Caller, kv: KeyValue, forward: bool) -> ReadResult {
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

fn key_range(state: &DriveState, caller: &Caller, range: Range) -> ReadResult {
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

/// WRITETHROUGH when absent: the safe reading of a request that did not say.
fn synchronization(kv: &KeyValue) -> Result<Synchronization, Reply> {
    match kv.synchronization {
        None => Ok(Synchronization::Writethrough),
        Some(s) => match Synchronization::try_from(s) {
            Ok(Synchronization::InvalidSynchronization) | Err(_) => Err(invalid(format!("invalid synchronization {s}"))),
            Ok(s) => Ok(s),
        },
    }
}

fn write_check(state: &DriveState, kv: &KeyValue) -> Result<Check, Reply> {
    if kv.force.unwrap_or(false) {
        // Still validate the size of a version the client sent.
        check_version(state, "dbVersion", &kv.db_version)?;
        Ok(Check::Force)
    } else {
        Ok(Check::Version(check_version(state, "dbVersion", &kv.db_version)?))
    }
}

fn put(state: &DriveState, caller: &Caller, kv: KeyValue, value: Bytes) -> Outcome {
    let prepared = (|| {
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
        let footprint = (key.len() + value.len() + version.len() + tag.len()) as u64;
        if !state.capacity.admit(footprint, || state.engine_disk_usage()) {
            return Err(Reply::error(StatusCode::NoSpace, "the drive is full"));
        }
        let meta = Meta { version, tag, algorithm: kv.algorithm, ..Meta::default() };
        Ok(Outcome::Write { op: WriteOp::Put { key, value, meta, check }, sync: sync != Synchronization::Writeback })
    })();
    prepared.unwrap_or_else(Outcome::Reply)
}

fn delete(state: &DriveState, caller: &Caller, kv: KeyValue) -> Outcome {
    let prepared = (|| {
        let key = check_key(state, &kv.key, false)?;
        if !caller.may(Permission::Delete, Some(&key)) {
            return Err(caller.refusal(Permission::Delete));
        }
        let (sync, check) = (synchronization(&kv)?, write_check(state, &kv)?);
        Ok(Outcome::Write { op: WriteOp::Delete { key, check }, sync: sync != Synchronization::Writeback })
    })();
    prepared.unwrap_or_else(Outcome::Reply)
}
