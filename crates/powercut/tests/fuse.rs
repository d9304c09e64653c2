//! End-to-end tests through the kernel: mount, use ordinary `std::fs`, cut, look again.
//!
//! They need root and /dev/fuse. Without them each test prints "skipped: needs root and
//! /dev/fuse", unless the `CI` environment variable is set, where they fail instead.

use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::FileExt;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use spindle_powercut::{is_mounted, CutMode, MountOptions, PowerCutFs};

fn is_root() -> bool {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("Uid:"))?.to_owned();
            line.split_whitespace().nth(2).map(|euid| euid == "0")
        })
        .unwrap_or(false)
}

/// Whether the FUSE tests can run; in CI their absence is a failure.
fn fuse_ready() -> bool {
    let ok = is_root() && Path::new("/dev/fuse").exists();
    if !ok {
        if std::env::var_os("CI").is_some() || std::env::var_os("SPINDLE_REQUIRE_FUSE").is_some() {
            panic!(
                "FUSE tests need root and /dev/fuse, and CI or SPINDLE_REQUIRE_FUSE is set: failing instead of skipping"
            );
        }
        // Straight to stderr, past the test harness's output capture, so the skip is visible.
        let _ = writeln!(std::io::stderr(), "skipped: needs root and /dev/fuse");
    }
    ok
}

/// Mounts on a fresh temporary directory, runs `test`, unmounts (also when `test` panics) and
/// checks that /proc/self/mountinfo no longer lists the mount point.
fn with_mount(test: impl FnOnce(&mut PowerCutFs, &Path)) {
    if !fuse_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().canonicalize().unwrap();
    let mut fs = PowerCutFs::mount(&mnt, MountOptions::default()).unwrap();
    assert!(is_mounted(&mnt).unwrap());
    let result = panic::catch_unwind(AssertUnwindSafe(|| test(&mut fs, &mnt)));
    drop(fs);
    assert!(
        !is_mounted(&mnt).unwrap(),
        "{} is still mounted",
        mnt.display()
    );
    if let Err(p) = result {
        panic::resume_unwind(p);
    }
}

fn sync_dir(path: &Path) {
    File::open(path).unwrap().sync_all().unwrap();
}

fn write_synced(path: &Path, data: &[u8]) {
    let mut f = File::create(path).unwrap();
    f.write_all(data).unwrap();
    f.sync_all().unwrap();
}

#[test]
fn synced_file_survives_and_unsynced_append_is_lost() {
    with_mount(|fs, mnt| {
        let p = mnt.join("data");
        let before = fs.stats();
        write_synced(&p, b"hello");
        sync_dir(mnt);
        let after = fs.stats();
        // File::open(dir).sync_all() arrives as FSYNCDIR, File::sync_all as FSYNC.
        assert_eq!(after.dir_fsyncs, before.dir_fsyncs + 1, "{after}");
        assert_eq!(after.fsyncs, before.fsyncs + 1, "{after}");

        let r = fs.cut(CutMode::Drop, 1).unwrap();
        assert!(!r.discarded_anything(), "{r}");
        assert_eq!(fs::read(&p).unwrap(), b"hello");

        let mut f = OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(b" world").unwrap();
        drop(f);
        assert_eq!(fs::read(&p).unwrap(), b"hello world");
        let r = fs.cut(CutMode::Drop, 2).unwrap();
        println!("{r}");
        assert_eq!(
            (
                r.files_with_unsynced_data,
                r.bytes_discarded,
                r.forced_unmount
            ),
            (1, 6, false)
        );
        assert_eq!(fs::read(&p).unwrap(), b"hello");
        assert_eq!(fs::metadata(&p).unwrap().len(), 5);
    });
}

#[test]
fn fdatasync_makes_data_durable() {
    with_mount(|fs, mnt| {
        let p = mnt.join("d");
        let mut f = File::create(&p).unwrap();
        sync_dir(mnt);
        f.write_all(b"abc").unwrap();
        f.sync_data().unwrap();
        drop(f);
        fs.cut(CutMode::Drop, 0).unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"abc");
    });
}

#[test]
fn file_fsync_without_dir_fsync_is_gone() {
    with_mount(|fs, mnt| {
        write_synced(&mnt.join("orphan"), b"synced data, unsynced name");
        let r = fs.cut(CutMode::Drop, 0).unwrap();
        assert_eq!((r.entries_reverted, r.inodes_freed), (1, 1), "{r}");
        assert!(!mnt.join("orphan").exists());
        assert_eq!(fs::read_dir(mnt).unwrap().count(), 0);
    });
}

