//! Property tests of the model against an independent oracle: after a cut in `Drop` mode the
//! tree must be exactly "each directory as of its last fsyncdir, each file as of its last
//! fsync"; `Torn` and `Reorder` may only produce what their definitions allow.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::OsStr;
use std::path::PathBuf;

use proptest::prelude::*;
use spindle_powercut::model::{Content, Errno, Model, PendingOp, SnapNode, ROOT_INO};
use spindle_powercut::CutMode;

#[derive(Clone, Debug)]
enum Op {
    Create {
        dir: u8,
        name: u8,
    },
    Mkdir {
        name: u8,
    },
    Write {
        file: u8,
        offset: u32,
        len: u16,
        byte: u8,
    },
    SetLen {
        file: u8,
        len: u32,
    },
    FsyncFile {
        file: u8,
    },
    FsyncDir {
        dir: u8,
    },
    Rename {
        file: u8,
        dir: u8,
        name: u8,
        noreplace: bool,
    },
    Unlink {
        file: u8,
    },
    Rmdir {
        dir: u8,
    },
    Cut,
}

fn offset() -> impl Strategy<Value = u32> {
    // Mostly small, sometimes around the 256 KiB chunk boundary.
    prop_oneof![4 => 0u32..9000, 1 => 254_000u32..270_000]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (any::<u8>(), any::<u8>()).prop_map(|(dir, name)| Op::Create { dir, name }),
        1 => any::<u8>().prop_map(|name| Op::Mkdir { name }),
        5 => (any::<u8>(), offset(), 1u16..5000, any::<u8>())
            .prop_map(|(file, offset, len, byte)| Op::Write { file, offset, len, byte }),
        1 => (any::<u8>(), offset()).prop_map(|(file, len)| Op::SetLen { file, len }),
        3 => any::<u8>().prop_map(|file| Op::FsyncFile { file }),
        3 => any::<u8>().prop_map(|dir| Op::FsyncDir { dir }),
        2 => (any::<u8>(), any::<u8>(), any::<u8>(), any::<bool>())
            .prop_map(|(file, dir, name, noreplace)| Op::Rename { file, dir, name, noreplace }),
        1 => any::<u8>().prop_map(|file| Op::Unlink { file }),
        1 => any::<u8>().prop_map(|dir| Op::Rmdir { dir }),
        1 => Just(Op::Cut),
    ]
}

/// (volatile, synced) entries of a directory.
type OracleDir = (BTreeMap<String, u64>, BTreeMap<String, u64>);

/// The oracle: plain vectors and maps, snapshots taken at each sync.
#[derive(Default)]
struct Oracle {
    /// (volatile, synced) content of each file.
    files: HashMap<u64, (Vec<u8>, Vec<u8>)>,
    dirs: HashMap<u64, OracleDir>,
}

fn write_vec(v: &mut Vec<u8>, offset: usize, data: &[u8]) {
    if v.len() < offset + data.len() {
        v.resize(offset + data.len(), 0);
    }
    v[offset..offset + data.len()].copy_from_slice(data);
}

impl Oracle {
    fn new() -> Self {
        let mut o = Oracle::default();
        o.dirs.insert(ROOT_INO, Default::default());
        o
    }

    /// Directories: the root and its subdirectories (volatile), sorted.
    fn dirs_list(&self) -> Vec<u64> {
        let mut v = vec![ROOT_INO];
        v.extend(
            self.dirs[&ROOT_INO]
                .0
                .values()
                .filter(|i| self.dirs.contains_key(i)),
        );
        v
    }

    /// Files (volatile): (parent, name, ino), sorted.
    fn files_list(&self) -> Vec<(u64, String, u64)> {
        let mut v = Vec::new();
        for d in self.dirs_list() {
            for (name, ino) in &self.dirs[&d].0 {
                if self.files.contains_key(ino) {
                    v.push((d, name.clone(), *ino));
                }
            }
        }
        v
    }

    fn tree(&self, durable: bool) -> BTreeMap<PathBuf, SnapNode> {
        let mut out = BTreeMap::new();
        let mut stack = vec![(PathBuf::new(), ROOT_INO)];
        while let Some((path, d)) = stack.pop() {
            let (vol, dur) = &self.dirs[&d];
            for (name, ino) in if durable { dur } else { vol } {
                let p = path.join(name);
                if let Some((v, s)) = self.files.get(ino) {
                    out.insert(
                        p,
                        SnapNode::File(if durable { s.clone() } else { v.clone() }),
                    );
                } else {
                    out.insert(p.clone(), SnapNode::Dir);
                    stack.push((p, *ino));
                }
            }
        }
        out
    }

