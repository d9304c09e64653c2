//! What TLS costs on this machine, as the floor under what it costs a secured cluster
//! (`spindle bench tls-floor`): one process moves messages over loopback connections, plain TCP
//! and then TLS with the settings the drives and the cluster's clients use (spindle-tls:
//! rustls, TLS 1.3, AES-128-GCM first), both ends in this process, as a cluster's client and
//! its drives share one machine in the lab. Each message is answered by a short
//! acknowledgement before the next is sent on that connection, as a request waits for its
//! answer. Each end goes round [`WORKING_SET_BYTES`] of distinct buffers (fewer for messages
//! under 8 KiB), as a cluster's values come from and go to buffers the caches have not seen
//! lately, where one buffer sent again and again stays in the CPU's caches. The buffers are
//! allocated and touched before the timed window opens and freed after it closes.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::{BenchError, Window};

/// The acknowledgement's length.
const ACK: [u8; 8] = *b"received";
/// The buffers each end of a connection goes round: well beyond the CPU's last-level cache.
pub const WORKING_SET_BYTES: usize = 32 * 1024 * 1024;
/// At most this many of them, whatever the message size.
const MOST_BUFFERS: usize = 4096;

/// The distinct buffers of `message_bytes` one end goes round (no more than it has
/// `messages` to move), each filled with a non-zero pattern of its own so that every page is
/// touched before the timed window opens.
fn buffers(message_bytes: usize, messages: u64) -> Vec<Vec<u8>> {
    let count = (WORKING_SET_BYTES / message_bytes).min(MOST_BUFFERS).min(usize::try_from(messages).unwrap_or(usize::MAX)).max(1);
    (0..count).map(|i| vec![(i % 255) as u8 + 1; message_bytes]).collect()
}

/// One end's buffers, handed back when it is done so that they are freed outside the window.
type Buffers = Vec<Vec<u8>>;

#[derive(Debug, Clone, Copy)]
pub struct FloorSpec {
    pub message_bytes: usize,
    pub messages: u64,
    pub connections: usize,
}

/// One transport's figures: throughput, and the process's CPU (both ends) per GiB moved.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct FloorRun {
    pub mib_per_second: f64,
    pub cpu_seconds_per_gib: f64,
}

#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct TlsFloor {
    pub message_bytes: usize,
    pub messages: u64,
    pub connections: usize,
    pub plain: FloorRun,
    pub tls: FloorRun,
}

fn io(e: impl std::fmt::Display) -> BenchError {
    BenchError::Invalid(format!("tls floor: {e}"))
}

/// Plain TCP, then TLS, one after the other.
pub async fn measure(spec: FloorSpec) -> Result<TlsFloor, BenchError> {
    if spec.message_bytes == 0 || spec.messages == 0 || spec.connections == 0 {
        return Err(BenchError::Invalid("message size, messages and connections must be at least 1".into()));
    }
    let dir = std::env::temp_dir().join(format!("spindle-tls-floor-{}", std::process::id()));
    let result = async {
        let ca = spindle_cluster::Credentials::generate(&dir.join("ca"), "tls-floor").map_err(io)?;
        let (cert, key) = ca.issue(&["127.0.0.1".into()], &dir.join("cert")).map_err(io)?;
        let acceptor = spindle_tls::acceptor(spindle_tls::CertFiles { cert, key }, &[]).map_err(io)?;
        let connector = spindle_tls::connector(&ca.ca_path()).map_err(io)?;
        let plain = run(spec, None).await?;
        let tls = run(spec, Some((acceptor, connector))).await?;
        Ok(TlsFloor { message_bytes: spec.message_bytes, messages: spec.messages, connections: spec.connections, plain, tls })
    }
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    result
}

