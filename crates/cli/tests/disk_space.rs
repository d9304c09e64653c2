//! Disk space at the edge (hardening issue, items 12 and 13): the reserve that keeps the
//! engine from meeting a full disk must cover what its memtables will flush, must fit a small
//! filesystem, and a user who filled the drive must get the space back by deleting.
//!
//! The small filesystems are tmpfs mounts (root only, as CI runs the tests; skipped
//! otherwise, as in bad_input.rs).

mod common;

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use spindle_client::{Client, ClientConfig, DeleteOptions, PutOptions, RangeQuery, StatusCode, Synchronization};

/// A tmpfs of `bytes`, unmounted when dropped.
struct SmallFilesystem {
    dir: tempfile::TempDir,
}

impl SmallFilesystem {
    fn mount_or_skip(bytes: u64, test: &str) -> Option<SmallFilesystem> {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new("mount").args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"]).arg(dir.path()).output().unwrap();
        if out.status.success() {
            return Some(SmallFilesystem { dir });
        }
        // SAFETY: geteuid has no preconditions.
        assert!(unsafe { libc::geteuid() } != 0, "root could not mount a tmpfs: {}", String::from_utf8_lossy(&out.stderr));
        eprintln!("SKIPPED {test}: not root, cannot mount a tmpfs");
        None
    }
}

impl Drop for SmallFilesystem {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.dir.path()).status();
    }
}

/// A drive process whose exit status the test wants.
struct Drive {
    child: Child,
    addr: String,
}

impl Drive {
    fn start(data: &std::path::Path, extra: &[&str]) -> Drive {
        let mut child = common::dies_with_test(&mut Command::new(env!("CARGO_BIN_EXE_spindle")))
            .args(["drive", "--port", "0", "--tls-port", "0", "--data"])
            .arg(data)
            .args(extra)
            .env("SPINDLE_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let addr = line.split_whitespace().find(|w| w.starts_with("127.0.0.1:")).unwrap_or_else(|| panic!("no address in {line:?}")).to_string();
        Drive { child, addr }
    }

    async fn client(&self) -> Client {
        Client::connect(self.addr.as_str(), ClientConfig::default()).await.unwrap()
    }

    /// SIGTERM, and the exit status.
    fn terminate(mut self) -> std::process::ExitStatus {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(started.elapsed() < Duration::from_secs(30), "the drive did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Drive {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn key(i: usize) -> Vec<u8> {
    format!("fill/{i:05}").into_bytes()
}

/// Puts `value` under new keys until the drive answers NO_SPACE; returns how many it took.
async fn fill(c: &Client, value: &Bytes, limit: usize) -> usize {
    let opts = PutOptions { force: true, sync: Synchronization::Writeback, ..PutOptions::default() };
    for i in 0..limit {
        match c.put(&key(i), value.clone(), opts.clone()).await {
            Ok(()) => {}
            Err(e) if e.status() == Some(StatusCode::NoSpace) => return i,
            Err(e) => panic!("put {i}: {e}"),
        }
    }
    panic!("{limit} puts and no NO_SPACE");
}

fn everything() -> RangeQuery {
    RangeQuery::inclusive(Bytes::new(), Bytes::from_static(&[0xff; 8]), 200)
}

/// A reserve smaller than what the memtables may hold lets the engine's own flushes take the
/// disk to 0 bytes free, where even deletes fail: refused at start, saying why.
#[test]
fn a_reserve_below_the_write_buffer_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let out = common::dies_with_test(&mut Command::new(env!("CARGO_BIN_EXE_spindle")))
        .args(["drive", "--port", "0", "--tls-port", "0", "--reserved-bytes", "67108864", "--data"])
        .arg(dir.path().join("data"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let mut child = out;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > Duration::from_secs(20) {
            child.kill().unwrap();
            panic!("the drive started with a 64 MiB reserve under 256 MiB of memtables");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert!(!status.success());
    assert!(stderr.contains("reserved_bytes") && stderr.contains("write buffer"), "{stderr}");
}

/// On a 64 MiB filesystem the default reserve (256 MiB) refused every put and said nothing.
/// It is now scaled to the filesystem, and said so; filled to NO_SPACE, the drive still
/// deletes, compacts, gives the space back to puts, and stops cleanly on SIGTERM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_filesystem_gets_a_reserve_it_can_use() {
    let Some(fs) = SmallFilesystem::mount_or_skip(64 << 20, "a_small_filesystem_gets_a_reserve_it_can_use") else { return };
    let drive = Drive::start(&fs.dir.path().join("data"), &[]);
    let c = drive.client().await;
    let log = c.get_log(&[spindle_client::LogType::Messages]).await.unwrap();
    let log = String::from_utf8_lossy(&log.messages.unwrap_or_default()).into_owned();
    assert!(log.contains("reserved_bytes"), "the scaled reserve was not reported: {log}");

    let value = Bytes::from(vec![3u8; 256 * 1024]);
    let stored = fill(&c, &value, 400).await;
    assert!(stored >= 100, "only {stored} values of 256 KiB fit on a 64 MiB filesystem");
    for i in 0..stored {
        assert!(c.delete(&key(i), DeleteOptions { force: true, ..DeleteOptions::default() }).await.unwrap());
    }
    c.flush_all_data().await.unwrap();
    c.media_optimize(everything()).await.unwrap();
    // The deletes gave the space back: puts succeed again, without a restart.
    let started = Instant::now();
    loop {
        match c.put(b"again", value.clone(), PutOptions::default()).await {
            Ok(()) => break,
            Err(e) if e.status() == Some(StatusCode::NoSpace) && started.elapsed() < Duration::from_secs(15) => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("put after deleting everything, {:?} later: {e}", started.elapsed()),
        }
    }
    let again = fill(&c, &value, 400).await;
    // Most of the space comes back (what remains is the engine's own: journals, versions and
    // tables that compaction keeps for the small values).
    assert!(again * 10 >= stored * 8, "{stored} values fit at first, {again} after deleting them");
    drop(c);
    let status = drive.terminate();
    assert!(status.success(), "SIGTERM on a full drive: {status:?}");
}
