//! Key reads: inline under `CachedReadsOnly`, again on a blocking thread when one needs the
//! disk, answered from there.

use prost::Message as _;
use spindle_engine::CachedReadsOnly;
use spindle_proto::pb::command::{Body, Header};
use spindle_proto::StatusCode;
use tokio::sync::{oneshot, OwnedSemaphorePermit};

use super::answers::{Auth, ANSWER_OVERHEAD};
use super::{Close, Connection, Request};
use crate::reply::{NeedsDisk, ReadResult, Reply};
use crate::security::Caller;
use crate::state::DriveState;

/// A key read of a request body, run inline under `CachedReadsOnly` and again on a blocking
/// thread if it needs the disk.
pub(super) type Read = fn(&DriveState, &Caller, &Body) -> ReadResult;

impl Connection {
    /// A key read: inline under `CachedReadsOnly`, again on a blocking thread if it needs the
    /// disk. It sees every write this connection sent before it.
    pub(super) async fn run_read(&mut self, r: Request, read: Read, body: Body) -> Result<(), Close> {
        let (permit, _turn) = self.admit(&r, Some(self.reads.clone())).await?;
        self.await_applied_writes().await;
        if let Some(reply) = self.expired(&r) {
            self.respond(r.auth, &r.header, reply, permit);
            return Ok(());
        }
        let answered = {
            let _memory_only = CachedReadsOnly::new();
            read(&self.state, &r.caller, &body)
        };
        match answered {
            Ok(reply) => {
                self.state.stats.record(r.raw_type, reply.value.len());
                self.respond(r.auth, &r.header, reply, permit);
            }
            Err(NeedsDisk) => self.read_on_disk(r.auth, &r.header, r.caller, r.raw_type, read, body, permit),
        }
        Ok(())
    }

    /// Runs a read that needs the disk on a blocking thread, answering it from there.
    #[allow(clippy::too_many_arguments, reason = "the request's answer address, the read and its body")]
    fn read_on_disk(&mut self, auth: Auth, header: &Header, caller: Caller, raw_type: i32, read: Read, body: Body, permit: Option<OwnedSemaphorePermit>) {
        let (done_tx, done_rx) = oneshot::channel();
        self.pending_disk_reads.retain_mut(|done| matches!(done.try_recv(), Err(oneshot::error::TryRecvError::Empty)));
        self.pending_disk_reads.push(done_rx);
        self.state.reads_on_disk.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut outgoing = self.addressed(auth, header, Reply::ok(None), permit);
        // The answer is not known yet: it is charged as the largest it can be until it is,
        // so reads waiting for the disk count against the backlog as much as answered ones.
        let estimate = outgoing.command.encoded_len() + self.state.config.limits.max_value_size as usize + ANSWER_OVERHEAD;
        self.tx.recharge(&mut outgoing, estimate);
        let (state, tx) = (self.state.clone(), self.tx.clone());
        let queue_depth = self.state.disk_reads.clone();
        tokio::spawn(async move {
            let Ok(_slot) = queue_depth.acquire_owned().await else {
                tx.backlog.remove(outgoing.charged);
                return;
            };
            let backlog = tx.backlog.clone();
            let read = tokio::task::spawn_blocking(move || {
                // Without CachedReadsOnly a read waits for the disk: it never needs it again.
                let reply = read(&state, &caller, &body).unwrap_or_else(|NeedsDisk| Reply::error(StatusCode::InternalError, "a read needed the disk on the thread that may wait for it"));
                state.stats.record(raw_type, reply.value.len());
                outgoing.answer(reply);
                outgoing
            });
            match read.await {
                Ok(mut outgoing) => {
                    let _ = done_tx.send(());
                    tx.charge(&mut outgoing);
                    tx.send(vec![outgoing]);
                }
                Err(_) => backlog.remove(estimate),
            }
        });
    }
}
