//! Reads: a value at its pointer, checked against the length and CRC its metadata gives, and
//! whether a record is there whole (recovery's question).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bytes::Bytes;

use super::format::{self, Pointer, RecordHead};
use super::{direct, ValueLog};
use crate::{Error, Result};

/// Most segment files kept open for reads at once.
const OPEN_FILES_MAX: usize = 256;

impl ValueLog {
    /// Opens segment `id` for reading; `None` if it is gone.
    pub(super) fn open_segment(&self, id: u32) -> Result<Option<File>> {
        match File::open(self.path(id)) {
            Ok(f) => Ok(Some(f)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// A read handle on segment `id`, or `None` if it is gone (collected since the pointer
    /// was read).
    fn file(&self, id: u32) -> Result<Option<Arc<File>>> {
        if let Some(file) = self.open_files.lock().get(&id) {
            return Ok(Some(file.clone()));
        }
        let Some(file) = self.open_segment(id)? else { return Ok(None) };
        let file = Arc::new(file);
        let mut open = self.open_files.lock();
        if open.len() >= OPEN_FILES_MAX {
            open.clear();
        }
        open.insert(id, file.clone());
        Ok(Some(file))
    }

    /// Reads the value of the record at `pointer` under a key of `key_len` bytes and checks it
    /// against the length and CRC-32C its metadata gives: `None` if the segment is gone (the
    /// value moved: read the key again), Corrupt if the bytes are not the value written.
    /// Under [`crate::CachedReadsOnly`], a value not in memory is `WouldBlock`: one to be read
    /// past the cache at once, one read through it if the cache does not hold it all
    /// (`RWF_NOWAIT`).
    pub fn read(&self, pointer: Pointer, key_len: usize, value_len: u32, value_crc: u32) -> Result<Option<Bytes>> {
        let (len, at) = (value_len as usize, format::value_offset(pointer, key_len));
        let cached_only = crate::cached_reads_only();
        // A large value the cache dropped is read past it the first time, and through it (to
        // be kept) from the second (`direct`). Not probed without waiting first: a buffered
        // read that misses starts the disk reading the value into the cache even so.
        let direct = self.direct_file(pointer.segment, len, at);
        let read = match direct {
            Some(_) if cached_only => return Err(Error::WouldBlock),
            Some(d) => {
                self.direct.remember(pointer.segment, at);
                self.direct.read(&d, len, at)
            }
            None => None,
        };
        let read = match read {
            Some(read) => read,
            None => {
                let Some(file) = self.file(pointer.segment)? else { return Ok(None) };
                match cached_only.then(|| read_cached_at(&file, len, at)).flatten() {
                    Some(read) => read.map(Bytes::from),
                    None => read_fresh_at(&file, len, at).map(Bytes::from),
                }
            }
        };
        let value = match read {
            Ok(v) => v,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Err(Error::WouldBlock),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                return Err(Error::corrupt(format!("value log segment {} ends inside a value at {}", pointer.segment, pointer.offset)))
            }
            Err(e) => return Err(e.into()),
        };
        if crc_fast::crc32_iscsi(&value) != value_crc {
            return Err(Error::corrupt(format!("value log segment {}: the value at {} fails its checksum", pointer.segment, pointer.offset)));
        }
        Ok(Some(value))
    }

    /// A direct handle to read a large value the page cache no longer holds with (`direct`);
    /// `None` to read it through the cache: a small value, one still cached or read before, a file system
    /// without direct reads, or a segment gone (the buffered path says so).
    fn direct_file(&self, id: u32, len: usize, at: u64) -> Option<Arc<File>> {
        let end = at + len as u64;
        let dropped = id < self.found_below || self.cached_from.lock().get(&id).is_some_and(|&from| end <= from);
        // A value read before goes through the cache (`direct`): no handle opened for it.
        if len < direct::DIRECT_READ_MIN_BYTES || !dropped || self.direct.read_before(id, at) {
            return None;
        }
        self.direct.file(id, &self.path(id))
    }

    /// Whether the record at `pointer` is there whole, under `key`, with a value of this
    /// length and CRC-32C: what recovery asks of a pointer the journal had not made durable.
    /// An error when the log cannot be read, which says nothing either way.
    pub fn holds(&self, pointer: Pointer, key: &[u8], value_len: u32, value_crc: u32) -> Result<bool> {
        let Some(file) = self.file(pointer.segment)? else { return Ok(false) };
        let mut head = vec![0u8; format::RECORD_HEAD_LEN + key.len()];
        match file.read_exact_at(&mut head, pointer.offset) {
            Ok(()) => {}
            // The file ends before the record: a crash lost its bytes.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(false),
            // Anything else is the disk failing to read, which says nothing of the bytes.
            Err(e) => return Err(e.into()),
        }
        let Some((crc, found)) = format::decode_head(&head) else { return Ok(false) };
        let expected = RecordHead { key_len: key.len(), value_len, value_crc };
        if found != expected || !format::head_checks(crc, &found, key) || head[format::RECORD_HEAD_LEN..] != *key {
            return Ok(false);
        }
        match self.read(pointer, key.len(), value_len, value_crc) {
            Ok(Some(_)) => Ok(true),
            Ok(None) | Err(Error::Corrupt { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// `len` bytes of `file` at `offset`, read into a buffer the kernel fills without its being
/// zeroed first: serving 1 MiB values, zeroing each fresh buffer (`vec![0; len]`) cost about a
/// quarter of a drive's CPU. `UnexpectedEof` if the file ends before `len` bytes.
fn read_fresh_at(file: &File, len: usize, offset: u64) -> std::io::Result<Vec<u8>> {
    let mut buf = Vec::with_capacity(len);
    while buf.len() < len {
        let at = offset + buf.len() as u64;
        match rustix::io::pread(file, rustix::buffer::spare_capacity(&mut buf), at) {
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    // The allocator may have given more capacity than asked, and the read filled it.
    buf.truncate(len);
    Ok(buf)
}

/// `len` bytes of `file` at `offset` if the page cache holds them all, read without waiting
/// for the disk; `WouldBlock` if it does not (a part is as good as none), `None` where the
/// system cannot tell.
fn read_cached_at(file: &File, len: usize, offset: u64) -> Option<std::io::Result<Vec<u8>>> {
    let mut buf = Vec::with_capacity(len);
    match read_cached(file, &mut buf, len, offset)? {
        Ok(()) if buf.len() == len => Some(Ok(buf)),
        Ok(()) => Some(Err(std::io::ErrorKind::WouldBlock.into())),
        Err(e) => Some(Err(e)),
    }
}

/// Reads what the page cache holds of `len` bytes at `offset` into `buf`'s spare capacity
/// without waiting for the disk (`preadv2` with `RWF_NOWAIT`); `WouldBlock` if none of it is
/// cached, `None` where the system cannot tell (the caller then reads as usual).
#[cfg(target_os = "linux")]
fn read_cached(file: &File, buf: &mut Vec<u8>, len: usize, offset: u64) -> Option<std::io::Result<()>> {
    use std::os::fd::AsRawFd;
    let window = &mut buf.spare_capacity_mut()[..len];
    let iov = libc::iovec { iov_base: window.as_mut_ptr().cast(), iov_len: window.len() };
    let offset = libc::off_t::try_from(offset).ok()?;
    // SAFETY: one iovec over `buf`'s spare capacity, which outlives the call; the fd is open.
    #[allow(unsafe_code, reason = "preadv2 has no safe wrapper taking RWF_NOWAIT here")]
    let n = unsafe { libc::preadv2(file.as_raw_fd(), &raw const iov, 1, offset, libc::RWF_NOWAIT) };
    if n >= 0 {
        // SAFETY: preadv2 initialised the first `n` bytes of the spare capacity.
        #[allow(unsafe_code, reason = "the kernel filled these bytes")]
        unsafe {
            buf.set_len(n as usize);
        }
        return Some(Ok(()));
    }
    let error = std::io::Error::last_os_error();
    match error.raw_os_error() {
        Some(libc::EAGAIN) => Some(Err(std::io::ErrorKind::WouldBlock.into())),
        // A kernel or file system without RWF_NOWAIT for buffered reads.
        Some(libc::EOPNOTSUPP | libc::EINVAL | libc::ENOSYS) => None,
        _ => Some(Err(error)),
    }
}

#[cfg(not(target_os = "linux"))]
fn read_cached(_file: &File, _buf: &mut Vec<u8>, _len: usize, _offset: u64) -> Option<std::io::Result<()>> {
    None
}
