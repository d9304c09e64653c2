//! One client connection: the sign-on, a reader that authenticates and executes requests in
//! arrival order, and a writer that signs, frames and batches responses.
//!
//! Requests are taken in arrival order. Reads run inline; writes are queued to the engine's
//! single writer (which applies them in order) and answered from its callback, so pipelined
//! writes, WRITETHROUGH ones included, never wait for each other here and share group commits.
//! A read first waits until the connection's earlier writes are applied, so a pipelined
//! put-then-get sees its put.
//!
//! Reads run under `CachedReadsOnly`: one that would wait for the disk is refused by the
//! engine and run again on a blocking thread, answered when it completes, so one slow disk
//! read stalls neither this connection's later requests nor the runtime thread's other
//! connections. Until such reads are done, the connection runs only further reads: every
//! other request (a write above all) waits, so each read still sees exactly the writes sent
//! before it.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use prost::Message as _;
use spindle_proto::pb::command::{Body, GetLog, Header};
use spindle_proto::pb::message::AuthType;
use spindle_proto::pb::{Command, Message};
use spindle_proto::{encode_message_head, response_type, FrameError, FrameHeader, MessageType, Signature, StatusCode, HEADER_LEN};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use spindle_engine::{CachedReadsOnly, WriteOp, WriteRequest};
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};

use crate::batch::Batches;
use crate::security::{Caller, Permission};
use spindle_proto::pb::command::PowerLevel;
use crate::cmd::{self, Writes};
use crate::reply::{self, batch_body, engine_error, NeedsDisk, ReadResult, Reply};
use crate::metrics::RequestMetrics;
use crate::outbox::{Backlog, Outbox};
use crate::state::DriveState;

/// A value over maxValueSize but under this is read and thrown away so the client gets an
/// INVALID_REQUEST for its request; anything larger closes the connection at once.
pub const MAX_DISCARDED_VALUE: u32 = 64 * 1024 * 1024;
/// Read buffer per connection.
const READ_BUFFER: usize = 64 * 1024;
/// Bytes of responses gathered before they are written (values of 1 KiB and more are
/// written from their own buffers and count too).
const WRITE_BUFFER: usize = 256 * 1024;

/// How a response is authenticated.
enum Auth {
    /// Signed with the requesting identity's key.
    Hmac { identity: i64, key: spindle_proto::hmac::HmacKey },
    /// Sent unsigned with HMACAUTH (the identity was unknown, so there is no key to sign with).
    Unsigned { identity: i64 },
    /// The drive speaking on its own: sign-on, termination notices.
    Unsolicited,
    /// Answer to a PIN-authenticated request: PINAUTH, no HMAC.
    Pin,
}

struct Outgoing {
    auth: Auth,
    command: Command,
    value: Bytes,
    /// Released once the response is handed to the socket: bounds requests in flight.
    _permit: Option<OwnedSemaphorePermit>,
    /// What this answer counts against the connection's backlog (set when it is queued).
    charged: usize,
    /// When its request's frame was read (none for the drive's unsolicited messages): its
    /// latency is measured from here to the hand-off to the socket.
    received: Option<std::time::Instant>,
}

/// Bytes of answers a connection may have queued for its socket, beyond what the kernel's
/// socket buffers hold, before the drive stops reading its requests (see `Backlog`). Four
/// maximal values: a client that reads keeps its socket busy; one that never reads costs the
/// drive about this much, so maxConnections of them stay within a few GiB.
pub const ANSWER_BACKLOG: usize = 4 * 1024 * 1024;
/// Memory an answer holds beyond its encoded bytes (the structures it is kept in until it is
/// written), counted against the backlog so that many tiny answers are not free.
const ANSWER_OVERHEAD: usize = 512;
/// Answers gathered from one socket read are handed to the writer at least this often, so the
/// backlog sees them.
const MAX_ANSWERS_GATHERED: usize = 256;
/// How long a closing connection's writer may take to hand its last answers (and a
/// termination notice) to the socket before it is stopped: a client that never reads must not
/// keep its connection slot and buffers by not reading them.
const WRITER_GRACE: std::time::Duration = std::time::Duration::from_secs(5);
/// The slowest rate a frame may arrive at once it is longer than `frame_timeout_ms` allows at
/// this rate (a 64 MiB oversize value skipped gets 1,024 s, a 1 MiB value 16 s): an honest
/// client on a slow link keeps its connection, a stalled one does not.
const FRAME_RATE_MIN: u64 = 64 * 1024;

