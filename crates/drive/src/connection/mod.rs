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
//!
//! One file per idea: `frames` reads frames off the socket, `authenticate` takes a frame to an
//! authenticated, checked request, `dispatch` runs it (`admission` its in-flight permit,
//! priority ticket and timeout, `reads` key reads, `writes` writes held for the burst and
//! handed to the engine), `answers` addresses and queues the answers, `writer` signs, frames
//! and writes them, `sign_on` is the drive's first message, or its refusal.

mod admission;
mod answers;
mod authenticate;
mod dispatch;
mod frames;
mod reads;
mod sign_on;
mod writer;
mod writes;

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use spindle_proto::pb::command::{Body, Header};
use spindle_proto::{MessageType, StatusCode};
use tokio::io::{AsyncRead, AsyncWrite, BufReader};
use spindle_engine::WriteRequest;
use tokio::sync::{mpsc, oneshot, Semaphore};

use crate::batch::Batches;
use crate::security::Caller;
use crate::outbox::Backlog;
use crate::state::DriveState;
use answers::{Answers, Auth, Outgoing, ANSWER_BACKLOG};
use frames::{complete_frame_buffered, Incoming};
use sign_on::sign_on;
use writer::write_loop;

pub use frames::MAX_DISCARDED_VALUE;
pub use sign_on::refuse;

/// Read buffer per connection.
const READ_BUFFER: usize = 64 * 1024;
/// Answers gathered from one socket read are handed to the writer at least this often, so the
/// backlog sees them.
const MAX_ANSWERS_GATHERED: usize = 256;
/// How long a closing connection's writer may take to hand its last answers (and a
/// termination notice) to the socket before it is stopped: a client that never reads must not
/// keep its connection slot and buffers by not reading them.
const WRITER_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

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
        accepted: tokio::time::Instant::now(),
        frame_received: tokio::time::Instant::now(),
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

struct Connection {
    state: Arc<DriveState>,
    /// Responses go to the writer task in batches: one wake-up and one socket write for all the
    /// requests that arrived together.
    tx: Answers,
    /// When the connection was accepted: the unauthenticated timeout counts from here, not
    /// from the last frame, so frames that fail their HMAC do not keep a socket open.
    accepted: tokio::time::Instant,
    /// When the frame being handled was read: every answer addressed while handling it
    /// carries it, for the latency metrics.
    frame_received: tokio::time::Instant,
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

/// An authenticated request, as the dispatcher hands it to the way it runs.
struct Request {
    auth: Auth,
    header: Header,
    caller: Caller,
    kind: MessageType,
    raw_type: i32,
    sequence: i64,
    /// When its frame was read: its timeout counts from here.
    received: tokio::time::Instant,
    body: Option<Body>,
    value: Bytes,
    /// The length of a value over maxValueSize, skipped unread.
    oversize: Option<u32>,
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
            let received = tokio::time::Instant::now();
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
}
