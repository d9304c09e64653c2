use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;
use prost::Message as _;
use spindle_proto::pb::command::{get_log, Body, Header, KeyValue, Range};
use spindle_proto::pb::message::AuthType;
use spindle_proto::pb::{Command, Message};
use spindle_proto::hmac::HmacKey;
use spindle_proto::{encode_frame_head, encode_message_head, response_type, FrameDecoder, MessageType, Signature, StatusCode};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::net::ToSocketAddrs;
use tokio::sync::{mpsc, oneshot};

use crate::connect::{handshake, read_frame, Handshake};
use crate::{ClientConfig, ClientError, DeleteOptions, Entry, Metadata, PutOptions, RangeQuery};

mod batches;


/// A drive's answer.
#[derive(Debug, Clone)]
pub struct Response {
    pub command: Command,
    pub value: Bytes,
}

impl Response {
    pub fn status(&self) -> StatusCode {
        status_code(self.command.status.as_ref())
    }

    pub fn status_message(&self) -> String {
        self.command.status.as_ref().and_then(|s| s.status_message.clone()).unwrap_or_default()
    }

    pub fn body(&self) -> Body {
        self.command.body.clone().unwrap_or_default()
    }

    pub(crate) fn into_result(self) -> Result<Response, ClientError> {
        match self.status() {
            StatusCode::Success => Ok(self),
            code => Err(ClientError::Status { code, message: self.status_message() }),
        }
    }
}

type Waiter = oneshot::Sender<Result<Response, ClientError>>;

struct Shared {
    config: ClientConfig,
    /// `config.hmac_key` prepared for signing and verifying.
    mac: HmacKey,
    connection_id: i64,
    sign_on: Command,
    /// Batch ids need only be unique per connection: one counter per connection, so that a
    /// connection's ids do not depend on what other connections of the process did.
    next_batch_id: std::sync::atomic::AtomicU32,
    /// One permit per batch the drive lets be open at once (`crate::connect::batch_slots`).
    batch_slots: Arc<tokio::sync::Semaphore>,
    /// Sent in every request's header; starts as `config.cluster_version` and follows
    /// [`Client::set_request_cluster_version`] (a cluster's view changes under open connections).
    cluster_version: std::sync::atomic::AtomicI64,
    /// Sequence numbers and the send queue under one lock: wire order = sequence order.
    sender: Mutex<Sender>,
    /// Shared with the reader task, which must not keep the connection alive by itself: when
    /// the last `Client` clone drops, the sender drops, the writer shuts the socket down, and
    /// the reader sees the drive close.
    pending: Arc<Mutex<Pending>>,
    /// The reader and writer tasks, stopped when the connection is given up for lost.
    tasks: [tokio::task::AbortHandle; 2],
}

/// A request's waiter, taken back out of the pending table when dropped while armed.
struct Unanswered<'a> {
    pending: &'a Mutex<Pending>,
    sequence: Option<i64>,
}

impl Drop for Unanswered<'_> {
    fn drop(&mut self) {
        if let Some(sequence) = self.sequence {
            self.pending.lock().waiters.remove(&sequence);
        }
    }
}

struct Sender {
    next_sequence: i64,
    /// Frame head (header and message) and value: large values are written without copying.
    frames: mpsc::UnboundedSender<(Bytes, Bytes)>,
}

#[derive(Default)]
struct Pending {
    waiters: BTreeMap<i64, Waiter>,
    /// Set once the connection is gone; later requests fail at once.
    closed: Option<String>,
    /// The newest request given a waiter, and what that was when the drive's latest frame
    /// came: a request newer than `heard_after` that times out met a connection that said
    /// nothing at all since it was sent (`Client::give_up_if_silent`). Kept here, not in the
    /// request's future, which every caller moves whole.
    newest: i64,
    heard_after: i64,
}

impl Pending {
    /// Marks the connection gone and hands back the requests still waiting on it.
    fn close(&mut self, reason: String) -> BTreeMap<i64, Waiter> {
        self.closed = Some(reason);
        std::mem::take(&mut self.waiters)
    }
}

