//! What makes state durable (the file and directory fsyncs) and the power cut, which keeps
//! only that (and, by [`CutMode`], part of the pending operations).

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::ffi::OsString;
use std::fmt;

use rand::rngs::StdRng;
use rand::SeedableRng;

use super::errno::{Errno, FsResult};
use super::inode::{Inode, Kind, Model, Node, ROOT_INO};
use super::pending::{replay_pending, CutMode};

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

fn entries_differ(a: &BTreeMap<OsString, u64>, b: &BTreeMap<OsString, u64>) -> usize {
    let changed_or_removed = a
        .iter()
        .filter(|(name, ino)| b.get(*name) != Some(ino))
        .count();
    let added = b.keys().filter(|name| !a.contains_key(*name)).count();
    changed_or_removed + added
}

impl Model {
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
}

#[cfg(test)]
mod tests;
