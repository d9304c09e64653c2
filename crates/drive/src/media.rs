//! MEDIASCAN and MEDIAOPTIMIZE over a key range.
//!
//! A scan reads every entry in the range and checks its value against the CRC32C the engine
//! stored with it and, when the client stored an integrity tag with a known algorithm (SHA1,
//! SHA2, CRC32C), against that tag too. It answers the keys that fail, and in `endKey` the last
//! key it examined, so a client pages through a large range; a scan stops after
//! `MAX_SCANNED_PER_REQUEST` entries or when the request's timeout runs out (EXPIRED).

use std::time::Instant;

use bytes::Bytes;
use sha1::Digest;
use spindle_engine::{Entry, KeyRange};
use spindle_proto::pb::command::{Algorithm, Body, Range};
use spindle_proto::StatusCode;

use crate::handler::Reply;
use crate::security::{Caller, Permission};
use crate::state::DriveState;

/// Entries one MEDIASCAN request examines at most.
pub const MAX_SCANNED_PER_REQUEST: usize = 10_000;
/// Keys read per step of a scan.
const PAGE: usize = 200;

/// Whether the value still matches what was stored with it.
pub fn intact(entry: &Entry) -> bool {
    if crc32c::crc32c(&entry.value) != entry.meta.value_crc {
        return false;
    }
    let tag = &entry.meta.tag;
    match entry.meta.algorithm.and_then(|a| Algorithm::try_from(a).ok()) {
        _ if tag.is_empty() => true,
        Some(Algorithm::Sha1) => sha1::Sha1::digest(&entry.value)[..] == tag[..],
        Some(Algorithm::Sha2) => match tag.len() {
            28 => sha2::Sha224::digest(&entry.value)[..] == tag[..],
            32 => sha2::Sha256::digest(&entry.value)[..] == tag[..],
            48 => sha2::Sha384::digest(&entry.value)[..] == tag[..],
            64 => sha2::Sha512::digest(&entry.value)[..] == tag[..],
            _ => false,
        },
        Some(Algorithm::Crc32c) => tag.len() == 4 && crc32c::crc32c(&entry.value).to_be_bytes()[..] == tag[..],
        // Other algorithms (and private ones) are opaque to the drive.
        _ => true,
    }
}

fn query(range: &Range, max_keys: u32) -> Result<(KeyRange, usize), Reply> {
    let max = match range.max_returned {
        None => max_keys,
        Some(n) if n < 1 || n as u32 > max_keys => {
            return Err(Reply::error(StatusCode::InvalidRequest, format!("maxReturned must be 1..={max_keys}")));
        }
        Some(n) => n as u32,
    };
    Ok((
        KeyRange {
            start: range.start_key.clone().unwrap_or_default(),
            start_inclusive: range.start_key_inclusive.unwrap_or(false),
            end: range.end_key.clone(),
            end_inclusive: range.end_key_inclusive.unwrap_or(false),
            reverse: false,
            max: PAGE,
        },
        max as usize,
    ))
}

pub fn scan(state: &DriveState, caller: &Caller, range: Range, deadline: Option<Instant>) -> Reply {
    let (mut q, max_failures) = match query(&range, state.config.limits.max_key_range_count) {
        Ok(q) => q,
        Err(r) => return r,
    };
    let mut failed = Vec::new();
    let mut last: Option<Bytes> = None;
    let mut scanned = 0;
    let mut expired = false;
    'pages: loop {
        let keys = match state.engine.keys(&q) {
            Ok(k) => k,
            Err(e) => return crate::handler::engine_error(e),
        };
        let full_page = keys.len() == PAGE;
        for key in keys {
            // At least one key per request, so that a client resuming from endKey with too
            // short a timeout still makes progress.
            if scanned > 0 && deadline.is_some_and(|d| Instant::now() > d) {
                expired = true;
                break 'pages;
            }
            if caller.may(Permission::Range, Some(&key)) {
                match state.engine.get(&key) {
                    Ok(Some(entry)) if intact(&entry) => {}
                    Ok(None) => {} // deleted meanwhile
                    Ok(Some(_)) | Err(_) => failed.push(key.clone()),
                }
            }
            scanned += 1;
            last = Some(key);
            if failed.len() >= max_failures || scanned >= MAX_SCANNED_PER_REQUEST {
                break 'pages;
            }
        }
        match (&last, full_page) {
            (Some(l), true) => {
                q.start = l.clone();
                q.start_inclusive = false;
            }
            _ => break,
        }
    }
    let body = Body { range: Some(Range { keys: failed, end_key: last, ..Range::default() }), ..Body::default() };
    if expired {
        return Reply { body: Some(Box::new(body)), ..Reply::error(StatusCode::Expired, "the scan ran out of time; endKey is the last key examined") };
    }
    Reply::ok(Some(body))
}

/// MEDIAOPTIMIZE: compacts the store (fjall compacts whole keyspaces, so the range only
/// bounds what the caller must be allowed to touch).
pub async fn optimize(state: &std::sync::Arc<DriveState>) -> Reply {
    let engine = state.engine.clone();
    match tokio::task::spawn_blocking(move || engine.compact()).await {
        Ok(Ok(())) => Reply::ok(None),
        Ok(Err(e)) => crate::handler::engine_error(e),
        Err(e) => Reply::error(StatusCode::InternalError, e.to_string()),
    }
}
