//! A drive's disk in the simulation: the memory engine, with what a crash does to a disk.
//!
//! Writes apply at once (as the engine's writer applies them) and are durable only once a
//! sync covers them (a WRITETHROUGH write, a FLUSHALLDATA). A crash keeps what was durable
//! and a prefix, drawn from the seed, of what was not: the journal got that far.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use rand::Rng;
use spindle_engine::{Check, Engine, Entry, KeyRange, MemEngine, Meta, Result, WriteOp, WriteRequest};

/// One drive's disk, outliving the drive's crashes.
pub struct Disk {
    durable: Arc<MemEngine>,
    running: Mutex<Option<Arc<SimEngine>>>,
    /// Puts refused as by a full disk (NO_SPACE); deletes go through.
    refusing: Arc<Mutex<Option<Refusal>>>,
}

/// Which puts a disk refuses: those whose key and value it holds true for.
pub type Refusal = Arc<dyn Fn(&[u8], &[u8]) -> bool + Send + Sync>;

impl Disk {
    pub fn new() -> Arc<Disk> {
        Arc::new(Disk { durable: MemEngine::new(), running: Mutex::new(None), refusing: Arc::default() })
    }

    /// Refuses the puts `refusal` picks from now on, as a full disk refuses them (the room
    /// left fits some writes and not others); `None` takes them all again.
    pub fn refuse_puts(&self, refusal: Option<Refusal>) {
        *self.refusing.lock() = refusal;
    }

    /// The engine a drive starting now finds: everything that was durable.
    pub fn boot(&self) -> Arc<SimEngine> {
        let live = MemEngine::new();
        let mut key = Bytes::new();
        while let Ok(Some(e)) = self.durable.next(&key) {
            let _ = live.put(&e.key, e.value, e.meta, Check::Force);
            key = e.key;
        }
        let engine = Arc::new(SimEngine { live, durable: self.durable.clone(), pending: Mutex::new(Vec::new()), crashed: AtomicBool::new(false), refusing: self.refusing.clone() });
        *self.running.lock() = Some(engine.clone());
        engine
    }

    /// Power is cut: the writes not yet synced survive up to a point drawn by `rng`.
    pub fn crash(&self, rng: &mut impl Rng) {
        let Some(engine) = self.running.lock().take() else { return };
        engine.crashed.store(true, Ordering::Release);
        let pending = std::mem::take(&mut *engine.pending.lock());
        let kept = rng.random_range(0..=pending.len());
        for op in pending.into_iter().take(kept) {
            let _ = self.durable.submit_and_wait(op, false);
        }
    }

    /// Entries on the disk as a restart would find them, and as the drive serves them now.
    pub fn durable_len(&self) -> u64 {
        self.durable.approximate_len()
    }
}

pub struct SimEngine {
    live: Arc<MemEngine>,
    durable: Arc<MemEngine>,
    /// Applied, not yet durable, in order.
    pending: Mutex<Vec<WriteOp>>,
    crashed: AtomicBool,
    refusing: Arc<Mutex<Option<Refusal>>>,
}

impl SimEngine {
    fn sync(&self) {
        for op in std::mem::take(&mut *self.pending.lock()) {
            let _ = self.durable.submit_and_wait(op, false);
        }
    }
}

impl Engine for SimEngine {
    fn get(&self, key: &[u8]) -> Result<Option<Entry>> {
        self.live.get(key)
    }

    fn get_meta(&self, key: &[u8]) -> Result<Option<Meta>> {
        self.live.get_meta(key)
    }

    fn next(&self, key: &[u8]) -> Result<Option<Entry>> {
        self.live.next(key)
    }

    fn previous(&self, key: &[u8]) -> Result<Option<Entry>> {
        self.live.previous(key)
    }

    fn keys(&self, range: &KeyRange) -> Result<Vec<Bytes>> {
        self.live.keys(range)
    }

    fn submit(&self, request: WriteRequest) {
        if self.crashed.load(Ordering::Acquire) {
            return request.finish(Err(spindle_engine::Error::Internal("the simulated drive crashed")));
        }
        let refused = self.refusing.lock().as_ref().is_some_and(|r| refuses(r, &request.op));
        if refused {
            return request.finish(Err(spindle_engine::Error::NoSpace));
        }
        let result = match &request.op {
            WriteOp::Flush => Ok(()),
            op => {
                let r = self.live.submit_and_wait(op.clone(), false);
                if r.is_ok() {
                    self.pending.lock().push(op.clone());
                }
                r
            }
        };
        if request.sync {
            self.sync();
        }
        request.finish(result);
    }

    fn compact(&self) -> Result<()> {
        Ok(())
    }

    fn disk_usage(&self) -> u64 {
        0
    }

    fn approximate_len(&self) -> u64 {
        self.live.approximate_len()
    }
}

/// Whether `refusal` picks a put of `op`.
fn refuses(refusal: &Refusal, op: &WriteOp) -> bool {
    match op {
        WriteOp::Put { key, value, .. } => refusal(key, value),
        WriteOp::Batch(ops) => ops.iter().any(|op| refuses(refusal, op)),
        WriteOp::Delete { .. } | WriteOp::Flush | WriteOp::Erase { .. } => false,
    }
}
