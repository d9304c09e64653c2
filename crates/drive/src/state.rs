//! Everything the connections of one drive share.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use spindle_engine::Engine;

use crate::capacity::Capacity;
use crate::config::DriveConfig;
use crate::persist::Identity;
use crate::security::Security;
use crate::stats::Statistics;
use crate::sysinfo::SystemSampler;

/// Lines kept for GETLOG MESSAGES.
const EVENT_LOG_LINES: usize = 200;

/// Reads that needed the disk and run on blocking threads at once, drive-wide: a queue depth
/// that keeps an SSD busy. Beyond it more threads add no throughput, only more reads queued
/// in the kernel, where a later write's flush and every other read wait behind them.
pub const DISK_READS_IN_FLIGHT: usize = 32;

/// Connection slots count as scarce once 1/this of maxConnections are taken.
pub const CONNECTIONS_SCARCE_FRACTION: u32 = 2;

/// TLS clients being refused at once (each refusal costs a handshake, to tell the client in
/// words its TLS stack can read); beyond these, an over-limit TLS client is simply closed.
pub const TLS_REFUSALS_IN_PROGRESS: usize = 16;

/// A pooled connection to a P2P peer: who connects, to where, how.
pub type PeerKey = (i64, String, i32, bool);

pub struct DriveState {
    pub config: DriveConfig,
    pub engine: Arc<dyn Engine>,
    pub security: RwLock<Security>,
    pub cluster_version: AtomicI64,
    /// Locked by a PIN: everything but PIN operations gets DEVICE_LOCKED.
    pub locked: std::sync::atomic::AtomicBool,
    /// The protocol's PowerLevel (OPERATIONAL, HIBERNATE, SHUTDOWN).
    pub power_level: std::sync::atomic::AtomicI32,
    /// Serialises changes to the persistent settings.
    pub admin: Mutex<()>,
    /// Wrong PINs in a row and the window after the last one during which no PIN is checked
    /// (drive-wide, across every connection), so parallel connections guess no faster than
    /// one. Never held across an await: nobody queues behind it (`cmd::check_pin`).
    pub pin_attempts: Mutex<crate::pin_backoff::PinBackoff>,
    /// Signalled when a SET_POWER_LEVEL SHUTDOWN asks the drive to stop.
    pub shutdown: tokio::sync::Notify,
    /// Higher-priority requests run before lower-priority ones.
    pub priorities: Arc<crate::priority::PriorityGate>,
    pub stats: Statistics,
    /// Answers by type and status with their latency, for `/metrics`.
    pub metrics: crate::metrics::RequestMetrics,
    pub capacity: Capacity,
    pub sampler: SystemSampler,
    pub serial_number: Bytes,
    pub world_wide_name: Bytes,
    pub started: Instant,
    pub port: u16,
    pub tls_port: u16,
    next_connection_id: AtomicI64,
    pub open_connections: AtomicU32,
    /// Bounds the TLS handshakes done only to refuse a client (see `server::admit`).
    pub tls_refusals: Arc<tokio::sync::Semaphore>,
    /// Reads that needed the disk and were run on a blocking thread, since start.
    pub reads_on_disk: std::sync::atomic::AtomicU64,
    /// Bounds the reads running on the disk at once (see `DISK_READS_IN_FLIGHT`).
    pub disk_reads: Arc<tokio::sync::Semaphore>,
    /// Batches open on all connections (bounded by maxBatchCountPerDevice).
    pub batch_slots: Arc<crate::batch::BatchSlots>,
    /// Connections to peer drives, for PEER2PEERPUSH.
    /// Fixed hash keys: pooled peer connections close in the same order in every run.
    pub peers: Mutex<std::collections::HashMap<PeerKey, spindle_client::Client, std::hash::BuildHasherDefault<std::hash::DefaultHasher>>>,
    /// Footprint of the writes submitted to the engine and not yet acknowledged.
    pub inflight_write_bytes: std::sync::atomic::AtomicU64,
    /// Opens connections to peers instead of TCP (a drive embedded in the simulator).
    pub dialer: Option<spindle_client::Dialer>,
    events: Mutex<VecDeque<String>>,
}

impl DriveState {
    pub fn new(config: DriveConfig, engine: Arc<dyn Engine>, identity: Identity, port: u16, tls_port: u16) -> Arc<Self> {
        DriveState::with_dialer(config, engine, identity, port, tls_port, None)
    }

