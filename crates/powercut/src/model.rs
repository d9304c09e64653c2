//! The in-memory file system model: no FUSE here, so every rule is unit-testable.
//!
//! # Two layers
//!
//! Every inode keeps what a power cut would leave (*durable*) next to what programs see now
//! (*volatile*):
//!
//! - a file has durable content and size, volatile content and size, and the list of
//!   [`PendingOp`]s (writes and size changes) issued since its last fsync, in issue order;
//!   volatile = durable with the pending operations replayed;
//! - a directory has a durable and a volatile map from name to inode.
//!
//! # What makes state durable
//!
//! - [`Model::fsync_file`] (FUSE `FSYNC`, both `fsync` and `fdatasync`): the file's durable
//!   content and size become its volatile ones. No directory is touched: the file's *name* is
//!   not made durable.
//! - [`Model::fsync_dir`] (FUSE `FSYNCDIR`, what `File::open(dir)?.sync_all()` sends): that one
//!   directory's durable entries become its volatile entries. Nothing else.
//! - Nothing else does: not `close`, not `flush`, not `sync(2)`/`syncfs(2)`.
//!
//! So creating, renaming or deleting a name is durable only once the directory holding it is
//! synced, and a cross-directory rename is two independent changes (after a cut, both names, one
//! or neither may exist: a strict reading of POSIX allows it, and it is what catches a program
//! that syncs only one side). Metadata (mode, owner, times) is not layered: it changes at once
//! and survives cuts.
//!
//! # The cut
//!
//! [`Model::cut`] simulates losing power: every directory's volatile entries are reset to its
//! durable ones, and every file's content to its durable content, then, depending on
//! [`CutMode`], part of its pending operations is replayed: none ([`CutMode::Drop`]), an
//! in-order prefix whose last write may be torn at a 512-byte sector boundary
//! ([`CutMode::Torn`]), or a random subset in issue order ([`CutMode::Reorder`]). The result is
//! the new durable and volatile state. Directories that the durable maps would make reachable
//! twice (possible only through cross-directory renames of directories) keep their first name
//! in breadth-first order, so the tree stays a tree, and every inode no longer reachable from the
//! root is freed. Randomness comes from `StdRng::seed_from_u64(seed)`: a cut is reproducible.
//!
//! # Memory
//!
//! File content is sparse: 4 KiB pages in chunks of 64 pages, both behind `Arc`s shared
//! copy-on-write between the layers, so an fsync costs a pointer copy per 256 KiB chunk and a
//! file extended with `set_len` costs nothing until written. An inode is freed when no entry map
//! (durable or volatile) reachable from the root names it and it is not open; an unlinked file
//! whose removal is not yet durable keeps its durable content, since a cut brings it back.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::SystemTime;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The root directory's inode number; it always exists.
pub const ROOT_INO: u64 = 1;
/// Size of a content page.
pub const PAGE_SIZE: usize = 4096;
/// Granularity at which [`CutMode::Torn`] tears a write.
pub const SECTOR_SIZE: u64 = 512;
/// Longest name accepted, in bytes (`ENAMETOOLONG` beyond).
pub const NAME_MAX: usize = 255;
/// Largest file size accepted (`EFBIG` beyond).
pub const MAX_FILE_SIZE: u64 = 1 << 50;

const CHUNK_PAGES: usize = 64;
const CHUNK_BYTES: u64 = (PAGE_SIZE * CHUNK_PAGES) as u64;
const PAGE_BYTES: u64 = PAGE_SIZE as u64;

/// An errno value, as a real file system would return it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Errno(pub i32);

#[allow(missing_docs, reason = "the constants are libc's errno values under libc's names")]
impl Errno {
    pub const EPERM: Errno = Errno(libc::EPERM);
    pub const ENOENT: Errno = Errno(libc::ENOENT);
    pub const EIO: Errno = Errno(libc::EIO);
    pub const EEXIST: Errno = Errno(libc::EEXIST);
    pub const ENOTDIR: Errno = Errno(libc::ENOTDIR);
    pub const EISDIR: Errno = Errno(libc::EISDIR);
    pub const EINVAL: Errno = Errno(libc::EINVAL);
    pub const EFBIG: Errno = Errno(libc::EFBIG);
    pub const ENOTEMPTY: Errno = Errno(libc::ENOTEMPTY);
    pub const ENAMETOOLONG: Errno = Errno(libc::ENAMETOOLONG);
    pub const EOPNOTSUPP: Errno = Errno(libc::EOPNOTSUPP);
    pub const ENOSYS: Errno = Errno(libc::ENOSYS);
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", std::io::Error::from_raw_os_error(self.0))
    }
}

impl std::error::Error for Errno {}

impl From<Errno> for std::io::Error {
    fn from(e: Errno) -> Self {
        std::io::Error::from_raw_os_error(e.0)
    }
}

/// Result of a model operation.
pub type FsResult<T> = Result<T, Errno>;

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

    fn page_ptrs(&self, into: &mut HashSet<usize>) {
        for chunk in self.chunks.values() {
            for page in chunk.pages.iter().flatten() {
                into.insert(Arc::as_ptr(page) as *const u8 as usize);
            }
        }
    }
}

/// A change to a file's content issued since its last fsync.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PendingOp {
    /// `pwrite(data, offset)`.
    Write {
        /// Absolute file offset.
        offset: u64,
        /// The bytes written.
        data: Vec<u8>,
    },
    /// Truncate or extend: `ftruncate`, `O_TRUNC`, or `fallocate` (mode 0) beyond the end.
    SetLen {
        /// The new size.
        len: u64,
    },
}

impl PendingOp {
    /// Applies the operation to `content`.
    pub fn apply(&self, content: &mut Content) {
        match self {
            PendingOp::Write { offset, data } => content.write(*offset, data),
            PendingOp::SetLen { len } => content.set_len(*len),
        }
    }

    fn data_len(&self) -> u64 {
        match self {
            PendingOp::Write { data, .. } => data.len() as u64,
            PendingOp::SetLen { .. } => 0,
        }
    }
}

/// What a power cut keeps of the operations not yet synced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CutMode {
    /// Nothing: all unsynced data is lost.
    Drop,
    /// An in-order prefix of each file's pending operations, the first one not kept whole torn
    /// at a 512-byte boundary (absolute offsets) if it is a write: interrupted write-back.
    Torn,
    /// Each pending operation kept with probability 1/2, applied in issue order: out-of-order
    /// write-back.
    Reorder,
}

impl fmt::Display for CutMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CutMode::Drop => "drop",
            CutMode::Torn => "torn",
            CutMode::Reorder => "reorder",
        })
    }
}

impl FromStr for CutMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "drop" => Ok(CutMode::Drop),
            "torn" => Ok(CutMode::Torn),
            "reorder" => Ok(CutMode::Reorder),
            other => Err(format!(
                "unknown cut mode {other:?} (drop, torn or reorder)"
            )),
        }
    }
}

/// What one file's replay kept and lost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplayOutcome {
    /// Operations applied whole.
    pub ops_kept: usize,
    /// Operations lost (a torn write counts as lost).
    pub ops_discarded: usize,
    /// Written bytes not applied (including the lost part of a torn write).
    pub bytes_discarded: u64,
    /// Whether a write was torn.
    pub torn: bool,
}

