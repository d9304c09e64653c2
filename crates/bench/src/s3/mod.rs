//! `spindle bench s3`: an S3 load generator that runs the way MinIO's warp does, so that any
//! two S3 servers can be measured side by side by one tool (warp itself cannot be installed
//! here). Definitions, after warp's:
//!
//! - *PUT*: `concurrency` workers upload objects of `object_bytes` random bytes, each to a new
//!   key, for `duration`; objects at or above `multipart_bytes` go up as multipart uploads in
//!   parts of that size (warp's client does so from 16 MiB parts; 64 MiB objects: 4 parts).
//! - *GET*: a set of `objects` objects is uploaded first (not timed), then `concurrency` workers
//!   read random objects of the set, whole bodies, for `duration`; time to first byte is the
//!   time from sending the request to the first body byte.
//! - *mixed*: the same prepared set as a pool; each operation is drawn 45 : 30 : 15 : 10 among
//!   GET, STAT (HEAD), PUT (a new object joins the pool) and DELETE (one leaves it).
//!
//! An operation counts when it completes. Rates are bytes (objects) of completed operations
//! over the time from the start to the end of the last operation (workers start no operation
//! after `duration`, and finish the one they are in); the median of one-second windows is
//! given beside, each operation's bytes spread over the windows it spanned, as warp's
//! "50% Median". The server's CPU (user + system of the given PIDs, from /proc/PID/stat) over
//! the timed phase is reported per MiB moved, because on a small machine the generator and the
//! server share the cores. Everything a run writes lives under a fresh prefix and is deleted
//! afterwards (not timed).
//!
//! Modules: `spec` (what a run is asked), `runner` (a run from start to end), `workers` (the
//! timed phase), `bulk` (the untimed uploads and deletes), `recorder` (measurements per
//! operation type), `results`, `cpu` (/proc), `tables` (Markdown), `client` (S3 over HTTP).

pub use spindle_s3_client as client;
mod bulk;
mod cpu;
mod recorder;
mod results;
mod runner;
mod spec;
mod tables;
mod workers;

pub use cpu::{cpu_seconds_of_stat, process_cpu_seconds};
pub use recorder::{median_of, spread};
pub use results::{OpStats, Quantiles, S3BenchResult, S3ResultView, SCHEMA_VERSION};
pub use runner::run;
pub use spec::{parse_duration, Mix, S3BenchError, S3BenchSpec, S3Op};
pub use tables::{compare_markdown, markdown, ratio, size_label};

#[cfg(test)]
mod tests {
    use super::*;
    use client::S3Endpoint;

    fn spec(op: S3Op, size: u64, concurrency: usize) -> S3BenchSpec {
        S3BenchSpec {
            target: S3Endpoint { endpoint: "http://127.0.0.1:9000".into(), region: "us-east-1".into(), bucket: "b".into(), access_key: "a".into(), secret_key: "s".into(), tls_trust: None },
            label: "x".into(),
            op,
            object_bytes: size,
            concurrency,
            duration_seconds: 10.0,
            multipart_bytes: 16 << 20,
            objects: 0,
            mix: Mix::WARP,
            server_pids: vec![],
            seed: 1,
            prefix: None,
            prepared: false,
            cleanup: true,
        }
    }

    #[test]
    fn the_prepared_set_is_about_a_gib() {
        assert_eq!(spec(S3Op::Get, 1 << 20, 8).prepared_objects(), 1024);
        assert_eq!(spec(S3Op::Get, 64 << 20, 8).prepared_objects(), 16);
        assert_eq!(spec(S3Op::Get, 64 << 20, 32).prepared_objects(), 64, "two per worker at least");
        assert_eq!(spec(S3Op::Get, 1024, 8).prepared_objects(), 2500, "warp's count at most");
        assert_eq!(spec(S3Op::Get, 0, 1).prepared_objects(), 2500);
        assert_eq!(S3BenchSpec { objects: 7, ..spec(S3Op::Get, 1 << 20, 8) }.prepared_objects(), 7);
        assert!(spec(S3Op::Put, 1 << 20, 0).validate().is_err());
        assert!(S3BenchSpec { duration_seconds: 0.0, ..spec(S3Op::Put, 1, 1) }.validate().is_err());
        assert!(S3BenchSpec { multipart_bytes: 1, ..spec(S3Op::Put, 1 << 20, 1) }.validate().is_err(), "over 10,000 parts");
        assert!(S3BenchSpec { mix: Mix { put: 1, delete: 2, ..Mix::WARP }, ..spec(S3Op::Mixed, 1, 1) }.validate().is_err());
        assert!(spec(S3Op::Mixed, 1 << 20, 4).validate().is_ok());
    }

    fn stats(op: &str, mib_s: f64, p50: f64, ttfb: Option<f64>) -> OpStats {
        let q = |x: f64| Quantiles { p50: x, p90: x, p99: 2.0 * x, max: 3.0 * x, mean: x };
        OpStats {
            op: op.into(),
            objects: 10,
            errors: 0,
            bytes: 10 << 20,
            seconds: 1.0,
            mib_per_second: mib_s,
            objects_per_second: mib_s,
            median_1s_mib_per_second: None,
            median_1s_objects_per_second: None,
            latency_ms: q(p50),
            ttfb_ms: ttfb.map(q),
        }
    }

    #[test]
    fn comparisons_divide_by_the_baseline() {
        let view = |label: &str, op: S3Op, o: OpStats, cpu: f64| S3ResultView {
            kind: "s3".into(),
            schema_version: SCHEMA_VERSION,
            spec: S3BenchSpec { label: label.into(), ..spec(op, 1 << 20, 8) },
            operations: vec![o],
            server_cpu_seconds_per_mib: Some(cpu),
            errors: 0,
        };
        let results = vec![
            view("minio", S3Op::Put, stats("PUT", 100.0, 10.0, None), 0.02),
            view("spindle", S3Op::Put, stats("PUT", 150.0, 5.0, None), 0.01),
            view("minio", S3Op::Get, stats("GET", 200.0, 4.0, Some(1.0)), 0.01),
            view("spindle", S3Op::Get, stats("GET", 100.0, 8.0, Some(4.0)), 0.03),
        ];
        let md = compare_markdown(&results, "minio").unwrap();
        let lines: Vec<&str> = md.lines().collect();
        assert_eq!(lines.len(), 2 + 6, "{md}");
        assert!(lines[4].starts_with("| PUT | 1 MiB | 8 | **spindle ÷ minio** | 1.50× | 1.50× | 0.50× | 0.50× | – | – | 0.50× |"), "{}", lines[4]);
        assert!(lines[7].contains("| 0.50× | 0.50× | 2.00× | 2.00× | 4.00× | 4.00× | 3.00× |"), "{}", lines[7]);
        assert_eq!(ratio(1.0, 0.0), None);
        assert_eq!(ratio(f64::NAN, 1.0), None);
        // A result file that is not an S3 result is refused.
        let mut wrong = results[0].clone();
        wrong.kind = "archive".into();
        assert!(compare_markdown(&[wrong], "minio").is_err());
    }
}
