//! A frame to a request: decoded, authenticated (by PIN, or by the identity's HMAC), its
//! header checked (connectionID, sequence, cluster version) and gated (a locked or
//! hibernating drive, permissions, priority) before it is dispatched.

use bytes::Bytes;
use prost::Message as _;
use spindle_proto::pb::command::{Header, PowerLevel};
use spindle_proto::pb::message::AuthType;
use spindle_proto::pb::{Command, Message};
use spindle_proto::{response_type, MessageType, StatusCode};

use super::answers::Auth;
use super::frames::oversize_value;
use super::{Close, Connection, ConnectionSlot, Request, Transport};
use crate::cmd;
use crate::reply::Reply;
use crate::security::{Caller, Permission};

impl Connection {
    pub(super) async fn handle_frame(&mut self, raw_message: Bytes, value: Bytes, oversize: Option<u32>, received: tokio::time::Instant) -> Result<(), Close> {
        self.frame_received = received;
        // Decoding from `Bytes` lets commandBytes share the read buffer instead of being copied.
        let message = Message::decode(raw_message).map_err(|e| Close::Terminate(format!("undecodable message: {e}")))?;
        let auth_type = message.auth_type.and_then(|a| AuthType::try_from(a).ok());
        let command_bytes = message.command_bytes.clone().unwrap_or_default();
        let command = Command::decode(command_bytes.clone()).map_err(|e| Close::Terminate(format!("undecodable command: {e}")))?;
        let header = command.header.unwrap_or_default();
        // Only another put or delete may join the writes held for this burst: reads must see
        // them, and everything else (erase, batches, P2P, admin) must follow them.
        if !matches!(header.message_type.and_then(|t| MessageType::try_from(t).ok()), Some(MessageType::Put | MessageType::Delete)) {
            self.submit_pending_writes();
        }
        if !self.pending_disk_reads.is_empty() {
            let kind = header.message_type.and_then(|t| MessageType::try_from(t).ok());
            if !kind.is_some_and(cmd::is_key_read) {
                // Nothing but another read may overtake a read still running on the disk.
                for done in self.pending_disk_reads.drain(..) {
                    let _ = done.await;
                }
            }
        }

        match auth_type {
            Some(AuthType::Hmacauth) => {}
            Some(AuthType::Pinauth) => {
                // PIN operations are authenticated by PIN and answered without an HMAC; they work
                // on a locked drive, and only over TLS.
                let reply = if self.transport != Transport::Tls {
                    Reply::error(StatusCode::InvalidRequest, "PIN operations are accepted only over TLS")
                } else if header.message_type != Some(MessageType::Pinop as i32) {
                    Reply::error(StatusCode::InvalidRequest, "PINAUTH is only for PINOP requests")
                } else if header.connection_id != Some(self.connection_id) {
                    Reply::error(StatusCode::InvalidRequest, format!("connectionID must be {}", self.connection_id))
                } else {
                    let pin = message.pin_auth.and_then(|p| p.pin).unwrap_or_default();
                    let max = self.state.config.limits.max_pin_size as usize;
                    if pin.len() > max {
                        Reply::error(StatusCode::InvalidRequest, format!("PIN of {} bytes exceeds maxPinSize {max}", pin.len()))
                    } else {
                        let op = command.body.and_then(|b| b.pin_op).unwrap_or_default();
                        let (reply, verified) = cmd::pin_op::run(&self.state, pin, op).await;
                        // Only a verified PIN authenticates: a wrong one must not buy a
                        // reserved slot or the patience given to authenticated connections.
                        self.authenticated |= verified;
                        reply
                    }
                };
                self.respond(Auth::Pin, &header, reply, None);
                return Ok(());
            }
            _ => return Err(Close::Terminate(format!("unsupported authType {:?}", message.auth_type))),
        }

        let hmac_auth = message.hmac_auth.clone().unwrap_or_default();
        let identity = hmac_auth.identity.unwrap_or_default();
        let found = self.state.security.read().identity(identity);
        let Some(caller_identity) = found else {
            let reply = Reply::error(StatusCode::HmacFailure, format!("unknown identity {identity}"));
            self.respond(Auth::Unsigned { identity }, &header, reply, None);
            return Ok(());
        };
        let key = caller_identity.mac.clone();
        let caller = Caller { identity: caller_identity, tls: self.transport == Transport::Tls };
        let auth = || Auth::Hmac { identity, key: key.clone() };
        if !key.verify(&command_bytes, &hmac_auth.hmac.clone().unwrap_or_default()) {
            let reply = Reply::error(StatusCode::HmacFailure, "HMAC does not match the identity's key");
            self.respond(auth(), &header, reply, None);
            return Ok(());
        }

        let (Some(sequence), Some(raw_type)) = (header.sequence, header.message_type) else {
            let reply = Reply::error(StatusCode::HeaderRequired, "a header with sequence and messageType is required");
            self.respond(auth(), &header, reply, None);
            return Ok(());
        };
        // (Checked after the HMAC, so nobody learns who holds SECURITY without its key.)
        if self.slot == ConnectionSlot::Reserved && !self.authenticated && !caller.may(Permission::Security, None) {
            return Err(Close::Terminate(format!(
                "the drive has maxConnections ({}) connections; the last are kept for identities holding SECURITY",
                self.state.config.limits.max_connections
            )));
        }
        // Authenticated only by a request that also names this connection with a fresh
        // sequence: a frame captured elsewhere and replayed passes its HMAC, not this.
        if header.connection_id == Some(self.connection_id) && self.last_sequence.is_none_or(|last| sequence > last) {
            self.authenticated = true;
        }
        // Every request must name this connection (the reference client always sends the id
        // it was given at sign-on): a request captured on another connection cannot be
        // replayed on a new one, where its sequence would still be fresh.
        let early = if header.connection_id != Some(self.connection_id) {
            Some(Reply::error(StatusCode::InvalidRequest, format!("connectionID must be {}", self.connection_id)))
        } else if self.last_sequence.is_some_and(|last| sequence <= last) {
            Some(Reply::error(StatusCode::InvalidRequest, "sequence must increase on every request of a connection"))
        } else if header.cluster_version.unwrap_or(0) != self.state.cluster_version() {
            Some(Reply::error(StatusCode::VersionFailure, format!("cluster version is {}", self.state.cluster_version())))
        } else if let (Some(len), None) = (oversize, header.batch_id) {
            Some(oversize_value(&self.state, len))
        } else {
            None
        };
        if sequence > self.last_sequence.unwrap_or(i64::MIN) {
            self.last_sequence = Some(sequence);
        }
        if let Some(reply) = early {
            // An END_BATCH or ABORT_BATCH of this connection refused for its cluster version
            // ends its batch all the same (the client takes a failed END_BATCH as the batch
            // aborted): kept open, a batch fenced mid-way by a new epoch held its device-wide
            // slot until the connection closed or it had idled for `batch_idle_timeout_ms`.
            let ends_batch = matches!(MessageType::try_from(raw_type), Ok(MessageType::EndBatch | MessageType::AbortBatch));
            if let (true, StatusCode::VersionFailure, Some(id)) = (ends_batch, reply.status, header.batch_id) {
                self.batches.abort(id);
            }
            self.respond(auth(), &header, reply, None);
            return Ok(());
        }
        let kind = match MessageType::try_from(raw_type) {
            Ok(k) if response_type(raw_type).is_some() => k,
            _ => {
                let reply = Reply::error(StatusCode::InvalidRequest, format!("unknown message type {raw_type}"));
                self.respond(auth(), &header, reply, None);
                return Ok(());
            }
        };
        if let Some(reply) = self.gate(&caller, kind, &header) {
            self.respond(auth(), &header, reply, None);
            return Ok(());
        }
        let request = Request { auth: auth(), header, caller, kind, raw_type, sequence, received, body: command.body, value, oversize };
        self.dispatch(request).await
    }

