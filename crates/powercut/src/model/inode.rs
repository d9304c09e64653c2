//! Inodes, the two layers each keeps (a file's content and pending operations, a directory's
//! entries), and the table of them: [`Model`], with the accessors the operations share.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::time::SystemTime;

use super::content::Content;
use super::errno::{Errno, FsResult};
use super::pending::PendingOp;

/// The root directory's inode number; it always exists.
pub const ROOT_INO: u64 = 1;

/// File or directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Regular file.
    File,
    /// Directory.
    Dir,
}

pub(super) struct FileNode {
    pub(super) durable: Content,
    pub(super) volatile: Content,
    pub(super) pending: Vec<PendingOp>,
}

pub(super) struct DirNode {
    pub(super) durable: BTreeMap<OsString, u64>,
    pub(super) volatile: BTreeMap<OsString, u64>,
    /// Parent in the volatile tree (the root is its own parent).
    pub(super) parent: u64,
}

pub(super) enum Node {
    File(FileNode),
    Dir(DirNode),
}

pub(super) struct Inode {
    pub(super) node: Node,
    pub(super) perm: u16,
    pub(super) uid: u32,
    pub(super) gid: u32,
    pub(super) atime: SystemTime,
    pub(super) mtime: SystemTime,
    pub(super) ctime: SystemTime,
    pub(super) open: u64,
    /// Lost a volatile name (unlink, rmdir, replaced by rename) since the last cut: it may be
    /// unreachable, so its last release runs the garbage collection.
    pub(super) unlinked: bool,
}

impl Inode {
    pub(super) fn new(node: Node, perm: u16, uid: u32, gid: u32) -> Self {
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

    pub(super) fn kind(&self) -> Kind {
        match self.node {
            Node::File(_) => Kind::File,
            Node::Dir(_) => Kind::Dir,
        }
    }
}

/// The whole file system: inodes and both layers. See the module docs for the rules.
pub struct Model {
    pub(super) inodes: BTreeMap<u64, Inode>,
    pub(super) next_ino: u64,
    pub(super) capacity: u64,
    pub(super) cuts: u64,
    pub(super) gc_pending: bool,
    pub(super) fsyncs: u64,
    pub(super) dir_fsyncs: u64,
    pub(super) writes: u64,
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

    pub(super) fn inode(&self, ino: u64) -> FsResult<&Inode> {
        self.inodes.get(&ino).ok_or(Errno::ENOENT)
    }

    pub(super) fn inode_mut(&mut self, ino: u64) -> FsResult<&mut Inode> {
        self.inodes.get_mut(&ino).ok_or(Errno::ENOENT)
    }

    pub(super) fn dir(&self, ino: u64) -> FsResult<&DirNode> {
        match &self.inode(ino)?.node {
            Node::Dir(d) => Ok(d),
            Node::File(_) => Err(Errno::ENOTDIR),
        }
    }

    pub(super) fn dir_mut(&mut self, ino: u64) -> FsResult<&mut DirNode> {
        match &mut self.inode_mut(ino)?.node {
            Node::Dir(d) => Ok(d),
            Node::File(_) => Err(Errno::ENOTDIR),
        }
    }

    pub(super) fn file(&self, ino: u64) -> FsResult<&FileNode> {
        match &self.inode(ino)?.node {
            Node::File(f) => Ok(f),
            Node::Dir(_) => Err(Errno::EISDIR),
        }
    }

    pub(super) fn touch(&mut self, ino: u64) {
        if let Some(inode) = self.inodes.get_mut(&ino) {
            let now = SystemTime::now();
            inode.mtime = now;
            inode.ctime = now;
        }
    }
}
