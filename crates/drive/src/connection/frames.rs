//! Reading frames: the next frame off the socket, within the deadlines that keep a slow or
//! silent client from holding a connection; a value over maxValueSize skipped unread.

use bytes::{BufMut, Bytes, BytesMut};
use spindle_proto::{FrameError, FrameHeader, StatusCode, HEADER_LEN};
use tokio::io::{AsyncRead, AsyncReadExt, BufReader};

use super::{Close, Connection};
use crate::reply::Reply;
use crate::state::DriveState;

/// A value over maxValueSize but under this is read and thrown away so the client gets an
/// INVALID_REQUEST for its request; anything larger closes the connection at once.
pub const MAX_DISCARDED_VALUE: u32 = 64 * 1024 * 1024;
/// The slowest rate a frame may arrive at once it is longer than `frame_timeout_ms` allows at
/// this rate (a 64 MiB oversize value skipped gets 1,024 s, a 1 MiB value 16 s): an honest
/// client on a slow link keeps its connection, a stalled one does not.
const FRAME_RATE_MIN: u64 = 64 * 1024;

/// One frame off the wire.
pub(super) enum Incoming {
    Frame { message: Bytes, value: Bytes },
    /// The value exceeded maxValueSize and was skipped.
    OversizeValue { message: Bytes, len: u32 },
}

impl Connection {
    /// The next frame. While connection slots are scarce (`DriveState::connections_scarce`),
    /// a connection that has not authenticated within `unauthenticated_timeout_ms` of its
    /// accept, or that has been silent for `idle_timeout_ms`, is closed; with slots to spare it
    /// may wait (the reference client connects when it is created, maybe long before its first
    /// request, and does not reconnect after a close). A frame begun must be complete within
    /// `frame_timeout_ms`, or the time its length takes at [`FRAME_RATE_MIN`] if longer.
    pub(super) async fn read_frame<R: AsyncRead + Unpin>(&self, r: &mut R) -> Result<Option<Incoming>, Close> {
        let config = &self.state.config;
        let idle = std::time::Duration::from_millis(config.idle_timeout_ms);
        let unauthenticated = std::time::Duration::from_millis(config.unauthenticated_timeout_ms);
        // How often a quiet connection past its deadlines looks again whether slots are scarce.
        let recheck = unauthenticated.min(idle);
        let idle_at = tokio::time::Instant::now() + idle;
        let authenticate_by = self.accepted + unauthenticated;
        let mut first = [0u8; 1];
        // Bounded: every round waits at least until a deadline or `recheck`.
        loop {
            let now = tokio::time::Instant::now();
            let deadlines = [Some(idle_at), (!self.authenticated).then_some(authenticate_by)];
            let wake = deadlines.into_iter().flatten().filter(|d| *d > now).fold(now + recheck, tokio::time::Instant::min);
            match tokio::time::timeout_at(wake, r.read(&mut first)).await {
                Ok(Ok(0)) => return Ok(None),
                Ok(Ok(_)) => break,
                Ok(Err(e)) => return Err(Close::Broken(e.to_string())),
                Err(_) if !self.state.connections_scarce() => {}
                Err(_) => {
                    let now = tokio::time::Instant::now();
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
    pub(super) async fn read_buffered_frame<R: AsyncRead + Unpin>(&self, r: &mut BufReader<R>) -> Result<Incoming, Close> {
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
}

/// The answer to a request whose value exceeded maxValueSize (and was skipped unread).
pub(super) fn oversize_value(state: &DriveState, len: u32) -> Reply {
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

/// Whether `buf` starts with a whole frame (so reading it will not wait for the socket): its
/// header passes proto's checks against the drive's limits and its body is all there. A header
/// that fails them is left to the ordinary read, which reports it.
pub(super) fn complete_frame_buffered(buf: &[u8], limits: &spindle_proto::Limits) -> bool {
    let Some(raw) = buf.first_chunk::<HEADER_LEN>() else { return false };
    FrameHeader::parse(raw, limits.max_message_size, MAX_DISCARDED_VALUE.max(limits.max_value_size))
        .is_ok_and(|header| header.value_len <= limits.max_value_size && buf.len() >= HEADER_LEN + header.body_len())
}
