//! The put/get benchmark runs against a spawned drive, an in-process engine on disk and one in
//! memory, and LevelDB and RocksDB in-process, with the same options.

mod common;

use common::TestDrive;

fn bench(args: &[&str]) -> serde_json::Value {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_spindle")).arg("bench").args(args).arg("--json").output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn put_and_get_run_against_every_kind_of_target() {
    let drive = TestDrive::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let embedded = format!("embedded:{}/e", dir.path().display());
    let leveldb = format!("leveldb:{}/l", dir.path().display());
    let rocksdb = format!("rocksdb:{}/r", dir.path().display());
    for target in [drive.addr.as_str(), embedded.as_str(), leveldb.as_str(), rocksdb.as_str()] {
        for order in ["sequential", "random"] {
            let common = ["--drive", target, "--count", "2000", "--value-size", "4096", "--connections", "4", "--depth", "4", "--order", order];
            let put = bench(&[&["put"][..], &common[..], &["--sync", "writethrough", "--flush"]].concat());
            assert_eq!((put["ops"].as_u64(), put["errors"].as_u64()), (Some(2000), Some(0)), "{target} {order}");
            let get = bench(&[&["get"][..], &common[..]].concat());
            assert_eq!(get["errors"], 0, "{target} {order}: every key written by the put run is found");
            assert!(get["latency_us"]["p50"].as_u64().unwrap() >= 1);
        }
    }
    let mem = bench(&["put", "--drive", "memory:", "--count", "1000", "--value-size", "120"]);
    assert_eq!(mem["errors"], 0);
}

/// The replication floor's targets store every put on each of their drives (a majority
/// answers first, the rest finish behind it, and a flush waits for them) and read back what
/// they stored.
#[test]
fn the_fanout_targets_store_on_every_drive() {
    let drives: Vec<TestDrive> = (0..3).map(|_| TestDrive::start(&[])).collect();
    let list = drives.iter().map(|d| d.addr.as_str()).collect::<Vec<_>>().join(",");
    // Each kind with keys of its own length: the other's keys are not these.
    for (kind, key_size) in [("fanout", "16"), ("fanout-read", "24")] {
        let target = format!("{kind}:{list}");
        let common = ["--count", "500", "--value-size", "1000", "--key-size", key_size, "--connections", "2", "--depth", "2"];
        let put = bench(&[&["put", "--drive", &target, "--sync", "writethrough", "--flush"][..], &common[..]].concat());
        assert_eq!((put["ops"].as_u64(), put["errors"].as_u64()), (Some(500), Some(0)), "{kind}");
        assert_eq!(bench(&[&["get", "--drive", &target][..], &common[..]].concat())["errors"], 0, "{kind}");
        for d in &drives {
            let get = bench(&[&["get", "--drive", &d.addr][..], &common[..]].concat());
            assert_eq!(get["errors"], 0, "{kind}: a key missing on {}", d.addr);
        }
    }
}

/// With @R each key goes to R of the drives, picked by its hash: every key is on exactly R.
#[test]
fn a_fanout_over_more_drives_than_replicas_puts_each_key_on_r_of_them() {
    let drives: Vec<TestDrive> = (0..3).map(|_| TestDrive::start(&[])).collect();
    let list = drives.iter().map(|d| d.addr.as_str()).collect::<Vec<_>>().join(",");
    let target = format!("fanout-read:{list}@2");
    let common = ["--count", "600", "--value-size", "100", "--connections", "2", "--depth", "2"];
    let put = bench(&[&["put", "--drive", &target, "--flush"][..], &common[..]].concat());
    assert_eq!((put["ops"].as_u64(), put["errors"].as_u64()), (Some(600), Some(0)));
    assert_eq!(bench(&[&["get", "--drive", &target][..], &common[..]].concat())["errors"], 0);
    let mut held = Vec::new();
    for d in &drives {
        let missing = bench(&[&["get", "--drive", &d.addr][..], &common[..]].concat())["errors"].as_u64().unwrap();
        held.push(600 - missing);
    }
    assert_eq!(held.iter().sum::<u64>(), 1200, "each key on two drives: {held:?}");
    assert!(held.iter().all(|&h| h > 200 && h < 600), "the keys spread over the drives: {held:?}");
}

