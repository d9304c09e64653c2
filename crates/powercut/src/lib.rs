//! Spindle's power-loss file system for durability tests.
//!
//! A FUSE file system held entirely in memory in two layers: what is durable (synced) and what
//! is volatile (written, not yet synced). [`PowerCutFs::cut`] simulates losing power: it drops
//! everything not synced (or, in [`CutMode::Torn`] and [`CutMode::Reorder`], keeps part of it)
//! and remounts, so the program under test restarts on exactly what a strict POSIX file system
//! could have kept. The model is stricter than "unsynced data is lost": a name created, renamed
//! or removed is durable only once its directory is fsynced (`File::open(dir)?.sync_all()`),
//! and fsyncing a file makes its data durable but not its name. That is what catches a program
//! that forgets a directory fsync, which a real file system (ext4's ordered mode, a VM's page
//! cache) usually forgives in tests and then loses in production.
//!
//! The rules are in [`model`]; [`mount`] runs the FUSE session (crate `fuser`, pure-Rust mount:
//! needs root and `/dev/fuse`, not libfuse); the `powercut` binary drives a mount from stdin for
//! harnesses that are not Rust.
//!
//! ```no_run
//! use spindle_powercut::{CutMode, MountOptions, PowerCutFs};
//! # fn main() -> std::io::Result<()> {
//! let dir = std::path::Path::new("/tmp/mnt");
//! let mut fs = PowerCutFs::mount(dir, MountOptions::default())?;
//! // ... run the program under test on `dir`, SIGKILL it, reap it ...
//! let report = fs.cut(CutMode::Drop, 42)?;
//! println!("{report}");
//! // ... restart the program and check what it recovered ...
//! # Ok(()) }
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod fuse;
pub mod model;
pub mod mount;

pub use model::{CutMode, CutReport, Errno, Model, Stats};
pub use mount::{is_mounted, MountOptions, PowerCutFs};
