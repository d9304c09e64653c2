//! The Kinetic paper's peer-to-peer experiment: N pairs of one value size are moved to a
//! target drive twice, once by a client putting them (the client relays every byte) and once
//! by the source drive pushing them itself (PEER2PEERPUSH), and the two throughputs compared.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use serde::Serialize;
use spindle_client::{Client, ClientConfig, Peer, PushOp};

use crate::{run, BenchError, BenchSpec, Operation};

#[derive(Debug, Clone, Serialize)]
pub struct P2pSpec {
    /// The drive that holds the data and pushes it.
    pub source: String,
    /// The drive receiving it, as the benchmark reaches it.
    pub target: String,
    /// The target as the source reaches it (usually the same).
    pub target_from_source: String,
    pub count: u64,
    pub value_size: usize,
    /// Keys per PEER2PEERPUSH request.
    pub keys_per_request: usize,
    /// PEER2PEERPUSH requests in flight.
    pub requests_in_flight: usize,
    /// Client puts: connections and depth.
    pub connections: usize,
    pub depth: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct P2pResult {
    pub spec: P2pSpec,
    pub client_put_seconds: f64,
    pub client_put_mb_per_second: f64,
    pub push_seconds: f64,
    pub push_mb_per_second: f64,
    /// Push throughput over client-put throughput.
    pub push_over_put: f64,
    pub push_failures: u64,
}

fn addr(target: &str) -> &str {
    target.trim_start_matches("kinetic://")
}

pub async fn run_p2p(spec: P2pSpec) -> Result<P2pResult, BenchError> {
    if spec.keys_per_request == 0 || spec.requests_in_flight == 0 {
        return Err(BenchError::Invalid("keys per request and requests in flight must be at least 1".into()));
    }
    let put_spec = |target: &str| BenchSpec {
        connections: spec.connections,
        depth: spec.depth,
        flush_at_end: true,
        ..BenchSpec::new(target, Operation::Put, spec.count, spec.value_size)
    };
    // Load the source (untimed), then time the client relaying the same pairs to the target.
    run(put_spec(&spec.source)).await?;
    let baseline = run(put_spec(&spec.target)).await?;

    let (host, port) = addr(&spec.target_from_source)
        .rsplit_once(':')
        .ok_or_else(|| BenchError::Invalid(format!("target {} is not HOST:PORT", spec.target_from_source)))?;
    let peer = Peer {
        host: host.to_string(),
        port: port.parse().map_err(|_| BenchError::Invalid(format!("bad port in {}", spec.target_from_source)))?,
        tls: false,
    };
    let source = Client::connect(addr(&spec.source), ClientConfig::default()).await?;
    let keys: Vec<Bytes> = (0..spec.count).map(|i| Bytes::from(crate::key_for(i, 16))).collect();
    let chunks: Vec<Vec<Bytes>> = keys.chunks(spec.keys_per_request).map(|c| c.to_vec()).collect();
    let window = Arc::new(tokio::sync::Semaphore::new(spec.requests_in_flight));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for chunk in chunks {
        let permit = window.clone().acquire_owned().await.map_err(|e| BenchError::Invalid(e.to_string()))?;
        let (source, peer) = (source.clone(), peer.clone());
        tasks.push(tokio::spawn(async move {
            let ops = chunk.into_iter().map(PushOp::copy).collect();
            let result = source.push_to_peer(&peer, ops).await;
            drop(permit);
            result
        }));
    }
    let mut failures = 0;
    for t in tasks {
        let result = t.await.map_err(|e| BenchError::Invalid(e.to_string()))??;
        failures += result.operations.iter().filter(|o| o.status != spindle_client::StatusCode::Success).count() as u64;
    }
    let push_seconds = started.elapsed().as_secs_f64().max(1e-6);
    let bytes = spec.count as f64 * spec.value_size as f64;
    let push_mb_per_second = bytes / push_seconds / 1e6;
    Ok(P2pResult {
        client_put_seconds: baseline.seconds,
        client_put_mb_per_second: baseline.megabytes_per_second,
        push_seconds,
        push_mb_per_second,
        push_over_put: push_mb_per_second / baseline.megabytes_per_second.max(1e-9),
        push_failures: failures,
        spec,
    })
}
