//! Writers of one object queued at its swap (`Turns`, crates/s3/src/swap.rs) for longer than
//! the sweep grace, a sweeper sweeping all the while: a queued write is not a stalled upload.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use spindle_cluster::store::Stalls;

use crate::cases::{scripted_with_stalls, sweep_past_grace, PART, UPLOAD};
use crate::s3;

/// Writers of the one object: PUTs, then multipart uploads, which reach the queue later (their
/// parts go first) and so wait behind every PUT.
const QUEUED_PUTS: u64 = 8;
const QUEUED_COMPLETIONS: u64 = 2;
const QUEUED_WRITERS: u64 = QUEUED_PUTS + QUEUED_COMPLETIONS;
/// The longest a store write waits between its decision and its requests: a swap makes several
/// writes, so eight swaps in a row take many times the grace, while a refresh (a quarter grace
/// apart, and itself a write) still comes within the grace.
const WRITE_STALL: Duration = Duration::from_millis(400);
/// The sweeper's pace while the writers queue.
const SWEEP_EVERY: Duration = Duration::from_millis(200);

/// Ten writes of one object through one gateway, eight PUTs and two multipart uploads, its
/// store's every write stalled up to `WRITE_STALL`, a sweeper passing every `SWEEP_EVERY`: the
/// last in the queue waits for its turn many times the grace. Each refreshes its data's
/// intents while it waits (`Core::turn_for`), and a completion keeps its upload's mark fresh
/// from its claims to its swap (`MarkKeeper`), so the sweeper takes none for a stalled upload's
/// or a crashed completion's: every write succeeds,
/// the object reads as one of them, and once swept only its data is left, with no intent.
pub fn writers_queued_past_the_grace(seed: u64) -> Result<(), String> {
    let stalls = Stalls { decided: Some(WRITE_STALL), viewed: None };
    scripted_with_stalls(seed, stalls, |store, gateway, _disks| async move {
        let done = Arc::new(AtomicBool::new(false));
        let sweeper = {
            let (gateway, done) = (gateway.clone(), done.clone());
            tokio::spawn(async move {
                while !done.load(Ordering::Relaxed) {
                    gateway.sweep().await.map_err(|e| format!("sweep: {e}"))?;
                    tokio::time::sleep(SWEEP_EVERY).await;
                }
                Ok::<(), String>(())
            })
        };
        let started = tokio::time::Instant::now();
        let writers: Vec<_> = (1..=QUEUED_WRITERS)
            .map(|v| {
                let gateway = gateway.clone();
                // A completion's upload mark must stay fresh too while it waits, or the
                // sweeper's pass over the uploads takes it for a crashed completion's and aborts
                // the upload.
                tokio::spawn(async move {
                    let (what, done) = if v <= QUEUED_PUTS { ("PUT", s3::put_or_error(&gateway, 0, v).await) } else { ("completion", s3::put_in_parts_or_error(&gateway, 0, v).await) };
                    done.map_err(|e| format!("the {what} of {v} failed: {e}"))
                })
            })
            .collect();
        let mut failed = Vec::new();
        for w in writers {
            if let Err(e) = w.await.map_err(|e| format!("a writer: {e}"))? {
                failed.push(e);
            }
        }
        let took = started.elapsed();
        done.store(true, Ordering::Relaxed);
        sweeper.await.map_err(|e| format!("the sweeper: {e}"))??;
        if !failed.is_empty() {
            return Err(failed.join("; "));
        }
        // The case means something only if the queue outlasted the grace.
        if took < s3::GRACE * 2 {
            return Err(format!("the writes took {took:?}, not long enough to outlast the grace ({:?})", s3::GRACE));
        }
        match s3::get(&gateway, 0).await? {
            Some(Some(v)) if (1..=QUEUED_WRITERS).contains(&v) => {}
            other => return Err(format!("the object reads as {other:?}, not one of the writes")),
        }
        sweep_past_grace(&gateway).await?;
        let census = gateway.census().await.map_err(|e| format!("census: {e}"))?;
        if !census.missing().is_empty() || census.stored != census.referenced || !census.intents.is_empty() {
            return Err(format!("after the writes and the sweeps: {census:?}"));
        }
        // The completions' upload and part records are gone with them.
        for prefix in [UPLOAD, PART] {
            let end = [prefix, &[0xff; 8]].concat();
            let left = store.range(prefix, Some(&end), 100).await.map_err(|e| format!("listing records: {e}"))?;
            if !left.is_empty() {
                return Err(format!("{} records under {prefix:?} left after the completions", left.len()));
            }
        }
        Ok(())
    })
}
