//! Reads: a value at its pointer, checked against the length and CRC its metadata gives, and
//! whether a record is there whole (recovery's question).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bytes::Bytes;

use super::format::{self, Pointer, RecordHead};
use super::ValueLog;
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
    pub fn read(&self, pointer: Pointer, key_len: usize, value_len: u32, value_crc: u32) -> Result<Option<Bytes>> {
        let Some(file) = self.file(pointer.segment)? else { return Ok(None) };
        let value = match read_fresh_at(&file, value_len as usize, format::value_offset(pointer, key_len)) {
            Ok(v) => v,
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                return Err(Error::corrupt(format!("value log segment {} ends inside a value at {}", pointer.segment, pointer.offset)))
            }
            Err(e) => return Err(e.into()),
        };
        if crc32c::crc32c(&value) != value_crc {
            return Err(Error::corrupt(format!("value log segment {}: the value at {} fails its checksum", pointer.segment, pointer.offset)));
        }
        Ok(Some(value.into()))
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