/// The content a cut in `mode` leaves, given the durable content and the pending operations.
pub fn replay_pending(
    mode: CutMode,
    durable: &Content,
    pending: &[PendingOp],
    rng: &mut StdRng,
) -> (Content, ReplayOutcome) {
    let mut content = durable.clone();
    let mut out = ReplayOutcome::default();
    let total_bytes: u64 = pending.iter().map(PendingOp::data_len).sum();
    let mut kept_bytes = 0u64;
    match mode {
        CutMode::Drop => {}
        CutMode::Torn => {
            let k = rng.random_range(0..=pending.len());
            for op in &pending[..k] {
                op.apply(&mut content);
                kept_bytes += op.data_len();
            }
            out.ops_kept = k;
            if let Some(PendingOp::Write { offset, data }) = pending.get(k) {
                let end = offset + data.len() as u64;
                let first = (offset / SECTOR_SIZE + 1) * SECTOR_SIZE;
                let boundaries = if first < end {
                    (end - 1 - first) / SECTOR_SIZE + 1
                } else {
                    0
                };
                let pick = rng.random_range(0..=boundaries);
                if pick > 0 {
                    let keep = (first + (pick - 1) * SECTOR_SIZE - offset) as usize;
                    content.write(*offset, &data[..keep]);
                    kept_bytes += keep as u64;
                    out.torn = true;
                }
            }
        }
        CutMode::Reorder => {
            for op in pending {
                if rng.random_bool(0.5) {
                    op.apply(&mut content);
                    kept_bytes += op.data_len();
                    out.ops_kept += 1;
                }
            }
        }
    }
    out.ops_discarded = pending.len() - out.ops_kept;
    out.bytes_discarded = total_bytes - kept_bytes;
    (content, out)
}

/// What a cut did; `Display` gives one `key=value` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CutReport {
    /// The mode of the cut.
    pub mode: CutMode,
    /// The seed of the cut (rerun with it to reproduce).
    pub seed: u64,
    /// Files that had unsynced operations (some or all of which were lost).
    pub files_with_unsynced_data: usize,
    /// Unsynced operations, over all files.
    pub pending_ops: usize,
    /// Unsynced operations lost (a torn write counts as lost).
    pub ops_discarded: usize,
    /// Unsynced written bytes lost.
    pub bytes_discarded: u64,
    /// Writes torn at a sector boundary ([`CutMode::Torn`] only).
    pub torn_writes: usize,
    /// Directories whose volatile entries differed from their durable ones.
    pub dirs_reverted: usize,
    /// Entries reverted: names added, removed or re-pointed since their directory's last sync.
    pub entries_reverted: usize,
    /// Durable names dropped because they made a directory reachable twice.
    pub aliases_dropped: usize,
    /// Inodes freed because nothing durable reaches them any more.
    pub inodes_freed: usize,
    /// Whether the unmount before the cut had to be forced (something still had the mount open).
    pub forced_unmount: bool,
}

impl CutReport {
    /// Whether the cut lost anything at all (data, size changes or directory entries).
    pub fn discarded_anything(&self) -> bool {
        self.ops_discarded > 0 || self.entries_reverted > 0
    }
}

impl fmt::Display for CutReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "mode={} seed={} files_with_unsynced_data={} pending_ops={} ops_discarded={} \
             bytes_discarded={} torn_writes={} dirs_reverted={} entries_reverted={} \
             aliases_dropped={} inodes_freed={} forced_unmount={}",
            self.mode,
            self.seed,
            self.files_with_unsynced_data,
            self.pending_ops,
            self.ops_discarded,
            self.bytes_discarded,
            self.torn_writes,
            self.dirs_reverted,
            self.entries_reverted,
            self.aliases_dropped,
            self.inodes_freed,
            self.forced_unmount
        )
    }
}

/// Counters and sizes; `Display` gives one `key=value` line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Cuts so far (also the session epoch).
    pub cuts: u64,
    /// Live inodes (files and directories, root included).
    pub inodes: usize,
    /// Live files.
    pub files: usize,
    /// Live directories.
    pub dirs: usize,
    /// Sum of the files' volatile sizes (what statfs counts as used).
    pub volatile_bytes: u64,
    /// Memory held by distinct content pages, both layers.
    pub resident_bytes: u64,
    /// Files with operations not yet synced.
    pub unsynced_files: usize,
    /// Operations not yet synced.
    pub pending_ops: usize,
    /// Bytes written and not yet synced.
    pub pending_bytes: u64,
    /// Directories whose entries are not all durable.
    pub unsynced_dirs: usize,
    /// Open file and directory handles.
    pub open_handles: u64,
    /// File fsyncs (`FSYNC`) received.
    pub fsyncs: u64,
    /// Directory fsyncs (`FSYNCDIR`) received.
    pub dir_fsyncs: u64,
    /// Write operations received.
    pub writes: u64,
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cuts={} inodes={} files={} dirs={} volatile_bytes={} resident_bytes={} \
             unsynced_files={} pending_ops={} pending_bytes={} unsynced_dirs={} open_handles={} \
             fsyncs={} dir_fsyncs={} writes={}",
            self.cuts,
            self.inodes,
            self.files,
            self.dirs,
            self.volatile_bytes,
            self.resident_bytes,
            self.unsynced_files,
            self.pending_ops,
            self.pending_bytes,
            self.unsynced_dirs,
            self.open_handles,
            self.fsyncs,
            self.dir_fsyncs,
            self.writes
        )
    }
}

/// File or directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Regular file.
    File,
    /// Directory.
    Dir,
}

/// Attributes as `stat` shows them (size from the volatile layer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attr {
    /// Inode number.
    pub ino: u64,
    /// File or directory.
    pub kind: Kind,
    /// Volatile size in bytes.
    pub size: u64,
    /// `ceil(size / 512)`.
    pub blocks: u64,
    /// Permission bits.
    pub perm: u16,
    /// 1 for files, 2 for directories.
    pub nlink: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Last access.
    pub atime: SystemTime,
    /// Last modification.
    pub mtime: SystemTime,
    /// Last status change.
    pub ctime: SystemTime,
    /// Preferred I/O size: 4096.
    pub blksize: u32,
}

/// A directory entry as `readdir` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    /// Inode number.
    pub ino: u64,
    /// File or directory.
    pub kind: Kind,
    /// Name (`.` and `..` included).
    pub name: OsString,
}

/// Capacity as `statfs` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatFs {
    /// Configured capacity.
    pub total_bytes: u64,
    /// Capacity minus the volatile sizes of all files (saturating).
    pub free_bytes: u64,
    /// Live inodes.
    pub inodes: u64,
}

/// A node of [`Model::snapshot`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SnapNode {
    /// A directory.
    Dir,
    /// A file and its volatile content.
    File(Vec<u8>),
}

struct FileNode {
    durable: Content,
    volatile: Content,
    pending: Vec<PendingOp>,
}

struct DirNode {
    durable: BTreeMap<OsString, u64>,
    volatile: BTreeMap<OsString, u64>,
    /// Parent in the volatile tree (the root is its own parent).
    parent: u64,
}

enum Node {
    File(FileNode),
    Dir(DirNode),
}

struct Inode {
    node: Node,
    perm: u16,
    uid: u32,
    gid: u32,
    atime: SystemTime,
    mtime: SystemTime,
    ctime: SystemTime,
    open: u64,
    /// Lost a volatile name (unlink, rmdir, replaced by rename) since the last cut: it may be
    /// unreachable, so its last release runs the garbage collection.
    unlinked: bool,
}

impl Inode {
    fn new(node: Node, perm: u16, uid: u32, gid: u32) -> Self {
        let now = SystemTime::now();
        Inode {
            node,
            perm: perm & 0o7777,
            uid,
            gid,
            atime: now,
            mtime: now,
            ctime: now,
            open: 0,
            unlinked: false,
        }
    }

