//! The cluster client: one key-value store over the drives of a cluster map.
//!
//! Each key's replicas form an atomic register in the manner of Attiya, Bar-Noy and Dolev
//! (ABD): a write reads the tags of a read quorum, picks a newer tag and stores it on every
//! replica ("store if newer"), acknowledged once a write quorum holds it; a read asks a read
//! quorum, and if fewer than a write quorum hold the newest tag it writes that entry back before
//! answering. With W + R > N every read meets every acknowledged write, and a read never
//! returns something older than an earlier read did: per-key linearizability with any
//! minority of a partition's replicas down. Deletes are writes of tombstones.
//!
//! The client caches the map and talks to drives at the map's epoch (their cluster version):
//! a drive of a newer view refuses with VERSION_FAILURE, and the client reloads the map from
//! etcd and retries. No per-key ownership check anywhere.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use spindle_client::{Client, ClientConfig, ClientError, StatusCode};
use tokio::sync::mpsc;

use crate::control::{Control, HealthState};
use crate::map::{self, ClusterMap};
use crate::replica::{self, Held, Stored};
use crate::tag::{Kind, Tag};
use crate::ClusterError;

pub use crate::map::{MAX_KEY_LEN, MAX_VALUE_LEN};

/// Attempts of one operation: each retry follows a map change or a value overwritten under a read.
const MAX_ATTEMPTS: usize = 8;

/// A value and the version the cluster gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versioned {
    pub value: Bytes,
    pub version: Bytes,
}

/// What a put requires of the key's current version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Condition {
    None,
    /// The key must hold exactly this version.
    Version(Bytes),
    /// The key must not exist.
    Absent,
}

#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// Identity and key for the drives, and the per-request timeout.
    pub client: ClientConfig,
    pub connect_timeout: Duration,
}

impl Default for StoreConfig {
    fn default() -> Self {
        let client = ClientConfig { timeout: Duration::from_secs(5), ..ClientConfig::default() };
        StoreConfig { client, connect_timeout: Duration::from_secs(2) }
    }
}

struct Inner {
    /// Replaced by a connection through another etcd member when the one in use fails.
    control: RwLock<Control>,
    config: StoreConfig,
    map: RwLock<Arc<ClusterMap>>,
    /// Drives the coordinator has marked down: tried last.
    down: RwLock<Vec<String>>,
    connections: Mutex<HashMap<String, Client>>,
    /// High half of this client's writer ids: random, so that two clients do not share one.
    writer: u32,
    /// Low half: one per write, so that two concurrent writes of this client (which may pick
    /// the same counter) still get different tags.
    writes: std::sync::atomic::AtomicU32,
}

/// A cluster client. Cheap to clone.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

/// One replica's answer to a read.
struct ReadAnswer {
    drive: String,
    held: Held,
    value: Option<Bytes>,
}

impl Store {
    pub async fn open(control: Control, config: StoreConfig) -> Result<Store, ClusterError> {
        let (map, down) = load_view(&control).await?;
        Ok(Store {
            inner: Arc::new(Inner {
                control: RwLock::new(control),
                config,
                map: RwLock::new(Arc::new(map)),
                down: RwLock::new(down),
                connections: Mutex::new(HashMap::new()),
                writer: rand::random(),
                writes: std::sync::atomic::AtomicU32::new(0),
            }),
        })
    }

    pub fn map(&self) -> Arc<ClusterMap> {
        self.inner.map.read().clone()
    }

    pub fn control(&self) -> Control {
        self.inner.control.read().clone()
    }

