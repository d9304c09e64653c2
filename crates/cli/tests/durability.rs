//! Durability under SIGKILL: every write the drive acknowledged as durable (WRITETHROUGH, or
//! WRITEBACK followed by an acknowledged FLUSH) is there, with its version, after the process
//! is killed at a random moment and restarted. Repeated several times on one data directory.

mod common;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::TestDrive;
use parking_lot_free::Shared;
use rand::{Rng, SeedableRng};
use spindle_client::{Client, PutOptions, Synchronization};

/// A tiny mutex-protected list, to avoid a test-only dependency.
mod parking_lot_free {
    pub type Shared<T> = std::sync::Arc<std::sync::Mutex<Vec<T>>>;
}

#[derive(Clone, Debug)]
struct Durable {
    key: String,
    version: String,
    len: usize,
}

fn value_for(key: &str, len: usize) -> Bytes {
    let seed = key.bytes().fold(0u8, |a, b| a.wrapping_mul(31).wrapping_add(b));
    Bytes::from((0..len).map(|i| seed.wrapping_add(i as u8)).collect::<Vec<_>>())
}

fn random_len(rng: &mut impl Rng) -> usize {
    match rng.random_range(0..10) {
        0 => rng.random_range(64 * 1024..300 * 1024), // lands in blob files
        _ => rng.random_range(0..2000),
    }
}

/// WRITETHROUGH puts; each acknowledgement is durable on its own.
async fn writethrough_worker(c: Client, round: usize, w: usize, durable: Shared<Durable>) {
    let mut rng = rand::rngs::StdRng::seed_from_u64((round * 100 + w) as u64);
    for i in 0.. {
        let key = format!("r{round}-wt{w}-{i}");
        let len = random_len(&mut rng);
        let opts = PutOptions { new_version: Bytes::from(format!("v{i}")), ..PutOptions::forced(Synchronization::Writethrough) };
        if c.put(key.as_bytes(), value_for(&key, len), opts).await.is_err() {
            return;
        }
        durable.lock().unwrap().push(Durable { key, version: format!("v{i}"), len });
    }
}

/// WRITEBACK puts, with a FLUSH every few writes: what was acknowledged before a FLUSH was
/// sent is durable once that FLUSH is acknowledged.
async fn writeback_worker(c: Client, round: usize, w: usize, durable: Shared<Durable>) {
    let mut rng = rand::rngs::StdRng::seed_from_u64((round * 100 + w + 50) as u64);
    let mut acked = Vec::new();
    for i in 0.. {
        let key = format!("r{round}-wb{w}-{i}");
        let len = random_len(&mut rng);
        let opts = PutOptions { new_version: Bytes::from(format!("v{i}")), ..PutOptions::forced(Synchronization::Writeback) };
        if c.put(key.as_bytes(), value_for(&key, len), opts).await.is_err() {
            return;
        }
        acked.push(Durable { key, version: format!("v{i}"), len });
        if i % 7 == 6 {
            let covered = std::mem::take(&mut acked);
            if c.flush_all_data().await.is_err() {
                return;
            }
            durable.lock().unwrap().extend(covered);
        }
    }
}

/// A compare-and-swap counter: the stored version is never behind the last acknowledged one.
async fn counter_worker(c: Client, w: usize, last: Arc<std::sync::Mutex<Option<u64>>>) {
    let key = format!("counter{w}");
    let current = match c.get_version(key.as_bytes()).await {
        Ok(v) => v.map(|v| String::from_utf8(v.to_vec()).unwrap().parse::<u64>().unwrap()),
        Err(_) => return,
    };
    let mut n = current.unwrap_or(0);
    let mut db = current.map(|v| v.to_string()).unwrap_or_default();
    loop {
        let next = n + 1;
        let opts = PutOptions {
            new_version: Bytes::from(next.to_string()),
            db_version: Bytes::from(db.clone()),
            ..PutOptions::default()
        };
        if c.put(key.as_bytes(), Bytes::from(next.to_string()), opts).await.is_err() {
            return;
        }
        *last.lock().unwrap() = Some(next);
        n = next;
        db = next.to_string();
    }
}

