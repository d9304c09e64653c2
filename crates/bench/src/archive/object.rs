//! Files as objects: a file is cut into chunks of at most one drive value (1 MiB) and described
//! by a manifest stored under its own key.
//!
//! Key layout (ASCII; the file number is zero-padded so keys sort in file order, and a file's
//! chunks and manifest are adjacent):
//!
//! ```text
//! arc/<run:016x>/<file:010>/c<chunk:06>   chunk `chunk` of file `file`
//! arc/<run:016x>/<file:010>/m             its manifest
//! ```
//!
//! Manifest value (32 bytes, little-endian):
//!
//! ```text
//! 0  magic "SPAF"        4  format version (u16) = 1   6  reserved (u16) = 0
//! 8  file size (u64)     16 chunk size (u32)           20 chunk count (u32)
//! 24 CRC32C of the file content (u32)                  28 CRC32C of bytes 0..28 (u32)
//! ```
//!
//! File content is generated, not stored on the client: chunk j of file f is a slice of one
//! random pool at an offset derived from (f, j), so any file can be re-created for checking.

use std::future::Future;

use bytes::Bytes;
use rand::{RngCore, SeedableRng};
use spindle_client::{Client, PutOptions, Synchronization};

/// Largest chunk: the drive's value limit.
pub const CHUNK_BYTES_MAX: u32 = spindle_proto::limits::MAX_VALUE_SIZE;
pub const MANIFEST_BYTES: usize = 32;
const MANIFEST_MAGIC: &[u8; 4] = b"SPAF";
const MANIFEST_VERSION: u16 = 1;
/// Chunks are cut from a pool of this many random bytes (twice a chunk, so any offset below
/// one chunk leaves a full chunk after it).
const POOL_BYTES: usize = 2 * CHUNK_BYTES_MAX as usize;

#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    #[error(transparent)]
    Client(#[from] spindle_client::ClientError),
    #[error("{key}: missing")]
    Missing { key: String },
    #[error("{key}: bad manifest: {reason}")]
    BadManifest { key: String, reason: String },
    #[error("{key}: chunk of {got} bytes, expected {expected}")]
    ChunkLength { key: String, got: usize, expected: usize },
    #[error("file {file}: content checksum {got:08x}, manifest says {expected:08x}")]
    Checksum { file: u64, got: u32, expected: u32 },
    #[error("file {file}: fragment {offset}+{len} holds other bytes than were written")]
    FragmentMismatch { file: u64, offset: u64, len: u64 },
    #[error("the drive's batch permits are gone")]
    BatchPermitsClosed,
    #[error("fragment {offset}+{len} is outside file of {size} bytes")]
    FragmentOutOfRange { offset: u64, len: u64, size: u64 },
}

/// What a store must do for the archive workloads: one drive, or a test double.
pub trait Store: Clone + Send + Sync + 'static {
    fn put(&self, key: Bytes, value: Bytes) -> impl Future<Output = Result<(), ObjectError>> + Send;
    fn get(&self, key: Bytes) -> impl Future<Output = Result<Option<Bytes>, ObjectError>> + Send;
    fn delete(&self, key: Bytes) -> impl Future<Output = Result<(), ObjectError>> + Send;
}

/// A Kinetic drive: forced WRITEBACK puts (the workload makes them durable with FLUSHALLDATA
/// at batch ends) and forced deletes.
impl Store for Client {
    async fn put(&self, key: Bytes, value: Bytes) -> Result<(), ObjectError> {
        Ok(Client::put(self, &key, value, PutOptions::forced(Synchronization::Writeback)).await?)
    }

    async fn get(&self, key: Bytes) -> Result<Option<Bytes>, ObjectError> {
        Ok(Client::get(self, &key).await?.map(|e| e.value))
    }

    async fn delete(&self, key: Bytes) -> Result<(), ObjectError> {
        let options = spindle_client::DeleteOptions { force: true, sync: Synchronization::Writeback, ..Default::default() };
        Client::delete(self, &key, options).await.map(drop).map_err(Into::into)
    }
}