/// Hands answers to the connection's writer task, charging each against the backlog.
#[derive(Clone)]
struct Answers {
    tx: mpsc::UnboundedSender<Vec<Outgoing>>,
    backlog: Arc<Backlog>,
}

impl Answers {
    /// Charges `o` against the backlog now, at what it will cost once answered: an answer
    /// counts from the moment it is queued (or, for a read still running, reserved), not
    /// only once handed to the writer.
    fn charge(&self, o: &mut Outgoing) {
        let cost = o.command.encoded_len() + o.value.len() + ANSWER_OVERHEAD;
        self.recharge(o, cost);
    }

    /// Sets what `o` counts against the backlog to `cost`.
    fn recharge(&self, o: &mut Outgoing, cost: usize) {
        if cost > o.charged {
            self.backlog.add(cost - o.charged);
        } else {
            self.backlog.remove(o.charged - cost);
        }
        o.charged = cost;
    }

    fn send(&self, mut batch: Vec<Outgoing>) {
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
    fn answer(&mut self, mut reply: Reply) {
        self.value = std::mem::take(&mut reply.value);
        self.command.body = reply.body.take().map(|b| *b);
        self.command.status = reply.into_status();
    }
}

/// Why a connection is being closed by the drive.
#[derive(Debug)]
enum Close {
    /// The peer hung up between frames.
    Eof,
    /// Tell the peer why (CONNECTION_TERMINATED), then close.
    Terminate(String),
    /// The stream broke; nothing can be sent.
    Broken(String),
}

/// Which listener a connection came in on: security decisions (TLS-only operations and
/// identities) depend on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Plain,
    Tls,
}

pub async fn serve<S>(state: Arc<DriveState>, stream: S, peer: SocketAddr, transport: Transport)
where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    serve_in(state, stream, peer, transport, ConnectionSlot::General).await
}

/// Which connection slot a connection holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionSlot {
    General,
    /// One of the slots kept for administrators (`reserved_connections`): the connection's
    /// first authenticated request must come from an identity holding SECURITY, or be a PIN
    /// operation; anyone else is sent away, so the reserve stays free for them.
    Reserved,
}

/// Serves one connection admitted into `slot`.
pub async fn serve_in<S>(state: Arc<DriveState>, stream: S, peer: SocketAddr, transport: Transport, slot: ConnectionSlot)
where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let connection_id = state.new_connection_id();
    let (rd, wr) = tokio::io::split(stream);
    let (tx, rx) = mpsc::unbounded_channel();
    let backlog = Arc::new(Backlog::new(ANSWER_BACKLOG));
    let writer = tokio::spawn(write_loop(wr, rx, backlog.clone(), state.clone()));
    let tx = Answers { tx, backlog };

    tx.send(vec![Outgoing { auth: Auth::Unsolicited, command: sign_on(&state, connection_id), value: Bytes::new(), _permit: None, charged: 0, received: None }]);
    let mut conn = Connection {
        state: state.clone(),
        tx,
        accepted: std::time::Instant::now(),
        frame_received: std::time::Instant::now(),
        authenticated: false,
        slot,
        out: Vec::new(),
        pending_writes: parking_lot::Mutex::new(Vec::new()),
        connection_id,
        transport,
        last_sequence: None,
        last_write_applied: None,
        pending_disk_reads: Vec::new(),
        batches: Batches::new(
            state.batch_slots.clone(),
            state.config.limits,
            std::time::Duration::from_millis(state.config.batch_idle_timeout_ms),
        ),
        reads: Arc::new(Semaphore::new(state.config.limits.max_outstanding_read_requests as usize)),
        writes: Arc::new(Semaphore::new(state.config.limits.max_outstanding_write_requests as usize)),
    };
    let close = conn.run(rd).await;
    // The batches' device-wide slots are another client's to take as soon as possible.
    conn.batches.close();
    match &close {
        Close::Eof => tracing::debug!(%peer, connection_id, "connection closed by peer"),
        Close::Terminate(reason) => {
            state.event(format!("closing connection {connection_id} from {peer}: {reason}"));
            conn.send_unsolicited(StatusCode::ConnectionTerminated, reason.clone());
        }
        Close::Broken(reason) => tracing::debug!(%peer, connection_id, "connection broken: {reason}"),
    }
    conn.flush_out();
    drop(conn);
    // The writer may be stuck in a write the client never reads: give it a moment to hand over
    // the last answers, then stop it, which closes the socket and frees the buffers (the caller
    // frees the connection slot once this returns).
    let mut writer = writer;
    if tokio::time::timeout(WRITER_GRACE, &mut writer).await.is_err() {
        writer.abort();
        tracing::debug!(%peer, connection_id, "the client read nothing for {WRITER_GRACE:?} after the close; writer stopped");
    }
}

