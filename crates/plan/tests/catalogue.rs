//! Catalogue parsing: figures inline and from bench result files, and the errors a storage
//! engineer gets for a malformed catalogue or a reference that does not hold.

use std::path::{Path, PathBuf};

use spindle_plan::{plan, Catalogue, CatalogueError, PlanError};

/// The `spindle bench paper` sample result that the bench crate's own tests read.
fn paper_sample() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench/tests/data/paper-quick-memory.json")
}

const NODE: &str = "[[node]]\nname = \"n\"\ncapital_cost = 1000\npower_w = 100\nbays = 4\n";
const SCENARIO: &str = "[targets]\ncapacity_tb = 10\n[costs]\nyears = 1\nelectricity_per_kwh = 0.1\n";

fn drive(write: &str, read: &str) -> String {
    format!("[[drive]]\nname = \"d\"\ncapital_cost = 100\npower_w = 5\ncapacity_tb = 4\nsequential_write = {write}\nrandom_read = {read}\n")
}

fn parse(text: &str) -> Result<Catalogue, CatalogueError> {
    Catalogue::parse(text, Path::new("test.toml"), Path::new("/"))
}

fn parse_err(text: &str) -> String {
    parse(text).expect_err("the catalogue must be refused").to_string()
}

#[test]
fn the_example_catalogue_plans() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/plan/example-catalogue.toml");
    let catalogue = Catalogue::load(&path).unwrap();
    assert_eq!(catalogue.nodes.len(), 3);
    assert_eq!(catalogue.drives.len(), 2);
    let d = plan(&catalogue, &catalogue.scenario).unwrap();
    assert!(d.proven_optimal);
    let t = &d.scenario.targets;
    assert!(d.totals.usable_capacity_tb >= t.capacity_tb);
    assert!(d.totals.sequential_write_mb_s >= t.sequential_write_mb_s);
    assert!(d.totals.random_read_mb_s >= t.random_read_mb_s);
    assert!(d.totals.nodes >= t.nodes_min);
    // The JSON form carries the same design.
    let json = serde_json::to_value(&d).unwrap();
    assert_eq!(json["totals"]["nodes"], d.totals.nodes);
    assert!(json["constraints"].as_array().unwrap().iter().any(|c| c["binding"] == true));
}

#[test]
fn inline_figures_per_drive_and_per_value_size() {
    let c = parse(&format!(
        "{NODE}{}{SCENARIO}",
        drive("150.0", "[{ value_size = 4096, mb_s = 20 }, { value_size = 1048576, mb_s = 100 }, { value_size = 4096, drives = 4, mb_s = 60 }, { value_size = 1048576, drives = 4, mb_s = 300 }]")
    ))
    .unwrap();
    let d = &c.drives[0];
    assert_eq!(d.sequential_write.at(3, None).unwrap(), 450.0);
    assert_eq!(d.random_read.at(4, Some(1048576)).unwrap(), 300.0);
    assert_eq!(d.random_read.at(4, Some(4096)).unwrap(), 60.0);
    assert!(d.random_read.points().iter().all(|p| p.origin == "inline"));
    assert_eq!(c.scenario.targets.capacity_tb, 10.0);
    assert_eq!(c.scenario.costs.pue, 1.0, "PUE defaults to 1");
}

#[test]
fn bench_paper_references_read_the_row_of_the_value_size() {
    let paper = paper_sample();
    let p = paper.display();
    let c = parse(&format!(
        "{NODE}{}{SCENARIO}",
        drive(
            &format!("[{{ value_size = 1048576, bench_paper = {{ path = \"{p}\", experiment = \"sequential-write\" }} }}]"),
            &format!("[{{ value_size = 4096, bench_paper = {{ path = \"{p}\", experiment = \"random-write\" }} }}, {{ value_size = 65536, bench_paper = {{ path = \"{p}\", experiment = \"random-write\", label = \"65536\" }} }}]")
        )
    ))
    .unwrap();
    let d = &c.drives[0];
    // Figures from the sample file (result.megabytes_per_second of those rows). Its read rows
    // cannot serve: the `memory:` target kept no keys between runs, so every get failed (see
    // the next test); write rows stand in to check the reading of labels.
    assert_eq!(d.sequential_write.at(1, Some(1048576)).unwrap(), 1849.6199513753668);
    assert_eq!(d.random_read.at(1, Some(4096)).unwrap(), 213.98189909562348);
    assert_eq!(d.random_read.at(1, Some(65536)).unwrap(), 440.9432374394827);
    assert!(d.random_read.points()[0].origin.contains("random-write 4096"), "{:?}", d.random_read.points());
}

