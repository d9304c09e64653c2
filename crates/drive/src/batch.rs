//! Batches of one connection: START_BATCH opens one, PUT/DELETE carrying its batchID are held
//! here (unanswered, invisible to everyone) and checked against the batch limits, END_BATCH hands
//! them to the engine as one atomic, durable write, ABORT_BATCH or a closed connection drops them.
//!
//! Each open batch holds one of the drive's maxBatchCountPerDevice slots ([`BatchSlots`]). When
//! every slot is held and a START_BATCH asks for one, the batch that has received nothing for
//! the longest, if that is `batch_idle_timeout_ms` or more, loses its slot, so clients that
//! open batches and go quiet cannot hold every slot forever: its buffered operations are dropped
//! at once (the slot holds them) and its END_BATCH fails. A batch nobody needed the slot of
//! does not fail, however long it pauses. A connection keeps at most
//! [`MAX_TOMBSTONES`] such dropped batches (for their END_BATCH to fail clearly).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

use parking_lot::Mutex;
use spindle_engine::WriteOp;
use spindle_proto::StatusCode;

use spindle_proto::Limits;

use crate::reply::Reply;

/// How long a START_BATCH that finds every slot taken waits for one to be freed before it is
/// refused. A connection the client has just closed still holds its slots until the drive has
/// read the close (a few milliseconds on a busy machine); a client that closes one connection
/// and opens a batch on another must not be refused for that.
pub const BATCH_SLOT_WAIT: Duration = Duration::from_millis(2000);
/// Batches whose slot was taken back that a connection remembers (so that their END_BATCH
/// fails with a clear message); older ones are forgotten, and their END_BATCH fails as one
/// naming no open batch does.
pub const MAX_TOMBSTONES: usize = 16;

/// One device-wide batch slot, held by an open batch. It holds the batch's operations, so
/// that the drive can drop them when it takes the slot back from a batch whose client is quiet.
pub struct Slot {
    last_progress: Mutex<Instant>,
    /// Taken back by the drive because the batch made no progress while another wanted a slot.
    expired: AtomicBool,
    ops: Mutex<Vec<WriteOp>>,
    /// Operations buffered in all batches of the drive (`BatchSlots::buffered`).
    buffered: Arc<AtomicUsize>,
}

impl Slot {
    fn new(now: Instant, buffered: Arc<AtomicUsize>) -> Self {
        Slot { last_progress: Mutex::new(now), expired: AtomicBool::new(false), ops: Mutex::new(Vec::new()), buffered }
    }

    fn push_op(&self, op: WriteOp) {
        self.ops.lock().push(op);
        self.buffered.fetch_add(1, Ordering::AcqRel);
    }

    /// Takes the operations out (`ops` must be this slot's, locked).
    fn take_ops(&self, ops: &mut Vec<WriteOp>) -> Vec<WriteOp> {
        self.buffered.fetch_sub(ops.len(), Ordering::AcqRel);
        std::mem::take(ops)
    }

    fn drop_ops(&self) {
        let mut ops = self.ops.lock();
        drop(self.take_ops(&mut ops));
    }

    /// Records progress; false when the slot was taken back.
    fn touch(&self) -> bool {
        let mut last = self.last_progress.lock();
        if self.expired.load(Ordering::Acquire) {
            return false;
        }
        *last = Instant::now();
        true
    }

    /// Takes the slot back: its operations are dropped now, not when its client returns.
    fn expire(&self) {
        // Under the progress lock, so a concurrent `touch` either ran before (and the batch is
        // not stale any more: the caller checked under the same lock) or sees the flag.
        self.expired.store(true, Ordering::Release);
        self.drop_ops();
    }

    pub fn is_expired(&self) -> bool {
        self.expired.load(Ordering::Acquire)
    }
}

/// The drive's batch slots (maxBatchCountPerDevice), shared by all connections.
#[derive(Default)]
pub struct BatchSlots {
    held: Mutex<Vec<Arc<Slot>>>,
    buffered: Arc<AtomicUsize>,
    freed: tokio::sync::Notify,
}

impl BatchSlots {
    /// Batches open on the drive now.
    pub fn open(&self) -> usize {
        self.held.lock().len()
    }

    /// Operations buffered in open batches on the drive now.
    pub fn buffered_operations(&self) -> usize {
        self.buffered.load(Ordering::Acquire)
    }

