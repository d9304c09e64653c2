//! Unit tests of when an unlinked inode is freed.

use crate::model::tests::name;
use crate::model::{Errno, Model, ROOT_INO};

#[test]
fn open_unlinked_file_lives_until_release() {
    let mut m = Model::new(1 << 30);
    let f = m.create(ROOT_INO, name("f"), 0o644, 0, 0).unwrap().ino;
    m.open(f).unwrap();
    m.unlink(ROOT_INO, name("f")).unwrap();
    m.write(f, 0, b"still here").unwrap();
    assert_eq!(m.read(f, 0, 100).unwrap(), b"still here");
    m.release(f);
    assert_eq!(m.getattr(f), Err(Errno::ENOENT));
    assert_eq!(m.stats().inodes, 1);
}

#[test]
fn durably_named_unlinked_open_file_is_freed_by_the_last_of_release_and_dir_sync() {
    let mut m = Model::new(1 << 30);
    let f = m.create(ROOT_INO, name("f"), 0o644, 0, 0).unwrap().ino;
    m.fsync_dir(ROOT_INO).unwrap();
    m.open(f).unwrap();
    m.unlink(ROOT_INO, name("f")).unwrap();
    m.release(f);
    assert!(m.getattr(f).is_ok(), "a cut would bring it back");
    m.open(f).unwrap();
    m.fsync_dir(ROOT_INO).unwrap();
    assert!(m.getattr(f).is_ok(), "still open");
    m.release(f);
    assert_eq!(m.getattr(f), Err(Errno::ENOENT));
    m.check_invariants().unwrap();
}
