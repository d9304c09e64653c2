//! Administration: SECURITY (ACL and PINs), SETUP (cluster version, firmware), PINOP (lock,
//! unlock, erase, secure erase) and SET_POWER_LEVEL. Every change to the persistent settings
//! is written (atomically) before it takes effect in memory, under one lock.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use spindle_engine::{WriteOp, WriteRequest};
use spindle_proto::pb::command::pin_operation::PinOpType;
use spindle_proto::pb::command::security::SecurityOpType;
use spindle_proto::pb::command::setup::SetupOpType;
use spindle_proto::pb::command::{PinOperation, PowerLevel, Security as SecurityProto, Setup};
use spindle_proto::StatusCode;

use crate::handler::Reply;
use crate::persist;
use crate::security::Security;
use crate::state::DriveState;

/// Longest pause in PIN checks after wrong PINs; the pause doubles with every wrong PIN in a
/// row from 100 ms, so guessing a PIN over the network is slow. The count and the pause are
/// drive-wide (`DriveState::pin_attempts`): a PIN that arrives while checks are paused is
/// answered NOT_AUTHORIZED at once, unchecked, so parallel connections guess no faster than one
/// and nobody waits in a queue behind queued guesses. The wrong PIN's own answer is sent when
/// its pause ends (only its own connection waits, holding no lock), so a client that retries
/// after its answer, as a person or the reference client does, finds checks open again.
pub const MAX_PIN_BACKOFF: Duration = Duration::from_secs(10);
/// The pause after the first wrong PIN.
const FIRST_PIN_BACKOFF: Duration = Duration::from_millis(100);

/// Wrong PINs in a row, drive-wide, and until when no PIN is checked.
#[derive(Debug, Default)]
pub struct PinBackoff {
    failures: u32,
    paused_until: Option<std::time::Instant>,
}

/// A PIN refused: the NOT_AUTHORIZED answer, and how long to wait before sending it.
struct PinRefused {
    reply: Reply,
    answer_after: Duration,
}

/// Checks `given` against `stored` under the drive-wide back-off: refused while checks are
/// paused (the PIN is not even compared; answered at once), or for a wrong PIN, which opens a
/// new pause (answered when it ends). A right PIN resets the count.
fn check_pin(state: &DriveState, stored: &Bytes, given: &Bytes) -> Result<(), PinRefused> {
    let mut backoff = state.pin_attempts.lock();
    let now = std::time::Instant::now();
    if let Some(until) = backoff.paused_until.filter(|u| *u > now) {
        let left = until.duration_since(now).as_millis().max(1);
        let reply = Reply::error(StatusCode::NotAuthorized, format!("permission denied: PIN checks paused for {left} ms after wrong PINs"));
        return Err(PinRefused { reply, answer_after: Duration::ZERO });
    }
    if pins_match(stored, given) {
        *backoff = PinBackoff::default();
        return Ok(());
    }
    let shift = backoff.failures.min(16);
    backoff.failures = backoff.failures.saturating_add(1);
    let pause = (FIRST_PIN_BACKOFF * (1u32 << shift)).min(MAX_PIN_BACKOFF);
    backoff.paused_until = Some(now + pause);
    let failures = backoff.failures;
    drop(backoff);
    state.event(format!("wrong PIN ({failures} in a row); PIN checks paused for {pause:?}"));
    Err(PinRefused { reply: Reply::error(StatusCode::NotAuthorized, "permission denied: wrong PIN"), answer_after: pause })
}

fn invalid(message: impl Into<String>) -> Reply {
    Reply::error(StatusCode::InvalidRequest, message)
}

fn save(state: &DriveState, settings: &spindle_proto::spindle::DriveState) -> Result<(), Reply> {
    persist::store(&state.config.data_dir, settings).map_err(|e| {
        // A full disk is the client's to know as such; nothing changed.
        let status = if e.kind() == std::io::ErrorKind::StorageFull { StatusCode::NoSpace } else { StatusCode::InternalError };
        Reply::error(status, format!("cannot save the drive's settings: {e}"))
    })
}

/// SECURITY: one kind of change per message (ACL, erase PIN or lock PIN). A wrong old PIN is
/// answered when the back-off pause it opened ends, as a wrong PINOP PIN is.
pub async fn security(state: &DriveState, request: SecurityProto) -> Reply {
    match security_now(state, request) {
        Ok(reply) => reply,
        Err(refused) => {
            tokio::time::sleep(refused.answer_after).await;
            refused.reply
        }
    }
}

