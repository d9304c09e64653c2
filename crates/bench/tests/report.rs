//! The report renders from a stored small result set (a quick `spindle bench paper` run).

use std::path::PathBuf;

#[test]
fn report_renders_figures_and_tables_from_stored_results() {
    let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/paper-quick-memory.json");
    let out = tempfile::tempdir().unwrap();
    let files = spindle_bench::report::write_report(&[data.clone(), data], out.path()).unwrap();
    let md = std::fs::read_to_string(out.path().join("report.md")).unwrap();
    for section in ["Sequential-key-order writes", "Write modes (Table IV)", "Key-not-found latency", "Key size", "Read latency"] {
        assert!(md.contains(section), "missing {section}");
    }
    assert!(md.contains("| memory: | WRITETHROUGH |"));
    let html = std::fs::read_to_string(out.path().join("report.html")).unwrap();
    assert!(html.contains("<img src=\"sequential-write.svg\"") && html.contains("<table>"));
    let svg = std::fs::read_to_string(out.path().join("sequential-write.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("polyline"), "a line per target");
    assert!(svg.contains("MB/s") && svg.contains("value size"));
    let histograms: std::collections::HashSet<_> = files.iter().filter(|f| f.to_string_lossy().contains("histogram-")).collect();
    assert_eq!(histograms.len(), 4, "two histograms per results file");
    assert!(histograms.iter().all(|f| f.exists()));
    // A file that is not a paper result is refused with a clear error.
    let bogus = out.path().join("bogus.json");
    std::fs::write(&bogus, "{\"schema_version\": 9}").unwrap();
    let e = spindle_bench::report::write_report(&[bogus], out.path()).unwrap_err();
    assert!(e.to_string().contains("schema-1"));
}
