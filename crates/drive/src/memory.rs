//! The drive's memory allocator, and giving memory it no longer uses back to the system.
//!
//! **jemalloc for small allocations.** Requests are decoded on the runtime threads and applied
//! by the engine's writer thread, so most small buffers are allocated on one thread and freed
//! on another. With glibc's malloc, `perf record` on the writer during 120 B puts put a third
//! of its time in `_int_malloc`, `malloc_consolidate` and `unlink_chunk`: its arenas handle
//! that pattern by walking and merging free lists. jemalloc's per-thread caches and size-class
//! slabs do not, and with it the same puts ran 13-26 % faster in four alternating rounds
//! (docs/performance.md); mimalloc, measured the same way, was no faster than glibc.
//!
//! **glibc for large ones.** jemalloc alone held far more memory after 1 MiB values: the
//! comparison run's peak went from 883 MiB to 1,564 MiB (it keeps freed extents for reuse,
//! and rounds 1 MiB plus a header up to its 1.25 MiB size class). Allocations of
//! [`LARGE_ALLOCATION_BYTES`] and more (values, frames and blob reads of large values) keep
//! going to glibc, whose behaviour with them is measured and bounded below. The `spindle`
//! binary installs [`Allocator`] as its global allocator; a program embedding the drive
//! chooses its own.
//!
//! **Trimming.** An allocator keeps freed memory for reuse. After large values that is a lot.
//! So [`start`] runs a thread that, while the process is resident above [`TRIM_ABOVE_BYTES`],
//! has both allocators return every unused page at once. Below that, freed buffers stay for
//! reuse: returning them early only moves the cost into page faults (pinning glibc's mmap
//! threshold cost 15 % of 1 MiB puts and 35 % of 1 MiB gets that way). jemalloc also returns
//! pages unused for [`DIRTY_DECAY_MS`] on its own background thread, not on a request's.
//!
//! **glibc's thresholds, fixed.** Left adaptive, glibc raises its mmap threshold to the size of
//! the largest block freed (so 1 MiB values come from its heaps) and its trim threshold to
//! twice that, so every heap top freed beyond 2 MiB went back to the kernel at once and came
//! back as page faults, zeroed page by page: serving 64 MiB objects through the S3 gateway,
//! faulting and zeroing pages was the largest cost after the socket copies in both the drive
//! and the gateway. [`configure_allocator`] fixes the mmap threshold at
//! [`MMAP_THRESHOLD_BYTES`] and the trim threshold at [`TRIM_THRESHOLD_BYTES`], leaving the
//! return of memory to the trimmer above.

// An allocator and the controls of two C allocators: unsafe by nature, each site with its SAFETY.
#![allow(unsafe_code, reason = "a global allocator and jemalloc/glibc controls have no safe interface")]

use std::time::Duration;

/// Allocations at least this large go to the system allocator, smaller ones to jemalloc.
pub const LARGE_ALLOCATION_BYTES: usize = 64 * 1024;

/// The allocator the `spindle` binary installs: jemalloc below [`LARGE_ALLOCATION_BYTES`],
/// the system allocator from there (only the system allocator where jemalloc does not build).
pub struct Allocator;
pub const ALLOCATOR: Allocator = Allocator;

#[cfg(not(target_env = "msvc"))]
use tikv_jemallocator::Jemalloc as Small;
#[cfg(target_env = "msvc")]
use std::alloc::System as Small;

use std::alloc::{GlobalAlloc, Layout, System};

fn is_large(size: usize) -> bool {
    size >= LARGE_ALLOCATION_BYTES
}

// SAFETY: every block is allocated and freed by the same allocator: Rust passes `dealloc` and
// `realloc` the layout the block was allocated (or last reallocated) with, and the size in it
// picks the allocator the same way each time. A `realloc` across the threshold allocates in
// the other allocator, copies and frees, as `GlobalAlloc::realloc`'s default does.
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { if is_large(layout.size()) { System.alloc(layout) } else { Small.alloc(layout) } }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { if is_large(layout.size()) { System.alloc_zeroed(layout) } else { Small.alloc_zeroed(layout) } }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from the allocator this size picks (see above).
        unsafe { if is_large(layout.size()) { System.dealloc(ptr, layout) } else { Small.dealloc(ptr, layout) } }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let (was_large, now_large) = (is_large(layout.size()), is_large(new_size));
        // SAFETY: within one allocator, forwarded with the caller's guarantees. Across them,
        // the new block is valid for `new_size` bytes with the old alignment (the caller
        // guarantees that layout is valid), the copy covers what both blocks hold, and the
        // old block is freed by the allocator it came from.
        unsafe {
            match (was_large, now_large) {
                (false, false) => Small.realloc(ptr, layout, new_size),
                (true, true) => System.realloc(ptr, layout, new_size),
                _ => {
                    let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
                    let new = self.alloc(new_layout);
                    if !new.is_null() {
                        std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                        self.dealloc(ptr, layout);
                    }
                    new
                }
            }
        }
    }
}

