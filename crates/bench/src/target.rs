//! Every system the lab measures, behind one trait: a [`Store`] takes puts (with a Kinetic
//! synchronization mode), gets, ordered scans and a flush. One `Store` is one session (a
//! connection, or a handle on an in-process database); [`connect`] opens as many as a run needs.
//!
//! Targets:
//! - `HOST:PORT` or `kinetic://HOST:PORT`: any Kinetic endpoint (Spindle, the Java simulator, a
//!   real drive); a session is one client connection;
//! - `embedded:DIR` / `memory:`: Spindle's engine in this process (no protocol, no network);
//! - `redis://HOST:PORT`: redis SET/GET over multiplexed connections (scans, which redis lacks
//!   for plain keys, go through a sorted-set index of every key, as YCSB's redis binding does);
//! - `leveldb:DIR` / `rocksdb:DIR`: the libraries in this process ([`crate::lsm_library`]);
//! - `cluster:ETCD_URLS[#NAME]` (and `cluster-cas:`, `cluster-batch:`): a Spindle cluster
//!   through its client ([`crate::cluster_target`]);
//! - `fanout:A,B,C` / `fanout-read:A,B,C`: the floor under the cluster's replication, with no
//!   cluster around it ([`FanoutStore`]).
//!
//! The put/get micro-benchmarks drive Kinetic endpoints through a leaner pipelined path (see
//! `lib.rs`) so that the load generator is never what they measure; everything else uses this.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use spindle_client::{Client, ClientConfig, PutOptions, RangeQuery, Synchronization};
use spindle_engine::{Check, Engine, KeyRange, Meta, WriteOp, WriteRequest};

use crate::lsm_library::{LsmDb, LsmKind};
use crate::BenchError;

pub use crate::session::{Store, StoreFuture};

/// What a target needs to support beyond puts and gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Needs {
    /// Ordered scans (YCSB E). Only redis pays for this: it keeps an index of every key.
    pub scans: bool,
}

/// Opens `sessions` sessions with `target`.
pub async fn connect(target: &str, sessions: usize, needs: Needs) -> Result<Vec<Arc<dyn Store>>, BenchError> {
    let sessions = sessions.max(1);
    if let Some(handle) = in_process(target)? {
        let store: Arc<dyn Store> = match handle {
            InProcess::Engine(engine) => Arc::new(EngineStore(engine)),
            InProcess::Lsm(db) => Arc::new(LsmStore(db)),
        };
        return Ok(vec![store; sessions]);
    }
    if let Some(store) = crate::cluster_target::connect(target).await? {
        return Ok(vec![store; sessions]);
    }
    if let Some((read_first, spec)) = target.strip_prefix("fanout:").map(|l| (false, l)).or_else(|| target.strip_prefix("fanout-read:").map(|l| (true, l))) {
        // A,B,C[@R]: each key on R of the drives (all of them by default).
        let (list, replicas) = match spec.split_once('@') {
            Some((list, r)) => (list, Some(r.parse::<usize>().map_err(|_| BenchError::Invalid(format!("{target}: @R must be a number")))?)),
            None => (spec, None),
        };
        let (mut drives, mut readers) = (Vec::new(), Vec::new());
        for addr in list.split(',').filter(|a| !a.is_empty()) {
            for lane in [&mut drives, &mut readers] {
                let client = Client::connect(addr, ClientConfig::default()).await?;
                // A cluster's drives are fenced to its epoch: speak theirs.
                let theirs = client.sign_on().header.as_ref().and_then(|h| h.cluster_version).unwrap_or(0);
                client.set_request_cluster_version(theirs);
                lane.push(client);
            }
        }
        let replicas = replicas.unwrap_or(drives.len());
        if replicas == 0 || replicas > drives.len() {
            return Err(BenchError::Invalid(format!("{target}: R must be 1 to {} (the drives listed)", drives.len())));
        }
        let store: Arc<dyn Store> = Arc::new(FanoutStore { drives, readers, replicas, read_first, behind: Arc::default() });
        return Ok(vec![store; sessions]);
    }
    if target.starts_with("redis://") {
        let client = redis::Client::open(target).map_err(redis_err)?;
        let mut out: Vec<Arc<dyn Store>> = Vec::with_capacity(sessions);
        for _ in 0..sessions {
            let connection = client.get_multiplexed_async_connection().await.map_err(redis_err)?;
            out.push(Arc::new(RedisStore { connection, indexed: needs.scans }));
        }
        return Ok(out);
    }
    // client:HOST:PORT is a Kinetic endpoint too, asked through the client's request API
    // (`Client::get`/`put`, a task hop each way) like every other Kinetic target here; only
    // `spindle bench put|get` treats it apart: a plain endpoint gets its raw pipeline there.
    let addr = target.trim_start_matches("client:").trim_start_matches("kinetic://");
    let mut out: Vec<Arc<dyn Store>> = Vec::with_capacity(sessions);
    for _ in 0..sessions {
        let client = Client::connect(addr, ClientConfig::default()).await?;
        let max_key = client.sign_on().body.as_ref().and_then(|b| b.get_log.as_ref()?.limits.as_ref()?.max_key_size).unwrap_or(spindle_proto::limits::MAX_KEY_SIZE);
        // A key cannot outgrow a message: a drive announcing more does not make us allocate it.
        let max_key = max_key.min(spindle_proto::limits::MAX_MESSAGE_SIZE);
        out.push(Arc::new(KineticStore(client, Bytes::from(vec![0xFF; max_key as usize]))));
    }
    Ok(out)
}

