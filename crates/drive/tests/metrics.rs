//! The drive's Prometheus endpoint over real HTTP: answers counted by request type and status,
//! latencies, value bytes and the engine's figures, in a text format every line of which parses;
//! no endpoint unless configured; none left once the drive stops.

mod common;

use common::{samples, TestDrive};
use spindle_client::PutOptions;

/// One scrape off the runtime's threads (the endpoint runs on them).
async fn scrape(addr: std::net::SocketAddr) -> String {
    tokio::task::spawn_blocking(move || common::scrape(addr)).await.unwrap()
}

#[tokio::test]
async fn answers_latencies_and_figures_are_exposed() {
    let drive = TestDrive::with_config("metrics_port = 0").await;
    let addr = drive.metrics_addr().expect("a metrics endpoint");
    let c = drive.client().await;
    let versioned = |v: &str| PutOptions { new_version: bytes::Bytes::from(v.to_string()), ..PutOptions::default() };
    c.put(b"a", vec![1u8; 1000], versioned("1")).await.unwrap();
    c.put(b"b", vec![2u8; 500], PutOptions::default()).await.unwrap();
    // A refused compare-and-swap: counted under its own status.
    assert!(c.put(b"a", vec![3u8; 10], versioned("2")).await.unwrap_err().is_version_mismatch());
    assert!(c.get(b"a").await.unwrap().is_some());
    assert!(c.get(b"zz").await.unwrap().is_none());
    c.noop().await.unwrap();

    let m = samples(&scrape(addr).await);
    let get = |k: &str| *m.get(k).unwrap_or_else(|| panic!("no sample {k}"));
    assert_eq!(get(r#"spindle_drive_requests_total{type="PUT",status="SUCCESS"}"#), 2.0);
    assert_eq!(get(r#"spindle_drive_requests_total{type="PUT",status="VERSION_MISMATCH"}"#), 1.0);
    assert_eq!(get(r#"spindle_drive_requests_total{type="GET",status="SUCCESS"}"#), 1.0);
    assert_eq!(get(r#"spindle_drive_requests_total{type="GET",status="NOT_FOUND"}"#), 1.0);
    assert_eq!(get(r#"spindle_drive_requests_total{type="NOOP",status="SUCCESS"}"#), 1.0);
    assert_eq!(get(r#"spindle_drive_request_duration_seconds_count{type="PUT"}"#), 3.0);
    assert_eq!(get(r#"spindle_drive_request_duration_seconds_bucket{type="PUT",le="+Inf"}"#), 3.0);
    assert!(get(r#"spindle_drive_request_duration_seconds_sum{type="PUT"}"#) > 0.0);
    // Buckets are cumulative: never fewer at a higher bound.
    let prefix = r#"spindle_drive_request_duration_seconds_bucket{type="PUT",le=""#;
    let mut buckets: Vec<(f64, f64)> = m
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix(prefix)?.trim_end_matches("\"}").replace("+Inf", "inf").parse::<f64>().ok()?, *v)))
        .collect();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    assert_eq!(buckets.len(), spindle_metrics::LATENCY_BUCKETS.len() + 1, "{buckets:?}");
    assert!(buckets.windows(2).all(|w| w[0].1 <= w[1].1), "{buckets:?}");
    assert!(!m.contains_key(r#"spindle_drive_request_duration_seconds_count{type="DELETE"}"#), "types never seen are left out");
    assert_eq!(get(r#"spindle_drive_value_bytes_total{type="PUT"}"#), 1510.0);
    assert_eq!(get("spindle_drive_open_connections"), 1.0);
    assert_eq!(get("spindle_drive_cluster_version"), 0.0);
    assert_eq!(get("spindle_drive_locked"), 0.0);
    assert!(get("spindle_engine_entries") >= 1.0);
    assert!(get("spindle_engine_disk_bytes") > 0.0);
    assert!(get("spindle_drive_capacity_bytes") > 0.0);
    assert!(m.contains_key("spindle_engine_value_log_segments"));

    // Counters only grow, scrape after scrape.
    c.put(b"c", vec![0u8; 10], PutOptions::default()).await.unwrap();
    let again = samples(&scrape(addr).await);
    assert_eq!(again[r#"spindle_drive_requests_total{type="PUT",status="SUCCESS"}"#], 3.0);

    drop(c);
    drive.stop().await;
    assert!(tokio::net::TcpStream::connect(addr).await.is_err(), "the endpoint stops with the drive");
}

#[tokio::test]
async fn no_endpoint_unless_configured_and_never_on_the_drive_s_port() {
    let drive = TestDrive::start().await;
    assert!(drive.metrics_addr().is_none());
    drive.stop().await;

    let dir = tempfile::tempdir().unwrap();
    let config = spindle_drive::DriveConfig { data_dir: dir.path().into(), port: 9300, tls_port: 9301, metrics_port: Some(9300), ..Default::default() };
    let err = spindle_drive::start(config).await.err().expect("refused");
    assert!(err.to_string().contains("metrics_port 9300"), "{err}");
}
