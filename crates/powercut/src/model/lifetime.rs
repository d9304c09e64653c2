//! When an inode is freed: open handles keep it, and the garbage collection frees what no
//! entry map reachable from the root names.

use std::collections::HashSet;

use super::errno::FsResult;
use super::inode::{Inode, Kind, Model, Node, ROOT_INO};

impl Model {
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


    pub(super) fn maybe_gc(&mut self) -> usize {
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
}

#[cfg(test)]
mod tests;
