//! A TCP relay for measuring what one more hop costs: every connection accepted is copied both
//! ways to one upstream address, through user space, as any proxy or gateway in front of a
//! server does (a read out of one socket and a write into the other per buffer). The S3
//! benchmark puts MinIO behind it to measure MinIO with the hop Spindle's gateway makes to its
//! drive (scripts/bench-s3.sh, `--servers minio,minio-relay,spindle`).

use std::net::SocketAddr;

use tokio::net::{TcpListener, TcpStream};

/// Bytes each direction of a relayed connection copies at a time: the size of the reads the
/// Kinetic client makes of a drive's large values.
pub const RELAY_BUFFER: usize = 256 * 1024;

/// Accepts on `listener` and relays each connection to `upstream` until it closes; runs until
/// the listener fails.
pub async fn relay(listener: TcpListener, upstream: SocketAddr) -> std::io::Result<()> {
    loop {
        let (inbound, _) = listener.accept().await?;
        // A connection ends in an error as often as not (a reset at the end of a run): it only
        // ends that connection.
        tokio::spawn(async move { drop(relay_one(inbound, upstream).await) });
    }
}

async fn relay_one(mut inbound: TcpStream, upstream: SocketAddr) -> std::io::Result<()> {
    let mut outbound = TcpStream::connect(upstream).await?;
    inbound.set_nodelay(true)?;
    outbound.set_nodelay(true)?;
    tokio::io::copy_bidirectional_with_sizes(&mut inbound, &mut outbound, RELAY_BUFFER, RELAY_BUFFER).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Bytes go through both ways unchanged, and a close reaches the other side.
    #[tokio::test]
    async fn relays_both_ways_until_closed() {
        let server = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let upstream = server.local_addr().unwrap();
        let echo = tokio::spawn(async move {
            let (mut s, _) = server.accept().await.unwrap();
            let mut got = Vec::new();
            s.read_to_end(&mut got).await.unwrap();
            s.write_all(&got).await.unwrap();
        });
        let front = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = front.local_addr().unwrap();
        let relaying = tokio::spawn(relay(front, upstream));

        let data: Vec<u8> = (0..3 * RELAY_BUFFER + 17).map(|i| (i * 7) as u8).collect();
        let mut c = TcpStream::connect(addr).await.unwrap();
        c.write_all(&data).await.unwrap();
        c.shutdown().await.unwrap();
        let mut back = Vec::new();
        c.read_to_end(&mut back).await.unwrap();
        assert!(back == data, "{} bytes back of {}", back.len(), data.len());
        echo.await.unwrap();
        relaying.abort();
    }
}
