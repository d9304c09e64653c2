//! The dispatcher: one match from message type to command and the way it runs.

use spindle_proto::{MessageType, StatusCode};

use super::frames::oversize_value;
use super::reads::Read;
use super::writes::Answering;
use super::{Close, Connection, Request};
use crate::cmd;
use crate::reply::Reply;

impl Connection {
    /// The one place a request type meets its command (crate::cmd) and the way the connection
    /// runs it: at once, on the engine's writer, on a blocking thread when a read needs the
    /// disk, or beside the connection.
    pub(super) async fn dispatch(&mut self, mut r: Request) -> Result<(), Close> {
        use MessageType as T;
        if let Some(id) = r.header.batch_id {
            return self.run_batched(r, id).await;
        }
        let value_len = r.value.len();
        match r.kind {
            // Administration: answered before the priority gate, which it must be able to
            // reach even while the drive is busy.
            T::Security | T::Setup | T::SetPowerLevel => {
                let body = r.body.unwrap_or_default();
                let reply = match r.kind {
                    T::Security if !r.caller.tls => Reply::error(StatusCode::InvalidRequest, "SECURITY is accepted only over TLS"),
                    T::Security => cmd::security::run(&self.state, body.security.map(|s| *s).unwrap_or_default()).await,
                    T::Setup => cmd::setup::run(&self.state, body.setup.map(|s| *s).unwrap_or_default()),
                    _ => cmd::power::run(&self.state, body.power.and_then(|p| p.level)),
                };
                self.state.stats.record(r.raw_type, value_len);
                self.respond(r.auth, &r.header, reply, None);
            }
            T::Mediaoptimize => {
                let (permit, turn) = self.admit(&r, Some(self.writes.clone())).await?;
                // Compaction takes a while: it runs beside the connection, after this
                // connection's earlier writes, and keeps its priority while it runs.
                self.await_applied_writes().await;
                let mut outgoing = self.addressed(r.auth, &r.header, Reply::ok(None), permit);
                let (state, tx) = (self.state.clone(), self.tx.clone());
                tokio::spawn(async move {
                    let _turn = turn;
                    outgoing.answer(cmd::media_optimize::run(&state).await);
                    tx.send(vec![outgoing]);
                });
            }
            T::Peer2peerpush => {
                let (permit, turn) = self.admit(&r, Some(self.writes.clone())).await?;
                // The push reads this drive: it must see the writes this connection sent before it.
                self.await_applied_writes().await;
                let request = r.body.and_then(|b| b.p2p_operation).map(|p| *p).unwrap_or_default();
                let mut outgoing = self.addressed(r.auth, &r.header, Reply::ok(None), permit);
                let (state, tx, caller) = (self.state.clone(), self.tx.clone(), r.caller);
                // The push talks to another drive, chosen by the client: it runs beside this
                // connection, not in its way, and without its priority ticket, since a peer that
                // never answers would otherwise hold every lower priority on this drive until its
                // timeout. (MEDIAOPTIMIZE keeps its ticket: that is the drive's own, bounded work.)
                drop(turn);
                tokio::spawn(async move {
                    outgoing.answer(cmd::p2p::run(state, caller, request).await);
                    tx.send(vec![outgoing]);
                });
            }
            T::Put | T::Delete | T::Flushalldata => {
                let (permit, _turn) = self.admit(&r, Some(self.writes.clone())).await?;
                if let Some(reply) = self.expired(&r) {
                    self.respond(r.auth, &r.header, reply, permit);
                    return Ok(());
                }
                self.state.stats.record(r.raw_type, value_len);
                let state = self.state.clone();
                let kv = r.body.and_then(|b| b.key_value).unwrap_or_default();
                let mut to = Answering { connection: self, auth: Some(r.auth), header: &r.header, permit };
                match r.kind {
                    T::Put => cmd::put::run(&state, &r.caller, kv, r.value, &mut to),
                    T::Delete => cmd::delete::run(&state, &r.caller, kv, &mut to),
                    _ => cmd::flush::run(&mut to),
                }
            }
            T::Get | T::Getversion | T::Getnext | T::Getprevious | T::Getkeyrange => {
                let body = r.body.take().unwrap_or_default();
                let read: Read = match r.kind {
                    T::Get => |s, c, b| cmd::get::run(s, c, b.key_value.as_ref().unwrap_or(&Default::default())),
                    T::Getversion => |s, c, b| cmd::get_version::run(s, c, b.key_value.as_ref().unwrap_or(&Default::default())),
                    T::Getnext => |s, c, b| cmd::neighbour::next(s, c, b.key_value.as_ref().unwrap_or(&Default::default())),
                    T::Getprevious => |s, c, b| cmd::neighbour::previous(s, c, b.key_value.as_ref().unwrap_or(&Default::default())),
                    _ => |s, c, b| cmd::key_range::run(s, c, b.range.as_ref().unwrap_or(&Default::default())),
                };
                self.run_read(r, read, body).await?;
            }
            T::Getlog | T::Mediascan | T::Noop => {
                let (permit, _turn) = self.admit(&r, Some(self.reads.clone())).await?;
                // It sees every write this connection sent before it.
                self.await_applied_writes().await;
                if let Some(reply) = self.expired(&r) {
                    self.respond(r.auth, &r.header, reply, permit);
                    return Ok(());
                }
                let body = r.body.take().unwrap_or_default();
                let reply = match r.kind {
                    T::Getlog => cmd::get_log::run(&self.state, &r.caller, &body.get_log.unwrap_or_default()),
                    T::Mediascan => cmd::media_scan::run(&self.state, &r.caller, body.range.unwrap_or_default(), self.deadline(&r).map(tokio::time::Instant::into_std)),
                    _ => cmd::noop::run(),
                };
                self.state.stats.record(r.raw_type, value_len + if r.kind == T::Mediascan { 0 } else { reply.value.len() });
                self.respond(r.auth, &r.header, reply, permit);
            }
            T::Pinop => self.respond(r.auth, &r.header, Reply::error(StatusCode::InvalidRequest, "PINOP needs PIN authentication (PINAUTH) over TLS"), None),
            T::StartBatch | T::EndBatch | T::AbortBatch => {
                let reply = Reply::error(StatusCode::InvalidRequest, format!("{} needs a batchID", r.kind.as_str_name()));
                self.respond(r.auth, &r.header, reply, None);
            }
            other => {
                let reply = Reply::error(StatusCode::InvalidRequest, format!("{} is not a request message type", other.as_str_name()));
                self.respond(r.auth, &r.header, reply, None);
            }
        }
        Ok(())
    }

