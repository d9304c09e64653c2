//! The drive's `/metrics`: the answers counted on the request path (`metrics`) and the drive's
//! and engine's figures, read at each scrape. Served on `metrics_port` (config.rs).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use spindle_metrics::emit::{self, Labels};
use spindle_metrics::{Collector, DescriptorEncoder, Histogram};

use crate::metrics::request_name;
use crate::state::DriveState;

/// Reads a drive's figures at each scrape.
#[derive(Clone)]
pub struct DriveCollector(pub Arc<DriveState>);

impl std::fmt::Debug for DriveCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DriveCollector")
    }
}

impl Collector for DriveCollector {
    fn encode(&self, mut e: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let s = &self.0;
        let m = &s.metrics;
        let answers = m.answers();
        emit::counters(
            &mut e,
            "spindle_drive_requests",
            "Requests answered, by request type and status.",
            answers.iter().map(|&(t, st, n)| (vec![("type", t), ("status", st)], n)),
        )?;
        let seen: Vec<(usize, &Histogram)> = m.latency.iter().enumerate().filter(|(_, h)| h.count() > 0).collect();
        emit::histograms(
            &mut e,
            "spindle_drive_request_duration_seconds",
            "From a request's frame read to its answer handed to the socket (WRITETHROUGH puts include their sync).",
            seen.iter().map(|&(t, h)| (vec![("type", request_name(t))], h)),
        )?;
        let stats = s.stats.snapshot();
        emit::counters(
            &mut e,
            "spindle_drive_value_bytes",
            "Value bytes moved (put, read, pushed to peers), by request type.",
            stats.iter().filter(|(_, n, _)| *n > 0).map(|(t, _, bytes)| -> (Labels<'_>, u64) { (vec![("type", t.as_str_name())], *bytes) }),
        )?;
        emit::gauge(&mut e, "spindle_drive_open_connections", "Client connections open.", f64::from(s.open_connections.load(Ordering::Relaxed)))?;
        emit::gauge(
            &mut e,
            "spindle_drive_inflight_write_bytes",
            "Bytes of writes queued for the engine or being made durable (SERVICE_BUSY past max_inflight_write_bytes).",
            s.inflight_write_bytes.load(Ordering::Relaxed) as f64,
        )?;
        emit::gauge(&mut e, "spindle_drive_open_batches", "Batches open on all connections.", s.batch_slots.open() as f64)?;
        emit::gauge(&mut e, "spindle_drive_batched_operations", "Operations buffered in open batches.", s.batch_slots.buffered_operations() as f64)?;
        emit::counter(&mut e, "spindle_drive_disk_reads", "Reads that missed the cache and ran on a blocking thread.", s.reads_on_disk.load(Ordering::Relaxed))?;
        emit::gauge(&mut e, "spindle_drive_cluster_version", "The drive's cluster version (a cluster's epoch).", s.cluster_version() as f64)?;
        emit::gauge(&mut e, "spindle_drive_locked", "1 while the drive is locked by its PIN.", if s.locked.load(Ordering::Relaxed) { 1.0 } else { 0.0 })?;
        emit::gauge(&mut e, "spindle_drive_uptime_seconds", "Seconds since the drive started.", s.started.elapsed().as_secs_f64())?;
        let engine_bytes = s.engine.disk_usage();
        let capacity = s.capacity.report(|| engine_bytes);
        emit::gauge(&mut e, "spindle_drive_capacity_bytes", "Nominal capacity (the quota, or the filesystem's size).", capacity.nominal_bytes as f64)?;
        emit::gauge(&mut e, "spindle_drive_used_bytes", "Bytes used against the nominal capacity.", capacity.used_bytes as f64)?;
        emit::gauge(&mut e, "spindle_engine_disk_bytes", "Bytes the engine's files take (tables, journal, value log) plus its write buffers.", engine_bytes as f64)?;
        emit::gauge(&mut e, "spindle_engine_entries", "Approximate number of keys stored.", s.engine.approximate_len() as f64)?;
        emit::counter(&mut e, "spindle_engine_recoveries", "Times the engine reopened itself after a failed write.", s.engine.recoveries())?;
        if let Some(log) = s.engine.value_log() {
            emit::gauge(&mut e, "spindle_engine_value_log_segments", "Value log segment files.", log.segments as f64)?;
            emit::gauge(&mut e, "spindle_engine_value_log_disk_bytes", "Bytes in value log segments, garbage included.", log.disk_bytes as f64)?;
            emit::gauge(&mut e, "spindle_engine_value_log_live_bytes", "Bytes of value log records the index points to.", log.live_bytes as f64)?;
            emit::counter(&mut e, "spindle_engine_value_log_gc_copied_bytes", "Bytes garbage collection copied since start.", log.gc_bytes_copied)?;
            emit::counter(&mut e, "spindle_engine_value_log_gc_deleted_segments", "Segments garbage collection deleted since start.", log.gc_segments_deleted)?;
            emit::counter(&mut e, "spindle_engine_value_log_direct_reads", "Values read past the page cache (no longer cached) since start.", log.direct_reads)?;
        }
        Ok(())
    }
}

