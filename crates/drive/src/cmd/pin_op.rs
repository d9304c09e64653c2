//! PINOP: lock, unlock, erase and secure erase, authenticated by PIN (PINAUTH) over TLS.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use spindle_engine::{WriteOp, WriteRequest};
use spindle_proto::pb::command::pin_operation::PinOpType;
use spindle_proto::pb::command::PinOperation;
use spindle_proto::StatusCode;

use super::check_pin;
use crate::persist;
use crate::reply::{engine_error, invalid, Reply};
use crate::security::Security;
use crate::state::DriveState;

/// PINOP: lock, unlock, erase, secure erase. The caller checked the transport (TLS only).
/// The flag says whether a PIN was verified (a right one, or any while the erase PIN is unset):
/// only that counts as authenticating the connection.
pub async fn run(state: &Arc<DriveState>, pin: Bytes, op: PinOperation) -> (Reply, bool) {
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
        Ok(Err(e)) => return engine_error(e),
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
