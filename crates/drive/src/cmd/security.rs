//! SECURITY: the ACL (replaced, or merged under `merge_acls`), the erase PIN or the lock PIN.
//! Only over TLS (the connection checks the transport). The change is stored before it takes
//! effect, under the drive's admin lock.

use spindle_proto::pb::command::security::SecurityOpType;
use spindle_proto::pb::command::Security as SecurityProto;

use super::{check_pin, save_settings, PinRefused};
use crate::reply::{invalid, Reply};
use crate::state::DriveState;

/// SECURITY: one kind of change per message (ACL, erase PIN or lock PIN). A wrong old PIN is
/// answered when the back-off pause it opened ends, as a wrong PINOP PIN is.
pub async fn run(state: &DriveState, request: SecurityProto) -> Reply {
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
    if let Err(r) = save_settings(state, &settings) {
        return Ok(r);
    }
    *state.security.write() = updated;
    state.event(format!("security settings changed ({})", kind.as_str_name()));
    Ok(Reply::ok(None))
}
