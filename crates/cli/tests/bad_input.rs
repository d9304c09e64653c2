//! Broken clients and full disks where the `spindle` process itself is needed: a client that
//! stops reading must not grow the process's memory, and a disk that fills up under the drive
//! (a tmpfs of its own that another process fills) must leave it able to recover, to erase,
//! and to keep what it acknowledged across a SIGKILL. Malformed frames, bad headers and
//! authentication, limits and overload over the protocol are tested against an in-process
//! drive in `crates/drive/tests/bad_input.rs`.

mod common;

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use common::{signed_frame, RawConn, TestDrive, KEY};
use spindle_client::{MessageType, PutOptions, StatusCode, Synchronization};
use spindle_proto::pb::command::{Body, KeyValue};
use spindle_proto::pb::Command;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_does_not_stall_others() {
    let mut drive = TestDrive::with_config("[limits]\nmax_outstanding_read_requests = 8\n");
    let c = drive.client().await;
    c.put(b"big", Bytes::from(vec![3u8; 1024 * 1024]), PutOptions::default()).await.unwrap();

    // Pipeline 300 GETs of a 1 MiB value and never read a byte.
    let mut raw = RawConn::connect(&drive.addr).await;
    let mut burst = BytesMut::new();
    for _ in 0..300 {
        let header = raw.header(MessageType::Get);
        let body = Body { key_value: Some(KeyValue { key: Some(Bytes::from_static(b"big")), ..KeyValue::default() }), ..Body::default() };
        let command = Command { header: Some(header), body: Some(body), status: None };
        signed_frame(&command, 1, KEY, b"", &mut burst);
    }
    let _ = tokio::time::timeout(Duration::from_secs(2), raw.send_bytes(&burst)).await;

    // Everyone else is served while that connection is stuck.
    for i in 0..50 {
        c.put(format!("k{i}").as_bytes(), Bytes::from_static(b"v"), PutOptions::default()).await.unwrap();
    }
    // Its responses wait in socket buffers, not in the drive's memory.
    let rss_kib = std::fs::read_to_string(format!("/proc/{}/status", drive.pid()))
        .unwrap()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .unwrap();
    assert!(rss_kib < 256 * 1024, "drive RSS {rss_kib} KiB while one client does not read");
    drop(raw);
    assert!(drive.is_running(), "the drive process died");
    drive.client().await.noop().await.unwrap();
}

/// A filesystem of its own (a tmpfs of a few MiB), unmounted when dropped. Mounting one needs
/// root, as CI runs the tests.
struct SmallFilesystem {
    dir: tempfile::TempDir,
}

impl SmallFilesystem {
    fn mount(bytes: u64) -> Result<SmallFilesystem, String> {
        let dir = tempfile::tempdir().unwrap();
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .map_err(|e| format!("mount: {e}"))?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        Ok(SmallFilesystem { dir })
    }

    /// The filesystem, or `None` (and a note) when not root. CI runs as root, so there the
    /// tests that need one always run; a root that cannot mount one fails them.
    fn mount_or_skip(bytes: u64, test: &str) -> Option<SmallFilesystem> {
        match SmallFilesystem::mount(bytes) {
            Ok(fs) => Some(fs),
            // SAFETY: geteuid has no preconditions.
            Err(e) if unsafe { libc::geteuid() } != 0 => {
                eprintln!("SKIPPED {test}: not root, cannot mount a tmpfs ({e})");
                None
            }
            Err(e) => panic!("root could not mount a tmpfs: {e}"),
        }
    }

    fn path(&self) -> &std::path::Path {
        self.dir.path()
    }

    fn filler(&self) -> std::path::PathBuf {
        self.path().join("filler")
    }

    /// Another process takes all but `leave` bytes of the free space.
    fn fill(&self, leave: u64) {
        let (_, free) = spindle_engine::fs_space::statvfs(self.path()).unwrap();
        let status = std::process::Command::new("fallocate")
            .args(["-l", &free.saturating_sub(leave).to_string()])
            .arg(self.filler())
            .status()
            .unwrap();
        assert!(status.success(), "fallocate failed");
    }

    /// A drive keeping its data here with no reserve and small memtables, so that the engine
    /// itself meets ENOSPC when the filesystem fills: in its journal and in its flushes (every
    /// value goes through the journal: none to the value log).
    fn drive(&self) -> TestDrive {
        self.drive_with("value_log_threshold_bytes = 4294967295\n")
    }

    /// The same with `settings` added.
    fn drive_with(&self, settings: &str) -> TestDrive {
        TestDrive::with_config_in(&format!("reserved_bytes = 0\nmemtable_bytes = 2097152\n{settings}"), self.path().join("data"))
    }

    fn release(&self) {
        std::fs::remove_file(self.filler()).unwrap();
    }
}