/// A file's manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Manifest {
    pub size: u64,
    pub chunk_size: u32,
    pub chunk_count: u32,
    pub crc32c: u32,
}

impl Manifest {
    pub fn encode(&self) -> [u8; MANIFEST_BYTES] {
        let mut b = [0u8; MANIFEST_BYTES];
        b[0..4].copy_from_slice(MANIFEST_MAGIC);
        b[4..6].copy_from_slice(&MANIFEST_VERSION.to_le_bytes());
        b[8..16].copy_from_slice(&self.size.to_le_bytes());
        b[16..20].copy_from_slice(&self.chunk_size.to_le_bytes());
        b[20..24].copy_from_slice(&self.chunk_count.to_le_bytes());
        b[24..28].copy_from_slice(&self.crc32c.to_le_bytes());
        let header_crc = crc_fast::crc32_iscsi(&b[0..28]);
        b[28..32].copy_from_slice(&header_crc.to_le_bytes());
        b
    }

    pub fn decode(key: &[u8], b: &[u8]) -> Result<Manifest, ObjectError> {
        let bad = |reason: &str| ObjectError::BadManifest { key: String::from_utf8_lossy(key).into_owned(), reason: reason.to_string() };
        let b: &[u8; MANIFEST_BYTES] = b.try_into().map_err(|_| bad("wrong length"))?;
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        if &b[0..4] != MANIFEST_MAGIC {
            return Err(bad("wrong magic"));
        }
        if u16::from_le_bytes([b[4], b[5]]) != MANIFEST_VERSION {
            return Err(bad("unknown format version"));
        }
        if crc_fast::crc32_iscsi(&b[0..28]) != u32_at(28) {
            return Err(bad("header checksum mismatch"));
        }
        let mut size = [0u8; 8];
        size.copy_from_slice(&b[8..16]);
        let m = Manifest { size: u64::from_le_bytes(size), chunk_size: u32_at(16), chunk_count: u32_at(20), crc32c: u32_at(24) };
        if m.chunk_size == 0 || m.chunk_size > CHUNK_BYTES_MAX || u64::from(m.chunk_count) != m.size.div_ceil(u64::from(m.chunk_size)) {
            return Err(bad("size, chunk size and chunk count disagree"));
        }
        Ok(m)
    }

    /// Length of chunk `j`.
    pub fn chunk_len(&self, j: u32) -> usize {
        let start = u64::from(j) * u64::from(self.chunk_size);
        (self.size - start.min(self.size)).min(u64::from(self.chunk_size)) as usize
    }

    /// The chunks holding bytes [offset, offset + len).
    pub fn chunks_for(&self, offset: u64, len: u64) -> std::ops::Range<u32> {
        if len == 0 {
            return 0..0;
        }
        let cs = u64::from(self.chunk_size);
        (offset / cs) as u32..(offset + len).div_ceil(cs) as u32
    }
}

/// Keys and content of one fileset (one run prefix, one content pool).
#[derive(Clone)]
pub struct Layout {
    run: u64,
    pool: Bytes,
    chunk_size: u32,
}

impl Layout {
    pub fn new(run: u64, content_seed: u64, chunk_size: u32) -> Layout {
        let mut pool = vec![0u8; POOL_BYTES];
        rand::rngs::StdRng::seed_from_u64(content_seed).fill_bytes(&mut pool);
        Layout { run, pool: Bytes::from(pool), chunk_size: chunk_size.clamp(1, CHUNK_BYTES_MAX) }
    }

    fn base(&self, file: u64) -> String {
        format!("arc/{:016x}/{file:010}", self.run)
    }

    pub fn manifest_key(&self, file: u64) -> Bytes {
        Bytes::from(format!("{}/m", self.base(file)))
    }

    pub fn chunk_key(&self, file: u64, chunk: u32) -> Bytes {
        Bytes::from(format!("{}/c{chunk:06}", self.base(file)))
    }