    fn kind(&self) -> Kind {
        match self.node {
            Node::File(_) => Kind::File,
            Node::Dir(_) => Kind::Dir,
        }
    }
}

/// The whole file system: inodes and both layers. See the module docs for the rules.
pub struct Model {
    inodes: BTreeMap<u64, Inode>,
    next_ino: u64,
    capacity: u64,
    cuts: u64,
    gc_pending: bool,
    fsyncs: u64,
    dir_fsyncs: u64,
    writes: u64,
}

impl fmt::Debug for Model {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Model")
            .field("stats", &self.stats())
            .finish()
    }
}

fn check_name_len(name: &OsStr) -> FsResult<()> {
    if name.len() > NAME_MAX {
        return Err(Errno::ENAMETOOLONG);
    }
    Ok(())
}

/// A name that may be created: not empty, `.`, `..`, and without `/` or NUL.
fn check_new_name(name: &OsStr) -> FsResult<()> {
    check_name_len(name)?;
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes.contains(&b'/') || bytes.contains(&0) {
        return Err(Errno::EINVAL);
    }
    if bytes == b"." || bytes == b".." {
        return Err(Errno::EEXIST);
    }
    Ok(())
}

fn entries_differ(a: &BTreeMap<OsString, u64>, b: &BTreeMap<OsString, u64>) -> usize {
    let changed_or_removed = a
        .iter()
        .filter(|(name, ino)| b.get(*name) != Some(ino))
        .count();
    let added = b.keys().filter(|name| !a.contains_key(*name)).count();
    changed_or_removed + added
}

impl Model {
    /// An empty file system (root directory only, mode 0755, owned by uid/gid 0) reporting
    /// `capacity` bytes in statfs.
    pub fn new(capacity: u64) -> Self {
        let mut inodes = BTreeMap::new();
        let root = DirNode {
            durable: BTreeMap::new(),
            volatile: BTreeMap::new(),
            parent: ROOT_INO,
        };
        inodes.insert(ROOT_INO, Inode::new(Node::Dir(root), 0o755, 0, 0));
        Model {
            inodes,
            next_ino: ROOT_INO + 1,
            capacity,
            cuts: 0,
            gc_pending: false,
            fsyncs: 0,
            dir_fsyncs: 0,
            writes: 0,
        }
    }

    /// Incremented by every cut: a FUSE session serves only the epoch it was mounted in.
    pub fn epoch(&self) -> u64 {
        self.cuts
    }

    fn inode(&self, ino: u64) -> FsResult<&Inode> {
        self.inodes.get(&ino).ok_or(Errno::ENOENT)
    }

    fn inode_mut(&mut self, ino: u64) -> FsResult<&mut Inode> {
        self.inodes.get_mut(&ino).ok_or(Errno::ENOENT)
    }

    fn dir(&self, ino: u64) -> FsResult<&DirNode> {
        match &self.inode(ino)?.node {
            Node::Dir(d) => Ok(d),
            Node::File(_) => Err(Errno::ENOTDIR),
        }
    }

    fn dir_mut(&mut self, ino: u64) -> FsResult<&mut DirNode> {
        match &mut self.inode_mut(ino)?.node {
            Node::Dir(d) => Ok(d),
            Node::File(_) => Err(Errno::ENOTDIR),
        }
    }

    fn file(&self, ino: u64) -> FsResult<&FileNode> {
        match &self.inode(ino)?.node {
            Node::File(f) => Ok(f),
            Node::Dir(_) => Err(Errno::EISDIR),
        }
    }

    fn touch(&mut self, ino: u64) {
        if let Some(inode) = self.inodes.get_mut(&ino) {
            let now = SystemTime::now();
            inode.mtime = now;
            inode.ctime = now;
        }
    }

    fn attr_of(ino: u64, inode: &Inode) -> Attr {
        let (size, nlink) = match &inode.node {
            Node::File(f) => (f.volatile.len(), 1),
            Node::Dir(_) => (PAGE_BYTES, 2),
        };
        Attr {
            ino,
            kind: inode.kind(),
            size,
            blocks: size.div_ceil(512),
            perm: inode.perm,
            nlink,
            uid: inode.uid,
            gid: inode.gid,
            atime: inode.atime,
            mtime: inode.mtime,
            ctime: inode.ctime,
            blksize: PAGE_SIZE as u32,
        }
    }

    /// Attributes of `ino`.
    pub fn getattr(&self, ino: u64) -> FsResult<Attr> {
        Ok(Self::attr_of(ino, self.inode(ino)?))
    }

    /// Looks `name` up in the volatile entries of directory `parent`.
    pub fn lookup(&self, parent: u64, name: &OsStr) -> FsResult<Attr> {
        check_name_len(name)?;
        let child = *self.dir(parent)?.volatile.get(name).ok_or(Errno::ENOENT)?;
        self.getattr(child)
    }

    fn add_entry(
        &mut self,
        parent: u64,
        name: &OsStr,
        node: Node,
        perm: u16,
        uid: u32,
        gid: u32,
    ) -> FsResult<Attr> {
        check_new_name(name)?;
        if self.dir(parent)?.volatile.contains_key(name) {
            return Err(Errno::EEXIST);
        }
        let ino = self.next_ino;
        self.next_ino += 1;
        self.inodes.insert(ino, Inode::new(node, perm, uid, gid));
        self.dir_mut(parent)?.volatile.insert(name.to_owned(), ino);
        self.touch(parent);
        self.getattr(ino)
    }

    /// Creates an empty file (volatile entry only). `EEXIST` if the name exists.
    pub fn create(
        &mut self,
        parent: u64,
        name: &OsStr,
        perm: u16,
        uid: u32,
        gid: u32,
    ) -> FsResult<Attr> {
        let node = Node::File(FileNode {
            durable: Content::new(),
            volatile: Content::new(),
            pending: Vec::new(),
        });
        self.add_entry(parent, name, node, perm, uid, gid)
    }

    /// Creates an empty directory (volatile entry only). `EEXIST` if the name exists.
    pub fn mkdir(
        &mut self,
        parent: u64,
        name: &OsStr,
        perm: u16,
        uid: u32,
        gid: u32,
    ) -> FsResult<Attr> {
        let node = Node::Dir(DirNode {
            durable: BTreeMap::new(),
            volatile: BTreeMap::new(),
            parent,
        });
        self.add_entry(parent, name, node, perm, uid, gid)
    }

    fn child(&self, parent: u64, name: &OsStr) -> FsResult<(u64, Kind)> {
        check_name_len(name)?;
        let ino = *self.dir(parent)?.volatile.get(name).ok_or(Errno::ENOENT)?;
        // An entry always names a live inode; a dangling one would read as a file.
        let kind = self.inodes.get(&ino).map_or(Kind::File, Inode::kind);
        Ok((ino, kind))
    }

    /// Removes a file's name (volatile). `EISDIR` for a directory.
    pub fn unlink(&mut self, parent: u64, name: &OsStr) -> FsResult<()> {
        let (ino, kind) = self.child(parent, name)?;
        if kind == Kind::Dir {
            return Err(Errno::EISDIR);
        }
        self.dir_mut(parent)?.volatile.remove(name);
        self.touch(parent);
        if let Some(inode) = self.inodes.get_mut(&ino) {
            inode.ctime = SystemTime::now();
            inode.unlinked = true;
        }
        self.gc_pending = true;
        self.maybe_gc();
        Ok(())
    }