impl Drop for SmallFilesystem {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(self.dir.path()).status();
    }
}

/// A disk that fills up for real (another process takes the space while the drive writes):
/// with no reserve configured, the engine itself meets ENOSPC, in its journal and in the
/// flushes of its memtables, which stops fjall's writes. Writes are refused NO_SPACE, reads go
/// on, and once space is back the store reopens itself and writes succeed with no restart;
/// nothing acknowledged is lost, before or after a SIGKILL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disk_that_fills_up_refuses_writes_and_recovers_once_freed() {
    let Some(fs) = SmallFilesystem::mount_or_skip(96 << 20, "a_disk_that_fills_up_refuses_writes_and_recovers_once_freed") else { return };
    let mut drive = fs.drive();
    let c = drive.client().await;
    let key = |i: usize| format!("full-{i:03}").into_bytes();
    // Every third value small: a small batch sits whole in the journal's buffer, and one that
    // fails must not be completed on disk later.
    let value = |i: usize| Bytes::from(vec![i as u8; if i % 3 == 2 { 100 } else { 256 * 1024 }]);

    fs.fill(6 << 20);
    let (acked, refused) = put_until_full(&c, key, value, &[StatusCode::NoSpace, StatusCode::ServiceBusy]).await;
    assert!(!refused.is_empty() && !acked.is_empty(), "{} acknowledged, {} refused", acked.len(), refused.len());
    // Reads go on while the disk is full.
    for &i in &acked {
        assert_eq!(c.get(&key(i)).await.unwrap().map(|e| e.value), Some(value(i)), "key {i} on a full disk");
    }
    let stopped = |log: spindle_proto::pb::command::GetLog| String::from_utf8_lossy(&log.messages.unwrap_or_default()).into_owned();
    let log = stopped(c.get_log(&[spindle_client::LogType::Messages]).await.unwrap());
    assert!(!log.contains("reopened"), "reopened while the disk was still full: {log}");

    // The space comes back: writes succeed again, without a restart.
    fs.release();
    put_once_space_is_back(&c, Bytes::from_static(b"space again")).await;
    let log = stopped(c.get_log(&[spindle_client::LogType::Messages]).await.unwrap());
    assert!(log.contains("store was reopened 1 time"), "the engine never met the full disk itself: {log}");
    kept_what_it_acknowledged(&c, &key, &value, &acked, &refused, "after space came back").await;

    // Everything acknowledged survives a SIGKILL (after a FLUSHALLDATA for the WRITEBACK ones).
    c.flush_all_data().await.unwrap();
    drive.restart_after_kill();
    let c = drive.client().await;
    kept_what_it_acknowledged(&c, &key, &value, &acked, &refused, "after a restart").await;
    assert_eq!(c.get(b"after").await.unwrap().map(|e| e.value), Some(Bytes::from_static(b"space again")));
    drop(c);
    drive.kill();
}

/// Puts keys 0..120 (forced; WRITETHROUGH for even ones, WRITEBACK for odd) onto a disk that
/// fills: which were acknowledged and which refused, each refusal with one of `refusals`.
async fn put_until_full(
    c: &spindle_client::Client,
    key: impl Fn(usize) -> Vec<u8>,
    value: impl Fn(usize) -> Bytes,
    refusals: &[StatusCode],
) -> (Vec<usize>, Vec<usize>) {
    let (mut acked, mut refused) = (Vec::new(), Vec::new());
    for i in 0..120usize {
        let sync = if i.is_multiple_of(2) { Synchronization::Writethrough } else { Synchronization::Writeback };
        match c.put(&key(i), value(i), PutOptions { force: true, sync, ..PutOptions::default() }).await {
            Ok(()) => acked.push(i),
            Err(e) => {
                assert!(e.status().is_some_and(|s| refusals.contains(&s)), "put {i} on a full disk: {e}");
                refused.push(i);
            }
        }
    }
    (acked, refused)
}

/// Every acknowledged key holds its value and no refused key is stored, `when`.
async fn kept_what_it_acknowledged(
    c: &spindle_client::Client,
    key: impl Fn(usize) -> Vec<u8>,
    value: impl Fn(usize) -> Bytes,
    acked: &[usize],
    refused: &[usize],
    when: &str,
) {
    // Compared without printing the values (a failure would print 256 KiB each).
    for &i in acked {
        let got = c.get(&key(i)).await.unwrap().map(|e| e.value);
        assert!(got.as_ref() == Some(&value(i)), "key {i} {when}: {:?} bytes", got.map(|v| v.len()));
    }
    for &i in refused {
        let got = c.get(&key(i)).await.unwrap();
        assert!(got.is_none(), "refused key {i} stored {when}");
    }
}

