//! The `fuser::Filesystem` adapter: translates FUSE requests into [`Model`] calls.
//!
//! Every request locks the shared model and first checks that the model is still in the epoch
//! this session was mounted in, so a session that outlived a cut (a forced, lazy unmount) can
//! never change the state after the cut. No request syncs anything except `FSYNC` and
//! `FSYNCDIR`. The kernel is asked for no writeback cache and files are opened without
//! `FOPEN_KEEP_CACHE`; locks (`flock`, `fcntl`) are left to the kernel's local locking because
//! the session does not ask for `FUSE_POSIX_LOCKS`/`FUSE_FLOCK_LOCKS`.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use fuser::{
    FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, KernelConfig,
    OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};
use parking_lot::Mutex;

use crate::model::{Attr, DirEntry, Errno, FsResult, Kind, Model};

/// Entry and attribute cache lifetime; a cut remounts, so nothing cached outlives it.
const TTL: Duration = Duration::from_secs(1);

pub(crate) struct PowerCutFuse {
    model: Arc<Mutex<Model>>,
    epoch: u64,
    next_fh: AtomicU64,
    /// Directory listings, taken at opendir (and at readdir offset 0), by handle.
    listings: Mutex<HashMap<u64, Vec<DirEntry>>>,
}

fn fuse_errno(e: Errno) -> fuser::Errno {
    fuser::Errno::from_i32(e.0)
}

fn file_type(kind: Kind) -> FileType {
    match kind {
        Kind::File => FileType::RegularFile,
        Kind::Dir => FileType::Directory,
    }
}

fn fuse_attr(a: &Attr) -> FileAttr {
    FileAttr {
        ino: INodeNo(a.ino),
        size: a.size,
        blocks: a.blocks,
        atime: a.atime,
        mtime: a.mtime,
        ctime: a.ctime,
        crtime: a.ctime,
        kind: file_type(a.kind),
        perm: a.perm,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: 0,
        blksize: a.blksize,
        flags: 0,
    }
}

fn time_of(t: TimeOrNow) -> SystemTime {
    match t {
        TimeOrNow::SpecificTime(t) => t,
        TimeOrNow::Now => SystemTime::now(),
    }
}

fn perm_of(mode: u32) -> u16 {
    (mode & 0o7777) as u16
}

impl PowerCutFuse {
    pub(crate) fn new(model: Arc<Mutex<Model>>, epoch: u64) -> Self {
        PowerCutFuse {
            model,
            epoch,
            next_fh: AtomicU64::new(1),
            listings: Mutex::new(HashMap::new()),
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut Model) -> FsResult<R>) -> FsResult<R> {
        let mut model = self.model.lock();
        if model.epoch() != self.epoch {
            return Err(Errno::EIO);
        }
        f(&mut model)
    }

    fn new_fh(&self) -> u64 {
        self.next_fh.fetch_add(1, Ordering::Relaxed)
    }

    fn reply_entry(reply: ReplyEntry, r: FsResult<Attr>) {
        match r {
            Ok(a) => reply.entry(&TTL, &fuse_attr(&a), Generation(0)),
            Err(e) => reply.error(fuse_errno(e)),
        }
    }

    fn reply_empty(reply: ReplyEmpty, r: FsResult<()>) {
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(fuse_errno(e)),
        }
    }
}