    /// Removes an empty directory's name (volatile). `ENOTDIR`, `ENOTEMPTY` as usual.
    pub fn rmdir(&mut self, parent: u64, name: &OsStr) -> FsResult<()> {
        let (ino, kind) = self.child(parent, name)?;
        if kind != Kind::Dir {
            return Err(Errno::ENOTDIR);
        }
        if !self.dir(ino)?.volatile.is_empty() {
            return Err(Errno::ENOTEMPTY);
        }
        self.dir_mut(parent)?.volatile.remove(name);
        self.touch(parent);
        if let Some(inode) = self.inodes.get_mut(&ino) {
            inode.unlinked = true;
        }
        self.gc_pending = true;
        self.maybe_gc();
        Ok(())
    }

    /// Renames in the volatile maps of both directories; each side becomes durable with its own
    /// directory's sync. `noreplace` is `RENAME_NOREPLACE` (`EEXIST` if the target exists).
    pub fn rename(
        &mut self,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
        noreplace: bool,
    ) -> FsResult<()> {
        let (src, src_kind) = self.child(parent, name)?;
        self.dir(newparent)?;
        check_new_name(newname)?;
        let dst = self.dir(newparent)?.volatile.get(newname).copied();
        if let Some(dst) = dst {
            if noreplace {
                return Err(Errno::EEXIST);
            }
            if dst == src {
                // Two names of one inode (possible after a cut): POSIX says do nothing.
                return Ok(());
            }
            let dst_kind = self.inodes.get(&dst).map_or(Kind::File, Inode::kind);
            match (src_kind, dst_kind) {
                (Kind::Dir, Kind::File) => return Err(Errno::ENOTDIR),
                (Kind::File, Kind::Dir) => return Err(Errno::EISDIR),
                (Kind::Dir, Kind::Dir) if !self.dir(dst)?.volatile.is_empty() => {
                    return Err(Errno::ENOTEMPTY);
                }
                _ => {}
            }
        }
        if src_kind == Kind::Dir {
            // The target directory must not be the source or inside it.
            let mut cur = newparent;
            for _ in 0..=self.inodes.len() {
                if cur == src {
                    return Err(Errno::EINVAL);
                }
                if cur == ROOT_INO {
                    break;
                }
                cur = self.dir(cur)?.parent;
            }
        }
        self.dir_mut(parent)?.volatile.remove(name);
        self.dir_mut(newparent)?
            .volatile
            .insert(newname.to_owned(), src);
        if let Ok(d) = self.dir_mut(src) {
            d.parent = newparent;
        }
        self.touch(parent);
        self.touch(newparent);
        if let Some(inode) = self.inodes.get_mut(&src) {
            inode.ctime = SystemTime::now();
        }
        if let Some(dst) = dst {
            if let Some(inode) = self.inodes.get_mut(&dst) {
                inode.unlinked = true;
            }
            self.gc_pending = true;
            self.maybe_gc();
        }
        Ok(())
    }

    /// The volatile entries of a directory, `.` and `..` first, then by name.
    pub fn readdir(&self, ino: u64) -> FsResult<Vec<DirEntry>> {
        let dir = self.dir(ino)?;
        let mut out = Vec::with_capacity(dir.volatile.len() + 2);
        out.push(DirEntry {
            ino,
            kind: Kind::Dir,
            name: ".".into(),
        });
        out.push(DirEntry {
            ino: dir.parent,
            kind: Kind::Dir,
            name: "..".into(),
        });
        for (name, child) in &dir.volatile {
            if let Some(inode) = self.inodes.get(child) {
                out.push(DirEntry {
                    ino: *child,
                    kind: inode.kind(),
                    name: name.clone(),
                });
            }
        }
        Ok(out)
    }

    /// Reads from the volatile content.
    pub fn read(&self, ino: u64, offset: u64, size: usize) -> FsResult<Vec<u8>> {
        Ok(self.file(ino)?.volatile.read(offset, size))
    }

    fn file_op(&mut self, ino: u64, op: PendingOp) -> FsResult<()> {
        let inode = self.inode_mut(ino)?;
        let Node::File(f) = &mut inode.node else {
            return Err(Errno::EISDIR);
        };
        op.apply(&mut f.volatile);
        f.pending.push(op);
        let now = SystemTime::now();
        inode.mtime = now;
        inode.ctime = now;
        Ok(())
    }

    /// Writes to the volatile content and records a pending [`PendingOp::Write`].
    pub fn write(&mut self, ino: u64, offset: u64, data: &[u8]) -> FsResult<usize> {
        match offset.checked_add(data.len() as u64) {
            Some(end) if end <= MAX_FILE_SIZE => {}
            _ => return Err(Errno::EFBIG),
        }
        self.file(ino)?;
        self.writes += 1;
        if !data.is_empty() {
            self.file_op(
                ino,
                PendingOp::Write {
                    offset,
                    data: data.to_vec(),
                },
            )?;
        }
        Ok(data.len())
    }

    /// Truncates or extends; records a pending [`PendingOp::SetLen`] if the size changes.
    pub fn set_len(&mut self, ino: u64, len: u64) -> FsResult<()> {
        if len > MAX_FILE_SIZE {
            return Err(Errno::EFBIG);
        }
        if self.file(ino)?.volatile.len() == len {
            self.touch(ino);
            return Ok(());
        }
        self.file_op(ino, PendingOp::SetLen { len })
    }

    /// `fallocate`: mode 0 extends the size (a pending [`PendingOp::SetLen`]) when the range
    /// ends past EOF, `FALLOC_FL_KEEP_SIZE` alone does nothing, other modes are `EOPNOTSUPP`.
    pub fn fallocate(&mut self, ino: u64, offset: u64, length: u64, mode: i32) -> FsResult<()> {
        if mode != 0 && mode != libc::FALLOC_FL_KEEP_SIZE {
            return Err(Errno::EOPNOTSUPP);
        }
        if length == 0 {
            return Err(Errno::EINVAL);
        }
        let end = match offset.checked_add(length) {
            Some(end) if end <= MAX_FILE_SIZE => end,
            _ => return Err(Errno::EFBIG),
        };
        let len = self.file(ino)?.volatile.len();
        if mode == 0 && end > len {
            self.file_op(ino, PendingOp::SetLen { len: end })?;
        }
        Ok(())
    }

    /// Sets the permission bits.
    pub fn chmod(&mut self, ino: u64, perm: u16) -> FsResult<()> {
        let inode = self.inode_mut(ino)?;
        inode.perm = perm & 0o7777;
        inode.ctime = SystemTime::now();
        Ok(())
    }

    /// Sets owner and/or group.
    pub fn chown(&mut self, ino: u64, uid: Option<u32>, gid: Option<u32>) -> FsResult<()> {
        let inode = self.inode_mut(ino)?;
        if let Some(uid) = uid {
            inode.uid = uid;
        }
        if let Some(gid) = gid {
            inode.gid = gid;
        }
        inode.ctime = SystemTime::now();
        Ok(())
    }

    /// Sets access and/or modification time.
    pub fn set_times(
        &mut self,
        ino: u64,
        atime: Option<SystemTime>,
        mtime: Option<SystemTime>,
    ) -> FsResult<()> {
        let inode = self.inode_mut(ino)?;
        if let Some(t) = atime {
            inode.atime = t;
        }
        if let Some(t) = mtime {
            inode.mtime = t;
        }
        inode.ctime = SystemTime::now();
        Ok(())
    }

