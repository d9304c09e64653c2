//! Reading a Prometheus endpoint in tests: one scrape over plain HTTP, and its samples with
//! every line's syntax checked.

use std::collections::HashMap;
use std::io::{Read, Write};

/// The body of `GET /metrics` from `addr`, after checking the status line.
pub fn scrape(addr: std::net::SocketAddr) -> String {
    let mut s = std::net::TcpStream::connect(addr).expect("connect to /metrics");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: spindle\r\nConnection: close\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.to_ascii_lowercase().contains("content-type: text/plain; version=0.0.4"), "{head}");
    body.to_string()
}

/// Every sample by `name{labels}` (labels as written), after checking each line's syntax and
/// that each sample's family was declared with HELP and TYPE before it.
pub fn samples(text: &str) -> HashMap<String, f64> {
    let mut declared = std::collections::HashSet::new();
    let mut out = HashMap::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE name kind");
            assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
            declared.insert(name.to_string());
            continue;
        }
        if line.starts_with("# HELP ") || line == "# EOF" {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("no value: {line}"));
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("bad value: {line}"));
        let name = series.split('{').next().unwrap();
        assert!(name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'), "{line}");
        if series.contains('{') {
            assert!(series.ends_with('}'), "{line}");
        }
        let family = ["_bucket", "_sum", "_count"].iter().find_map(|s| name.strip_suffix(s)).filter(|f| declared.contains(*f)).unwrap_or(name);
        assert!(declared.contains(family), "{name} sampled before its TYPE line");
        out.insert(series.to_string(), value);
    }
    out
}

