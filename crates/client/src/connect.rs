//! Opening a connection to a drive: TCP or TLS (trusting the given certificates, the drive
//! named by its address), then the drive's unsolicited sign-on; and reading frames off it.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use prost::Message as _;
use spindle_proto::pb::message::AuthType;
use spindle_proto::pb::Command;
use spindle_proto::{FrameDecoder, StatusCode};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::net::{TcpStream, ToSocketAddrs};

use crate::ClientError;

/// Largest frame part the client accepts from a drive (the protocol's 1 MiB per part, with
/// room for drives configured larger).
const MAX_RESPONSE_PART: u32 = 64 * 1024 * 1024;

#[derive(Debug, Clone)]
pub struct ClientConfig {
    pub identity: i64,
    pub hmac_key: Bytes,
    pub cluster_version: i64,
    /// How long to wait for the sign-on and for each response.
    pub timeout: Duration,
    /// Connect with TLS, trusting these certificates (PEM), e.g. the drive's `tls/cert.pem`.
    pub tls_trust: Option<std::path::PathBuf>,
    /// Opens the byte stream to a drive instead of TCP (the simulator's network); TLS is
    /// not layered over it.
    pub dialer: Option<Dialer>,
}

/// A byte stream to a drive, split in its two directions.
pub type Duplex = (Box<dyn AsyncRead + Send + Unpin>, Box<dyn AsyncWrite + Send + Unpin>);

/// What opens connections when TCP is not the network: given the drive's address as the map
/// or the caller writes it (`host:port`).
pub trait Dial: Send + Sync {
    fn dial(&self, addr: &str) -> std::pin::Pin<Box<dyn std::future::Future<Output = std::io::Result<Duplex>> + Send + '_>>;
}

#[derive(Clone)]
pub struct Dialer(pub std::sync::Arc<dyn Dial>);

impl std::fmt::Debug for Dialer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Dialer")
    }
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            identity: spindle_proto::DEFAULT_IDENTITY,
            hmac_key: Bytes::from_static(spindle_proto::DEFAULT_HMAC_KEY),
            cluster_version: 0,
            timeout: Duration::from_secs(30),
            tls_trust: None,
            dialer: None,
        }
    }
}

pub(crate) type Reader = Box<dyn AsyncRead + Send + Unpin>;
pub(crate) type Writer = Box<dyn AsyncWrite + Send + Unpin>;

/// A connection that has received the drive's sign-on.
pub(crate) struct Handshake {
    pub rd: Reader,
    pub wr: Writer,
    pub decoder: FrameDecoder,
    /// Bytes read past the sign-on.
    pub buf: BytesMut,
    pub sign_on: Command,
    pub connection_id: i64,
}

/// Connects (over TLS if configured) and waits for the sign-on.
pub(crate) async fn handshake(addr: impl ToSocketAddrs + std::fmt::Display, config: &ClientConfig) -> Result<Handshake, ClientError> {
    let (mut rd, wr) = match &config.dialer {
        Some(dialer) => {
            let addr = addr.to_string();
            tokio::time::timeout(config.timeout, dialer.0.dial(&addr)).await.map_err(|_| ClientError::Timeout(config.timeout))??
        }
        None => open_tcp(addr, config).await?,
    };
    let mut decoder = FrameDecoder::new(MAX_RESPONSE_PART, MAX_RESPONSE_PART);
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let first = tokio::time::timeout(config.timeout, read_frame(&mut *rd, &mut decoder, &mut buf))
        .await
        .map_err(|_| ClientError::Timeout(config.timeout))??
        .ok_or_else(|| ClientError::Terminated("closed before the sign-on".into()))?;
    if first.message.auth_type != Some(AuthType::Unsolicitedstatus as i32) {
        return Err(ClientError::Protocol("first message is not the unsolicited sign-on".into()));
    }
    let sign_on = Command::decode(first.message.command_bytes.unwrap_or_default())
        .map_err(|e| ClientError::Protocol(format!("undecodable sign-on: {e}")))?;
    let status = sign_on.status.as_ref().and_then(|s| s.code);
    if status != Some(StatusCode::Success as i32) {
        let message = sign_on.status.as_ref().and_then(|s| s.status_message.clone()).unwrap_or_default();
        return Err(ClientError::Terminated(message));
    }
    let connection_id = sign_on
        .header
        .as_ref()
        .and_then(|h| h.connection_id)
        .ok_or_else(|| ClientError::Protocol("sign-on without a connection id".into()))?;
    Ok(Handshake { rd, wr, decoder, buf, sign_on, connection_id })
}

