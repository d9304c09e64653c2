//! Sparse file content: 4 KiB pages in chunks of 64, shared copy-on-write between the layers.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::sync::Arc;

/// Size of a content page.
pub const PAGE_SIZE: usize = 4096;
/// Largest file size accepted (`EFBIG` beyond).
pub const MAX_FILE_SIZE: u64 = 1 << 50;

const CHUNK_PAGES: usize = 64;
const CHUNK_BYTES: u64 = (PAGE_SIZE * CHUNK_PAGES) as u64;
pub(super) const PAGE_BYTES: u64 = PAGE_SIZE as u64;

type Page = Arc<[u8; PAGE_SIZE]>;

#[derive(Clone)]
struct Chunk {
    pages: [Option<Page>; CHUNK_PAGES],
}

impl Chunk {
    fn empty() -> Self {
        Chunk {
            pages: std::array::from_fn(|_| None),
        }
    }

    fn is_empty(&self) -> bool {
        self.pages.iter().all(Option::is_none)
    }
}

/// Sparse file content: pages shared copy-on-write, holes read as zeros.
///
/// Invariant: bytes of stored pages at or beyond `len` are zero, so growing the file exposes
/// zeros without touching any page.
#[derive(Clone, Default)]
pub struct Content {
    chunks: BTreeMap<u64, Arc<Chunk>>,
    len: u64,
}

impl fmt::Debug for Content {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Content")
            .field("len", &self.len)
            .field("resident_pages", &self.resident_pages())
            .finish()
    }
}

impl PartialEq for Content {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.to_vec() == other.to_vec()
    }
}

impl Content {
    /// Empty content.
    pub fn new() -> Self {
        Self::default()
    }

    /// Content holding `data`.
    pub fn from_bytes(data: &[u8]) -> Self {
        let mut c = Self::new();
        c.write(0, data);
        c
    }

    /// Size in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the size is zero.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn page(&self, page_idx: u64) -> Option<&Page> {
        let chunk = self.chunks.get(&(page_idx / CHUNK_PAGES as u64))?;
        chunk.pages[(page_idx % CHUNK_PAGES as u64) as usize].as_ref()
    }

    /// Up to `size` bytes from `offset`, stopping at the end of the content.
    pub fn read(&self, offset: u64, size: usize) -> Vec<u8> {
        if offset >= self.len {
            return Vec::new();
        }
        let end = self.len.min(offset.saturating_add(size as u64));
        let mut out = vec![0u8; (end - offset) as usize];
        let mut pos = offset;
        while pos < end {
            let in_page = (pos % PAGE_BYTES) as usize;
            let n = (PAGE_SIZE - in_page).min((end - pos) as usize);
            if let Some(page) = self.page(pos / PAGE_BYTES) {
                let o = (pos - offset) as usize;
                out[o..o + n].copy_from_slice(&page[in_page..in_page + n]);
            }
            pos += n as u64;
        }
        out
    }

    /// The whole content.
    pub fn to_vec(&self) -> Vec<u8> {
        self.read(0, self.len as usize)
    }

    /// Writes `data` at `offset`, extending with zeros past the end. The caller bounds
    /// `offset + data.len()` (see [`MAX_FILE_SIZE`]).
    pub fn write(&mut self, offset: u64, data: &[u8]) {
        let mut pos = offset;
        let mut src = data;
        while !src.is_empty() {
            let page_idx = pos / PAGE_BYTES;
            let in_page = (pos % PAGE_BYTES) as usize;
            let n = (PAGE_SIZE - in_page).min(src.len());
            let chunk = self
                .chunks
                .entry(page_idx / CHUNK_PAGES as u64)
                .or_insert_with(|| Arc::new(Chunk::empty()));
            let chunk = Arc::make_mut(chunk);
            let page = chunk.pages[(page_idx % CHUNK_PAGES as u64) as usize]
                .get_or_insert_with(|| Arc::new([0u8; PAGE_SIZE]));
            Arc::make_mut(page)[in_page..in_page + n].copy_from_slice(&src[..n]);
            src = &src[n..];
            pos += n as u64;
        }
        self.len = self.len.max(offset.saturating_add(data.len() as u64));
    }

    /// Truncates or extends (with zeros) to `len`.
    pub fn set_len(&mut self, len: u64) {
        if len < self.len {
            drop(self.chunks.split_off(&len.div_ceil(CHUNK_BYTES)));
            let in_chunk = len % CHUNK_BYTES;
            if in_chunk != 0 {
                let key = len / CHUNK_BYTES;
                if let Some(arc) = self.chunks.get_mut(&key) {
                    let chunk = Arc::make_mut(arc);
                    let first_gone = (in_chunk as usize).div_ceil(PAGE_SIZE);
                    for slot in &mut chunk.pages[first_gone..] {
                        *slot = None;
                    }
                    let in_page = (len % PAGE_BYTES) as usize;
                    if in_page != 0 {
                        if let Some(page) = &mut chunk.pages[(in_chunk / PAGE_BYTES) as usize] {
                            if page[in_page..].iter().any(|&b| b != 0) {
                                Arc::make_mut(page)[in_page..].fill(0);
                            }
                        }
                    }
                    if chunk.is_empty() {
                        self.chunks.remove(&key);
                    }
                }
            }
        }
        self.len = len;
    }

    /// Number of 4 KiB pages holding data (holes cost nothing).
    pub fn resident_pages(&self) -> usize {
        self.chunks
            .values()
            .map(|c| c.pages.iter().filter(|p| p.is_some()).count())
            .sum()
    }

    pub(super) fn page_ptrs(&self, into: &mut HashSet<usize>) {
        for chunk in self.chunks.values() {
            for page in chunk.pages.iter().flatten() {
                into.insert(Arc::as_ptr(page) as *const u8 as usize);
            }
        }
    }
}

#[cfg(test)]
mod tests;