/// The unsolicited status a client waits for before its first request.
fn sign_on(state: &DriveState, connection_id: i64) -> Command {
    Command {
        header: Some(Header {
            connection_id: Some(connection_id),
            cluster_version: Some(state.cluster_version()),
            ..Header::default()
        }),
        body: Some(Body {
            get_log: Some(Box::new(GetLog {
                configuration: Some(cmd::get_log::configuration(state)),
                limits: Some(state.config.limits.to_proto()),
                ..GetLog::default()
            })),
            ..Body::default()
        }),
        status: Some(reply::status(StatusCode::Success, String::new())),
    }
}

/// Sent to a connection refused because the drive already has maxConnections.
pub async fn refuse<S: AsyncWrite + Unpin>(mut stream: S, state: &DriveState, reason: &str) {
    let mut command = sign_on(state, state.new_connection_id());
    command.body = None;
    command.status = Some(reply::status(StatusCode::ConnectionTerminated, reason.into()));
    let mut buf = BytesMut::new();
    encode_outgoing(&Outgoing { auth: Auth::Unsolicited, command, value: Bytes::new(), _permit: None, charged: 0, received: None }, &mut Vec::new(), &mut buf);
    let _ = stream.write_all(&buf).await;
    let _ = stream.shutdown().await;
}

struct Connection {
    state: Arc<DriveState>,
    /// Responses go to the writer task in batches: one wake-up and one socket write for all the
    /// requests that arrived together.
    tx: Answers,
    /// When the connection was accepted: the unauthenticated timeout counts from here, not
    /// from the last frame, so frames that fail their HMAC do not keep a socket open.
    accepted: std::time::Instant,
    /// When the frame being handled was read: every answer addressed while handling it
    /// carries it, for the latency metrics.
    frame_received: std::time::Instant,
    /// Whether a request has passed its HMAC, its connectionID check and (on a reserved slot)
    /// the reserve's check, or a PIN operation's PIN was verified: until then the connection
    /// is closed when slots are scarce, and on a reserved slot at its first frame that fails.
    authenticated: bool,
    slot: ConnectionSlot,
    /// Responses of the current read batch, not yet handed to the writer.
    out: Vec<Outgoing>,
    /// Writes of the current read batch, not yet handed to the engine: a burst of pipelined
    /// puts reaches the engine's writer as one submission (one wake-up, one queue operation).
    /// Anything that must see or follow them submits them first. (In a mutex only so that the
    /// connection is `Sync`, as its future must be `Send`; it is only used through `get_mut`.)
    pending_writes: parking_lot::Mutex<Vec<WriteRequest>>,
    connection_id: i64,
    /// TLS-only operations and TlsRequired scopes depend on it.
    transport: Transport,
    last_sequence: Option<i64>,
    /// Fires when this connection's latest write is visible to readers.
    last_write_applied: Option<oneshot::Receiver<()>>,
    /// Each fires when a read handed to a blocking thread (it needed the disk) has run.
    pending_disk_reads: Vec<oneshot::Receiver<()>>,
    batches: Batches,
    reads: Arc<Semaphore>,
    writes: Arc<Semaphore>,
}

