//! The lifecycle pass: every bucket with lifecycle rules walked, each object's current version
//! moved to the storage class its rules call for, or expired, and unfinished uploads past
//! their rule's age aborted.
//!
//! A transition copies each segment's bytes into new data in the class's pool, then swaps the
//! manifest by compare-and-swap, only if the object is still the version it read; the
//! version keeps its id, time, ETag and parts. The old data is released by the swap's commit
//! (an intent written before it), so the sweeper deletes it after the grace whatever happens;
//! a pass cut short by a crash leaves the new data to the sweeper (its intent is never
//! dropped without the swap) and the next pass starts the object again: nothing is lost, and
//! no object ever references two copies. The pass is paced: it acts on a few objects at once,
//! then rests as long as they took, so it takes at most half of what the gateway could give it.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use s3s::dto::StreamingBlob;
use s3s::{s3_error, S3ErrorCode, S3Result};
use tokio::time::Instant;

use crate::gateway::Gateway;
use crate::kv::Pages;
use crate::layout;
use crate::lifecycle::{self, Action, Rule};
use crate::objects::{Core, Own, PAGE};
use crate::records::{self, BucketRecord, Manifest, Owner, Segment, UploadRecord, Versioning};

/// Objects a pass acts on at once (each a copy, or a delete).
const ACTIONS_AT_ONCE: usize = 8;

/// How often the pass runs, and how long a lifecycle day lasts.
#[derive(Debug, Clone, Copy)]
pub struct LifecycleSettings {
    pub every: Duration,
    /// A day, as rules count them (shorter only where tests need days to pass quickly).
    pub day: Duration,
}

/// What the passes have done since the gateway started (its `/metrics`).
#[derive(Debug, Default)]
pub struct LifecycleStats {
    pub passes: AtomicU64,
    pub objects_seen: AtomicU64,
    pub transitioned: AtomicU64,
    pub transitioned_bytes: AtomicU64,
    pub expired: AtomicU64,
    pub uploads_aborted: AtomicU64,
    pub failures: AtomicU64,
    /// Unix ms when the last pass ended.
    pub last_pass_ms: AtomicU64,
}

/// The lifecycle counters as Prometheus metrics.
#[derive(Debug, Clone, Default)]
pub struct LifecycleMetrics(pub Arc<LifecycleStats>);

impl spindle_metrics::Collector for LifecycleMetrics {
    fn encode(&self, mut e: spindle_metrics::DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        use spindle_metrics::emit;
        let s = &self.0;
        let load = |a: &AtomicU64| a.load(Relaxed);
        emit::counter(&mut e, "spindle_s3_lifecycle_passes", "Lifecycle passes over every bucket.", load(&s.passes))?;
        emit::counter(&mut e, "spindle_s3_lifecycle_objects_seen", "Objects the lifecycle passes looked at.", load(&s.objects_seen))?;
        emit::counter(&mut e, "spindle_s3_lifecycle_transitioned", "Objects moved to another storage class by lifecycle rules.", load(&s.transitioned))?;
        emit::counter(&mut e, "spindle_s3_lifecycle_transitioned_bytes", "Bytes of the objects moved to another storage class.", load(&s.transitioned_bytes))?;
        emit::counter(&mut e, "spindle_s3_lifecycle_expired", "Objects expired by lifecycle rules.", load(&s.expired))?;
        emit::counter(&mut e, "spindle_s3_lifecycle_uploads_aborted", "Incomplete multipart uploads aborted by lifecycle rules.", load(&s.uploads_aborted))?;
        emit::counter(&mut e, "spindle_s3_lifecycle_failures", "Lifecycle actions (or passes) that failed and are tried again.", load(&s.failures))?;
        emit::gauge(&mut e, "spindle_s3_lifecycle_last_pass_seconds", "Unix time the last lifecycle pass ended.", load(&s.last_pass_ms) as f64 / 1000.0)?;
        Ok(())
    }
}

pub async fn lifecycle_forever(core: Arc<Core>, settings: LifecycleSettings, stats: Arc<LifecycleStats>) {
    loop {
        tokio::time::sleep(settings.every).await;
        if let Err(e) = pass(&core, settings.day.as_millis() as u64, &stats).await {
            stats.failures.fetch_add(1, Relaxed);
            tracing::warn!(error = %e, "lifecycle pass failed");
        }
        stats.passes.fetch_add(1, Relaxed);
        stats.last_pass_ms.store(records::now_ms(), Relaxed);
    }
}