/// An in-process database, opened once per process and target and kept open: every run and
/// phase against `memory:` sees the same store (as every run against a drive sees the drive),
/// and a library's lock on its directory is taken once.
#[derive(Clone)]
pub enum InProcess {
    Engine(Arc<dyn Engine>),
    Lsm(Arc<LsmDb>),
}

/// Lets an in-process engine finish the background work a load left behind (memtable flushes
/// and compactions), so that a measured run after it does not share the CPU with the load's
/// aftermath: what a networked drive's owner gets by waiting between load and run. Nothing to
/// do for the other targets.
pub async fn settle(target: &str) -> Result<(), BenchError> {
    if let Some(InProcess::Engine(engine)) = in_process(target)? {
        tokio::task::spawn_blocking(move || engine.sync().and_then(|()| engine.compact()))
            .await
            .map_err(|e| BenchError::Invalid(e.to_string()))?
            .map_err(|e| BenchError::Invalid(format!("settling {target}: {e}")))?;
    }
    Ok(())
}

/// The in-process database `target` names (opening it on first use), or `None` for a
/// networked target.
pub fn in_process(target: &str) -> Result<Option<InProcess>, BenchError> {
    static OPEN: OnceLock<Mutex<HashMap<String, InProcess>>> = OnceLock::new();
    if is_kinetic(target) || target.starts_with("redis://") || crate::cluster_target::is_cluster(target) || target.starts_with("client:") || is_fanout(target) {
        return Ok(None);
    }
    let mut open = OPEN.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    if let Some(handle) = open.get(target) {
        return Ok(Some(handle.clone()));
    }
    let handle = if let Some(dir) = target.strip_prefix("embedded:") {
        InProcess::Engine(spindle_engine::FjallEngine::open(spindle_engine::FjallOptions::new(dir)).map_err(|e| BenchError::Invalid(format!("{dir}: {e}")))?)
    } else if let Some((kind, dir)) = LsmKind::parse(target) {
        InProcess::Lsm(Arc::new(LsmDb::open(kind, dir)?))
    } else {
        InProcess::Engine(spindle_engine::MemEngine::new())
    };
    open.insert(target.to_string(), handle.clone());
    Ok(Some(handle))
}

