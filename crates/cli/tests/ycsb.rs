//! Every YCSB core workload runs end to end against a spawned drive (tiny sizes).

mod common;

use common::TestDrive;

#[test]
fn every_core_workload_loads_and_runs() {
    let drive = TestDrive::start(&[]);
    let spindle = env!("CARGO_BIN_EXE_spindle");
    for (i, w) in ['A', 'B', 'C', 'D', 'E', 'F'].iter().enumerate() {
        let out = std::process::Command::new(spindle)
            .args(["bench", "ycsb", "--drive", &drive.addr, "--records", "300", "--operations", "600", "--threads", "3", "--json"])
            .args(["--workload", &w.to_string(), "--seed", &i.to_string()])
            .output()
            .unwrap();
        assert!(out.status.success(), "workload {w}: {}", String::from_utf8_lossy(&out.stderr));
        let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 2, "load and run phases");
        assert_eq!(lines[0]["operations"]["INSERT"]["operations"], 300);
        let run = &lines[1]["operations"];
        let count = |op: &str| run[op]["operations"].as_u64().unwrap_or(0);
        let transactions = match w {
            // Plain reads plus read-modify-writes, whose reads YCSB also counts as READ.
            'F' => count("READ"),
            'E' => count("SCAN") + count("INSERT"),
            _ => count("READ") + count("UPDATE") + count("INSERT"),
        };
        assert_eq!(transactions, 600, "workload {w}: {run}");
        for (op, stats) in run.as_object().unwrap() {
            assert_eq!(stats["failures"], 0, "workload {w} {op}");
        }
    }
    // Open loop at a target rate: the run takes about operations / rate.
    let started = std::time::Instant::now();
    let out = std::process::Command::new(spindle)
        .args(["bench", "ycsb", "--drive", &drive.addr, "--records", "300", "--operations", "400", "--threads", "2", "--workload", "B"])
        .args(["--phase", "run", "--target-rate", "1000"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(started.elapsed() >= std::time::Duration::from_millis(350), "a 1000 ops/s run of 400 operations took {:?}", started.elapsed());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("[OVERALL], Throughput(ops/sec)") && text.contains("[READ], 99thPercentileLatency(us)"), "{text}");
}

/// The same workloads run against the peers the lab compares with: Spindle's engine in-process,
/// LevelDB and RocksDB through their libraries, and redis when it is installed (E's scans go
/// through each target's own ordered scan).
#[test]
fn workloads_run_against_every_kind_of_target() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    let mut targets = vec![format!("embedded:{d}/e"), "memory:".to_string(), format!("leveldb:{d}/l"), format!("rocksdb:{d}/r")];
    let redis = common::RedisServer::start();
    if let Some(r) = &redis {
        targets.push(r.url.clone());
    }
    for target in &targets {
        for w in ['A', 'E'] {
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_spindle"))
                .args(["bench", "ycsb", "--drive", target, "--records", "200", "--operations", "300", "--threads", "3", "--json"])
                .args(["--workload", &w.to_string(), "--field-length", "400"])
                .output()
                .unwrap();
            assert!(out.status.success(), "{target} {w}: {}", String::from_utf8_lossy(&out.stderr));
            let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
            assert_eq!(lines[1]["spec"]["workload"]["field_length"], 400);
            for (op, stats) in lines[1]["operations"].as_object().unwrap() {
                assert!(stats["operations"].as_u64().unwrap() > 0);
                assert_eq!(stats["failures"], 0, "{target} workload {w} {op}");
            }
        }
    }
}

#[test]
fn an_empty_field_length_is_refused() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_spindle"))
        .args(["bench", "ycsb", "--drive", "memory:", "--records", "10", "--operations", "10", "--field-length", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--field-length must be at least 1"));
}
