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
use std::hash::{BuildHasherDefault, DefaultHasher};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use spindle_client::{Client, ClientConfig, ClientError, StatusCode};

use crate::batch::{self, BatchOp, MAX_BATCH_OPS};
pub use crate::condition::Condition;
use crate::control::{Control, HealthState};
use crate::map::{self, ClusterMap};
use crate::replica::{self, Answer, BatchEntry, Held, Stored};
use crate::stamp::{Stamp, NOTHING};
use crate::tag::{Kind, Tag};
use crate::together::Together;
use crate::ClusterError;

pub use crate::map::{MAX_KEY_LEN, MAX_VALUE_LEN};
use quorum::{carries, chosen_beneath, chosen_beneath_keys, joint_quorum, quorum_met, unsettled_batch, Ask, Quorum};
use abandon::Fate;
use batches::{Learned, Reach};
use round::{Judged, Outcome, Proposal};

mod ask;
mod abandon;
mod batches;
mod checks;
mod noted;
mod quorum;
mod range;
mod read;
mod records;
mod restamp;
mod round;
mod stripes;
mod unread;
mod write;

pub use stripes::{shard_key, MAX_OBJECT_NAME};

/// Attempts of one operation: each retry follows a map change or a value overwritten under a read.
const MAX_ATTEMPTS: usize = 8;
/// The longest pause after an attempt that lost a race, in microseconds, doubled with each
/// attempt (up to 64 times).
const CHANGED_BACKOFF_MICROS: u64 = 500;
/// The top bit of an unconditional write's writer id (`Store::round_id`).
const UNCONDITIONAL: u64 = 1 << 63;
/// One operation in this many stalls at each place `StoreConfig::stalls` names.
const STALL_ONE_IN: u32 = 4;
/// Longest a client waits for drives to be fenced to the epoch of the map it read.
const STALE_VIEW_WAIT: Duration = Duration::from_secs(10);
/// Default of `StoreConfig::hedge_after`: loopback answers come in well under a millisecond,
/// a loaded drive's p99 in tens of milliseconds.
pub const HEDGE_AFTER: Duration = Duration::from_millis(50);
/// How long a replica that failed, or was hedged around, is asked last.
const SUSPECT_FOR: Duration = Duration::from_secs(1);
/// Versions a client remembers for single-replica partitions (`Inner::versions`, about 100
/// bytes each); the memory is cleared when full.
const MAX_REMEMBERED_VERSIONS: usize = 65_536;
/// Batches a client knows to be recorded (`Inner::records`, about 40 bytes each); cleared
/// when full.
const MAX_KNOWN_RECORDS: usize = 4_096;
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
    /// Seeds the client's writer id and its pauses after lost races, so that the simulator
    /// replays a run from one seed; `None`: from the operating system.
    pub seed: Option<u64>,
    /// Pauses the simulator puts into operations; none in service.
    pub stalls: Stalls,
}

/// Pauses in a cluster client's operations, one in `STALL_ONE_IN` at each place, each drawn
/// from `StoreConfig::seed`: the simulator's way to widen the windows in which the map changes
/// under an operation (FoundationDB's "buggify"). None in service.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stalls {
    /// Up to this long between a write's decision and its requests: an operation decided
    /// under one map sends under the next.
    pub decided: Option<Duration>,
    /// Up to this long between an operation's choice of map and its first request: another
    /// operation of the client may load a newer map meanwhile.
    pub viewed: Option<Duration>,
}

impl Default for StoreConfig {
    fn default() -> Self {
        let client = ClientConfig { timeout: Duration::from_secs(5), ..ClientConfig::default() };
        StoreConfig { client, connect_timeout: Duration::from_secs(2), hedge_after: HEDGE_AFTER, seed: None, stalls: Stalls::default() }
    }
}

