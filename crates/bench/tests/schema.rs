//! `spindle bench paper` results follow their published, versioned JSON Schema
//! (`schema/paper-results.v2.schema.json`): a fresh run does, the stored fixture does, and a
//! document that drifts from it does not.

use std::path::PathBuf;

use serde_json::Value;
use spindle_bench::paper::{run_paper, PaperOptions, Scale, SCHEMA_VERSION};

fn validator() -> jsonschema::Validator {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("schema/paper-results.v{SCHEMA_VERSION}.schema.json"));
    let schema: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    jsonschema::validator_for(&schema).unwrap()
}

fn errors(v: &jsonschema::Validator, doc: &Value) -> Vec<String> {
    v.iter_errors(doc).map(|e| format!("{} at {}", e, e.instance_path())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_run_and_the_fixture_follow_the_schema() {
    let v = validator();
    let options = PaperOptions { repeat: 2, ..PaperOptions::new(Scale::Quick) };
    let mut partial_checked = false;
    let results = run_paper("memory:", options, |partial| {
        // Every partial result written along the way is valid too.
        if !partial_checked && partial.rows.len() == 3 {
            let doc = serde_json::to_value(partial).unwrap();
            assert_eq!(errors(&validator(), &doc), Vec::<String>::new());
            assert_eq!(doc["complete"], false);
            partial_checked = true;
        }
    })
    .await
    .unwrap();
    assert!(partial_checked);
    let doc = serde_json::to_value(&results).unwrap();
    assert_eq!(errors(&v, &doc), Vec::<String>::new());
    assert_eq!((doc["rows"].as_array().unwrap().len(), doc["ycsb"].as_array().unwrap().len()), (46, 14));
    let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/paper-quick-memory-v2.json");
    let stored: Value = serde_json::from_slice(&std::fs::read(fixture).unwrap()).unwrap();
    assert_eq!(errors(&v, &stored), Vec::<String>::new());
}

#[test]
fn documents_that_drift_from_the_schema_are_refused() {
    let v = validator();
    let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/paper-quick-memory-v2.json");
    let good: Value = serde_json::from_slice(&std::fs::read(fixture).unwrap()).unwrap();
    type Breakage = (&'static str, fn(&mut Value));
    let broken: [Breakage; 5] = [
        ("a newer schema version", |d| d["schema_version"] = 3.into()),
        ("a row without its operation count", |d| {
            d["rows"][0]["result"].as_object_mut().unwrap().remove("ops");
        }),
        ("a negative error count", |d| d["rows"][1]["result"]["errors"] = (-1).into()),
        ("a histogram with a bin too few", |d| {
            d["rows"][2]["result"]["latency_us"]["bins_10ms"].as_array_mut().unwrap().pop();
        }),
        ("an unknown YCSB workload", |d| d["ycsb"][0]["workload"] = "G".into()),
    ];
    for (what, breaks) in broken {
        let mut doc = good.clone();
        breaks(&mut doc);
        assert!(!errors(&v, &doc).is_empty(), "{what} passed validation");
    }
}