async fn open_tcp(addr: impl ToSocketAddrs, config: &ClientConfig) -> Result<Duplex, ClientError> {
    let stream = tokio::time::timeout(config.timeout, TcpStream::connect(addr))
        .await
        .map_err(|_| ClientError::Timeout(config.timeout))??;
    stream.set_nodelay(true)?;
    Ok(match &config.tls_trust {
        None => {
            let (r, w) = stream.into_split();
            (Box::new(r), Box::new(w))
        }
        Some(trust) => {
            let tls = tls_connect(stream, trust, config.timeout).await?;
            let (r, w) = tokio::io::split(tls);
            (Box::new(r), Box::new(w))
        }
    })
}

async fn tls_connect(
    stream: TcpStream,
    trust: &std::path::Path,
    timeout: Duration,
) -> Result<tokio_rustls::client::TlsStream<spindle_tls::Buffered<TcpStream>>, ClientError> {
    use rustls_pki_types::ServerName;
    let bad = |m: String| ClientError::Io(std::io::Error::new(std::io::ErrorKind::InvalidInput, m));
    let connector = spindle_tls::connector(trust).map_err(|e| bad(e.to_string()))?;
    // Drives are addressed by IP; the generated certificate names 127.0.0.1 and localhost.
    let name = ServerName::try_from(stream.peer_addr()?.ip().to_string()).map_err(|e| bad(e.to_string()))?;
    tokio::time::timeout(timeout, spindle_tls::connect(&connector, name, stream)).await.map_err(|_| ClientError::Timeout(timeout))?.map_err(ClientError::Io)
}

pub(crate) async fn read_frame(
    rd: &mut (dyn AsyncRead + Send + Unpin),
    decoder: &mut FrameDecoder,
    buf: &mut BytesMut,
) -> Result<Option<spindle_proto::Frame>, ClientError> {
    loop {
        if let Some(frame) = decoder.decode(buf).map_err(|e| ClientError::Protocol(e.to_string()))? {
            return Ok(Some(frame));
        }
        if let Some(h) = decoder.pending() {
            buf.reserve(h.body_len().saturating_sub(buf.len()));
        } else {
            buf.reserve(64 * 1024);
        }
        if rd.read_buf(buf).await? == 0 {
            return if buf.is_empty() && decoder.pending().is_none() { Ok(None) } else { Err(ClientError::Protocol("truncated frame".into())) };
        }
    }
}

/// The most batches one connection opens at once, whatever a drive announces: a bound on the
/// permits a broken or hostile drive's sign-on can make a client keep.
const MAX_BATCH_SLOTS: usize = 1_024;

/// How many batches a connection opens at once (`Client::start_batch` waits for a slot):
/// what the drive's sign-on allows, its `maxBatchCountPerDevice` (the Kinetic default when it
/// says nothing), at least one. A drive answers a connection's requests in order, and a
/// START_BATCH waiting there for a device slot holds up the END_BATCH behind it that would
/// free one: more batches open at once on one connection than the drive allows stall that
/// connection until the drive refuses them.
pub(crate) fn batch_slots(sign_on: &Command) -> usize {
    let announced = sign_on.body.as_ref().and_then(|b| b.get_log.as_ref()?.limits.as_ref()?.max_batch_count_per_device);
    let slots = announced.unwrap_or(spindle_proto::limits::MAX_BATCH_COUNT_PER_DEVICE);
    usize::try_from(slots).unwrap_or(MAX_BATCH_SLOTS).clamp(1, MAX_BATCH_SLOTS)
}