    /// Drive states and permissions that stop a request before it runs: a locked drive, a
    /// hibernating one, a permission the caller lacks (key-independent ones here; per-key
    /// checks happen where the keys are known), a priority above the caller's maximum.
    fn gate(&self, caller: &Caller, kind: MessageType, header: &Header) -> Option<Reply> {
        if self.state.locked.load(std::sync::atomic::Ordering::Acquire) {
            return Some(Reply::error(StatusCode::DeviceLocked, "the drive is locked; unlock it with its PIN over TLS"));
        }
        let power = self.state.power_level();
        if power == PowerLevel::Hibernate as i32 && kind != MessageType::SetPowerLevel {
            return Some(Reply::error(StatusCode::Hibernate, "the drive is hibernating; only SET_POWER_LEVEL is accepted"));
        }
        if power == PowerLevel::Shutdown as i32 {
            return Some(Reply::error(StatusCode::Shutdown, "the drive is shutting down"));
        }
        if let (Some(max), Some(asked)) = (caller.identity.max_priority, header.priority) {
            if asked > max {
                return Some(Reply::error(StatusCode::NotAuthorized, format!("permission denied: priority {asked} is above this identity's maximum {max}")));
            }
        }
        let needed = cmd::permission(kind)?;
        (!caller.may(needed, None)).then(|| caller.refusal(needed))
    }
}
