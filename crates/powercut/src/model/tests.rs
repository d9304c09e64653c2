//! Unit tests of the operations as a program sees them: errors, size changes, statfs.

use std::ffi::OsStr;

use super::*;

/// The name `s` (shared by the model's unit tests).
pub(super) fn name(s: &str) -> &OsStr {
    OsStr::new(s)
}

#[test]
fn errors_like_a_real_fs() {
    let mut m = Model::new(1 << 30);
    let f = m.create(ROOT_INO, name("f"), 0o644, 0, 0).unwrap().ino;
    let d = m.mkdir(ROOT_INO, name("d"), 0o755, 0, 0).unwrap().ino;
    m.create(d, name("x"), 0o644, 0, 0).unwrap();
    let e = m.mkdir(ROOT_INO, name("e"), 0o755, 0, 0).unwrap().ino;
    assert_eq!(
        m.create(ROOT_INO, name("f"), 0o644, 0, 0),
        Err(Errno::EEXIST)
    );
    assert_eq!(
        m.mkdir(ROOT_INO, name("d"), 0o755, 0, 0),
        Err(Errno::EEXIST)
    );
    assert_eq!(m.lookup(ROOT_INO, name("nope")), Err(Errno::ENOENT));
    assert_eq!(m.lookup(f, name("x")), Err(Errno::ENOTDIR));
    assert_eq!(m.create(f, name("x"), 0o644, 0, 0), Err(Errno::ENOTDIR));
    let long = "n".repeat(256);
    assert_eq!(
        m.create(ROOT_INO, name(&long), 0o644, 0, 0),
        Err(Errno::ENAMETOOLONG)
    );
    assert_eq!(m.lookup(ROOT_INO, name(&long)), Err(Errno::ENAMETOOLONG));
    assert!(m.create(ROOT_INO, name(&long[..255]), 0o644, 0, 0).is_ok());
    assert_eq!(m.unlink(ROOT_INO, name("d")), Err(Errno::EISDIR));
    assert_eq!(m.rmdir(ROOT_INO, name("f")), Err(Errno::ENOTDIR));
    assert_eq!(m.rmdir(ROOT_INO, name("d")), Err(Errno::ENOTEMPTY));
    assert_eq!(
        m.rename(ROOT_INO, name("e"), ROOT_INO, name("d"), false),
        Err(Errno::ENOTEMPTY)
    );
    assert_eq!(
        m.rename(ROOT_INO, name("e"), ROOT_INO, name("f"), false),
        Err(Errno::ENOTDIR)
    );
    assert_eq!(
        m.rename(ROOT_INO, name("f"), ROOT_INO, name("e"), false),
        Err(Errno::EISDIR)
    );
    assert_eq!(
        m.rename(ROOT_INO, name("d"), d, name("inside"), false),
        Err(Errno::EINVAL)
    );
    assert_eq!(
        m.rename(ROOT_INO, name("f"), ROOT_INO, name("d"), true),
        Err(Errno::EEXIST)
    );
    assert_eq!(m.write(d, 0, b"x"), Err(Errno::EISDIR));
    assert_eq!(m.read(d, 0, 1), Err(Errno::EISDIR));
    assert_eq!(m.write(f, MAX_FILE_SIZE, b"x"), Err(Errno::EFBIG));
    assert_eq!(m.write(f, u64::MAX, b"x"), Err(Errno::EFBIG));
    assert_eq!(
        m.fallocate(
            f,
            0,
            10,
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE
        ),
        Err(Errno::EOPNOTSUPP)
    );
    assert_eq!(m.getattr(999), Err(Errno::ENOENT));
    assert_eq!(m.fsync_file(d), Err(Errno::EISDIR));
    assert_eq!(m.fsync_dir(f), Err(Errno::ENOTDIR));
    // Empty directory replaced by rename, directory onto an empty one works.
    m.rename(ROOT_INO, name("e"), ROOT_INO, name("e2"), false)
        .unwrap();
    m.mkdir(ROOT_INO, name("e3"), 0o755, 0, 0).unwrap();
    m.rename(ROOT_INO, name("e2"), ROOT_INO, name("e3"), false)
        .unwrap();
    assert_eq!(m.lookup(ROOT_INO, name("e3")).unwrap().ino, e);
    m.check_invariants().unwrap();
}

#[test]
fn fallocate_and_set_len_are_pending_ops() {
    let mut m = Model::new(1 << 30);
    let f = m.create(ROOT_INO, name("f"), 0o644, 0, 0).unwrap().ino;
    m.fallocate(f, 0, 100, libc::FALLOC_FL_KEEP_SIZE).unwrap();
    assert_eq!(m.getattr(f).unwrap().size, 0);
    m.fallocate(f, 10, 90, 0).unwrap();
    assert_eq!(m.getattr(f).unwrap().size, 100);
    m.fallocate(f, 0, 50, 0).unwrap();
    m.set_len(f, 40).unwrap();
    assert_eq!(
        m.pending_ops(f).unwrap(),
        vec![
            PendingOp::SetLen { len: 100 },
            PendingOp::SetLen { len: 40 }
        ]
    );
    assert_eq!(m.getattr(f).unwrap().blocks, 1);
}

#[test]
fn statfs_counts_volatile_sizes() {
    let mut m = Model::new(1 << 20);
    let f = m.create(ROOT_INO, name("f"), 0o644, 0, 0).unwrap().ino;
    m.set_len(f, 1000).unwrap();
    assert_eq!(m.statfs().free_bytes, (1 << 20) - 1000);
    m.set_len(f, 10 << 20).unwrap();
    assert_eq!(m.statfs().free_bytes, 0);
}