    /// Counts an open handle (an open inode is never freed).
    pub fn open(&mut self, ino: u64) -> FsResult<Kind> {
        let inode = self.inode_mut(ino)?;
        inode.open += 1;
        Ok(inode.kind())
    }

    /// Drops an open handle; never syncs anything.
    pub fn release(&mut self, ino: u64) {
        if let Some(inode) = self.inodes.get_mut(&ino) {
            inode.open = inode.open.saturating_sub(1);
            if inode.open == 0 && inode.unlinked {
                self.gc_pending = true;
                self.maybe_gc();
            }
        }
    }

    /// Makes a file's content and size durable (not its name). `EISDIR` for a directory.
    pub fn fsync_file(&mut self, ino: u64) -> FsResult<()> {
        let Node::File(f) = &mut self.inode_mut(ino)?.node else {
            return Err(Errno::EISDIR);
        };
        f.durable = f.volatile.clone();
        f.pending.clear();
        self.fsyncs += 1;
        Ok(())
    }

    /// Makes a directory's entries durable (only that directory's). `ENOTDIR` for a file.
    pub fn fsync_dir(&mut self, ino: u64) -> FsResult<()> {
        let d = self.dir_mut(ino)?;
        if d.durable != d.volatile {
            d.durable = d.volatile.clone();
            self.gc_pending = true;
        }
        self.dir_fsyncs += 1;
        self.maybe_gc();
        Ok(())
    }

    /// [`Model::fsync_file`] or [`Model::fsync_dir`], by kind.
    pub fn fsync(&mut self, ino: u64) -> FsResult<()> {
        match self.inode(ino)?.kind() {
            Kind::File => self.fsync_file(ino),
            Kind::Dir => self.fsync_dir(ino),
        }
    }

    /// Capacity and free space for statfs.
    pub fn statfs(&self) -> StatFs {
        let used: u64 = self
            .inodes
            .values()
            .map(|i| match &i.node {
                Node::File(f) => f.volatile.len(),
                Node::Dir(_) => 0,
            })
            .fold(0u64, u64::saturating_add);
        StatFs {
            total_bytes: self.capacity,
            free_bytes: self.capacity.saturating_sub(used),
            inodes: self.inodes.len() as u64,
        }
    }

    fn maybe_gc(&mut self) -> usize {
        if !self.gc_pending {
            return 0;
        }
        self.gc_pending = false;
        self.gc()
    }

    /// Frees every inode that no entry map (volatile or durable) reachable from the root names
    /// and that is not open. Returns how many were freed.
    fn gc(&mut self) -> usize {
        let mut live = HashSet::new();
        let mut stack: Vec<u64> = vec![ROOT_INO];
        stack.extend(
            self.inodes
                .iter()
                .filter(|(_, i)| i.open > 0)
                .map(|(ino, _)| *ino),
        );
        while let Some(ino) = stack.pop() {
            if !live.insert(ino) {
                continue;
            }
            if let Some(Inode {
                node: Node::Dir(d), ..
            }) = self.inodes.get(&ino)
            {
                stack.extend(
                    d.volatile
                        .values()
                        .chain(d.durable.values())
                        .filter(|c| !live.contains(*c)),
                );
            }
        }
        let before = self.inodes.len();
        self.inodes.retain(|ino, _| live.contains(ino));
        before - self.inodes.len()
    }

    /// Simulates a power cut; see the module docs. Open handles are forgotten (the FUSE session
    /// that held them is gone).
    pub fn cut(&mut self, mode: CutMode, seed: u64) -> CutReport {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut report = CutReport {
            mode,
            seed,
            files_with_unsynced_data: 0,
            pending_ops: 0,
            ops_discarded: 0,
            bytes_discarded: 0,
            torn_writes: 0,
            dirs_reverted: 0,
            entries_reverted: 0,
            aliases_dropped: 0,
            inodes_freed: 0,
            forced_unmount: false,
        };
        self.cuts += 1;
        for inode in self.inodes.values_mut() {
            inode.open = 0;
            inode.unlinked = false;
            match &mut inode.node {
                Node::Dir(d) => {
                    let differ = entries_differ(&d.volatile, &d.durable);
                    if differ > 0 {
                        report.dirs_reverted += 1;
                        report.entries_reverted += differ;
                        d.volatile = d.durable.clone();
                    }
                }
                Node::File(f) => {
                    if f.pending.is_empty() {
                        f.volatile = f.durable.clone();
                        continue;
                    }
                    report.files_with_unsynced_data += 1;
                    report.pending_ops += f.pending.len();
                    let (content, outcome) = replay_pending(mode, &f.durable, &f.pending, &mut rng);
                    report.ops_discarded += outcome.ops_discarded;
                    report.bytes_discarded += outcome.bytes_discarded;
                    report.torn_writes += usize::from(outcome.torn);
                    f.durable = content.clone();
                    f.volatile = content;
                    f.pending.clear();
                }
            }
        }
        // Make the durable graph a tree again: breadth first from the root, a directory keeps
        // the first name that reaches it.
        let mut reached = HashSet::from([ROOT_INO]);
        let mut queue = VecDeque::from([ROOT_INO]);
        while let Some(dir_ino) = queue.pop_front() {
            let entries: Vec<(OsString, u64)> = match self.inodes.get(&dir_ino) {
                Some(Inode {
                    node: Node::Dir(d), ..
                }) => d.durable.iter().map(|(n, i)| (n.clone(), *i)).collect(),
                _ => continue,
            };
            let mut dropped = Vec::new();
            for (name, child) in entries {
                match self.inodes.get_mut(&child).map(|i| &mut i.node) {
                    None => dropped.push(name),
                    Some(Node::Dir(d)) => {
                        if reached.insert(child) {
                            d.parent = dir_ino;
                            queue.push_back(child);
                        } else {
                            report.aliases_dropped += 1;
                            dropped.push(name);
                        }
                    }
                    Some(Node::File(_)) => {
                        reached.insert(child);
                    }
                }
            }
            if let Some(Inode {
                node: Node::Dir(d), ..
            }) = self.inodes.get_mut(&dir_ino)
            {
                for name in dropped {
                    d.durable.remove(&name);
                    d.volatile.remove(&name);
                }
            }
        }
        let before = self.inodes.len();
        self.inodes.retain(|ino, _| reached.contains(ino));
        report.inodes_freed = before - self.inodes.len();
        self.gc_pending = false;
        report
    }

    /// Counters and sizes.
    pub fn stats(&self) -> Stats {
        let mut s = Stats {
            cuts: self.cuts,
            inodes: self.inodes.len(),
            fsyncs: self.fsyncs,
            dir_fsyncs: self.dir_fsyncs,
            writes: self.writes,
            ..Stats::default()
        };
        let mut pages = HashSet::new();
        for inode in self.inodes.values() {
            s.open_handles += inode.open;
            match &inode.node {
                Node::File(f) => {
                    s.files += 1;
                    s.volatile_bytes = s.volatile_bytes.saturating_add(f.volatile.len());
                    if !f.pending.is_empty() {
                        s.unsynced_files += 1;
                        s.pending_ops += f.pending.len();
                        s.pending_bytes += f.pending.iter().map(PendingOp::data_len).sum::<u64>();
                    }
                    f.volatile.page_ptrs(&mut pages);
                    f.durable.page_ptrs(&mut pages);
                }
                Node::Dir(d) => {
                    s.dirs += 1;
                    if d.durable != d.volatile {
                        s.unsynced_dirs += 1;
                    }
                }
            }
        }
        s.resident_bytes = pages.len() as u64 * PAGE_BYTES;
        s
    }