/// Whether `target` is a Kinetic endpoint that puts and gets drive through the raw pipeline
/// (the others run in-process, speak redis, or go through a client's request API).
pub fn is_kinetic(target: &str) -> bool {
    !(target.starts_with("embedded:")
        || target == "memory:"
        || target.starts_with("redis://")
        || crate::cluster_target::is_cluster(target)
        || target.starts_with("client:")
        || is_fanout(target)
        || LsmKind::parse(target).is_some())
}

fn is_fanout(target: &str) -> bool {
    target.starts_with("fanout:") || target.starts_with("fanout-read:")
}

/// What R-way replication costs at the least, to set the cluster's figures against, on the same
/// client connections (two per drive, one for writes and one for reads, shared by every
/// session, as the cluster client's are): a
/// put is stored (forced, with the run's synchronization) on every drive and answered once a majority has it, the
/// others finishing in the background; `fanout-read:` first reads the key's version from the
/// smallest set that meets every majority (R − W + 1 drives), which a linearizable
/// multi-writer put cannot do without. A get reads the value from one drive and the version
/// from the rest of such a set. No map, no tags, no conditions, no repair: not a store anyone
/// should use, only the work no replication can skip.
struct FanoutStore {
    /// The connections puts go on.
    drives: Vec<Client>,
    /// The connections reads go on (a drive holds a connection's reads until the writes sent
    /// before them on it are applied).
    readers: Vec<Client>,
    /// Drives each key is on: R consecutive drives from one its hash picks, so that with more
    /// drives than R the writes spread as the cluster's placement spreads them.
    replicas: usize,
    read_first: bool,
    /// Puts still finishing on the drives after their majority answered (`flush` waits).
    behind: Arc<Behind>,
}

#[derive(Default)]
struct Behind {
    count: std::sync::atomic::AtomicUsize,
    done: tokio::sync::Notify,
}

impl FanoutStore {
    fn majority(&self) -> usize {
        self.replicas / 2 + 1
    }

    /// The indices of the drives `key` is on, the first the one its reads ask for the value.
    fn placed(&self, key: &[u8]) -> impl Iterator<Item = usize> + use<> {
        let n = self.drives.len();
        let first = (spindle_cluster::placement::hash(key, 0) % n as u64) as usize;
        (0..self.replicas).map(move |i| (first + i) % n)
    }

    /// The versions a read set holds for `key` (asked together).
    async fn versions(&self, key: &[u8]) -> Result<(), String> {
        let set = self.replicas - self.majority() + 1;
        let mut asks: futures_util::stream::FuturesUnordered<_> = self.placed(key).take(set).map(|i| self.readers[i].get_metadata(key)).collect();
        while let Some(answer) = futures_util::StreamExt::next(&mut asks).await {
            answer.map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

impl Store for FanoutStore {
    fn put(&self, key: Bytes, value: Bytes, sync: Synchronization) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            if self.read_first {
                self.versions(&key).await?;
            }
            let mut puts: futures_util::stream::FuturesUnordered<_> = self
                .placed(&key)
                .map(|i| {
                    let (c, key, value) = (self.drives[i].clone(), key.clone(), value.clone());
                    async move { c.put(&key, value, PutOptions { force: true, sync, ..PutOptions::default() }).await }
                })
                .collect();
            let mut stored = 0;
            while let Some(answer) = futures_util::StreamExt::next(&mut puts).await {
                answer.map_err(|e| e.to_string())?;
                stored += 1;
                if stored == self.majority() {
                    break;
                }
            }
            if !puts.is_empty() {
                let behind = self.behind.clone();
                behind.count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tokio::spawn(async move {
                    while futures_util::StreamExt::next(&mut puts).await.is_some() {}
                    behind.count.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                    behind.done.notify_waiters();
                });
            }
            Ok(())
        })
    }

