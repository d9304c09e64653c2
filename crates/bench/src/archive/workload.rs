//! The two archival workloads against one or more drives:
//! - *sequential-write* (data migration): files written in file order, in migration batches of
//!   about `batch_bytes`; each batch ends with FLUSHALLDATA on every drive, inside the timed
//!   window, so a batch counts only once it is durable.
//! - *random-read* (retrieval): whole files, or fragments (byte ranges: the manifest and only
//!   the chunks holding the range), in a random order.
//!
//! Each workload runs `workers_per_drive x drives` tasks, each with one request outstanding,
//! over one pipelined connection per drive.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use serde::Serialize;
use spindle_client::{Client, PutOptions, Synchronization};
use tokio::sync::Semaphore;

use super::fileset::FileEntry;
use super::object::{Layout, ObjectError};
use super::placement::drive_for;

/// How a migration batch is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WriteMode {
    /// WRITEBACK puts, many in flight, FLUSHALLDATA at the end of each migration batch.
    Pipelined,
    /// Each file's puts grouped into Kinetic batches (START_BATCH .. END_BATCH), within the
    /// drive's operations-per-batch, bytes-per-batch and open-batches limits.
    KineticBatch,
}

/// A drive's batch limits (from GETLOG LIMITS, or the protocol's defaults when not reported).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct BatchLimits {
    pub operations: usize,
    pub bytes: usize,
    pub open_batches: usize,
}

impl Default for BatchLimits {
    fn default() -> Self {
        use spindle_proto::limits::*;
        BatchLimits { operations: MAX_OPERATION_COUNT_PER_BATCH as usize, bytes: MAX_BATCH_SIZE as usize, open_batches: MAX_BATCH_COUNT_PER_DEVICE as usize }
    }
}

/// The drives of one run.
#[derive(Clone)]
pub struct Drives {
    pub clients: Vec<Client>,
    pub limits: Vec<BatchLimits>,
    /// Per drive: permits for open Kinetic batches.
    open_batches: Vec<Arc<Semaphore>>,
}

impl Drives {
    pub fn new(clients: Vec<Client>, limits: Vec<BatchLimits>) -> Drives {
        let open_batches = limits.iter().map(|l| Arc::new(Semaphore::new(l.open_batches.max(1)))).collect();
        Drives { clients, limits, open_batches }
    }

    fn for_file(&self, layout: &Layout, file: u64) -> usize {
        drive_for(&layout.placement_key(file), self.clients.len())
    }
}

/// What one timed workload did.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct Measured {
    /// Files (or fragments) completed.
    pub files: u64,
    /// Payload bytes moved (file or fragment bytes; keys and manifests not counted).
    pub bytes: u64,
    /// Requests sent (chunks, manifests, flushes).
    pub requests: u64,
    pub seconds: f64,
    pub errors: u64,
    pub first_error: Option<String>,
}

impl Measured {
    pub fn mb_per_second(&self) -> f64 {
        self.bytes as f64 / self.seconds.max(1e-9) / 1e6
    }

    pub fn files_per_second(&self) -> f64 {
        self.files as f64 / self.seconds.max(1e-9)
    }

    pub(super) fn add(&mut self, other: Measured) {
        self.files += other.files;
        self.bytes += other.bytes;
        self.requests += other.requests;
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
    }

    pub(super) fn fail(&mut self, e: impl std::fmt::Display) {
        self.errors += 1;
        self.first_error.get_or_insert_with(|| e.to_string());
    }
}

/// One read: a whole file, or `len` bytes at `offset`.
#[derive(Debug, Clone, Copy)]
pub struct ReadPick {
    pub file: FileEntry,
    pub fragment: Option<(u64, u64)>,
}

/// Runs `work(item)` for every item on `workers` tasks, each taking the next item in order.
pub(super) async fn on_workers<T, F, Fut>(items: Vec<T>, workers: usize, work: F) -> Measured
where
    T: Send + Sync + 'static,
    F: Fn(Arc<Vec<T>>, usize) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Measured> + Send,
{
    let items = Arc::new(items);
    let next = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..workers.max(1))
        .map(|_| {
            let (items, next, work) = (items.clone(), next.clone(), work.clone());
            tokio::spawn(async move {
                let mut m = Measured::default();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                    if i >= items.len() {
                        return m;
                    }
                    m.add(work(items.clone(), i).await);
                }
            })
        })
        .collect();
    let mut total = Measured::default();
    for t in tasks {
        match t.await {
            Ok(m) => total.add(m),
            Err(e) => total.fail(e),
        }
    }
    total
}

/// Writes `files` in order, migration batch by migration batch; timed, flushes included.
pub async fn sequential_write(drives: &Drives, layout: &Layout, files: &[FileEntry], batch_bytes: u64, workers_per_drive: usize, mode: WriteMode) -> Measured {
    let started = Instant::now();
    let mut total = Measured::default();
    let mut rest = files;
    while !rest.is_empty() {
        // The next migration batch: files in order until it holds batch_bytes.
        let mut end = 0;
        let mut bytes = 0;
        while end < rest.len() && (end == 0 || bytes < batch_bytes) {
            bytes += rest[end].size;
            end += 1;
        }
        let (batch, after) = rest.split_at(end);
        rest = after;
        let (d, l) = (drives.clone(), layout.clone());
        let m = on_workers(batch.to_vec(), workers_per_drive * drives.clients.len(), move |items, i| {
            let (d, l) = (d.clone(), l.clone());
            async move { write_one(&d, &l, items[i], mode).await }
        })
        .await;
        total.add(m);
        for c in &drives.clients {
            total.requests += 1;
            if let Err(e) = c.flush_all_data().await {
                total.fail(e);
            }
        }
    }
    total.seconds = started.elapsed().as_secs_f64();
    total
}