    /// The inode a relative path names in the volatile tree (`""` is the root).
    pub fn resolve(&self, path: &Path) -> FsResult<u64> {
        let mut ino = ROOT_INO;
        for component in path.components() {
            match component {
                Component::Normal(name) => {
                    ino = *self.dir(ino)?.volatile.get(name).ok_or(Errno::ENOENT)?
                }
                Component::CurDir | Component::RootDir => {}
                Component::ParentDir => ino = self.dir(ino)?.parent,
                Component::Prefix(_) => return Err(Errno::EINVAL),
            }
        }
        Ok(ino)
    }

    /// The pending operations of a file, oldest first.
    pub fn pending_ops(&self, ino: u64) -> FsResult<Vec<PendingOp>> {
        Ok(self.file(ino)?.pending.clone())
    }

    /// Every path of the volatile tree (relative, root excluded) with its node; a directory met
    /// twice is listed once.
    pub fn snapshot(&self) -> BTreeMap<PathBuf, SnapNode> {
        let mut out = BTreeMap::new();
        let mut seen = HashSet::from([ROOT_INO]);
        let mut stack = vec![(PathBuf::new(), ROOT_INO)];
        while let Some((path, ino)) = stack.pop() {
            let Ok(dir) = self.dir(ino) else { continue };
            for (name, child) in &dir.volatile {
                let child_path = path.join(name);
                match self.inodes.get(child).map(|i| &i.node) {
                    Some(Node::File(f)) => {
                        out.insert(child_path, SnapNode::File(f.volatile.to_vec()));
                    }
                    Some(Node::Dir(_)) => {
                        out.insert(child_path.clone(), SnapNode::Dir);
                        if seen.insert(*child) {
                            stack.push((child_path, *child));
                        }
                    }
                    None => {}
                }
            }
        }
        out
    }

