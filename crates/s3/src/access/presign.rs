//! A presigned URL may live a week at most, as in S3: one that claims more is refused before
//! anything is done.

use s3s::{s3_error, S3Result};

/// The longest life S3 gives a presigned URL: 7 days.
pub const MAX_PRESIGNED_SECS: u64 = 7 * 24 * 3600;

/// Refuses a query whose `X-Amz-Expires` is more than [`MAX_PRESIGNED_SECS`] (or no number).
pub(super) fn presigned_within_a_week(query: Option<&str>) -> S3Result<()> {
    for pair in query.unwrap_or("").split('&') {
        if let Some(value) = pair.strip_prefix("X-Amz-Expires=") {
            match value.parse::<u64>() {
                Ok(secs) if secs <= MAX_PRESIGNED_SECS => {}
                Ok(_) => {
                    return Err(s3_error!(
                        AuthorizationQueryParametersError,
                        "X-Amz-Expires must be less than a week (in seconds) that is {MAX_PRESIGNED_SECS}"
                    ))
                }
                Err(_) => return Err(s3_error!(AuthorizationQueryParametersError, "X-Amz-Expires should be a number")),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_presigned_url_lives_a_week_at_most() {
        assert!(presigned_within_a_week(None).is_ok());
        assert!(presigned_within_a_week(Some("X-Amz-Expires=604800&X-Amz-Date=x")).is_ok());
        assert!(presigned_within_a_week(Some("a=b&X-Amz-Expires=60")).is_ok());
        for bad in ["X-Amz-Expires=604801", "a=1&X-Amz-Expires=9999999", "X-Amz-Expires=-1", "X-Amz-Expires=soon"] {
            let e = presigned_within_a_week(Some(bad)).expect_err(bad);
            assert_eq!(*e.code(), s3s::S3ErrorCode::AuthorizationQueryParametersError, "{bad}");
        }
    }
}