/// A hash map whose hasher has fixed keys: its order is the same in every run.
type Fixed<K, V> = HashMap<K, V, BuildHasherDefault<DefaultHasher>>;

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
    /// Each drive's connections, by `Lane`: hashed, as the request path wants, with fixed keys,
    /// so that the order they drop in (which closes connections) is the same in every run and
    /// a simulated run replays. The other maps here are only looked up; their order is never
    /// seen (the versions map, keyed by what clients name, keeps random keys).
    connections: Mutex<Fixed<String, [Option<Client>; 2]>>,
    /// High half of this client's writer ids: random, so that two clients do not share one.
    writer: u32,
    /// Pauses after lost races.
    rng: Mutex<rand::rngs::StdRng>,
    /// Low half: one per write, so that two concurrent writes of this client (which may pick
    /// the same counter) still get different tags.
    writes: std::sync::atomic::AtomicU32,
    /// The tag this client last wrote or read for a drive key of a single-replica partition,
    /// by the key's hash (two keys sharing a hash only cost a refused try): what an
    /// unconditional put expects the replica to hold, to store in one round trip.
    versions: Mutex<HashMap<u64, Stamp>>,
    /// Batches whose records this client left or saw left (`records::ensure_record`).
    records: Mutex<std::collections::HashSet<Tag>>,
    /// How well "a key never seen is new" has been guessing lately.
    fresh: std::sync::atomic::AtomicU32,
    unseen: std::sync::atomic::AtomicU32,
    counts: WriteCounts,
    /// When the map and the drives marked down were last read from etcd, and whether a read
    /// is under way (`stripes::Store::ready_name` keeps them fresh).
    viewed: Mutex<Instant>,
    viewing: std::sync::atomic::AtomicBool,
    /// Drives of erasure-coded pools that failed a shard's write or read lately, until when:
    /// new objects are placed in groups without them (`stripes::Store::ready_name`) until
    /// the coordinator marks them down, or they answer again.
    shard_misses: Mutex<HashMap<String, Instant>>,
}

