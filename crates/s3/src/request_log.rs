//! Every request's ID and its line in the log: the ID goes back to the client in
//! `x-amz-request-id` (where S3 clients look for it) and on every log line written while the
//! request is served, so an answer a client reports can be found in the log. Requests the
//! gateway served well, or refused for the client's own fault, are logged at debug; a server
//! error (5xx) at warn.

use hyper::{HeaderMap, Method, StatusCode};

/// A fresh request ID: 16 hexadecimal digits, as S3's.
pub(crate) fn new_id() -> String {
    format!("{:016X}", rand::random::<u64>())
}

/// Adds the request ID to an answer's headers.
pub(crate) fn stamp(headers: &mut HeaderMap, id: &str) {
    if let Ok(v) = hyper::header::HeaderValue::from_str(id) {
        headers.insert("x-amz-request-id", v);
    }
}

/// The request's line in the log, at the level its outcome deserves.
pub(crate) fn record(method: &Method, path: &str, status: StatusCode, id: &str) {
    if status.is_server_error() {
        tracing::warn!(request_id = id, %method, path, status = status.as_u16(), "request failed");
    } else {
        tracing::debug!(request_id = id, %method, path, status = status.as_u16(), "request served");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_sixteen_hex_digits_and_go_on_the_answer() {
        let id = new_id();
        assert!(id.len() == 16 && id.chars().all(|c| c.is_ascii_hexdigit()), "{id}");
        assert_ne!(new_id(), id);
        let mut headers = HeaderMap::new();
        stamp(&mut headers, &id);
        assert_eq!(headers.get("x-amz-request-id").and_then(|v| v.to_str().ok()), Some(id.as_str()));
    }
}