    /// First and last key of this run's objects (a key range for GETKEYRANGE or
    /// MEDIAOPTIMIZE): `arc/<run>/` up to `arc/<run>0` ('0' sorts right after '/').
    pub fn key_range(&self) -> (Bytes, Bytes) {
        (Bytes::from(format!("arc/{:016x}/", self.run)), Bytes::from(format!("arc/{:016x}0", self.run)))
    }

    /// The key that places a file (all its keys go to the same drive).
    pub fn placement_key(&self, file: u64) -> Bytes {
        Bytes::from(self.base(file))
    }

    /// The content of chunk `chunk` of a file of `size` bytes.
    pub fn chunk(&self, file: u64, size: u64, chunk: u32) -> Bytes {
        let len = self.manifest_shape(size).chunk_len(chunk);
        // A cheap mix of (file, chunk) picks the slice; SplitMix64's finaliser.
        let mut h = file.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(chunk).wrapping_add(0xBF58_476D_1CE4_E5B9);
        h = (h ^ (h >> 31)).wrapping_mul(0x94D0_49BB_1331_11EB);
        let offset = (h % CHUNK_BYTES_MAX as u64) as usize;
        self.pool.slice(offset..offset + len)
    }

    /// Size, chunk size and chunk count of a file of `size` bytes (checksum left 0).
    pub fn manifest_shape(&self, size: u64) -> Manifest {
        Manifest { size, chunk_size: self.chunk_size, chunk_count: size.div_ceil(u64::from(self.chunk_size)) as u32, crc32c: 0 }
    }

    pub fn manifest(&self, file: u64, size: u64) -> Manifest {
        let shape = self.manifest_shape(size);
        let mut crc = crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32Iscsi);
        for j in 0..shape.chunk_count {
            crc.update(&self.chunk(file, size, j));
        }
        Manifest { crc32c: crc.finalize() as u32, ..shape }
    }

    /// Bytes [offset, offset + len) of a file of `size` bytes, as a fragment read must return.
    pub fn fragment(&self, file: u64, size: u64, offset: u64, len: u64) -> Vec<u8> {
        let shape = self.manifest_shape(size);
        let cs = u64::from(self.chunk_size);
        let mut out = Vec::with_capacity(len as usize);
        for j in shape.chunks_for(offset, len) {
            out.extend_from_slice(slice_of_chunk(&self.chunk(file, size, j), u64::from(j) * cs, offset, len));
        }
        out
    }

    /// The whole content of a file (for checks).
    pub fn content(&self, file: u64, size: u64) -> Vec<u8> {
        let m = self.manifest(file, size);
        (0..m.chunk_count).flat_map(|j| self.chunk(file, size, j).to_vec()).collect()
    }

    /// Stores a file: its chunks in order, then its manifest (a reader that finds the
    /// manifest finds every chunk). Returns the requests made.
    pub async fn write_file(&self, store: &impl Store, file: u64, size: u64) -> Result<u64, ObjectError> {
        let m = self.manifest(file, size);
        for j in 0..m.chunk_count {
            store.put(self.chunk_key(file, j), self.chunk(file, size, j)).await?;
        }
        store.put(self.manifest_key(file), Bytes::copy_from_slice(&m.encode())).await?;
        Ok(u64::from(m.chunk_count) + 1)
    }

    pub async fn read_manifest(&self, store: &impl Store, file: u64) -> Result<Manifest, ObjectError> {
        let key = self.manifest_key(file);
        let value = store.get(key.clone()).await?.ok_or_else(|| ObjectError::Missing { key: String::from_utf8_lossy(&key).into_owned() })?;
        Manifest::decode(&key, &value)
    }

    async fn read_chunk(&self, store: &impl Store, file: u64, m: &Manifest, j: u32) -> Result<Bytes, ObjectError> {
        let key = self.chunk_key(file, j);
        let name = || String::from_utf8_lossy(&key).into_owned();
        let value = store.get(key.clone()).await?.ok_or_else(|| ObjectError::Missing { key: name() })?;
        if value.len() != m.chunk_len(j) {
            return Err(ObjectError::ChunkLength { key: name(), got: value.len(), expected: m.chunk_len(j) });
        }
        Ok(value)
    }

    /// Reads a whole file and checks it against its manifest's checksum.
    pub async fn read_file(&self, store: &impl Store, file: u64) -> Result<Vec<u8>, ObjectError> {
        let m = self.read_manifest(store, file).await?;
        let mut out = Vec::with_capacity(m.size as usize);
        for j in 0..m.chunk_count {
            out.extend_from_slice(&self.read_chunk(store, file, &m, j).await?);
        }
        let got = crc_fast::crc32_iscsi(&out);
        if got != m.crc32c {
            return Err(ObjectError::Checksum { file, got, expected: m.crc32c });
        }
        Ok(out)
    }

    /// Reads bytes [offset, offset + len) of a file: the manifest and only the chunks that
    /// hold them.
    pub async fn read_fragment(&self, store: &impl Store, file: u64, offset: u64, len: u64) -> Result<Vec<u8>, ObjectError> {
        let m = self.read_manifest(store, file).await?;
        if offset.checked_add(len).is_none_or(|end| end > m.size) {
            return Err(ObjectError::FragmentOutOfRange { offset, len, size: m.size });
        }
        let mut out = Vec::with_capacity(len as usize);
        let cs = u64::from(m.chunk_size);
        for j in m.chunks_for(offset, len) {
            let chunk = self.read_chunk(store, file, &m, j).await?;
            out.extend_from_slice(slice_of_chunk(&chunk, u64::from(j) * cs, offset, len));
        }
        Ok(out)
    }

    /// Deletes a file's chunks and manifest (manifest first, so no reader sees a manifest
    /// without its chunks).
    pub async fn delete_file(&self, store: &impl Store, file: u64, size: u64) -> Result<(), ObjectError> {
        store.delete(self.manifest_key(file)).await?;
        for j in 0..self.manifest(file, size).chunk_count {
            store.delete(self.chunk_key(file, j)).await?;
        }
        Ok(())
    }
}

