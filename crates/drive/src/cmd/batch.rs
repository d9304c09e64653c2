//! START_BATCH, END_BATCH and ABORT_BATCH, and the PUTs and DELETEs carrying a batchID, which
//! the connection's batches hold (crate::batch) until END_BATCH hands them to the engine as
//! one atomic, durable write.

use std::sync::Arc;

use bytes::Bytes;
use spindle_engine::WriteOp;
use spindle_proto::pb::command::Body;
use spindle_proto::{MessageType, StatusCode};

use super::Writes;
use crate::batch::{Batches, Slot};
use crate::reply::{batch_body, Reply};
use crate::security::Caller;
use crate::state::DriveState;

/// What a batch command comes to.
pub enum Step {
    /// Answered now.
    Answer(Reply),
    /// A PUT or DELETE held in the batch: no answer (END_BATCH's answers for all).
    Held,
    /// END_BATCH of a valid batch: one write for the engine, durable before its answer, whose
    /// answer lists the batch's sequences.
    Commit { op: WriteOp, sequences: Vec<i64> },
}

/// A request carrying batchID `id`. `value` is the frame's value, or the refusal of one over
/// maxValueSize (which still counts in the batch, and fails it); `slot` is the device-wide
/// slot a START_BATCH sought before its turn.
#[allow(clippy::too_many_arguments, reason = "a batch command needs the batch, the request and what the connection read for it")]
pub fn run(
    state: &DriveState,
    caller: &Caller,
    batches: &mut Batches,
    id: u32,
    kind: MessageType,
    sequence: i64,
    body: Option<Body>,
    value: Result<Bytes, Reply>,
    slot: Option<Result<Arc<Slot>, Reply>>,
) -> Step {
    match kind {
        MessageType::StartBatch => match slot {
            Some(slot) => Step::Answer(batches.start(id, slot)),
            None => Step::Answer(Reply::error(StatusCode::InternalError, "a START_BATCH came without the slot sought for it")),
        },
        MessageType::AbortBatch => Step::Answer(batches.abort(id)),
        MessageType::Put | MessageType::Delete => {
            let kv = body.and_then(|b| b.key_value).unwrap_or_default();
            let mut held = Held { batches, id, sequence, answer: None };
            match (kind, value) {
                (_, Err(refused)) => held.refuse(refused),
                (MessageType::Put, Ok(value)) => super::put::run(state, caller, kv, value, &mut held),
                _ => super::delete::run(state, caller, kv, &mut held),
            }
            held.answer.map_or(Step::Held, Step::Answer)
        }
        MessageType::EndBatch => {
            let count = body.as_ref().and_then(|b| b.batch.as_ref()).and_then(|b| b.count);
            match batches.end(id, count) {
                Ok(commit) => Step::Commit { op: commit.op, sequences: commit.sequences },
                Err(rejected) => {
                    let mut reply = rejected.reply;
                    reply.body = Some(Box::new(batch_body(rejected.sequences, rejected.failed_sequence)));
                    Step::Answer(reply)
                }
            }
        }
        other => {
            batches.poison(id, sequence, other.as_str_name());
            Step::Answer(Reply::error(
                StatusCode::InvalidBatch,
                format!("{} is not allowed in a batch; the batch will fail", other.as_str_name()),
            ))
        }
    }
}

/// A batch's PUT or DELETE: the write (or its refusal) joins the batch; an answer comes only
/// when the batch cannot take it.
struct Held<'a> {
    batches: &'a mut Batches,
    id: u32,
    sequence: i64,
    answer: Option<Reply>,
}

impl Writes for Held<'_> {
    fn write(&mut self, op: WriteOp, _sync: bool) {
        // A batch is durable when it commits, whatever its operations ask.
        self.answer = self.batches.add(self.id, self.sequence, Ok(op));
    }

    fn refuse(&mut self, reply: Reply) {
        self.answer = self.batches.add(self.id, self.sequence, Err(reply));
    }
}