    /// A free slot; when every slot is held, the one of the batch idle longest is taken back if
    /// it has been idle for `idle` or more. Waits up to `wait` for one to be freed.
    async fn acquire(&self, max: u32, idle: Duration, wait: Duration) -> Option<Arc<Slot>> {
        let deadline = Instant::now() + wait;
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            if let Some(slot) = self.try_acquire(max, idle) {
                return Some(slot);
            }
            if tokio::time::timeout_at(deadline, freed).await.is_err() {
                return None;
            }
        }
    }

    fn try_acquire(&self, max: u32, idle: Duration) -> Option<Arc<Slot>> {
        let now = Instant::now();
        let mut held = self.held.lock();
        if held.len() >= max as usize {
            // Someone wants a slot and none is free: the stalest batch, if idle long enough,
            // gives its slot up.
            let stalest = held.iter().enumerate().min_by_key(|(_, s)| *s.last_progress.lock()).map(|(i, _)| i);
            let i = stalest?;
            let last = held[i].last_progress.lock();
            if now.duration_since(*last) < idle {
                return None;
            }
            held[i].expire();
            drop(last);
            held.remove(i);
            if held.len() >= max as usize {
                return None;
            }
        }
        let slot = Arc::new(Slot::new(now, self.buffered.clone()));
        held.push(slot.clone());
        Some(slot)
    }

    fn release(&self, slot: &Arc<Slot>) {
        slot.drop_ops();
        self.held.lock().retain(|s| !Arc::ptr_eq(s, slot));
        self.freed.notify_waiters();
    }
}

struct OpenBatch {
    /// Holds the batch's operations too (see [`Slot`]).
    slot: Arc<Slot>,
    /// Operations received (kept in the slot); counted here as the slot may drop them.
    count: u32,
    /// Sequences of the operations received, up to and including the one that failed the batch
    /// (later ones are not kept: a failed batch must not grow).
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

/// One connection's batches.
pub struct Batches {
    /// The drive's slots, shared by every connection.
    slots: Arc<BatchSlots>,
    limits: Limits,
    /// `batch_idle_timeout_ms`.
    idle_timeout: Duration,
    /// Fixed hash keys: a closed connection frees its batches' slots in the same order in
    /// every run (a simulated run replays).
    open: HashMap<u32, OpenBatch, std::hash::BuildHasherDefault<std::hash::DefaultHasher>>,
}

fn invalid_batch(message: impl Into<String>) -> Reply {
    Reply::error(StatusCode::InvalidBatch, message)
}

impl Batches {
    pub fn new(slots: Arc<BatchSlots>, limits: Limits, idle_timeout: Duration) -> Self {
        Batches { slots, limits, idle_timeout, open: HashMap::default() }
    }

    /// A device-wide slot for a START_BATCH of batch `id`, waiting up to [`BATCH_SLOT_WAIT`]
    /// for one. Done before the request enters the priority gate: waiting for another client
    /// to free a slot is not the drive's work, and must not hold lower priorities back.
    pub async fn slot_for(&self, id: u32) -> Result<Arc<Slot>, Reply> {
        if self.open.get(&id).is_some_and(|b| !b.slot.is_expired()) {
            return Err(invalid_batch(format!("batch {id} is already open on this connection")));
        }
        let max = self.limits.max_batch_count_per_device;
        match self.slots.acquire(max, self.idle_timeout, BATCH_SLOT_WAIT).await {
            Some(slot) => Ok(slot),
            None => Err(invalid_batch(format!("the drive already has maxBatchCountPerDevice ({max}) open batches"))),
        }
    }

    /// Opens batch `id` in `slot` (from [`Batches::slot_for`]).
    pub fn start(&mut self, id: u32, slot: Result<Arc<Slot>, Reply>) -> Reply {
        let slot = match slot {
            Ok(slot) => slot,
            Err(refused) => return refused,
        };
        if self.open.get(&id).is_some_and(|b| !b.slot.is_expired()) {
            self.slots.release(&slot);
            return invalid_batch(format!("batch {id} is already open on this connection"));
        }
        // Batches whose slot was taken back stay only as tombstones, a bounded number of them.
        let mut dead: Vec<u32> = self.open.iter().filter(|(_, b)| b.slot.is_expired()).map(|(k, _)| *k).collect();
        if dead.len() >= MAX_TOMBSTONES {
            dead.sort_by_key(|k| *self.open[k].slot.last_progress.lock());
            for k in &dead[..=dead.len() - MAX_TOMBSTONES] {
                self.open.remove(k);
            }
        }
        self.open.insert(id, OpenBatch { slot, count: 0, sequences: Vec::new(), bytes: 0, deletes: 0, failure: None });
        Reply::ok(None)
    }

