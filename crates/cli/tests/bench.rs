//! The put/get benchmark runs against a spawned drive, an in-process engine on disk and one in
//! memory, with the same options.

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
    let embedded = format!("embedded:{}", dir.path().display());
    for target in [drive.addr.as_str(), embedded.as_str()] {
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

#[test]
fn the_paper_micro_benchmarks_run_end_to_end() {
    let drive = TestDrive::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("paper.json");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_spindle"))
        .args(["bench", "paper", "--drive", &drive.addr, "--scale", "quick", "--out"])
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(doc["schema_version"], 1);
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
    }
}

#[test]
fn an_interrupted_paper_run_leaves_valid_partial_results() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("partial.json");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_spindle"))
        .args(["bench", "paper", "--drive", "memory:", "--scale", "paper", "--out"])
        .arg(&out)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
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
    assert_eq!(doc["schema_version"], 1);
}

#[test]
fn put_and_get_run_against_redis_when_it_is_installed() {
    // scripts/test.sh installs redis-server; a bare `cargo test` on a machine without it skips.
    if std::process::Command::new("redis-server").arg("--version").output().is_err() {
        eprintln!("redis-server not installed: skipped");
        return;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut server = std::process::Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let url = format!("redis://127.0.0.1:{port}");
    let mut ready = false;
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            ready = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(ready, "redis-server did not start");
    let put = bench(&["put", "--drive", &url, "--count", "3000", "--value-size", "1000", "--order", "random"]);
    let get = bench(&["get", "--drive", &url, "--count", "3000", "--value-size", "1000", "--order", "random"]);
    server.kill().unwrap();
    server.wait().unwrap();
    assert_eq!((put["errors"].as_u64(), get["errors"].as_u64()), (Some(0), Some(0)));
}
