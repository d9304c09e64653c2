//! PEER2PEERPUSH: this drive copies entries to a peer drive itself, as a client of the peer.
//!
//! It authenticates at the peer as the requesting identity with that identity's key (drives of
//! one installation share their ACLs), pipelines all puts (WRITEBACK, then one FLUSHALLDATA so
//! the copies are durable before the answer), and answers with a status per operation. An
//! operation with a nested `p2pop` asks the peer to push further (A -> B -> C), and the peer's
//! per-operation answers are returned inside it. Connections to peers are pooled per
//! (identity, host, port, TLS).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use spindle_client::{Client, ClientConfig, ClientError, PutOptions, Synchronization};
use spindle_proto::pb::command::p2p_operation::Operation;
use spindle_proto::pb::command::{Body, P2pOperation, Status};
use spindle_proto::{MessageType, StatusCode};

use crate::reply::{engine_error, Reply};
use crate::security::{Caller, Permission};
use crate::state::{DriveState, PeerKey};

/// Copies in flight at once per push: enough to keep the peer connection busy, few enough to
/// bound memory (each holds one value of up to maxValueSize).
pub const PUSH_WINDOW: usize = 16;


fn status(code: StatusCode, message: impl Into<String>) -> Option<Status> {
    Some(crate::reply::status(code, message.into()))
}

fn client_status(e: &ClientError) -> Option<Status> {
    match e {
        ClientError::Status { code, message } => status(*code, message.clone()),
        other => status(StatusCode::RemoteConnectionError, other.to_string()),
    }
}

async fn connect(state: &DriveState, key: &PeerKey, hmac_key: Bytes) -> Result<Client, ClientError> {
    {
        let mut peers = state.peers.lock();
        match peers.get(key) {
            Some(c) if !c.is_closed() => {
                // Talk to the peer at this drive's cluster version as it is now: a cluster
                // that fenced both drives to a new epoch since the connection was made
                // moves its partitions over it.
                c.set_request_cluster_version(state.cluster_version());
                return Ok(c.clone());
            }
            Some(_) => {
                peers.remove(key);
            }
            None => {}
        }
    }
    let (identity, host, port, tls) = key.clone();
    let tls_trust = if tls {
        Some(state.config.p2p_tls_trust.clone().ok_or_else(|| {
            ClientError::Io(std::io::Error::other("the peer asks for TLS and this drive has no p2p_tls_trust configured"))
        })?)
    } else {
        None
    };
    let config = ClientConfig {
        identity,
        hmac_key,
        cluster_version: state.cluster_version(),
        timeout: Duration::from_millis(state.config.p2p_timeout_ms),
        tls_trust,
        dialer: state.dialer.clone(),
    };
    let port = u16::try_from(port).map_err(|_| ClientError::Io(std::io::Error::other(format!("invalid peer port {port}"))))?;
    let addr = if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") };
    let client = Client::connect(addr, config).await?;
    state.peers.lock().insert(key.clone(), client.clone());
    Ok(client)
}