fn security_now(state: &DriveState, request: SecurityProto) -> Result<Reply, PinRefused> {
    let has_acl = !request.acl.is_empty();
    let lock = request.old_lock_pin.is_some() || request.new_lock_pin.is_some();
    let erase = request.old_erase_pin.is_some() || request.new_erase_pin.is_some();
    let kind = match request.security_op_type.map(SecurityOpType::try_from) {
        Some(Ok(k)) if k != SecurityOpType::InvalidSecurityop => k,
        Some(_) => return Ok(invalid("invalid securityOpType")),
        // Protocol 3.0.6 clients send no type: infer it from what the message carries.
        None => match (has_acl, erase, lock) {
            // What the reference client sends for setLockPin(null, null)); the reference drive
            // accepts it and changes nothing.
            (false, false, false) => return Ok(Reply::ok(None)),
            (true, false, false) => SecurityOpType::AclSecurityop,
            (false, true, false) => SecurityOpType::ErasePinSecurityop,
            (false, false, true) => SecurityOpType::LockPinSecurityop,
            _ => return Ok(invalid("a SECURITY message sets exactly one of: the ACL, the erase PIN, the lock PIN")),
        },
    };
    let _admin = state.admin.lock();
    let current = state.security.read().clone();
    let max_pin = state.config.limits.max_pin_size as usize;
    let updated = match kind {
        SecurityOpType::AclSecurityop => {
            let max_identities = state.config.limits.max_identity_count;
            // Replacing is the protocol's semantics; merging is the reference simulator's,
            // offered for tools written against it (config.rs, `merge_acls`).
            let updated = if state.config.merge_acls {
                current.with_merged_acl(request.acl, max_identities)
            } else {
                current.with_acl(request.acl, max_identities)
            };
            match updated {
                Ok(s) => s,
                Err(r) => return Ok(Reply::error(r.status, r.message)),
            }
        }
        SecurityOpType::LockPinSecurityop | SecurityOpType::ErasePinSecurityop => {
            let lock = kind == SecurityOpType::LockPinSecurityop;
            let (old, new, stored) = if lock {
                (request.old_lock_pin, request.new_lock_pin, &current.lock_pin)
            } else {
                (request.old_erase_pin, request.new_erase_pin, &current.erase_pin)
            };
            let new = new.unwrap_or_default();
            if new.len() > max_pin {
                return Ok(invalid(format!("PIN of {} bytes exceeds maxPinSize {max_pin}", new.len())));
            }
            // The old PIN is a PIN like any other: compared in constant time, under the same
            // drive-wide back-off as PINOP's.
            if !stored.is_empty() {
                check_pin(state, stored, &old.clone().unwrap_or_default())?;
            }
            let mut s = current.clone();
            if lock {
                s.lock_pin = new;
            } else {
                s.erase_pin = new;
            }
            s
        }
        SecurityOpType::InvalidSecurityop => return Ok(invalid("invalid securityOpType")),
    };
    let mut settings = state.stored_settings();
    settings.acl = updated.acl.clone();
    settings.acl_configured = Some(!updated.acl.is_empty());
    settings.lock_pin = Some(updated.lock_pin.clone());
    settings.erase_pin = Some(updated.erase_pin.clone());
    if let Err(r) = save(state, &settings) {
        return Ok(r);
    }
    *state.security.write() = updated;
    state.event(format!("security settings changed ({})", kind.as_str_name()));
    Ok(Reply::ok(None))
}

/// SETUP: a new cluster version (persisted), or a firmware download (refused).
pub fn setup(state: &DriveState, request: Setup) -> Reply {
    let firmware = request.firmware_download.unwrap_or(false) || request.setup_op_type == Some(SetupOpType::FirmwareSetupop as i32);
    if firmware {
        return invalid("firmware downloads are not supported: a Spindle drive is upgraded by installing a new spindle binary");
    }
    let Some(version) = request.new_cluster_version else {
        return invalid("SETUP needs newClusterVersion");
    };
    let _admin = state.admin.lock();
    let mut settings = state.stored_settings();
    settings.cluster_version = Some(version);
    if let Err(r) = save(state, &settings) {
        return r;
    }
    state.cluster_version.store(version, Ordering::Release);
    state.event(format!("cluster version set to {version}"));
    Reply::ok(None)
}