    pub fn with_dialer(
        config: DriveConfig,
        engine: Arc<dyn Engine>,
        identity: Identity,
        port: u16,
        tls_port: u16,
        dialer: Option<spindle_client::Dialer>,
    ) -> Arc<Self> {
        let millis = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(1);
        Arc::new(DriveState {
            capacity: Capacity::new(&config.data_dir, config.capacity_bytes, config.reserved_bytes),
            sampler: SystemSampler::new(&config.data_dir),
            tls_port,
            config,
            engine,
            security: RwLock::new(Security::default()),
            cluster_version: AtomicI64::new(0),
            locked: Default::default(),
            power_level: std::sync::atomic::AtomicI32::new(spindle_proto::pb::command::PowerLevel::Operational as i32),
            admin: Mutex::new(()),
            pin_attempts: Mutex::new(Default::default()),
            shutdown: tokio::sync::Notify::new(),
            priorities: Default::default(),
            stats: Statistics::default(),
            metrics: Default::default(),
            serial_number: identity.serial_number,
            world_wide_name: identity.world_wide_name,
            started: Instant::now(),
            port,
            next_connection_id: AtomicI64::new(millis),
            open_connections: AtomicU32::new(0),
            tls_refusals: Arc::new(tokio::sync::Semaphore::new(TLS_REFUSALS_IN_PROGRESS)),
            reads_on_disk: Default::default(),
            disk_reads: Arc::new(tokio::sync::Semaphore::new(DISK_READS_IN_FLIGHT)),
            batch_slots: Default::default(),
            peers: Mutex::new(Default::default()),
            inflight_write_bytes: Default::default(),
            dialer,
            events: Mutex::new(VecDeque::new()),
        })
    }

    /// A connection id unique for this drive's lifetime (wall-clock milliseconds at start,
    /// then counting up, like the reference drive).
    pub fn new_connection_id(&self) -> i64 {
        self.next_connection_id.fetch_add(1, Ordering::Relaxed)
    }

    /// The id the next connection will get (the fuzz harness signs its requests with it).
    pub(crate) fn next_connection_id(&self) -> i64 {
        self.next_connection_id.load(Ordering::Relaxed)
    }

    /// Whether half or more of maxConnections are taken: connections that have not
    /// authenticated are then closed after `unauthenticated_timeout_ms`.
    pub fn connections_scarce(&self) -> bool {
        self.open_connections.load(Ordering::Acquire) >= self.config.limits.max_connections / CONNECTIONS_SCARCE_FRACTION
    }

    /// The drive's identity, as created at its first start.
    pub fn identity(&self) -> Identity {
        Identity { serial_number: self.serial_number.clone(), world_wide_name: self.world_wide_name.clone() }
    }

    /// The persistent settings as they are in memory now, with the identity.
    pub fn stored_settings(&self) -> spindle_proto::spindle::DriveState {
        let security = self.security.read();
        let mut stored = spindle_proto::spindle::DriveState {
            cluster_version: Some(self.cluster_version()),
            acl_configured: Some(!security.acl.is_empty()),
            acl: security.acl.clone(),
            lock_pin: Some(security.lock_pin.clone()),
            erase_pin: Some(security.erase_pin.clone()),
            ..Default::default()
        };
        self.identity().stamp(&mut stored);
        stored
    }

    pub fn power_level(&self) -> i32 {
        self.power_level.load(Ordering::Acquire)
    }

    pub fn cluster_version(&self) -> i64 {
        self.cluster_version.load(Ordering::Acquire)
    }

    /// Records a notable event for GETLOG MESSAGES (and the log).
    pub fn event(&self, line: String) {
        tracing::info!("{line}");
        let secs = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        let mut events = self.events.lock();
        if events.len() == EVENT_LOG_LINES {
            events.pop_front();
        }
        events.push_back(format!("{secs} {line}"));
    }

    /// The recorded events, one per line, then what the engine found at open (journal salvages
    /// and cuts) and its recoveries from storage failures since start, if any (the engine
    /// keeps no event log of its own).
    pub fn event_log(&self) -> Vec<u8> {
        let events = self.events.lock();
        let mut out = Vec::new();
        for line in events.iter() {
            out.extend_from_slice(line.as_bytes());
            out.push(b'\n');
        }
        for notice in self.engine.notices() {
            out.extend_from_slice(format!("storage: {notice}\n").as_bytes());
        }
        let recoveries = self.engine.recoveries();
        if recoveries > 0 {
            out.extend_from_slice(format!("storage: a full disk stopped writes and the store was reopened {recoveries} time(s) since start\n").as_bytes());
        }
        out
    }

    pub fn engine_disk_usage(&self) -> u64 {
        self.engine.disk_usage()
    }
}