impl Drop for Connection {
    /// Writes already accepted still reach the engine if the connection's task ends some other
    /// way than through `serve` (a panic, the runtime shutting down): their completion also
    /// returns their share of the in-flight write budget.
    fn drop(&mut self) {
        self.submit_pending_writes();
    }
}

/// One frame off the wire.
enum Incoming {
    Frame { message: Bytes, value: Bytes },
    /// The value exceeded maxValueSize and was skipped.
    OversizeValue { message: Bytes, len: u32 },
}

/// An authenticated request, as the dispatcher hands it to the way it runs.
struct Request {
    auth: Auth,
    header: Header,
    caller: Caller,
    kind: MessageType,
    raw_type: i32,
    sequence: i64,
    /// When its frame was read: its timeout counts from here.
    received: std::time::Instant,
    body: Option<Body>,
    value: Bytes,
    /// The length of a value over maxValueSize, skipped unread.
    oversize: Option<u32>,
}

/// A key read of a request body, run inline under `CachedReadsOnly` and again on a blocking
/// thread if it needs the disk.
type Read = fn(&DriveState, &Caller, &Body) -> ReadResult;

/// A write command's way to the engine outside a batch: the write joins this connection's
/// writes for the engine's writer (answered from its callback), a refusal is answered.
struct Answering<'c, 'h> {
    connection: &'c mut Connection,
    /// Taken by the one answer.
    auth: Option<Auth>,
    header: &'h Header,
    permit: Option<OwnedSemaphorePermit>,
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
    async fn run<R: AsyncRead + Unpin>(&mut self, rd: R) -> Close {
        let mut reader = BufReader::with_capacity(READ_BUFFER, rd);
        loop {
            if self.tx.backlog.is_full() || self.out.len() >= MAX_ANSWERS_GATHERED {
                self.flush_out();
            }
            if self.tx.backlog.is_full() {
                // The client is not reading its answers: take no more requests until it does.
                let idle = std::time::Duration::from_millis(self.state.config.idle_timeout_ms);
                match tokio::time::timeout(idle, self.tx.backlog.wait_for_room()).await {
                    Ok(Ok(())) => {}
                    Ok(Err(_)) => return Close::Broken("the socket's writer stopped".into()),
                    Err(_) => return Close::Broken(format!("the client read no answer for {} ms", idle.as_millis())),
                }
            }
            // A pipelining client's next frame is usually read already: taken without the
            // timers that bound a frame still arriving (each costs clock reads and a timer).
            let next = if complete_frame_buffered(reader.buffer(), &self.state.config.limits) {
                self.read_buffered_frame(&mut reader).await.map(Some)
            } else {
                self.read_frame(&mut reader).await
            };
            let incoming = match next {
                Ok(Some(i)) => i,
                Ok(None) => return Close::Eof,
                Err(close) => return close,
            };
            let (message, value, oversize) = match incoming {
                Incoming::Frame { message, value } => (message, value, None),
                Incoming::OversizeValue { message, len } => (message, Bytes::new(), Some(len)),
            };
            let received = std::time::Instant::now();
            if let Err(close) = self.handle_frame(message, value, oversize, received).await {
                return close;
            }
            // A reserved slot is kept for administrators: a first frame that did not
            // authenticate one (bad HMAC, unknown identity, wrong connectionID or sequence,
            // wrong PIN) ends the connection at once, after its answer.
            if self.slot == ConnectionSlot::Reserved && !self.authenticated {
                return Close::Terminate(format!(
                    "the drive has maxConnections ({}) connections; the last are kept for administrators, and this request did not authenticate one",
                    self.state.config.limits.max_connections
                ));
            }
            // Hand over the batch once no further whole request is waiting to be read.
            if !complete_frame_buffered(reader.buffer(), &self.state.config.limits) {
                self.flush_out();
            }
        }
    }

