//! `spindle bench archive` end to end: the fit command on a sizes file, and runs against one
//! and two spawned drives with a capacity quota (so the utilisation levels are small).

mod common;

use common::TestDrive;

const QUOTA: u64 = 64 << 20;

fn spindle(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_spindle")).args(args).output().unwrap()
}

fn run_archive(drives: &[&TestDrive], extra: &[&str]) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("archive.json");
    let plots = dir.path().join("plots");
    let mut args = vec!["bench", "archive", "run", "--bootstrap", "10", "--resample-files", "2000", "--file-reads", "40", "--fragment-reads", "40", "--batch-bytes", "4194304"];
    for d in drives {
        args.extend(["--drive", d.addr.as_str()]);
    }
    let (out_s, plots_s) = (out.display().to_string(), plots.display().to_string());
    args.extend(["--out", &out_s, "--plots", &plots_s]);
    args.extend(extra);
    let o = spindle(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for w in ["sequential-write", "random-read", "fragment-read"] {
        assert!(plots.join(format!("{w}-mbps.svg")).exists(), "{w} plot");
    }
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    // `plot` merges result files, repeats of a row into their median: the same file three
    // times gives its own table back.
    let merged = spindle(&["bench", "archive", "plot", &out_s, &out_s, &out_s]);
    assert!(merged.status.success(), "{}", String::from_utf8_lossy(&merged.stderr));
    let table: Vec<String> = String::from_utf8_lossy(&merged.stdout).lines().filter(|l| l.starts_with("| ")).map(str::to_string).collect();
    assert_eq!(table.len(), 1 + doc["rows"].as_array().unwrap().len(), "header and every row once");
    let once = spindle(&["bench", "archive", "plot", &out_s]);
    assert_eq!(String::from_utf8_lossy(&once.stdout).lines().filter(|l| l.starts_with("| ")).collect::<Vec<_>>(), table);
    let other = dir.path().join("other.json");
    std::fs::write(&other, r#"{"schema_version": 1, "rows": []}"#).unwrap();
    assert!(!spindle(&["bench", "archive", "plot", other.to_str().unwrap()]).status.success(), "not an archive result");
    doc
}

#[test]
fn an_archive_run_fills_each_level_and_reads_back_every_file_it_picks() {
    let drive = TestDrive::start(&["--capacity-bytes", &QUOTA.to_string()]);
    let doc = run_archive(&[&drive], &["--levels", "10,20"]);
    assert_eq!((doc["schema_version"].as_u64(), doc["kind"].as_str(), doc["complete"].as_bool()), (Some(1), Some("archive"), Some(true)));
    assert_eq!((doc["capacity_bytes"].as_u64(), doc["capacity_source"].as_str()), (Some(QUOTA), Some("getlog")), "capacity from GETLOG CAPACITIES");
    assert!(doc["machine"]["cores"].as_u64().unwrap() >= 1);
    let means: Vec<f64> = doc["model"]["mean_bytes"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    assert!(means[0] < means[1] && means[1] < means[2], "small < fitted < large: {means:?}");
    // Every envelope ran, deleted its files and recorded the drive's usage.
    let usage = doc["envelope_usage"].as_array().unwrap();
    assert_eq!(usage.iter().map(|u| u["envelope"].as_str().unwrap()).collect::<Vec<_>>(), ["small", "fitted", "large"]);
    let used_at_start = |e: &str| usage.iter().find(|u| u["envelope"] == e).unwrap()["used_at_start_bytes"].as_u64().unwrap();
    let rows = doc["rows"].as_array().unwrap();
    let first: Vec<_> = rows.iter().filter(|r| r["envelope"] == "small").collect();
    assert_eq!(first.len(), 2 * 3, "the first envelope: 2 levels x 3 workloads");
    // Later envelopes on the same drive start from the space the engine has not reclaimed:
    // each level they cannot reach is a note, not a row.
    let measured_levels = |e: &str| rows.iter().filter(|r| r["envelope"] == e && r["workload"] == "random-read").count();
    let skipped = doc["notes"].as_array().unwrap().len();
    assert_eq!(measured_levels("small") + measured_levels("fitted") + measured_levels("large") + skipped, 3 * 2, "{}", doc["notes"]);
    for r in rows {
        let m = &r["measured"];
        assert_eq!(m["errors"], 0, "{r}");
        let level = r["level"].as_f64().unwrap();
        let start = used_at_start(r["envelope"].as_str().unwrap());
        assert!(r["fileset_bytes"].as_u64().unwrap() + start >= (QUOTA as f64 * level) as u64, "the fileset fills its level: {r}");
        assert!(r["drive_used_bytes"].as_u64().unwrap() > 0, "{r}");
        match r["workload"].as_str().unwrap() {
            "random-read" => assert_eq!(m["files"], r["fileset_files"].as_u64().unwrap().min(40), "{r}"),
            "fragment-read" => assert_eq!(m["files"], 40, "{r}"),
            _ => assert!(m["bytes"].as_u64().unwrap() <= r["fileset_bytes"].as_u64().unwrap(), "{r}"),
        }
        assert!(r["page_cache_dropped"] == false, "not asked to drop the cache");
    }
    // Every envelope deleted its files at the end: the drive holds no archive keys.
    let o = spindle(&["range", "arc/", "arc0", "--drive", &drive.addr, "--json"]);
    assert!(o.status.success());
    let keys: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(keys["keys"].as_array().map(Vec::len), Some(0), "{keys}");
}

#[test]
fn files_are_spread_over_several_drives_and_kinetic_batches_work() {
    let a = TestDrive::start(&["--capacity-bytes", &QUOTA.to_string()]);
    let b = TestDrive::start(&["--capacity-bytes", &QUOTA.to_string()]);
    let doc = run_archive(&[&a, &b], &["--levels", "10", "--envelopes", "fitted", "--write-mode", "kinetic-batch"]);
    assert_eq!(doc["capacity_bytes"].as_u64(), Some(2 * QUOTA), "capacities add up");
    assert!(doc["rows"].as_array().unwrap().iter().all(|r| r["measured"]["errors"] == 0));
}

#[test]
fn fit_prefers_the_generalized_gamma_for_sizes_drawn_from_one() {
    use rand::{Rng, SeedableRng};
    // Weibull-shaped sizes (a generalized Gamma with d = p = 0.5), which a Gamma cannot match.
    let mut rng = rand::rngs::StdRng::seed_from_u64(4);
    let sizes: String = (0..3000).map(|_| format!("{}\n", (20_000.0 * (-(1.0 - rng.random::<f64>()).ln()).powf(2.0)).round() as u64 + 1)).collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sizes.txt");
    std::fs::write(&path, sizes).unwrap();
    let o = spindle(&["bench", "archive", "fit", "--sizes", path.to_str().unwrap(), "--bootstrap", "10", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["fits"]["preferred"], "generalized-gamma", "{doc}");
    let p = doc["fits"]["generalized_gamma"]["model"]["power_p"].as_f64().unwrap();
    assert!((p - 0.5).abs() < 0.1, "Weibull power 0.5, fitted {p}");
    let bad = spindle(&["bench", "archive", "fit", "--histogram", "/nonexistent/h"]);
    assert!(!bad.status.success() && String::from_utf8_lossy(&bad.stderr).contains("/nonexistent/h"));
}
