//! Looking at the model from outside: counters, statfs, a file's pending operations, a
//! snapshot of the tree, and the invariant check.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::path::PathBuf;

use super::content::PAGE_BYTES;
use super::errno::FsResult;
use super::inode::{Model, Node, ROOT_INO};
use super::pending::PendingOp;

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

impl fmt::Debug for Model {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Model")
            .field("stats", &self.stats())
            .finish()
    }
}

impl Model {
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