    fn flush_out(&mut self) {
        self.submit_pending_writes();
        if !self.out.is_empty() {
            self.tx.send(std::mem::take(&mut self.out));
        }
    }

    /// The next frame. While connection slots are scarce (`DriveState::connections_scarce`),
    /// a connection that has not authenticated within `unauthenticated_timeout_ms` of its
    /// accept, or that has been silent for `idle_timeout_ms`, is closed; with slots to spare it
    /// may wait (the reference client connects when it is created, maybe long before its first
    /// request, and does not reconnect after a close). A frame begun must be complete within
    /// `frame_timeout_ms`, or the time its length takes at [`FRAME_RATE_MIN`] if longer.
    async fn read_frame<R: AsyncRead + Unpin>(&self, r: &mut R) -> Result<Option<Incoming>, Close> {
        let config = &self.state.config;
        let idle = std::time::Duration::from_millis(config.idle_timeout_ms);
        let unauthenticated = std::time::Duration::from_millis(config.unauthenticated_timeout_ms);
        // How often a quiet connection past its deadlines looks again whether slots are scarce.
        let recheck = unauthenticated.min(idle);
        let idle_at = std::time::Instant::now() + idle;
        let authenticate_by = self.accepted + unauthenticated;
        let mut first = [0u8; 1];
        // Bounded: every round waits at least until a deadline or `recheck`.
        loop {
            let now = std::time::Instant::now();
            let deadlines = [Some(idle_at), (!self.authenticated).then_some(authenticate_by)];
            let wake = deadlines.into_iter().flatten().filter(|d| *d > now).fold(now + recheck, std::time::Instant::min);
            match tokio::time::timeout_at(wake.into(), r.read(&mut first)).await {
                Ok(Ok(0)) => return Ok(None),
                Ok(Ok(_)) => break,
                Ok(Err(e)) => return Err(Close::Broken(e.to_string())),
                Err(_) if !self.state.connections_scarce() => {}
                Err(_) => {
                    let now = std::time::Instant::now();
                    if !self.authenticated && now >= authenticate_by {
                        return Err(Close::Terminate(format!(
                            "no authenticated request within {} ms of connecting, and connection slots are scarce",
                            unauthenticated.as_millis()
                        )));
                    }
                    if now >= idle_at {
                        return Err(Close::Terminate("the connection was idle too long, and connection slots are scarce".into()));
                    }
                }
            }
        }
        self.read_rest_of_frame(first[0], r).await.map(Some)
    }

    /// A frame wholly in the read buffer ([`complete_frame_buffered`]): nothing to wait for.
    async fn read_buffered_frame<R: AsyncRead + Unpin>(&self, r: &mut BufReader<R>) -> Result<Incoming, Close> {
        let limits = &self.state.config.limits;
        let mut raw = [0u8; HEADER_LEN];
        r.read_exact(&mut raw).await.map_err(|_| Close::Broken(FrameError::Truncated.to_string()))?;
        let header = FrameHeader::parse(&raw, limits.max_message_size, MAX_DISCARDED_VALUE.max(limits.max_value_size))
            .map_err(|e| Close::Terminate(e.to_string()))?;
        self.read_frame_body(header, r).await
    }