    fn get(&self, key: Bytes) -> StoreFuture<'_, Option<Bytes>> {
        Box::pin(async move {
            let set = self.replicas - self.majority() + 1;
            let placed: Vec<usize> = self.placed(&key).take(set).collect();
            let versions = futures_util::future::try_join_all(placed[1..].iter().map(|&i| self.readers[i].get_metadata(&key)));
            let (value, versions) = tokio::join!(self.readers[placed[0]].get(&key), versions);
            versions.map_err(|e| e.to_string())?;
            Ok(value.map_err(|e| e.to_string())?.map(|e| e.value))
        })
    }

    fn scan(&self, start: Bytes, count: usize) -> StoreFuture<'_, Vec<Bytes>> {
        Box::pin(async move {
            let max_returned = i32::try_from(count).unwrap_or(i32::MAX);
            let q = RangeQuery { start, start_inclusive: true, end: Some(Bytes::from(vec![0xFF; 4096])), end_inclusive: true, max_returned, reverse: false };
            self.readers[0].get_key_range(q).await.map_err(|e| e.to_string())
        })
    }

    fn flush(&self) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            loop {
                let done = self.behind.done.notified();
                if self.behind.count.load(std::sync::atomic::Ordering::SeqCst) == 0 {
                    break;
                }
                done.await;
            }
            for c in &self.drives {
                c.flush_all_data().await.map_err(|e| e.to_string())?;
            }
            Ok(())
        })
    }

    fn describe(&self) -> StoreFuture<'_, serde_json::Value> {
        Box::pin(async move { Ok(serde_json::json!({"kind": "fanout", "drives": self.drives.len(), "replicas": self.replicas, "write_quorum": self.majority(), "read_first": self.read_first})) })
    }
}

fn redis_err(e: impl std::fmt::Display) -> BenchError {
    BenchError::Invalid(format!("redis: {e}"))
}

/// A client connection, and the end key of its scans: the greatest key the drive accepts. A
/// range without an end key is read as an empty range by some drives (the reference simulator
/// answers nothing), so scans name their end explicitly.
struct KineticStore(Client, Bytes);

impl Store for KineticStore {
    fn put(&self, key: Bytes, value: Bytes, sync: Synchronization) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            let options = PutOptions { force: true, sync, ..PutOptions::default() };
            self.0.put(&key, value, options).await.map_err(|e| e.to_string())
        })
    }

    fn get(&self, key: Bytes) -> StoreFuture<'_, Option<Bytes>> {
        Box::pin(async move { Ok(self.0.get(&key).await.map_err(|e| e.to_string())?.map(|e| e.value)) })
    }

    fn scan(&self, start: Bytes, count: usize) -> StoreFuture<'_, Vec<Bytes>> {
        Box::pin(async move {
            let max_returned = i32::try_from(count).unwrap_or(i32::MAX);
            let q = RangeQuery { start, start_inclusive: true, end: Some(self.1.clone()), end_inclusive: true, max_returned, reverse: false };
            self.0.get_key_range(q).await.map_err(|e| e.to_string())
        })
    }

    fn flush(&self) -> StoreFuture<'_, ()> {
        Box::pin(async move { self.0.flush_all_data().await.map_err(|e| e.to_string()) })
    }

    fn describe(&self) -> StoreFuture<'_, serde_json::Value> {
        Box::pin(async move {
            // The sign-on carries the drive's configuration and limits.
            let log = self.0.sign_on().body.as_ref().and_then(|b| b.get_log.clone()).unwrap_or_default();
            let c = log.configuration.unwrap_or_default();
            let l = log.limits.unwrap_or_default();
            Ok(serde_json::json!({
                "kind": "kinetic",
                "vendor": c.vendor, "model": c.model, "version": c.version,
                "protocol_version": c.protocol_version,
                "limits": {
                    "max_key_size": l.max_key_size, "max_value_size": l.max_value_size,
                    "max_key_range_count": l.max_key_range_count, "max_connections": l.max_connections,
                    "max_outstanding_read_requests": l.max_outstanding_read_requests,
                    "max_outstanding_write_requests": l.max_outstanding_write_requests,
                },
            }))
        })
    }
}