#[test]
fn json_pointer_references_read_any_result_file() {
    let paper = paper_sample();
    let p = paper.display();
    let c = parse(&format!("{NODE}{}{SCENARIO}", drive(&format!("[{{ drives = 2, result = {{ path = \"{p}\", pointer = \"/rows/0/result/megabytes_per_second\" }} }}]"), "80.0"))).unwrap();
    let point = &c.drives[0].sequential_write.points()[0];
    assert_eq!((point.drives, point.mb_s), (2, 5.658848935424328));
    assert!(point.origin.ends_with("#/rows/0/result/megabytes_per_second"));

    // Relative paths start at the catalogue's directory.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("archive.json"), r#"{"workloads": [{"name": "fitted", "sequential_write": {"megabytes_per_second": 612.5}}]}"#).unwrap();
    let catalogue = dir.path().join("catalogue.toml");
    std::fs::write(&catalogue, format!("{NODE}{}{SCENARIO}", drive("[{ result = { path = \"archive.json\", pointer = \"/workloads/0/sequential_write/megabytes_per_second\" } }]", "80.0"))).unwrap();
    let c = Catalogue::load(&catalogue).unwrap();
    assert_eq!(c.drives[0].sequential_write.at(1, None).unwrap(), 612.5);
}

#[test]
fn references_that_do_not_hold_are_refused_with_the_reason() {
    let paper = paper_sample();
    let p = paper.display();
    let with = |write: String| parse_err(&format!("{NODE}{}{SCENARIO}", drive(&write, "80.0")));
    let e = with(format!("[{{ value_size = 4096, bench_paper = {{ path = \"{p}\", experiment = \"no-such\" }} }}]"));
    assert!(e.contains("no rows of experiment \"no-such\""), "{e}");
    let e = with(format!("[{{ value_size = 333, bench_paper = {{ path = \"{p}\", experiment = \"random-write\" }} }}]"));
    assert!(e.contains("no row labelled \"333\"") && e.contains("4096"), "{e}");
    // The sample's read rows read keys that were not there: every get failed.
    let e = with(format!("[{{ value_size = 4096, bench_paper = {{ path = \"{p}\", experiment = \"random-read\" }} }}]"));
    assert!(e.contains("failed operations"), "{e}");
    let e = with(format!("[{{ bench_paper = {{ path = \"{p}\", experiment = \"random-read\" }} }}]"));
    assert!(e.contains("needs a label"), "{e}");
    let e = with(format!("[{{ result = {{ path = \"{p}\", pointer = \"/target\" }} }}]"));
    assert!(e.contains("not a number"), "{e}");
    let e = with(format!("[{{ result = {{ path = \"{p}\", pointer = \"/rows/999/result\" }} }}]"));
    assert!(e.contains("nothing at JSON pointer"), "{e}");
    let e = with("[{ result = { path = \"/nonexistent/result.json\", pointer = \"/x\" } }]".into());
    assert!(e.contains("/nonexistent/result.json") && e.contains("sequential_write"), "{e}");

    let dir = tempfile::tempdir().unwrap();
    let future = dir.path().join("paper-v2.json");
    std::fs::write(&future, r#"{"schema_version": 2, "rows": []}"#).unwrap();
    let e = with(format!("[{{ value_size = 4096, bench_paper = {{ path = \"{}\", experiment = \"random-read\" }} }}]", future.display()));
    assert!(e.contains("schema_version 2"), "{e}");
    let garbage = dir.path().join("garbage.json");
    std::fs::write(&garbage, "{ not json").unwrap();
    let e = with(format!("[{{ result = {{ path = \"{}\", pointer = \"/x\" }} }}]", garbage.display()));
    assert!(e.contains("not JSON"), "{e}");
}

#[test]
fn malformed_catalogues_are_refused_with_the_reason() {
    let good_drive = drive("100.0", "80.0");
    let e = parse_err(&format!("{NODE}{good_drive}[targets]\ncapacty_tb = 3\n"));
    assert!(e.contains("capacty_tb"), "a misspelt field is named: {e}");
    let e = parse_err(&format!("{}{good_drive}", NODE.replace("bays = 4", "bays = 0")));
    assert!(e.contains("bays must be 1 to"), "{e}");
    let e = parse_err(&format!("{}{good_drive}", NODE.replace("capital_cost = 1000", "capital_cost = -5")));
    assert!(e.contains("node \"n\": capital_cost must be"), "{e}");
    let e = parse_err(&format!("{NODE}{}", good_drive.replace("capacity_tb = 4", "capacity_tb = 0")));
    assert!(e.contains("capacity_tb must be a positive"), "{e}");
    let e = parse_err(&format!("{NODE}{NODE}{good_drive}"));
    assert!(e.contains("two node entries are named \"n\""), "{e}");
    let e = parse_err(&good_drive);
    assert!(e.contains("no node types"), "{e}");
    let e = parse_err(NODE);
    assert!(e.contains("no drive types"), "{e}");
    let e = parse_err(&format!("{NODE}{}", drive("[{ mb_s = 10, result = { path = \"x\", pointer = \"/a\" } }]", "80.0")));
    assert!(e.contains("exactly one of"), "{e}");
    let e = parse_err(&format!("{NODE}{}", drive("[{ value_size = 4096, mb_s = 10 }, { mb_s = 20, drives = 2 }]", "80.0")));
    assert!(e.contains("value_size on every point"), "{e}");
    let e = parse_err(&format!("{NODE}{}", drive("[]", "80.0")));
    assert!(e.contains("no points"), "{e}");
    let e = parse_err("[[node]\nname = ");
    assert!(e.contains("test.toml: not a valid catalogue"), "{e}");
    let e = Catalogue::load(Path::new("/nonexistent/catalogue.toml")).unwrap_err().to_string();
    assert!(e.contains("/nonexistent/catalogue.toml"), "{e}");
}

#[test]
fn scenarios_that_cannot_be_planned_are_refused_with_the_reason() {
    let sized = drive("[{ value_size = 4096, mb_s = 20 }, { value_size = 1048576, mb_s = 100 }]", "80.0");
    let c = parse(&format!("{NODE}{sized}{SCENARIO}")).unwrap();
    let mut s = c.scenario.clone();
    s.targets.sequential_write_mb_s = 100.0;
    let e = plan(&c, &s).unwrap_err();
    assert!(matches!(e, PlanError::Curve { .. }) && e.to_string().contains("targets.value_size"), "{e}");
    s.targets.value_size = Some(8 << 20);
    assert!(plan(&c, &s).unwrap_err().to_string().contains("outside"));

    let c = parse(&format!("{NODE}{}{SCENARIO}", drive("100.0", "80.0"))).unwrap();
    let mut s = c.scenario.clone();
    s.targets.capacity_tb = 0.0;
    assert!(matches!(plan(&c, &s), Err(PlanError::NoTarget)));
    let mut s = c.scenario.clone();
    s.targets.usable_fraction = 1.5;
    assert!(plan(&c, &s).unwrap_err().to_string().contains("usable_fraction"));
    let mut s = c.scenario.clone();
    s.costs.years = None;
    assert!(plan(&c, &s).unwrap_err().to_string().contains("costs.years"));
    let mut s = c.scenario.clone();
    s.caps.power_w_max = Some(-1.0);
    assert!(plan(&c, &s).unwrap_err().to_string().contains("power_w_max"));
    let mut s = c.scenario.clone();
    s.targets.capacity_tb = 1e15;
    assert!(plan(&c, &s).unwrap_err().to_string().contains("check the units"));
}