/// One pass over every bucket.
pub async fn pass(core: &Arc<Core>, day_ms: u64, stats: &LifecycleStats) -> S3Result<()> {
    let mut buckets = Pages::new(layout::buckets(), PAGE);
    while let Some(keys) = buckets.next(&core.kv).await? {
        for k in keys {
            let Some(bucket) = layout::bucket_name(&k).map(str::to_owned) else { continue };
            let Some(stored) = core.kv.get(&k).await? else { continue };
            let record: BucketRecord = records::decode("bucket", &stored.value)?;
            let Some(rules) = record.lifecycle.filter(|r| !r.is_empty()) else { continue };
            objects(core, &bucket, &rules, record.versioning, day_ms, stats).await?;
            uploads(core, &bucket, &rules, day_ms, stats).await?;
        }
    }
    Ok(())
}

async fn objects(core: &Arc<Core>, bucket: &str, rules: &[Rule], versioning: Option<Versioning>, day_ms: u64, stats: &LifecycleStats) -> S3Result<()> {
    let prefix = layout::object_prefix(bucket);
    let range = (prefix.clone().freeze(), layout::last_under(prefix.clone()));
    let mut pages = Pages::new(range, PAGE);
    while let Some(keys) = pages.next(&core.kv).await? {
        let mut due = Vec::new();
        for k in keys {
            let Some(key) = k.strip_prefix(&prefix[..]).and_then(|n| std::str::from_utf8(n).ok()) else { continue };
            let Some(stored) = core.kv.get(&k).await? else { continue };
            let m = records::decode_manifest(&stored.value)?;
            stats.objects_seen.fetch_add(1, Relaxed);
            if m.delete_marker {
                continue;
            }
            if let Some(action) = lifecycle::due(rules, key, &m, records::now_ms(), day_ms) {
                due.push((key.to_owned(), m, action));
            }
        }
        // A few objects at once; then a rest as long as they took.
        for batch in due.chunks(ACTIONS_AT_ONCE) {
            let started = Instant::now();
            let acts = batch.iter().map(|(key, m, action)| async move {
                let done = match action {
                    Action::Expire => expire(core, bucket, key, m, versioning).await,
                    Action::Transition(class) => transition(core, bucket, key, m, class, stats).await,
                };
                (key, action, done)
            });
            for (key, action, done) in futures_util::future::join_all(acts).await {
                match done {
                    Ok(true) => {
                        let counter = if *action == Action::Expire { &stats.expired } else { &stats.transitioned };
                        counter.fetch_add(1, Relaxed);
                        tracing::info!(bucket, key, ?action, "lifecycle");
                    }
                    // Changed since it was read: the next pass looks at it again.
                    Ok(false) => {}
                    Err(e) => {
                        stats.failures.fetch_add(1, Relaxed);
                        tracing::warn!(bucket, key, ?action, error = %e, "lifecycle action failed; tried again next pass");
                    }
                }
            }
            tokio::time::sleep(started.elapsed()).await;
        }
    }
    Ok(())
}

/// Whether `old` is still the version a pass read as `m`.
fn unchanged(old: Option<&Manifest>, m: &Manifest) -> S3Result<()> {
    // The whole record: a tag or ACL changed since the pass read it is kept, not undone.
    match old {
        Some(o) if o == m => Ok(()),
        _ => Err(s3_error!(PreconditionFailed, "the object changed")),
    }
}

fn changed(e: &s3s::S3Error) -> bool {
    *e.code() == S3ErrorCode::PreconditionFailed
}

async fn expire(core: &Core, bucket: &str, key: &str, m: &Manifest, versioning: Option<Versioning>) -> S3Result<bool> {
    let check = |old: Option<&Manifest>| unchanged(old, m);
    let done = match versioning {
        None => core.remove(bucket, key, check, true).await.map(|_| ()),
        Some(v) => core.delete_versioned(bucket, key, v, check, true).await.map(|_| ()),
    };
    match done {
        Ok(()) => Ok(true),
        Err(e) if changed(&e) => Ok(false),
        Err(e) => Err(e),
    }
}

