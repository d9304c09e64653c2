//! `spindle plan` end to end: the shipped example catalogue, flags overriding its scenario, a
//! catalogue whose figures come from a `spindle bench paper` result file, and the errors.

use std::path::{Path, PathBuf};
use std::process::Output;

fn repo_file(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(relative)
}

fn spindle_plan(args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_spindle")).arg("plan").args(args).output().unwrap()
}

fn example() -> String {
    repo_file("docs/plan/example-catalogue.toml").display().to_string()
}

#[test]
fn the_example_catalogue_gives_a_design_in_text_and_json() {
    let out = spindle_plan(&[&example()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for expected in ["proven optimal", "x node \"", "Totals:", "Predicted: sequential-write", "Cost: capital", "Constraints:", "BINDING"] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }

    let out = spindle_plan(&[&example(), "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let design: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let totals = &design["totals"];
    let targets = &design["scenario"]["targets"];
    assert!(totals["usable_capacity_tb"].as_f64().unwrap() >= targets["capacity_tb"].as_f64().unwrap());
    assert!(totals["random_read_mb_s"].as_f64().unwrap() >= targets["random_read_mb_s"].as_f64().unwrap());
    let lines = design["lines"].as_array().unwrap();
    let nodes: u64 = lines.iter().map(|l| l["nodes"].as_u64().unwrap()).sum();
    assert_eq!(nodes, totals["nodes"].as_u64().unwrap());
    let cost = totals["capital_cost"].as_f64().unwrap() + totals["energy_cost"].as_f64().unwrap();
    assert!((cost - totals["total_cost"].as_f64().unwrap()).abs() < 1e-6);
}

#[test]
fn flags_override_the_catalogue_scenario() {
    let json = |args: &[&str]| -> serde_json::Value {
        let out = spindle_plan(&[&[example().as_str(), "--json"][..], args].concat());
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let base = json(&[]);
    let bigger = json(&["--capacity-tb", "3000"]);
    assert_eq!(bigger["scenario"]["targets"]["capacity_tb"], 3000.0);
    assert!(bigger["totals"]["usable_capacity_tb"].as_f64().unwrap() >= 3000.0);
    assert!(bigger["totals"]["total_cost"].as_f64().unwrap() > base["totals"]["total_cost"].as_f64().unwrap());
    // Capital only: the energy bill disappears.
    let capital_only = json(&["--years", "0"]);
    assert_eq!(capital_only["totals"]["energy_cost"], 0.0);
    let uncapped = json(&["--no-caps"]);
    assert_eq!(uncapped["scenario"]["caps"]["power_w_max"], serde_json::Value::Null);
}

#[test]
fn figures_can_come_from_a_bench_paper_result_file() {
    let dir = tempfile::tempdir().unwrap();
    let paper = repo_file("crates/bench/tests/data/paper-quick-memory.json");
    let catalogue = dir.path().join("catalogue.toml");
    // The read curve takes the same row by JSON pointer (rows/18): the sample's read rows are
    // of failed gets (a `memory:` target keeps nothing between runs), which the planner refuses.
    std::fs::write(
        &catalogue,
        format!(
            r#"
[[node]]
name = "box"
capital_cost = 1000
power_w = 100
bays = 2
[[drive]]
name = "measured"
capital_cost = 100
power_w = 5
capacity_tb = 4
sequential_write = [{{ value_size = 1048576, bench_paper = {{ path = "{p}", experiment = "sequential-write" }} }}]
random_read = [{{ value_size = 1048576, result = {{ path = "{p}", pointer = "/rows/18/result/megabytes_per_second" }} }}]
[targets]
capacity_tb = 16
value_size = 1048576
sequential_write_mb_s = 5000
[costs]
years = 3
electricity_per_kwh = 0.2
"#,
            p = paper.display()
        ),
    )
    .unwrap();
    let out = spindle_plan(&[catalogue.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let design: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // 1849.6 MB/s per drive (the file's sequential-write row at 1 MiB): 5000 MB/s needs 3
    // drives' worth, and 16 TB four drives: two nodes of two drives.
    assert_eq!(design["totals"]["drives"], 4);
    assert_eq!(design["totals"]["nodes"], 2);
    assert!((design["totals"]["sequential_write_mb_s"].as_f64().unwrap() - 4.0 * 1849.6199513753668).abs() < 1e-6);
}

#[test]
fn infeasible_and_malformed_inputs_fail_with_the_reason() {
    let out = spindle_plan(&[&example(), "--power-w-max", "100"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("infeasible: power cap of 100.00 W is too low: meeting the targets needs at least"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[[node]]\nname = \"n\"\ncapital_cost = 1\npower_w = 1\nbays = 2\nspeed = 3\n").unwrap();
    let out = spindle_plan(&[bad.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not a valid catalogue") && err.contains("speed"), "{err}");
}

#[test]
fn redundancy_schemes_are_weighed_and_two_tiers_planned() {
    let out = spindle_plan(&[&example(), "--compare", "R3,4+2,8+3", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let by = |scheme: &str| rows.iter().find(|r| r["redundancy"] == scheme).unwrap_or_else(|| panic!("no {scheme} in {rows:?}")).clone();
    let (r3, ec) = (by("R3"), by("4+2"));
    let raw = |r: &serde_json::Value| r["design"]["totals"]["raw_capacity_tb"].as_f64().unwrap();
    let usable = |r: &serde_json::Value| r["design"]["totals"]["usable_capacity_tb"].as_f64().unwrap();
    // The same usable capacity from half the raw: 3 bytes per byte against 1.5.
    assert!(raw(&ec) < raw(&r3) * 0.6, "4+2 {} TB raw, R3 {}", raw(&ec), raw(&r3));
    assert!(usable(&ec) >= usable(&r3) * 0.9);
    assert_eq!((r3["repair_reads_per_tb"].as_f64(), ec["repair_reads_per_tb"].as_f64()), (Some(1.0), Some(4.0)));
    assert!(by("8+3")["design"]["totals"]["nodes"].as_u64().unwrap() >= 11, "a stripe of 11 needs 11 nodes");
    let text = String::from_utf8_lossy(&spindle_plan(&[&example(), "--compare", "R3,4+2"]).stdout).to_string();
    assert!(text.contains("SCHEME") && text.contains("4+2") && text.contains("PER USABLE TB"), "{text}");

    let out = spindle_plan(&[&example(), "--hot-share", "0.2", "--hot", "R3", "--cold", "8+3", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let tiers: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let total = tiers["hot"]["design"]["totals"]["total_cost"].as_f64().unwrap() + tiers["cold"]["design"]["totals"]["total_cost"].as_f64().unwrap();
    assert!((total - tiers["total_cost"].as_f64().unwrap()).abs() < 1e-6);
    assert_eq!(tiers["cold"]["design"]["scenario"]["targets"]["random_read_mb_s"].as_f64(), Some(0.0));
    let bad = spindle_plan(&[&example(), "--compare", "R3,4"]);
    assert!(!bad.status.success() && String::from_utf8_lossy(&bad.stderr).contains("DATA+PARITY"));
}
