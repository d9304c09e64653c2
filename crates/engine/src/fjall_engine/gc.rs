//! The value log's garbage collector, on its own thread.
//!
//! Each pass first takes a census of one segment whose live bytes are unknown (those found at
//! open), then collects the segment with the most garbage, if at least
//! [`super::FjallOptions::gc_garbage_ratio`] of it is: it reads the segment in order, asks the
//! index whether each record is still the one its key points to, copies the live ones to a
//! segment of its own, syncs that, and moves their pointers under the writer's apply lock, each
//! only if it still points where it did (a client's write since wins). Once every move is
//! durable, and proven so (`Store::persist_proven`), the segment is deleted. Copies are paced
//! to [`super::FjallOptions::gc_bytes_per_sec`]; segments that hold nothing live cost no copy.
//!
//! The segment figures only choose what to collect; what is live is always the index's answer,
//! so a figure that is off costs work, never data.

use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::{Condvar, Mutex};

use super::store::Store;
use super::Shared;
use crate::record::{self, Placement};
use crate::value_log::{Appender, Pointer, Reading, ValueLog};
use crate::{Error, Meta, Result};

/// How often the collector looks for work when nothing wakes it.
const PASS_INTERVAL: Duration = Duration::from_millis(500);
/// Copied bytes whose pointers are moved in one commit.
const MOVE_BATCH_BYTES: u64 = 8 * 1024 * 1024;

/// The collector's controls, shared with the engine.
#[derive(Default)]
pub(super) struct Control {
    stopping: Mutex<bool>,
    wake: Condvar,
    /// One collection at a time: the collector's passes and MEDIAOPTIMIZE's.
    collecting: Mutex<CollectorState>,
}

/// What a collection keeps between passes.
#[derive(Default)]
pub(super) struct CollectorState {
    /// The segment copies go to.
    appender: Option<Appender>,
}

impl Control {
    /// Stops the collector thread at its next look (a collection in progress ends early).
    pub(super) fn stop(&self) {
        *self.stopping.lock() = true;
        self.wake.notify_all();
    }

    fn stopping(&self) -> bool {
        *self.stopping.lock()
    }

    /// Sleeps up to `limit`; `true` once the collector should stop.
    fn pause(&self, limit: Duration) -> bool {
        let mut stopping = self.stopping.lock();
        if !*stopping {
            self.wake.wait_for(&mut stopping, limit);
        }
        *stopping
    }
}

/// The collector thread: a pass, then a pause, until the engine stops.
pub(super) fn run(shared: &Shared) {
    while !shared.gc.pause(PASS_INTERVAL) {
        let Ok(store) = shared.store() else { continue };
        if store.stopped().is_err() || shared.halted.lock().is_some() {
            continue;
        }
        let mut state = shared.gc.collecting.lock();
        if let Err(e) = pass(shared, &store, &mut state) {
            tracing::warn!("value log garbage collection: {e}");
        }
    }
}

/// One census, then one collection if a segment qualifies.
fn pass(shared: &Shared, store: &Store, state: &mut CollectorState) -> Result<()> {
    let own = own_segment(&store.log, state);
    if let Some(id) = store.log.uncensused(&own) {
        census(store, id)?;
    }
    let rate = shared.options.gc_bytes_per_sec;
    let mut pace = Pace::new(rate);
    // Without a copy budget only segments nothing lives in are taken.
    let victim = store.log.victims(shared.options.gc_garbage_ratio, &own).into_iter().find(|id| rate > 0 || store.log.segment(*id).is_some_and(|f| f.live == 0));
    if let Some(victim) = victim {
        collect(shared, store, state, victim, &mut pace)?;
    }
    Ok(())
}

/// The collector's own segment, which it never collects; dropped if an erase came since.
fn own_segment(log: &ValueLog, state: &mut CollectorState) -> Vec<u32> {
    if state.appender.as_ref().is_some_and(|a| log.is_stale(a)) {
        state.appender = None;
    }
    state.appender.as_ref().map(Appender::id).into_iter().collect()
}

/// MEDIAOPTIMIZE: seals the writer's segment, takes a new census of every segment, and collects
/// every one that holds garbage, unpaced (the operator asked for it now).
pub(super) fn collect_all(shared: &Shared, store: &Store) -> Result<()> {
    let mut state = shared.gc.collecting.lock();
    {
        // Sealed between requests, never between a request's append and its record's commit
        // (the writer holds this lock across both): a census of the sealed segment then sees
        // every pointer into it, where it could take a value whose pointer was still to come
        // for garbage and the segment's removal would leave that pointer dangling.
        let _deciding = store.apply_lock.lock();
        store.log.seal_active()?;
    }
    // What the collector has copied so far becomes collectable too.
    if let Some(mut own) = state.appender.take() {
        store.log.flush(&mut own)?;
    }
    store.log.forget_census();
    while let Some(id) = store.log.uncensused(&[]) {
        census(store, id)?;
    }
    let mut pace = Pace::new(0);
    for victim in store.log.victims(0.0, &[]) {
        let own = own_segment(&store.log, &mut state);
        if own.contains(&victim) {
            continue;
        }
        match collect(shared, store, &mut state, victim, &mut pace) {
            // A damaged segment is kept (and reported); the others are still collected.
            Err(Error::Corrupt { detail, .. }) => tracing::error!("{detail}"),
            other => other?,
        }
    }
    Ok(())
}