async fn transition(core: &Arc<Core>, bucket: &str, key: &str, m: &Manifest, class: &str, stats: &LifecycleStats) -> S3Result<bool> {
    let target = core.class_of(Some(class))?;
    let owner = Owner { bucket: bucket.to_owned(), key: key.to_owned(), part: None };
    let mut segments = Vec::with_capacity(m.segments.len());
    let mut own = Vec::with_capacity(m.segments.len());
    let mut at = 0;
    for s in &m.segments {
        let body = StreamingBlob::wrap(core.read(m.class.pool.clone(), vec![*s], 0, s.size).ready().await?);
        let copied = core.write_data(&owner, body, Default::default(), u64::MAX, target.pool.as_deref()).await;
        let written = match copied {
            Ok(w) if w.segment.size == s.size => w,
            Ok(w) => {
                forget(core, &owner, &own).await;
                core.discard(w.segment.data, &owner).await;
                return Err(s3_error!(InternalError, "segment at {at} read back {} bytes of {}", w.segment.size, s.size));
            }
            Err(e) => {
                forget(core, &owner, &own).await;
                return Err(e);
            }
        };
        at += s.size;
        segments.push(Segment { data: written.segment.data, size: written.segment.size, chunk: written.segment.chunk });
        own.push(Own { data: written.segment.data, owner: owner.clone(), intent: written.intent });
    }
    crash_point("transition-copied");
    let moved = Manifest { segments, class: target, ..m.clone() };
    let data: Vec<u128> = own.iter().map(|o| o.data).collect();
    // No versioning: the version is replaced in place (same id and time), its data released.
    match core.commit(bucket, key, &moved, |old| unchanged(old, m), own, None).await {
        Ok(_) => {
            crash_point("transition-swapped");
            stats.transitioned_bytes.fetch_add(m.size, Relaxed);
            Ok(true)
        }
        Err(e) => {
            // Only a swap refused (the object changed) surely did not take effect; any other
            // failure may have left it standing, so its data is left to the sweeper, which
            // deletes it only if no manifest references it.
            if changed(&e) {
                for d in data {
                    core.discard(d, &owner).await;
                }
                return Ok(false);
            }
            Err(e)
        }
    }
}

/// Deletes the copies a transition made before it failed.
async fn forget(core: &Core, owner: &Owner, own: &[Own]) {
    for o in own {
        core.discard(o.data, owner).await;
    }
}

async fn uploads(core: &Core, bucket: &str, rules: &[Rule], day_ms: u64, stats: &LifecycleStats) -> S3Result<()> {
    if rules.iter().all(|r| r.abort_uploads_after_days.is_none()) {
        return Ok(());
    }
    let prefix = layout::upload_prefix(bucket);
    let range = (prefix.clone().freeze(), layout::last_under(prefix.clone()));
    let mut pages = Pages::new(range, PAGE);
    while let Some(keys) = pages.next(&core.kv).await? {
        for k in keys {
            let Some((key, id)) = layout::upload_of(&prefix, &k) else { continue };
            let Some(stored) = core.kv.get(&k).await? else { continue };
            let record: UploadRecord = records::decode("upload", &stored.value)?;
            if record.completing.is_some() || !lifecycle::abort_due(rules, key, record.initiated_ms, records::now_ms(), day_ms) {
                continue;
            }
            match Gateway::abort(core, bucket, key, id, stored.version).await {
                Ok(()) => {
                    stats.uploads_aborted.fetch_add(1, Relaxed);
                    tracing::info!(bucket, key, upload = %layout::upload_id_text(id), "lifecycle: incomplete upload aborted");
                }
                Err(e) if *e.code() == S3ErrorCode::NoSuchUpload => {}
                Err(e) => {
                    stats.failures.fetch_add(1, Relaxed);
                    tracing::warn!(bucket, key, error = %e, "lifecycle: aborting an upload failed");
                }
            }
        }
    }
    Ok(())
}

/// Stops the gateway at a named step of a transition (`SPINDLE_GATEWAY_CRASH_AT`), for the
/// tests that cut a transition there.
fn crash_point(step: &str) {
    if std::env::var("SPINDLE_GATEWAY_CRASH_AT").is_ok_and(|s| s == step) {
        eprintln!("gateway: crashing at {step} (SPINDLE_GATEWAY_CRASH_AT)");
        std::process::abort();
    }
}
