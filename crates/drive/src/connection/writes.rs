//! Writes: held for the burst, handed to the engine's writer together, answered from its
//! callback; the in-flight write budget; waiting until they are visible to readers.

use spindle_engine::{WriteOp, WriteRequest};
use spindle_proto::pb::command::Header;
use spindle_proto::StatusCode;
use tokio::sync::{oneshot, OwnedSemaphorePermit};

use super::answers::Auth;
use super::Connection;
use crate::cmd::Writes;
use crate::reply::{batch_body, engine_error, Reply};

impl Drop for Connection {
    /// Writes already accepted still reach the engine if the connection's task ends some other
    /// way than through `serve` (a panic, the runtime shutting down): their completion also
    /// returns their share of the in-flight write budget.
    fn drop(&mut self) {
        self.submit_pending_writes();
    }
}

/// A write command's way to the engine outside a batch: the write joins this connection's
/// writes for the engine's writer (answered from its callback), a refusal is answered.
pub(super) struct Answering<'c, 'h> {
    pub(super) connection: &'c mut Connection,
    /// Taken by the one answer.
    pub(super) auth: Option<Auth>,
    pub(super) header: &'h Header,
    pub(super) permit: Option<OwnedSemaphorePermit>,
}

impl Writes for Answering<'_, '_> {
    fn write(&mut self, op: WriteOp, sync: bool) {
        let (Some(auth), Some(permit)) = (self.auth.take(), self.permit.take()) else { return };
        self.connection.submit_write(auth, self.header, op, sync, permit, None);
    }

    fn refuse(&mut self, reply: Reply) {
        let Some(auth) = self.auth.take() else { return };
        self.connection.respond(auth, self.header, reply, self.permit.take());
    }
}

impl Connection {
    /// Hands a write to the engine's writer without waiting: the response is sent from the
    /// writer's callback once the write is acknowledged (after the group commit for `sync`),
    /// so pipelined writes of one connection share syncs too.
    /// `batch` holds the sequences of a batch's operations, reported in END_BATCH's answer.
    pub(super) fn submit_write(&mut self, auth: Auth, header: &Header, op: WriteOp, sync: bool, permit: OwnedSemaphorePermit, batch: Option<Vec<i64>>) {
        let footprint = op.footprint() as u64;
        let limit = self.state.config.max_inflight_write_bytes;
        let before = self.state.inflight_write_bytes.fetch_add(footprint, std::sync::atomic::Ordering::AcqRel);
        // A lone write is always admitted, however large: the budget limits concurrency only.
        if before > 0 && before + footprint > limit {
            self.state.inflight_write_bytes.fetch_sub(footprint, std::sync::atomic::Ordering::AcqRel);
            let reply = Reply::error(
                StatusCode::ServiceBusy,
                format!("{before} bytes of writes in flight on the drive (limit {limit}); retry with back-off"),
            );
            self.respond(auth, header, reply, Some(permit));
            return;
        }
        let state = self.state.clone();
        let mut outgoing = self.addressed(auth, header, Reply::ok(None), Some(permit));
        let tx = self.tx.clone();
        self.pending_writes.get_mut().push(WriteRequest {
            op,
            sync,
            // Set on the last write of the burst when it is submitted.
            on_applied: None,
            on_done: Box::new(move |result| {
                state.inflight_write_bytes.fetch_sub(footprint, std::sync::atomic::Ordering::AcqRel);
                if let Some(sequences) = batch {
                    let failed = match &result {
                        Err(spindle_engine::Error::BatchFailed { index, .. }) => sequences.get(*index).copied(),
                        _ => None,
                    };
                    outgoing.command.body = Some(batch_body(sequences, failed));
                }
                if let Err(e) = result {
                    outgoing.command.status = engine_error(e).into_status();
                }
                tx.send(vec![outgoing]);
            }),
        });
    }

    /// Waits until every write this connection has sent is visible to readers.
    pub(super) async fn await_applied_writes(&mut self) {
        self.submit_pending_writes();
        if let Some(applied) = self.last_write_applied.take() {
            let _ = applied.await;
        }
    }

    /// Hands the burst's writes to the engine. The engine applies a connection's writes in
    /// order, so the last one being visible means all are: only it signals.
    pub(super) fn submit_pending_writes(&mut self) {
        let pending = self.pending_writes.get_mut();
        let Some(last) = pending.last_mut() else { return };
        let (applied_tx, applied_rx) = oneshot::channel();
        last.on_applied = Some(Box::new(move |_| {
            let _ = applied_tx.send(());
        }));
        self.last_write_applied = Some(applied_rx);
        let writes = std::mem::take(pending);
        self.state.engine.submit_all(writes);
    }
}
