//! A file's data: reads from the volatile content, and the writes and size changes that each
//! become a pending operation.

use std::time::SystemTime;

use super::content::MAX_FILE_SIZE;
use super::errno::{Errno, FsResult};
use super::inode::{Model, Node};
use super::pending::PendingOp;

impl Model {
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
}
