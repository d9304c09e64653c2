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
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use spindle_client::{Client, ClientConfig, ClientError, StatusCode};

use crate::batch::{self, BatchOp, MAX_BATCH_OPS};
pub use crate::condition::Condition;
use crate::control::{Control, HealthState};
use crate::map::{self, ClusterMap};
use crate::replica::{self, BatchEntry, Held, Stored};
use crate::tag::{Kind, Tag};
use crate::together::Together;
use crate::ClusterError;

pub use crate::map::{MAX_KEY_LEN, MAX_VALUE_LEN};

/// Attempts of one operation: each retry follows a map change or a value overwritten under a read.
const MAX_ATTEMPTS: usize = 8;
/// Longest a client waits for drives to be fenced to the epoch of the map it read.
const STALE_VIEW_WAIT: Duration = Duration::from_secs(10);
/// Default of `StoreConfig::hedge_after`: loopback answers come in well under a millisecond,
/// a loaded drive's p99 in tens of milliseconds.
pub const HEDGE_AFTER: Duration = Duration::from_millis(50);
/// How long a replica that failed, or was hedged around, is asked last.
const SUSPECT_FOR: Duration = Duration::from_secs(1);
/// Versions a client remembers for single-replica partitions (`Inner::versions`, about 40
/// bytes each); the memory is cleared when full.
const MAX_REMEMBERED_VERSIONS: usize = 65_536;
/// Seed of the hash the remembered versions are kept by.
const VERSIONS_SEED: u64 = 0x5645_5253_494f_4e53;
/// The score of the guess that a key this client has never seen is new (`Inner::fresh`):
/// at most `FRESH_MAX`, each right guess +1, each wrong one −4; guessed at `FRESH_TRY` and
/// above, and on every `FRESH_PROBE`-th unseen key whatever the score, so that a workload
/// turning to new keys is noticed.
const FRESH_MAX: u32 = 32;
const FRESH_TRY: u32 = 8;
const FRESH_PROBE: u32 = 16;
/// A value and the version the cluster gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versioned {
    pub value: Bytes,
    pub version: Bytes,
}

#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// Identity and key for the drives, and the per-request timeout.
    pub client: ClientConfig,
    pub connect_timeout: Duration,
    /// A quorum read that has not heard from every replica it asked within this long asks one
    /// more: a hung drive (a partition drops its packets) costs a read this, not the request
    /// timeout.
    pub hedge_after: Duration,
}

impl Default for StoreConfig {
    fn default() -> Self {
        let client = ClientConfig { timeout: Duration::from_secs(5), ..ClientConfig::default() };
        StoreConfig { client, connect_timeout: Duration::from_secs(2), hedge_after: HEDGE_AFTER }
    }
}

struct Inner {
    /// Replaced by a connection through another etcd member when the one in use fails.
    control: RwLock<Control>,
    config: StoreConfig,
    map: RwLock<Arc<ClusterMap>>,
    /// Drives the coordinator has marked down: tried last.
    down: RwLock<Vec<String>>,
    /// Drives that failed or were slow to answer this client lately, until when: tried after
    /// the others (but before those marked down).
    suspects: Mutex<HashMap<String, Instant>>,
    /// Each drive's connections, by `Lane`.
    connections: Mutex<HashMap<String, [Option<Client>; 2]>>,
    /// High half of this client's writer ids: random, so that two clients do not share one.
    writer: u32,
    /// Low half: one per write, so that two concurrent writes of this client (which may pick
    /// the same counter) still get different tags.
    writes: std::sync::atomic::AtomicU32,
    /// The tag this client last wrote or read for a drive key of a single-replica partition,
    /// by the key's hash (a 4 KiB key costs no more than a short one; two keys sharing a hash
    /// only cost a refused try): what an unconditional put expects the replica to hold, so
    /// that it stores in one round trip (`write_single`).
    versions: Mutex<HashMap<u64, Tag>>,
    /// How well "a key never seen is new" has been guessing lately.
    fresh: std::sync::atomic::AtomicU32,
    unseen: std::sync::atomic::AtomicU32,
    counts: WriteCounts,
}

/// How this client's unconditional puts to single-replica partitions went
/// (`Store::write_counts`).
#[derive(Debug, Default)]
pub struct WriteCounts {
    /// Stored in one round trip, as expected.
    pub one_round_trip: std::sync::atomic::AtomicU64,
    /// Refused (the replica held something else, nothing was written), then read and
    /// stored.
    pub retried: std::sync::atomic::AtomicU64,
}

