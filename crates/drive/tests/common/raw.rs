//! Hand-made frames: a connection that sends whatever a test builds (wrong keys, replayed
//! sequences, pipelined bursts, frames cut short) and reads the drive's answers one by one.
//! The one copy: `crates/cli/tests/common/mod.rs` includes this file too, for the tests there
//! that attack the `spindle` process itself (its memory).

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use prost::Message as _;
use spindle_proto::pb::command::{Body, Header, KeyValue};
use spindle_proto::pb::message::{AuthType, HmaCauth};
use spindle_proto::pb::{Command, Message};
use spindle_proto::{encode_frame, FrameDecoder, MessageType, StatusCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The factory identity's (identity 1's) HMAC key.
pub const KEY: &[u8] = spindle_proto::DEFAULT_HMAC_KEY;

/// A connection that sends whatever frames a test builds.
pub struct RawConn {
    pub stream: TcpStream,
    decoder: FrameDecoder,
    buf: BytesMut,
    pub connection_id: i64,
    pub sign_on: Command,
    next_sequence: i64,
}

impl RawConn {
    /// Connects and reads the sign-on (whose connection id the headers carry).
    pub async fn connect(addr: &str) -> RawConn {
        let stream = TcpStream::connect(addr).await.unwrap();
        let mut conn = RawConn {
            stream,
            decoder: FrameDecoder::new(64 << 20, 64 << 20),
            buf: BytesMut::new(),
            connection_id: 0,
            sign_on: Command::default(),
            next_sequence: 1,
        };
        let first = conn.read().await.expect("sign-on");
        assert_eq!(first.0.auth_type, Some(AuthType::Unsolicitedstatus as i32));
        conn.sign_on = Command::decode(first.0.command_bytes.unwrap()).unwrap();
        conn.connection_id = conn.sign_on.header.as_ref().unwrap().connection_id.unwrap();
        conn
    }

    /// Next frame, or `None` once the drive closed the connection.
    pub async fn read(&mut self) -> Option<(Message, Bytes)> {
        loop {
            match self.decoder.decode(&mut self.buf) {
                Ok(Some(f)) => return Some((f.message, f.value)),
                Ok(None) => {}
                Err(e) => panic!("drive sent a bad frame: {e}"),
            }
            let n = tokio::time::timeout(Duration::from_secs(30), self.stream.read_buf(&mut self.buf))
                .await
                .expect("drive answered within 30 s");
            match n {
                Ok(0) | Err(_) => return None,
                Ok(_) => {}
            }
        }
    }

    /// Reads the next response and decodes its command.
    pub async fn response(&mut self) -> Option<(Message, Command, Bytes)> {
        let (m, v) = self.read().await?;
        let c = Command::decode(m.command_bytes.clone().unwrap_or_default()).unwrap();
        Some((m, c, v))
    }

    pub async fn send_bytes(&mut self, bytes: &[u8]) {
        let _ = self.stream.write_all(bytes).await;
    }

    /// Writes `bytes` until done or until the drive has not taken any for `stall`; returns
    /// the bytes written. A drive that stops reading this socket shows up as a stall.
    pub async fn write_until_stalled(&mut self, bytes: &[u8], stall: Duration) -> usize {
        let mut written = 0;
        for chunk in bytes.chunks(64 * 1024) {
            match tokio::time::timeout(stall, self.stream.write_all(chunk)).await {
                Ok(Ok(())) => written += chunk.len(),
                _ => break,
            }
        }
        written
    }

    /// A well-formed header for `kind` with the next sequence.
    pub fn header(&mut self, kind: MessageType) -> Header {
        let sequence = self.next_sequence;
        self.next_sequence += 1;
        Header {
            cluster_version: Some(0),
            connection_id: Some(self.connection_id),
            sequence: Some(sequence),
            message_type: Some(kind as i32),
            ..Header::default()
        }
    }

    /// Signs `command` as `identity` with `key` and sends it with `value`.
    pub async fn send(&mut self, command: &Command, identity: i64, key: &[u8], value: &[u8]) {
        let mut out = BytesMut::new();
        signed_frame(command, identity, key, value, &mut out);
        self.send_bytes(&out).await;
    }

    /// Sends a default-identity request and returns the status of its answer.
    pub async fn call(&mut self, header: Header, body: Option<Body>, value: &[u8]) -> (StatusCode, Command, Bytes) {
        let command = Command { header: Some(header), body, status: None };
        self.send(&command, 1, KEY, value).await;
        let (_, c, v) = self.response().await.expect("a response");
        (status_of(&c), c, v)
    }
}

/// Appends the frame of `command` signed as `identity` with `key`, carrying `value`.
pub fn signed_frame(command: &Command, identity: i64, key: &[u8], value: &[u8], out: &mut BytesMut) {
    let command_bytes = Bytes::from(command.encode_to_vec());
    let hmac = spindle_proto::hmac::sign(key, &command_bytes);
    let message = Message {
        auth_type: Some(AuthType::Hmacauth as i32),
        hmac_auth: Some(HmaCauth { identity: Some(identity), hmac: Some(Bytes::copy_from_slice(&hmac)) }),
        pin_auth: None,
        command_bytes: Some(command_bytes),
    };
    encode_frame(&message, value, out);
}

/// A forced WRITEBACK put of `key` (its value travels beside the command).
pub fn put_body(key: &str) -> Option<Body> {
    Some(Body {
        key_value: Some(KeyValue {
            key: Some(Bytes::copy_from_slice(key.as_bytes())),
            synchronization: Some(spindle_proto::Synchronization::Writeback as i32),
            force: Some(true),
            ..Default::default()
        }),
        ..Body::default()
    })
}

/// A GET of `key`.
pub fn get_body(key: &str) -> Option<Body> {
    Some(Body { key_value: Some(KeyValue { key: Some(Bytes::copy_from_slice(key.as_bytes())), ..KeyValue::default() }), ..Body::default() })
}

/// The status an answer carries (INVALID_STATUS_CODE for none).
pub fn status_of(c: &Command) -> StatusCode {
    c.status.as_ref().and_then(|s| s.code).and_then(|s| StatusCode::try_from(s).ok()).unwrap_or(StatusCode::InvalidStatusCode)
}
