use spindle_client::ClientError;

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("{0}")]
    Invalid(String),
    #[error("etcd: {0}")]
    Etcd(#[from] etcd_client::Error),
    #[error("cluster state in etcd does not decode: {0}")]
    Decode(String),
    #[error("no cluster named {0:?} in etcd (run `spindle cluster init`)")]
    NotInitialized(String),
    #[error("key is {len} bytes; a cluster key is at most {max}")]
    KeyTooLong { len: usize, max: usize },
    #[error("value is {len} bytes; a cluster value is at most {max}")]
    ValueTooLarge { len: usize, max: usize },
    /// Too few replicas answered. For a write, the outcome is unknown: replicas that took it
    /// keep it, and a later read may or may not see it.
    #[error("partition {partition}: {reached} of the {needed} replicas needed answered ({last_error})")]
    NoQuorum { partition: u32, needed: usize, reached: usize, last_error: String },
    /// Some replicas took the write and the rest had taken a racing write or round first: its
    /// outcome is unknown, as with `NoQuorum` (a reader or a round may yet make it stand).
    #[error("partition {partition}: the write raced another one and its outcome is unknown (read the key to see)")]
    Contended { partition: u32 },
    /// A compare-and-swap found another version (or none, or one when none was expected).
    #[error("version mismatch: the key's version is {}", describe(.current))]
    VersionMismatch { current: Option<bytes::Bytes> },
    #[error("gave up after {0} attempts: each time the map changed or the key was overwritten under the read")]
    GaveUp(usize),
    #[error("drive {drive}: {source}")]
    Drive { drive: String, source: ClientError },
    #[error("{0}")]
    Timeout(String),
}

fn describe(v: &Option<bytes::Bytes>) -> String {
    match v {
        None => "absent".into(),
        Some(b) => b.iter().map(|x| format!("{x:02x}")).collect(),
    }
}