#[test]
fn nested_dir_without_parent_fsync_is_gone() {
    with_mount(|fs, mnt| {
        let d = mnt.join("dir");
        fs::create_dir(&d).unwrap();
        write_synced(&d.join("a"), b"a");
        write_synced(&d.join("b"), b"b");
        sync_dir(&d);
        fs.cut(CutMode::Drop, 0).unwrap();
        assert!(!d.exists());

        // The same with the parent synced survives whole.
        fs::create_dir(&d).unwrap();
        write_synced(&d.join("a"), b"a");
        sync_dir(&d);
        sync_dir(mnt);
        fs.cut(CutMode::Drop, 0).unwrap();
        assert_eq!(fs::read(d.join("a")).unwrap(), b"a");
        let names: Vec<_> = fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["a"]);
    });
}

#[test]
fn rename_and_unlink_without_dir_fsync_are_undone() {
    with_mount(|fs, mnt| {
        let cur = mnt.join("CURRENT");
        let tmp = mnt.join("CURRENT.tmp");
        let gone = mnt.join("gone");
        write_synced(&cur, b"old");
        write_synced(&gone, b"still here");
        sync_dir(mnt);

        write_synced(&tmp, b"new");
        fs::rename(&tmp, &cur).unwrap();
        fs::remove_file(&gone).unwrap();
        assert_eq!(fs::read(&cur).unwrap(), b"new");
        let r = fs.cut(CutMode::Drop, 0).unwrap();
        println!("{r}");
        assert_eq!(fs::read(&cur).unwrap(), b"old");
        assert_eq!(fs::read(&gone).unwrap(), b"still here");
        assert!(!tmp.exists());

        write_synced(&tmp, b"new");
        fs::rename(&tmp, &cur).unwrap();
        sync_dir(mnt);
        fs.cut(CutMode::Drop, 0).unwrap();
        assert_eq!(fs::read(&cur).unwrap(), b"new");
    });
}

#[test]
fn o_trunc_is_unsynced_until_fsync() {
    with_mount(|fs, mnt| {
        let p = mnt.join("t");
        write_synced(&p, b"durable");
        sync_dir(mnt);
        File::create(&p).unwrap().write_all(b"x").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"x");
        fs.cut(CutMode::Drop, 0).unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"durable");
    });
}

#[test]
fn try_lock_works() {
    with_mount(|_fs, mnt| {
        let p = mnt.join("LOCK");
        let a = File::create(&p).unwrap();
        let b = File::open(&p).unwrap();
        a.try_lock().unwrap();
        assert!(matches!(b.try_lock(), Err(fs::TryLockError::WouldBlock)));
        a.unlock().unwrap();
        b.try_lock().unwrap();
    });
}

#[test]
fn preallocated_64mib_file_is_cheap_and_reads_zeros() {
    with_mount(|fs, mnt| {
        let p = mnt.join("prealloc");
        let f = File::create(&p).unwrap();
        let start = Instant::now();
        f.set_len(64 << 20).unwrap();
        f.sync_all().unwrap();
        sync_dir(mnt);
        let cut = fs.cut(CutMode::Drop, 0).unwrap();
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );
        assert!(!cut.discarded_anything(), "{cut}");
        assert_eq!(fs.stats().resident_bytes, 0, "{}", fs.stats());
        assert_eq!(fs::metadata(&p).unwrap().len(), 64 << 20);
        let mut f = File::open(&p).unwrap();
        let mut buf = vec![1u8; 1 << 20];
        let mut total = 0;
        loop {
            let n = f.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            assert!(
                buf[..n].iter().all(|&b| b == 0),
                "non-zero byte near offset {total}"
            );
            total += n;
        }
        assert_eq!(total, 64 << 20);
    });
}

#[test]
fn one_mib_round_trip() {
    with_mount(|fs, mnt| {
        let p = mnt.join("mib");
        let data: Vec<u8> = (0..1u32 << 20)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        write_synced(&p, &data);
        sync_dir(mnt);
        assert_eq!(fs::read(&p).unwrap(), data);
        let f = File::open(&p).unwrap();
        let mut mid = vec![0u8; 10_000];
        f.read_exact_at(&mut mid, 500_000).unwrap();
        assert_eq!(mid, data[500_000..510_000]);
        drop(f);
        fs.cut(CutMode::Drop, 0).unwrap();
        assert_eq!(fs::read(&p).unwrap(), data);
    });
}

#[test]
fn no_stale_page_cache_after_cut() {
    with_mount(|fs, mnt| {
        let p = mnt.join("cache");
        write_synced(&p, &[b'A'; 8192]);
        sync_dir(mnt);
        let f = OpenOptions::new().write(true).open(&p).unwrap();
        f.write_all_at(&[b'B'; 4096], 2048).unwrap();
        f.write_all_at(b"tail", 8192).unwrap();
        drop(f);
        // Read it back so that the kernel caches the unsynced version.
        let seen = fs::read(&p).unwrap();
        assert_eq!((seen.len(), seen[2048], seen[8192]), (8196, b'B', b't'));
        fs.cut(CutMode::Drop, 0).unwrap();
        assert_eq!(fs::metadata(&p).unwrap().len(), 8192);
        assert_eq!(fs::read(&p).unwrap(), vec![b'A'; 8192]);
    });
}

