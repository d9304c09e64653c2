//! How errors leave the gateway: answers that close the connection, and S3 errors as the
//! crate's.

use s3s::S3Error;

/// An error answered while the request body may still be unread: the connection cannot
/// carry another request, and the answer says so (`Connection: close`).
pub(super) fn closing(mut e: S3Error) -> S3Error {
    let mut headers = http::HeaderMap::new();
    headers.insert(http::header::CONNECTION, http::HeaderValue::from_static("close"));
    headers.insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/xml"));
    e.set_headers(headers);
    e
}

impl From<S3Error> for crate::GatewayError {
    fn from(e: S3Error) -> Self {
        crate::GatewayError::S3(format!("{}: {}", e.code().as_str(), e.message().unwrap_or("")))
    }
}