/// A connection to one drive. Cheap to clone; clones share the connection.
#[derive(Clone)]
pub struct Client {
    shared: Arc<Shared>,
    /// The cluster version this handle's requests carry whatever the connection's says
    /// (`at_cluster_version`).
    pinned_version: Option<i64>,
}

impl Client {
    /// Connects, waits for the drive's sign-on and adopts its connection id.
    pub async fn connect(addr: impl ToSocketAddrs + std::fmt::Display, config: ClientConfig) -> Result<Client, ClientError> {
        let Handshake { rd, wr, decoder, buf, sign_on, connection_id } = handshake(addr, &config).await?;
        let (frames, queue) = mpsc::unbounded_channel();
        let pending = Arc::new(Mutex::new(Pending::default()));
        let mac = HmacKey::new(&config.hmac_key);
        let writer = tokio::spawn(write_loop(wr, queue)).abort_handle();
        let reader = tokio::spawn(read_loop(rd, decoder, buf, pending.clone(), mac.clone())).abort_handle();
        let batch_slots = Arc::new(tokio::sync::Semaphore::new(crate::connect::batch_slots(&sign_on)));
        let shared = Arc::new(Shared {
            mac,
            cluster_version: std::sync::atomic::AtomicI64::new(config.cluster_version),
            config,
            connection_id,
            sign_on,
            next_batch_id: std::sync::atomic::AtomicU32::new(1),
            batch_slots,
            sender: Mutex::new(Sender { next_sequence: 1, frames }),
            pending,
            tasks: [reader, writer],
        });
        Ok(Client { shared, pinned_version: None })
    }

    /// The unsolicited status the drive sent on connect (configuration, limits).
    pub fn sign_on(&self) -> &Command {
        &self.shared.sign_on
    }

    /// Whether the connection is gone (every request would fail).
    pub fn is_closed(&self) -> bool {
        self.shared.pending.lock().closed.is_some()
    }

    /// A handle on the same connection whose requests carry `version`, whatever
    /// `set_request_cluster_version` says: an operation decided under one view of a cluster
    /// must not be taken by a drive already fenced to the next.
    pub fn at_cluster_version(&self, version: i64) -> Client {
        Client { shared: self.shared.clone(), pinned_version: Some(version) }
    }

