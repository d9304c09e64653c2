//! Attributes as `stat` shows them, and the metadata changes (mode, owner, times), which are
//! not layered: they take effect at once and survive cuts.

use std::time::SystemTime;

use super::content::{PAGE_BYTES, PAGE_SIZE};
use super::errno::FsResult;
use super::inode::{Inode, Kind, Model, Node};

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

impl Model {
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
}
