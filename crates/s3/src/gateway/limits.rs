//! S3's limits, and the checks of a request's key and part number against them.

use s3s::{s3_error, S3Result};

/// S3's limits: a key's length, one PUT's size, a part's size and number, an object's size.
pub const MAX_KEY_BYTES: usize = 1024;
pub const MAX_PUT_BYTES: u64 = 5 << 30;
pub const MIN_PART_BYTES: u64 = 5 << 20;
pub const MAX_PART_BYTES: u64 = 5 << 30;
pub const MAX_PARTS: i32 = 10_000;
pub const MAX_LIST: i32 = 1000;
/// Records a listing reads at once to fill in its entries.
pub(super) const LIST_FETCH: usize = 16;

pub(super) fn check_key(key: &str) -> S3Result<()> {
    if key.is_empty() {
        return Err(s3_error!(InvalidArgument, "an object key must not be empty"));
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(s3_error!(KeyTooLongError, "an object key is at most {MAX_KEY_BYTES} bytes"));
    }
    if key.contains('\0') {
        return Err(s3_error!(InvalidArgument, "an object key must not contain NUL"));
    }
    Ok(())
}

/// A PUT of a body must say how long it is: by Content-Length, or by chunked transfer
/// encoding (the body then says where it ends). Without either, HTTP gives the request no
/// body, and what the client sends after its headers would be read as the next request: the
/// object would be stored empty. S3 answers 411.
pub(super) fn check_length_declared(headers: &http::HeaderMap) -> S3Result<()> {
    let chunked = headers
        .get_all(http::header::TRANSFER_ENCODING)
        .iter()
        .any(|v| v.to_str().is_ok_and(|s| s.to_ascii_lowercase().contains("chunked")));
    if headers.contains_key(http::header::CONTENT_LENGTH) || chunked {
        Ok(())
    } else {
        Err(s3_error!(MissingContentLength, "You must provide the Content-Length HTTP header."))
    }
}

pub(super) fn part_number(n: i32) -> S3Result<u32> {
    if !(1..=MAX_PARTS).contains(&n) {
        return Err(s3_error!(InvalidArgument, "Part number must be an integer between 1 and {MAX_PARTS}, inclusive"));
    }
    Ok(n as u32)
}
