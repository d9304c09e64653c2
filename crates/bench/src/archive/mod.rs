//! `spindle bench archive`: archival-tier workloads after the envelope idea of Lee, O'Sullivan,
//! Walker et al. ("Robust benchmarking for archival storage tiers", PDSW'11): a file-size law
//! fitted to a file system's sizes, bootstrap envelopes giving a "more small files" and a "more
//! large files" workload beside the fitted one, filesets filling the target to chosen
//! capacity-utilisation levels, and per level a sequential-write (migration) and random-read
//! (retrieval) measurement. The papers' own parameters could not be found; everything here is
//! computed from the data the user supplies (or the shipped, synthetic illustrative histogram).

pub mod envelope;
pub mod fileset;
pub mod fit;
pub mod model;
pub mod object;
pub mod placement;
pub mod plot;
pub mod report;
pub mod s3;
pub mod workload;

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use spindle_client::{Client, ClientConfig, LogType};

use crate::paper::Machine;
use envelope::{Envelope, EnvelopeModels};
use fileset::FileSet;
use fit::{FitError, FitReport, SizeData};
use model::Family;
use object::{Layout, CHUNK_BYTES_MAX};
use workload::{BatchLimits, Drives, Measured, ReadPick, WriteMode};

use crate::s3::client::S3Endpoint;

/// What the workloads run against: Kinetic drives, or one S3 endpoint.
enum Target {
    Drives(Drives),
    // Boxed: the signer's TLS settings make it several times a drive list's size.
    S3(Box<s3::S3Files>),
}

impl Target {
    /// Bytes the target reports used (S3 does not say: 0).
    async fn used_bytes(&self, names: &[String]) -> Result<u64, ArchiveError> {
        match self {
            Target::Drives(d) => used_bytes(d, names).await,
            Target::S3(_) => Ok(0),
        }
    }

    async fn sequential_write(&self, layout: &Layout, files: &[fileset::FileEntry], spec: &ArchiveSpec) -> Measured {
        match self {
            Target::Drives(d) => workload::sequential_write(d, layout, files, spec.batch_bytes, spec.workers_per_drive, spec.write_mode).await,
            Target::S3(s) => s.sequential_write(layout, files, spec.workers_per_drive).await,
        }
    }

    async fn random_read(&self, layout: &Layout, picks: Vec<ReadPick>, spec: &ArchiveSpec) -> Measured {
        match self {
            Target::Drives(d) => workload::random_read(d, layout, picks, spec.workers_per_drive).await,
            Target::S3(s) => s.random_read(layout, picks, spec.workers_per_drive).await,
        }
    }

    async fn delete_files(&self, layout: &Layout, files: &[fileset::FileEntry], spec: &ArchiveSpec) -> Measured {
        match self {
            Target::Drives(d) => workload::delete_files(d, layout, files, spec.workers_per_drive).await,
            Target::S3(s) => s.delete_files(layout, files, spec.workers_per_drive).await,
        }
    }

    /// Asks the drives to compact deleted files away (an S3 server reclaims on its own).
    async fn reclaim(&self, layout: &Layout, names: &[String]) -> Result<(), ArchiveError> {
        let Target::Drives(drives) = self else { return Ok(()) };
        let (start, end) = layout.key_range();
        for (c, name) in drives.clients.iter().zip(names) {
            c.media_optimize(spindle_client::RangeQuery::inclusive(start.clone(), end.clone(), i32::MAX))
                .await
                .map_err(|source| ArchiveError::Drive { drive: name.clone(), source })?;
        }
        Ok(())
    }
}

/// Version of the result document's layout.
pub const SCHEMA_VERSION: u32 = 1;
/// The shipped illustrative model (synthetic; see the file's header for its origin).
pub const ILLUSTRATIVE_HISTOGRAM: &str = include_str!("../../data/archive-illustrative.hist");
/// No fileset grows past this many files, whatever the capacity (a guard against a model of
/// tiny files meeting a huge drive).
pub const FILES_PER_ENVELOPE_MAX: u64 = 10_000_000;
/// A file is at most this fraction (1/N) of the first level's fill of one drive.
const FIRST_LEVEL_FILES_MIN: u64 = 16;