    fn cut(&mut self) {
        let tree_inos = {
            let mut live = BTreeSet::from([ROOT_INO]);
            let mut stack = vec![ROOT_INO];
            while let Some(d) = stack.pop() {
                for ino in self.dirs[&d].1.values() {
                    if live.insert(*ino) && self.dirs.contains_key(ino) {
                        stack.push(*ino);
                    }
                }
            }
            live
        };
        self.files.retain(|ino, _| tree_inos.contains(ino));
        self.dirs.retain(|ino, _| tree_inos.contains(ino));
        for (v, s) in self.files.values_mut() {
            *v = s.clone();
        }
        for (v, s) in self.dirs.values_mut() {
            *v = s.clone();
        }
    }
}

fn fname(n: u8) -> String {
    format!("f{}", n % 4)
}

fn dname(n: u8) -> String {
    format!("d{}", n % 2)
}

fn run_ops(ops: &[Op]) -> Result<(), TestCaseError> {
    let mut m = Model::new(1 << 40);
    let mut o = Oracle::new();
    let mut seed = 0u64;
    for op in ops {
        match op.clone() {
            Op::Create { dir, name } => {
                let dirs = o.dirs_list();
                let d = dirs[dir as usize % dirs.len()];
                let name = fname(name);
                let r = m.create(d, OsStr::new(&name), 0o644, 0, 0);
                if o.dirs[&d].0.contains_key(&name) {
                    prop_assert_eq!(r, Err(Errno::EEXIST));
                } else {
                    let ino = r
                        .map_err(|e| TestCaseError::fail(format!("create: {e}")))?
                        .ino;
                    o.files.insert(ino, Default::default());
                    o.dirs.get_mut(&d).unwrap().0.insert(name, ino);
                }
            }
            Op::Mkdir { name } => {
                let name = dname(name);
                let r = m.mkdir(ROOT_INO, OsStr::new(&name), 0o755, 0, 0);
                if o.dirs[&ROOT_INO].0.contains_key(&name) {
                    prop_assert_eq!(r, Err(Errno::EEXIST));
                } else {
                    let ino = r
                        .map_err(|e| TestCaseError::fail(format!("mkdir: {e}")))?
                        .ino;
                    o.dirs.insert(ino, Default::default());
                    o.dirs.get_mut(&ROOT_INO).unwrap().0.insert(name, ino);
                }
            }
            Op::Write {
                file,
                offset,
                len,
                byte,
            } => {
                let files = o.files_list();
                if let Some((_, _, ino)) = files.get(file as usize % files.len().max(1)) {
                    let data = vec![byte; len as usize];
                    prop_assert_eq!(m.write(*ino, offset as u64, &data), Ok(data.len()));
                    write_vec(&mut o.files.get_mut(ino).unwrap().0, offset as usize, &data);
                }
            }
            Op::SetLen { file, len } => {
                let files = o.files_list();
                if let Some((_, _, ino)) = files.get(file as usize % files.len().max(1)) {
                    prop_assert_eq!(m.set_len(*ino, len as u64), Ok(()));
                    o.files.get_mut(ino).unwrap().0.resize(len as usize, 0);
                }
            }
            Op::FsyncFile { file } => {
                let files = o.files_list();
                if let Some((_, _, ino)) = files.get(file as usize % files.len().max(1)) {
                    prop_assert_eq!(m.fsync_file(*ino), Ok(()));
                    let f = o.files.get_mut(ino).unwrap();
                    f.1 = f.0.clone();
                }
            }
            Op::FsyncDir { dir } => {
                let dirs = o.dirs_list();
                let d = dirs[dir as usize % dirs.len()];
                prop_assert_eq!(m.fsync_dir(d), Ok(()));
                let e = o.dirs.get_mut(&d).unwrap();
                e.1 = e.0.clone();
            }
            Op::Rename {
                file,
                dir,
                name,
                noreplace,
            } => {
                let files = o.files_list();
                if let Some((parent, old, ino)) =
                    files.get(file as usize % files.len().max(1)).cloned()
                {
                    let dirs = o.dirs_list();
                    let d = dirs[dir as usize % dirs.len()];
                    let new = fname(name);
                    let r = m.rename(parent, OsStr::new(&old), d, OsStr::new(&new), noreplace);
                    let exists = o.dirs[&d].0.get(&new).copied();
                    if noreplace && exists.is_some() {
                        prop_assert_eq!(r, Err(Errno::EEXIST));
                    } else {
                        prop_assert_eq!(r, Ok(()));
                        if !(parent == d && old == new) && exists != Some(ino) {
                            o.dirs.get_mut(&parent).unwrap().0.remove(&old);
                            o.dirs.get_mut(&d).unwrap().0.insert(new, ino);
                        }
                    }
                }
            }
            Op::Unlink { file } => {
                let files = o.files_list();
                if let Some((parent, name, _)) = files.get(file as usize % files.len().max(1)) {
                    prop_assert_eq!(m.unlink(*parent, OsStr::new(name)), Ok(()));
                    o.dirs.get_mut(parent).unwrap().0.remove(name);
                }
            }
            Op::Rmdir { dir } => {
                let name = dname(dir);
                let r = m.rmdir(ROOT_INO, OsStr::new(&name));
                match o.dirs[&ROOT_INO].0.get(&name).copied() {
                    None => prop_assert_eq!(r, Err(Errno::ENOENT)),
                    Some(ino) if !o.dirs[&ino].0.is_empty() => {
                        prop_assert_eq!(r, Err(Errno::ENOTEMPTY))
                    }
                    Some(_) => {
                        prop_assert_eq!(r, Ok(()));
                        o.dirs.get_mut(&ROOT_INO).unwrap().0.remove(&name);
                    }
                }
            }
            Op::Cut => {
                let expected = o.tree(true);
                seed += 1;
                m.cut(CutMode::Drop, seed);
                o.cut();
                prop_assert_eq!(m.snapshot(), expected, "after cut");
                prop_assert_eq!(m.stats().pending_ops, 0);
            }
        }
        m.check_invariants().map_err(TestCaseError::fail)?;
    }
    prop_assert_eq!(m.snapshot(), o.tree(false), "volatile view");
    let expected = o.tree(true);
    let report = m.cut(CutMode::Drop, 99);
    prop_assert_eq!(m.snapshot(), expected, "after final cut");
    // Nothing unreachable is kept: the live inodes are exactly the tree's (plus the root).
    o.cut();
    prop_assert_eq!(
        m.stats().inodes,
        o.files.len() + o.dirs.len(),
        "report {}",
        report
    );
    m.check_invariants().map_err(TestCaseError::fail)?;
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn drop_cut_matches_last_synced_state(ops in prop::collection::vec(op(), 1..60)) {
        run_ops(&ops)?;
    }
}