/// How often the resident size is checked: often enough that a stream of 1 MiB values cannot
/// pile up much above the limit between two checks.
pub const TRIM_INTERVAL: Duration = Duration::from_millis(250);
/// Resident size above which freed memory is handed back at once.
pub const TRIM_ABOVE_BYTES: u64 = 512 * 1024 * 1024;
/// How long jemalloc keeps freed pages before returning them on its own.
pub const DIRTY_DECAY_MS: isize = 2_000;
/// Allocations below this come from glibc's heaps, larger ones are mapped on their own: the
/// largest threshold glibc takes (half its 64 MiB heap), above every value, frame and chunk.
pub const MMAP_THRESHOLD_BYTES: usize = 32 * 1024 * 1024;
/// A free top of a glibc heap larger than this goes back to the kernel at once (one heap is
/// at most 64 MiB, so in practice only the trimmer returns memory, above its limit).
pub const TRIM_THRESHOLD_BYTES: usize = 128 * 1024 * 1024;

/// Configures the allocator and starts the background trimmer. The thread holds nothing and
/// runs for the life of the process; calling this again does nothing.
pub fn start() {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| {
        configure_allocator();
        let _ = std::thread::Builder::new().name("spindle-trim".into()).spawn(|| loop {
            std::thread::sleep(TRIM_INTERVAL);
            if resident_bytes().is_some_and(|r| r > TRIM_ABOVE_BYTES) {
                release_unused_memory();
            }
        });
    });
}

/// Decay on jemalloc's own thread: without it, jemalloc returns pages from whichever thread
/// happens to allocate, which here is a request's. glibc's thresholds fixed (module docs).
fn configure_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt takes an int for both parameters and may be called at any time; a value
    // it refuses leaves the parameter as it was.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES as libc::c_int);
        libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES as libc::c_int);
    }
    #[cfg(not(target_env = "msvc"))]
    // SAFETY: each control takes exactly the type written (ssize_t for the decay times, bool
    // for background_thread), and all may be set at any time.
    unsafe {
        // New arenas take the default; those already created are set one by one (the
        // all-arenas index is refused for decay times). An index with no arena yet refuses.
        jemalloc_ctl(c"arenas.dirty_decay_ms", Some(DIRTY_DECAY_MS));
        for arena in 0..jemalloc_arena_count() {
            if let Ok(name) = std::ffi::CString::new(format!("arena.{arena}.dirty_decay_ms")) {
                jemalloc_ctl(&name, Some(DIRTY_DECAY_MS));
            }
        }
        jemalloc_ctl(c"background_thread", Some(true));
    }
}

/// How many arena indices jemalloc has (`arenas.narenas`), 0 if it will not say.
#[cfg(not(target_env = "msvc"))]
fn jemalloc_arena_count() -> u32 {
    let mut count: u32 = 0;
    let mut len = size_of::<u32>();
    // SAFETY: arenas.narenas is an unsigned (u32) read-only control; `count` and `len`
    // outlive the call.
    let rc = unsafe {
        tikv_jemalloc_sys::mallctl(c"arenas.narenas".as_ptr(), (&mut count as *mut u32).cast(), &mut len, std::ptr::null_mut(), 0)
    };
    if rc == 0 { count } else { 0 }
}

/// Hands every page the allocators hold unused back to the system.
pub fn release_unused_memory() {
    #[cfg(not(target_env = "msvc"))]
    // SAFETY: the purge control takes no value in or out.
    unsafe {
        jemalloc_ctl::<()>(c"arena.4096.purge", None);
    }
    // Allocations of LARGE_ALLOCATION_BYTES and more live in glibc's heaps.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks glibc's own free lists; it has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Sets the jemalloc control `name` to `value`, or triggers it when it takes none. The
/// `arena.4096.` controls act on every arena where jemalloc allows it (4096 is
/// MALLCTL_ARENAS_ALL in jemalloc 5; purge takes it, decay times do not). A control jemalloc
/// refuses is left as it was.
///
/// # Safety
/// `T` must be the control's type.
#[cfg(not(target_env = "msvc"))]
unsafe fn jemalloc_ctl<T>(name: &std::ffi::CStr, mut value: Option<T>) {
    let (new, len) = match value.as_mut() {
        Some(v) => ((v as *mut T).cast(), size_of::<T>()),
        None => (std::ptr::null_mut(), 0),
    };
    // SAFETY: the caller guarantees `T`; `value` outlives the call.
    unsafe {
        tikv_jemalloc_sys::mallctl(name.as_ptr(), std::ptr::null_mut(), std::ptr::null_mut(), new, len);
    }
}

/// This process's resident set size, from /proc/self/statm (pages).
#[cfg(not(target_os = "linux"))]
pub fn resident_bytes() -> Option<u64> {
    None
}

/// This process's resident set size, from /proc/self/statm (pages).
#[cfg(target_os = "linux")]
pub fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok()?)
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #[test]
    fn resident_size_is_read() {
        // black_box: without it an optimised build drops the unused allocation.
        let held = std::hint::black_box(vec![1u8; 64 << 20]);
        let r = super::resident_bytes().expect("statm");
        assert!(r >= 64 << 20, "{r}");
        drop(held);
    }
}