impl Filesystem for PowerCutFuse {
    fn init(&mut self, _req: &Request, _config: &mut KernelConfig) -> io::Result<()> {
        // Deliberately no FUSE_WRITEBACK_CACHE, FUSE_POSIX_LOCKS or FUSE_FLOCK_LOCKS.
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        Self::reply_entry(reply, self.with(|m| m.lookup(parent.0, name)));
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.with(|m| m.getattr(ino.0)) {
            Ok(a) => reply.attr(&TTL, &fuse_attr(&a)),
            Err(e) => reply.error(fuse_errno(e)),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let r = self.with(|m| {
            let ino = ino.0;
            if let Some(size) = size {
                m.set_len(ino, size)?;
            }
            if let Some(mode) = mode {
                m.chmod(ino, perm_of(mode))?;
            }
            if uid.is_some() || gid.is_some() {
                m.chown(ino, uid, gid)?;
            }
            if atime.is_some() || mtime.is_some() {
                m.set_times(ino, atime.map(time_of), mtime.map(time_of))?;
            }
            m.getattr(ino)
        });
        match r {
            Ok(a) => reply.attr(&TTL, &fuse_attr(&a)),
            Err(e) => reply.error(fuse_errno(e)),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        if mode & libc::S_IFMT != libc::S_IFREG {
            reply.error(fuser::Errno::EPERM);
            return;
        }
        Self::reply_entry(
            reply,
            self.with(|m| m.create(parent.0, name, perm_of(mode), req.uid(), req.gid())),
        );
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        // Without FUSE_DONT_MASK the kernel has applied the umask to `mode` already.
        Self::reply_entry(
            reply,
            self.with(|m| m.mkdir(parent.0, name, perm_of(mode), req.uid(), req.gid())),
        );
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        Self::reply_empty(reply, self.with(|m| m.unlink(parent.0, name)));
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        Self::reply_empty(reply, self.with(|m| m.rmdir(parent.0, name)));
    }

    fn symlink(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _name: &OsStr,
        _target: &std::path::Path,
        reply: ReplyEntry,
    ) {
        reply.error(fuser::Errno::EPERM);
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        if !(flags - RenameFlags::RENAME_NOREPLACE).is_empty() {
            // RENAME_EXCHANGE, RENAME_WHITEOUT and anything unknown.
            reply.error(fuser::Errno::EINVAL);
            return;
        }
        let noreplace = flags.contains(RenameFlags::RENAME_NOREPLACE);
        Self::reply_empty(
            reply,
            self.with(|m| m.rename(parent.0, name, newparent.0, newname, noreplace)),
        );
    }

    fn link(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _newparent: INodeNo,
        _newname: &OsStr,
        reply: ReplyEntry,
    ) {
        reply.error(fuser::Errno::EPERM);
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        // O_TRUNC arrives as a separate setattr(size = 0): no FUSE_ATOMIC_O_TRUNC.
        match self.with(|m| m.open(ino.0)) {
            Ok(_) => reply.opened(FileHandle(self.new_fh()), FopenFlags::empty()),
            Err(e) => reply.error(fuse_errno(e)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        reply: ReplyData,
    ) {
        match self.with(|m| m.read(ino.0, offset, size as usize)) {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(fuse_errno(e)),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        reply: ReplyWrite,
    ) {
        match self.with(|m| m.write(ino.0, offset, data)) {
            // A write request never exceeds max_write (at most 16 MiB), so this fits.
            Ok(n) => reply.written(u32::try_from(n).unwrap_or(u32::MAX)),
            Err(e) => reply.error(fuse_errno(e)),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: fuser::LockOwner,
        reply: ReplyEmpty,
    ) {
        // Closing a file makes nothing durable.
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        Self::reply_empty(
            reply,
            self.with(|m| {
                m.release(ino.0);
                Ok(())
            }),
        );
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        // fsync and fdatasync alike make content and size durable; a directory (should the
        // kernel ever send FSYNC for one) gets its entries synced.
        Self::reply_empty(reply, self.with(|m| m.fsync(ino.0)));
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let r = self.with(|m| {
            let listing = m.readdir(ino.0)?;
            m.open(ino.0)?;
            Ok(listing)
        });
        match r {
            Ok(listing) => {
                let fh = self.new_fh();
                self.listings.lock().insert(fh, listing);
                reply.opened(FileHandle(fh), FopenFlags::empty());
            }
            Err(e) => reply.error(fuse_errno(e)),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let fresh = if offset == 0 {
            // A rewinddir sees the current entries.
            match self.with(|m| m.readdir(ino.0)) {
                Ok(listing) => Some(listing),
                Err(e) => {
                    reply.error(fuse_errno(e));
                    return;
                }
            }
        } else {
            None
        };
        let mut listings = self.listings.lock();
        if let Some(listing) = fresh {
            listings.insert(fh.0, listing);
        }
        let Some(listing) = listings.get(&fh.0) else {
            drop(listings);
            reply.error(fuser::Errno::EBADF);
            return;
        };
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        for (i, entry) in listing.iter().enumerate().skip(start) {
            if reply.add(
                INodeNo(entry.ino),
                i as u64 + 1,
                file_type(entry.kind),
                &entry.name,
            ) {
                break;
            }
        }
        drop(listings);
        reply.ok();
    }

    fn releasedir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.listings.lock().remove(&fh.0);
        Self::reply_empty(
            reply,
            self.with(|m| {
                m.release(ino.0);
                Ok(())
            }),
        );
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        Self::reply_empty(reply, self.with(|m| m.fsync_dir(ino.0)));
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        match self.with(|m| Ok(m.statfs())) {
            Ok(s) => {
                const BSIZE: u64 = 4096;
                let files = (1u64 << 32).max(s.inodes);
                reply.statfs(
                    s.total_bytes / BSIZE,
                    s.free_bytes / BSIZE,
                    s.free_bytes / BSIZE,
                    files,
                    files - s.inodes,
                    BSIZE as u32,
                    crate::model::NAME_MAX as u32,
                    BSIZE as u32,
                );
            }
            Err(e) => reply.error(fuse_errno(e)),
        }
    }

    fn access(&self, _req: &Request, ino: INodeNo, _mask: fuser::AccessFlags, reply: ReplyEmpty) {
        Self::reply_empty(reply, self.with(|m| m.getattr(ino.0).map(|_| ())));
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let r = self.with(|m| {
            let attr = match m.create(parent.0, name, perm_of(mode), req.uid(), req.gid()) {
                // Only a race makes the kernel send CREATE for an existing name: without O_EXCL
                // that is an ordinary open.
                Err(Errno::EEXIST) if flags & libc::O_EXCL == 0 => {
                    let attr = m.lookup(parent.0, name)?;
                    if attr.kind == Kind::Dir {
                        return Err(Errno::EISDIR);
                    }
                    if flags & libc::O_TRUNC != 0 {
                        m.set_len(attr.ino, 0)?;
                    }
                    m.getattr(attr.ino)?
                }
                other => other?,
            };
            m.open(attr.ino)?;
            Ok(attr)
        });
        match r {
            Ok(a) => reply.created(
                &TTL,
                &fuse_attr(&a),
                Generation(0),
                FileHandle(self.new_fh()),
                FopenFlags::empty(),
            ),
            Err(e) => reply.error(fuse_errno(e)),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        Self::reply_empty(
            reply,
            self.with(|m| m.fallocate(ino.0, offset, length, mode)),
        );
    }
}