async fn run(spec: FloorSpec, tls: Option<(tokio_rustls::TlsAcceptor, tokio_rustls::TlsConnector)>) -> Result<FloorRun, BenchError> {
    let listener = TcpListener::bind("127.0.0.1:0").await.map_err(io)?;
    let addr = listener.local_addr().map_err(io)?;
    let per_connection = spec.messages.div_ceil(spec.connections as u64);
    // Connections (and TLS handshakes) first, outside the timed window.
    let mut pairs = Vec::with_capacity(spec.connections);
    for _ in 0..spec.connections {
        let (client, server) = tokio::try_join!(TcpStream::connect(addr), async { listener.accept().await.map(|(s, _)| s) }).map_err(io)?;
        client.set_nodelay(true).map_err(io)?;
        server.set_nodelay(true).map_err(io)?;
        pairs.push((client, server));
    }
    // And every buffer allocated and touched before the window opens.
    let mut ends: Vec<(Buffers, Buffers)> = (0..spec.connections).map(|_| (buffers(spec.message_bytes, per_connection), buffers(spec.message_bytes, per_connection))).collect();
    let (window, tasks) = match tls {
        None => (
            Window::open(),
            pairs.into_iter().zip(ends.drain(..)).flat_map(|((c, s), (out, into))| exchange(c, s, out, into, per_connection)).collect::<Vec<_>>(),
        ),
        Some((acceptor, connector)) => {
            let name = rustls_pki_types::ServerName::try_from("127.0.0.1").map_err(io)?;
            let mut secured = Vec::with_capacity(pairs.len());
            for (client, server) in pairs {
                secured.push(tokio::try_join!(spindle_tls::connect(&connector, name.clone(), client), spindle_tls::accept(&acceptor, server)).map_err(io)?);
            }
            (Window::open(), secured.into_iter().zip(ends.drain(..)).flat_map(|((c, s), (out, into))| exchange(c, s, out, into, per_connection)).collect())
        }
    };
    let mut done = Vec::with_capacity(tasks.len());
    for t in tasks {
        done.push(t.await.map_err(io)??);
    }
    let (elapsed, cpu) = window.close();
    drop(done);
    let bytes = (per_connection * spec.connections as u64 * spec.message_bytes as u64) as f64;
    let secs = elapsed.max(Duration::from_micros(1)).as_secs_f64();
    Ok(FloorRun { mib_per_second: bytes / f64::from(1u32 << 20) / secs, cpu_seconds_per_gib: cpu / (bytes / f64::from(1u32 << 30)) })
}

/// The two ends of one connection as tasks: `client` sends from `out`, `server` receives into
/// `into` and acknowledges; each hands its buffers back.
fn exchange<C, S>(client: C, server: S, out: Buffers, into: Buffers, messages: u64) -> [tokio::task::JoinHandle<Result<Buffers, BenchError>>; 2]
where
    C: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    [tokio::spawn(receive(server, into, messages)), tokio::spawn(send(client, out, messages))]
}

async fn send<S: AsyncRead + AsyncWrite + Unpin>(mut s: S, out: Buffers, messages: u64) -> Result<Buffers, BenchError> {
    let mut ack = [0u8; ACK.len()];
    for message in out.iter().cycle().take(usize::try_from(messages).unwrap_or(usize::MAX)) {
        s.write_all(message).await.map_err(io)?;
        s.flush().await.map_err(io)?;
        s.read_exact(&mut ack).await.map_err(io)?;
    }
    Ok(out)
}

async fn receive<S: AsyncRead + AsyncWrite + Unpin>(mut s: S, mut into: Buffers, messages: u64) -> Result<Buffers, BenchError> {
    let count = into.len();
    for i in 0..messages {
        s.read_exact(&mut into[(i % count as u64) as usize]).await.map_err(io)?;
        s.write_all(&ACK).await.map_err(io)?;
        s.flush().await.map_err(io)?;
    }
    Ok(into)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both transports move every byte and report figures; nothing about speed is asserted.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn both_transports_move_the_messages() {
        let floor = measure(FloorSpec { message_bytes: 64 * 1024, messages: 20, connections: 2 }).await.unwrap();
        for run in [floor.plain, floor.tls] {
            assert!(run.mib_per_second > 0.0 && run.mib_per_second.is_finite());
            assert!(run.cpu_seconds_per_gib >= 0.0 && run.cpu_seconds_per_gib.is_finite());
        }
        assert!(measure(FloorSpec { message_bytes: 0, messages: 1, connections: 1 }).await.is_err());
    }
}
