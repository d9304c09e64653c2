//! Directory entries: creating, looking up, renaming, removing and listing names, all in the
//! volatile maps (a name is durable only once its directory is synced).

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};
use std::time::SystemTime;

use super::attr::Attr;
use super::content::Content;
use super::errno::{Errno, FsResult};
use super::inode::{DirNode, FileNode, Inode, Kind, Model, Node, ROOT_INO};

/// Longest name accepted, in bytes (`ENAMETOOLONG` beyond).
pub const NAME_MAX: usize = 255;

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

impl Model {
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
}