    async fn read_rest_of_frame<R: AsyncRead + Unpin>(&self, first: u8, r: &mut R) -> Result<Incoming, Close> {
        let limits = &self.state.config.limits;
        let started = tokio::time::Instant::now();
        let frame_timeout = std::time::Duration::from_millis(self.state.config.frame_timeout_ms);
        let late = |allowed: std::time::Duration| Close::Broken(format!("a frame was not completed within {} ms", allowed.as_millis()));
        let mut raw = [0u8; HEADER_LEN];
        raw[0] = first;
        match tokio::time::timeout_at(started + frame_timeout, r.read_exact(&mut raw[1..])).await {
            Ok(read) => read.map_err(|_| Close::Broken(FrameError::Truncated.to_string()))?,
            Err(_) => return Err(late(frame_timeout)),
        };
        let header = FrameHeader::parse(&raw, limits.max_message_size, MAX_DISCARDED_VALUE.max(limits.max_value_size))
            .map_err(|e| Close::Terminate(e.to_string()))?;
        let len = header.message_len as u64 + header.value_len as u64;
        let allowed = frame_timeout.max(std::time::Duration::from_millis(len * 1000 / FRAME_RATE_MIN));
        match tokio::time::timeout_at(started + allowed, self.read_frame_body(header, r)).await {
            Ok(read) => read,
            Err(_) => Err(late(allowed)),
        }
    }

    async fn read_frame_body<R: AsyncRead + Unpin>(&self, header: FrameHeader, r: &mut R) -> Result<Incoming, Close> {
        let limits = &self.state.config.limits;
        let mut message = BytesMut::with_capacity(header.message_len as usize);
        read_exactly(r, &mut message, header.message_len as usize).await?;
        if header.value_len > limits.max_value_size {
            let mut skip = r.take(header.value_len as u64);
            let skipped = tokio::io::copy(&mut skip, &mut tokio::io::sink()).await.map_err(|e| Close::Broken(e.to_string()))?;
            if skipped != header.value_len as u64 {
                return Err(Close::Broken(FrameError::Truncated.to_string()));
            }
            return Ok(Incoming::OversizeValue { message: message.freeze(), len: header.value_len });
        }
        let mut value = BytesMut::with_capacity(header.value_len as usize);
        read_exactly(r, &mut value, header.value_len as usize).await?;
        Ok(Incoming::Frame { message: message.freeze(), value: value.freeze() })
    }