/// Which of its two connections to a drive a request takes. A drive answers a read only once
/// the writes sent before it on the same connection are applied (Kinetic's order within a
/// connection), and reads nothing more from that connection meanwhile: a version read queued
/// behind other operations' WRITETHROUGH puts would wait for them, and the puts behind it
/// would miss the drive's group commit. The cluster needs no order between its reads and
/// writes in flight (a write counts once answered), so they go on separate connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Lane {
    Reads,
    Writes,
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
                suspects: Mutex::new(HashMap::new()),
                connections: Mutex::new(HashMap::new()),
                writer: rand::random(),
                writes: std::sync::atomic::AtomicU32::new(0),
                versions: Mutex::new(HashMap::new()),
                fresh: std::sync::atomic::AtomicU32::new(FRESH_MAX / 2),
                unseen: std::sync::atomic::AtomicU32::new(0),
                counts: WriteCounts::default(),
            }),
        })
    }

    pub fn map(&self) -> Arc<ClusterMap> {
        self.inner.map.read().clone()
    }

    pub fn write_counts(&self) -> &WriteCounts {
        &self.inner.counts
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
        // Open connections stay: each request carries the epoch of the map it was decided
        // with (`connection`).
        *self.inner.map.write() = Arc::new(map);
        Ok(())
    }

    /// The connection to `drive`, its requests carrying `map`'s epoch: an operation decided
    /// under this map (its replicas, whether its partition moves) is refused by a drive
    /// fenced to a later one, never taken under a view it did not decide with.
    async fn connection(&self, map: &ClusterMap, drive: &str, lane: Lane) -> Result<Client, ClientError> {
        if let Some(Some(c)) = self.inner.connections.lock().get(drive).map(|lanes| &lanes[lane as usize]) {
            if !c.is_closed() {
                return Ok(c.at_cluster_version(map.epoch as i64));
            }
        }
        let member = map.members.get(drive).ok_or_else(|| ClientError::Protocol(format!("drive {drive} is not in the map")))?;
        let config = ClientConfig { cluster_version: map.epoch as i64, ..self.inner.config.client.clone() };
        let connect = Client::connect(member.addr.as_str(), config);
        let client = tokio::time::timeout(self.inner.config.connect_timeout, connect)
            .await
            .map_err(|_| ClientError::Timeout(self.inner.config.connect_timeout))??;
        self.inner.connections.lock().entry(drive.to_string()).or_default()[lane as usize] = Some(client.clone());
        Ok(client.at_cluster_version(map.epoch as i64))
    }

    /// A partition's replicas in the order to ask them: drives that answer well first, then
    /// recent suspects, then those marked down (so that quorums form from the healthy ones).
    ///
    /// While the partition moves, replicas that stay come before those that go: a read whose
    /// quorum holds the newest write on drives of both sets needs no write-back (`settle`).
    fn replicas(&self, map: &ClusterMap, partition: u32) -> Vec<String> {
        let mut r = map.replicas_of(partition).to_vec();
        if let Some(new) = map.moving_to(partition) {
            r.sort_by_key(|d| !new.contains(d));
        }
        self.in_order(r)
    }

    /// `drives` in the order to ask them, as for `replicas` (a stable sort: an order given
    /// among equally healthy drives is kept).
    fn in_order(&self, mut r: Vec<String>) -> Vec<String> {
        let down = self.inner.down.read();
        let mut suspects = self.inner.suspects.lock();
        if !suspects.is_empty() {
            let now = Instant::now();
            suspects.retain(|_, until| *until > now);
        }
        r.sort_by_key(|d| (down.contains(d), suspects.contains_key(d)));
        r
    }

    fn suspect(&self, drive: &str) {
        self.inner.suspects.lock().insert(drive.to_string(), Instant::now() + SUSPECT_FOR);
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
        let mut attempts = 0;
        let mut waited = Duration::ZERO;
        while attempts < MAX_ATTEMPTS {
            match op(self.map()).await {
                Ok(v) => return Ok(v),
                Err(OpError::StaleView) => {
                    if self.follow_view(&mut waited).await? {
                        attempts += 1;
                    }
                }
                Err(OpError::Changed) => attempts += 1,
                Err(OpError::Failed(e)) => return Err(e),
            }
        }
        Err(ClusterError::GaveUp(MAX_ATTEMPTS))
    }

    /// After a drive refused this client's epoch: the map again from etcd. `true` if it moved
    /// on (a new view: one more attempt). Otherwise the drive is still behind it (the
    /// coordinator commits a map first and fences the drives a moment later) and the client
    /// waits a little, up to `STALE_VIEW_WAIT` in all, before trying again.
    async fn follow_view(&self, waited: &mut Duration) -> Result<bool, ClusterError> {
        let before = self.map().epoch;
        // Boxed: the etcd calls' state is ten times a whole read's, and inline it would be
        // copied with every get and put future however rarely a view changes.
        Box::pin(self.refresh()).await?;
        if self.map().epoch != before {
            return Ok(true);
        }
        if *waited >= STALE_VIEW_WAIT {
            return Err(ClusterError::Timeout(format!("drives have not reached the map's epoch {before} within {STALE_VIEW_WAIT:?}")));
        }
        let pause = (*waited / 2).clamp(Duration::from_millis(5), Duration::from_millis(100));
        tokio::time::sleep(pause).await;
        *waited += pause;
        Ok(false)
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

    /// Asks a partition's replicas; returns once `needed` answered (or too many could not).
    /// `Ask::Quorum` asks only `needed` of them, in `replicas` order, and one more for each
    /// that fails or while the quorum is slower than `hedge_after`; the answers not needed are
    /// dropped. `Ask::All` asks every replica, and those that have not answered when the
    /// quorum is reached go on in the background. Requests are polled in this task: no task
    /// or channel per replica on the way to a quorum.
    ///
    /// While the partition moves, every request needs `needed` of each set, its replicas and
    /// the drives it moves to (a joint quorum, as in Raft's joint consensus): a write goes to
    /// both sets, and a read asks the drives that stay first, which count for both, then what
    /// each set still lacks. So a read meets every write acknowledged before the move and
    /// during it, and a client still holding the move's map after the flip meets a drive
    /// fenced to the flip's epoch (which refuses it: the client reloads the map) wherever a
    /// write of the new epoch could have been acknowledged.
    async fn ask<T, F, Fut>(&self, map: &Arc<ClusterMap>, partition: u32, needed: usize, mode: Ask, ask: F) -> Result<Vec<(String, T)>, OpError>
    where
        T: Send + 'static,
        F: Fn(String, Client) -> Fut + Clone + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<T, ClientError>> + Send + 'static,
    {
        let lane = if mode == Ask::Quorum { Lane::Reads } else { Lane::Writes };
        let start = |drive: String| {
            let (store, map, ask) = (self.clone(), map.clone(), ask.clone());
            async move {
                let answer = match store.connection(&map, &drive, lane).await {
                    Ok(c) => ask(drive.clone(), c).await,
                    Err(e) => Err(e),
                };
                (drive, answer)
            }
        };
        let joint = map.moving_to(partition);
        let order = match (joint, mode) {
            (None, _) => self.replicas(map, partition),
            // A read while the partition moves: the replicas (those that stay first), then the
            // drives it moves to.
            (Some(new), Ask::Quorum) => {
                let mut r = self.replicas(map, partition);
                let joining: Vec<String> = new.iter().filter(|d| !r.contains(d)).cloned().collect();
                r.extend(self.in_order(joining));
                r
            }
            (Some(_), Ask::All) => self.in_order(map.writers_of(partition)),
        };
        // Whether the answers so far make the quorum: `needed` of the replicas, and while the
        // partition moves, of the drives it moves to as well.
        let moving = joint.is_some();
        let reached = |drives: &[String]| quorum_met(map, partition, needed, moving, drives.iter());
        let answered = |got: &[(String, T)]| quorum_met(map, partition, needed, moving, got.iter().map(|(d, _)| d));
        // Asked first: every drive for a write; for a read, the first drives in order that
        // make the quorum (while the partition moves, each one that counts toward a set still
        // short of it).
        let first: Vec<String> = match mode {
            Ask::All => order.clone(),
            Ask::Quorum => {
                let mut picked: Vec<String> = Vec::new();
                for d in &order {
                    if reached(&picked) {
                        break;
                    }
                    let short = |set: &[String]| set.contains(d) && picked.iter().filter(|p| set.contains(p)).count() < needed.min(set.len());
                    if joint.is_none() || short(map.replicas_of(partition)) || joint.is_some_and(short) {
                        picked.push(d.clone());
                    }
                }
                picked
            }
        };
        let mut waiting = order.into_iter().filter(|d| !first.contains(d)).collect::<Vec<_>>().into_iter();
        let mut running = Together::new();
        // Asked and not answered yet: the slow ones when the hedge fires.
        let mut in_flight = Vec::new();
        for drive in first {
            in_flight.push(drive.clone());
            running.push(start(drive));
        }
        let mut got = Vec::new();
        let mut last_error: Option<String> = None;
        let mut stale = false;
        let hedge_after = self.inner.config.hedge_after;
        // Only while there is a replica left to ask (a write asks them all at once).
        let mut hedge = (waiting.len() > 0).then(|| Box::pin(tokio::time::sleep(hedge_after)));
        while !answered(&got) {
            if running.is_empty() {
                // Everyone asked has answered and the quorum is still short (a moving
                // partition's sets): ask the next drive.
                match waiting.next() {
                    Some(drive) => {
                        in_flight.push(drive.clone());
                        running.push(start(drive));
                    }
                    None => break,
                }
            }
            let next = match hedge.as_mut().filter(|_| waiting.len() > 0) {
                None => running.next().await,
                Some(timer) => tokio::select! {
                    next = running.next() => next,
                    _ = timer.as_mut() => {
                        // Whoever has not answered yet is slow: ask another replica beside
                        // them, and ask them last for a while.
                        for slow in &in_flight {
                            self.suspect(slow);
                        }
                        if let Some(drive) = waiting.next() {
                            in_flight.push(drive.clone());
                            running.push(start(drive));
                        }
                        timer.as_mut().reset(tokio::time::Instant::now() + hedge_after);
                        continue;
                    }
                },
            };
            let Some((drive, answer)) = next else { break };
            in_flight.retain(|d| *d != drive);
            match answer {
                Ok(v) => got.push((drive, v)),
                Err(e) => {
                    if e.status() == Some(StatusCode::VersionFailure) {
                        stale = true;
                    } else if e.status().is_none() {
                        // Not an answer from the drive (refused, reset, timed out): ask it last
                        // for a while.
                        self.suspect(&drive);
                    }
                    last_error = Some(format!("{drive}: {e}"));
                    if let Some(next) = waiting.next() {
                        in_flight.push(next.clone());
                        running.push(start(next));
                    }
                }
            }
        }
        // Writes still under way on the other replicas finish in the background.
        if mode != Ask::Quorum && !running.is_empty() {
            tokio::spawn(async move { while running.next().await.is_some() {} });
        }
        if answered(&got) {
            return Ok(got);
        }
        if stale {
            return Err(OpError::StaleView);
        }
        let last_error = last_error.unwrap_or_else(|| "no replicas".into());
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
            .ask(map, partition, map.read_quorum(), Ask::Quorum, move |drive, c| {
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
        // What a get read is worth remembering; a range's checks of every key it passes are not.
        if with_value && map.single_writer(partition) {
            self.remember(&dkey, newest);
        }
        if newest.is_tombstone() {
            return Ok(None);
        }
        let value = match value {
            // A batch's entry carries its members before the value.
            Some(entry) if newest.is_batch() => batch::decode_entry(&entry).map(|(_, v)| v).ok_or_else(|| undecodable(&dkey))?,
            Some(v) => v,
            // Not asked for (a range's check of the key).
            None => Bytes::new(),
        };
        Ok(Some(Versioned { value, version: newest.encode() }))
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
        let holders: Vec<String> = known.iter().filter(|(_, h)| h.tag() == Some(newest)).map(|(d, _)| d.clone()).collect();
        // While the partition moves, the newest must be on a write quorum of the drives it
        // moves to as well: else the flip could leave it on too few of them, and a read after
        // it return something older than this one did.
        let write_back = !joint_quorum(map, partition, usize::from(map.write_quorum), holders.iter());
        let mut value = value;
        // A batch's tombstone has a value too: its members, needed to write the batch back.
        if value.is_none() && (with_value || write_back) && (!newest.is_tombstone() || newest.is_batch()) {
            value = Some(self.fetch_any(map, &holders, dkey, newest).await?);
        }
        if write_back && newest.is_batch() {
            let entry = value.clone().unwrap_or_default();
            // From the first holder that answers (one may have died since the read).
            let mut last = None;
            for holder in &holders {
                match self.write_back_batch(map, partition, holder, dkey, newest, &entry, known.clone()).await {
                    Err(e) if unanswered(&e) => {
                        self.suspect(holder);
                        last = Some(e);
                    }
                    done => {
                        done?;
                        last = None;
                        break;
                    }
                }
            }
            if let Some(e) = last {
                return Err(e);
            }
        } else if write_back {
            self.store(map, partition, dkey, value.clone().unwrap_or_default(), newest, Arc::new(known)).await?;
        }
        Ok(value)
    }

    /// Writes the batch whose entry for `dkey` is `entry` (tagged `tag`, read from `holder`)
    /// back to a write quorum, whole: each member's entry of the same write, as `holder` has
    /// it (a replica stores a batch all at once, so it has every member at this write or a
    /// newer one, which leaves that member out), stored atomically on each replica. A member
    /// left out for a newer write is first read as any key is (its newer write settled on a
    /// write quorum, its own batch whole), so that it holds that write or a newer one on a
    /// quorum whatever became of the writer: left out unsettled, a reader of it could still
    /// get the value from before this batch after this read returned the batch.
    #[allow(clippy::too_many_arguments, reason = "one read's state, as settle has it")]
    async fn write_back_batch(
        &self,
        map: &Arc<ClusterMap>,
        partition: u32,
        holder: &str,
        dkey: &Bytes,
        tag: Tag,
        entry: &Bytes,
        known: HashMap<String, Held>,
    ) -> Result<(), OpError> {
        let (members, _) = batch::decode_entry(entry).ok_or_else(|| undecodable(dkey))?;
        let c = self.connection(map, holder, Lane::Writes).await.map_err(|e| OpError::from_client(holder, e))?;
        let mut entries: Vec<BatchEntry> = vec![(dkey.clone(), entry.clone(), tag)];
        let mut replaced = Vec::new();
        for member in members {
            let mkey = map::drive_key(partition, &member);
            if mkey == *dkey {
                continue;
            }
            match c.get(&mkey).await.map_err(|e| OpError::from_client(holder, e))? {
                Some(e) => match Tag::decode(&e.metadata.version) {
                    Some(t) if t.same_write(&tag) => entries.push((mkey, e.value, t)),
                    // Replaced by a newer write since: settled below, then left out.
                    Some(t) if t > tag => replaced.push(member),
                    // The holder no longer has the batch whole (overwritten under the read, or
                    // a copy of one key alone): read again.
                    _ => return Err(OpError::Changed),
                },
                None => return Err(OpError::Changed),
            }
        }
        for member in replaced {
            // Tags only grow along this recursion (each newer than the batch that led to it).
            self.settle_key(map, member).await?;
        }
        // What each replica held is known for `dkey` only: the store reads the rest.
        let known = Arc::new(known);
        let entries = Arc::new(entries);
        self.ask(map, partition, usize::from(map.write_quorum), Ask::All, move |drive, c| {
            let (entries, known) = (entries.clone(), known.clone());
            async move {
                let known = match known.get(&drive) {
                    Some(h) if entries.len() == 1 => Some(vec![h.clone()]),
                    _ => None,
                };
                replica::store_batch_if_newer(&c, &entries, known).await
            }
        })
        .await
        .map(drop)
    }

    /// A read of `key` for what it settles (boxed: reads and batch write-backs recurse).
    fn settle_key<'a>(
        &'a self,
        map: &'a Arc<ClusterMap>,
        key: Bytes,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), OpError>> + Send + 'a>> {
        Box::pin(async move { self.read(map, &key, false).await.map(drop) })
    }

    /// Writes `ops` atomically: readers see all of them or none (batch.rs). Every key must
    /// be in one partition (a key's hash tag, `{...}`, puts related keys together); each
    /// operation's condition is checked against what a read quorum holds. Returns each
    /// operation's new version.
    pub async fn batch(&self, ops: Vec<BatchOp>) -> Result<Vec<Bytes>, ClusterError> {
        if ops.is_empty() || ops.len() > MAX_BATCH_OPS {
            return Err(ClusterError::Invalid(format!("a batch holds 1 to {MAX_BATCH_OPS} operations, not {}", ops.len())));
        }
        let keys: Vec<&Bytes> = ops.iter().map(BatchOp::key).collect();
        for k in &keys {
            Self::check_key(k)?;
        }
        let mut distinct = keys.clone();
        distinct.sort();
        distinct.dedup();
        if distinct.len() != keys.len() {
            return Err(ClusterError::Invalid("a batch names each key once".into()));
        }
        let header = batch::header_len(&keys);
        for op in &ops {
            let len = header + op.value().len();
            if len > MAX_VALUE_LEN {
                return Err(ClusterError::ValueTooLarge { len: op.value().len(), max: MAX_VALUE_LEN.saturating_sub(header) });
            }
        }
        let ops = &ops;
        self.with_map(|map| async move { self.batch_in(&map, ops).await }).await
    }

    async fn batch_in(&self, map: &Arc<ClusterMap>, ops: &[BatchOp]) -> Result<Vec<Bytes>, OpError> {
        let partition = map.partition_of(ops[0].key());
        if let Some(other) = ops.iter().find(|op| map.partition_of(op.key()) != partition) {
            return Err(OpError::Failed(ClusterError::Invalid(format!(
                "a batch's keys must share one partition: {:?} is in {partition}, {:?} in {} (give them one hash tag, {{...}})",
                String::from_utf8_lossy(ops[0].key()),
                String::from_utf8_lossy(other.key()),
                map.partition_of(other.key())
            ))));
        }
        let dkeys: Arc<Vec<Bytes>> = Arc::new(ops.iter().map(|op| map::drive_key(partition, op.key())).collect());
        let k = dkeys.clone();
        let answers = self
            .ask(map, partition, map.read_quorum(), Ask::Quorum, move |_, c| {
                let k = k.clone();
                async move { replica::held_many(&c, &k).await }
            })
            .await?;
        // Each key's newest write in the quorum, and whether the batch's conditions hold on it.
        let newest: Vec<Option<Tag>> = (0..ops.len()).map(|i| answers.iter().filter_map(|(_, h)| h[i].tag()).max()).collect();
        for (i, op) in ops.iter().enumerate() {
            let live = newest[i].filter(|t| !t.is_tombstone());
            if !op.condition().admits(live) {
                // The refusal reports what the quorum read, so it must stand as a read does.
                if let Some(n) = newest[i] {
                    let known = answers.iter().map(|(d, h)| (d.clone(), h[i].clone())).collect();
                    self.settle(map, partition, &dkeys[i], n, None, false, known).await?;
                }
                return Err(OpError::Failed(ClusterError::VersionMismatch { current: live.map(|t| t.encode()) }));
            }
        }
        let tag = Tag::next(newest.iter().flatten().max(), map.epoch, self.writer_id(), Kind::BatchValue);
        let members: Vec<&Bytes> = ops.iter().map(BatchOp::key).collect();
        let entries: Vec<BatchEntry> = ops
            .iter()
            .zip(dkeys.iter())
            .map(|(op, dkey)| {
                let kind = if op.is_delete() { Kind::BatchTombstone } else { Kind::BatchValue };
                (dkey.clone(), batch::encode_entry(&members, op.value()), tag.with_kind(kind))
            })
            .collect();
        let versions = entries.iter().map(|(_, _, t)| t.encode()).collect();
        let known: Arc<HashMap<String, Vec<Held>>> = Arc::new(answers.into_iter().collect());
        let entries = Arc::new(entries);
        self.decided(map, |map| {
            let (entries, known) = (entries.clone(), known.clone());
            async move {
                self.ask(&map, partition, usize::from(map.write_quorum), Ask::All, move |drive, c| {
                    let (entries, known) = (entries.clone(), known.clone());
                    async move { replica::store_batch_if_newer(&c, &entries, known.get(&drive).cloned()).await }
                })
                .await
                .map(drop)
            }
        })
        .await?;
        Ok(versions)
    }

    /// Runs the store of a write already decided (its tag chosen, its condition checked) until
    /// a view holds: when a drive says the map changed, the map is reloaded and the *same*
    /// tagged entry stored again under it. Deciding again instead would read the entry this
    /// write may already have left on some replicas, and could report as refused (a condition
    /// now false, a delete of a key "not there") a write that took effect. An entry tagged in
    /// the old epoch and acknowledged in the new one is ordered before every write of the new
    /// epoch, with which it was concurrent.
    async fn decided<T, F, Fut>(&self, map: &Arc<ClusterMap>, store: F) -> Result<T, OpError>
    where
        F: Fn(Arc<ClusterMap>) -> Fut,
        Fut: std::future::Future<Output = Result<T, OpError>>,
    {
        let mut map = map.clone();
        let mut attempts = 0;
        let mut waited = Duration::ZERO;
        while attempts < MAX_ATTEMPTS {
            match store(map.clone()).await {
                Err(OpError::StaleView) => {
                    if self.follow_view(&mut waited).await.map_err(OpError::Failed)? {
                        attempts += 1;
                    }
                    map = self.map();
                }
                done => return done,
            }
        }
        Err(OpError::Failed(ClusterError::GaveUp(MAX_ATTEMPTS)))
    }

    /// The value of `tag` from the first of `holders` (drives that answered that they hold it)
    /// that answers: one may have died since the read.
    async fn fetch_any(&self, map: &Arc<ClusterMap>, holders: &[String], dkey: &Bytes, tag: Tag) -> Result<Bytes, OpError> {
        let mut last = OpError::Changed;
        for holder in holders {
            match self.fetch(map, holder, dkey, tag).await {
                Err(e) if unanswered(&e) => {
                    self.suspect(holder);
                    last = e;
                }
                done => return done,
            }
        }
        Err(last)
    }

    /// The value of `tag` from `drive` (which answered that it holds it).
    async fn fetch(&self, map: &Arc<ClusterMap>, drive: &str, dkey: &Bytes, tag: Tag) -> Result<Bytes, OpError> {
        let c = self.connection(map, drive, Lane::Reads).await.map_err(|e| OpError::from_client(drive, e))?;
        match c.get(dkey).await.map_err(|e| OpError::from_client(drive, e))? {
            Some(e) if Tag::decode(&e.metadata.version) == Some(tag) => Ok(e.value),
            // Overwritten since: a newer write is under way; reading again finds it.
            _ => Err(OpError::Changed),
        }
    }

    /// A new writer id: this client's, and this write's.
    fn writer_id(&self) -> u64 {
        let seq = self.inner.writes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        (u64::from(self.inner.writer) << 32) | u64::from(seq)
    }

    fn remember(&self, dkey: &Bytes, tag: Tag) {
        let mut versions = self.inner.versions.lock();
        if versions.len() >= MAX_REMEMBERED_VERSIONS {
            versions.clear();
        }
        versions.insert(crate::placement::hash(dkey, VERSIONS_SEED), tag);
    }

    /// What an unconditional put may expect the replica to hold without asking: the tag this
    /// client last saw for the key, or, for a key it has not seen, nothing at all when that
    /// guess has been right lately. `None`: ask first.
    fn expectation(&self, dkey: &Bytes) -> Option<Held> {
        use std::sync::atomic::Ordering::Relaxed;
        if let Some(tag) = self.inner.versions.lock().get(&crate::placement::hash(dkey, VERSIONS_SEED)) {
            return Some(Held::Entry { version: tag.encode(), tag: Some(*tag) });
        }
        let probe = self.inner.unseen.fetch_add(1, Relaxed).is_multiple_of(FRESH_PROBE);
        (probe || self.inner.fresh.load(Relaxed) >= FRESH_TRY).then_some(Held::Absent)
    }

    fn guessed_fresh(&self, right: bool) {
        use std::sync::atomic::Ordering::Relaxed;
        let _ = self.inner.fresh.fetch_update(Relaxed, Relaxed, |f| Some(if right { (f + 1).min(FRESH_MAX) } else { f.saturating_sub(4) }));
    }

    /// An unconditional put to a partition that one drive alone holds (R=1, not moving), in
    /// one round trip when the guess of what it holds is right: a tag above the expected one
    /// stored by compare-and-swap. `None`: refused, nothing written; the put reads and goes
    /// the usual way.
    ///
    /// This is safe only with one replica. There a try either lands whole or, refused, leaves
    /// nothing a reader could have returned, so the usual write after it is the put's only
    /// effect; and the drive orders the try after every write it took before, with a higher
    /// tag. With several replicas a try can land on some and not others, and neither keeping
    /// it nor writing it again above later writes is right (`write`). A try that fails without
    /// the drive's answer may have landed, so it is not made again: the put fails.
    async fn write_single(&self, map: &Arc<ClusterMap>, partition: u32, dkey: &Bytes, value: &Bytes) -> Result<Option<Bytes>, OpError> {
        let Some(expected) = self.expectation(dkey) else { return Ok(None) };
        let tag = Tag::next(expected.tag().as_ref(), map.epoch, self.writer_id(), Kind::Value);
        let (k, v, e) = (dkey.clone(), value.clone(), expected.clone());
        let answers = self
            .ask(map, partition, 1, Ask::All, move |_, c| {
                let (k, v, e) = (k.clone(), v.clone(), e.clone());
                async move { replica::store_expecting(&c, &k, v, tag, &e).await }
            })
            .await?;
        let landed = answers.iter().any(|(_, s)| *s == Stored::Written);
        if expected == Held::Absent {
            self.guessed_fresh(landed);
        }
        let counter = if landed { &self.inner.counts.one_round_trip } else { &self.inner.counts.retried };
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if !landed {
            return Ok(None);
        }
        self.remember(dkey, tag);
        Ok(Some(tag.encode()))
    }

    /// The ABD write: read quorum's newest tag, the condition checked against it, a newer tag
    /// stored on every replica, acknowledged by a write quorum.
    ///
    /// Every write reads first, unconditional puts too. A put that stored a guessed tag
    /// without the read (the tag this client last saw, plus one) could not be abandoned: once
    /// its entry is on any replica a reader may return it, and a second tag for the same
    /// value, above a write ordered after that read, brings the value back after it
    /// (linearizability lost); nor can it always stand, for a write completed before the put
    /// began may be newer. The put cannot tell these apart, so it does not guess.
    async fn write(&self, map: &Arc<ClusterMap>, key: &[u8], value: Bytes, kind: Kind, condition: &Condition) -> Result<Bytes, OpError> {
        let partition = map.partition_of(key);
        let dkey = map::drive_key(partition, key);
        let single = map.single_writer(partition);
        if single && kind == Kind::Value && *condition == Condition::None {
            if let Some(version) = self.write_single(map, partition, &dkey, &value).await? {
                return Ok(version);
            }
        }
        let k = dkey.clone();
        let answers = self
            .ask(map, partition, map.read_quorum(), Ask::Quorum, move |_, c| {
                let k = k.clone();
                async move { replica::held(&c, &k).await }
            })
            .await?;
        let newest = answers.iter().filter_map(|(_, h)| h.tag()).max();
        let live = newest.filter(|t| !t.is_tombstone());
        // An unconditional delete of a key that is not there writes nothing and says so.
        let refused = !condition.admits(live) || (*condition == Condition::None && kind == Kind::Tombstone && live.is_none());
        let known: HashMap<String, Held> = answers.into_iter().collect();
        if refused {
            // The refusal reports what the quorum read, so it must stand as a read does.
            if let Some(n) = newest {
                self.settle(map, partition, &dkey, n, None, false, known).await?;
            }
            return Err(OpError::Failed(ClusterError::VersionMismatch { current: live.map(|t| t.encode()) }));
        }
        let tag = Tag::next(newest.as_ref(), map.epoch, self.writer_id(), kind);
        let known = Arc::new(known);
        self.decided(map, |map| {
            let (dkey, value, known) = (&dkey, value.clone(), known.clone());
            async move { self.store(&map, partition, dkey, value, tag, known).await }
        })
        .await?;
        if single {
            self.remember(&dkey, tag);
        }
        Ok(tag.encode())
    }

    /// Stores a tagged entry on every replica; returns once a write quorum holds it. Replicas
    /// that answer later go on in the background.
    ///
    /// A replica that was not read is expected to hold the newest entry the others did (it
    /// mostly does): its compare-and-swap goes out at once, and only a refused one reads what
    /// it holds first. Exact compare-and-swap makes a wrong guess cost a round trip, never a
    /// wrong store. Only a guess below `tag` is used: one at or above it (a read writing back
    /// the newest entry it found) would count that replica as holding it unasked.
    async fn store(&self, map: &Arc<ClusterMap>, partition: u32, dkey: &Bytes, value: Bytes, tag: Tag, known: Arc<HashMap<String, Held>>) -> Result<(), OpError> {
        let k = dkey.clone();
        let guess = known.values().max_by_key(|h| h.tag()).filter(|h| h.tag().is_none_or(|t| t < tag)).cloned();
        self.ask(map, partition, usize::from(map.write_quorum), Ask::All, move |drive, c| {
            let (k, value) = (k.clone(), value.clone());
            let expected = known.get(&drive).cloned().or_else(|| guess.clone());
            async move { replica::store_if_newer(&c, &k, value, tag, expected).await }
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
        // Per partition: the keys seen and still to check, where the next page starts, and
        // whether that key was already seen (every page but the first starts after it).
        struct Cursor {
            pending: VecDeque<Bytes>,
            next: Option<Bytes>,
            after: bool,
        }
        // Keys sharing a hash tag live in one partition: only it is asked.
        let partitions: Vec<u32> = match map.partition_of_range(start, end) {
            Some(p) => vec![p],
            None => (0..map.partitions).collect(),
        };
        let mut cursors: BTreeMap<u32, Cursor> = partitions
            .into_iter()
            .map(|p| (p, Cursor { pending: Default::default(), next: Some(Bytes::copy_from_slice(start)), after: false }))
            .collect();
        let mut out = Vec::new();
        while out.len() < max {
            // Refill every partition that has run dry but has more, all at once. No partition
            // can add more than the keys still wanted, so no page is larger.
            let page = i32::try_from(max - out.len()).unwrap_or(i32::MAX);
            let dry: Vec<(u32, Bytes, bool)> = cursors
                .iter_mut()
                .filter(|(_, c)| c.pending.is_empty())
                .filter_map(|(&p, c)| c.next.take().map(|from| (p, from, c.after)))
                .collect();
            let pages = futures_util::future::try_join_all(dry.iter().map(|(p, from, after)| self.range_page(map, *p, from, *after, end, page))).await?;
            for ((p, _, _), (keys, more)) in dry.iter().zip(pages) {
                if let Some(c) = cursors.get_mut(p) {
                    c.next = more;
                    c.after = true;
                    c.pending.extend(keys);
                }
            }
            // The next keys in order: the smallest pending across partitions, one after another,
            // up to what is still wanted or until a partition with more pages runs dry (its next
            // page may hold smaller keys than the others' pending ones).
            let mut picked = Vec::new();
            while picked.len() < max - out.len() {
                let Some((&p, _)) = cursors.iter().filter(|(_, c)| !c.pending.is_empty()).min_by(|a, b| a.1.pending[0].cmp(&b.1.pending[0]))
                else {
                    break;
                };
                let Some(c) = cursors.get_mut(&p) else { break };
                picked.extend(c.pending.pop_front());
                if c.pending.is_empty() && c.next.is_some() {
                    break;
                }
            }
            if picked.is_empty() {
                break;
            }
            // Each is checked as a read would (tombstones and unacknowledged leftovers out),
            // all at once.
            let live = futures_util::future::try_join_all(picked.iter().map(|k| self.read(map, k, false))).await?;
            out.extend(picked.into_iter().zip(live).filter(|(_, v)| v.is_some()).map(|(k, _)| k));
        }
        Ok(out)
    }

    /// One page of a partition's user keys from `from` on: the union of a read quorum's
    /// answers, and where the next page starts if any replica had more.
    async fn range_page(
        &self,
        map: &Arc<ClusterMap>,
        partition: u32,
        from: &[u8],
        after: bool,
        end: Option<&[u8]>,
        page: i32,
    ) -> Result<(Vec<Bytes>, Option<Bytes>), OpError> {
        let query = map::page_query(partition, from, after, end, page);
        let answers = self
            .ask(map, partition, map.read_quorum(), Ask::Quorum, move |_, c| {
                let q = query.clone();
                async move { c.get_key_range(q).await }
            })
            .await?;
        Ok(map::page_union(partition, answers.into_iter().map(|(_, keys)| keys).collect(), page))
    }
}

/// Whether an attempt failed because a drive did not answer (refused, reset, timed out), so
/// that another replica may serve it; a status the drive sent is an answer.
fn unanswered(e: &OpError) -> bool {
    matches!(e, OpError::Failed(ClusterError::Drive { source, .. }) if source.status().is_none())
}

/// Whether `drives` make a quorum of `needed`: of any of the partition's drives, or while it
/// moves, of each of its two sets.
fn quorum_met<'a>(map: &ClusterMap, partition: u32, needed: usize, moving: bool, drives: impl Iterator<Item = &'a String> + Clone) -> bool {
    if moving {
        joint_quorum(map, partition, needed, drives)
    } else {
        drives.count() >= needed
    }
}

/// Whether `drives` include `needed` of `partition`'s replicas and, while it moves, `needed`
/// of the drives it moves to (each set's need capped at its size).
fn joint_quorum<'a>(map: &ClusterMap, partition: u32, needed: usize, drives: impl Iterator<Item = &'a String> + Clone) -> bool {
    let of = |set: &[String]| drives.clone().filter(|d| set.contains(d)).count() >= needed.min(set.len().max(1));
    of(map.replicas_of(partition)) && map.moving_to(partition).is_none_or(of)
}

