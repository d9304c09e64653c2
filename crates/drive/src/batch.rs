//! Batches of one connection: START_BATCH opens one, PUT/DELETE carrying its batchID are held
//! here (unanswered, invisible to everyone) and checked against the batch limits, END_BATCH hands
//! them to the engine as one atomic, durable write, ABORT_BATCH or a closed connection drops them.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use spindle_engine::WriteOp;
use spindle_proto::StatusCode;

use crate::handler::{Outcome, Reply};
use crate::state::DriveState;

struct OpenBatch {
    ops: Vec<WriteOp>,
    sequences: Vec<i64>,
    bytes: u64,
    deletes: u32,
    /// The first operation that made the batch invalid, and why.
    failure: Option<(i64, String)>,
}

/// A batch ready to commit.
pub struct Commit {
    pub op: WriteOp,
    pub sequences: Vec<i64>,
}

/// Why END_BATCH cannot commit.
pub struct Rejected {
    pub reply: Reply,
    pub failed_sequence: Option<i64>,
    pub sequences: Vec<i64>,
}

pub struct Batches {
    state: Arc<DriveState>,
    open: HashMap<u32, OpenBatch>,
}

fn invalid_batch(message: impl Into<String>) -> Reply {
    Reply::error(StatusCode::InvalidBatch, message)
}

impl Batches {
    pub fn new(state: Arc<DriveState>) -> Self {
        Batches { state, open: HashMap::new() }
    }

    pub fn start(&mut self, id: u32) -> Reply {
        if self.open.contains_key(&id) {
            return invalid_batch(format!("batch {id} is already open on this connection"));
        }
        let max = self.state.config.limits.max_batch_count_per_device;
        let previous = self.state.open_batches.fetch_add(1, Ordering::AcqRel);
        if previous >= max {
            self.state.open_batches.fetch_sub(1, Ordering::AcqRel);
            return invalid_batch(format!("the drive already has maxBatchCountPerDevice ({max}) open batches"));
        }
        self.open.insert(id, OpenBatch { ops: Vec::new(), sequences: Vec::new(), bytes: 0, deletes: 0, failure: None });
        Reply::ok(None)
    }

    /// Adds a PUT or DELETE (as the handler prepared it) to batch `id`. Batched operations get
    /// no answer of their own; `Some` is an answer for an operation naming no open batch.
    pub fn add(&mut self, id: u32, sequence: i64, outcome: Outcome) -> Option<Reply> {
        let limits = self.state.config.limits;
        let Some(batch) = self.open.get_mut(&id) else {
            return Some(invalid_batch(format!("no open batch {id} on this connection")));
        };
        batch.sequences.push(sequence);
        if batch.failure.is_some() {
            return None;
        }
        let problem = match outcome {
            Outcome::Reply(reply) => Some(format!("{}: {}", reply.status.as_str_name(), reply.message)),
            Outcome::NeedsDisk => Some("only puts and deletes can be batched".into()),
            Outcome::Write { op, .. } => {
                batch.bytes += op.footprint() as u64;
                batch.deletes += matches!(op, WriteOp::Delete { .. }) as u32;
                batch.ops.push(op);
                if batch.ops.len() as u32 > limits.max_operation_count_per_batch {
                    Some(format!("more than maxOperationCountPerBatch ({})", limits.max_operation_count_per_batch))
                } else if batch.deletes > limits.max_deletes_per_batch {
                    Some(format!("more than maxDeletesPerBatch ({})", limits.max_deletes_per_batch))
                } else if batch.bytes > limits.max_batch_size as u64 {
                    Some(format!("more than maxBatchSize ({} bytes)", limits.max_batch_size))
                } else {
                    None
                }
            }
        };
        if let Some(message) = problem {
            batch.failure = Some((sequence, message));
        }
        None
    }

    /// Marks batch `id` invalid because a command other than PUT/DELETE carried its id.
    pub fn poison(&mut self, id: u32, sequence: i64, what: &str) {
        if let Some(batch) = self.open.get_mut(&id) {
            batch.failure.get_or_insert((sequence, format!("{what} is not allowed in a batch")));
        }
    }

    pub fn end(&mut self, id: u32, count: Option<i32>) -> Result<Commit, Rejected> {
        let Some(batch) = self.open.remove(&id) else {
            return Err(Rejected { reply: invalid_batch(format!("no open batch {id} on this connection")), failed_sequence: None, sequences: Vec::new() });
        };
        self.state.open_batches.fetch_sub(1, Ordering::AcqRel);
        if let Some((sequence, message)) = batch.failure {
            return Err(Rejected {
                reply: invalid_batch(format!("operation with sequence {sequence}: {message}; nothing applied")),
                failed_sequence: Some(sequence),
                sequences: batch.sequences,
            });
        }
        if let Some(count) = count {
            if count < 0 || count as usize != batch.ops.len() {
                return Err(Rejected {
                    reply: invalid_batch(format!("END_BATCH says {count} operations, the drive received {}; nothing applied", batch.ops.len())),
                    failed_sequence: None,
                    sequences: batch.sequences,
                });
            }
        }
        Ok(Commit { op: WriteOp::Batch(batch.ops), sequences: batch.sequences })
    }

    pub fn abort(&mut self, id: u32) -> Reply {
        match self.open.remove(&id) {
            Some(_) => {
                self.state.open_batches.fetch_sub(1, Ordering::AcqRel);
                Reply::ok(None)
            }
            None => invalid_batch(format!("no open batch {id} on this connection")),
        }
    }
}

impl Drop for Batches {
    /// A closed connection's batches are dropped, and free their device-wide slots.
    fn drop(&mut self) {
        self.state.open_batches.fetch_sub(self.open.len() as u32, Ordering::AcqRel);
    }
}
