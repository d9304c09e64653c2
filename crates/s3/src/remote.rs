//! The remote tier: a pool that is an external S3 bucket (`RemotePool` in the cluster's map),
//! so the coldest class can leave the cluster's disks. Each stripe of an object is one remote
//! object, `PREFIX` + the data id in hex + `/` + the stripe's index, framed with its length
//! and a CRC-32C so that a truncated, replaced or rotten object is found on read and never
//! returned. The remote store's own redundancy keeps it; what the gateway adds is retries
//! of transient failures with a bound on each request, and a bounded set of connections.

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use spindle_cluster::remote::RemotePool;
use spindle_s3_client::{ConnPool, S3Conn, S3Endpoint, S3Error, S3Signer};

/// Tries of one request before its error is the caller's (the first and two more).
const TRIES: u32 = 3;
/// Wait before the second try; doubled before each later one.
const BACKOFF: Duration = Duration::from_millis(200);
/// Longest one request (a stripe's PUT or GET, a page of a listing, a DELETE) may take before
/// it counts as failed: a hung remote store holds up a reader no longer than this per try.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Idle connections kept to one remote store.
const MAX_IDLE: usize = 32;
/// "SPR1": a stripe of Spindle's remote tier, frame version 1.
const MAGIC: [u8; 4] = *b"SPR1";
/// Magic, the stripe's length (u32, big-endian), its CRC-32C (u32, big-endian).
pub const FRAME_HEADER: usize = 12;

/// What the gateway is given to reach a remote pool: never kept in the cluster's map.
#[derive(Clone)]
pub struct RemoteAccess {
    pub access_key: String,
    pub secret_key: String,
    /// For an `https://` endpoint: PEM certificates to trust (a CA's, or the server's own).
    pub tls_trust: Option<std::path::PathBuf>,
}

impl std::fmt::Debug for RemoteAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteAccess").field("access_key", &self.access_key).field("tls_trust", &self.tls_trust).finish_non_exhaustive()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// The remote store did not answer, or answered that it is failing, on every try.
    #[error("remote pool {pool:?} unreachable after {TRIES} tries: {source}")]
    Unreachable { pool: String, source: S3Error },
    /// The remote store refused the request (credentials, bucket, policy): trying again will
    /// not help.
    #[error("remote pool {pool:?} refused a request: {source}")]
    Refused { pool: String, source: S3Error },
    #[error("remote pool {pool:?}: object {key} is missing")]
    Missing { pool: String, key: String },
    #[error("remote pool {pool:?}: object {key} is damaged: {reason}")]
    Damaged { pool: String, key: String, reason: String },
    /// A key the remote store said it deleted was listed again.
    #[error("remote pool {pool:?}: object {key} is still listed after its delete")]
    Undeleted { pool: String, key: String },
    #[error("remote pool {pool:?}: {reason}")]
    Setting { pool: String, reason: String },
}

/// One remote pool as this gateway reaches it.
pub struct RemoteTier {
    name: String,
    pool: RemotePool,
    conns: ConnPool,
}

