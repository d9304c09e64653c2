//! Answers: addressed to their request, charged against the connection's backlog, and
//! handed to the writer task in batches.

use std::sync::Arc;

use bytes::Bytes;
use prost::Message as _;
use spindle_proto::pb::command::Header;
use spindle_proto::pb::Command;
use spindle_proto::{response_type, StatusCode};
use tokio::sync::{mpsc, OwnedSemaphorePermit};

use super::Connection;
use crate::outbox::Backlog;
use crate::reply::{self, Reply};

/// How a response is authenticated.
pub(super) enum Auth {
    /// Signed with the requesting identity's key.
    Hmac { identity: i64, key: spindle_proto::hmac::HmacKey },
    /// Sent unsigned with HMACAUTH (the identity was unknown, so there is no key to sign with).
    Unsigned { identity: i64 },
    /// The drive speaking on its own: sign-on, termination notices.
    Unsolicited,
    /// Answer to a PIN-authenticated request: PINAUTH, no HMAC.
    Pin,
}

pub(super) struct Outgoing {
    pub(super) auth: Auth,
    pub(super) command: Command,
    pub(super) value: Bytes,
    /// Released once the response is handed to the socket: bounds requests in flight.
    pub(super) _permit: Option<OwnedSemaphorePermit>,
    /// What this answer counts against the connection's backlog (set when it is queued).
    pub(super) charged: usize,
    /// When its request's frame was read (none for the drive's unsolicited messages): its
    /// latency is measured from here to the hand-off to the socket.
    pub(super) received: Option<tokio::time::Instant>,
}

/// Bytes of answers a connection may have queued for its socket, beyond what the kernel's
/// socket buffers hold, before the drive stops reading its requests (see `Backlog`). Four
/// maximal values: a client that reads keeps its socket busy; one that never reads costs the
/// drive about this much, so maxConnections of them stay within a few GiB.
pub const ANSWER_BACKLOG: usize = 4 * 1024 * 1024;
/// Memory an answer holds beyond its encoded bytes (the structures it is kept in until it is
/// written), counted against the backlog so that many tiny answers are not free.
pub(super) const ANSWER_OVERHEAD: usize = 512;

/// Hands answers to the connection's writer task, charging each against the backlog.
#[derive(Clone)]
pub(super) struct Answers {
    pub(super) tx: mpsc::UnboundedSender<Vec<Outgoing>>,
    pub(super) backlog: Arc<Backlog>,
}

impl Answers {
    /// Charges `o` against the backlog now, at what it will cost once answered: an answer
    /// counts from the moment it is queued (or, for a read still running, reserved), not
    /// only once handed to the writer.
    pub(super) fn charge(&self, o: &mut Outgoing) {
        let cost = o.command.encoded_len() + o.value.len() + ANSWER_OVERHEAD;
        self.recharge(o, cost);
    }

    /// Sets what `o` counts against the backlog to `cost`.
    pub(super) fn recharge(&self, o: &mut Outgoing, cost: usize) {
        if cost > o.charged {
            self.backlog.add(cost - o.charged);
        } else {
            self.backlog.remove(o.charged - cost);
        }
        o.charged = cost;
    }

    pub(super) fn send(&self, mut batch: Vec<Outgoing>) {
        for o in batch.iter_mut().filter(|o| o.charged == 0) {
            self.charge(o);
        }
        if let Err(unsent) = self.tx.send(batch) {
            self.backlog.remove(unsent.0.iter().map(|o| o.charged).sum());
        }
    }
}

impl Outgoing {
    /// Fills in the answer of a response addressed before its request ran.
    pub(super) fn answer(&mut self, mut reply: Reply) {
        self.value = std::mem::take(&mut reply.value);
        self.command.body = reply.body.take().map(|b| *b);
        self.command.status = reply.into_status();
    }
}

impl Connection {
    pub(super) fn flush_out(&mut self) {
        self.submit_pending_writes();
        if !self.out.is_empty() {
            self.tx.send(std::mem::take(&mut self.out));
        }
    }

    /// The response to the request `header`, addressed and ready to sign.
    pub(super) fn addressed(&self, auth: Auth, header: &Header, reply: Reply, permit: Option<OwnedSemaphorePermit>) -> Outgoing {
        let response_header = Header {
            ack_sequence: header.sequence,
            message_type: header.message_type.and_then(response_type).map(|t| t as i32),
            connection_id: Some(self.connection_id),
            cluster_version: Some(self.state.cluster_version()),
            ..Header::default()
        };
        let mut outgoing = Outgoing {
            auth,
            command: Command { header: Some(response_header), body: None, status: None },
            value: Bytes::new(),
            _permit: permit,
            charged: 0,
            received: Some(self.frame_received),
        };
        outgoing.answer(reply);
        outgoing
    }

    /// Queues the answer to `header`, charging it against the backlog at once: answers
    /// gathered before a flush count too, so a burst of large reads stops the reader as soon
    /// as its answers pass the backlog, not only once handed to the writer.
    pub(super) fn respond(&mut self, auth: Auth, header: &Header, reply: Reply, permit: Option<OwnedSemaphorePermit>) {
        let mut outgoing = self.addressed(auth, header, reply, permit);
        self.tx.charge(&mut outgoing);
        self.out.push(outgoing);
    }

    pub(super) fn send_unsolicited(&mut self, code: StatusCode, message: String) {
        let command = Command {
            header: Some(Header { connection_id: Some(self.connection_id), ..Header::default() }),
            body: None,
            status: Some(reply::status(code, message)),
        };
        self.out.push(Outgoing { auth: Auth::Unsolicited, command, value: Bytes::new(), _permit: None, charged: 0, received: None });
    }
}