    /// Reloads the map and the drives' health from etcd (through another member if the one
    /// in use fails).
    pub async fn refresh(&self) -> Result<(), ClusterError> {
        let control = self.control();
        let (map, down) = match load_view(&control).await {
            Ok(v) => v,
            Err(_) => {
                let control = control.reconnect().await?;
                *self.inner.control.write() = control.clone();
                load_view(&control).await?
            }
        };
        *self.inner.down.write() = down;
        let epoch = map.epoch as i64;
        let changed = self.inner.map.read().epoch != map.epoch;
        *self.inner.map.write() = Arc::new(map);
        if changed {
            for c in self.inner.connections.lock().values() {
                c.set_request_cluster_version(epoch);
            }
        }
        Ok(())
    }

    async fn connection(&self, map: &ClusterMap, drive: &str) -> Result<Client, ClientError> {
        if let Some(c) = self.inner.connections.lock().get(drive) {
            if !c.is_closed() {
                return Ok(c.clone());
            }
        }
        let member = map.members.get(drive).ok_or_else(|| ClientError::Protocol(format!("drive {drive} is not in the map")))?;
        let config = ClientConfig { cluster_version: map.epoch as i64, ..self.inner.config.client.clone() };
        let connect = Client::connect(member.addr.as_str(), config);
        let client = tokio::time::timeout(self.inner.config.connect_timeout, connect)
            .await
            .map_err(|_| ClientError::Timeout(self.inner.config.connect_timeout))??;
        self.inner.connections.lock().insert(drive.to_string(), client.clone());
        Ok(client)
    }

    /// A partition's replicas, drives not marked down first (so that quorums form from them).
    fn replicas(&self, map: &ClusterMap, partition: u32) -> Vec<String> {
        let down = self.inner.down.read();
        let mut r = map.replicas_of(partition).to_vec();
        r.sort_by_key(|d| down.contains(d));
        r
    }

    fn check_key(key: &[u8]) -> Result<(), ClusterError> {
        if key.len() > MAX_KEY_LEN {
            return Err(ClusterError::KeyTooLong { len: key.len(), max: MAX_KEY_LEN });
        }
        Ok(())
    }

    fn check_value(value: &[u8]) -> Result<(), ClusterError> {
        if value.len() > MAX_VALUE_LEN {
            return Err(ClusterError::ValueTooLarge { len: value.len(), max: MAX_VALUE_LEN });
        }
        Ok(())
    }

    /// Runs `op` against the current map, reloading the map and running it again when a drive
    /// says the view changed.
    async fn with_map<T, F, Fut>(&self, op: F) -> Result<T, ClusterError>
    where
        F: Fn(Arc<ClusterMap>) -> Fut,
        Fut: std::future::Future<Output = Result<T, OpError>>,
    {
        for _ in 0..MAX_ATTEMPTS {
            match op(self.map()).await {
                Ok(v) => return Ok(v),
                Err(OpError::StaleView) => self.refresh().await?,
                Err(OpError::Changed) => {}
                Err(OpError::Failed(e)) => return Err(e),
            }
        }
        Err(ClusterError::GaveUp(MAX_ATTEMPTS))
    }

    pub async fn get(&self, key: &[u8]) -> Result<Option<Versioned>, ClusterError> {
        Self::check_key(key)?;
        self.with_map(|map| async move { self.read(&map, key, true).await }).await
    }

    /// Stores `value`; returns its new version.
    pub async fn put(&self, key: &[u8], value: Bytes, condition: Condition) -> Result<Bytes, ClusterError> {
        Self::check_key(key)?;
        Self::check_value(&value)?;
        let (v, c) = (&value, &condition);
        self.with_map(|map| async move { self.write(&map, key, v.clone(), Kind::Value, c).await }).await
    }

