//! Unit tests of what fsyncs make durable and what a cut keeps.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::model::tests::name;
use crate::model::{CutMode, Errno, Model, SnapNode, ROOT_INO};

#[test]
fn fsync_of_large_file_shares_pages() {
    let mut m = Model::new(1 << 34);
    let f = m.create(ROOT_INO, name("big"), 0o644, 0, 0).unwrap().ino;
    m.write(f, 0, &vec![9u8; 8 << 20]).unwrap();
    m.fsync_file(f).unwrap();
    let s = m.stats();
    assert_eq!(
        s.resident_bytes,
        8 << 20,
        "durable and volatile share pages"
    );
    assert_eq!(s.pending_ops, 0);
}

#[test]
fn file_synced_but_dir_not_is_gone_after_cut() {
    let mut m = Model::new(1 << 30);
    let f = m.create(ROOT_INO, name("a"), 0o644, 0, 0).unwrap().ino;
    m.write(f, 0, b"hello").unwrap();
    m.fsync_file(f).unwrap();
    let r = m.cut(CutMode::Drop, 1);
    assert_eq!(m.lookup(ROOT_INO, name("a")), Err(Errno::ENOENT));
    assert_eq!(r.entries_reverted, 1);
    assert_eq!(r.inodes_freed, 1);
    assert_eq!(m.stats().inodes, 1);
}

#[test]
fn dir_synced_but_file_not_keeps_last_synced_content() {
    let mut m = Model::new(1 << 30);
    let f = m.create(ROOT_INO, name("a"), 0o644, 0, 0).unwrap().ino;
    m.write(f, 0, b"first").unwrap();
    m.fsync_dir(ROOT_INO).unwrap();
    let r = m.cut(CutMode::Drop, 1);
    assert_eq!(r.files_with_unsynced_data, 1);
    assert_eq!(r.bytes_discarded, 5);
    let a = m.lookup(ROOT_INO, name("a")).unwrap();
    assert_eq!(a.size, 0);

    m.write(a.ino, 0, b"second").unwrap();
    m.fsync_file(a.ino).unwrap();
    m.write(a.ino, 6, b" and more").unwrap();
    m.set_len(a.ino, 100).unwrap();
    m.cut(CutMode::Drop, 2);
    assert_eq!(m.read(a.ino, 0, 100).unwrap(), b"second");
}

#[test]
fn unlink_and_rename_without_dir_sync_are_undone() {
    let mut m = Model::new(1 << 30);
    let a = m.create(ROOT_INO, name("a"), 0o644, 0, 0).unwrap().ino;
    let b = m.create(ROOT_INO, name("b"), 0o644, 0, 0).unwrap().ino;
    m.write(a, 0, b"AAA").unwrap();
    m.write(b, 0, b"BBB").unwrap();
    m.fsync_file(a).unwrap();
    m.fsync_file(b).unwrap();
    m.fsync_dir(ROOT_INO).unwrap();

    m.unlink(ROOT_INO, name("a")).unwrap();
    m.rename(ROOT_INO, name("b"), ROOT_INO, name("c"), false)
        .unwrap();
    assert_eq!(
        m.stats().inodes,
        3,
        "unlinked but durably named file is kept"
    );
    let r = m.cut(CutMode::Drop, 0);
    assert_eq!(r.entries_reverted, 3); // a back, b back, c gone
    assert_eq!(
        m.read(m.lookup(ROOT_INO, name("a")).unwrap().ino, 0, 10)
            .unwrap(),
        b"AAA"
    );
    assert_eq!(
        m.read(m.lookup(ROOT_INO, name("b")).unwrap().ino, 0, 10)
            .unwrap(),
        b"BBB"
    );
    assert_eq!(m.lookup(ROOT_INO, name("c")), Err(Errno::ENOENT));
}

#[test]
fn rename_over_file_without_dir_sync_brings_old_content_back() {
    let mut m = Model::new(1 << 30);
    let old = m.create(ROOT_INO, name("cur"), 0o644, 0, 0).unwrap().ino;
    m.write(old, 0, b"old").unwrap();
    m.fsync_file(old).unwrap();
    m.fsync_dir(ROOT_INO).unwrap();
    let new = m.create(ROOT_INO, name("tmp"), 0o644, 0, 0).unwrap().ino;
    m.write(new, 0, b"new").unwrap();
    m.fsync_file(new).unwrap();
    m.rename(ROOT_INO, name("tmp"), ROOT_INO, name("cur"), false)
        .unwrap();
    assert_eq!(
        m.read(m.lookup(ROOT_INO, name("cur")).unwrap().ino, 0, 9)
            .unwrap(),
        b"new"
    );
    m.cut(CutMode::Drop, 0);
    assert_eq!(
        m.read(m.lookup(ROOT_INO, name("cur")).unwrap().ino, 0, 9)
            .unwrap(),
        b"old"
    );
    assert_eq!(m.lookup(ROOT_INO, name("tmp")), Err(Errno::ENOENT));
    // With the directory synced the rename is durable, and the old inode is freed.
    let new = m.create(ROOT_INO, name("tmp"), 0o644, 0, 0).unwrap().ino;
    m.write(new, 0, b"new").unwrap();
    m.fsync_file(new).unwrap();
    m.rename(ROOT_INO, name("tmp"), ROOT_INO, name("cur"), false)
        .unwrap();
    m.fsync_dir(ROOT_INO).unwrap();
    assert_eq!(m.stats().inodes, 2);
    m.cut(CutMode::Drop, 0);
    assert_eq!(
        m.read(m.lookup(ROOT_INO, name("cur")).unwrap().ino, 0, 9)
            .unwrap(),
        b"new"
    );
}