struct EngineStore(Arc<dyn Engine>);

impl Store for EngineStore {
    fn put(&self, key: Bytes, value: Bytes, sync: Synchronization) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            let (tx, rx) = tokio::sync::oneshot::channel();
            self.0.submit(WriteRequest {
                op: WriteOp::Put { key, value, meta: Meta::default(), check: Check::Force },
                sync: sync != Synchronization::Writeback,
                on_applied: None,
                on_done: Box::new(move |r| {
                    let _ = tx.send(r);
                }),
            });
            match rx.await {
                Ok(r) => r.map_err(|e| e.to_string()),
                Err(_) => Err("the engine's writer stopped".into()),
            }
        })
    }

    fn get(&self, key: Bytes) -> StoreFuture<'_, Option<Bytes>> {
        Box::pin(async move { Ok(self.0.get(&key).map_err(|e| e.to_string())?.map(|e| e.value)) })
    }

    fn scan(&self, start: Bytes, count: usize) -> StoreFuture<'_, Vec<Bytes>> {
        Box::pin(async move {
            let range = KeyRange { start, start_inclusive: true, end: None, end_inclusive: false, reverse: false, max: count };
            self.0.keys(&range).map_err(|e| e.to_string())
        })
    }

    fn flush(&self) -> StoreFuture<'_, ()> {
        let engine = self.0.clone();
        Box::pin(async move { tokio::task::spawn_blocking(move || engine.sync()).await.map_err(|e| e.to_string())?.map_err(|e| e.to_string()) })
    }

    fn describe(&self) -> StoreFuture<'_, serde_json::Value> {
        Box::pin(async move { Ok(serde_json::json!({"kind": "spindle engine in-process", "version": env!("CARGO_PKG_VERSION"), "disk_usage_bytes": self.0.disk_usage()})) })
    }
}

/// The libraries block the calling thread: on a multi-threaded runtime the call leaves its
/// worker's other tasks to another worker first, so concurrent sessions really overlap (and
/// synchronous writes can share a log sync, as they would in a threaded server).
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}

struct LsmStore(Arc<LsmDb>);

impl Store for LsmStore {
    fn put(&self, key: Bytes, value: Bytes, sync: Synchronization) -> StoreFuture<'_, ()> {
        Box::pin(async move { blocking(|| self.0.put(&key, &value, sync != Synchronization::Writeback)) })
    }

    fn get(&self, key: Bytes) -> StoreFuture<'_, Option<Bytes>> {
        Box::pin(async move { blocking(|| self.0.get(&key)).map(|v| v.map(Bytes::from)) })
    }

    fn scan(&self, start: Bytes, count: usize) -> StoreFuture<'_, Vec<Bytes>> {
        Box::pin(async move { Ok(blocking(|| self.0.keys_from(&start, count)).into_iter().map(Bytes::from).collect()) })
    }

    fn flush(&self) -> StoreFuture<'_, ()> {
        Box::pin(async move { blocking(|| self.0.sync()) })
    }

    fn describe(&self) -> StoreFuture<'_, serde_json::Value> {
        Box::pin(async move { Ok(self.0.describe()) })
    }
}

/// The sorted set that indexes every key when scans are needed (score 0: ordered by bytes).
const REDIS_INDEX: &str = "spindle-bench:index";

struct RedisStore {
    connection: redis::aio::MultiplexedConnection,
    indexed: bool,
}

