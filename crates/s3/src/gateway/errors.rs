//! How errors leave the gateway: the store's failures as S3 answers, and S3 errors as the
//! crate's. (An answer that leaves its request's body unread closes the connection: the
//! server sees to that for every operation.)

use s3s::{s3_error, S3Error};

use crate::kv::KvError;

impl From<S3Error> for crate::GatewayError {
    fn from(e: S3Error) -> Self {
        crate::GatewayError::S3(format!("{}: {}", e.code().as_str(), e.message().unwrap_or("")))
    }
}

/// The error code of a write refused because a drive is full, with HTTP 507 (Insufficient
/// Storage), as MinIO answers with its own `XMinioStorageFull`: S3 defines none.
pub const STORAGE_FULL: &str = "XSpindleStorageFull";

/// The store's failures as S3 answers: what the client can act on (retry later, or not),
/// never the drives, partitions or addresses behind it, which go to the log.
impl From<KvError> for S3Error {
    fn from(e: KvError) -> Self {
        match &e {
            KvError::Unavailable(crate::kv::Fault::Cluster(spindle_cluster::ClusterError::Stripe(spindle_cluster::StripeError::Lost { pool, stripe, have, need, .. }))) => {
                tracing::warn!(error = %e, "a stripe could not be read; answered 503");
                s3_error!(ServiceUnavailable, "Only {have} of the {need} shards needed to read stripe {stripe} of this object (pool {pool}) could be read: too many of its drives are down or their copies damaged. Please try again once they are back.")
            }
            KvError::Unavailable(crate::kv::Fault::Remote(crate::remote::RemoteError::Unreachable { pool, .. })) => {
                tracing::warn!(error = %e, "the remote tier did not answer; answered 503");
                s3_error!(ServiceUnavailable, "The remote store that keeps this object's data (pool {pool}) did not answer. Please try again.")
            }
            KvError::Failed(crate::kv::Fault::Remote(r @ (crate::remote::RemoteError::Missing { pool, .. } | crate::remote::RemoteError::Damaged { pool, .. }))) => {
                tracing::error!(error = %e, "remote stripe unreadable; answered 500");
                let what = if matches!(r, crate::remote::RemoteError::Missing { .. }) { "missing from" } else { "damaged in" };
                s3_error!(InternalError, "Part of this object's data is {what} the remote store that keeps it (pool {pool}); it is not returned.")
            }
            // Rounds on one key kept meeting others in step: the store is up, the key is hot.
            KvError::Unavailable(crate::kv::Fault::Cluster(spindle_cluster::ClusterError::GaveUp(_))) => {
                tracing::info!(error = %e, "writes to one key kept racing; answered 503 SlowDown");
                s3_error!(SlowDown, "Too many writes raced on this key at once. Please reduce your request rate and try again.")
            }
            KvError::Unavailable(_) => {
                tracing::warn!(error = %e, "store unavailable; answered 503");
                s3_error!(ServiceUnavailable, "Too few of the store's drives answered. Please try again.")
            }
            KvError::Contended(_) => {
                tracing::info!(error = %e, "write raced another; answered 503");
                s3_error!(ServiceUnavailable, "The write raced another one to the same object and its outcome is unknown. Please read the object, or try again.")
            }
            KvError::Full(_) => {
                tracing::error!(error = %e, "a drive is full; answered 507");
                let mut full = S3Error::with_message(
                    s3s::S3ErrorCode::Custom(STORAGE_FULL.into()),
                    "The store has no room to carry out the request: a drive under it is full. Delete objects or add capacity, then try again.",
                );
                full.set_status_code(http::StatusCode::INSUFFICIENT_STORAGE);
                full
            }
            KvError::Mismatch | KvError::Failed(_) => {
                tracing::error!(error = %e, "store failure; answered 500");
                s3_error!(InternalError, "The store failed to carry out the request.")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use s3s::S3ErrorCode;
    use spindle_client::ClientError;
    use spindle_cluster::ClusterError;

    use super::*;

    /// A store that cannot answer is a 503 the client can retry, and what it says names no
    /// drive, partition or address; a failed store is a 500.
    #[test]
    fn store_failures_answer_without_naming_internals() {
        let no_quorum = ClusterError::NoQuorum { partition: 7, needed: 2, reached: 0, out_of_space: 1, last_error: "drive d3 (10.0.0.3:8443): connection refused".into() };
        let drive_down = ClientError::Io(std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "10.0.0.4:8123 refused"));
        for e in [KvError::from(no_quorum), KvError::from(drive_down), KvError::from(ClusterError::Contended { partition: 7 })] {
            let answer = S3Error::from(e);
            assert_eq!(*answer.code(), S3ErrorCode::ServiceUnavailable);
            let message = answer.message().unwrap_or("");
            for internal in ["d3", "10.0.0", "partition", "quorum"] {
                assert!(!message.contains(internal), "{message:?} names {internal:?}");
            }
        }
        let full = || ClientError::Status { code: spindle_proto::StatusCode::NoSpace, message: "drive d2 (10.0.0.2:8123) is full".into() };
        // Too few replicas had room for a cluster's write: full, once those refusing for lack
        // of space would have made the quorum (above, one full and one down: unavailable).
        let too_full = ClusterError::NoQuorum { partition: 7, needed: 2, reached: 1, out_of_space: 1, last_error: "drive d2 (10.0.0.2:8123): NO_SPACE".into() };
        // A stripe needs every shard: one drive without room makes it full.
        let stripe = |out_of_space| spindle_cluster::StripeError::Incomplete { pool: "cold".into(), stripe: 0, written: 5, width: 6, out_of_space, last_error: "drive p3: NO_SPACE".into() };
        assert_eq!(*S3Error::from(KvError::from(ClusterError::from(stripe(0)))).code(), S3ErrorCode::ServiceUnavailable);
        for e in [KvError::from(full()), KvError::from(ClusterError::Drive { drive: "d2".into(), source: full() }), KvError::from(too_full), KvError::from(ClusterError::from(stripe(1)))] {
            let answer = S3Error::from(e);
            assert_eq!(answer.code().as_str(), STORAGE_FULL);
            assert_eq!(answer.status_code(), Some(http::StatusCode::INSUFFICIENT_STORAGE));
            assert!(!answer.message().unwrap_or("").contains("d2"));
        }
        // Writes that kept racing on one key: slow down, the store itself is up.
        let hot = S3Error::from(KvError::from(ClusterError::GaveUp(8)));
        assert_eq!((hot.code().clone(), hot.status_code()), (S3ErrorCode::SlowDown, Some(http::StatusCode::SERVICE_UNAVAILABLE)));
        let failed = S3Error::from(KvError::from(ClusterError::KeyTooLong { len: 5000, max: 4096 }));
        assert_eq!(*failed.code(), S3ErrorCode::InternalError);
        assert!(!failed.message().unwrap_or("").contains("4096"));
    }
}
