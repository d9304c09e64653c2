//! Device mode: ACT's I/O against a file or block device opened with O_DIRECT (and O_DSYNC
//! unless disabled), so neither the page cache nor write-back hides the device. Small reads
//! of one record from service threads at random offsets aligned to the device's smallest
//! direct I/O; one thread of large-block reads and one of large-block writes (random data) at
//! random large-block-aligned offsets, at the rates derived from the write load.

use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use rand::{Rng, RngCore, SeedableRng};
use serde::Serialize;

use super::aligned::AlignedBuf;
use super::histogram::AtomicBuckets;
use super::rates::{device_read_bytes, Rates, Workload};
use super::run::{Op, StreamSpec};
use super::target_guard::{check_target, TargetKind};
use super::ActError;

/// ACT probes reads of 512, 1024, 2048 and 4096 bytes at offset 0 and takes the first that
/// works as the device's smallest direct I/O.
pub const MIN_OP_PROBE_BYTES: [u32; 4] = [512, 1024, 2048, 4096];
/// A device needs room for this many large blocks (random offsets over fewer would mostly
/// hit the same few blocks).
pub const LARGE_BLOCKS_MIN: u64 = 16;
/// Large-block writes copy their data from a random pool of this size.
pub const WRITE_POOL_BYTES: usize = 4 << 20;
/// Preparation writes this much per request (a whole number of large blocks).
pub const PREP_WRITE_BYTES: usize = 1 << 20;

#[derive(Debug, Clone)]
pub struct DeviceSpec {
    pub path: PathBuf,
    /// Create (or resize) a regular file of this many bytes first.
    pub create_bytes: Option<u64>,
    /// The user's confirmation that a block device may be overwritten.
    pub yes_destroy_data: bool,
    /// Open with O_DSYNC, as ACT does unless `disable-odsync`.
    pub odsync: bool,
    /// Threads issuing the small reads (ACT's service threads).
    pub service_threads: usize,
}

/// What was found on opening the device.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceInfo {
    pub path: PathBuf,
    pub kind: TargetKind,
    /// The part used: whole large blocks.
    pub bytes: u64,
    pub large_blocks: u64,
    pub min_op_bytes: u32,
    /// One small read: the stored record rounded up to `min_op_bytes`.
    pub read_bytes: u32,
    pub odsync: bool,
    pub service_threads: usize,
}

pub struct Device {
    file: File,
    pub info: DeviceInfo,
}

fn io(path: &Path, what: &str, e: std::io::Error) -> ActError {
    ActError::Io(format!("{}: {what}: {e}", path.display()))
}

impl Device {
    /// Checks the target, creates the file if asked, opens it for direct I/O and probes it.
    pub fn open(spec: &DeviceSpec, workload: &Workload) -> Result<Device, ActError> {
        let rates = workload.rates()?;
        if spec.service_threads == 0 {
            return Err(ActError::Config("at least one service thread".into()));
        }
        if let Some(bytes) = spec.create_bytes {
            create_file(&spec.path, bytes)?;
        }
        let kind = check_target(&spec.path, spec.yes_destroy_data)?;
        let flags = libc::O_DIRECT | if spec.odsync { libc::O_DSYNC } else { 0 };
        let mut file = OpenOptions::new().read(true).write(true).custom_flags(flags).open(&spec.path).map_err(|e| io(&spec.path, "open for direct I/O", e))?;
        let size = file.seek(SeekFrom::End(0)).map_err(|e| io(&spec.path, "size", e))?;
        let large = workload.large_block_bytes as u64;
        let large_blocks = size / large;
        if large_blocks < LARGE_BLOCKS_MIN {
            return Err(ActError::Config(format!(
                "{}: {size} B holds {large_blocks} large blocks of {large} B; the test needs at least {LARGE_BLOCKS_MIN} (use --size to make a file)",
                spec.path.display()
            )));
        }
        let min_op_bytes = probe_min_op(&file).ok_or_else(|| ActError::Io(format!("{}: direct reads of 512 to 4096 B all failed", spec.path.display())))?;
        let read_bytes = device_read_bytes(rates.stored_record_bytes, min_op_bytes);
        let info = DeviceInfo {
            path: spec.path.clone(),
            kind,
            bytes: large_blocks * large,
            large_blocks,
            min_op_bytes,
            read_bytes,
            odsync: spec.odsync,
            service_threads: spec.service_threads,
        };
        Ok(Device { file, info })
    }