/// The metadata of `key` if the index points it at `at`.
fn pointed_at(store: &Store, key: &[u8], at: Pointer) -> Result<Option<Meta>> {
    let Some(raw) = store.meta.get(key)? else { return Ok(None) };
    Ok(match record::decode(raw.into())? {
        (meta, Placement::Logged(p)) if p == at => Some(meta),
        _ => None,
    })
}

/// Counts the live bytes of segment `id` by asking the index about each record.
fn census(store: &Store, id: u32) -> Result<()> {
    let Some(mut scan) = store.log.scan(id, Reading::Heads)? else { return Ok(()) };
    let mut live = 0;
    while let Some(record) = scan.next_record()? {
        if pointed_at(store, &record.key, Pointer { segment: id, offset: record.offset })?.is_some() {
            live += record.head.record_len();
        }
        scan.skip(&record)?;
    }
    if scan.damaged {
        tracing::error!("value log segment {id} is damaged; its damaged values answer PERM_DATA_ERROR and it is not collected");
    }
    store.log.set_census(id, live, scan.damaged);
    Ok(())
}

/// A copied record waiting for its pointer to move.
struct Move {
    key: Bytes,
    from: Pointer,
    to: Pointer,
    record_len: u64,
}

/// Copies the live records of segment `victim` to the collector's segment, moves their
/// pointers, and deletes the segment once the moves are durable.
fn collect(shared: &Shared, store: &Store, state: &mut CollectorState, victim: u32, pace: &mut Pace) -> Result<()> {
    let Some(mut scan) = store.log.scan(victim, Reading::Values)? else { return Ok(()) };
    let erases = store.log.erases();
    let mut moves = Vec::new();
    let mut pending = 0;
    while let Some(record) = scan.next_record()? {
        if shared.gc.stopping() {
            return Ok(());
        }
        let from = Pointer { segment: victim, offset: record.offset };
        if pointed_at(store, &record.key, from)?.is_none() {
            scan.skip(&record)?;
            continue;
        }
        let Some(value) = scan.value(&record)? else { break };
        if pace.take(&shared.gc, record.head.record_len()) {
            // Stopping: what was copied is garbage until a later census, as after a crash.
            return Ok(());
        }
        let to = store.log.append(&mut state.appender, &record.key, &value, record.head.value_crc)?;
        pending += record.head.record_len();
        moves.push(Move { key: record.key, from, to, record_len: record.head.record_len() });
        if pending >= MOVE_BATCH_BYTES {
            if !move_pointers(store, state, std::mem::take(&mut moves), erases)? {
                return Ok(());
            }
            pending = 0;
        }
    }
    if scan.damaged {
        // What was copied stays copied; the damaged rest stays where it is.
        move_pointers(store, state, moves, erases)?;
        store.log.set_census(victim, u64::MAX, true);
        return Err(Error::corrupt(format!("value log segment {victim} is damaged; it is kept, and not collected")));
    }
    if !move_pointers(store, state, moves, erases)? {
        return Ok(());
    }
    // Every record that pointed here now points elsewhere, durably, and the journal's claim
    // of it is durable too: nothing recovery reads can name this segment any more.
    store.persist_proven()?;
    store.log.remove(victim)?;
    tracing::debug!("value log segment {victim} collected");
    Ok(())
}

/// Makes the copies durable, then moves each pointer that still points where it was copied
/// from. `false` if an erase came since the collection began (nothing is moved: the copies
/// are gone with everything else).
fn move_pointers(store: &Store, state: &mut CollectorState, moves: Vec<Move>, erases: u64) -> Result<bool> {
    if moves.is_empty() {
        return Ok(store.log.erases() == erases);
    }
    if let Some(appender) = state.appender.as_mut() {
        store.log.flush(appender)?;
    }
    store.log.sync()?;
    let _deciding = store.apply_lock.lock();
    if store.log.erases() != erases {
        return Ok(false);
    }
    let mut batch = store.db.batch();
    let mut moved = Vec::new();
    for m in moves {
        match pointed_at(store, &m.key, m.from)? {
            Some(meta) => {
                batch.insert(&store.meta, m.key.clone(), record::encode_logged(&meta, m.to)?);
                moved.push(m);
            }
            // Written or deleted since it was copied: the copy is garbage.
            None => store.log.garbage(m.to, m.record_len),
        }
    }
    if !batch.is_empty() {
        batch.commit()?;
    }
    for m in moved {
        store.log.relocated(m.from, m.record_len);
    }
    Ok(true)
}

/// Paces copies to a byte rate (0: unpaced).
struct Pace {
    per_sec: u64,
    started: Instant,
    taken: u64,
}

impl Pace {
    fn new(per_sec: u64) -> Self {
        Pace { per_sec, started: Instant::now(), taken: 0 }
    }

    /// Waits until `bytes` more are within the rate, on `control`'s signal so that stopping
    /// the engine cuts the wait short; `true` if the collector should stop.
    fn take(&mut self, control: &Control, bytes: u64) -> bool {
        self.taken += bytes;
        if self.per_sec == 0 {
            return control.stopping();
        }
        let due = Duration::from_secs_f64(self.taken as f64 / self.per_sec as f64);
        match due.checked_sub(self.started.elapsed()) {
            Some(wait) => control.pause(wait),
            None => control.stopping(),
        }
    }
}