    /// Checks internal invariants (volatile = durable + pending for every file, every entry
    /// names a live inode, the root is a directory); a debugging aid for tests.
    pub fn check_invariants(&self) -> Result<(), String> {
        if !matches!(
            self.inodes.get(&ROOT_INO).map(|i| &i.node),
            Some(Node::Dir(_))
        ) {
            return Err("root is missing or not a directory".into());
        }
        for (ino, inode) in &self.inodes {
            match &inode.node {
                Node::File(f) => {
                    let mut replayed = f.durable.clone();
                    for op in &f.pending {
                        op.apply(&mut replayed);
                    }
                    if replayed != f.volatile {
                        return Err(format!("inode {ino}: durable + pending != volatile"));
                    }
                }
                Node::Dir(d) => {
                    for (name, child) in d.volatile.iter().chain(d.durable.iter()) {
                        if !self.inodes.contains_key(child) {
                            return Err(format!(
                                "inode {ino}: entry {name:?} names freed inode {child}"
                            ));
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> &OsStr {
        OsStr::new(s)
    }

    #[test]
    fn content_sparse_read_write_truncate() {
        let mut c = Content::new();
        c.set_len(64 << 20);
        assert_eq!(c.len(), 64 << 20);
        assert_eq!(c.resident_pages(), 0);
        assert_eq!(c.read(10 << 20, 8), vec![0; 8]);
        c.write(CHUNK_BYTES - 3, b"abcdef");
        assert_eq!(c.resident_pages(), 2);
        assert_eq!(c.read(CHUNK_BYTES - 4, 8), b"\0abcdef\0");
        c.set_len(CHUNK_BYTES - 1);
        assert_eq!(c.len(), CHUNK_BYTES - 1);
        assert_eq!(c.resident_pages(), 1);
        c.set_len(CHUNK_BYTES + 10);
        // The truncated tail reads as zeros once the file grows again.
        assert_eq!(c.read(CHUNK_BYTES - 4, 20), b"\0ab\0\0\0\0\0\0\0\0\0\0\0");
        c.set_len(0);
        assert_eq!(c.resident_pages(), 0);
        assert!(c.is_empty());
        assert!(c.read(0, 10).is_empty());
    }

    #[test]
    fn content_truncate_mid_page_zeroes_tail() {
        let mut c = Content::from_bytes(&[7u8; 5000]);
        c.set_len(4100);
        c.set_len(5000);
        let v = c.to_vec();
        assert!(v[..4100].iter().all(|&b| b == 7));
        assert!(v[4100..].iter().all(|&b| b == 0));
    }

    #[test]
    fn content_clone_is_copy_on_write() {
        let mut a = Content::from_bytes(&vec![1u8; 3 * PAGE_SIZE]);
        let b = a.clone();
        a.write(PAGE_SIZE as u64, &[2u8; 10]);
        assert_eq!(b.to_vec(), vec![1u8; 3 * PAGE_SIZE]);
        assert_eq!(
            a.read(PAGE_SIZE as u64 - 1, 12),
            [&[1u8][..], &[2u8; 10], &[1u8]].concat()
        );
        let mut pages = HashSet::new();
        a.page_ptrs(&mut pages);
        b.page_ptrs(&mut pages);
        // Only the written page was copied.
        assert_eq!(pages.len(), 4);
    }

    #[test]
    fn fsync_of_large_file_shares_pages() {
        let mut m = Model::new(1 << 34);
        let f = m.create(ROOT_INO, name("big"), 0o644, 0, 0).unwrap().ino;
        m.write(f, 0, &vec![9u8; 8 << 20]).unwrap();
        m.fsync_file(f).unwrap();
        let s = m.stats();
        assert_eq!(
            s.resident_bytes,
            8 << 20,
            "durable and volatile share pages"
        );
        assert_eq!(s.pending_ops, 0);
    }

    #[test]
    fn file_synced_but_dir_not_is_gone_after_cut() {
        let mut m = Model::new(1 << 30);
        let f = m.create(ROOT_INO, name("a"), 0o644, 0, 0).unwrap().ino;
        m.write(f, 0, b"hello").unwrap();
        m.fsync_file(f).unwrap();
        let r = m.cut(CutMode::Drop, 1);
        assert_eq!(m.lookup(ROOT_INO, name("a")), Err(Errno::ENOENT));
        assert_eq!(r.entries_reverted, 1);
        assert_eq!(r.inodes_freed, 1);
        assert_eq!(m.stats().inodes, 1);
    }

    #[test]
    fn dir_synced_but_file_not_keeps_last_synced_content() {
        let mut m = Model::new(1 << 30);
        let f = m.create(ROOT_INO, name("a"), 0o644, 0, 0).unwrap().ino;
        m.write(f, 0, b"first").unwrap();
        m.fsync_dir(ROOT_INO).unwrap();
        let r = m.cut(CutMode::Drop, 1);
        assert_eq!(r.files_with_unsynced_data, 1);
        assert_eq!(r.bytes_discarded, 5);
        let a = m.lookup(ROOT_INO, name("a")).unwrap();
        assert_eq!(a.size, 0);

        m.write(a.ino, 0, b"second").unwrap();
        m.fsync_file(a.ino).unwrap();
        m.write(a.ino, 6, b" and more").unwrap();
        m.set_len(a.ino, 100).unwrap();
        m.cut(CutMode::Drop, 2);
        assert_eq!(m.read(a.ino, 0, 100).unwrap(), b"second");
    }

    #[test]
    fn unlink_and_rename_without_dir_sync_are_undone() {
        let mut m = Model::new(1 << 30);
        let a = m.create(ROOT_INO, name("a"), 0o644, 0, 0).unwrap().ino;
        let b = m.create(ROOT_INO, name("b"), 0o644, 0, 0).unwrap().ino;
        m.write(a, 0, b"AAA").unwrap();
        m.write(b, 0, b"BBB").unwrap();
        m.fsync_file(a).unwrap();
        m.fsync_file(b).unwrap();
        m.fsync_dir(ROOT_INO).unwrap();

        m.unlink(ROOT_INO, name("a")).unwrap();
        m.rename(ROOT_INO, name("b"), ROOT_INO, name("c"), false)
            .unwrap();
        assert_eq!(
            m.stats().inodes,
            3,
            "unlinked but durably named file is kept"
        );
        let r = m.cut(CutMode::Drop, 0);
        assert_eq!(r.entries_reverted, 3); // a back, b back, c gone
        assert_eq!(
            m.read(m.lookup(ROOT_INO, name("a")).unwrap().ino, 0, 10)
                .unwrap(),
            b"AAA"
        );
        assert_eq!(
            m.read(m.lookup(ROOT_INO, name("b")).unwrap().ino, 0, 10)
                .unwrap(),
            b"BBB"
        );
        assert_eq!(m.lookup(ROOT_INO, name("c")), Err(Errno::ENOENT));
    }

    #[test]
    fn rename_over_file_without_dir_sync_brings_old_content_back() {
        let mut m = Model::new(1 << 30);
        let old = m.create(ROOT_INO, name("cur"), 0o644, 0, 0).unwrap().ino;
        m.write(old, 0, b"old").unwrap();
        m.fsync_file(old).unwrap();
        m.fsync_dir(ROOT_INO).unwrap();
        let new = m.create(ROOT_INO, name("tmp"), 0o644, 0, 0).unwrap().ino;
        m.write(new, 0, b"new").unwrap();
        m.fsync_file(new).unwrap();
        m.rename(ROOT_INO, name("tmp"), ROOT_INO, name("cur"), false)
            .unwrap();
        assert_eq!(
            m.read(m.lookup(ROOT_INO, name("cur")).unwrap().ino, 0, 9)
                .unwrap(),
            b"new"
        );
        m.cut(CutMode::Drop, 0);
        assert_eq!(
            m.read(m.lookup(ROOT_INO, name("cur")).unwrap().ino, 0, 9)
                .unwrap(),
            b"old"
        );
        assert_eq!(m.lookup(ROOT_INO, name("tmp")), Err(Errno::ENOENT));
        // With the directory synced the rename is durable, and the old inode is freed.
        let new = m.create(ROOT_INO, name("tmp"), 0o644, 0, 0).unwrap().ino;
        m.write(new, 0, b"new").unwrap();
        m.fsync_file(new).unwrap();
        m.rename(ROOT_INO, name("tmp"), ROOT_INO, name("cur"), false)
            .unwrap();
        m.fsync_dir(ROOT_INO).unwrap();
        assert_eq!(m.stats().inodes, 2);
        m.cut(CutMode::Drop, 0);
        assert_eq!(
            m.read(m.lookup(ROOT_INO, name("cur")).unwrap().ino, 0, 9)
                .unwrap(),
            b"new"
        );
    }

    #[test]
    fn nested_dir_needs_parent_sync() {
        let mut m = Model::new(1 << 30);
        let d = m.mkdir(ROOT_INO, name("d"), 0o755, 0, 0).unwrap().ino;
        let f = m.create(d, name("f"), 0o644, 0, 0).unwrap().ino;
        m.write(f, 0, b"x").unwrap();
        m.fsync_file(f).unwrap();
        m.fsync_dir(d).unwrap();
        let r = m.cut(CutMode::Drop, 0);
        assert_eq!(m.lookup(ROOT_INO, name("d")), Err(Errno::ENOENT));
        assert_eq!(r.inodes_freed, 2);

        let d = m.mkdir(ROOT_INO, name("d"), 0o755, 0, 0).unwrap().ino;
        let f = m.create(d, name("f"), 0o644, 0, 0).unwrap().ino;
        m.write(f, 0, b"x").unwrap();
        m.fsync_file(f).unwrap();
        m.fsync_dir(d).unwrap();
        m.fsync_dir(ROOT_INO).unwrap();
        m.cut(CutMode::Drop, 0);
        assert_eq!(
            m.snapshot().get(Path::new("d/f")),
            Some(&SnapNode::File(b"x".to_vec()))
        );
    }

    #[test]
    fn cross_directory_rename_sides_are_independent() {
        let mut m = Model::new(1 << 30);
        let a = m.mkdir(ROOT_INO, name("a"), 0o755, 0, 0).unwrap().ino;
        let b = m.mkdir(ROOT_INO, name("b"), 0o755, 0, 0).unwrap().ino;
        let f = m.create(a, name("f"), 0o644, 0, 0).unwrap().ino;
        m.fsync_file(f).unwrap();
        for d in [ROOT_INO, a, b] {
            m.fsync_dir(d).unwrap();
        }
        m.rename(a, name("f"), b, name("g"), false).unwrap();
        m.fsync_dir(b).unwrap();
        m.cut(CutMode::Drop, 0);
        let snap = m.snapshot();
        assert!(snap.contains_key(Path::new("a/f")) && snap.contains_key(Path::new("b/g")));

        m.rename(a, name("f"), b, name("h"), false).unwrap();
        m.fsync_dir(a).unwrap();
        m.cut(CutMode::Drop, 0);
        let snap = m.snapshot();
        assert!(!snap.contains_key(Path::new("a/f")) && !snap.contains_key(Path::new("b/h")));
        assert!(snap.contains_key(Path::new("b/g")));
    }

    #[test]
    fn directory_aliases_are_dropped_at_cut() {
        // a/b moved to the root as c, a moved into c: syncing only c makes a durable cycle.
        let mut m = Model::new(1 << 30);
        let a = m.mkdir(ROOT_INO, name("a"), 0o755, 0, 0).unwrap().ino;
        let b = m.mkdir(a, name("b"), 0o755, 0, 0).unwrap().ino;
        m.fsync_dir(ROOT_INO).unwrap();
        m.fsync_dir(a).unwrap();
        m.rename(a, name("b"), ROOT_INO, name("c"), false).unwrap();
        m.rename(ROOT_INO, name("a"), b, name("a"), false).unwrap();
        m.fsync_dir(b).unwrap();
        let r = m.cut(CutMode::Drop, 0);
        assert_eq!(r.aliases_dropped, 1);
        let snap = m.snapshot();
        assert_eq!(
            snap.keys().cloned().collect::<Vec<_>>(),
            vec![PathBuf::from("a"), PathBuf::from("a/b")]
        );
        m.check_invariants().unwrap();
        // The tree is consistent again: b's parent is a.
        assert_eq!(m.readdir(b).unwrap()[1].ino, a);
    }

    #[test]
    fn errors_like_a_real_fs() {
        let mut m = Model::new(1 << 30);
        let f = m.create(ROOT_INO, name("f"), 0o644, 0, 0).unwrap().ino;
        let d = m.mkdir(ROOT_INO, name("d"), 0o755, 0, 0).unwrap().ino;
        m.create(d, name("x"), 0o644, 0, 0).unwrap();
        let e = m.mkdir(ROOT_INO, name("e"), 0o755, 0, 0).unwrap().ino;
        assert_eq!(
            m.create(ROOT_INO, name("f"), 0o644, 0, 0),
            Err(Errno::EEXIST)
        );
        assert_eq!(
            m.mkdir(ROOT_INO, name("d"), 0o755, 0, 0),
            Err(Errno::EEXIST)
        );
        assert_eq!(m.lookup(ROOT_INO, name("nope")), Err(Errno::ENOENT));
        assert_eq!(m.lookup(f, name("x")), Err(Errno::ENOTDIR));
        assert_eq!(m.create(f, name("x"), 0o644, 0, 0), Err(Errno::ENOTDIR));
        let long = "n".repeat(256);
        assert_eq!(
            m.create(ROOT_INO, name(&long), 0o644, 0, 0),
            Err(Errno::ENAMETOOLONG)
        );
        assert_eq!(m.lookup(ROOT_INO, name(&long)), Err(Errno::ENAMETOOLONG));
        assert!(m.create(ROOT_INO, name(&long[..255]), 0o644, 0, 0).is_ok());
        assert_eq!(m.unlink(ROOT_INO, name("d")), Err(Errno::EISDIR));
        assert_eq!(m.rmdir(ROOT_INO, name("f")), Err(Errno::ENOTDIR));
        assert_eq!(m.rmdir(ROOT_INO, name("d")), Err(Errno::ENOTEMPTY));
        assert_eq!(
            m.rename(ROOT_INO, name("e"), ROOT_INO, name("d"), false),
            Err(Errno::ENOTEMPTY)
        );
        assert_eq!(
            m.rename(ROOT_INO, name("e"), ROOT_INO, name("f"), false),
            Err(Errno::ENOTDIR)
        );
        assert_eq!(
            m.rename(ROOT_INO, name("f"), ROOT_INO, name("e"), false),
            Err(Errno::EISDIR)
        );
        assert_eq!(
            m.rename(ROOT_INO, name("d"), d, name("inside"), false),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            m.rename(ROOT_INO, name("f"), ROOT_INO, name("d"), true),
            Err(Errno::EEXIST)
        );
        assert_eq!(m.write(d, 0, b"x"), Err(Errno::EISDIR));
        assert_eq!(m.read(d, 0, 1), Err(Errno::EISDIR));
        assert_eq!(m.write(f, MAX_FILE_SIZE, b"x"), Err(Errno::EFBIG));
        assert_eq!(m.write(f, u64::MAX, b"x"), Err(Errno::EFBIG));
        assert_eq!(
            m.fallocate(
                f,
                0,
                10,
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE
            ),
            Err(Errno::EOPNOTSUPP)
        );
        assert_eq!(m.getattr(999), Err(Errno::ENOENT));
        assert_eq!(m.fsync_file(d), Err(Errno::EISDIR));
        assert_eq!(m.fsync_dir(f), Err(Errno::ENOTDIR));
        // Empty directory replaced by rename, directory onto an empty one works.
        m.rename(ROOT_INO, name("e"), ROOT_INO, name("e2"), false)
            .unwrap();
        m.mkdir(ROOT_INO, name("e3"), 0o755, 0, 0).unwrap();
        m.rename(ROOT_INO, name("e2"), ROOT_INO, name("e3"), false)
            .unwrap();
        assert_eq!(m.lookup(ROOT_INO, name("e3")).unwrap().ino, e);
        m.check_invariants().unwrap();
    }

    #[test]
    fn fallocate_and_set_len_are_pending_ops() {
        let mut m = Model::new(1 << 30);
        let f = m.create(ROOT_INO, name("f"), 0o644, 0, 0).unwrap().ino;
        m.fallocate(f, 0, 100, libc::FALLOC_FL_KEEP_SIZE).unwrap();
        assert_eq!(m.getattr(f).unwrap().size, 0);
        m.fallocate(f, 10, 90, 0).unwrap();
        assert_eq!(m.getattr(f).unwrap().size, 100);
        m.fallocate(f, 0, 50, 0).unwrap();
        m.set_len(f, 40).unwrap();
        assert_eq!(
            m.pending_ops(f).unwrap(),
            vec![
                PendingOp::SetLen { len: 100 },
                PendingOp::SetLen { len: 40 }
            ]
        );
        assert_eq!(m.getattr(f).unwrap().blocks, 1);
    }

    #[test]
    fn open_unlinked_file_lives_until_release() {
        let mut m = Model::new(1 << 30);
        let f = m.create(ROOT_INO, name("f"), 0o644, 0, 0).unwrap().ino;
        m.open(f).unwrap();
        m.unlink(ROOT_INO, name("f")).unwrap();
        m.write(f, 0, b"still here").unwrap();
        assert_eq!(m.read(f, 0, 100).unwrap(), b"still here");
        m.release(f);
        assert_eq!(m.getattr(f), Err(Errno::ENOENT));
        assert_eq!(m.stats().inodes, 1);
    }

    #[test]
    fn durably_named_unlinked_open_file_is_freed_by_the_last_of_release_and_dir_sync() {
        let mut m = Model::new(1 << 30);
        let f = m.create(ROOT_INO, name("f"), 0o644, 0, 0).unwrap().ino;
        m.fsync_dir(ROOT_INO).unwrap();
        m.open(f).unwrap();
        m.unlink(ROOT_INO, name("f")).unwrap();
        m.release(f);
        assert!(m.getattr(f).is_ok(), "a cut would bring it back");
        m.open(f).unwrap();
        m.fsync_dir(ROOT_INO).unwrap();
        assert!(m.getattr(f).is_ok(), "still open");
        m.release(f);
        assert_eq!(m.getattr(f), Err(Errno::ENOENT));
        m.check_invariants().unwrap();
    }

    #[test]
    fn statfs_counts_volatile_sizes() {
        let mut m = Model::new(1 << 20);
        let f = m.create(ROOT_INO, name("f"), 0o644, 0, 0).unwrap().ino;
        m.set_len(f, 1000).unwrap();
        assert_eq!(m.statfs().free_bytes, (1 << 20) - 1000);
        m.set_len(f, 10 << 20).unwrap();
        assert_eq!(m.statfs().free_bytes, 0);
    }

    #[test]
    fn torn_cut_tears_at_sector_boundaries() {
        let mut seen_lengths = HashSet::new();
        for seed in 0..300 {
            let mut m = Model::new(1 << 30);
            let f = m.create(ROOT_INO, name("f"), 0o644, 0, 0).unwrap().ino;
            m.fsync_dir(ROOT_INO).unwrap();
            m.write(f, 100, &[1u8; 2000]).unwrap();
            let r = m.cut(CutMode::Torn, seed);
            let len = m.getattr(f).unwrap().size;
            // Nothing, a prefix ending at 512/1024/1536/2048, or everything.
            assert!([0, 512, 1024, 1536, 2048, 2100].contains(&len), "len {len}");
            assert_eq!(r.torn_writes, usize::from(len != 0 && len != 2100));
            assert_eq!(r.bytes_discarded, 2100 - len.max(100));
            seen_lengths.insert(len);
        }
        assert_eq!(
            seen_lengths.len(),
            6,
            "every tear point is reachable: {seen_lengths:?}"
        );
    }

    #[test]
    fn cut_is_reproducible() {
        let run = |seed| {
            let mut m = Model::new(1 << 30);
            let f = m.create(ROOT_INO, name("f"), 0o644, 0, 0).unwrap().ino;
            m.fsync_dir(ROOT_INO).unwrap();
            for i in 0..20u64 {
                m.write(f, i * 700, &[i as u8; 700]).unwrap();
            }
            m.cut(CutMode::Reorder, seed);
            m.read(f, 0, 20 * 700).unwrap()
        };
        assert_eq!(run(42), run(42));
        assert_ne!(run(42), run(43));
    }
}