impl Store for RedisStore {
    fn put(&self, key: Bytes, value: Bytes, _sync: Synchronization) -> StoreFuture<'_, ()> {
        let mut c = self.connection.clone();
        Box::pin(async move {
            let mut pipe = redis::pipe();
            pipe.cmd("SET").arg(&key[..]).arg(&value[..]).ignore();
            if self.indexed {
                pipe.cmd("ZADD").arg(REDIS_INDEX).arg(0).arg(&key[..]).ignore();
            }
            pipe.query_async::<()>(&mut c).await.map_err(|e| e.to_string())
        })
    }

    fn get(&self, key: Bytes) -> StoreFuture<'_, Option<Bytes>> {
        let mut c = self.connection.clone();
        Box::pin(async move { Ok(redis::cmd("GET").arg(&key[..]).query_async::<Option<Vec<u8>>>(&mut c).await.map_err(|e| e.to_string())?.map(Bytes::from)) })
    }

    fn scan(&self, start: Bytes, count: usize) -> StoreFuture<'_, Vec<Bytes>> {
        let mut c = self.connection.clone();
        Box::pin(async move {
            if !self.indexed {
                return Err("redis scans need the key index (this session was opened without it)".into());
            }
            let mut from = b"[".to_vec();
            from.extend_from_slice(&start);
            let keys: Vec<Vec<u8>> = redis::cmd("ZRANGEBYLEX").arg(REDIS_INDEX).arg(from).arg("+").arg("LIMIT").arg(0).arg(count).query_async(&mut c).await.map_err(|e| e.to_string())?;
            Ok(keys.into_iter().map(Bytes::from).collect())
        })
    }

    fn flush(&self) -> StoreFuture<'_, ()> {
        // Run without persistence, as redis is measured here: nothing to make durable.
        Box::pin(async { Ok(()) })
    }

    fn describe(&self) -> StoreFuture<'_, serde_json::Value> {
        let mut c = self.connection.clone();
        Box::pin(async move {
            let info: String = redis::cmd("INFO").arg("server").query_async(&mut c).await.map_err(|e| e.to_string())?;
            let field = |name: &str| info.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(':')).unwrap_or("").trim().to_string();
            let config = |name: &'static str| {
                let mut c = c.clone();
                async move { redis::cmd("CONFIG").arg("GET").arg(name).query_async::<Vec<String>>(&mut c).await.ok().and_then(|v| v.get(1).cloned()) }
            };
            Ok(serde_json::json!({
                "kind": "redis", "version": field("redis_version"),
                "save": config("save").await, "appendonly": config("appendonly").await,
            }))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every in-process target behaves alike: puts, gets, ordered scans and flushes.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn in_process_targets_agree() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        for target in ["memory:".to_string(), format!("embedded:{d}/e"), format!("leveldb:{d}/l"), format!("rocksdb:{d}/r"), format!("rocksdb-blob:{d}/b")] {
            assert!(!is_kinetic(&target));
            let sessions = connect(&target, 2, Needs { scans: true }).await.unwrap();
            // A second connect within the process reaches the same store.
            let again = connect(&target, 1, Needs { scans: true }).await.unwrap();
            for i in [5u8, 1, 3, 2, 4] {
                sessions[usize::from(i % 2)].put(Bytes::from(vec![b'k', i]), Bytes::from(vec![i; 10]), Synchronization::Writeback).await.unwrap();
            }
            sessions[0].flush().await.unwrap();
            assert_eq!(again[0].get(Bytes::from_static(b"k\x03")).await.unwrap().as_deref(), Some(&[3u8; 10][..]), "{target}");
            assert_eq!(sessions[1].get(Bytes::from_static(b"k\x09")).await.unwrap(), None, "{target}");
            let keys = sessions[0].scan(Bytes::from_static(b"k\x02"), 3).await.unwrap();
            assert_eq!(keys, vec![Bytes::from_static(b"k\x02"), Bytes::from_static(b"k\x03"), Bytes::from_static(b"k\x04")], "{target}");
        }
        assert!(is_kinetic("127.0.0.1:8123") && is_kinetic("kinetic://h:1"));
    }
}