    /// Adds a PUT or DELETE to batch `id`: the write its command prepared, or the refusal that
    /// fails the batch. Batched operations get no answer of their own; `Some` is an answer for
    /// an operation naming no open batch.
    pub fn add(&mut self, id: u32, sequence: i64, op: Result<WriteOp, Reply>) -> Option<Reply> {
        let limits = self.limits;
        let idle = self.idle_timeout;
        let Some(batch) = self.open.get_mut(&id) else {
            return Some(invalid_batch(format!("no open batch {id} on this connection")));
        };
        if batch.failure.is_some() {
            return None;
        }
        batch.sequences.push(sequence);
        let problem = if !batch.slot.touch() {
            Some(dropped_message(idle))
        } else {
            match op {
                Err(reply) => Some(format!("{}: {}", reply.status.as_str_name(), reply.message)),
                Ok(op) => {
                    batch.bytes += op.footprint() as u64;
                    batch.deletes += matches!(op, WriteOp::Delete { .. }) as u32;
                    batch.count += 1;
                    batch.slot.push_op(op);
                    if batch.count > limits.max_operation_count_per_batch {
                        Some(format!("more than maxOperationCountPerBatch ({})", limits.max_operation_count_per_batch))
                    } else if batch.deletes > limits.max_deletes_per_batch {
                        Some(format!("more than maxDeletesPerBatch ({})", limits.max_deletes_per_batch))
                    } else if batch.bytes > limits.max_batch_size as u64 {
                        Some(format!("more than maxBatchSize ({} bytes)", limits.max_batch_size))
                    } else {
                        None
                    }
                }
            }
        };
        if let Some(message) = problem {
            batch.failure = Some((sequence, message));
            // Nothing of a failed batch will be applied: its operations need not be kept.
            batch.slot.drop_ops();
        }
        None
    }

    /// Marks batch `id` invalid because a command other than PUT/DELETE carried its id.
    pub fn poison(&mut self, id: u32, sequence: i64, what: &str) {
        if let Some(batch) = self.open.get_mut(&id) {
            if batch.failure.is_none() {
                batch.failure = Some((sequence, format!("{what} is not allowed in a batch")));
                batch.slot.drop_ops();
            }
        }
    }

    pub fn end(&mut self, id: u32, count: Option<i32>) -> Result<Commit, Rejected> {
        let Some(batch) = self.open.remove(&id) else {
            return Err(Rejected { reply: invalid_batch(format!("no open batch {id} on this connection")), failed_sequence: None, sequences: Vec::new() });
        };
        // Taken before the slot is released (which drops them), checked under their lock
        // against the slot having been taken back.
        let ops = {
            let mut ops = batch.slot.ops.lock();
            let alive = !batch.slot.is_expired();
            alive.then(|| batch.slot.take_ops(&mut ops))
        };
        self.slots.release(&batch.slot);
        if let Some((sequence, message)) = batch.failure {
            return Err(Rejected {
                reply: invalid_batch(format!("operation with sequence {sequence}: {message}; nothing applied")),
                failed_sequence: Some(sequence),
                sequences: batch.sequences,
            });
        }
        let idle = self.idle_timeout;
        let Some(ops) = ops else {
            return Err(Rejected {
                reply: invalid_batch(format!("{}; nothing applied", dropped_message(idle))),
                failed_sequence: None,
                sequences: batch.sequences,
            });
        };
        if let Some(count) = count {
            if count < 0 || count as u32 != batch.count {
                return Err(Rejected {
                    reply: invalid_batch(format!("END_BATCH says {count} operations, the drive received {}; nothing applied", batch.count)),
                    failed_sequence: None,
                    sequences: batch.sequences,
                });
            }
        }
        Ok(Commit { op: WriteOp::Batch(ops), sequences: batch.sequences })
    }

    pub fn abort(&mut self, id: u32) -> Reply {
        match self.open.remove(&id) {
            Some(batch) => {
                self.slots.release(&batch.slot);
                Reply::ok(None)
            }
            None => invalid_batch(format!("no open batch {id} on this connection")),
        }
    }

#[cfg(test)]
    fn slot_of(&self, id: u32) -> &Arc<Slot> {
        &self.open[&id].slot
    }