/// How this client's writes went (`Store::write_counts`): unconditional puts to
/// single-replica partitions, and accepts that met a batch they could not settle.
#[derive(Debug, Default)]
pub struct WriteCounts {
    /// Stored in one round trip, as expected.
    pub one_round_trip: std::sync::atomic::AtomicU64,
    /// Refused (the replica held something else, nothing was written), then read and stored.
    pub retried: std::sync::atomic::AtomicU64,
    /// A replica's accept that left in place a batch it met and could not settle (`unread`).
    pub batch_left: std::sync::atomic::AtomicU64,
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
        use rand::{Rng, SeedableRng};
        let mut rng = match config.seed {
            Some(seed) => rand::rngs::StdRng::seed_from_u64(seed),
            None => rand::rngs::StdRng::from_os_rng(),
        };
        let writer = rng.random();
        Ok(Store {
            inner: Arc::new(Inner {
                control: RwLock::new(control),
                config,
                map: RwLock::new(Arc::new(map)),
                down: RwLock::new(down),
                suspects: Mutex::new(HashMap::new()),
                connections: Mutex::new(Fixed::default()),
                writer,
                rng: Mutex::new(rng),
                writes: std::sync::atomic::AtomicU32::new(0),
                versions: Mutex::new(HashMap::new()),
                records: Mutex::new(std::collections::HashSet::new()),
                fresh: std::sync::atomic::AtomicU32::new(FRESH_MAX / 2),
                unseen: std::sync::atomic::AtomicU32::new(0),
                counts: WriteCounts::default(),
                viewed: Mutex::new(Instant::now()),
                viewing: std::sync::atomic::AtomicBool::new(false),
                shard_misses: Mutex::new(HashMap::new()),
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
        *self.inner.viewed.lock() = Instant::now();
        // Open connections stay: each request carries the epoch of the map it was decided
        // with (`connection`).
        *self.inner.map.write() = Arc::new(map);
        Ok(())
    }

    /// The connection to `drive`, its requests carrying `map`'s epoch: an operation decided
    /// under this map (its replicas, whether its partition moves) is refused by a drive
    /// fenced to a later one, never taken under a view it did not decide with.
    async fn connection(&self, map: &ClusterMap, drive: &str, lane: Lane) -> Result<Client, ClientError> {
        // Mutant: requests carry the newest epoch this client knows, not the one their
        // operation was decided with.
        let epoch = if cfg!(feature = "mutant-epoch") { self.inner.map.read().epoch as i64 } else { map.epoch as i64 };
        #[cfg(feature = "mutant-epoch")]
        if epoch != map.epoch as i64 {
            tracing::warn!("mutant-epoch: a request to {drive} of an operation decided at epoch {} sent at {epoch}", map.epoch);
        }
        if let Some(Some(c)) = self.inner.connections.lock().get(drive).map(|lanes| &lanes[lane as usize]) {
            if !c.is_closed() {
                return Ok(c.at_cluster_version(epoch));
            }
        }
        let member = map.members.get(drive).ok_or_else(|| ClientError::Protocol(format!("drive {drive} is not in the map")))?;
        let config = ClientConfig { cluster_version: map.epoch as i64, ..self.inner.config.client.clone() };
        let connect = Client::connect(member.addr.as_str(), config);
        let client = tokio::time::timeout(self.inner.config.connect_timeout, connect)
            .await
            .map_err(|_| ClientError::Timeout(self.inner.config.connect_timeout))??;
        tracing::trace!(drive, conn = client.connection_id(), "connected");
        // Requests that connected at once share the first connection kept: one per lane, as
        // the drive's limits on open batches assume (`spindle_client::Client::start_batch`).
        let mut connections = self.inner.connections.lock();
        let kept = &mut connections.entry(drive.to_string()).or_default()[lane as usize];
        match kept {
            Some(c) if !c.is_closed() => Ok(c.at_cluster_version(epoch)),
            _ => Ok(kept.insert(client).at_cluster_version(epoch)),
        }
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

    /// Runs `op` against the current map, reloading the map and running it again when a drive
    /// says the view changed.
    async fn with_map<T, F, Fut>(&self, op: F) -> Result<T, ClusterError>
    where
        F: Fn(Arc<ClusterMap>) -> Fut,
        Fut: std::future::Future<Output = Result<T, OpError>>,
    {
        let mut attempts = 0;
        let mut waited = Duration::ZERO;
        let mut undecided = None;
        while attempts < MAX_ATTEMPTS {
            let map = self.map();
            self.stall(self.inner.config.stalls.viewed).await;
            let tried = op(map).await;
            undecided = None;
            match tried {
                Ok(v) => return Ok(v),
                Err(OpError::StaleView) => {
                    if self.follow_view(&mut waited).await? {
                        attempts += 1;
                    }
                }
                Err(e @ (OpError::Changed | OpError::Undecided { .. })) => {
                    if let OpError::Undecided { key, batch } = e {
                        undecided = Some((key, batch));
                    }
                    attempts += 1;
                    // Another write or round won the race: a pause of random length, longer
                    // each time, so that racing clients stop meeting in step.
                    let most = CHANGED_BACKOFF_MICROS << attempts.min(6);
                    let pause = rand::Rng::random_range(&mut *self.inner.rng.lock(), 0..most);
                    tokio::time::sleep(Duration::from_micros(pause)).await;
                }
                Err(OpError::Failed(e)) => return Err(e),
            }
        }
        Err(match undecided {
            Some((key, batch)) => ClusterError::Undecided { key, batch: batch.encode() },
            None => ClusterError::GaveUp(MAX_ATTEMPTS),
        })
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
            return Err(ClusterError::StaleView { epoch: before, waited: STALE_VIEW_WAIT });
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

    /// Settles `key` as a read does, from what every replica holds (not a quorum), and so
    /// leaves its newest write on a write quorum of every replica set of the current map (the
    /// one a move goes to included): written back under its own ballot, or, where a
    /// replica's promise refuses that, made chosen by a round above the promises; a batch
    /// with a member overwritten written back only if chosen, else abandoned. What a move's
    /// catch-up needs where repair could not copy a write (`repair::repair_partition_noting`).
    pub async fn make_chosen(&self, key: &[u8]) -> Result<(), ClusterError> {
        Self::check_key(key)?;
        self.with_map(|map| async move { self.make_chosen_at(&map, key).await }).await
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

    /// Runs the store of a write already decided (its tag chosen, its condition checked) until
    /// a view holds: when a drive says the map changed, the map is reloaded and the *same*
    /// tagged entry stored again under it. Deciding again instead would read the entry this
    /// write may already have left on some replicas, and could report as refused (a condition
    /// now false, a delete of a key "not there") a write that took effect. An entry tagged in
    /// the old epoch and acknowledged in the new one is ordered before every write of the new
    /// epoch, with which it was concurrent.
    async fn decided<T, F, Fut>(&self, map: &Arc<ClusterMap>, partition: u32, of: Judged, store: F) -> Result<T, OpError>
    where
        F: Fn(Arc<ClusterMap>) -> Fut,
        Fut: std::future::Future<Output = Result<T, OpError>>,
    {
        self.stall(self.inner.config.stalls.decided).await;
        let decision = map.clone();
        let mut map = map.clone();
        let mut attempts = 0;
        let mut waited = Duration::ZERO;
        // Whether a try ended in a refused epoch: it may have landed on some replicas first.
        let mut retried = false;
        let unknown = || match of {
            Judged::Write => OpError::Failed(ClusterError::Contended { partition }),
            Judged::Settle => OpError::Changed,
        };
        while attempts < MAX_ATTEMPTS {
            match store(map.clone()).await {
                Err(OpError::StaleView) => {
                    if self.follow_view(&mut waited).await.map_err(OpError::Failed)? {
                        attempts += 1;
                    }
                    map = self.map();
                    retried = true;
                    if !carries(&decision, &map, partition) {
                        return Err(unknown());
                    }
                }
                // "Nowhere" is this try's verdict only: an earlier one may have landed.
                Err(OpError::Changed) if retried => return Err(unknown()),
                done => return done,
            }
        }
        Err(OpError::Failed(ClusterError::GaveUp(MAX_ATTEMPTS)))
    }

    /// A pause of up to `most`, one time in `STALL_ONE_IN` (`Stalls`); nothing in service.
    async fn stall(&self, most: Option<Duration>) {
        let Some(most) = most else { return };
        let pause = {
            let mut rng = self.inner.rng.lock();
            rand::Rng::random_ratio(&mut *rng, 1, STALL_ONE_IN).then(|| rand::Rng::random_range(&mut *rng, Duration::ZERO..most))
        };
        if let Some(pause) = pause {
            tokio::time::sleep(pause).await;
        }
    }

    /// The value of `tag` from the first of `holders` (drives that answered that they hold it)
    /// that answers: one may have died since the read.
    async fn fetch_any(&self, map: &Arc<ClusterMap>, holders: &[String], dkey: &Bytes, tag: Stamp) -> Result<Bytes, OpError> {
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
    async fn fetch(&self, map: &Arc<ClusterMap>, drive: &str, dkey: &Bytes, tag: Stamp) -> Result<Bytes, OpError> {
        let c = self.connection(map, drive, Lane::Reads).await.map_err(|e| OpError::from_client(drive, e))?;
        match c.get(dkey).await.map_err(|e| OpError::from_client(drive, e))? {
            Some(e) if Held::from_version(e.metadata.version.clone()).holds(tag.identity, tag.ballot) => Ok(e.value),
            // Overwritten since: a newer write is under way; reading again finds it.
            _ => Err(OpError::Changed),
        }
    }

    /// A new writer id: this client's, and this write's.
    fn writer_id(&self) -> u64 {
        let seq = self.inner.writes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // The random half keeps clear of the top bit, which says what kind of write it is.
        (u64::from(self.inner.writer & !(1 << 31)) << 32) | u64::from(seq) | UNCONDITIONAL
    }

    /// A new writer id for a round's ballot: below an unconditional write's of the same
    /// counter, so that a put racing a round from the same newest write lands above the
    /// round's promise and the round, not the put, tries again.
    fn round_id(&self) -> u64 {
        self.writer_id() & !UNCONDITIONAL
    }
}

/// Whether an attempt failed because a drive did not answer (refused, reset, timed out), so
/// that another replica may serve it; a status the drive sent is an answer.
fn unanswered(e: &OpError) -> bool {
    matches!(e, OpError::Failed(ClusterError::Drive { source, .. }) if source.status().is_none())
}

/// A cluster entry whose batch header does not decode: not written by this cluster's code.
fn undecodable(dkey: &[u8]) -> OpError {
    OpError::Failed(ClusterError::UndecodableBatch { key: Bytes::copy_from_slice(dkey) })
}

/// The map and the drives the coordinator has marked down, from etcd.
async fn load_view(control: &Control) -> Result<(ClusterMap, Vec<String>), ClusterError> {
    let (map, _) = control.load_map().await?;
    let health = control.health().await?;
    let down = health.into_iter().filter(|(_, h)| h.state == HealthState::Down).map(|(id, _)| id).collect();
    Ok((map, down))
}


/// Why one attempt of an operation failed.
#[derive(Debug)]
enum OpError {
    /// An entry was overwritten between a replica's answer and the fetch of its value: the
    /// read starts again (and finds the newer write).
    Changed,
    /// A batch met on `key` could not be decided (`abandon::Undecided::Undecidable`): tried
    /// again as `Changed` is, and named if the last attempt ends so.
    Undecided { key: Bytes, batch: Tag },
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
    /// the rare reload of the map must not make it the size of the control plane calls' state
    /// (it was 11 KB, most of it the reload, and copying it was a tenth of a 1 x 1 get's
    /// client CPU; the plane's calls are boxed now, and the reload is boxed where it is made).
    #[test]
    fn data_path_futures_stay_small() {
        let get = future_size(|s| s.get(b"k"));
        let put = future_size(|s| s.put(b"k", Bytes::new(), Condition::None));
        // Unoptimised (as the test command builds): get 4,960 B, put 5,528 B (abandon.rs boxes its search beneath).
        assert!(get < 6_656 && put < 6_656, "get {get} B, put {put} B");
    }
}
