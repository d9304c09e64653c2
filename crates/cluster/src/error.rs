//! The cluster's errors: what went wrong, with its data and its cause kept, so that callers
//! (the S3 gateway, the commands) decide from the variant, never from the text.

use std::path::PathBuf;
use std::time::Duration;

use spindle_client::ClientError;

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// A setting or argument the cluster refuses; nothing was changed.
    #[error(transparent)]
    Setting(#[from] SettingError),
    #[error(transparent)]
    Stripe(#[from] StripeError),
    /// A batch the cluster refuses as given; nothing was written.
    #[error(transparent)]
    Batch(#[from] BatchError),
    /// The credentials directory or what it holds.
    #[error(transparent)]
    Credentials(#[from] CredentialsError),
    /// Provisioning a drive stopped before changing it.
    #[error(transparent)]
    Provision(#[from] ProvisionError),
    #[error("etcd: {0}")]
    Etcd(#[from] etcd_client::Error),
    #[error("etcd member {endpoint} did not answer")]
    EtcdUnreachable { endpoint: String },
    #[error("cluster {0:?} already exists")]
    AlreadyExists(String),
    #[error("cluster state in etcd does not decode: {0}")]
    Decode(#[from] serde_json::Error),
    /// A replica's entry for a batch's key that does not carry the batch's members.
    #[error("the batch entry of drive key {key:02x?} has no member list")]
    UndecodableBatch { key: bytes::Bytes },
    #[error("no cluster named {0:?} in etcd (run `spindle cluster init`)")]
    NotInitialized(String),
    #[error("key is {len} bytes; a cluster key is at most {max}")]
    KeyTooLong { len: usize, max: usize },
    #[error("keys that begin with the bytes ff 00 \"spindle\" 00 are the cluster's own")]
    ReservedKey,
    #[error("value is {len} bytes; a cluster value is at most {max}")]
    ValueTooLarge { len: usize, max: usize },
    /// Too few replicas answered. For a write, the outcome is unknown: replicas that took it
    /// keep it, and a later read may or may not see it. `out_of_space` counts the replicas
    /// that refused it for lack of room (NO_SPACE), so that callers can tell a full cluster
    /// (`ClusterError::is_full`) from one whose drives are down. A read can meet it too: its
    /// write-back of a write found on too few replicas is a write.
    #[error("partition {partition}: {reached} of the {needed} replicas needed carried out the request{} ({last_error})", refused_full(*.out_of_space))]
    NoQuorum { partition: u32, needed: usize, reached: usize, out_of_space: usize, last_error: String },
    /// Some replicas took the write and the rest had taken a racing write or round first: its
    /// outcome is unknown, as with `NoQuorum` (a reader or a round may yet make it stand).
    #[error("partition {partition}: the write raced another one and its outcome is unknown (read the key to see)")]
    Contended { partition: u32 },
    /// A compare-and-swap found another version (or none, or one when none was expected).
    #[error("version mismatch: the key's version is {}", describe(.current))]
    VersionMismatch { current: Option<bytes::Bytes> },
    #[error("gave up after {0} attempts: each time the map changed or the key was overwritten under the read")]
    GaveUp(usize),
    /// A batch on `key` (its version `batch`) may or may not have taken effect, and what the
    /// replicas hold cannot tell which: one of its keys was overwritten on a replica before
    /// the batch was known written. Reads of the key fail so until it is written again.
    #[error("key {}: batch {} on it cannot be decided: one of its keys was overwritten on a replica before the batch was known written, so no read can tell whether it took effect; write or delete the key to settle it", String::from_utf8_lossy(.key), hex(.batch))]
    Undecided { key: bytes::Bytes, batch: bytes::Bytes },
    #[error("drive {drive}: {source}")]
    Drive { drive: String, source: ClientError },
    /// The coordinator's leadership lease was not renewed in time: its term is over.
    #[error("leadership lease expired")]
    LeaseLost,
    /// The map moved on and the drives did not follow within the wait.
    #[error("drives have not reached the map's epoch {epoch} within {waited:?}")]
    StaleView { epoch: u64, waited: Duration },
    /// A move cannot copy a partition: too few of its replicas answer.
    #[error("partition {partition}: {answering} of its replicas answer, {needed} needed to copy it")]
    TooFewToCopy { partition: u32, answering: usize, needed: usize },
    /// A move cannot copy a partition: too few of the drives it moves to answer to hold its
    /// writes on a write quorum of them.
    #[error("partition {partition}: {answering} of the drives it moves to answer, {needed} needed to copy it")]
    TooFewToReceive { partition: u32, answering: usize, needed: usize },
    /// A move's new replica does not answer.
    #[error("partition {partition}: drive {drive}, which it moves to, does not answer")]
    TargetDown { partition: u32, drive: String },
    /// A move copied a partition but could not bring every new replica to its newest writes.
    #[error("partition {partition}: catching up the new replicas: {source}")]
    CatchUp { partition: u32, source: ClientError },
}

/// A setting or argument out of what the cluster accepts.
#[derive(Debug, thiserror::Error)]
pub enum SettingError {
    #[error("cluster name {0:?}: must be non-empty, without '/'")]
    ClusterName(String),
    #[error("no etcd endpoint given")]
    NoEndpoint,
    #[error("member id {id:?}: 1 to {max} characters, no '/' or whitespace")]
    MemberId { id: String, max: usize },
    #[error("drive address {0:?}: expected HOST:PORT")]
    Address(String),
    #[error("weight {0}: must be a positive number")]
    Weight(f64),
    #[error("partitions must be 1..={max}, not {given}")]
    Partitions { given: u32, max: u32 },
    #[error("replicas must be 1..={max}, not {given}")]
    Replicas { given: u8, max: u8 },
    #[error("write quorum must be 1..={replicas}, not {given}")]
    WriteQuorum { given: u8, replicas: u8 },
    #[error("a write quorum of {write_quorum} of {replicas} is not a majority: two writes could miss each other")]
    NotAMajority { write_quorum: u8, replicas: u8 },
    #[error("certificate names {names:?}: {reason}")]
    CertificateNames { names: Vec<String>, reason: String },
    #[error(transparent)]
    Code(#[from] crate::erasure::CodeError),
    #[error("placement groups must be 1..={max}, not {given}")]
    Groups { given: u32, max: u32 },
    #[error("pool name {name:?}: 1 to {max} letters, digits, '-' or '_', and not \"default\"")]
    PoolName { name: String, max: usize },
    #[error("pool {0:?} already exists")]
    PoolExists(String),
    #[error("a cluster has at most {0} pools besides the default one")]
    TooManyPools(usize),
    #[error("no pool {0:?} in the cluster (`spindle cluster pool list`)")]
    UnknownPool(String),
    #[error("remote pool {url:?}: {reason}")]
    RemotePool { url: String, reason: String },
    #[error("pool {0:?} is a remote bucket: its objects are the gateway's to read and write, not the cluster's")]
    RemoteNotStriped(String),
}

/// Why a stripe of an erasure-coded pool was not written or read.
#[derive(Debug, thiserror::Error)]
pub enum StripeError {
    #[error("pool {pool:?} has no placement for group {group}: it has fewer drives up than its code's width {width}")]
    Unplaced { pool: String, group: u32, width: usize },
    /// `out_of_space` of the shards not written were refused for lack of room (NO_SPACE).
    #[error("pool {pool:?}: {written} of {width} shards of stripe {stripe} written{}, all are needed before it is acknowledged (last error: {last_error})", refused_full(*.out_of_space))]
    Incomplete { pool: String, stripe: u32, written: usize, width: usize, out_of_space: usize, last_error: String },
    #[error("pool {pool:?}: stripe {stripe} has {have} readable shards of the {need} it needs; missing: {missing}")]
    Lost { pool: String, stripe: u32, have: usize, need: usize, missing: String },
    #[error("pool {pool:?}: {source}")]
    Code { pool: String, source: crate::erasure::CodeError },
}

/// A batch the cluster does not take.
#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    #[error("a batch holds 1 to {max} operations, not {given}")]
    Size { given: usize, max: usize },
    #[error("a batch names each key once")]
    RepeatedKey,
    #[error("a batch's keys must share one partition: {first:?} is in {first_partition}, {other:?} in {other_partition} (give them one hash tag, {{...}})")]
    Partitions { first: String, first_partition: u32, other: String, other_partition: u32 },
}

/// The credentials directory: a file that cannot be read or written, or does not hold what
/// it should.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{}: {message}", path.display())]
    Content { path: PathBuf, message: String },
    /// The cluster's CA could not make a key or a certificate.
    #[error("the cluster's CA: {0}")]
    Certificate(#[from] rcgen::Error),
}

/// Why a drive was not provisioned for the cluster (it is left as it was).
#[derive(Debug, thiserror::Error)]
pub enum ProvisionError {
    #[error("drive {addr}: its TLS certificate is not issued by cluster {cluster:?}'s CA ({source}). A drive of another cluster is refused; a new drive needs a certificate from `spindle cluster issue-cert` in its tls_cert/tls_key")]
    ForeignCertificate { addr: String, cluster: String, source: ClientError },
    #[error("drive {addr} accepts neither cluster {cluster:?}'s identity nor identity {admin} as administrator: it was provisioned for another cluster, or name its administrator (--admin-identity, --admin-key)")]
    NoAdministrator { addr: String, cluster: String, admin: i64 },
    #[error("{}: no admin.json: the cluster's administrator is needed to change its drives' ACLs", dir.display())]
    NoClusterAdministrator { dir: PathBuf },
}

impl ClusterError {
    /// Whether the operation failed for lack of space: a drive's NO_SPACE, a quorum that the
    /// replicas refusing for lack of room would have made, or a stripe a drive had no room
    /// for (a stripe needs every shard). While a partition moves, `needed` is that of each
    /// set and the counts span both: a drive down in one set beside a full one in the other
    /// may be called full, the full drive being a cause either way.
    pub fn is_full(&self) -> bool {
        match self {
            ClusterError::Drive { source, .. } => source.is_no_space(),
            ClusterError::NoQuorum { needed, reached, out_of_space, .. } => *out_of_space > 0 && reached + out_of_space >= *needed,
            ClusterError::Stripe(StripeError::Incomplete { out_of_space, .. }) => *out_of_space > 0,
            _ => false,
        }
    }
}

/// The part of a message that says how many drives refused for lack of space.
fn refused_full(n: usize) -> String {
    if n == 0 { String::new() } else { format!("; {n} refused it for lack of space") }
}

fn describe(v: &Option<bytes::Bytes>) -> String {
    match v {
        None => "absent".into(),
        Some(b) => hex(b),
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
