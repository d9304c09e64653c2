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

/// Names S3 keeps for itself at the start and the end of a bucket's name.
const RESERVED_PREFIXES: [&str; 3] = ["xn--", "sthree-", "amzn-s3-demo-"];
const RESERVED_SUFFIXES: [&str; 5] = ["-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"];

/// S3's rules for a new bucket's name: 3 to 63 characters of lowercase letters, digits, dots
/// and hyphens, a letter or digit at each end and on each side of every dot (so it is a DNS
/// name: `foo-.bar`, `a..b` are not), not an IPv4 address, and none of S3's reserved
/// prefixes and suffixes.
pub(super) fn check_bucket_name(name: &str) -> S3Result<()> {
    let refuse = |why: &str| Err(s3_error!(InvalidBucketName, "The specified bucket is not valid: {why}"));
    if !(3..=63).contains(&name.len()) {
        return refuse("a bucket name is 3 to 63 characters long");
    }
    if !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-') {
        return refuse("a bucket name has only lowercase letters, digits, dots and hyphens");
    }
    if name.split('.').any(|label| label.is_empty() || label.starts_with('-') || label.ends_with('-')) {
        return refuse("a bucket name begins and ends with a letter or digit, and so does each part between its dots");
    }
    if name.parse::<std::net::Ipv4Addr>().is_ok() {
        return refuse("a bucket name is not an IP address");
    }
    if RESERVED_PREFIXES.iter().any(|p| name.starts_with(p)) || RESERVED_SUFFIXES.iter().any(|s| name.ends_with(s)) {
        return refuse("the name begins or ends with a part S3 reserves");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_names_follow_s3s_rules() {
        for good in ["abc", "my-bucket", "my.bucket.2026", "a-b.c-d", "123", &"a".repeat(63)] {
            assert!(check_bucket_name(good).is_ok(), "{good:?} refused");
        }
        for bad in ["ab", &"a".repeat(64), "foo-.bar", "foo.-bar", "a..b", "-abc", "abc-", ".abc", "abc.", "Abc", "a_b", "192.168.5.4", "xn--abc", "sthree-x", "amzn-s3-demo-x", "x-s3alias", "x--ol-s3", "x.mrap", "x--x-s3", "x--table-s3"] {
            let e = check_bucket_name(bad).expect_err(bad);
            assert_eq!(*e.code(), s3s::S3ErrorCode::InvalidBucketName, "{bad:?}");
        }
    }
}
