//! A run from start to end: the bucket, the random pool, the prepared set (untimed), the
//! timed phase and its CPU, the totals, and the cleanup.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use rand::{RngCore, SeedableRng};

use super::bulk::{cleanup, on_connections};
use super::client::{S3Conn, S3Signer};
use super::cpu::servers_cpu;
use super::recorder::Recorder;
use super::results::{OpStats, Quantiles, S3BenchResult, MIB, SCHEMA_VERSION};
use super::spec::{Kind, S3BenchError, S3BenchSpec, S3Op};
use super::workers::{note_error, worker, Shared};
use crate::paper::Machine;

/// Distinct-content slack: object n starts at a random offset below this in the random pool,
/// so no two objects need be byte-identical (no server gets to deduplicate).
const DATA_SLACK_BYTES: usize = 1 << 20;

/// A run's key prefix: fresh for every run (seed and clock), so runs never meet.
fn run_prefix(seed: u64) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ nanos);
    format!("spindle-bench/{:016x}", rng.next_u64())
}

/// Runs the benchmark `spec` describes.
pub async fn run(spec: S3BenchSpec) -> Result<S3BenchResult, S3BenchError> {
    spec.validate()?;
    let signer = S3Signer::new(&spec.target)?;
    S3Conn::new(signer.clone()).create_bucket().await?;
    let prefix = spec.prefix.clone().unwrap_or_else(|| run_prefix(spec.seed));
    let mut data = vec![0u8; spec.object_bytes as usize + DATA_SLACK_BYTES];
    rand::rngs::StdRng::seed_from_u64(spec.seed ^ 0x0b1e_c7da).fill_bytes(&mut data);
    let shared = Arc::new(Shared { signer: signer.clone(), spec: spec.clone(), data: Bytes::from(data), prefix: prefix.clone(), pool: Mutex::new(Vec::new()) });

    // The prepared set, uploaded before the clock starts.
    let mut prepare = None;
    if spec.op != S3Op::Put && spec.prepared {
        *shared.pool.lock() = (0..spec.prepared_objects()).map(|i| format!("{prefix}/obj/{i:09}")).collect();
    } else if spec.op != S3Op::Put {
        let count = spec.prepared_objects();
        let keys: Arc<Vec<String>> = Arc::new((0..count).map(|i| format!("{prefix}/obj/{i:09}")).collect());
        let started = Instant::now();
        let (s, k) = (shared.clone(), keys.clone());
        let parts = on_connections(&signer, count, spec.concurrency, move |i, mut conn| {
            let (s, k) = (s.clone(), k.clone());
            async move {
                let mut rng = rand::rngs::StdRng::seed_from_u64(s.spec.seed.wrapping_add(i));
                let r = conn.upload(&k[i as usize], s.body(&mut rng), s.spec.multipart_bytes).await;
                (conn, r)
            }
        })
        .await;
        let seconds = started.elapsed().as_secs_f64();
        let failed: u64 = parts.iter().map(|p| p.1).sum();
        if failed > 0 {
            let first = parts.iter().find_map(|p| p.2.first().cloned()).unwrap_or_default();
            // Leave nothing behind: the keys that did go up are deleted.
            cleanup(&signer, keys.to_vec(), spec.concurrency).await;
            return Err(S3BenchError::Prepare { failed, total: count, first });
        }
        let mut rec = Recorder::new();
        rec.objects = count;
        rec.bytes = count * spec.object_bytes;
        let mut stats = rec.stats(Kind::Put, seconds, 0);
        stats.latency_ms = Quantiles::default();
        prepare = Some(stats);
        *shared.pool.lock() = keys.to_vec();
    }

    // The timed phase.
    let cpu_before = (!spec.server_pids.is_empty()).then(|| servers_cpu(&spec.server_pids));
    let bench_cpu_before = crate::process_cpu_seconds();
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(spec.duration_seconds);
    let tasks: Vec<_> = (0..spec.concurrency).map(|id| tokio::spawn(worker(shared.clone(), id, start, deadline))).collect();
    let mut recorders: Vec<Recorder> = Kind::ALL.iter().map(|_| Recorder::new()).collect();
    let mut created = Vec::new();
    let mut samples = Vec::new();
    for t in tasks {
        match t.await {
            Ok(out) => {
                for (mine, theirs) in recorders.iter_mut().zip(out.recorders) {
                    mine.merge(theirs);
                }
                created.extend(out.created);
                for s in out.samples {
                    note_error(&mut samples, &s);
                }
            }
            Err(e) => note_error(&mut samples, &e),
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    let bench_cpu_seconds = (crate::process_cpu_seconds() - bench_cpu_before).max(0.0);
    let cpu_after = (!spec.server_pids.is_empty()).then(|| servers_cpu(&spec.server_pids));
    let (server_cpu_each, server_cpu_note) = match (cpu_before, cpu_after) {
        (Some(Ok(a)), Some(Ok(b))) => (a.iter().zip(&b).map(|(a, b)| (b - a).max(0.0)).collect(), None),
        (Some(Err(e)), _) | (_, Some(Err(e))) => (Vec::new(), Some(e)),
        _ => (Vec::new(), None),
    };
    let server_cpu_seconds = (!server_cpu_each.is_empty()).then(|| server_cpu_each.iter().sum::<f64>());

    let whole_windows = spec.duration_seconds.floor() as usize;
    let operations: Vec<OpStats> = Kind::ALL
        .iter()
        .zip(&recorders)
        .filter(|(k, r)| r.objects + r.errors > 0 || (spec.op != S3Op::Mixed && **k == expected_kind(spec.op)))
        .map(|(k, r)| r.stats(*k, seconds, whole_windows))
        .collect();
    let bytes: u64 = recorders.iter().map(|r| r.bytes).sum();
    let objects: u64 = recorders.iter().map(|r| r.objects).sum();
    let errors: u64 = recorders.iter().map(|r| r.errors).sum();
    let mib = bytes as f64 / MIB;

    let (mut cleanup_deleted, mut cleanup_errors) = (0, 0);
    if spec.cleanup {
        let mut keys = created;
        if spec.op != S3Op::Put {
            // The pool holds the prepared keys still there and the mixed workload's new ones.
            keys = std::mem::take(&mut *shared.pool.lock());
        }
        (cleanup_deleted, cleanup_errors) = cleanup(&signer, keys, spec.concurrency).await;
    }

    Ok(S3BenchResult {
        schema_version: SCHEMA_VERSION,
        kind: "s3",
        machine: Machine::this(),
        prefix,
        seconds,
        operations,
        mib_per_second: mib / seconds.max(1e-9),
        objects_per_second: objects as f64 / seconds.max(1e-9),
        errors,
        prepare,
        server_cpu_seconds,
        server_cpu_seconds_per_mib: server_cpu_seconds.and_then(|c| (mib > 0.0).then(|| c / mib)),
        server_cpu_seconds_each: server_cpu_each,
        server_cpu_note,
        bench_cpu_seconds,
        error_samples: samples,
        cleanup_deleted,
        cleanup_errors,
        spec,
    })
}

fn expected_kind(op: S3Op) -> Kind {
    match op {
        S3Op::Put | S3Op::Mixed => Kind::Put,
        S3Op::Get => Kind::Get,
    }
}