#[test]
fn nested_dir_needs_parent_sync() {
    let mut m = Model::new(1 << 30);
    let d = m.mkdir(ROOT_INO, name("d"), 0o755, 0, 0).unwrap().ino;
    let f = m.create(d, name("f"), 0o644, 0, 0).unwrap().ino;
    m.write(f, 0, b"x").unwrap();
    m.fsync_file(f).unwrap();
    m.fsync_dir(d).unwrap();
    let r = m.cut(CutMode::Drop, 0);
    assert_eq!(m.lookup(ROOT_INO, name("d")), Err(Errno::ENOENT));
    assert_eq!(r.inodes_freed, 2);

    let d = m.mkdir(ROOT_INO, name("d"), 0o755, 0, 0).unwrap().ino;
    let f = m.create(d, name("f"), 0o644, 0, 0).unwrap().ino;
    m.write(f, 0, b"x").unwrap();
    m.fsync_file(f).unwrap();
    m.fsync_dir(d).unwrap();
    m.fsync_dir(ROOT_INO).unwrap();
    m.cut(CutMode::Drop, 0);
    assert_eq!(
        m.snapshot().get(Path::new("d/f")),
        Some(&SnapNode::File(b"x".to_vec()))
    );
}

#[test]
fn cross_directory_rename_sides_are_independent() {
    let mut m = Model::new(1 << 30);
    let a = m.mkdir(ROOT_INO, name("a"), 0o755, 0, 0).unwrap().ino;
    let b = m.mkdir(ROOT_INO, name("b"), 0o755, 0, 0).unwrap().ino;
    let f = m.create(a, name("f"), 0o644, 0, 0).unwrap().ino;
    m.fsync_file(f).unwrap();
    for d in [ROOT_INO, a, b] {
        m.fsync_dir(d).unwrap();
    }
    m.rename(a, name("f"), b, name("g"), false).unwrap();
    m.fsync_dir(b).unwrap();
    m.cut(CutMode::Drop, 0);
    let snap = m.snapshot();
    assert!(snap.contains_key(Path::new("a/f")) && snap.contains_key(Path::new("b/g")));

    m.rename(a, name("f"), b, name("h"), false).unwrap();
    m.fsync_dir(a).unwrap();
    m.cut(CutMode::Drop, 0);
    let snap = m.snapshot();
    assert!(!snap.contains_key(Path::new("a/f")) && !snap.contains_key(Path::new("b/h")));
    assert!(snap.contains_key(Path::new("b/g")));
}

#[test]
fn directory_aliases_are_dropped_at_cut() {
    // a/b moved to the root as c, a moved into c: syncing only c makes a durable cycle.
    let mut m = Model::new(1 << 30);
    let a = m.mkdir(ROOT_INO, name("a"), 0o755, 0, 0).unwrap().ino;
    let b = m.mkdir(a, name("b"), 0o755, 0, 0).unwrap().ino;
    m.fsync_dir(ROOT_INO).unwrap();
    m.fsync_dir(a).unwrap();
    m.rename(a, name("b"), ROOT_INO, name("c"), false).unwrap();
    m.rename(ROOT_INO, name("a"), b, name("a"), false).unwrap();
    m.fsync_dir(b).unwrap();
    let r = m.cut(CutMode::Drop, 0);
    assert_eq!(r.aliases_dropped, 1);
    let snap = m.snapshot();
    assert_eq!(
        snap.keys().cloned().collect::<Vec<_>>(),
        vec![PathBuf::from("a"), PathBuf::from("a/b")]
    );
    m.check_invariants().unwrap();
    // The tree is consistent again: b's parent is a.
    assert_eq!(m.readdir(b).unwrap()[1].ino, a);
}

#[test]
fn torn_cut_tears_at_sector_boundaries() {
    let mut seen_lengths = HashSet::new();
    for seed in 0..300 {
        let mut m = Model::new(1 << 30);
        let f = m.create(ROOT_INO, name("f"), 0o644, 0, 0).unwrap().ino;
        m.fsync_dir(ROOT_INO).unwrap();
        m.write(f, 100, &[1u8; 2000]).unwrap();
        let r = m.cut(CutMode::Torn, seed);
        let len = m.getattr(f).unwrap().size;
        // Nothing, a prefix ending at 512/1024/1536/2048, or everything.
        assert!([0, 512, 1024, 1536, 2048, 2100].contains(&len), "len {len}");
        assert_eq!(r.torn_writes, usize::from(len != 0 && len != 2100));
        assert_eq!(r.bytes_discarded, 2100 - len.max(100));
        seen_lengths.insert(len);
    }
    assert_eq!(
        seen_lengths.len(),
        6,
        "every tear point is reachable: {seen_lengths:?}"
    );
}

#[test]
fn cut_is_reproducible() {
    let run = |seed| {
        let mut m = Model::new(1 << 30);
        let f = m.create(ROOT_INO, name("f"), 0o644, 0, 0).unwrap().ino;
        m.fsync_dir(ROOT_INO).unwrap();
        for i in 0..20u64 {
            m.write(f, i * 700, &[i as u8; 700]).unwrap();
        }
        m.cut(CutMode::Reorder, seed);
        m.read(f, 0, 20 * 700).unwrap()
    };
    assert_eq!(run(42), run(42));
    assert_ne!(run(42), run(43));
}
