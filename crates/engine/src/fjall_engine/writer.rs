//! The writer thread: takes the queued requests in groups, decides each against the store and
//! the group's earlier writes, commits the group as one fjall batch, syncs once for all that
//! need it, and answers.

use std::collections::HashMap;

use bytes::Bytes;
use fjall::PersistMode;

use super::healing::{erase_stopped, Healing};
use super::staging::{apply_staged, Staged};
use super::store::{Known, Store, FLUSH_WAIT_LIMIT};
use super::{Shared, MAX_GROUP_BYTES, MAX_GROUP_REQUESTS};
use crate::{Error, Result, WriteOp, WriteRequest};

/// The writer thread: groups queued requests, applies them, commits, syncs, answers.
pub(super) fn write_loop(shared: &Shared, queue: std::sync::mpsc::Receiver<Vec<WriteRequest>>) {
    let mut healing = Healing::default();
    while let Some(mut group) = next_submission(shared, &queue, &mut healing) {
        // Whole submissions join the group, so it may end a little over the limits.
        let mut bytes: usize = group.iter().map(|r| r.op.footprint()).sum();
        while group.len() < MAX_GROUP_REQUESTS && bytes < MAX_GROUP_BYTES {
            match queue.try_recv() {
                Ok(more) => {
                    bytes += more.iter().map(|r| r.op.footprint()).sum::<usize>();
                    group.extend(more);
                }
                Err(_) => break,
            }
        }
        match healing.store(shared) {
            Ok(store) => {
                store.wait_for_write_buffer();
                run_group(shared, &store, group);
            }
            Err(e) => refuse_group(shared, group, &e),
        }
    }
}

/// The next submission, or `None` once the queue is closed. While a full disk keeps the store
/// stopped, the writer also wakes on its own to try reopening it, so that reads come back even
/// if no write arrives.
pub(super) fn next_submission(
    shared: &Shared,
    queue: &std::sync::mpsc::Receiver<Vec<WriteRequest>>,
    healing: &mut Healing,
) -> Option<Vec<WriteRequest>> {
    loop {
        if !Healing::waiting(shared) {
            return queue.recv().ok();
        }
        match queue.recv_timeout(healing.retry_in()) {
            Ok(group) => return Some(group),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => drop(healing.store(shared)),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return None,
        }
    }
}

/// Answers a group the store cannot take now with `error`, except an erase: a full disk must
/// not keep a drive from being erased, the usual way to empty it. The requests before the
/// erase get `error`, the erase replaces the stopped store with an empty one, and the requests
/// after it go to that.
pub(super) fn refuse_group(shared: &Shared, mut group: Vec<WriteRequest>, error: &Error) {
    let erase_at = group.iter().position(|r| matches!(r.op, WriteOp::Erase { .. }));
    let Some(at) = erase_at.filter(|_| Healing::waiting(shared)) else {
        return fail_group(group, error);
    };
    let mut rest = group.split_off(at);
    let erase_request = rest.remove(0);
    fail_group(group, error);
    erase_request.finish(erase_stopped(shared));
    match shared.store() {
        Ok(store) => {
            store.wait_for_write_buffer();
            run_group(shared, &store, rest);
        }
        Err(e) => fail_group(rest, &e),
    }
}

/// Answers every request of `group` with `error`; nothing of it was applied.
pub(super) fn fail_group(group: Vec<WriteRequest>, error: &Error) {
    for request in group {
        request.finish(Err(error.clone()));
    }
}

/// Applies a group and answers it. A panic while applying it (a bug, or an assertion in fjall
/// meeting something the checks before it missed) must not leave requests unanswered, which
/// would hang their clients: every request not answered yet gets an error saying so, and the
/// store takes no more writes, since fjall's state after a panic in its write path is unknown.
pub(super) fn run_group(shared: &Shared, store: &Store, group: Vec<WriteRequest>) {
    let mut slots: Vec<Option<WriteRequest>> = group.into_iter().map(Some).collect();
    let applied = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| apply_group(store, &mut slots)));
    if let Err(panic) = applied {
        let error = Error::Stopped(format!(
            "the engine's writer failed ({}); the store takes no more writes: restart the drive",
            panic_message(&*panic)
        ));
        tracing::error!("{error}");
        *shared.halted.lock() = Some(error.clone());
        for request in slots.iter_mut().filter_map(Option::take) {
            // A callback that panics again must not keep the others from their answers.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| request.finish(Err(error.clone()))));
        }
    }
}