/// The part of a chunk starting at file offset `start` that lies in [offset, offset + len).
fn slice_of_chunk(chunk: &[u8], start: u64, offset: u64, len: u64) -> &[u8] {
    let from = (offset.saturating_sub(start) as usize).min(chunk.len());
    let to = ((offset + len).saturating_sub(start) as usize).min(chunk.len());
    &chunk[from..to.max(from)]
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use mem_store::MemStore;

    /// An in-memory store that counts the gets it serves.
    pub(crate) mod mem_store {
        use std::collections::HashMap;
        use std::sync::atomic::{AtomicU64, Ordering};
        use std::sync::{Arc, Mutex};

        use super::super::{ObjectError, Store};
        use bytes::Bytes;

        #[derive(Clone, Default)]
        pub struct MemStore {
            pub map: Arc<Mutex<HashMap<Bytes, Bytes>>>,
            pub gets: Arc<Mutex<Vec<Bytes>>>,
            pub puts: Arc<AtomicU64>,
        }

        impl Store for MemStore {
            async fn put(&self, key: Bytes, value: Bytes) -> Result<(), ObjectError> {
                self.puts.fetch_add(1, Ordering::Relaxed);
                self.map.lock().expect("test lock").insert(key, value);
                Ok(())
            }
            async fn get(&self, key: Bytes) -> Result<Option<Bytes>, ObjectError> {
                self.gets.lock().expect("test lock").push(key.clone());
                Ok(self.map.lock().expect("test lock").get(&key).cloned())
            }
            async fn delete(&self, key: Bytes) -> Result<(), ObjectError> {
                self.map.lock().expect("test lock").remove(&key);
                Ok(())
            }
        }
    }

    fn block_on<F: Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().build().expect("runtime").block_on(f)
    }

    const MIB: u64 = 1 << 20;

    #[test]
    fn files_round_trip_byte_exactly_at_the_chunk_edges() {
        let layout = Layout::new(1, 2, CHUNK_BYTES_MAX);
        let store = MemStore::default();
        let sizes = [0, 1, MIB - 1, MIB, MIB + 1, 3 * MIB + 17];
        block_on(async {
            for (file, size) in sizes.iter().enumerate() {
                let requests = layout.write_file(&store, file as u64, *size).await.unwrap();
                assert_eq!(requests, size.div_ceil(MIB) + 1, "size {size}: chunks plus the manifest");
            }
            for (file, size) in sizes.iter().enumerate() {
                let back = layout.read_file(&store, file as u64).await.unwrap();
                assert_eq!(back.len() as u64, *size);
                assert!(back == layout.content(file as u64, *size), "size {size}: content differs");
                let m = layout.read_manifest(&store, file as u64).await.unwrap();
                assert_eq!((m.size, m.chunk_count, m.chunk_size), (*size, size.div_ceil(MIB) as u32, CHUNK_BYTES_MAX));
            }
            // Every stored value fits the drive's value limit.
            assert!(store.map.lock().unwrap().values().all(|v| v.len() <= CHUNK_BYTES_MAX as usize));
            // A damaged chunk of the right length is caught by the file checksum.
            let key = layout.chunk_key(4, 0);
            store.map.lock().unwrap().insert(key, Bytes::from(vec![0u8; MIB as usize]));
            assert!(matches!(layout.read_file(&store, 4).await, Err(ObjectError::Checksum { file: 4, .. })));
            layout.delete_file(&store, 5, sizes[5]).await.unwrap();
            assert!(matches!(layout.read_file(&store, 5).await, Err(ObjectError::Missing { .. })));
        });
    }

    #[test]
    fn fragment_reads_fetch_only_the_chunks_they_need() {
        let layout = Layout::new(1, 3, CHUNK_BYTES_MAX);
        let store = MemStore::default();
        let size = 5 * MIB + 100;
        let content = layout.content(9, size);
        block_on(async {
            layout.write_file(&store, 9, size).await.unwrap();
            for (offset, len, chunks) in [(0, 10, vec![0]), (MIB - 5, 10, vec![0, 1]), (2 * MIB, MIB, vec![2]), (5 * MIB, 100, vec![5]), (MIB / 2, 3 * MIB, vec![0, 1, 2, 3])] {
                store.gets.lock().unwrap().clear();
                let got = layout.read_fragment(&store, 9, offset, len).await.unwrap();
                assert!(got[..] == content[offset as usize..(offset + len) as usize], "{offset}+{len}");
                let mut want = vec![layout.manifest_key(9)];
                want.extend(chunks.iter().map(|j| layout.chunk_key(9, *j)));
                assert_eq!(*store.gets.lock().unwrap(), want, "{offset}+{len}");
            }
            assert!(matches!(layout.read_fragment(&store, 9, size - 1, 2).await, Err(ObjectError::FragmentOutOfRange { .. })));
        });
    }

    #[test]
    fn manifests_reject_damage() {
        let m = Manifest { size: MIB + 1, chunk_size: CHUNK_BYTES_MAX, chunk_count: 2, crc32c: 7 };
        let b = m.encode();
        assert_eq!(Manifest::decode(b"k", &b).unwrap(), m);
        for i in [0, 4, 9, 17, 21, 25, 30] {
            let mut bad = b;
            bad[i] ^= 1;
            assert!(Manifest::decode(b"k", &bad).is_err(), "byte {i}");
        }
        assert!(Manifest::decode(b"k", &b[..31]).is_err());
        let wrong_count = Manifest { chunk_count: 3, ..m }.encode();
        assert!(Manifest::decode(b"k", &wrong_count).is_err());
    }
}