async fn write_one(drives: &Drives, layout: &Layout, file: FileEntry, mode: WriteMode) -> Measured {
    let drive = drives.for_file(layout, file.id);
    let client = &drives.clients[drive];
    let mut m = Measured::default();
    let result = match mode {
        WriteMode::Pipelined => layout.write_file(client, file.id, file.size).await,
        WriteMode::KineticBatch => write_batched(client, drives.limits[drive], &drives.open_batches[drive], layout, file).await,
    };
    match result {
        Ok(requests) => {
            m.files = 1;
            m.bytes = file.size;
            m.requests = requests;
        }
        Err(e) => m.fail(format!("writing file {}: {e}", file.id)),
    }
    m
}

/// A file's chunks and manifest as Kinetic batches, each within the drive's limits; the
/// manifest goes in the last batch, so it is never visible before its chunks.
async fn write_batched(client: &Client, limits: BatchLimits, open: &Semaphore, layout: &Layout, file: FileEntry) -> Result<u64, ObjectError> {
    let m = layout.manifest(file.id, file.size);
    let mut ops: Vec<(Bytes, Bytes)> = (0..m.chunk_count).map(|j| (layout.chunk_key(file.id, j), layout.chunk(file.id, file.size, j))).collect();
    ops.push((layout.manifest_key(file.id), Bytes::copy_from_slice(&m.encode())));
    let mut requests = 0;
    let mut i = 0;
    while i < ops.len() {
        let mut end = i;
        let mut bytes = 0;
        while end < ops.len() && end - i < limits.operations.max(1) && (end == i || bytes + ops[end].1.len() <= limits.bytes) {
            bytes += ops[end].1.len();
            end += 1;
        }
        let _permit = open.acquire().await.map_err(|_| ObjectError::BatchPermitsClosed)?;
        let mut batch = client.start_batch().await?;
        for (key, value) in &ops[i..end] {
            batch.put(key, value.clone(), PutOptions::forced(Synchronization::Writeback))?;
        }
        batch.commit().await?;
        requests += (end - i) as u64 + 2;
        i = end;
    }
    Ok(requests)
}

/// Reads every pick in the given order; whole files are checked against their checksum,
/// fragments against the content they should hold.
pub async fn random_read(drives: &Drives, layout: &Layout, picks: Vec<ReadPick>, workers_per_drive: usize) -> Measured {
    let started = Instant::now();
    let (d, l) = (drives.clone(), layout.clone());
    let mut m = on_workers(picks, workers_per_drive * drives.clients.len(), move |items, i| {
        let (d, l) = (d.clone(), l.clone());
        async move {
            let pick = items[i];
            let client = &d.clients[d.for_file(&l, pick.file.id)];
            let mut m = Measured::default();
            let result = match pick.fragment {
                None => l.read_file(client, pick.file.id).await.map(|v| (v.len() as u64, 1 + u64::from(l.manifest_shape(pick.file.size).chunk_count))),
                Some((offset, len)) => match l.read_fragment(client, pick.file.id, offset, len).await {
                    Ok(v) if v == l.fragment(pick.file.id, pick.file.size, offset, len) => Ok((len, 1 + u64::from(l.manifest_shape(pick.file.size).chunks_for(offset, len).len() as u32))),
                    Ok(_) => Err(ObjectError::FragmentMismatch { file: pick.file.id, offset, len }),
                    Err(e) => Err(e),
                },
            };
            match result {
                Ok((bytes, requests)) => {
                    m.files = 1;
                    m.bytes = bytes;
                    m.requests = requests;
                }
                Err(e) => m.fail(format!("reading file {}: {e}", pick.file.id)),
            }
            m
        }
    })
    .await;
    m.seconds = started.elapsed().as_secs_f64();
    m
}

/// Deletes files (untimed clean-up between workloads) and flushes.
pub async fn delete_files(drives: &Drives, layout: &Layout, files: &[FileEntry], workers_per_drive: usize) -> Measured {
    let (d, l) = (drives.clone(), layout.clone());
    let mut m = on_workers(files.to_vec(), workers_per_drive * drives.clients.len(), move |items, i| {
        let (d, l) = (d.clone(), l.clone());
        async move {
            let f = items[i];
            let mut m = Measured::default();
            match l.delete_file(&d.clients[d.for_file(&l, f.id)], f.id, f.size).await {
                Ok(()) => m.files = 1,
                Err(e) => m.fail(e),
            }
            m
        }
    })
    .await;
    for c in &drives.clients {
        if let Err(e) = c.flush_all_data().await {
            m.fail(e);
        }
    }
    m
}
