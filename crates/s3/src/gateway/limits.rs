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

pub(super) fn part_number(n: i32) -> S3Result<u32> {
    if !(1..=MAX_PARTS).contains(&n) {
        return Err(s3_error!(InvalidArgument, "Part number must be an integer between 1 and {MAX_PARTS}, inclusive"));
    }
    Ok(n as u32)
}