    /// Drops every open batch and frees its slot (the connection is closing).
    pub fn close(&mut self) {
        for (_, batch) in self.open.drain() {
            self.slots.release(&batch.slot);
        }
    }
}

/// Why a batch whose slot another START_BATCH took back fails.
fn dropped_message(idle: Duration) -> String {
    format!("the batch received nothing for {} ms or more while another needed its slot, and was dropped", idle.as_millis())
}

impl Drop for Batches {
    /// A closed connection's batches are dropped, and free their device-wide slots.
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn slots_are_bounded_freed_and_taken_back_from_idle_batches() {
        let slots = BatchSlots::default();
        let idle = Duration::from_secs(3600);
        let held: Vec<_> = (0..2).map(|_| slots.try_acquire(2, idle).unwrap()).collect();
        assert!(slots.acquire(2, idle, Duration::from_millis(10)).await.is_none());
        // A slot released while a START_BATCH waits goes to it.
        let released = held[0].clone();
        let slots = Arc::new(slots);
        let waiter = tokio::spawn({
            let slots = slots.clone();
            async move { slots.acquire(2, idle, Duration::from_secs(30)).await.is_some() }
        });
        tokio::task::yield_now().await;
        slots.release(&released);
        assert!(waiter.await.unwrap());
        // With every slot held, the batch idle longest loses its slot when another asks, and
        // its operations are dropped at once.
        held[1].push_op(WriteOp::Flush);
        assert_eq!(slots.buffered_operations(), 1);
        assert!(slots.try_acquire(2, Duration::ZERO).is_some());
        assert!(held[1].is_expired());
        assert!(!held[1].touch());
        assert_eq!(slots.buffered_operations(), 0);
        assert_eq!(slots.open(), 2);
    }

    /// A connection whose batches keep losing their slots keeps at most MAX_TOMBSTONES of them
    /// (each without its operations); END_BATCH of one fails, saying why.
    #[tokio::test]
    async fn taken_back_batches_leave_a_bounded_number_of_tombstones() {
        let dir = std::env::temp_dir().join(format!("spindle-batch-test-{}", std::process::id()));
        let mut config = crate::config::DriveConfig { data_dir: dir, engine: crate::config::EngineKind::Memory, reserved_bytes: 0, ..Default::default() };
        config.limits.max_batch_count_per_device = 1;
        // Every batch is stale at once: taken back whenever another asks.
        config.batch_idle_timeout_ms = 0;
        let state = crate::state::DriveState::new(config, spindle_engine::MemEngine::new(), crate::persist::Identity::generate(), 0, 0);
        let idle = Duration::from_millis(state.config.batch_idle_timeout_ms);
        let mut quiet = Batches::new(state.batch_slots.clone(), state.config.limits, idle);
        let other = Batches::new(state.batch_slots.clone(), state.config.limits, idle);
        for id in 0..40 {
            let slot = quiet.slot_for(id).await;
            assert_eq!(quiet.start(id, slot).status, StatusCode::Success);
            quiet.slot_of(id).push_op(WriteOp::Flush);
            let Ok(taken) = other.slot_for(1000 + id).await else { panic!("no slot for batch {id}: the quiet one kept it") };
            assert!(quiet.slot_of(id).is_expired());
            state.batch_slots.release(&taken);
            assert!(quiet.open.len() <= MAX_TOMBSTONES + 1, "{} batches kept", quiet.open.len());
        }
        assert_eq!(state.batch_slots.buffered_operations(), 0);
        let recent = quiet.end(39, Some(1)).err().expect("a taken-back batch fails");
        assert!(recent.reply.message.contains("another needed its slot"), "{}", recent.reply.message);
        let forgotten = quiet.end(0, Some(1)).err().expect("a forgotten batch fails");
        assert!(forgotten.reply.message.contains("no open batch"), "{}", forgotten.reply.message);
    }

    /// A stale batch keeps its slot while free slots remain: a batch fails only if someone
    /// actually needed its slot.
    #[test]
    fn a_stale_batch_keeps_its_slot_while_others_are_free() {
        let slots = BatchSlots::default();
        let stale = slots.try_acquire(3, Duration::ZERO).unwrap();
        let _second = slots.try_acquire(3, Duration::ZERO).unwrap();
        assert!(!stale.is_expired(), "a slot was taken back while a free one remained");
        assert!(stale.touch());
        let _third = slots.try_acquire(3, Duration::ZERO).unwrap();
        assert!(!stale.is_expired());
        // All held: the next request takes the stalest one back.
        assert!(slots.try_acquire(3, Duration::ZERO).is_some());
        assert_eq!(slots.open(), 3);
    }
}