#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error(transparent)]
    Fit(#[from] FitError),
    #[error("{drive}: {source}")]
    Drive { drive: String, source: spindle_client::ClientError },
    #[error("S3 target: {0}")]
    S3(#[from] crate::s3::client::S3Error),
    #[error("invalid archive benchmark: {0}")]
    Invalid(String),
}

#[derive(Debug, Clone, Serialize)]
pub struct ArchiveSpec {
    pub drives: Vec<String>,
    /// An S3 endpoint instead of drives: each file one object (`s3` module).
    pub s3: Option<S3Endpoint>,
    /// S3: files at or above this go up as multipart uploads in parts of this size (0: never).
    pub multipart_bytes: u64,
    /// Capacity-utilisation levels, as fractions of the total capacity, ascending.
    pub levels: Vec<f64>,
    /// Total capacity to fill; `None`: the sum of the drives' GETLOG CAPACITIES.
    pub capacity_bytes: Option<u64>,
    pub envelopes: Vec<Envelope>,
    /// Family the workloads use; `None`: the one with the lower AIC.
    pub family: Option<Family>,
    pub bootstrap_replicates: usize,
    pub seed: u64,
    pub max_file_bytes: u64,
    /// Bytes per migration batch (each ends with FLUSHALLDATA).
    pub batch_bytes: u64,
    pub write_mode: WriteMode,
    /// Tasks per drive, one request outstanding each.
    pub workers_per_drive: usize,
    /// Whole-file reads per level (each file at most once).
    pub file_reads: u64,
    pub fragment_reads: u64,
    pub fragment_bytes: u64,
    /// Drop the page cache before each read workload (root, local drives only).
    pub drop_caches: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct ModelSummary {
    pub source: String,
    pub files: u64,
    pub fits: FitReport,
    pub envelopes: EnvelopeModels,
    /// Mean file size of each envelope's law, bytes.
    pub mean_bytes: [f64; 3],
}

#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Row {
    pub envelope: Envelope,
    /// Target utilisation level (fraction of capacity).
    pub level: f64,
    /// "sequential-write", "random-read" (whole files) or "fragment-read".
    pub workload: String,
    /// Files (and bytes) the envelope's fileset holds after this level's writes.
    pub fileset_files: u64,
    pub fileset_bytes: u64,
    /// What the drives reported used after this level's writes (GETLOG CAPACITIES): file
    /// bytes plus the engine's own overhead.
    pub drive_used_bytes: u64,
    pub measured: Measured,
    pub mb_per_second: f64,
    pub files_per_second: f64,
    /// Whether the page cache was dropped before this workload.
    pub page_cache_dropped: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct EnvelopeUsage {
    pub envelope: Envelope,
    pub used_at_start_bytes: u64,
    pub used_after_cleanup_bytes: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ArchiveResults {
    pub schema_version: u32,
    pub kind: &'static str,
    pub machine: Machine,
    pub spec: ArchiveSpec,
    pub capacity_bytes: u64,
    /// "getlog" or "user".
    pub capacity_source: &'static str,
    /// Bytes the drives reported used before the run (GETLOG portion full).
    pub used_before_bytes: u64,
    /// Per envelope, what the drives reported used when it started (levels count these
    /// bytes: deleted files of an earlier envelope that the drive has not reclaimed yet take
    /// capacity too) and after its files were deleted and MEDIAOPTIMIZE ran.
    pub envelope_usage: Vec<EnvelopeUsage>,
    /// The largest file drawn: the spec's maximum, lowered to 1/16 of the first level's fill
    /// of one drive, so that no single tail file overshoots a level or unbalances the drives.
    pub max_file_bytes_effective: u64,
    pub model: ModelSummary,
    /// Why the page cache could not be dropped, when asked to.
    pub cache_note: Option<String>,
    /// Levels that could not be measured, and why.
    pub notes: Vec<String>,
    pub complete: bool,
    pub rows: Vec<Row>,
}

/// Fits both families to `data`, then bootstraps the chosen family's envelope.
pub fn build_model(source: &str, data: &SizeData, family: Option<Family>, replicates: usize, resample_files: Option<u64>, seed: u64) -> Result<ModelSummary, ArchiveError> {
    let fits = fit::fit_both(data)?;
    let family = family.unwrap_or(fits.preferred);
    let envelopes = envelope::bootstrap(data, fits.fit(family), replicates, resample_files, seed)?;
    let mean_bytes = Envelope::ALL.map(|e| envelopes.model(e).mean_bytes());
    Ok(ModelSummary { source: source.to_string(), files: data.files(), fits, envelopes, mean_bytes })
}

fn addr(target: &str) -> &str {
    target.trim_start_matches("kinetic://")
}

/// Connects to every drive and reads their capacity and batch limits.
async fn connect(spec: &ArchiveSpec) -> Result<(Drives, u64, u64), ArchiveError> {
    let mut clients = Vec::new();
    let mut limits = Vec::new();
    let mut capacity = 0u64;
    for d in &spec.drives {
        let drive_err = |source| ArchiveError::Drive { drive: d.clone(), source };
        let client = Client::connect(addr(d), ClientConfig::default()).await.map_err(drive_err)?;
        let log = client.get_log(&[LogType::Capacities, LogType::Limits]).await.map_err(drive_err)?;
        if let Some(c) = log.capacity {
            capacity += c.nominal_capacity_in_bytes.unwrap_or(0);
        }
        let default = BatchLimits::default();
        limits.push(log.limits.map_or(default, |l| BatchLimits {
            operations: l.max_operation_count_per_batch.map_or(default.operations, |v| v as usize),
            bytes: l.max_batch_size.map_or(default.bytes, |v| v as usize),
            open_batches: l.max_batch_count_per_device.map_or(default.open_batches, |v| v as usize),
        }));
        clients.push(client);
    }
    let drives = Drives::new(clients, limits);
    let used = used_bytes(&drives, &spec.drives).await?;
    Ok((drives, capacity, used))
}

/// Bytes the drives report used now (GETLOG CAPACITIES), summed.
async fn used_bytes(drives: &Drives, names: &[String]) -> Result<u64, ArchiveError> {
    let mut used = 0;
    for (c, name) in drives.clients.iter().zip(names) {
        let log = c.get_log(&[LogType::Capacities]).await.map_err(|source| ArchiveError::Drive { drive: name.clone(), source })?;
        if let Some(cap) = log.capacity {
            used += (cap.nominal_capacity_in_bytes.unwrap_or(0) as f64 * f64::from(cap.portion_full.unwrap_or(0.0)).clamp(0.0, 1.0)) as u64;
        }
    }
    Ok(used)
}

/// Whether the page cache can be dropped for these drives: root, and every drive on this
/// machine (loopback or localhost). Err: why not.
fn cache_drop_possible(drives: &[String]) -> Result<(), String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    #[allow(unsafe_code, reason = "geteuid(2) has no safe wrapper in std")]
    let euid = unsafe { libc::geteuid() };
    if euid != 0 {
        return Err("not running as root: /proc/sys/vm/drop_caches is not writable".into());
    }
    let local = |d: &String| {
        let host = addr(d).rsplit_once(':').map_or(addr(d), |(h, _)| h);
        host == "localhost" || host.trim_matches(['[', ']']).parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
    };
    if !drives.iter().all(local) {
        return Err("a drive is not on this machine: its page cache cannot be dropped from here".into());
    }
    Ok(())
}

fn drop_page_cache() -> Result<(), String> {
    // SAFETY: sync has no preconditions; it writes dirty pages so that dropping frees them.
    #[allow(unsafe_code, reason = "sync(2) has no safe wrapper in std")]
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3\n").map_err(|e| format!("/proc/sys/vm/drop_caches: {e}"))
}

/// Runs every envelope at every level; `progress` sees the results after every row.
pub async fn run(spec: ArchiveSpec, model: ModelSummary, mut progress: impl FnMut(&ArchiveResults)) -> Result<ArchiveResults, ArchiveError> {
    if (spec.drives.is_empty() && spec.s3.is_none()) || spec.levels.is_empty() || spec.envelopes.is_empty() {
        return Err(ArchiveError::Invalid("need at least one drive (or an S3 endpoint), one level and one envelope".into()));
    }
    if spec.s3.is_some() && (!spec.drives.is_empty() || spec.capacity_bytes.is_none() || spec.write_mode != WriteMode::Pipelined) {
        return Err(ArchiveError::Invalid("an S3 target takes no drives, needs --capacity-bytes (S3 does not report capacity) and writes objects, not Kinetic batches".into()));
    }
    if spec.levels.iter().any(|l| !(*l > 0.0 && *l <= 1.0)) || spec.levels.windows(2).any(|w| w[0] >= w[1]) {
        return Err(ArchiveError::Invalid("levels must be ascending fractions in (0, 1]".into()));
    }
    if spec.workers_per_drive == 0 || spec.max_file_bytes == 0 || spec.batch_bytes == 0 {
        return Err(ArchiveError::Invalid("workers per drive, maximum file size and batch bytes must be at least 1".into()));
    }
    let (store, reported, used_before) = match &spec.s3 {
        Some(endpoint) => (Target::S3(Box::new(s3::S3Files::connect(endpoint, spec.multipart_bytes).await?)), 0, 0),
        None => {
            let (drives, reported, used) = connect(&spec).await?;
            (Target::Drives(drives), reported, used)
        }
    };
    // Placement divides by the drive count; an S3 endpoint counts as one.
    let placement_units = spec.drives.len().max(1) as u64;
    let (capacity, capacity_source) = match spec.capacity_bytes {
        Some(c) => (c, "user"),
        None => (reported, "getlog"),
    };
    if capacity == 0 {
        return Err(ArchiveError::Invalid("the drives report no capacity: give --capacity-bytes".into()));
    }
    // Per drive: a tail file is a share of one drive's fill, the same whatever the drive count.
    let first_fill_per_drive = (capacity as f64 * spec.levels[0]) as u64 / placement_units;
    let max_file_bytes_effective = spec.max_file_bytes.min(first_fill_per_drive / FIRST_LEVEL_FILES_MIN).max(1);
    let cache_targets = match &spec.s3 {
        Some(e) => vec![e.endpoint.trim_start_matches("http://").trim_end_matches('/').to_string()],
        None => spec.drives.clone(),
    };
    let cache_check = if spec.drop_caches { cache_drop_possible(&cache_targets) } else { Err("not requested".into()) };
    let mut results = ArchiveResults {
        schema_version: SCHEMA_VERSION,
        kind: "archive",
        machine: Machine::this(),
        capacity_bytes: capacity,
        capacity_source,
        used_before_bytes: used_before,
        envelope_usage: Vec::new(),
        max_file_bytes_effective,
        model,
        cache_note: cache_check.as_ref().err().cloned(),
        notes: match &spec.s3 {
            Some(e) => vec![format!(
                "S3 target {} (bucket {}): each file one object, multipart from {} bytes; no flushes (a PUT is acknowledged once the server holds it), no barrier between migration batches; the space used is not known over S3, so 'drive used' reads 0",
                e.endpoint, e.bucket, spec.multipart_bytes
            )],
            None => Vec::new(),
        },
        complete: false,
        rows: Vec::new(),
        spec,
    };
    let spec = results.spec.clone();
    for (n, envelope) in spec.envelopes.iter().enumerate() {
        let law = *results.model.envelopes.model(*envelope);
        let run_id = spec.seed.wrapping_mul(31).wrapping_add(n as u64 + 1);
        let layout = Layout::new(run_id, spec.seed ^ 0x5eed, CHUNK_BYTES_MAX);
        let mut fileset = FileSet::new(law, spec.seed.wrapping_add(n as u64), max_file_bytes_effective);
        let mut rng = rand::rngs::StdRng::seed_from_u64(spec.seed.wrapping_add(1000 + n as u64));
        let used_at_start = if n == 0 { used_before } else { store.used_bytes(&spec.drives).await? };
        for level in &spec.levels {
            let target = ((capacity as f64 * level) as u64).saturating_sub(used_at_start);
            if target == 0 {
                results.notes.push(format!(
                    "{} envelope, level {:.0}%: the drives already report {} bytes used of {capacity}, nothing to write or read; deleted files of an earlier envelope are not reclaimed at once, so run each envelope on fresh drives (scripts/bench-archive.sh does)",
                    envelope.name(),
                    level * 100.0,
                    used_at_start
                ));
                progress(&results);
                continue;
            }
            let new = fileset.grow_to(target, FILES_PER_ENVELOPE_MAX).to_vec();
            // A level the fileset already passed writes nothing, so it has no write row.
            let write = if new.is_empty() { None } else { Some(store.sequential_write(&layout, &new, &spec).await) };
            let at = Point { envelope: *envelope, level: *level, fileset: &fileset, drive_used_bytes: store.used_bytes(&spec.drives).await? };
            if let Some(write) = write {
                push_row(&mut results, &mut progress, &at, "sequential-write", write, false);
            }

            // Whole files: a random sample without repetition, so no file is read twice.
            let mut order: Vec<_> = fileset.files.clone();
            order.shuffle(&mut rng);
            order.truncate(spec.file_reads as usize);
            let picks = order.into_iter().map(|file| ReadPick { file, fragment: None }).collect();
            let dropped = cache_check.is_ok() && drop_page_cache().is_ok();
            let read = store.random_read(&layout, picks, &spec).await;
            push_row(&mut results, &mut progress, &at, "random-read", read, dropped);

            // Fragments: random non-empty files, a random range of up to fragment_bytes each.
            let non_empty: Vec<_> = fileset.files.iter().filter(|f| f.size > 0).copied().collect();
            if !non_empty.is_empty() && spec.fragment_reads > 0 {
                let picks = (0..spec.fragment_reads)
                    .map(|_| {
                        let file = non_empty[rng.random_range(0..non_empty.len())];
                        let len = spec.fragment_bytes.clamp(1, file.size);
                        ReadPick { file, fragment: Some((rng.random_range(0..=file.size - len), len)) }
                    })
                    .collect();
                let dropped = cache_check.is_ok() && drop_page_cache().is_ok();
                let read = store.random_read(&layout, picks, &spec).await;
                push_row(&mut results, &mut progress, &at, "fragment-read", read, dropped);
            }
        }
        // Each envelope starts from the same, empty fileset.
        let cleanup = store.delete_files(&layout, &fileset.files, &spec).await;
        if let Some(e) = cleanup.first_error {
            return Err(ArchiveError::Invalid(format!("deleting the {} fileset: {e}", envelope.name())));
        }
        // Deleted values take space until the drive compacts them away: ask it to now.
        store.reclaim(&layout, &spec.drives).await?;
        let used_after_cleanup = store.used_bytes(&spec.drives).await?;
        results.envelope_usage.push(EnvelopeUsage { envelope: *envelope, used_at_start_bytes: used_at_start, used_after_cleanup_bytes: used_after_cleanup });
        progress(&results);
    }
    results.complete = true;
    Ok(results)
}

/// Where a row was measured: envelope, level, the fileset and the drives' used bytes then.
struct Point<'a> {
    envelope: Envelope,
    level: f64,
    fileset: &'a FileSet,
    drive_used_bytes: u64,
}

fn push_row(results: &mut ArchiveResults, progress: &mut impl FnMut(&ArchiveResults), at: &Point<'_>, workload: &'static str, measured: Measured, page_cache_dropped: bool) {
    let Point { envelope, level, fileset, drive_used_bytes } = *at;
    results.rows.push(Row {
        envelope,
        level,
        drive_used_bytes,
        workload: workload.to_string(),
        fileset_files: fileset.files.len() as u64,
        fileset_bytes: fileset.bytes,
        mb_per_second: measured.mb_per_second(),
        files_per_second: measured.files_per_second(),
        measured,
        page_cache_dropped,
    });
    progress(results);
}