    async fn handle_frame(&mut self, raw_message: Bytes, value: Bytes, oversize: Option<u32>, received: std::time::Instant) -> Result<(), Close> {
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

    /// The one place a request type meets its command (crate::cmd) and the way the connection
    /// runs it: at once, on the engine's writer, on a blocking thread when a read needs the
    /// disk, or beside the connection.
    async fn dispatch(&mut self, mut r: Request) -> Result<(), Close> {
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
                    T::Mediascan => cmd::media_scan::run(&self.state, &r.caller, body.range.unwrap_or_default(), self.deadline(&r)),
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

    /// The in-flight permit (from `permits`, if any), then the priority ticket. The permit is
    /// taken first: it is released only when an earlier answer reaches this connection's
    /// socket, so waiting for it is waiting for this client to read, and a ticket held
    /// meanwhile would stop every lower priority on the drive for as long as the client
    /// pleases. Writes held for the burst go to the engine before any wait for the ticket: they
    /// were accepted earlier, and a higher priority elsewhere must not hold them back.
    async fn admit(&mut self, r: &Request, permits: Option<Arc<Semaphore>>) -> Result<(Option<OwnedSemaphorePermit>, crate::priority::Ticket), Close> {
        let permit = self.permit(permits).await?;
        Ok((permit, self.ticket(r).await))
    }

    /// An in-flight permit from `permits`, if the request takes one.
    async fn permit(&mut self, permits: Option<Arc<Semaphore>>) -> Result<Option<OwnedSemaphorePermit>, Close> {
        match permits {
            Some(p) => Ok(Some(self.acquire(p).await?)),
            None => Ok(None),
        }
    }

    /// The request's priority ticket, after handing the burst's held writes to the engine if
    /// the ticket is not free at once.
    async fn ticket(&mut self, r: &Request) -> crate::priority::Ticket {
        let state = self.state.clone();
        if state.priorities.would_wait(r.header.priority) {
            self.submit_pending_writes();
        }
        state.priorities.enter(r.header.priority).await
    }

    /// When the request's timeout (ms, counted from its arrival) runs out.
    fn deadline(&self, r: &Request) -> Option<std::time::Instant> {
        r.header.timeout.filter(|t| *t > 0).map(|t| r.received + std::time::Duration::from_millis(t as u64))
    }

    /// SERVICE_BUSY for a request that waited longer than its timeout for its turn.
    fn expired(&self, r: &Request) -> Option<Reply> {
        self.deadline(r)
            .is_some_and(|d| std::time::Instant::now() > d)
            .then(|| Reply::error(StatusCode::ServiceBusy, "the request waited longer than its timeout; retry with back-off"))
    }

    /// A key read: inline under `CachedReadsOnly`, again on a blocking thread if it needs the
    /// disk. It sees every write this connection sent before it.
    async fn run_read(&mut self, r: Request, read: Read, body: Body) -> Result<(), Close> {
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

    /// The response to the request `header`, addressed and ready to sign.
    fn addressed(&self, auth: Auth, header: &Header, reply: Reply, permit: Option<OwnedSemaphorePermit>) -> Outgoing {
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
    fn respond(&mut self, auth: Auth, header: &Header, reply: Reply, permit: Option<OwnedSemaphorePermit>) {
        let mut outgoing = self.addressed(auth, header, reply, permit);
        self.tx.charge(&mut outgoing);
        self.out.push(outgoing);
    }

    /// Hands a write to the engine's writer without waiting: the response is sent from the
    /// writer's callback once the write is acknowledged (after the group commit for `sync`),
    /// so pipelined writes of one connection share syncs too.
    /// `batch` holds the sequences of a batch's operations, reported in END_BATCH's answer.
    fn submit_write(&mut self, auth: Auth, header: &Header, op: WriteOp, sync: bool, permit: OwnedSemaphorePermit, batch: Option<Vec<i64>>) {
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

    /// A permit from `permits`. Every permit may be held by responses still in this burst's
    /// batch, so those are handed over first whenever the wait is not instant. Permits come
    /// back as this client reads its answers: one that reads nothing for `idle_timeout_ms` is
    /// closed.
    async fn acquire(&mut self, permits: Arc<Semaphore>) -> Result<OwnedSemaphorePermit, Close> {
        match permits.clone().try_acquire_owned() {
            Ok(p) => Ok(p),
            Err(_) => {
                self.flush_out();
                let idle = std::time::Duration::from_millis(self.state.config.idle_timeout_ms);
                match tokio::time::timeout(idle, permits.acquire_owned()).await {
                    Ok(permit) => permit.map_err(|_| Close::Broken("semaphore closed".into())),
                    Err(_) => Err(Close::Broken(format!("the client read no answer for {} ms", idle.as_millis()))),
                }
            }
        }
    }

    /// Waits until every write this connection has sent is visible to readers.
    async fn await_applied_writes(&mut self) {
        self.submit_pending_writes();
        if let Some(applied) = self.last_write_applied.take() {
            let _ = applied.await;
        }
    }

    /// Hands the burst's writes to the engine. The engine applies a connection's writes in
    /// order, so the last one being visible means all are: only it signals.
    fn submit_pending_writes(&mut self) {
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

    fn send_unsolicited(&mut self, code: StatusCode, message: String) {
        let command = Command {
            header: Some(Header { connection_id: Some(self.connection_id), ..Header::default() }),
            body: None,
            status: Some(reply::status(code, message)),
        };
        self.out.push(Outgoing { auth: Auth::Unsolicited, command, value: Bytes::new(), _permit: None, charged: 0, received: None });
    }
}

/// The answer to a request whose value exceeded maxValueSize (and was skipped unread).
fn oversize_value(state: &DriveState, len: u32) -> Reply {
    Reply::error(StatusCode::InvalidRequest, format!("value of {len} bytes exceeds maxValueSize {}", state.config.limits.max_value_size))
}

/// Reads exactly `len` bytes into `buf` without zero-filling it first.
async fn read_exactly<R: AsyncRead + Unpin>(r: &mut R, buf: &mut BytesMut, len: usize) -> Result<(), Close> {
    while buf.len() < len {
        let want = len - buf.len();
        let mut limited = (&mut *buf).limit(want);
        match r.read_buf(&mut limited).await {
            Ok(0) => return Err(Close::Broken(FrameError::Truncated.to_string())),
            Ok(_) => {}
            Err(e) => return Err(Close::Broken(e.to_string())),
        }
    }
    Ok(())
}

/// Appends the head of `o`'s frame (its value follows it on the wire); `scratch` holds the
/// encoded command while it is signed.
fn encode_outgoing(o: &Outgoing, scratch: &mut Vec<u8>, out: &mut BytesMut) {
    scratch.clear();
    #[allow(clippy::expect_used, reason = "prost's encode fails only for a buffer that cannot grow; a Vec always can")]
    o.command.encode(scratch).expect("a Vec grows on demand");
    let hmac;
    let signature = match &o.auth {
        Auth::Hmac { identity, key } => {
            hmac = key.sign(scratch);
            Signature::Hmac { identity: *identity, hmac: Some(&hmac) }
        }
        Auth::Unsigned { identity } => Signature::Hmac { identity: *identity, hmac: None },
        Auth::Pin => Signature::Pin,
        Auth::Unsolicited => Signature::Unsolicited,
    };
    encode_message_head(signature, scratch, o.value.len() as u32, out);
}

/// Whether `buf` starts with a whole frame (so reading it will not wait for the socket): its
/// header passes proto's checks against the drive's limits and its body is all there. A header
/// that fails them is left to the ordinary read, which reports it.
fn complete_frame_buffered(buf: &[u8], limits: &spindle_proto::Limits) -> bool {
    let Some(raw) = buf.first_chunk::<HEADER_LEN>() else { return false };
    FrameHeader::parse(raw, limits.max_message_size, MAX_DISCARDED_VALUE.max(limits.max_value_size))
        .is_ok_and(|header| header.value_len <= limits.max_value_size && buf.len() >= HEADER_LEN + header.body_len())
}

async fn write_loop<W: AsyncWrite + Unpin>(wr: W, rx: mpsc::UnboundedReceiver<Vec<Outgoing>>, backlog: Arc<Backlog>, state: Arc<DriveState>) {
    write_answers(wr, rx, &backlog, &state.metrics).await;
    // Whatever is still queued will never be written; a reader waiting for room must not wait.
    backlog.close();
}

async fn write_answers<W: AsyncWrite + Unpin>(mut wr: W, mut rx: mpsc::UnboundedReceiver<Vec<Outgoing>>, backlog: &Backlog, metrics: &RequestMetrics) {
    let mut outbox = Outbox::with_capacity(WRITE_BUFFER);
    let mut scratch = Vec::with_capacity(4096);
    // Charged bytes of the answers in the outbox, returned to the backlog once written.
    let mut gathered = 0;
    while let Some(first) = rx.recv().await {
        let mut next = Some(first);
        while let Some(batch) = next {
            for o in batch {
                if let (Some(received), Some(header)) = (o.received, &o.command.header) {
                    let status = o.command.status.as_ref().and_then(|s| s.code).unwrap_or(StatusCode::Success as i32);
                    metrics.record(header.message_type.unwrap_or(-1), status, received.elapsed());
                }
                outbox.push(|out| encode_outgoing(&o, &mut scratch, out), &o.value);
                gathered += o.charged;
                drop(o);
                if outbox.len() >= WRITE_BUFFER {
                    if outbox.write_to(&mut wr).await.is_err() {
                        return;
                    }
                    backlog.remove(std::mem::take(&mut gathered));
                }
            }
            next = rx.try_recv().ok();
        }
        if (!outbox.is_empty() && outbox.write_to(&mut wr).await.is_err()) || wr.flush().await.is_err() {
            return;
        }
        backlog.remove(std::mem::take(&mut gathered));
    }
    let _ = wr.shutdown().await;
}