#[test]
fn the_paper_micro_benchmarks_run_end_to_end() {
    let drive = TestDrive::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("paper.json");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_spindle"))
        .args(["bench", "paper", "--drive", &drive.addr, "--scale", "quick", "--repeat", "2", "--out"])
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!((doc["schema_version"].as_u64(), doc["complete"].as_bool()), (Some(2), Some(true)));
    assert!(doc["warmup"].as_str().unwrap().contains("not measured"));
    assert!(doc["machine"]["cores"].as_u64().unwrap() >= 1);
    let rows = doc["rows"].as_array().unwrap();
    let count = |e: &str| rows.iter().filter(|r| r["experiment"] == e).count();
    assert_eq!((count("sequential-write"), count("sequential-read"), count("random-read-after-sequential-write")), (7, 7, 7));
    assert_eq!((count("random-write"), count("random-read"), count("key-size-write"), count("write-mode")), (7, 7, 2, 3));
    assert_eq!((count("not-found"), count("read-latency-histogram")), (2, 2));
    for row in rows {
        let r = &row["result"];
        if row["experiment"] == "not-found" {
            // Every lookup of an absent key is a NOT_FOUND.
            assert_eq!(r["errors"], r["ops"], "{row}");
        } else {
            assert_eq!(r["errors"], 0, "{row}");
        }
        let bins: u64 = r["latency_us"]["bins_10ms"].as_array().unwrap().iter().map(|b| b.as_u64().unwrap()).sum();
        assert_eq!(bins, r["ops"].as_u64().unwrap(), "every operation is in one 10 ms bin: {row}");
        // Two repetitions, the reported run is their median, inside their spread.
        let spread = &row["repetitions"]["ops_per_second"];
        assert_eq!(row["repetitions"]["runs"], 2, "{row}");
        let ops = r["ops_per_second"].as_f64().unwrap();
        assert!(spread["min"].as_f64().unwrap() <= ops && ops <= spread["max"].as_f64().unwrap(), "{row}");
    }
    // YCSB: a load and A-F at 4 KiB and at 1 MiB records, nothing failed.
    let ycsb = doc["ycsb"].as_array().unwrap();
    assert_eq!(ycsb.len(), 14);
    for y in ycsb {
        let ops = y["result"]["operations"].as_object().unwrap();
        assert!(!ops.is_empty() && ops.values().all(|s| s["failures"] == 0), "{y}");
    }
    let workloads: Vec<_> = ycsb.iter().filter(|y| y["record_size"] == 1048576).map(|y| y["workload"].as_str().unwrap()).collect();
    assert_eq!(workloads, ["A", "A", "B", "C", "F", "D", "E"]);
}

#[test]
fn an_interrupted_paper_run_leaves_valid_partial_results() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("partial.json");
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_spindle"));
    command.args(["bench", "paper", "--drive", "memory:", "--scale", "paper", "--out"]).arg(&out).stderr(std::process::Stdio::null());
    // A test run started in the background of a non-interactive shell inherits SIGINT as
    // ignored, and so would the child: give it the default action, as a terminal's Ctrl-C has.
    // SAFETY: signal() is async-signal-safe, and nothing else runs between fork and exec.
    unsafe {
        use std::os::unix::process::CommandExt;
        command.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    let mut child = common::dies_with_test(&mut command).spawn().unwrap();
    // Wait for the first points, then Ctrl-C.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !out.exists() {
        assert!(std::time::Instant::now() < deadline, "no result written within 60 s");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // SAFETY: sending a signal to our own child process.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    child.wait().unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(doc["complete"], false);
    assert!(!doc["rows"].as_array().unwrap().is_empty());
    assert_eq!(doc["schema_version"], 2);
}

#[test]
fn put_and_get_run_against_redis_when_it_is_installed() {
    let Some(server) = common::RedisServer::start() else { return };
    let url = server.url.clone();
    let put = bench(&["put", "--drive", &url, "--count", "3000", "--value-size", "1000", "--order", "random"]);
    let get = bench(&["get", "--drive", &url, "--count", "3000", "--value-size", "1000", "--order", "random"]);
    drop(server);
    assert_eq!((put["errors"].as_u64(), get["errors"].as_u64()), (Some(0), Some(0)));
}
