//! `spindle bench act` end to end through the binary: device mode on a temporary file, drive
//! mode against a spawned drive, and the refusals. Pass or fail depends on this machine's load,
//! so the smoke runs check the shape and the arithmetic of the results, not the verdict.

mod common;

use std::process::{Command, Output};

use common::TestDrive;
use serde_json::Value;

fn act(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_spindle")).args(["bench", "act"]).args(args).output().unwrap()
}

fn json(out: &Output) -> Value {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

fn totals(run: &Value) -> Vec<(String, u64, u64)> {
    run["outcome"]["totals"].as_array().unwrap().iter().map(|t| (t["histogram"].as_str().unwrap().to_string(), t["ops"].as_u64().unwrap(), t["errors"].as_u64().unwrap())).collect()
}

/// The certified rating is the last rating of an unbroken run of passes from the bottom.
fn check_stepping(doc: &Value) {
    let runs = doc["runs"].as_array().unwrap();
    let passed: Vec<bool> = runs.iter().map(|r| r["verdict"]["passed"].as_bool().unwrap()).collect();
    assert!(passed.iter().rev().skip(1).all(|p| *p), "stepping goes on only after a pass: {passed:?}");
    let expected = runs.iter().take_while(|r| r["verdict"]["passed"] == true).last().map(|r| r["rating"].clone()).unwrap_or(Value::Null);
    assert_eq!(doc["certified_rating"], expected);
    assert_eq!(doc["complete"], true);
}

#[test]
fn device_mode_runs_acts_pattern_on_a_file_for_two_seconds() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (file, out, plot) = (dir.path().join("device.bin"), dir.path().join("act.json"), dir.path().join("act.svg"));
    let o = act(&[
        "device", "--device", file.to_str().unwrap(), "--size", "32MiB", "--prep", "--ratings", "1", "--duration", "2", "--slice", "1",
        "--out", out.to_str().unwrap(), "--plot", plot.to_str().unwrap(), "--json",
    ]);
    let doc = json(&o);
    assert_eq!((doc["schema_version"].as_u64(), doc["mode"].as_str()), (Some(1), Some("device")));
    assert!(doc["machine"]["cores"].as_u64().unwrap() >= 1);
    assert_eq!(doc["device"]["bytes"], 32 << 20);
    assert_eq!(doc["device"]["read_bytes"].as_u64().unwrap() % doc["device"]["min_op_bytes"].as_u64().unwrap(), 0);
    assert!(doc["prep_seconds"].as_f64().unwrap() > 0.0);
    let run = &doc["runs"][0];
    assert_eq!(run["rating"], 1);
    // 2 s at 1x: 4000 record reads; large blocks at 2000/85 per second each way: ceil(47.06).
    let t = totals(run);
    assert_eq!(t, vec![("reads".into(), 4000, 0), ("large-block-reads".into(), 48, 0), ("large-block-writes".into(), 48, 0)], "{run}");
    let slices = run["outcome"]["slices"].as_array().unwrap();
    assert_eq!(slices.len(), 2);
    let per_slice: u64 = slices.iter().map(|s| s["histograms"][0]["ops"].as_u64().unwrap()).sum();
    assert_eq!(per_slice, 4000, "every read lands in one slice");
    check_stepping(&doc);
    // The file holds the same document; the figure is an SVG; the text table went to stderr.
    let saved: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(saved["runs"][0]["outcome"]["totals"], run["outcome"]["totals"]);
    assert!(std::fs::read_to_string(&plot).unwrap().starts_with("<svg"));
    let text = String::from_utf8_lossy(&o.stderr);
    assert!(text.contains("%>64ms") && text.contains("certified:"), "{text}");
}

#[test]
fn drive_mode_salts_the_key_space_and_steps_the_load() {
    let drive = TestDrive::start(&[]);
    let o = act(&["drive", "--drive", &drive.addr, "--keys", "2000", "--prep", "--ratings", "1,3", "--duration", "2", "--slice", "1", "--json"]);
    let doc = json(&o);
    assert_eq!(doc["mode"], "drive");
    let run = &doc["runs"][0];
    // Every GET finds its salted key: no errors, 4000 gets and 2000 puts in 2 s at 1x.
    assert_eq!(totals(run), vec![("gets".into(), 4000, 0), ("puts".into(), 2000, 0)], "{run}");
    check_stepping(&doc);
    let text = String::from_utf8_lossy(&o.stderr);
    assert!(text.contains("1x: PASS") || text.contains("1x: FAIL"), "{text}");
}

#[test]
fn drive_mode_without_salting_fails_on_missing_keys() {
    let drive = TestDrive::start(&[]);
    // A million keys, 1000 puts in the second: almost every one of the 2000 GETs misses.
    let doc = json(&act(&["drive", "--drive", &drive.addr, "--keys", "1000000", "--ratings", "1", "--duration", "1", "--slice", "1", "--json"]));
    let run = &doc["runs"][0];
    assert_eq!(run["verdict"]["passed"], false);
    let failures = run["verdict"]["failures"].as_array().unwrap();
    let missed = failures.iter().find(|f| f["kind"] == "errors" && f["histogram"] == "gets").and_then(|f| f["errors"].as_u64());
    assert!(missed.is_some_and(|n| (1990..=2000).contains(&n)), "{failures:?}");
    assert_eq!(doc["certified_rating"], Value::Null);
}

#[test]
fn refusals_bad_parameters_and_block_devices_without_confirmation() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("d");
    let fail = |o: Output, needle: &str| {
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(needle), "expected {needle:?} in {err}");
    };
    fail(act(&["device", "--device", file.to_str().unwrap(), "--size", "64MiB", "--ratings", "3,1"]), "strictly increasing");
    fail(act(&["device", "--device", file.to_str().unwrap(), "--size", "64MiB", "--duration=-1"]), "not a number of seconds");
    fail(act(&["device", "--device", file.to_str().unwrap(), "--size", "64MiB", "--record-bytes", "0"]), "record size");
    fail(act(&["device", "--device", file.to_str().unwrap(), "--size", "1MiB"]), "at least 16");
    fail(act(&["device", "--device", dir.path().to_str().unwrap()]), "not a regular file or a block device");
    if let Some(dev) = ["/dev/vda", "/dev/sda", "/dev/nvme0n1", "/dev/loop0"].into_iter().find(|p| std::path::Path::new(p).exists()) {
        // Refused before anything is opened for writing.
        fail(act(&["device", "--device", dev, "--ratings", "1", "--duration", "1"]), "--yes-destroy-data");
    }
}
