//! Types for peer-to-peer pushes (PEER2PEERPUSH).

use bytes::Bytes;
use spindle_proto::pb::command::p2p_operation::{Operation, Peer as PeerProto};
use spindle_proto::pb::command::P2pOperation;
use spindle_proto::StatusCode;

/// The drive to push to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    pub host: String,
    pub port: u16,
    pub tls: bool,
}

/// One entry to copy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PushOp {
    pub key: Bytes,
    /// Store it under this key at the peer instead.
    pub new_key: Option<Bytes>,
    /// The version the peer's entry must have (compare-and-swap at the peer); `None`: the peer
    /// must not hold a versioned entry under that key.
    pub expected_version: Option<Bytes>,
    /// Overwrite whatever the peer holds.
    pub force: bool,
    /// After copying, have the peer push on (a pipeline A -> B -> C).
    pub then: Option<(Peer, Vec<PushOp>)>,
}

/// The answer to one operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushOutcome {
    pub key: Bytes,
    pub status: StatusCode,
    pub message: String,
    /// The nested push's outcomes, for pipelined operations.
    pub nested: Option<PushResult>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushResult {
    pub operations: Vec<PushOutcome>,
    pub all_succeeded: bool,
}

impl Peer {
    pub(crate) fn to_proto(&self, operations: Vec<PushOp>) -> P2pOperation {
        P2pOperation {
            peer: Some(PeerProto { hostname: Some(self.host.clone()), port: Some(self.port as i32), tls: Some(self.tls) }),
            operation: operations.into_iter().map(PushOp::into_proto).collect(),
            all_child_operations_succeeded: None,
        }
    }
}

impl PushOp {
    /// A forced copy of `key` under the same key.
    pub fn copy(key: impl Into<Bytes>) -> Self {
        PushOp { key: key.into(), force: true, ..PushOp::default() }
    }

    fn into_proto(self) -> Operation {
        Operation {
            key: Some(self.key),
            version: self.expected_version,
            new_key: self.new_key,
            force: Some(self.force),
            status: None,
            p2pop: self.then.map(|(peer, ops)| peer.to_proto(ops)),
        }
    }
}

impl PushResult {
    pub(crate) fn from_proto(p: P2pOperation) -> Self {
        PushResult {
            all_succeeded: p.all_child_operations_succeeded.unwrap_or(false),
            operations: p
                .operation
                .into_iter()
                .map(|o| PushOutcome {
                    key: o.key.unwrap_or_default(),
                    status: o.status.as_ref().and_then(|s| s.code).and_then(|c| StatusCode::try_from(c).ok()).unwrap_or(StatusCode::InvalidStatusCode),
                    message: o.status.and_then(|s| s.status_message).unwrap_or_default(),
                    nested: o.p2pop.map(PushResult::from_proto),
                })
                .collect(),
        }
    }
}
