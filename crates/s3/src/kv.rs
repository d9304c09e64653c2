//! The key-value store under the gateway: a cluster (replicated, versioned by the cluster
//! client) or one Kinetic drive (versioned by the drive's own compare-and-swap). The gateway
//! needs only get, conditional put and delete, ordered key ranges and a flush.

use std::net::SocketAddr;

use bytes::Bytes;
use spindle_client::{Client, ClientConfig, ClientError, DeleteOptions, PutOptions, RangeQuery};
use spindle_cluster::erasure::Stripe;
use spindle_cluster::{ClusterError, Condition, Store};
use spindle_proto::Synchronization;
use tokio::sync::Mutex;

/// Keys one drive range request returns at most (the drive's published limit).
const DRIVE_RANGE_PAGE: usize = spindle_proto::limits::MAX_KEY_RANGE_COUNT as usize;
/// Bytes of a drive-mode version: random, so two gateways never pick the same.
const VERSION_LEN: usize = 16;

/// A write's precondition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cond {
    Any,
    /// The key must not exist.
    Absent,
    /// The key must hold exactly this version.
    Version(Bytes),
}

#[derive(Debug, thiserror::Error)]
pub enum KvError {
    /// The precondition did not hold.
    #[error("version mismatch")]
    Mismatch,
    /// The write raced another and some replicas took it: whether it took effect is known
    /// only by reading again (`Core::commit`).
    #[error("store contended: {0}")]
    Contended(#[source] ClusterError),
    /// The store could not be reached or did not reach a quorum: try again later.
    #[error("store unavailable: {0}")]
    Unavailable(#[source] Fault),
    /// A drive had no room for the write (NO_SPACE): nothing more can be stored until space
    /// is freed or added.
    #[error("store full: {0}")]
    Full(#[source] Fault),
    #[error("store error: {0}")]
    Failed(#[source] Fault),
}

/// What the store under the gateway answered.
#[derive(Debug, thiserror::Error)]
pub enum Fault {
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    #[error(transparent)]
    Drive(#[from] ClientError),
    #[error(transparent)]
    Remote(#[from] crate::remote::RemoteError),
}

impl From<crate::remote::RemoteError> for KvError {
    fn from(e: crate::remote::RemoteError) -> Self {
        match e {
            crate::remote::RemoteError::Unreachable { .. } => KvError::Unavailable(e.into()),
            other => KvError::Failed(other.into()),
        }
    }
}

impl From<ClusterError> for KvError {
    fn from(e: ClusterError) -> Self {
        match e {
            ClusterError::VersionMismatch { .. } => KvError::Mismatch,
            ClusterError::Contended { .. } => KvError::Contended(e),
            _ if e.is_full() => KvError::Full(e.into()),
            ClusterError::NoQuorum { .. }
            | ClusterError::EtcdUnreachable { .. }
            | ClusterError::LeaseLost
            | ClusterError::StaleView { .. }
            | ClusterError::TooFewToCopy { .. }
            | ClusterError::TooFewToReceive { .. }
            | ClusterError::TargetDown { .. }
            | ClusterError::Drive { .. }
            | ClusterError::GaveUp(_)
            | ClusterError::Undecided { .. }
            | ClusterError::Etcd(_)
            | ClusterError::Stripe(spindle_cluster::StripeError::Unplaced { .. } | spindle_cluster::StripeError::Incomplete { .. } | spindle_cluster::StripeError::Lost { .. }) => KvError::Unavailable(e.into()),
            other => KvError::Failed(other.into()),
        }
    }
}

impl From<ClientError> for KvError {
    fn from(e: ClientError) -> Self {
        if e.is_version_mismatch() {
            return KvError::Mismatch;
        }
        if e.is_no_space() {
            return KvError::Full(e.into());
        }
        match e {
            ClientError::Io(_) | ClientError::Terminated(_) | ClientError::Timeout(_) => KvError::Unavailable(e.into()),
            other => KvError::Failed(other.into()),
        }
    }
}

/// A value and the version it is stored with.
#[derive(Debug, Clone)]
pub struct Stored {
    pub value: Bytes,
    pub version: Bytes,
}

/// How a write is made durable. Chunks may be written back (`Lazy`) as long as a `flush`
/// precedes the write that makes them reachable; records are written through, except those a
/// crash may lose without harm (an intent refreshed just before a swap, or dropped after it:
/// the sweeper checks references before it dooms anything). The cluster writes through always.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    Lazy,
    Through,
}

pub enum Kv {
    Cluster(Store),
    Drive(Drive),
}

/// Connections to a drive, used in turn: a drive serves each connection's requests in order,
/// and concurrent transfers should not queue behind one another's chunks.
const DRIVE_CONNECTIONS: usize = 4;

/// One drive over a few connections, each reopened when it drops.
pub struct Drive {
    addr: SocketAddr,
    config: ClientConfig,
    clients: Vec<Mutex<Client>>,
    next: std::sync::atomic::AtomicUsize,
}

impl Drive {
    pub async fn connect(addr: SocketAddr, config: ClientConfig) -> Result<Drive, KvError> {
        let mut clients = Vec::with_capacity(DRIVE_CONNECTIONS);
        for _ in 0..DRIVE_CONNECTIONS {
            clients.push(Mutex::new(Client::connect(addr, config.clone()).await?));
        }
        Ok(Drive { addr, config, clients, next: std::sync::atomic::AtomicUsize::new(0) })
    }

    async fn client(&self) -> Result<Client, KvError> {
        let i = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % self.clients.len();
        let mut guard = self.clients[i].lock().await;
        if guard.is_closed() {
            *guard = Client::connect(self.addr, self.config.clone()).await?;
        }
        Ok(guard.clone())
    }

    /// Largest value the drive accepts, from its sign-on.
    fn max_value(&self, client: &Client) -> Option<usize> {
        let limits = client.sign_on().body.as_ref()?.get_log.as_ref()?.limits.as_ref()?;
        limits.max_value_size.map(|v| v as usize)
    }
}

impl Kv {
    /// Largest value this store takes: the size of an object's chunks.
    pub async fn max_value(&self) -> Result<usize, KvError> {
        match self {
            Kv::Cluster(_) => Ok(spindle_cluster::store::MAX_VALUE_LEN),
            Kv::Drive(d) => {
                let c = d.client().await?;
                Ok(d.max_value(&c).unwrap_or(spindle_proto::limits::MAX_VALUE_SIZE as usize))
            }
        }
    }

    pub async fn get(&self, key: &[u8]) -> Result<Option<Stored>, KvError> {
        match self {
            Kv::Cluster(s) => Ok(s.get(key).await?.map(|v| Stored { value: v.value, version: v.version })),
            Kv::Drive(d) => {
                let entry = d.client().await?.get(key).await?;
                Ok(entry.map(|e| Stored { value: e.value, version: e.metadata.version }))
            }
        }
    }

    /// Stores `value` if `cond` holds; returns the new version.
    pub async fn put(&self, key: &[u8], value: Bytes, cond: Cond, durability: Durability) -> Result<Bytes, KvError> {
        match self {
            Kv::Cluster(s) => {
                let c = match cond {
                    Cond::Any => Condition::None,
                    Cond::Absent => Condition::Absent,
                    Cond::Version(v) => Condition::Version(v),
                };
                Ok(s.put(key, value, c).await?)
            }
            Kv::Drive(d) => {
                let version = Bytes::from(rand::random::<[u8; VERSION_LEN]>().to_vec());
                let mut options = PutOptions { new_version: version.clone(), sync: sync_of(durability), ..PutOptions::default() };
                match cond {
                    Cond::Any => options.force = true,
                    Cond::Absent => {}
                    Cond::Version(v) => options.db_version = v,
                }
                d.client().await?.put(key, value, options).await?;
                Ok(version)
            }
        }
    }

    /// Deletes `key` if `cond` holds; `false` when there was nothing to delete.
    pub async fn delete(&self, key: &[u8], cond: Cond, durability: Durability) -> Result<bool, KvError> {
        match self {
            Kv::Cluster(s) => {
                let c = match cond {
                    Cond::Any | Cond::Absent => Condition::None,
                    Cond::Version(v) => Condition::Version(v),
                };
                // Nothing there is `Ok(false)` for an unconditional delete (the cluster says so)
                // and a mismatch for one on a version: that version is gone.
                Ok(s.delete(key, c).await?)
            }
            Kv::Drive(d) => {
                let mut options = DeleteOptions { sync: sync_of(durability), ..DeleteOptions::default() };
                let on_version = matches!(cond, Cond::Version(_));
                match cond {
                    Cond::Any | Cond::Absent => options.force = true,
                    Cond::Version(v) => options.db_version = v,
                }
                // The client answers a delete that found nothing with `false`; on a version, that
                // version is gone.
                match d.client().await?.delete(key, options).await {
                    Ok(false) if on_version => Err(KvError::Mismatch),
                    Ok(found) => Ok(found),
                    Err(e) if e.is_not_found() && on_version => Err(KvError::Mismatch),
                    Err(e) if e.is_not_found() => Ok(false),
                    Err(e) => Err(e.into()),
                }
            }
        }
    }

    /// Settles `key` from every replica (a cluster's `Store::make_chosen`): a write of it that
    /// stands on some replicas only, its outcome unknown to its writer, is chosen now or can
    /// never be. One drive has nothing to settle. Fails while a replica does not answer.
    pub async fn settle(&self, key: &[u8]) -> Result<(), KvError> {
        match self {
            Kv::Cluster(s) => Ok(s.make_chosen(key).await?),
            Kv::Drive(_) => Ok(()),
        }
    }

    /// The group of replicas `key` lives on (a cluster's partition): keys of one group are
    /// settled, or not, by the same drives. `None` for one drive.
    pub fn group_of(&self, key: &[u8]) -> Option<u32> {
        match self {
            Kv::Cluster(s) => Some(s.map().partition_of(key)),
            Kv::Drive(_) => None,
        }
    }

    /// Keys in `[start, end]`, in order, at most `max`.
    pub async fn range(&self, start: &[u8], end: &[u8], max: usize) -> Result<Vec<Bytes>, KvError> {
        if start > end || max == 0 {
            return Ok(Vec::new());
        }
        match self {
            Kv::Cluster(s) => Ok(s.range(start, Some(end), max).await?),
            Kv::Drive(d) => {
                let client = d.client().await?;
                let mut keys: Vec<Bytes> = Vec::new();
                let mut from = Bytes::copy_from_slice(start);
                let mut inclusive = true;
                while keys.len() < max {
                    let page = (max - keys.len()).min(DRIVE_RANGE_PAGE);
                    let q = RangeQuery {
                        start: from.clone(),
                        start_inclusive: inclusive,
                        end: Some(Bytes::copy_from_slice(end)),
                        end_inclusive: true,
                        max_returned: page as i32,
                        reverse: false,
                    };
                    let got = client.get_key_range(q).await?;
                    let full = got.len() == page;
                    if let Some(last) = got.last() {
                        from = last.clone();
                        inclusive = false;
                    }
                    keys.extend(got);
                    if !full {
                        break;
                    }
                }
                Ok(keys)
            }
        }
    }

    /// Makes every earlier `Lazy` write durable.
    pub async fn flush(&self) -> Result<(), KvError> {
        match self {
            // The cluster client writes through on every replica.
            Kv::Cluster(_) => Ok(()),
            Kv::Drive(d) => Ok(d.client().await?.flush_all_data().await?),
        }
    }

    /// Largest key the store takes.
    pub fn max_key(&self) -> usize {
        match self {
            Kv::Cluster(_) => spindle_cluster::store::MAX_KEY_LEN,
            Kv::Drive(_) => spindle_proto::limits::MAX_KEY_SIZE as usize,
        }
    }

    /// The store's erasure-coded pools (a drive alone has none).
    pub fn pools(&self) -> Vec<String> {
        match self {
            Kv::Cluster(s) => s.map().pools.keys().cloned().collect(),
            Kv::Drive(_) => Vec::new(),
        }
    }

    /// The store's remote pools (external S3 buckets) as its map defines them.
    pub fn remote_pools(&self) -> std::collections::BTreeMap<String, spindle_cluster::remote::RemotePool> {
        match self {
            Kv::Cluster(s) => s.map().remotes.clone(),
            Kv::Drive(_) => Default::default(),
        }
    }

    /// Whether the store's map has a remote pool `name` (no copy of the map's pools).
    pub fn has_remote_pool(&self, name: &str) -> bool {
        match self {
            Kv::Cluster(s) => s.map().remotes.contains_key(name),
            Kv::Drive(_) => false,
        }
    }

    fn cluster(&self, pool: &str) -> Result<&Store, KvError> {
        match self {
            Kv::Cluster(s) => Ok(s),
            Kv::Drive(_) => Err(KvError::Failed(Fault::Cluster(spindle_cluster::SettingError::UnknownPool(pool.to_string()).into()))),
        }
    }

    /// The largest stripe of `pool`.
    pub fn stripe_capacity(&self, pool: &str) -> Result<usize, KvError> {
        Ok(self.cluster(pool)?.stripe_capacity(pool)?)
    }

    /// The first of up to `tries` names `draw` makes that would land on drives of `pool`
    /// that are all up, if any.
    pub fn ready_name<T: AsRef<[u8]>>(&self, pool: &str, tries: usize, draw: impl FnMut() -> T) -> Option<T> {
        self.cluster(pool).ok()?.ready_name(pool, tries, draw)
    }

    /// Writes stripe `index` of `object` to `pool`, durable on every shard's drive.
    pub async fn put_stripe(&self, pool: &str, object: &[u8], index: u32, stripe: Bytes) -> Result<(), KvError> {
        Ok(self.cluster(pool)?.put_stripe(pool, object, index, stripe).await?)
    }

    /// Stripe `index` of `object` in `pool`, `len` bytes long.
    pub async fn get_stripe(&self, pool: &str, object: &[u8], index: u32, len: usize) -> Result<Stripe, KvError> {
        Ok(self.cluster(pool)?.get_stripe(pool, object, index, len).await?)
    }

    /// Deletes every stripe of `object` in `pool`; returns the shards deleted.
    pub async fn delete_stripes(&self, pool: &str, object: &[u8]) -> Result<u64, KvError> {
        Ok(self.cluster(pool)?.delete_stripes(pool, object).await?)
    }
}

/// Walks the keys of `[start, end]` a page at a time, so a scan of many records never holds
/// more than one page.
pub struct Pages {
    from: Bytes,
    end: Bytes,
    page: usize,
    done: bool,
}

impl Pages {
    pub fn new((start, end): (Bytes, Bytes), page: usize) -> Pages {
        Pages { from: start, end, page, done: false }
    }

    /// The next page of keys; `None` once the range is walked.
    pub async fn next(&mut self, kv: &Kv) -> Result<Option<Vec<Bytes>>, KvError> {
        if self.done {
            return Ok(None);
        }
        let keys = kv.range(&self.from, &self.end, self.page).await?;
        match keys.last() {
            Some(last) if keys.len() == self.page => self.from = crate::layout::after(last),
            _ => self.done = true,
        }
        Ok((!keys.is_empty()).then_some(keys))
    }
}

fn sync_of(d: Durability) -> Synchronization {
    match d {
        Durability::Lazy => Synchronization::Writeback,
        Durability::Through => Synchronization::Writethrough,
    }
}
