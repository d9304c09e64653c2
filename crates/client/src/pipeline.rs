//! A single-owner pipelined connection for load generators: requests are queued into one
//! buffer and written with one syscall, responses are read as they come, and nothing is spawned
//! per request (no tasks, no channels). [`Client`](crate::Client) is the general-purpose API;
//! this is for keeping a fixed number of requests in flight as cheaply as possible.

use bytes::{Bytes, BytesMut};
use prost::Message as _;
use spindle_proto::pb::command::{Body, Header};
use spindle_proto::pb::message::AuthType;
use spindle_proto::pb::Command;
use spindle_proto::{decode_command_head, FrameDecoder, MessageType, StatusCode};
use tokio::io::AsyncWriteExt;
use tokio::net::ToSocketAddrs;

use crate::client::{encode_signed, status_code};
use crate::connect::{handshake, read_frame, Reader, Writer};
use crate::{ClientConfig, ClientError, Response};

pub struct Pipeline {
    config: ClientConfig,
    mac: spindle_proto::hmac::HmacKey,
    rd: Reader,
    wr: Writer,
    decoder: FrameDecoder,
    buf: BytesMut,
    out: BytesMut,
    /// The command bytes of the request being queued.
    scratch: Vec<u8>,
    connection_id: i64,
    next_sequence: i64,
}

impl Pipeline {
    pub async fn connect(addr: impl ToSocketAddrs + std::fmt::Display, config: ClientConfig) -> Result<Pipeline, ClientError> {
        let h = handshake(addr, &config).await?;
        Ok(Pipeline {
            mac: spindle_proto::hmac::HmacKey::new(&config.hmac_key),
            config,
            rd: h.rd,
            wr: h.wr,
            decoder: h.decoder,
            buf: h.buf,
            out: BytesMut::with_capacity(256 * 1024),
            scratch: Vec::with_capacity(256),
            connection_id: h.connection_id,
            next_sequence: 1,
        })
    }

    /// Queues a request (not sent until [`Pipeline::flush`]); returns its sequence number.
    pub fn queue(&mut self, kind: MessageType, body: Option<Body>, value: &[u8]) -> i64 {
        let sequence = self.next_sequence;
        self.next_sequence += 1;
        let header = Header {
            cluster_version: Some(self.config.cluster_version),
            connection_id: Some(self.connection_id),
            sequence: Some(sequence),
            message_type: Some(kind as i32),
            ..Header::default()
        };
        let command = Command { header: Some(header), body, status: None };
        encode_signed(&self.config, &self.mac, &command, value.len() as u32, &mut self.scratch, &mut self.out);
        self.out.extend_from_slice(value);
        sequence
    }

    /// Writes every queued request.
    pub async fn flush(&mut self) -> Result<(), ClientError> {
        if !self.out.is_empty() {
            self.wr.write_all(&self.out).await?;
            self.wr.flush().await?;
            self.out.clear();
        }
        Ok(())
    }

    /// Whether another response is already buffered (so [`Pipeline::recv`] will not wait).
    pub fn response_buffered(&self) -> bool {
        self.decoder.pending().map_or(self.buf.len() >= spindle_proto::HEADER_LEN, |h| self.buf.len() >= h.body_len())
    }

    /// The next response, verified; its `ackSequence` says which request it answers.
    pub async fn recv(&mut self) -> Result<(i64, Response), ClientError> {
        let (command_bytes, value) = self.next_verified().await?;
        let command = Command::decode(command_bytes).map_err(|e| ClientError::Protocol(format!("undecodable response: {e}")))?;
        let ack = command
            .header
            .as_ref()
            .and_then(|h| h.ack_sequence)
            .ok_or_else(|| ClientError::Protocol("response without ackSequence".into()))?;
        Ok((ack, Response { command, value }))
    }

    /// The `ackSequence` and status of the next response, verified as [`Pipeline::recv`] does
    /// but without decoding its body: for load generators, which only count outcomes.
    pub async fn recv_status(&mut self) -> Result<(i64, StatusCode), ClientError> {
        let (command_bytes, _value) = self.next_verified().await?;
        let (header, status) =
            decode_command_head(&command_bytes).map_err(|e| ClientError::Protocol(format!("undecodable response: {e}")))?;
        let ack = header.ack_sequence.ok_or_else(|| ClientError::Protocol("response without ackSequence".into()))?;
        Ok((ack, status_code(status.as_ref())))
    }

    /// The command bytes and value of the next frame, its HMAC checked. An unsolicited status
    /// (the drive closing the connection) is an error carrying the drive's message.
    async fn next_verified(&mut self) -> Result<(Bytes, Bytes), ClientError> {
        let frame = read_frame(&mut *self.rd, &mut self.decoder, &mut self.buf)
            .await?
            .ok_or_else(|| ClientError::Terminated("drive closed the connection".into()))?;
        let command_bytes: Bytes = frame.message.command_bytes.unwrap_or_default();
        if frame.message.auth_type == Some(AuthType::Unsolicitedstatus as i32) {
            let command = Command::decode(command_bytes).map_err(|e| ClientError::Protocol(format!("undecodable response: {e}")))?;
            let message = command.status.and_then(|s| s.status_message).unwrap_or_default();
            return Err(ClientError::Terminated(message));
        }
        let hmac = frame.message.hmac_auth.as_ref().and_then(|h| h.hmac.as_deref()).unwrap_or_default();
        if !self.mac.verify(&command_bytes, hmac) {
            return Err(ClientError::BadResponseHmac);
        }
        Ok((command_bytes, frame.value))
    }
}