#[derive(Clone, Debug)]
enum FileOp {
    Write { offset: u16, len: u16, byte: u8 },
    SetLen { len: u16 },
}

fn file_op() -> impl Strategy<Value = FileOp> {
    prop_oneof![
        4 => (0u16..3000, 1u16..1500, 1u8..=255).prop_map(|(offset, len, byte)| FileOp::Write { offset, len, byte }),
        1 => (0u16..4000).prop_map(|len| FileOp::SetLen { len }),
    ]
}

fn apply_vec(v: &mut Vec<u8>, op: &PendingOp) {
    match op {
        PendingOp::Write { offset, data } => write_vec(v, *offset as usize, data),
        PendingOp::SetLen { len } => v.resize(*len as usize, 0),
    }
}

/// Sets up a file with durable `base` and the given unsynced ops, cuts, returns the content.
fn cut_file(base: &[u8], ops: &[FileOp], mode: CutMode, seed: u64) -> (Vec<u8>, Vec<PendingOp>) {
    let mut m = Model::new(1 << 30);
    let f = m
        .create(ROOT_INO, OsStr::new("f"), 0o644, 0, 0)
        .unwrap()
        .ino;
    m.fsync_dir(ROOT_INO).unwrap();
    m.write(f, 0, base).unwrap();
    m.fsync_file(f).unwrap();
    for op in ops {
        match op {
            FileOp::Write { offset, len, byte } => {
                m.write(f, *offset as u64, &vec![*byte; *len as usize])
                    .unwrap();
            }
            FileOp::SetLen { len } => m.set_len(f, *len as u64).unwrap(),
        }
    }
    let pending = m.pending_ops(f).unwrap();
    m.cut(mode, seed);
    let ino = m.lookup(ROOT_INO, OsStr::new("f")).unwrap().ino;
    (m.read(ino, 0, 1 << 20).unwrap(), pending)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn torn_cut_is_a_prefix_with_a_torn_write(
        base in prop::collection::vec(any::<u8>(), 0..3000),
        ops in prop::collection::vec(file_op(), 0..6),
        seed in any::<u64>(),
    ) {
        let (got, pending) = cut_file(&base, &ops, CutMode::Torn, seed);
        let mut allowed = BTreeSet::new();
        let mut prefix = base.clone();
        for k in 0..=pending.len() {
            allowed.insert(prefix.clone());
            if let Some(op) = pending.get(k) {
                if let PendingOp::Write { offset, data } = op {
                    let end = offset + data.len() as u64;
                    let mut b = (offset / 512 + 1) * 512;
                    while b < end {
                        let mut torn = prefix.clone();
                        write_vec(&mut torn, *offset as usize, &data[..(b - offset) as usize]);
                        allowed.insert(torn);
                        b += 512;
                    }
                }
                apply_vec(&mut prefix, op);
            }
        }
        prop_assert!(allowed.contains(&got), "torn result (len {}) is not an allowed prefix", got.len());
    }

    #[test]
    fn reorder_cut_is_an_in_order_subset(
        base in prop::collection::vec(any::<u8>(), 0..3000),
        ops in prop::collection::vec(file_op(), 0..7),
        seed in any::<u64>(),
    ) {
        let (got, pending) = cut_file(&base, &ops, CutMode::Reorder, seed);
        let allowed: BTreeSet<Vec<u8>> = (0u32..1 << pending.len())
            .map(|mask| {
                let mut v = base.clone();
                for (i, op) in pending.iter().enumerate() {
                    if mask & (1 << i) != 0 {
                        apply_vec(&mut v, op);
                    }
                }
                v
            })
            .collect();
        prop_assert!(allowed.contains(&got), "reorder result (len {}) is not an in-order subset", got.len());
    }

    #[test]
    fn content_matches_a_vec(ops in prop::collection::vec(file_op(), 0..30)) {
        let mut c = Content::new();
        let mut v = Vec::new();
        for op in &ops {
            let p = match op {
                FileOp::Write { offset, len, byte } => {
                    PendingOp::Write { offset: *offset as u64 * 97, data: vec![*byte; *len as usize * 3] }
                }
                FileOp::SetLen { len } => PendingOp::SetLen { len: *len as u64 * 97 },
            };
            p.apply(&mut c);
            apply_vec(&mut v, &p);
            prop_assert_eq!(c.len(), v.len() as u64);
        }
        prop_assert_eq!(c.to_vec(), v);
    }
}

#[test]
fn drop_mode_is_the_durable_content() {
    let base = vec![5u8; 1000];
    let ops = [
        FileOp::Write {
            offset: 10,
            len: 100,
            byte: 1,
        },
        FileOp::SetLen { len: 50 },
    ];
    for seed in 0..20 {
        assert_eq!(cut_file(&base, &ops, CutMode::Drop, seed).0, base);
    }
}

#[test]
fn torn_and_reorder_do_lose_and_keep_things() {
    // Control: across seeds both modes sometimes keep all, sometimes lose some.
    let ops: Vec<FileOp> = (0..4)
        .map(|i| FileOp::Write {
            offset: i * 1000,
            len: 1000,
            byte: 9,
        })
        .collect();
    for mode in [CutMode::Torn, CutMode::Reorder] {
        let results: BTreeSet<Vec<u8>> = (0..200)
            .map(|seed| cut_file(&[], &ops, mode, seed).0)
            .collect();
        assert!(
            results.len() > 4,
            "{mode}: only {} distinct outcomes",
            results.len()
        );
        assert!(
            results.contains(&Vec::new()),
            "{mode}: never lost everything"
        );
        assert!(
            results.contains(&vec![9u8; 4000]),
            "{mode}: never kept everything"
        );
    }
}