/// Puts `value` under "after" until the drive takes it, refused only for want of space
/// (NO_SPACE, SERVICE_BUSY) meanwhile and for at most 30 s: a freed disk takes writes again
/// without a restart.
async fn put_once_space_is_back(c: &spindle_client::Client, value: Bytes) {
    let started = std::time::Instant::now();
    loop {
        match c.put(b"after", value.clone(), PutOptions::default()).await {
            Ok(()) => return,
            Err(e) => {
                assert!(matches!(e.status(), Some(StatusCode::NoSpace | StatusCode::ServiceBusy)), "put after freeing space: {e}");
                assert!(started.elapsed() < Duration::from_secs(30), "writes still refused 30 s after space came back: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// A full disk met by the value log (values of 64 KiB and more): each refused put answers
/// NO_SPACE and leaves nothing behind (its partial record is taken back, and no segment file
/// is left per refusal), and once space is back writes succeed without a restart;
/// nothing acknowledged is lost, before or after a SIGKILL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_value_log_refuses_puts_and_loses_nothing_acknowledged() {
    let Some(fs) = SmallFilesystem::mount_or_skip(96 << 20, "a_full_value_log_refuses_puts_and_loses_nothing_acknowledged") else { return };
    let mut drive = fs.drive_with("");
    let c = drive.client().await;
    let key = |i: usize| format!("log-full-{i:03}").into_bytes();
    let value = |i: usize| Bytes::from(vec![i as u8; 256 * 1024]);
    fs.fill(6 << 20);
    let (acked, refused) = put_until_full(&c, key, value, &[StatusCode::NoSpace]).await;
    assert!(!refused.is_empty() && !acked.is_empty(), "{} acknowledged, {} refused", acked.len(), refused.len());
    let segments = || std::fs::read_dir(fs.path().join("data/engine/values")).unwrap().filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "vlog")).count();
    assert!(segments() <= 2, "{} segment files after {} refusals", segments(), refused.len());
    kept_what_it_acknowledged(&c, &key, &value, &acked, &refused, "on a full disk").await;

    fs.release();
    put_once_space_is_back(&c, value(7)).await;
    c.flush_all_data().await.unwrap();
    drive.restart_after_kill();
    let c = drive.client().await;
    kept_what_it_acknowledged(&c, &key, &value, &acked, &refused, "after a restart").await;
    assert_eq!(c.get(b"after").await.unwrap().map(|e| e.value), Some(value(7)));
    drop(c);
    drive.kill();
}

/// A drive that a full disk stopped can still be erased, the usual way to empty it: the erase
/// replaces the stopped store with an empty one, and writes succeed again at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drive_that_a_full_disk_stopped_can_still_be_erased() {
    let Some(fs) = SmallFilesystem::mount_or_skip(96 << 20, "a_drive_that_a_full_disk_stopped_can_still_be_erased") else { return };
    let mut drive = fs.drive();
    let c = drive.client().await;
    let key = |i: usize| format!("erase-{i:03}").into_bytes();
    let value = Bytes::from(vec![7u8; 256 * 1024]);
    fs.fill(6 << 20);
    let mut acked = Vec::new();
    let mut refused = 0;
    for i in 0..120 {
        match c.put(&key(i), value.clone(), PutOptions { force: true, ..PutOptions::default() }).await {
            Ok(()) => acked.push(i),
            Err(_) => refused += 1,
        }
    }
    assert!(refused > 0 && !acked.is_empty(), "{} acknowledged, {refused} refused", acked.len());

    // A settings change cannot be saved on the full disk: NO_SPACE, and nothing changes (the
    // erase below still needs no PIN).
    let admin = drive.tls_client().await;
    let refused = admin.set_erase_pin(b"", b"new-pin").await.unwrap_err();
    assert_eq!(refused.status(), Some(StatusCode::NoSpace), "{refused}");

    // The erase works with the disk still full (the other process's file stays).
    admin.pin_operation(spindle_client::PinOpType::ErasePinop, b"").await.unwrap();
    let log = c.get_log(&[spindle_client::LogType::Messages]).await.unwrap();
    let log = String::from_utf8_lossy(&log.messages.unwrap_or_default()).into_owned();
    assert!(log.contains("store was reopened 1 time"), "the erase did not meet a stopped store: {log}");
    for &i in &acked {
        assert_eq!(c.get(&key(i)).await.unwrap(), None, "key {i} survived the erase");
    }
    c.put(b"after", Bytes::from_static(b"empty again"), PutOptions::default()).await.unwrap();
    drive.restart_after_kill();
    let c = drive.client().await;
    assert_eq!(c.get(b"after").await.unwrap().map(|e| e.value), Some(Bytes::from_static(b"empty again")));
    assert_eq!(c.get(&key(acked[0])).await.unwrap(), None);
    drop(c);
    drive.kill();
}