pub(super) fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic.downcast_ref::<&str>().copied().or_else(|| panic.downcast_ref::<String>().map(String::as_str)).unwrap_or("a panic")
}

/// Applies a group, with erases as barriers: the writes before an erase are committed first,
/// the erase runs alone, then the writes after it. A request's slot is emptied when it has
/// been answered.
pub(super) fn apply_group(store: &Store, slots: &mut [Option<WriteRequest>]) {
    let mut start = 0;
    for at in 0..slots.len() {
        let Some(WriteOp::Erase { secure }) = slots.get(at).and_then(Option::as_ref).map(|r| &r.op) else { continue };
        let secure = *secure;
        if let Some(before) = slots.get_mut(start..at).filter(|s| !s.is_empty()) {
            apply_writes(store, before);
        }
        let result = erase(store, secure);
        if let Some(request) = slots.get_mut(at).and_then(Option::take) {
            request.finish(result);
        }
        start = at + 1;
    }
    if let Some(rest) = slots.get_mut(start..).filter(|s| !s.is_empty()) {
        apply_writes(store, rest);
    }
}

pub(super) fn erase(store: &Store, secure: bool) -> Result<()> {
    let _deciding = store.apply_lock.lock();
    store.meta.clear()?;
    store.data.clear()?;
    // The cleared index durable (and proven so) before the values go: recovery must never
    // find an older record pointing to a segment that is gone.
    store.persist_proven()?;
    store.log.remove_all()?;
    if secure {
        // Flush what the journal holds into (empty) tables and compact, so fjall drops every
        // table and blob file that held the old data, and the old journals with them.
        store.flush_memtables(FLUSH_WAIT_LIMIT)?;
        for ks in [&store.meta, &store.data] {
            ks.major_compact()?;
        }
        store.db.persist(PersistMode::SyncAll)?;
    }
    Ok(())
}

pub(super) fn apply_writes(store: &Store, slots: &mut [Option<WriteRequest>]) {
    let deciding = store.apply_lock.lock();
    // What this group has already written, so later requests check against it.
    let mut written: HashMap<Bytes, Option<Known>> = HashMap::new();
    let mut batch = store.db.batch();
    let mut results: Vec<Result<()>> = Vec::with_capacity(slots.len());
    for slot in slots.iter() {
        let Some(request) = slot else {
            results.push(Ok(()));
            continue;
        };
        // Keys fjall would assert on are refused here, before they reach it.
        let staged = crate::limits::check_op(&request.op).and_then(|()| {
            let mut staged = Staged::new(store, &written);
            crate::rules::stage(&mut staged, &request.op).map(|()| staged.into_parts())
        });
        let result = staged.and_then(|parts| apply_staged(store, parts, &mut batch, &mut written));
        results.push(result);
    }
    if !batch.is_empty() {
        // Logged values are with the OS already (`apply_staged`), before their records.
        if let Err(e) = batch.commit().map_err(Error::from) {
            for r in results.iter_mut().filter(|r| r.is_ok()) {
                *r = Err(e.clone());
            }
        }
    }
    drop(deciding);
    let mut waiting = false;
    for (slot, result) in slots.iter_mut().zip(&results) {
        let Some(request) = slot else { continue };
        if let Some(applied) = request.on_applied.take() {
            applied(result.clone());
        }
        if request.sync {
            waiting = true;
        } else if let Some(request) = slot.take() {
            request.finish(result.clone());
        }
    }
    if waiting {
        // Runs even if a flush worker's full disk stopped the database since the commit: the
        // batch is in the journal and a reopening would recover it, so it is synced and
        // acknowledged rather than refused (vendored fjall, 0012).
        let synced = store.db.persist(PersistMode::SyncData).map_err(Error::from);
        store.counters.syncs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        for (slot, result) in slots.iter_mut().zip(results) {
            if let Some(request) = slot.take() {
                request.finish(result.and(synced.clone()));
            }
        }
    }
}