/// A cluster entry whose batch header does not decode: not written by this cluster's code.
fn undecodable(dkey: &[u8]) -> OpError {
    OpError::Failed(ClusterError::Decode(format!("the batch entry of drive key {dkey:02x?} has no member list")))
}

/// The map and the drives the coordinator has marked down, from etcd.
async fn load_view(control: &Control) -> Result<(ClusterMap, Vec<String>), ClusterError> {
    let (map, _) = control.load_map().await?;
    let health = control.health().await?;
    let down = health.into_iter().filter(|(_, h)| h.state == HealthState::Down).map(|(id, _)| id).collect();
    Ok((map, down))
}

/// Which replicas a request goes to (`Store::ask`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ask {
    /// A read: a quorum of them, more only as needed.
    Quorum,
    /// A write: all of them.
    All,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The size of the future `op` returns, without running it.
    fn future_size<'a, Fut: std::future::Future>(_: impl FnOnce(&'a Store) -> Fut) -> usize {
        size_of::<Fut>()
    }

    /// A get's or put's future is moved (and so copied) whole, by every caller that boxes it:
    /// the rare reload of the map must not make it the size of the etcd calls' state (it was
    /// 11 KB, most of it the reload, and copying it was a tenth of a 1 x 1 get's client CPU).
    #[test]
    fn data_path_futures_stay_small() {
        let get = future_size(|s| s.get(b"k"));
        let put = future_size(|s| s.put(b"k", Bytes::new(), Condition::None));
        let reload = future_size(|s| s.refresh());
        assert!(get < 6 * 1024 && put < 6 * 1024, "get {get} B, put {put} B");
        assert!(reload > get, "the reload ({reload} B) is the large one: if it shrank, this test needs a new reason");
    }

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_moving_partition_needs_a_quorum_of_both_sets() {
        let mut map = ClusterMap::new(1, 3, 2).unwrap();
        map.placement = vec![ids(&["a", "b", "c"])];
        let q = |map: &ClusterMap, held: &[&str]| joint_quorum(map, 0, 2, ids(held).iter());
        assert!(q(&map, &["b", "c"]));
        assert!(!q(&map, &["c", "d"]));
        map.moving.insert(0, ids(&["a", "b", "d"]));
        // Two of the old replicas, one of the new: not enough while it moves.
        assert!(!q(&map, &["b", "c"]));
        assert!(q(&map, &["a", "b"]));
        assert!(q(&map, &["b", "c", "d"]));
        assert!(!q(&map, &["a", "d"]));
        // A set smaller than the quorum needs all of itself.
        map.moving.insert(0, ids(&["d"]));
        assert!(q(&map, &["a", "b", "d"]));
        assert!(!q(&map, &["a", "b"]));
    }
}