impl RemoteTier {
    pub fn new(name: &str, pool: &RemotePool, access: &RemoteAccess) -> Result<RemoteTier, RemoteError> {
        let endpoint = S3Endpoint {
            endpoint: pool.endpoint.clone(),
            region: pool.region.clone(),
            bucket: pool.bucket.clone(),
            access_key: access.access_key.clone(),
            secret_key: access.secret_key.clone(),
            tls_trust: access.tls_trust.clone(),
        };
        let signer = S3Signer::new(&endpoint).map_err(|e| RemoteError::Setting { pool: name.to_string(), reason: e.to_string() })?;
        Ok(RemoteTier { name: name.to_string(), pool: pool.clone(), conns: ConnPool::new(signer, MAX_IDLE) })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The remote key of stripe `index` of `object`.
    fn key(&self, object: &[u8], index: u32) -> String {
        format!("{}{index:08x}", self.object_prefix(object))
    }

    /// The prefix every stripe of `object` has.
    fn object_prefix(&self, object: &[u8]) -> String {
        let hex: String = object.iter().map(|b| format!("{b:02x}")).collect();
        format!("{}{hex}/", self.pool.prefix)
    }

    /// Sends one request with `op` on a pooled connection, trying again after transient
    /// failures; the connection goes back to the pool only after a clean exchange (a request
    /// cut by the timeout drops its connection with it).
    async fn call<T, Fut>(&self, what: &str, op: impl Fn(S3Conn) -> Fut) -> Result<T, RemoteError>
    where
        Fut: std::future::Future<Output = (S3Conn, Result<T, S3Error>)>,
    {
        let mut wait = BACKOFF;
        let mut attempt = 1;
        loop {
            let error = match tokio::time::timeout(REQUEST_TIMEOUT, op(self.conns.take())).await {
                Ok((conn, Ok(v))) => {
                    self.conns.give(conn);
                    return Ok(v);
                }
                Ok((_, Err(e))) => e,
                Err(_) => S3Error::TimedOut { path: what.to_string(), after: REQUEST_TIMEOUT },
            };
            if !error.is_transient() {
                return Err(RemoteError::Refused { pool: self.name.clone(), source: error });
            }
            if attempt >= TRIES {
                return Err(RemoteError::Unreachable { pool: self.name.clone(), source: error });
            }
            tracing::debug!(pool = %self.name, what, error = %error, attempt, "remote request failed; trying again");
            tokio::time::sleep(wait).await;
            wait *= 2;
            attempt += 1;
        }
    }

    /// Writes stripe `index` of `object`. Acknowledged by the remote store once it answered
    /// the PUT: its durability is the remote store's.
    pub async fn put_stripe(&self, object: &[u8], index: u32, stripe: Bytes) -> Result<(), RemoteError> {
        let key = self.key(object, index);
        let framed = frame(&stripe);
        self.call(&key, |mut c| {
            let (key, framed) = (key.clone(), framed.clone());
            async move {
                let r = c.put_object(&key, framed).await;
                (c, r)
            }
        })
        .await
    }

    /// Stripe `index` of `object`, `len` bytes long.
    pub async fn get_stripe(&self, object: &[u8], index: u32, len: usize) -> Result<Bytes, RemoteError> {
        let key = self.key(object, index);
        let got = self
            .call(&key, |mut c| {
                let key = key.clone();
                async move {
                    let r = c.get_bytes(&key, len + FRAME_HEADER).await;
                    (c, r)
                }
            })
            .await;
        let framed = match got {
            Ok(Some(b)) => b,
            Ok(None) => return Err(RemoteError::Missing { pool: self.name.clone(), key }),
            // Longer than it may be: not ours, or not what the object's record says.
            Err(RemoteError::Refused { source: e @ S3Error::TooLong { .. }, .. }) => return Err(RemoteError::Damaged { pool: self.name.clone(), key, reason: e.to_string() }),
            Err(e) => return Err(e),
        };
        unframe(&framed, len).map_err(|reason| RemoteError::Damaged { pool: self.name.clone(), key, reason })
    }

    /// Deletes every stripe of `object`; returns how many there were.
    pub async fn delete_stripes(&self, object: &[u8]) -> Result<u64, RemoteError> {
        let prefix = self.object_prefix(object);
        let mut deleted = 0;
        let mut last_first: Option<String> = None;
        // Listed again after each page's deletes: what is left is what remains to delete (a
        // key listed first twice was not deleted: an error, not a loop).
        loop {
            let (keys, _) = self
                .call(&prefix, |mut c| {
                    let prefix = prefix.clone();
                    async move {
                        let r = c.list_page(&prefix, None).await;
                        (c, r)
                    }
                })
                .await?;
            let Some(first) = keys.first().cloned() else { return Ok(deleted) };
            if last_first.as_ref() == Some(&first) {
                return Err(RemoteError::Undeleted { pool: self.name.clone(), key: first });
            }
            last_first = Some(first);
            for key in keys {
                self.call(&key, |mut c| {
                    let key = key.clone();
                    async move {
                        let r = c.delete_object(&key).await;
                        (c, r)
                    }
                })
                .await?;
                deleted += 1;
            }
        }
    }
}

/// A stripe as stored remotely: header, then the bytes.
fn frame(stripe: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(FRAME_HEADER + stripe.len());
    out.put_slice(&MAGIC);
    out.put_u32(stripe.len() as u32);
    out.put_u32(crc_fast::crc32_iscsi(stripe));
    out.put_slice(stripe);
    out.freeze()
}

/// The stripe a remote object holds, if it is whole and `len` bytes long.
fn unframe(framed: &Bytes, len: usize) -> Result<Bytes, String> {
    if framed.len() < FRAME_HEADER || framed[..4] != MAGIC {
        return Err(format!("not a stripe of this tier ({} bytes, no header)", framed.len()));
    }
    let stated = u32::from_be_bytes([framed[4], framed[5], framed[6], framed[7]]) as usize;
    let crc = u32::from_be_bytes([framed[8], framed[9], framed[10], framed[11]]);
    let body = framed.slice(FRAME_HEADER..);
    if stated != body.len() || stated != len {
        return Err(format!("{} bytes where its header says {stated} and the object's record {len}", body.len()));
    }
    if crc_fast::crc32_iscsi(&body) != crc {
        return Err("its checksum does not match its bytes".into());
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn damage_is_found_never_returned() {
        let f = frame(b"stripe bytes");
        assert_eq!(unframe(&f, 12).unwrap(), Bytes::from_static(b"stripe bytes"));
        assert!(unframe(&f, 11).unwrap_err().contains("record 11"));
        let mut flipped = f.to_vec();
        flipped[FRAME_HEADER + 3] ^= 1;
        assert!(unframe(&Bytes::from(flipped), 12).unwrap_err().contains("checksum"));
        assert!(unframe(&f.slice(..f.len() - 1), 12).is_err());
        assert!(unframe(&Bytes::from_static(b"hello"), 5).unwrap_err().contains("no header"));
        assert!(unframe(&frame(b""), 0).unwrap().is_empty());
    }

    #[test]
    fn keys_sort_by_object_then_stripe() {
        let pool = RemotePool::parse("http://127.0.0.1:9/archive/c1", "us-east-1").unwrap();
        let access = RemoteAccess { access_key: "a".into(), secret_key: "s".into(), tls_trust: None };
        let t = RemoteTier::new("glacier", &pool, &access).unwrap();
        assert_eq!(t.key(&[0xab, 0x01], 2), "c1/ab01/00000002");
        assert!(t.key(&[1], 9) < t.key(&[1], 10));
        assert!(t.key(&[1], 10).starts_with(&t.object_prefix(&[1])));
        assert!(!format!("{access:?}").contains("\"s\""), "the secret is never printed");
    }

    proptest! {
        #[test]
        fn any_stripe_survives_its_frame(bytes in proptest::collection::vec(any::<u8>(), 0..4096), flip in any::<usize>()) {
            let f = frame(&bytes);
            prop_assert_eq!(unframe(&f, bytes.len()).unwrap(), Bytes::from(bytes.clone()));
            let mut bad = f.to_vec();
            let at = flip % bad.len();
            bad[at] ^= 0x40;
            prop_assert!(unframe(&Bytes::from(bad), bytes.len()).is_err());
        }
    }
}