#[test]
fn acknowledged_durable_writes_survive_sigkill() {
    let rt = common::runtime();
    let mut drive = TestDrive::start(&[]);
    let mut all_durable: Vec<Durable> = Vec::new();
    let counters: Vec<Arc<std::sync::Mutex<Option<u64>>>> = (0..2).map(|_| Arc::new(std::sync::Mutex::new(None))).collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(2026);
    for round in 0..4 {
        let durable: Shared<Durable> = Default::default();
        let kill_after = Duration::from_millis(rng.random_range(300..1200));
        rt.block_on(async {
            let mut tasks = Vec::new();
            for w in 0..6 {
                let c = drive.client().await;
                tasks.push(tokio::spawn(writethrough_worker(c, round, w, durable.clone())));
            }
            for w in 0..3 {
                let c = drive.client().await;
                tasks.push(tokio::spawn(writeback_worker(c, round, w, durable.clone())));
            }
            for (w, last) in counters.iter().enumerate() {
                let c = drive.client().await;
                tasks.push(tokio::spawn(counter_worker(c, w, last.clone())));
            }
            tokio::time::sleep(kill_after).await;
            drive.kill();
            for t in tasks {
                t.await.unwrap();
            }
        });
        let acknowledged = durable.lock().unwrap().clone();
        assert!(!acknowledged.is_empty(), "round {round}: no write was acknowledged before the kill");
        all_durable.extend(acknowledged);

        drive.restart_after_kill();
        rt.block_on(async {
            let c = drive.client().await;
            for d in &all_durable {
                let e = c.get(d.key.as_bytes()).await.unwrap().unwrap_or_else(|| panic!("round {round}: {} lost", d.key));
                assert_eq!(e.metadata.version, Bytes::from(d.version.clone()), "{}", d.key);
                assert_eq!(e.value, value_for(&d.key, d.len), "{}", d.key);
            }
            for (w, last) in counters.iter().enumerate() {
                let acked = *last.lock().unwrap();
                if let Some(acked) = acked {
                    let stored = c.get_version(format!("counter{w}").as_bytes()).await.unwrap().expect("counter lost");
                    let stored: u64 = String::from_utf8(stored.to_vec()).unwrap().parse().unwrap();
                    assert!(stored >= acked, "counter{w}: stored {stored} behind acknowledged {acked}");
                }
            }
        });
        eprintln!("round {round}: killed after {kill_after:?}, {} durable writes verified", all_durable.len());
    }
}

/// Where the aborting half below writes its drive's pid (set only in its child process).
const ABORT_PID_FILE: &str = "SPINDLE_TEST_ABORT_PID_FILE";

/// A test that aborts runs no destructor (a stack overflow, a panic under `panic = abort`, a
/// kill by a timeout): the drives it started must stop with it all the same.
#[test]
fn a_test_that_aborts_leaves_no_drive_running() {
    let dir = tempfile::tempdir().unwrap();
    let (pid_file, log) = (dir.path().join("pid"), dir.path().join("log"));
    let log_file = std::fs::File::create(&log).unwrap();
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "aborts_with_a_drive_running", "--ignored", "--nocapture", "--test-threads", "1"])
        .env(ABORT_PID_FILE, &pid_file)
        .env("SPINDLE_TEST_DATA", dir.path())
        // Not piped: a drive left running would hold a pipe open, and reading it would wait.
        .stdout(log_file.try_clone().unwrap())
        .stderr(log_file)
        .status()
        .unwrap();
    let log = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!status.success(), "the aborting half did not abort: {status:?}\n{log}");
    let pid: u32 = std::fs::read_to_string(&pid_file).expect("the aborting half started a drive").trim().parse().unwrap();
    // Gone, or a zombie no one has reaped yet. The signal is delivered at once; the bound only
    // covers a busy machine.
    let running = || std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'));
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while running() {
        if std::time::Instant::now() > deadline {
            // Stop it here so that this failure leaves nothing behind either.
            let _ = std::process::Command::new("kill").args(["-9", &pid.to_string()]).status();
            panic!("drive {pid} still running after its test aborted");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The aborting half of the test above, run by it in a child process.
#[test]
#[ignore = "run by a_test_that_aborts_leaves_no_drive_running in a child process"]
fn aborts_with_a_drive_running() {
    let Some(pid_file) = std::env::var_os(ABORT_PID_FILE) else { return };
    let data = std::path::PathBuf::from(std::env::var_os("SPINDLE_TEST_DATA").unwrap()).join("drive");
    let drive = TestDrive::start_in(&data, &[]);
    std::fs::write(pid_file, drive.pid().to_string()).unwrap();
    std::process::abort();
}