/// Runs one PEER2PEERPUSH for `identity` (whose HMAC key is `hmac_key`).
pub async fn run(state: Arc<DriveState>, caller: Caller, request: P2pOperation) -> Reply {
    let (identity, hmac_key) = (caller.identity.id, caller.identity.hmac_key.clone());
    let Some(peer) = request.peer.clone() else {
        return Reply::error(StatusCode::InvalidRequest, "PEER2PEERPUSH needs a peer");
    };
    let (Some(host), Some(port)) = (peer.hostname.clone().filter(|h| !h.is_empty()), peer.port) else {
        return Reply::error(StatusCode::InvalidRequest, "the peer needs a hostname and a port");
    };
    let max_key = state.config.limits.max_key_size as usize;
    for op in &request.operation {
        let too_long = |k: &Option<Bytes>| k.as_ref().is_some_and(|k| k.len() > max_key);
        if op.key.as_ref().is_none_or(|k| k.is_empty()) || too_long(&op.key) || too_long(&op.new_key) {
            return Reply::error(StatusCode::InvalidRequest, format!("every operation needs a key of 1 to {max_key} bytes"));
        }
    }
    let pool_key: PeerKey = (identity, host.clone(), port, peer.tls.unwrap_or(false));
    let client = match connect(&state, &pool_key, hmac_key.clone()).await {
        Ok(c) => c,
        Err(e) => {
            return Reply::error(StatusCode::RemoteConnectionError, format!("cannot reach peer {host}:{port}: {e}"));
        }
    };

    // Up to PUSH_WINDOW copies in flight, pipelined on the one peer connection.
    let window = Arc::new(tokio::sync::Semaphore::new(PUSH_WINDOW));
    let mut tasks = Vec::with_capacity(request.operation.len());
    for op in request.operation.clone() {
        let Ok(permit) = window.clone().acquire_owned().await else { break };
        let (state, client, caller) = (state.clone(), client.clone(), caller.clone());
        tasks.push(tokio::spawn(async move {
            let done = copy_one(&state, &caller, &client, op).await;
            drop(permit);
            done
        }));
    }
    let mut operations = Vec::with_capacity(tasks.len());
    let mut moved = 0usize;
    for task in tasks {
        let (op, bytes) = task.await.unwrap_or_else(|e| {
            (Operation { status: status(StatusCode::InternalError, e.to_string()), ..Operation::default() }, 0)
        });
        moved += bytes;
        operations.push(op);
    }
    // The copies are durable on the peer before we answer.
    if operations.iter().any(|o| o.status.as_ref().and_then(|s| s.code) == Some(StatusCode::Success as i32)) {
        if let Err(e) = client.flush_all_data().await {
            for op in operations.iter_mut().filter(|o| o.status.as_ref().and_then(|s| s.code) == Some(StatusCode::Success as i32)) {
                op.status = status(StatusCode::RemoteConnectionError, format!("peer did not make the copy durable: {e}"));
            }
        }
    }
    if operations.iter().any(|o| o.status.as_ref().and_then(|s| s.code) == Some(StatusCode::RemoteConnectionError as i32)) {
        // A broken connection is not reused.
        state.peers.lock().remove(&pool_key);
    }
    state.stats.record(MessageType::Peer2peerpush as i32, moved);
    let all_ok = operations.iter().all(|o| {
        o.status.as_ref().and_then(|s| s.code) == Some(StatusCode::Success as i32)
            && o.p2pop.as_ref().is_none_or(|n| n.all_child_operations_succeeded.unwrap_or(false))
    });
    let body = Body {
        p2p_operation: Some(Box::new(P2pOperation { peer: Some(peer), operation: operations, all_child_operations_succeeded: Some(all_ok) })),
        ..Body::default()
    };
    Reply::ok(Some(body))
}

/// Copies one entry to the peer, then runs its nested push there if it has one. Returns the
/// answered operation and the value bytes moved.
async fn copy_one(state: &DriveState, caller: &Caller, peer: &Client, mut op: Operation) -> (Operation, usize) {
    let key = op.key.clone().unwrap_or_default();
    if !caller.may(Permission::Read, Some(&key)) {
        op.status = caller.refusal(Permission::Read).into_status();
        return (op, 0);
    }
    let entry = match state.engine.get(&key) {
        Ok(Some(e)) => e,
        Ok(None) => {
            op.status = status(StatusCode::NotFound, "no such key on the source drive");
            return (op, 0);
        }
        Err(e) => {
            op.status = engine_error(e).into_status();
            return (op, 0);
        }
    };
    let target = op.new_key.clone().filter(|k| !k.is_empty()).unwrap_or(key);
    let force = op.force.unwrap_or(false);
    let options = PutOptions {
        new_version: entry.meta.version.clone(),
        db_version: if force { Bytes::new() } else { op.version.clone().unwrap_or_default() },
        force,
        tag: entry.meta.tag.clone(),
        algorithm: entry.meta.algorithm,
        sync: Synchronization::Writeback,
    };
    let moved = entry.value.len();
    match peer.put(&target, entry.value, options).await {
        Ok(()) => op.status = status(StatusCode::Success, ""),
        Err(e) => {
            op.status = client_status(&e);
            return (op, 0);
        }
    }
    if let Some(nested) = op.p2pop.take() {
        // Pipeline: the peer pushes on to its own peer; its answer travels back inside ours.
        let body = Body { p2p_operation: Some(Box::new(nested)), ..Body::default() };
        match peer.request(MessageType::Peer2peerpush, Some(body), Bytes::new()).await {
            Ok(response) => {
                let code = response.status();
                op.p2pop = response.body().p2p_operation.map(|p| *p);
                if code != StatusCode::Success {
                    op.status = status(code, format!("nested push: {}", response.status_message()));
                }
            }
            Err(e) => op.status = client_status(&e),
        }
    }
    (op, moved)
}