    /// Deletes `key`. `false` when it did not exist (and then nothing was written).
    pub async fn delete(&self, key: &[u8], condition: Condition) -> Result<bool, ClusterError> {
        Self::check_key(key)?;
        let c = &condition;
        let result = self.with_map(|map| async move { self.write(&map, key, Bytes::new(), Kind::Tombstone, c).await }).await;
        match result {
            Ok(_) => Ok(true),
            Err(ClusterError::VersionMismatch { current: None }) if *c == Condition::None => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Asks every replica at once; returns when `needed` answered (or could not).
    async fn ask<T, F, Fut>(&self, map: &Arc<ClusterMap>, partition: u32, needed: usize, ask: F) -> Result<Vec<(String, T)>, OpError>
    where
        T: Send + 'static,
        F: Fn(String, Client) -> Fut + Clone + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<T, ClientError>> + Send + 'static,
    {
        let replicas = self.replicas(map, partition);
        let (tx, mut rx) = mpsc::channel(replicas.len().max(1));
        for drive in &replicas {
            let tx = tx.clone();
            let drive = drive.clone();
            let (store, map) = (self.clone(), map.clone());
            let ask = ask.clone();
            tokio::spawn(async move {
                let answer = match store.connection(&map, &drive).await {
                    Ok(c) => ask(drive.clone(), c).await,
                    Err(e) => Err(e),
                };
                let _ = tx.send((drive, answer)).await;
            });
        }
        drop(tx);
        let mut got = Vec::new();
        let mut last_error = String::from("no replicas");
        let mut stale = false;
        while got.len() < needed {
            let Some((drive, answer)) = rx.recv().await else { break };
            match answer {
                Ok(v) => got.push((drive, v)),
                Err(e) => {
                    if e.status() == Some(StatusCode::VersionFailure) {
                        stale = true;
                    }
                    last_error = format!("{drive}: {e}");
                }
            }
        }
        if got.len() >= needed {
            return Ok(got);
        }
        if stale {
            return Err(OpError::StaleView);
        }
        Err(OpError::Failed(ClusterError::NoQuorum { partition, needed, reached: got.len(), last_error }))
    }

    /// The ABD read: newest entry among a read quorum, written back to a write quorum if fewer
    /// hold it. `None` for an absent or deleted key.
    async fn read(&self, map: &Arc<ClusterMap>, key: &[u8], with_value: bool) -> Result<Option<Versioned>, OpError> {
        let partition = map.partition_of(key);
        let dkey = map::drive_key(partition, key);
        let first = self.replicas(map, partition).into_iter().next();
        let k = dkey.clone();
        let answers = self
            .ask(map, partition, map.read_quorum(), move |drive, c| {
                let k = k.clone();
                // One replica sends the value; the others only their versions.
                let full = with_value && Some(&drive) == first.as_ref();
                async move {
                    if full {
                        Ok(match c.get(&k).await? {
                            None => ReadAnswer { drive, held: Held::Absent, value: None },
                            Some(e) => ReadAnswer {
                                drive,
                                held: Held::Entry { tag: Tag::decode(&e.metadata.version), version: e.metadata.version },
                                value: Some(e.value),
                            },
                        })
                    } else {
                        Ok(ReadAnswer { drive, held: replica::held(&c, &k).await?, value: None })
                    }
                }
            })
            .await?;
        let answers: Vec<ReadAnswer> = answers.into_iter().map(|(_, a)| a).collect();
        let newest = answers.iter().filter_map(|a| a.held.tag()).max();
        let Some(newest) = newest else {
            // Nothing tagged in a read quorum: no acknowledged write (entries without a tag
            // were not written through the cluster and are not its data).
            return Ok(None);
        };
        let value = answers.iter().find(|a| a.held.tag() == Some(newest)).and_then(|a| a.value.clone());
        let known: HashMap<String, Held> = answers.into_iter().map(|a| (a.drive, a.held)).collect();
        let value = self.settle(map, partition, &dkey, newest, value, with_value, known).await?;
        if newest.is_tombstone() {
            return Ok(None);
        }
        Ok(Some(Versioned { value: value.unwrap_or_default(), version: newest.encode() }))
    }

    /// What makes a read's answer stand: unless a write quorum already holds `newest`, it is
    /// written back to one first (ABD's second phase), so no later read can return anything
    /// older. Returns `newest`'s value (`value` if the read brought it, else fetched from a
    /// holder) when it was written back or `with_value` asks for it.
    #[allow(clippy::too_many_arguments, reason = "one read's state, passed once from two callers")]
    async fn settle(
        &self,
        map: &Arc<ClusterMap>,
        partition: u32,
        dkey: &Bytes,
        newest: Tag,
        value: Option<Bytes>,
        with_value: bool,
        known: HashMap<String, Held>,
    ) -> Result<Option<Bytes>, OpError> {
        let holders: Vec<&String> = known.iter().filter(|(_, h)| h.tag() == Some(newest)).map(|(d, _)| d).collect();
        let write_back = holders.len() < usize::from(map.write_quorum);
        let mut value = value;
        if value.is_none() && (with_value || write_back) && !newest.is_tombstone() {
            value = Some(self.fetch(map, holders[0], dkey, newest).await?);
        }
        if write_back {
            self.store(map, partition, dkey, value.clone().unwrap_or_default(), newest, known).await?;
        }
        Ok(value)
    }

    /// The value of `tag` from `drive` (which answered that it holds it).
    async fn fetch(&self, map: &Arc<ClusterMap>, drive: &str, dkey: &Bytes, tag: Tag) -> Result<Bytes, OpError> {
        let c = self.connection(map, drive).await.map_err(|e| OpError::from_client(drive, e))?;
        match c.get(dkey).await.map_err(|e| OpError::from_client(drive, e))? {
            Some(e) if Tag::decode(&e.metadata.version) == Some(tag) => Ok(e.value),
            // Overwritten since: a newer write is under way; reading again finds it.
            _ => Err(OpError::Changed),
        }
    }

    /// The ABD write: read quorum's newest tag, the condition checked against it, a newer tag
    /// stored on every replica, acknowledged by a write quorum.
    async fn write(&self, map: &Arc<ClusterMap>, key: &[u8], value: Bytes, kind: Kind, condition: &Condition) -> Result<Bytes, OpError> {
        let partition = map.partition_of(key);
        let dkey = map::drive_key(partition, key);
        let k = dkey.clone();
        let answers = self
            .ask(map, partition, map.read_quorum(), move |_, c| {
                let k = k.clone();
                async move { replica::held(&c, &k).await }
            })
            .await?;
        let newest = answers.iter().filter_map(|(_, h)| h.tag()).max();
        let live = newest.filter(|t| !t.is_tombstone());
        let refused = match condition {
            Condition::None => kind == Kind::Tombstone && live.is_none(),
            Condition::Absent => live.is_some(),
            Condition::Version(v) => live.map(|t| t.encode()).as_ref() != Some(v),
        };
        let known: HashMap<String, Held> = answers.into_iter().collect();
        if refused {
            // The refusal reports what the quorum read, so it must stand as a read does.
            if let Some(n) = newest {
                self.settle(map, partition, &dkey, n, None, false, known).await?;
            }
            return Err(OpError::Failed(ClusterError::VersionMismatch { current: live.map(|t| t.encode()) }));
        }
        let seq = self.inner.writes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let writer = (u64::from(self.inner.writer) << 32) | u64::from(seq);
        let tag = Tag::next(newest.as_ref(), map.epoch, writer, kind);
        self.store(map, partition, &dkey, value, tag, known).await?;
        Ok(tag.encode())
    }

    /// Stores a tagged entry on every replica; returns once a write quorum holds it. Replicas
    /// that answer later go on in the background.
    async fn store(&self, map: &Arc<ClusterMap>, partition: u32, dkey: &Bytes, value: Bytes, tag: Tag, known: HashMap<String, Held>) -> Result<(), OpError> {
        let known = Arc::new(known);
        let k = dkey.clone();
        self.ask(map, partition, usize::from(map.write_quorum), move |drive, c| {
            let (k, value, known) = (k.clone(), value.clone(), known.clone());
            async move { replica::store_if_newer(&c, &k, value, tag, known.get(&drive).cloned()).await }
        })
        .await
        .map(|_: Vec<(String, Stored)>| ())
    }

    /// Live keys in `[start, end]` (`end`: to the last key), in key order, at most `max`:
    /// every partition's range asked of a read quorum and merged, each key checked as a read
    /// would (tombstones and unacknowledged leftovers dropped).
    pub async fn range(&self, start: &[u8], end: Option<&[u8]>, max: usize) -> Result<Vec<Bytes>, ClusterError> {
        Self::check_key(start)?;
        if let Some(end) = end {
            Self::check_key(end)?;
        }
        self.with_map(|map| async move { self.range_in(&map, start, end, max).await }).await
    }

    async fn range_in(&self, map: &Arc<ClusterMap>, start: &[u8], end: Option<&[u8]>, max: usize) -> Result<Vec<Bytes>, OpError> {
        // Per partition: the keys seen and still to check, and where the next page starts.
        struct Cursor {
            pending: VecDeque<Bytes>,
            next: Option<Bytes>,
        }
        let mut cursors: BTreeMap<u32, Cursor> =
            (0..map.partitions).map(|p| (p, Cursor { pending: Default::default(), next: Some(Bytes::copy_from_slice(start)) })).collect();
        let mut out = Vec::new();
        let mut first_page = true;
        while out.len() < max {
            // Refill every partition that has run dry but has more.
            for (&p, cursor) in &mut cursors {
                if cursor.pending.is_empty() {
                    if let Some(from) = cursor.next.take() {
                        let (keys, more) = self.range_page(map, p, &from, !first_page, end).await?;
                        cursor.next = more;
                        cursor.pending.extend(keys);
                    }
                }
            }
            first_page = false;
            // The smallest pending key across partitions is next in order.
            let Some((&p, _)) = cursors.iter().filter(|(_, c)| !c.pending.is_empty()).min_by(|a, b| a.1.pending[0].cmp(&b.1.pending[0]))
            else {
                break;
            };
            let Some(key) = cursors.get_mut(&p).and_then(|c| c.pending.pop_front()) else { break };
            if self.read(map, &key, false).await?.is_some() {
                out.push(key);
            }
        }
        Ok(out)
    }

    /// One page of a partition's user keys from `from` on: the union of a read quorum's
    /// answers, and where the next page starts if any replica had more.
    async fn range_page(&self, map: &Arc<ClusterMap>, partition: u32, from: &[u8], after: bool, end: Option<&[u8]>) -> Result<(Vec<Bytes>, Option<Bytes>), OpError> {
        let query = map::page_query(partition, from, after, end);
        let answers = self
            .ask(map, partition, map.read_quorum(), move |_, c| {
                let q = query.clone();
                async move { c.get_key_range(q).await }
            })
            .await?;
        Ok(map::page_union(partition, answers.into_iter().map(|(_, keys)| keys).collect()))
    }
}

/// The map and the drives the coordinator has marked down, from etcd.
async fn load_view(control: &Control) -> Result<(ClusterMap, Vec<String>), ClusterError> {
    let (map, _) = control.load_map().await?;
    let health = control.health().await?;
    let down = health.into_iter().filter(|(_, h)| h.state == HealthState::Down).map(|(id, _)| id).collect();
    Ok((map, down))
}

/// Why one attempt of an operation failed.
enum OpError {
    /// An entry was overwritten between a replica's answer and the fetch of its value: the
    /// read starts again (and finds the newer write).
    Changed,
    /// A drive is at another epoch: reload the map and try again.
    StaleView,
    Failed(ClusterError),
}

impl OpError {
    fn from_client(drive: &str, e: ClientError) -> OpError {
        if e.status() == Some(StatusCode::VersionFailure) {
            OpError::StaleView
        } else {
            OpError::Failed(ClusterError::Drive { drive: drive.to_string(), source: e })
        }
    }
}
