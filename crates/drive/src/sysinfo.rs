//! Real figures for GETLOG: utilisation of the machine's CPUs, of this process and of the disk
//! under the data directory (from /proc), and temperatures where the machine exposes sensors
//! (/sys/class/hwmon, /sys/class/thermal). Utilisations are averages over the last second.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

#[derive(Debug, Clone, Copy)]
struct Sample {
    at: Instant,
    cpu_busy: u64,
    cpu_total: u64,
    process_ticks: u64,
    disk_io_ms: Option<u64>,
}

pub struct SystemSampler {
    latest: Arc<Mutex<Vec<Utilization>>>,
}

/// How often the background thread refreshes the utilisations.
const SAMPLE_INTERVAL: Duration = Duration::from_secs(1);

/// One named utilisation in 0.0..=1.0.
#[derive(Debug, Clone, PartialEq)]
pub struct Utilization {
    pub name: &'static str,
    pub value: f32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Temperature {
    pub name: String,
    pub celsius: f32,
}

impl SystemSampler {
    /// Takes a first 100 ms reading, then refreshes every second on a background thread that
    /// ends with the sampler.
    pub fn new(data_dir: &Path) -> Self {
        let first = sample(data_dir);
        std::thread::sleep(Duration::from_millis(100));
        let mut previous = sample(data_dir);
        let latest = Arc::new(Mutex::new(utilizations_between(&first, &previous)));
        let weak = Arc::downgrade(&latest);
        let dir = data_dir.to_path_buf();
        let _ = std::thread::Builder::new().name("spindle-sysinfo".into()).spawn(move || loop {
            std::thread::sleep(SAMPLE_INTERVAL);
            let Some(latest) = weak.upgrade() else { return };
            let now = sample(&dir);
            *latest.lock() = utilizations_between(&previous, &now);
            previous = now;
        });
        SystemSampler { latest }
    }

    /// Averages over the last sampling interval.
    pub fn utilizations(&self) -> Vec<Utilization> {
        self.latest.lock().clone()
    }
}

fn utilizations_between(prev: &Sample, now: &Sample) -> Vec<Utilization> {
    let wall_ms = now.at.duration_since(prev.at).as_secs_f64() * 1000.0;
    let mut out = Vec::new();
    let total = now.cpu_total.saturating_sub(prev.cpu_total);
    let busy = if total > 0 { now.cpu_busy.saturating_sub(prev.cpu_busy) as f64 / total as f64 } else { 0.0 };
    out.push(Utilization { name: "CPU", value: busy.clamp(0.0, 1.0) as f32 });
    if wall_ms > 0.0 {
        let ticks_per_s = clock_ticks_per_second() as f64;
        let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1) as f64;
        let used_s = now.process_ticks.saturating_sub(prev.process_ticks) as f64 / ticks_per_s;
        out.push(Utilization { name: "SPINDLE_PROCESS", value: (used_s * 1000.0 / wall_ms / cpus).clamp(0.0, 1.0) as f32 });
        if let (Some(a), Some(b)) = (prev.disk_io_ms, now.disk_io_ms) {
            out.push(Utilization { name: "HDA", value: (b.saturating_sub(a) as f64 / wall_ms).clamp(0.0, 1.0) as f32 });
        }
    }
    out
}

fn sample(data_dir: &Path) -> Sample {
    let (cpu_busy, cpu_total) = read_proc_stat().unwrap_or((0, 0));
    Sample { at: Instant::now(), cpu_busy, cpu_total, process_ticks: read_process_ticks().unwrap_or(0), disk_io_ms: disk_io_ms(data_dir) }
}

/// (busy, total) jiffies over all CPUs from the first line of /proc/stat.
fn read_proc_stat() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let line = text.lines().next()?;
    let fields: Vec<u64> = line.split_whitespace().skip(1).filter_map(|f| f.parse().ok()).collect();
    if fields.len() < 5 {
        return None;
    }
    let total: u64 = fields.iter().take(8).sum();
    let idle = fields[3] + fields[4];
    Some((total - idle, total))
}

/// utime + stime of this process, in clock ticks.
fn read_process_ticks() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name may contain spaces; fields resume after the closing parenthesis.
    let rest = &text[text.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

fn clock_ticks_per_second() -> i64 {
    // SAFETY: sysconf has no preconditions.
    #[allow(unsafe_code, reason = "libc has no safe sysconf")]
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t
    } else {
        100
    }
}

/// Milliseconds the block device holding `path` has spent doing I/O (/proc/diskstats).
fn disk_io_ms(path: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(path).ok()?.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let text = std::fs::read_to_string("/proc/diskstats").ok()?;
    text.lines().find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() > 12 && f[0].parse::<u32>().ok()? == major && f[1].parse::<u32>().ok()? == minor {
            f[12].parse().ok()
        } else {
            None
        }
    })
}

/// Every temperature sensor the kernel exposes; empty when the machine (often a VM) has none.
pub fn temperatures() -> Vec<Temperature> {
    let mut out = Vec::new();
    if let Ok(dirs) = std::fs::read_dir("/sys/class/hwmon") {
        for dir in dirs.flatten() {
            let base = dir.path();
            let chip = std::fs::read_to_string(base.join("name")).unwrap_or_default().trim().to_string();
            let Ok(files) = std::fs::read_dir(&base) else { continue };
            for f in files.flatten() {
                let name = f.file_name().to_string_lossy().to_string();
                if let Some(stem) = name.strip_prefix("temp").and_then(|s| s.strip_suffix("_input")) {
                    let label = std::fs::read_to_string(base.join(format!("temp{stem}_label")))
                        .map(|l| l.trim().to_string())
                        .unwrap_or_else(|_| format!("temp{stem}"));
                    if let Some(c) = read_millidegrees(&f.path()) {
                        out.push(Temperature { name: format!("{chip}/{label}"), celsius: c });
                    }
                }
            }
        }
    }
    if out.is_empty() {
        if let Ok(zones) = std::fs::read_dir("/sys/class/thermal") {
            for z in zones.flatten() {
                let kind = std::fs::read_to_string(z.path().join("type")).unwrap_or_default().trim().to_string();
                if let Some(c) = read_millidegrees(&z.path().join("temp")) {
                    out.push(Temperature { name: kind, celsius: c });
                }
            }
        }
    }
    out
}

fn read_millidegrees(path: &Path) -> Option<f32> {
    let raw: i64 = std::fs::read_to_string(path).ok()?.trim().parse().ok()?;
    Some(raw as f32 / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utilizations_are_fractions() {
        let s = SystemSampler::new(&std::env::temp_dir());
        let u = s.utilizations();
        assert!(u.iter().any(|u| u.name == "CPU"), "{u:?}");
        assert!(u.iter().all(|u| (0.0..=1.0).contains(&u.value)), "{u:?}");
    }
}