    /// ACT's preparation: zero the device, then salt it with random data, in large sequential
    /// writes (without O_DSYNC; one fdatasync per pass). Afterwards every block has been
    /// written, so no read is served from a never-written (unallocated, trimmed) region.
    pub fn prep(&self, seed: u64, mut progress: impl FnMut(&str, u64, u64)) -> Result<f64, ActError> {
        let started = Instant::now();
        let path = &self.info.path;
        let file = OpenOptions::new().write(true).custom_flags(libc::O_DIRECT).open(path).map_err(|e| io(path, "open for preparation", e))?;
        let mut buf = AlignedBuf::new(PREP_WRITE_BYTES);
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        for pass in ["zero", "salt"] {
            let mut offset = 0u64;
            while offset < self.info.bytes {
                let n = (self.info.bytes - offset).min(PREP_WRITE_BYTES as u64) as usize;
                if pass == "salt" {
                    rng.fill_bytes(&mut buf[..n]);
                }
                file.write_all_at(&buf[..n], offset).map_err(|e| io(path, "preparation write", e))?;
                offset += n as u64;
                progress(pass, offset, self.info.bytes);
            }
            file.sync_data().map_err(|e| io(path, "preparation sync", e))?;
        }
        Ok(started.elapsed().as_secs_f64())
    }