    /// A request carrying batchID `id` (crate::cmd::batch).
    async fn run_batched(&mut self, r: Request, id: u32) -> Result<(), Close> {
        let permit = self.permit((r.kind == MessageType::EndBatch).then(|| self.writes.clone())).await?;
        // A START_BATCH waits for another client to free a batch slot before its turn: that
        // wait is not the drive's work and must not hold lower priorities back.
        let slot = if r.kind == MessageType::StartBatch {
            self.flush_out();
            Some(self.batches.slot_for(id).await)
        } else {
            None
        };
        let _turn = self.ticket(&r).await;
        let state = self.state.clone();
        let value = match r.oversize {
            Some(len) => Err(oversize_value(&self.state, len)),
            None => Ok(r.value),
        };
        self.state.stats.record(r.raw_type, value.as_ref().map_or(0, |v| v.len()));
        match cmd::batch::run(&state, &r.caller, &mut self.batches, id, r.kind, r.sequence, r.body, value, slot) {
            cmd::batch::Step::Answer(reply) => self.respond(r.auth, &r.header, reply, None),
            cmd::batch::Step::Held => {}
            cmd::batch::Step::Commit { op, sequences } => match permit {
                Some(permit) => self.submit_write(r.auth, &r.header, op, true, permit, Some(sequences)),
                None => self.respond(r.auth, &r.header, Reply::error(StatusCode::InternalError, "END_BATCH came without its write permit"), None),
            },
        }
        Ok(())
    }
}
