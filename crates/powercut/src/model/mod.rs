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
//!
//! # Where
//!
//! `inode` the inodes, their two layers and the table of them ([`Model`]); `content` sparse
//! copy-on-write file content; `pending` the operations not yet synced and what a cut keeps of
//! them; `names` directory entries (create, lookup, rename, remove, list); `data` reads,
//! writes and size changes; `attr` attributes and the metadata that is not layered; `lifetime`
//! open handles and when an inode is freed; `durability` the fsyncs and the cut; `inspect`
//! counters, statfs, snapshots and the invariant check; `errno` the errors.

mod attr;
mod content;
mod data;
mod durability;
mod errno;
mod inode;
mod inspect;
mod lifetime;
mod names;
mod pending;
#[cfg(test)]
mod tests;

pub use attr::Attr;
pub use content::{Content, MAX_FILE_SIZE, PAGE_SIZE};
pub use durability::CutReport;
pub use errno::{Errno, FsResult};
pub use inode::{Kind, Model, ROOT_INO};
pub use inspect::{SnapNode, StatFs, Stats};
pub use names::{DirEntry, NAME_MAX};
pub use pending::{replay_pending, CutMode, PendingOp, ReplayOutcome, SECTOR_SIZE};