    /// The three streams of one run: small reads, large-block reads, large-block writes.
    pub fn streams(self: &Arc<Self>, rates: &Rates, large_block_bytes: u32, seed: u64) -> Vec<StreamSpec> {
        let info = &self.info;
        let read_offsets = info.bytes / info.min_op_bytes as u64 - (info.read_bytes / info.min_op_bytes) as u64 + 1;
        let reads = Arc::new(AtomicBuckets::default());
        let lb_reads = Arc::new(AtomicBuckets::default());
        let lb_writes = Arc::new(AtomicBuckets::default());
        let worker_rng = |stream: u64, worker: u64| rand::rngs::StdRng::seed_from_u64(seed ^ (stream << 32 | worker).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let read_ops = (0..info.service_threads as u64)
            .map(|w| {
                let (dev, hist, mut rng) = (self.clone(), reads.clone(), worker_rng(1, w));
                let (mut buf, unit) = (AlignedBuf::new(info.read_bytes as usize), info.min_op_bytes as u64);
                Box::new(move |due: Instant| {
                    let offset = rng.random_range(0..read_offsets) * unit;
                    dev.read(&mut buf, offset)?;
                    hist.record(due.elapsed());
                    Ok(())
                }) as Op
            })
            .collect();
        let large_op = |stream: u64, write: bool, hist: Arc<AtomicBuckets>| {
            let (dev, mut rng, mut buf) = (self.clone(), worker_rng(stream, 0), AlignedBuf::new(large_block_bytes as usize));
            let blocks = info.large_blocks;
            // Random data without a random generator's cost inside the timed operation: each
            // block is a window of a random pool at a random offset.
            let mut pool = vec![0u8; WRITE_POOL_BYTES + large_block_bytes as usize];
            if write {
                rng.fill_bytes(&mut pool);
            }
            Box::new(move |due: Instant| {
                let offset = rng.random_range(0..blocks) * large_block_bytes as u64;
                if write {
                    let at = rng.random_range(0..WRITE_POOL_BYTES);
                    let n = buf.len();
                    buf.copy_from_slice(&pool[at..at + n]);
                    dev.write(&buf, offset)?;
                } else {
                    dev.read(&mut buf, offset)?;
                }
                hist.record(due.elapsed());
                Ok(())
            }) as Op
        };
        vec![
            StreamSpec { name: "reads", judged: true, rate: rates.internal_reads_per_sec, hist: reads, ops: read_ops },
            StreamSpec { name: "large-block-reads", judged: false, rate: rates.large_block_reads_per_sec, hist: lb_reads.clone(), ops: vec![large_op(2, false, lb_reads)] },
            StreamSpec { name: "large-block-writes", judged: false, rate: rates.large_block_writes_per_sec, hist: lb_writes.clone(), ops: vec![large_op(3, true, lb_writes)] },
        ]
    }

    fn read(&self, buf: &mut [u8], offset: u64) -> Result<(), String> {
        self.file.read_exact_at(buf, offset).map_err(|e| format!("{}: read of {} B at {offset}: {e}", self.info.path.display(), buf.len()))
    }

    fn write(&self, buf: &[u8], offset: u64) -> Result<(), String> {
        self.file.write_all_at(buf, offset).map_err(|e| format!("{}: write of {} B at {offset}: {e}", self.info.path.display(), buf.len()))
    }
}

/// Creates a regular file of `bytes` (or resizes an existing regular file), with its blocks
/// allocated up front so the test does not measure the filesystem allocating them.
fn create_file(path: &Path, bytes: u64) -> Result<(), ActError> {
    if let Ok(m) = std::fs::metadata(path) {
        if !m.is_file() {
            return Err(ActError::Refused(format!("{}: --size creates or resizes regular files only", path.display())));
        }
    }
    let file = OpenOptions::new().create(true).truncate(false).write(true).open(path).map_err(|e| io(path, "create", e))?;
    file.set_len(bytes).map_err(|e| io(path, "resize", e))?;
    let len = libc::off_t::try_from(bytes).map_err(|_| ActError::Config(format!("{bytes} B is too large a file")))?;
    // SAFETY: a plain system call on a file descriptor we own.
    #[allow(unsafe_code, reason = "posix_fallocate(3) has no safe wrapper in std")]
    let rc = unsafe { libc::posix_fallocate(std::os::fd::AsRawFd::as_raw_fd(&file), 0, len) };
    if rc != 0 {
        return Err(io(path, "allocate", std::io::Error::from_raw_os_error(rc)));
    }
    Ok(())
}

/// The smallest of [`MIN_OP_PROBE_BYTES`] that a direct read at offset 0 accepts.
fn probe_min_op(file: &File) -> Option<u32> {
    let mut buf = AlignedBuf::new(*MIN_OP_PROBE_BYTES.last()? as usize);
    MIN_OP_PROBE_BYTES.into_iter().find(|n| file.read_exact_at(&mut buf[..*n as usize], 0).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::act::run::{run, Timing};
    use std::time::Duration;

    fn spec(path: PathBuf, bytes: u64) -> DeviceSpec {
        DeviceSpec { path, create_bytes: Some(bytes), yes_destroy_data: false, odsync: false, service_threads: 2 }
    }

    #[test]
    fn a_file_is_created_probed_salted_and_read_at_acts_rates() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("device");
        let w = Workload::default();
        let dev = match Device::open(&spec(path.clone(), 4 << 20), &w) {
            Ok(d) => d,
            // A temporary directory on tmpfs has no O_DIRECT.
            Err(ActError::Io(e)) if e.contains("Invalid argument") => return eprintln!("no O_DIRECT here: skipped ({e})"),
            Err(e) => panic!("{e}"),
        };
        assert_eq!((dev.info.bytes, dev.info.large_blocks), (4 << 20, 32));
        assert!(MIN_OP_PROBE_BYTES.contains(&dev.info.min_op_bytes));
        assert_eq!(dev.info.read_bytes % dev.info.min_op_bytes, 0);
        assert!(dev.info.read_bytes >= 1536);
        dev.prep(7, |_, _, _| {}).unwrap();
        let data = std::fs::read(&path).unwrap();
        assert_eq!(data.len(), 4 << 20);
        let zeros = data.iter().filter(|b| **b == 0).count();
        assert!(zeros < data.len() / 100, "salted with random data: {zeros} zero bytes");
        // Half a second at 1x: 1000 reads, and the large-block streams at 23.5/s each.
        let dev = Arc::new(dev);
        let rates = w.rates().unwrap();
        let timing = Timing { duration: Duration::from_millis(500), slice: Duration::from_millis(250), max_lag: Some(Duration::from_secs(10)) };
        let out = run(dev.streams(&rates, w.large_block_bytes, 1), timing, || {}, |_| {});
        assert_eq!(out.stopped, None);
        let ops: Vec<u64> = out.totals.iter().map(|t| t.stats.ops).collect();
        assert_eq!(ops, vec![1000, 12, 12], "ceil(0.5 s x rate) operations per stream");
    }

    #[test]
    fn too_small_a_device_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let err = Device::open(&spec(dir.path().join("d"), 1 << 20), &Workload::default()).err().unwrap();
        assert!(matches!(err, ActError::Config(_) | ActError::Io(_)), "{err}");
    }
}