#[test]
fn forced_cut_and_drop_with_a_file_still_open() {
    with_mount(|fs, mnt| {
        let p = mnt.join("held");
        write_synced(&p, b"x");
        sync_dir(mnt);
        let held = OpenOptions::new().read(true).write(true).open(&p).unwrap();
        let r = fs.cut(CutMode::Drop, 0).unwrap();
        assert!(r.forced_unmount, "{r}");
        // The old handle belongs to the detached session and can no longer change anything.
        let err = held.write_at(b"y", 0).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
        assert_eq!(fs::read(&p).unwrap(), b"x");
        let _held_too = File::open(&p).unwrap();
        // `with_mount` drops `fs` with this second file open and checks the mount is gone.
        drop(held);
    });
}

#[test]
fn concurrent_writers_with_two_session_threads() {
    if !fuse_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().canonicalize().unwrap();
    let mut fs = PowerCutFs::mount(
        &mnt,
        MountOptions {
            threads: 2,
            ..MountOptions::default()
        },
    )
    .unwrap();
    std::thread::scope(|s| {
        for t in 0..4u8 {
            let mnt = &mnt;
            s.spawn(move || {
                let d = mnt.join(format!("t{t}"));
                fs::create_dir(&d).unwrap();
                for i in 0..20u8 {
                    write_synced(&d.join(format!("f{i}")), &[t ^ i; 3000]);
                }
                sync_dir(&d);
            });
        }
    });
    sync_dir(&mnt);
    let r = fs.cut(CutMode::Torn, 5).unwrap();
    assert!(!r.discarded_anything(), "{r}");
    for t in 0..4u8 {
        for i in 0..20u8 {
            assert_eq!(
                fs::read(mnt.join(format!("t{t}/f{i}"))).unwrap(),
                vec![t ^ i; 3000]
            );
        }
    }
    drop(fs);
    assert!(!is_mounted(&mnt).unwrap());
}

#[test]
fn panicking_test_still_unmounts() {
    if !fuse_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().canonicalize().unwrap();
    let result = panic::catch_unwind(|| {
        let _fs = PowerCutFs::mount(&mnt, MountOptions::default()).unwrap();
        let _open = File::create(mnt.join("f")).unwrap();
        panic!("test failure with the mount busy");
    });
    assert!(result.is_err());
    assert!(!is_mounted(&mnt).unwrap());
}

fn powercut_bin(mnt: &Path) -> (std::process::Child, BufReader<std::process::ChildStdout>) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_powercut"));
    // The mount ends with the test however the test ends (an abort runs no destructor):
    // SIGTERM, on which it unmounts (SIGKILL would leave the mount point dead).
    spindle_testkit::ends_with_test(&mut command, libc::SIGTERM);
    let mut child = command
        .arg(mnt)
        .args(["--size", "1048576"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim_end(), format!("ready {}", mnt.display()));
    (child, out)
}

fn command(
    child: &mut std::process::Child,
    out: &mut BufReader<std::process::ChildStdout>,
    cmd: &str,
) -> String {
    writeln!(child.stdin.as_mut().unwrap(), "{cmd}").unwrap();
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    line.trim_end().to_owned()
}

#[test]
fn binary_protocol_and_eof() {
    if !fuse_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mnt: PathBuf = dir.path().canonicalize().unwrap();
    let (mut child, mut out) = powercut_bin(&mnt);
    write_synced(&mnt.join("f"), b"data");
    let stats = command(&mut child, &mut out, "stats");
    assert!(
        stats.starts_with("ok ") && stats.contains("files=1"),
        "{stats}"
    );
    let cut = command(&mut child, &mut out, "cut drop 7");
    assert!(
        cut.starts_with("ok mode=drop seed=7 ") && cut.contains("entries_reverted=1"),
        "{cut}"
    );
    assert!(!mnt.join("f").exists());
    assert!(command(&mut child, &mut out, "cut sideways").starts_with("err "));
    assert!(command(&mut child, &mut out, "cut torn").starts_with("ok mode=torn seed="));
    assert!(command(&mut child, &mut out, "bogus").starts_with("err "));
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    assert!(!is_mounted(&mnt).unwrap());
}

#[test]
fn binary_quit_and_sigterm_unmount() {
    if !fuse_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mnt: PathBuf = dir.path().canonicalize().unwrap();
    let (mut child, mut out) = powercut_bin(&mnt);
    assert_eq!(command(&mut child, &mut out, "quit"), "ok bye");
    assert!(child.wait().unwrap().success());
    assert!(!is_mounted(&mnt).unwrap());

    let (mut child, _out) = powercut_bin(&mnt);
    let status = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(status.success());
    assert!(child.wait().unwrap().success());
    assert!(!is_mounted(&mnt).unwrap());
}
