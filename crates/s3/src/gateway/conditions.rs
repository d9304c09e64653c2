//! Conditional requests: a read's (If-Match, If-None-Match, If-Modified-Since,
//! If-Unmodified-Since) and a write's, against the ETag and date of the object.

use s3s::dto::*;
use s3s::{s3_error, S3Result};

use super::convert::timestamp;
use crate::records::Manifest;

pub(super) fn etag_matches(m: &Manifest, c: &ETagCondition) -> bool {
    match c {
        ETagCondition::Any => true,
        ETagCondition::ETag(e) => e.value() == m.etag,
    }
}

/// GET/HEAD conditions, in RFC 7232's order.
pub(super) fn check_read(m: &Manifest, if_match: Option<&ETagCondition>, if_none_match: Option<&ETagCondition>, modified_since: Option<&Timestamp>, unmodified_since: Option<&Timestamp>) -> S3Result<()> {
    let modified = timestamp(m.modified_ms);
    match if_match {
        Some(c) if !etag_matches(m, c) => return Err(s3_error!(PreconditionFailed, "If-Match does not match the object's ETag")),
        Some(_) => {}
        None => {
            if unmodified_since.is_some_and(|t| modified > *t) {
                return Err(s3_error!(PreconditionFailed, "modified since If-Unmodified-Since"));
            }
        }
    }
    match if_none_match {
        Some(c) if etag_matches(m, c) => return Err(not_modified(m, &modified)),
        Some(_) => {}
        None => {
            if modified_since.is_some_and(|t| modified <= *t) {
                return Err(not_modified(m, &modified));
            }
        }
    }
    Ok(())
}

/// A 304, with the validators a cache needs to keep using its copy (RFC 9110: the ETag and
/// Last-Modified a 200 would have sent).
fn not_modified(m: &Manifest, modified: &Timestamp) -> s3s::S3Error {
    let mut e = s3_error!(NotModified);
    let mut headers = http::HeaderMap::new();
    if let Ok(etag) = http::HeaderValue::from_str(&format!("\"{}\"", m.etag)) {
        headers.insert(http::header::ETAG, etag);
    }
    let mut date = Vec::new();
    if modified.format(TimestampFormat::HttpDate, &mut date).is_ok() {
        if let Ok(v) = http::HeaderValue::from_bytes(&date) {
            headers.insert(http::header::LAST_MODIFIED, v);
        }
    }
    e.set_headers(headers);
    e
}

/// PUT/complete conditions against the object a write would replace.
pub(super) fn check_write(old: Option<&Manifest>, if_match: Option<&ETagCondition>, if_none_match: Option<&ETagCondition>) -> S3Result<()> {
    if let Some(c) = if_match {
        match old {
            Some(m) if etag_matches(m, c) => {}
            Some(_) => return Err(s3_error!(PreconditionFailed, "If-Match does not match the object's ETag")),
            None => return Err(s3_error!(NoSuchKey, "If-Match names an object that does not exist")),
        }
    }
    if let (Some(c), Some(m)) = (if_none_match, old) {
        if etag_matches(m, c) {
            return Err(s3_error!(PreconditionFailed, "If-None-Match: the object exists"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use s3s::S3ErrorCode;

    fn manifest(etag: &str, modified_ms: u64) -> Manifest {
        Manifest { etag: etag.into(), modified_ms, ..Manifest::default() }
    }

    #[test]
    fn read_conditions_follow_rfc_7232() {
        let m = manifest("abc", 10_000);
        let same = ETagCondition::ETag(ETag::Strong("abc".into()));
        let other = ETagCondition::ETag(ETag::Strong("def".into()));
        assert!(check_read(&m, Some(&same), None, None, None).is_ok());
        assert_eq!(*check_read(&m, Some(&other), None, None, None).unwrap_err().code(), S3ErrorCode::PreconditionFailed);
        assert_eq!(*check_read(&m, None, Some(&same), None, None).unwrap_err().code(), S3ErrorCode::NotModified);
        assert!(check_read(&m, None, Some(&other), None, None).is_ok());
        let before = timestamp(5_000);
        let after = timestamp(20_000);
        assert_eq!(*check_read(&m, None, None, Some(&after), None).unwrap_err().code(), S3ErrorCode::NotModified);
        assert!(check_read(&m, None, None, Some(&before), None).is_ok());
        assert_eq!(*check_read(&m, None, None, None, Some(&before)).unwrap_err().code(), S3ErrorCode::PreconditionFailed);
        // If-Match that holds overrides If-Unmodified-Since.
        assert!(check_read(&m, Some(&same), None, None, Some(&before)).is_ok());
    }

    #[test]
    fn write_conditions() {
        let m = manifest("abc", 0);
        assert!(check_write(None, None, Some(&ETagCondition::Any)).is_ok());
        assert_eq!(*check_write(Some(&m), None, Some(&ETagCondition::Any)).unwrap_err().code(), S3ErrorCode::PreconditionFailed);
        assert_eq!(*check_write(None, Some(&ETagCondition::Any), None).unwrap_err().code(), S3ErrorCode::NoSuchKey);
        assert!(check_write(Some(&m), Some(&ETagCondition::ETag(ETag::Strong("abc".into()))), None).is_ok());
    }
}
