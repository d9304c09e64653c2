//! Reads past the page cache (O_DIRECT) of values it no longer holds: those of the part of a
//! segment dropped behind its writes (`sync`) and of segments found at open, read for the
//! first time. A value read a second time is read through the cache and so kept there (as 2Q
//! admits a page to its main queue on a second touch): a rebuild or a scan, which reads each
//! value once, leaves the cache alone, and values clients read again and again are served
//! from memory.
//!
//! Such a read through the cache makes the kernel allocate pages, read ahead around the value
//! and copy it out, then keep pages nothing will read again: on this project's VMs a cold read
//! cost about 2 ms of CPU per MiB that way and 0.15 ms direct (`dd` with and without
//! `iflag=direct`), and a rebuild, which reads four shards for every one it writes, spent half
//! the machine on it. Small values stay buffered: their pages are shared with their neighbours
//! and the index blocks that follow them.

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;

/// Values shorter than this are read through the page cache.
pub const DIRECT_READ_MIN_BYTES: usize = 64 * 1024;
/// Offsets, lengths and buffers of direct reads are multiples of this: the largest logical
/// block size of the disks Linux serves (512 B or 4 KiB).
const ALIGN: usize = 4096;
/// Most direct handles kept open at once (as the buffered ones, `read::OPEN_FILES_MAX`).
const OPEN_FILES_MAX: usize = 256;
/// Values remembered as read once: 8,192 of at least 64 KiB, half a GiB of values or more,
/// in about 200 KiB.
const READ_ONCE_ENTRIES: usize = 8192;

/// Segments' direct read handles, and whether the file system takes direct reads at all.
#[derive(Default)]
pub(super) struct DirectFiles {
    files: Mutex<HashMap<u32, Arc<File>>>,
    /// Set once the file system refuses a direct open or read (tmpfs, some FUSE ones): every
    /// later read goes through the page cache.
    refused: AtomicBool,
    reads: AtomicU64,
    read_once: Mutex<ReadOnce>,
}

/// Values read once, oldest first (segment and offset).
#[derive(Default)]
struct ReadOnce {
    order: std::collections::VecDeque<(u32, u64)>,
    set: std::collections::HashSet<(u32, u64)>,
}

impl DirectFiles {
    /// A direct handle on segment `id` at `path`; `None` where the file system refuses them
    /// (remembered) or the file is gone.
    pub(super) fn file(&self, id: u32, path: &Path) -> Option<Arc<File>> {
        if self.refused.load(Ordering::Relaxed) {
            return None;
        }
        if let Some(f) = self.files.lock().get(&id) {
            return Some(f.clone());
        }
        let file = match open_direct(path) {
            Ok(f) => Arc::new(f),
            Err(e) => {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::info!("value log: direct reads refused ({e}); reading through the page cache");
                    self.refused.store(true, Ordering::Relaxed);
                }
                return None;
            }
        };
        let mut files = self.files.lock();
        if files.len() >= OPEN_FILES_MAX {
            files.clear();
        }
        files.insert(id, file.clone());
        Some(file)
    }

    pub(super) fn forget(&self, id: u32) {
        self.files.lock().remove(&id);
    }

    pub(super) fn forget_all(&self) {
        self.files.lock().clear();
        let mut once = self.read_once.lock();
        once.order.clear();
        once.set.clear();
    }

    /// `len` bytes at `offset` of `file` read directly; `None` if the file system refused
    /// (remembered: the caller reads through the cache). `UnexpectedEof` if the file ends first.
    pub(super) fn read(&self, file: &File, len: usize, offset: u64) -> Option<std::io::Result<Bytes>> {
        match read_direct_at(file, len, offset) {
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                tracing::info!("value log: a direct read was refused ({e}); reading through the page cache");
                self.refused.store(true, Ordering::Relaxed);
                None
            }
            r => {
                self.reads.fetch_add(1, Ordering::Relaxed);
                Some(r)
            }
        }
    }

    /// Whether the value at `offset` of segment `id` was read past the cache before (the
    /// next reads go through it, to keep it there).
    pub(super) fn read_before(&self, id: u32, offset: u64) -> bool {
        self.read_once.lock().set.contains(&(id, offset))
    }

    /// Remembers the value at `offset` of segment `id` as read once, forgetting the oldest
    /// beyond `READ_ONCE_ENTRIES`.
    pub(super) fn remember(&self, id: u32, offset: u64) {
        let mut once = self.read_once.lock();
        if !once.set.insert((id, offset)) {
            return;
        }
        once.order.push_back((id, offset));
        if once.order.len() > READ_ONCE_ENTRIES {
            if let Some(oldest) = once.order.pop_front() {
                once.set.remove(&oldest);
            }
        }
    }

    /// Direct reads made (failed ones included).
    pub(super) fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    #[cfg(test)]
    pub(super) fn refused(&self) -> bool {
        self.refused.load(Ordering::Relaxed)
    }
}