    /// The cluster version this handle's requests carry.
    pub fn cluster_version(&self) -> i64 {
        if let Some(v) = self.pinned_version {
            return v;
        }
        self.shared.cluster_version.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Makes later requests on this connection (and its clones) carry `version`: a drive
    /// refuses any other with VERSION_FAILURE, so a cluster client that learns a new view
    /// switches its open connections instead of reconnecting.
    pub fn set_request_cluster_version(&self, version: i64) {
        self.shared.cluster_version.store(version, std::sync::atomic::Ordering::Release);
    }

    pub fn connection_id(&self) -> i64 {
        self.shared.connection_id
    }

    /// Sends one request and waits for its answer, whatever its status.
    pub async fn request(&self, kind: MessageType, body: Option<Body>, value: Bytes) -> Result<Response, ClientError> {
        let header = Header {
            cluster_version: Some(self.cluster_version()),
            connection_id: Some(self.shared.connection_id),
            message_type: Some(kind as i32),
            ..Header::default()
        };
        self.request_with_header(header, body, value).await
    }

    /// Sends a request whose answer nobody waits for (a batched PUT/DELETE, which the drive
    /// does not answer; a dropped batch's ABORT_BATCH); returns its sequence.
    pub fn send_unanswered(&self, kind: MessageType, batch_id: u32, body: Option<Body>, value: &[u8]) -> Result<i64, ClientError> {
        let mut sender = self.shared.sender.lock();
        if let Some(reason) = &self.shared.pending.lock().closed {
            return Err(ClientError::Terminated(reason.clone()));
        }
        let sequence = sender.next_sequence;
        sender.next_sequence += 1;
        let header = Header {
            cluster_version: Some(self.cluster_version()),
            connection_id: Some(self.shared.connection_id),
            message_type: Some(kind as i32),
            sequence: Some(sequence),
            batch_id: Some(batch_id),
            ..Header::default()
        };
        let frame = self.encode(Command { header: Some(header), body, status: None }, Bytes::copy_from_slice(value));
        sender.frames.send(frame).map_err(|_| ClientError::Terminated("connection writer stopped".into()))?;
        Ok(sequence)
    }

    /// Sends a PIN-authenticated PINOP (no HMAC) and waits for its answer.
    pub async fn pin_request(&self, pin: &[u8], body: Body) -> Result<Response, ClientError> {
        let header = Header {
            cluster_version: Some(self.cluster_version()),
            connection_id: Some(self.shared.connection_id),
            message_type: Some(MessageType::Pinop as i32),
            ..Header::default()
        };
        self.send(header, Some(body), Bytes::new(), Some(Bytes::copy_from_slice(pin))).await
    }

    /// Like [`Client::request`] with a caller-built header (its sequence is filled in).
    pub async fn request_with_header(&self, header: Header, body: Option<Body>, value: Bytes) -> Result<Response, ClientError> {
        self.send(header, body, value, None).await
    }

    async fn send(&self, mut header: Header, body: Option<Body>, value: Bytes, pin: Option<Bytes>) -> Result<Response, ClientError> {
        let expected = header.message_type.and_then(response_type);
        let (tx, rx) = oneshot::channel();
        let header_sequence;
        {
            let mut sender = self.shared.sender.lock();
            let sequence = sender.next_sequence;
            sender.next_sequence += 1;
            header.sequence = Some(sequence);
            header_sequence = sequence;
            {
                let mut pending = self.shared.pending.lock();
                if let Some(reason) = &pending.closed {
                    return Err(ClientError::Terminated(reason.clone()));
                }
                pending.waiters.insert(sequence, tx);
                pending.newest = sequence;
            }
            let command = Command { header: Some(header), body, status: None };
            let frame = match pin {
                None => self.encode(command, value),
                Some(pin) => {
                    let message = Message {
                        auth_type: Some(AuthType::Pinauth as i32),
                        hmac_auth: None,
                        pin_auth: Some(spindle_proto::pb::message::PiNauth { pin: Some(pin) }),
                        command_bytes: Some(Bytes::from(command.encode_to_vec())),
                    };
                    let mut head = BytesMut::new();
                    encode_frame_head(&message, 0, &mut head);
                    (head.freeze(), Bytes::new())
                }
            };
            if sender.frames.send(frame).is_err() {
                self.shared.pending.lock().waiters.remove(&sequence);
                return Err(ClientError::Terminated("connection writer stopped".into()));
            }
        }
        // Until the answer comes, the waiter is this request's to take back: a request that
        // times out, or whose caller stops waiting (a hedged read that is no longer needed),
        // must not leave it in the table for as long as a silent drive keeps the connection.
        let mut unanswered = Unanswered { pending: &self.shared.pending, sequence: Some(header_sequence) };
        let timeout = self.shared.config.timeout;
        let response = tokio::time::timeout(timeout, rx).await.map_err(|_| {
            // (The guard's copy of the sequence: the future holds no other across the wait.)
            if let Some(sequence) = unanswered.sequence {
                self.give_up_if_silent(sequence);
            }
            ClientError::Timeout(timeout)
        })?;
        // Answered (or the connection closed): the reader took the waiter out itself.
        unanswered.sequence = None;
        let response = response.map_err(|_| ClientError::Terminated("connection closed".into()))??;
        let got = response.command.header.as_ref().and_then(|h| h.message_type);
        if let Some(expected) = expected {
            if got != Some(expected as i32) {
                return Err(ClientError::Protocol(format!("expected {expected:?}, got message type {got:?}")));
            }
        }
        Ok(response)
    }

    /// Gives the connection up for lost if nothing came back on it while a request waited its
    /// whole timeout: a drive that is only slow still answers the requests before it, while a
    /// connection whose peer is gone (a host that lost power, a path that drops its packets)
    /// would otherwise hold every later request for its full timeout, for good. Its pending
    /// requests fail now, and `is_closed` tells the caller to connect again.
    fn give_up_if_silent(&self, sequence: i64) {
        let (reason, waiters) = {
            let mut pending = self.shared.pending.lock();
            if pending.heard_after >= sequence || pending.closed.is_some() {
                return;
            }
            let reason = format!("no answer on the connection for {:?}: given up for lost", self.shared.config.timeout);
            (reason.clone(), pending.close(reason))
        };
        tracing::debug!(conn = self.shared.connection_id, "{reason}");
        for task in &self.shared.tasks {
            task.abort();
        }
        fail(waiters, &reason);
    }

    fn encode(&self, command: Command, value: Bytes) -> (Bytes, Bytes) {
        let mut head = BytesMut::new();
        encode_request_head(&self.shared.config, &self.shared.mac, &command, value.len() as u32, &mut head);
        (head.freeze(), value)
    }

    pub(crate) async fn call(&self, kind: MessageType, body: Body, value: Bytes) -> Result<Response, ClientError> {
        self.request(kind, Some(body), value).await?.into_result()
    }

    pub async fn put(&self, key: &[u8], value: impl Into<Bytes>, options: PutOptions) -> Result<(), ClientError> {
        let kv = put_kv(key, options);
        self.call(MessageType::Put, Body { key_value: Some(kv), ..Body::default() }, value.into()).await.map(drop)
    }

    /// Deletes `key`. Returns `false` when it did not exist (unforced deletes only).
    pub async fn delete(&self, key: &[u8], options: DeleteOptions) -> Result<bool, ClientError> {
        match self.call(MessageType::Delete, Body { key_value: Some(delete_kv(key, options)), ..Body::default() }, Bytes::new()).await {
            Ok(_) => Ok(true),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn keyed(&self, kind: MessageType, key: &[u8], metadata_only: bool) -> Result<Option<Response>, ClientError> {
        let kv = KeyValue { key: Some(Bytes::copy_from_slice(key)), metadata_only: Some(metadata_only), ..KeyValue::default() };
        match self.call(kind, Body { key_value: Some(kv), ..Body::default() }, Bytes::new()).await {
            Ok(r) => Ok(Some(r)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub async fn get(&self, key: &[u8]) -> Result<Option<Entry>, ClientError> {
        Ok(self.keyed(MessageType::Get, key, false).await?.map(to_entry))
    }

    pub async fn get_metadata(&self, key: &[u8]) -> Result<Option<Metadata>, ClientError> {
        Ok(self.keyed(MessageType::Get, key, true).await?.map(|r| to_entry(r).metadata))
    }

    pub async fn get_version(&self, key: &[u8]) -> Result<Option<Bytes>, ClientError> {
        Ok(self
            .keyed(MessageType::Getversion, key, false)
            .await?
            .map(|r| r.body().key_value.and_then(|kv| kv.db_version).unwrap_or_default()))
    }

    pub async fn get_next(&self, key: &[u8]) -> Result<Option<Entry>, ClientError> {
        Ok(self.keyed(MessageType::Getnext, key, false).await?.map(to_entry))
    }

    pub async fn get_previous(&self, key: &[u8]) -> Result<Option<Entry>, ClientError> {
        Ok(self.keyed(MessageType::Getprevious, key, false).await?.map(to_entry))
    }

    pub async fn get_key_range(&self, q: RangeQuery) -> Result<Vec<Bytes>, ClientError> {
        let r = self.call(MessageType::Getkeyrange, Body { range: Some(range_proto(q)), ..Body::default() }, Bytes::new()).await?;
        Ok(r.body().range.map(|r| r.keys).unwrap_or_default())
    }

    /// Asks the drive to copy entries to `peer` itself (PEER2PEERPUSH). The answer carries a
    /// status per operation; the call fails only when the push as a whole could not run (for
    /// example REMOTE_CONNECTION_ERROR when the peer cannot be reached).
    pub async fn push_to_peer(&self, peer: &crate::Peer, operations: Vec<crate::PushOp>) -> Result<crate::PushResult, ClientError> {
        let request = peer.to_proto(operations);
        let r = self.call(MessageType::Peer2peerpush, Body { p2p_operation: Some(Box::new(request)), ..Body::default() }, Bytes::new()).await?;
        Ok(crate::PushResult::from_proto(r.body().p2p_operation.map(|p| *p).unwrap_or_default()))
    }

    /// MEDIASCAN: keys in the range whose stored value fails its checksum or tag, and the last
    /// key the drive examined (continue from there for a large range).
    pub async fn media_scan(&self, q: RangeQuery) -> Result<(Vec<Bytes>, Option<Bytes>), ClientError> {
        let r = self.call(MessageType::Mediascan, Body { range: Some(range_proto(q)), ..Body::default() }, Bytes::new()).await?;
        let range = r.body().range.unwrap_or_default();
        Ok((range.keys, range.end_key))
    }

    /// MEDIAOPTIMIZE: compacts the drive's store.
    pub async fn media_optimize(&self, q: RangeQuery) -> Result<(), ClientError> {
        self.call(MessageType::Mediaoptimize, Body { range: Some(range_proto(q)), ..Body::default() }, Bytes::new()).await.map(drop)
    }

    pub async fn noop(&self) -> Result<(), ClientError> {
        self.call(MessageType::Noop, Body::default(), Bytes::new()).await.map(drop)
    }

    /// Makes every write the drive acknowledged so far durable.
    pub async fn flush_all_data(&self) -> Result<(), ClientError> {
        self.call(MessageType::Flushalldata, Body::default(), Bytes::new()).await.map(drop)
    }

    pub async fn get_log(&self, types: &[crate::LogType]) -> Result<spindle_proto::pb::command::GetLog, ClientError> {
        let request = spindle_proto::pb::command::GetLog { types: types.iter().map(|t| *t as i32).collect(), ..Default::default() };
        let r = self.call(MessageType::Getlog, Body { get_log: Some(Box::new(request)), ..Body::default() }, Bytes::new()).await?;
        Ok(r.body().get_log.map(|g| *g).unwrap_or_default())
    }

    /// A vendor-specific device log (GETLOG DEVICE) by name.
    pub async fn device_log(&self, name: &[u8]) -> Result<Bytes, ClientError> {
        let request = spindle_proto::pb::command::GetLog {
            types: vec![crate::LogType::Device as i32],
            device: Some(get_log::Device { name: Some(Bytes::copy_from_slice(name)) }),
            ..Default::default()
        };
        let r = self.call(MessageType::Getlog, Body { get_log: Some(Box::new(request)), ..Body::default() }, Bytes::new()).await?;
        Ok(r.value)
    }
}

/// The code of a response's status; INVALID_STATUS_CODE when it is missing or unknown.
pub(crate) fn status_code(status: Option<&spindle_proto::pb::command::Status>) -> StatusCode {
    status.and_then(|s| s.code).and_then(|c| StatusCode::try_from(c).ok()).unwrap_or(StatusCode::InvalidStatusCode)
}

/// Signs `command` and appends the head of its frame (the caller sends the value after it).
pub(crate) fn encode_request_head(config: &ClientConfig, mac: &HmacKey, command: &Command, value_len: u32, out: &mut BytesMut) {
    encode_signed(config, mac, command, value_len, &mut Vec::new(), out);
}

/// [`encode_request_head`] with a caller-owned buffer for the command bytes, so that a
/// connection sending many requests encodes them without allocating.
pub(crate) fn encode_signed(config: &ClientConfig, mac: &HmacKey, command: &Command, value_len: u32, scratch: &mut Vec<u8>, out: &mut BytesMut) {
    scratch.clear();
    #[allow(clippy::expect_used, reason = "encode fails only when the buffer cannot grow; a Vec always can")]
    command.encode(scratch).expect("a Vec grows on demand");
    let hmac = mac.sign(scratch);
    encode_message_head(Signature::Hmac { identity: config.identity, hmac: Some(&hmac) }, scratch, value_len, out);
}

fn range_proto(q: RangeQuery) -> Range {
    Range {
        start_key: Some(q.start),
        end_key: q.end,
        start_key_inclusive: Some(q.start_inclusive),
        end_key_inclusive: Some(q.end_inclusive),
        max_returned: Some(q.max_returned),
        reverse: Some(q.reverse),
        keys: Vec::new(),
    }
}

/// The KeyValue of a PUT.
pub(crate) fn put_kv(key: &[u8], options: PutOptions) -> KeyValue {
    KeyValue {
        key: Some(Bytes::copy_from_slice(key)),
        new_version: Some(options.new_version),
        db_version: (!options.db_version.is_empty()).then_some(options.db_version),
        force: Some(options.force),
        tag: Some(options.tag),
        algorithm: options.algorithm,
        synchronization: Some(options.sync as i32),
        ..KeyValue::default()
    }
}

/// The KeyValue of a DELETE.
pub(crate) fn delete_kv(key: &[u8], options: DeleteOptions) -> KeyValue {
    KeyValue {
        key: Some(Bytes::copy_from_slice(key)),
        db_version: (!options.db_version.is_empty()).then_some(options.db_version),
        force: Some(options.force),
        synchronization: Some(options.sync as i32),
        ..KeyValue::default()
    }
}

fn to_entry(r: Response) -> Entry {
    let kv = r.body().key_value.unwrap_or_default();
    Entry {
        key: kv.key.unwrap_or_default(),
        metadata: Metadata { version: kv.db_version.unwrap_or_default(), tag: kv.tag.unwrap_or_default(), algorithm: kv.algorithm },
        value: r.value,
    }
}

async fn read_loop(mut rd: Box<dyn AsyncRead + Send + Unpin>, mut decoder: FrameDecoder, mut buf: BytesMut, pending: Arc<Mutex<Pending>>, mac: HmacKey) {
    let reason = loop {
        let frame = match read_frame(&mut *rd, &mut decoder, &mut buf).await {
            Ok(Some(f)) => f,
            Ok(None) => break "drive closed the connection".to_string(),
            Err(e) => break e.to_string(),
        };
        let command_bytes = frame.message.command_bytes.clone().unwrap_or_default();
        let command = match Command::decode(command_bytes.clone()) {
            Ok(c) => c,
            Err(e) => break format!("undecodable response: {e}"),
        };
        if frame.message.auth_type == Some(AuthType::Unsolicitedstatus as i32) {
            let status = command.status.as_ref();
            break format!(
                "{}: {}",
                status.and_then(|s| s.code).and_then(|c| StatusCode::try_from(c).ok()).map(|c| c.as_str_name()).unwrap_or("?"),
                status.and_then(|s| s.status_message.clone()).unwrap_or_default()
            );
        }
        let Some(ack) = command.header.as_ref().and_then(|h| h.ack_sequence) else {
            break "response without ackSequence".to_string();
        };
        let waiter = {
            let mut pending = pending.lock();
            pending.heard_after = pending.newest;
            pending.waiters.remove(&ack)
        };
        let Some(waiter) = waiter else {
            // Mostly the late answer to a request its caller stopped waiting for (timed out,
            // or a hedged read's loser), whose waiter was taken back.
            tracing::debug!(ack, "response to no pending request");
            continue;
        };
        let hmac = frame.message.hmac_auth.as_ref().and_then(|h| h.hmac.clone()).unwrap_or_default();
        // Answers to PIN operations carry no HMAC (the request carried a PIN instead).
        let pin_answer = frame.message.auth_type == Some(AuthType::Pinauth as i32);
        let result = if pin_answer || mac.verify(&command_bytes, &hmac) {
            Ok(Response { command, value: frame.value })
        } else {
            Err(ClientError::BadResponseHmac)
        };
        let _ = waiter.send(result);
    };
    let waiters = pending.lock().close(reason.clone());
    fail(waiters, &reason);
}

/// Fails every request `waiters` holds with the reason its connection closed.
fn fail(waiters: BTreeMap<i64, Waiter>, reason: &str) {
    for (_, w) in waiters {
        let _ = w.send(Err(ClientError::Terminated(reason.to_string())));
    }
}

async fn write_loop(wr: Box<dyn AsyncWrite + Send + Unpin>, mut queue: mpsc::UnboundedReceiver<(Bytes, Bytes)>) {
    let mut out = BufWriter::with_capacity(256 * 1024, wr);
    while let Some(first) = queue.recv().await {
        let mut next = Some(first);
        while let Some((head, value)) = next {
            // BufWriter passes writes larger than its buffer straight through.
            if out.write_all(&head).await.is_err() || out.write_all(&value).await.is_err() {
                return;
            }
            next = queue.try_recv().ok();
        }
        if out.flush().await.is_err() {
            return;
        }
    }
    // Every handle is gone: tell the drive we are done.
    let _ = out.shutdown().await;
}

#[cfg(test)]
mod tests;
