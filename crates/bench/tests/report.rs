//! The report renders from stored small result sets (quick `spindle bench paper` runs: one of
//! schema 1, one of schema 2 with repetitions and YCSB).

use std::path::PathBuf;

#[test]
fn report_renders_figures_and_tables_from_stored_results() {
    let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/paper-quick-memory.json");
    let v2 = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/paper-quick-memory-v2.json");
    let out = tempfile::tempdir().unwrap();
    let files = spindle_bench::report::write_report(&[data, v2], out.path()).unwrap();
    let md = std::fs::read_to_string(out.path().join("report.md")).unwrap();
    for section in ["Sequential-key-order writes", "Write modes (Table IV)", "Key-not-found latency", "Key size", "Read latency"] {
        assert!(md.contains(section), "missing {section}");
    }
    assert!(md.contains("| memory: | WRITETHROUGH |"));
    // Schema 2 rows carry the spread of their repetitions; schema 1 rows say they have none.
    assert!(md.contains(" (2) |") && md.contains("| – |"), "min–max columns");
    // The paper's published figures stand beside each target's.
    assert!(md.contains("| Kinetic drive, as published (ICPADS 2017) | 63 | 78 |"));
    // YCSB: one figure and table per record size, every workload of the v2 file.
    for size in ["4096", "1048576"] {
        let svg = std::fs::read_to_string(out.path().join(format!("ycsb-{size}.svg"))).unwrap();
        assert!(svg.contains("operations/s") && svg.contains("<rect"), "bars in ycsb-{size}.svg");
        assert!(files.contains(&out.path().join(format!("ycsb-{size}.svg"))));
    }
    for workload in ["| memory: | load |", "| memory: | A |", "| memory: | E |", "| memory: | F |"] {
        assert!(md.contains(workload), "missing {workload}");
    }
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
    assert!(e.to_string().contains("schema 1 or 2"), "{e}");
}