/// SET_POWER_LEVEL.
pub fn set_power_level(state: &DriveState, level: Option<i32>) -> Reply {
    match level.and_then(|l| PowerLevel::try_from(l).ok()) {
        Some(l @ (PowerLevel::Operational | PowerLevel::Hibernate)) => {
            state.power_level.store(l as i32, Ordering::Release);
            state.event(format!("power level {}", l.as_str_name()));
            Reply::ok(None)
        }
        Some(PowerLevel::Shutdown) => {
            state.power_level.store(PowerLevel::Shutdown as i32, Ordering::Release);
            state.event("shutdown requested by SET_POWER_LEVEL".into());
            // notify_one stores a permit, so the waiter sees it even if it is not waiting yet.
            state.shutdown.notify_one();
            Reply::ok(None)
        }
        _ => invalid("power level must be OPERATIONAL, HIBERNATE or SHUTDOWN"),
    }
}

fn pins_match(stored: &Bytes, given: &Bytes) -> bool {
    // Compare in constant time: a PIN must not leak through timing.
    use hmac::digest::Mac;
    let mut a = hmac::Hmac::<sha1::Sha1>::new_from_slice(b"pin").expect("any key");
    a.update(stored);
    a.verify_slice(&{
        let mut b = hmac::Hmac::<sha1::Sha1>::new_from_slice(b"pin").expect("any key");
        b.update(given);
        b.finalize().into_bytes()
    })
    .is_ok()
}

/// PINOP: lock, unlock, erase, secure erase. The caller checked the transport (TLS only).
/// The flag says whether a PIN was verified (a right one, or any while the erase PIN is unset):
/// only that counts as authenticating the connection.
pub async fn pin_op(state: &Arc<DriveState>, pin: Bytes, op: PinOperation) -> (Reply, bool) {
    let kind = op.pin_op_type.and_then(|t| PinOpType::try_from(t).ok()).unwrap_or(PinOpType::InvalidPinop);
    let security = state.security.read().clone();
    match kind {
        PinOpType::LockPinop | PinOpType::UnlockPinop => {
            if security.lock_pin.is_empty() {
                return (invalid("no lock PIN is set (set one with a SECURITY LOCK_PIN_SECURITYOP first)"), false);
            }
            if let Err(refused) = check_pin(state, &security.lock_pin, &pin) {
                tokio::time::sleep(refused.answer_after).await;
                return (refused.reply, false);
            }
            let lock = kind == PinOpType::LockPinop;
            if !lock && !state.locked.load(Ordering::Acquire) {
                return (Reply::error(StatusCode::DeviceAlreadyUnlocked, "the drive is not locked"), true);
            }
            state.locked.store(lock, Ordering::Release);
            state.event(if lock { "drive locked".into() } else { "drive unlocked".into() });
            (Reply::ok(None), true)
        }
        PinOpType::ErasePinop | PinOpType::SecureErasePinop => {
            if !security.erase_pin.is_empty() {
                if let Err(refused) = check_pin(state, &security.erase_pin, &pin) {
                    tokio::time::sleep(refused.answer_after).await;
                    return (refused.reply, false);
                }
            }
            (erase(state, kind == PinOpType::SecureErasePinop).await, true)
        }
        PinOpType::InvalidPinop => (invalid("invalid pinOpType"), false),
    }
}

/// Removes all user data and returns the settings to the factory's: cluster version 0, the
/// default identity, no PINs, unlocked.
async fn erase(state: &Arc<DriveState>, secure: bool) -> Reply {
    let (tx, rx) = tokio::sync::oneshot::channel();
    state.engine.submit(WriteRequest {
        op: WriteOp::Erase { secure },
        sync: true,
        on_applied: None,
        on_done: Box::new(move |r| {
            let _ = tx.send(r);
        }),
    });
    match rx.await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return crate::handler::engine_error(e),
        Err(_) => return Reply::error(StatusCode::InternalError, "engine stopped during the erase"),
    }
    let _admin = state.admin.lock();
    // The identity is the drive's, not the user's: an erase keeps it.
    if let Err(e) = persist::store(&state.config.data_dir, &persist::factory(&state.identity())) {
        return Reply::error(StatusCode::InternalError, format!("data erased, but the settings could not be reset: {e}"));
    }
    *state.security.write() = Security::default();
    state.capacity.invalidate();
    state.cluster_version.store(0, Ordering::Release);
    state.locked.store(false, Ordering::Release);
    state.event(if secure { "secure erase completed".into() } else { "erase completed".into() });
    Reply::ok(None)
}
