//! Gives memory the allocator no longer uses back to the operating system.
//!
//! glibc raises its mmap threshold after the first large buffers are freed, so later 1 MiB
//! values (read from sockets, queued for the engine, read back from blob files) come from its
//! heaps and stay resident after they are freed: rounds of 2,000 x 1 MiB puts and gets grew a
//! drive to 661, 841 and 1,051 MiB (`scripts/bench-memory.sh`). Pinning the threshold instead
//! (every large buffer a fresh mmap) cost 15 % of 1 MiB put and 35 % of 1 MiB get throughput in
//! page faults, and trimming every second cost puts 10-15 % the same way, so the trimmer only
//! trims while the process is resident above a soft limit: below it, freed buffers stay for
//! reuse.

use std::time::Duration;

/// How often the resident size is checked.
pub const TRIM_INTERVAL: Duration = Duration::from_secs(1);
/// Resident size above which freed memory is handed back.
pub const TRIM_ABOVE_BYTES: u64 = 512 * 1024 * 1024;

/// Starts the background trimmer (a no-op where the C library is not glibc). The thread
/// holds nothing and runs for the life of the process.
pub fn start() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        static STARTED: std::sync::Once = std::sync::Once::new();
        STARTED.call_once(|| {
            let _ = std::thread::Builder::new().name("spindle-trim".into()).spawn(|| loop {
                std::thread::sleep(TRIM_INTERVAL);
                if resident_bytes().is_some_and(|r| r > TRIM_ABOVE_BYTES) {
                    // SAFETY: malloc_trim only walks the allocator's own free lists; it has no
                    // preconditions and is safe to call from any thread at any time.
                    unsafe {
                        libc::malloc_trim(0);
                    }
                }
            });
        });
    }
}

/// This process's resident set size, from /proc/self/statm (pages).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok()?)
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    #[test]
    fn resident_size_is_read() {
        let held = vec![1u8; 64 << 20];
        let r = super::resident_bytes().expect("statm");
        assert!(r >= 64 << 20, "{r}");
        drop(held);
    }
}