fn open_direct(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    #[cfg(target_os = "linux")]
    let flags = libc::O_DIRECT;
    #[cfg(not(target_os = "linux"))]
    let flags = {
        let _ = path;
        return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
    };
    std::fs::OpenOptions::new().read(true).custom_flags(flags).open(path)
}

/// Reads the aligned span around `offset..offset + len` into an aligned part of one buffer and
/// hands out the value's bytes of it (no copy).
fn read_direct_at(file: &File, len: usize, offset: u64) -> std::io::Result<Bytes> {
    let start = offset / ALIGN as u64 * ALIGN as u64;
    let lead = (offset - start) as usize;
    let span = (lead + len).div_ceil(ALIGN) * ALIGN;
    let mut buf: Vec<u8> = Vec::with_capacity(span + ALIGN);
    let pad = buf.as_ptr().align_offset(ALIGN);
    buf.resize(pad, 0);
    let mut got = 0;
    while got < lead + len {
        let window = &mut buf.spare_capacity_mut()[..span - got];
        match rustix::io::pread(file, window, start + got as u64) {
            Ok(([], _)) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok((read, _)) => {
                let n = read.len();
                // SAFETY: pread initialised the first `n` bytes of the spare capacity.
                #[allow(unsafe_code, reason = "the kernel fills the buffer; zeroing it first would cost as much as the read")]
                unsafe {
                    buf.set_len(buf.len() + n);
                }
                got += n;
                // Short of the span only at the end of the file, which is no block boundary:
                // the next read starts unaligned, and ends the loop with EOF or the rest.
                if n % ALIGN != 0 && got < lead + len {
                    return Err(std::io::ErrorKind::UnexpectedEof.into());
                }
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(Bytes::from(buf).slice(pad + lead..pad + lead + len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// Every offset and length around the block boundaries reads back exactly, to the file's
    /// unaligned end; past it, EOF.
    #[test]
    fn reads_any_span_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..3 * ALIGN + 777).map(|i| (i * 7 + i / 251) as u8).collect();
        File::create(&path).unwrap().write_all(&data).unwrap();
        let files = DirectFiles::default();
        let Some(file) = files.file(1, &path) else {
            assert!(files.refused(), "a file that exists opens unless direct reads are refused");
            return;
        };
        for (offset, len) in [(0, 1), (0, ALIGN), (1, ALIGN), (ALIGN - 1, 2), (ALIGN, 2 * ALIGN), (100, 3 * ALIGN), (0, data.len()), (data.len() - 5, 5)] {
            let Some(got) = files.read(&file, len, offset as u64) else { return };
            assert_eq!(&got.unwrap()[..], &data[offset..offset + len], "{offset}+{len}");
        }
        let past = files.read(&file, 10, (data.len() - 5) as u64).unwrap();
        assert_eq!(past.unwrap_err().kind(), std::io::ErrorKind::UnexpectedEof);
        assert!(files.file(2, &dir.path().join("missing")).is_none());
        assert!(!files.refused(), "a missing file refuses nothing");
    }
}
