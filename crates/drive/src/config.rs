//! Drive settings: command-line flags and an optional TOML file, with the limits as named
//! constants from `spindle_proto::limits` unless overridden.
//!
//! [`DriveConfig`] is the one description of the settings: its fields are the file's keys (serde
//! names them), its `Default` gives every default. The file and the flags given are each a
//! TOML table; the flags' table is laid over the file's and the result read into a
//! `DriveConfig` once ([`DriveConfig::load`]).

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use spindle_proto::Limits;
use toml::Table;

pub const DEFAULT_DATA_DIR: &str = "./spindle-data";
pub const DEFAULT_PORT: u16 = 8123;
pub const DEFAULT_TLS_PORT: u16 = 8443;
pub const DEFAULT_LISTEN: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);
/// Writes are refused (NO_SPACE) once the filesystem's free space would drop below this, so the
/// engine never meets ENOSPC mid-write.
pub const DEFAULT_RESERVED_BYTES: u64 = 256 * 1024 * 1024;
/// A reserve left at its default is at most this fraction of the filesystem (1/4): 256 MiB
/// kept free on a 64 MiB filesystem would refuse every put.
pub const DEFAULT_RESERVED_FS_DIVISOR: u64 = 4;
/// The least a reserve scaled to a small filesystem keeps free.
pub const MIN_SCALED_RESERVED_BYTES: u64 = 1024 * 1024;

// Limits the drive advertises by default must be ones the engine can store (fjall asserts
// its key limit: a longer key panics the thread inserting it).
const _: () = assert!(spindle_proto::limits::MAX_KEY_SIZE as usize <= spindle_engine::KEY_SIZE_MAX);
/// Bytes of writes (keys, values, versions, tags) queued or being made durable, across all
/// connections, beyond which further writes get SERVICE_BUSY: bounds the drive's memory however
/// many clients pipeline large values at once.
pub const DEFAULT_MAX_INFLIGHT_WRITE_BYTES: u64 = 256 * 1024 * 1024;

/// Which storage engine backs the drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[cfg_attr(test, derive(Serialize))]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    /// The persistent fjall engine (the product).
    #[default]
    Fjall,
    /// Everything in memory, lost at exit: for measuring the protocol path.
    Memory,
}

/// The drive's settings. Read from TOML: a key left out keeps its `Default`, an unknown one is
/// refused, `[limits]` holds the protocol's limits. (`Serialize` is for the test that every
/// setting round-trips.)
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(test, derive(Serialize))]
#[serde(default, deny_unknown_fields)]
pub struct DriveConfig {
    #[serde(rename = "data")]
    pub data_dir: PathBuf,
    pub listen: IpAddr,
    pub port: u16,
    pub tls_port: u16,
    /// Port of the Prometheus endpoint (`/metrics` over HTTP, on `listen`); none: no endpoint.
    pub metrics_port: Option<u16>,
    pub engine: EngineKind,
    pub limits: Limits,
    /// Nominal capacity; `None` means the filesystem's size.
    pub capacity_bytes: Option<u64>,
    pub reserved_bytes: u64,
    /// Whether `reserved_bytes` was configured; a default one is scaled to the filesystem
    /// at start ([`DriveConfig::scale_reserve`]). Not a key: whether the settings held
    /// `reserved_bytes` ([`DriveConfig::load`]).
    #[serde(skip)]
    pub reserved_bytes_configured: bool,
    /// Block cache for the engine.
    pub cache_bytes: u64,
    /// Bytes each of the engine's keyspaces buffers in memory before flushing them to a table:
    /// larger means fewer, bigger flushes (and more memory). All memtables together, sealed
    /// ones waiting for their flush included, are held to
    /// `spindle_engine::DEFAULT_WRITE_BUFFER_MEMTABLES` times this: writes wait beyond it.
    pub memtable_bytes: u64,
    /// Values of at least this many bytes are written once, to the engine's value log; smaller
    /// ones go through its journal (at least `spindle_engine::INLINE_VALUE_MAX` + 1; above
    /// `limits.max_value_size`, no value goes to the log).
    pub value_log_threshold_bytes: u32,
    /// Most bytes per second the value log's garbage collection copies (0: it only deletes
    /// segments nothing lives in; otherwise at least `MIN_GC_BYTES_PER_SEC`).
    pub gc_bytes_per_sec: u64,
    /// Synced bytes of each value-log segment kept in the page cache, newest first; older ones
    /// are dropped from it once durable (0: all of them; a value at least the segment size,
    /// 268435456, keeps them all, as the kernel would). Default
    /// `spindle_engine::value_log::CACHED_TAIL_BYTES` (64 MiB).
    pub value_log_cached_bytes: u64,
    /// PEM certificate chain and private key for the TLS listener; a self-signed pair is
    /// generated in the data directory when neither is given.
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    pub max_inflight_write_bytes: u64,
    /// PEM certificates trusted when a PEER2PEERPUSH asks for TLS to the peer; without it such
    /// pushes fail with REMOTE_CONNECTION_ERROR rather than trusting any certificate.
    pub p2p_tls_trust: Option<PathBuf>,
    /// How long a peer may take to answer one request of a push.
    pub p2p_timeout_ms: u64,
    /// An open batch without a new operation for this long loses its slot (and its buffered
    /// operations) when every slot is held and another START_BATCH asks for one.
    pub batch_idle_timeout_ms: u64,
    /// While connection slots are scarce, a connection silent for this long is closed; any
    /// connection whose client reads no answer for this long (its backlog full) is closed.
    pub idle_timeout_ms: u64,
    /// While connection slots are scarce, a connection that has not authenticated within this
    /// long of its accept is closed.
    pub unauthenticated_timeout_ms: u64,
    /// A frame begun must be complete within this long, or within its length at 64 KiB/s if
    /// that is longer, or the connection is closed.
    pub frame_timeout_ms: u64,
    /// Connection slots (out of maxConnections) only TLS connections may take.
    pub reserved_connections: u32,
    /// Start with factory settings when the stored ones are missing or damaged, instead of
    /// refusing to start (persist.rs says why that is the default).
    pub reset_settings: bool,
    /// Start from journals damaged where they had been made durable by keeping their intact
    /// batches and dropping (and recording) the damage, instead of refusing to start
    /// (engine::journal_check).
    pub salvage_journal: bool,
    /// For drives shared by tenants: keys outside a caller's scopes answer as absent ones do
    /// (GETNEXT/GETPREVIOUS skip them, GETKEYRANGE fills its count without them) instead of
    /// NOT_AUTHORIZED, which tells a scoped caller that a key is there (scope_view.rs).
    pub hide_out_of_scope_keys: bool,
    /// For tools written against the reference simulator: a SECURITY message's ACL is merged
    /// into the one in force (an entry replaces its identity's entry, the others stay) instead
    /// of replacing it as the protocol says (security.rs, `Security::with_merged_acl`).
    pub merge_acls: bool,
}

/// Bounds for `memtable_bytes`: below, a flush every few writes; above, the sealed memtables
/// waiting for their flush (several per keyspace) would hold gigabytes.
pub const MIN_MEMTABLE_BYTES: u64 = 64 * 1024;
pub const MAX_MEMTABLE_BYTES: u64 = 256 * 1024 * 1024;
/// Slowest copy rate for the value log's collector (other than 0, no copies): slower, one
/// record's copy would be a wait of minutes.
pub const MIN_GC_BYTES_PER_SEC: u64 = 1024 * 1024;

/// Default for `p2p_timeout_ms`.
pub const DEFAULT_P2P_TIMEOUT_MS: u64 = 10_000;
/// Default for `batch_idle_timeout_ms`: an open batch that receives nothing for this long
/// gives its device-wide slot up when another batch needs it. The reference client sends a batch's operations
/// back to back, so a minute of silence means the client is gone or stuck.
pub const DEFAULT_BATCH_IDLE_TIMEOUT_MS: u64 = 60_000;
/// Default for `idle_timeout_ms`: while connection slots are scarce, a connection that sends
/// nothing for an hour is closed.
pub const DEFAULT_IDLE_TIMEOUT_MS: u64 = 3_600_000;
/// Default for `unauthenticated_timeout_ms`: while half or more of maxConnections are taken, a
/// connection that has not authenticated (a request passing its HMAC and naming the connection,
/// or a right PIN) within this long of its accept is closed.
pub const DEFAULT_UNAUTHENTICATED_TIMEOUT_MS: u64 = 30_000;
/// Default for `frame_timeout_ms`: a frame whose first byte has arrived must be complete
/// within this long, or within the time its length takes at 64 KiB/s if longer.
pub const DEFAULT_FRAME_TIMEOUT_MS: u64 = 30_000;
/// Default for `reserved_connections`: of maxConnections, this many are kept for TLS
/// connections (an administrator can always get in, however many plain sockets are open).
/// At most an eighth of maxConnections is kept (`DriveConfig::tls_reserved_connections`), so a
/// drive configured for a handful of connections keeps them all for anyone.
pub const DEFAULT_RESERVED_CONNECTIONS: u32 = 16;

impl Default for DriveConfig {
    fn default() -> Self {
        DriveConfig {
            data_dir: PathBuf::from(DEFAULT_DATA_DIR),
            listen: DEFAULT_LISTEN,
            port: DEFAULT_PORT,
            tls_port: DEFAULT_TLS_PORT,
            metrics_port: None,
            engine: EngineKind::Fjall,
            limits: Limits::default(),
            capacity_bytes: None,
            reserved_bytes: DEFAULT_RESERVED_BYTES,
            reserved_bytes_configured: false,
            cache_bytes: 64 * 1024 * 1024,
            memtable_bytes: 64 * 1024 * 1024,
            value_log_threshold_bytes: spindle_engine::DEFAULT_LOG_THRESHOLD as u32,
            gc_bytes_per_sec: spindle_engine::DEFAULT_GC_BYTES_PER_SEC,
            value_log_cached_bytes: spindle_engine::value_log::CACHED_TAIL_BYTES,
            tls_cert: None,
            tls_key: None,
            max_inflight_write_bytes: DEFAULT_MAX_INFLIGHT_WRITE_BYTES,
            p2p_tls_trust: None,
            p2p_timeout_ms: DEFAULT_P2P_TIMEOUT_MS,
            batch_idle_timeout_ms: DEFAULT_BATCH_IDLE_TIMEOUT_MS,
            idle_timeout_ms: DEFAULT_IDLE_TIMEOUT_MS,
            unauthenticated_timeout_ms: DEFAULT_UNAUTHENTICATED_TIMEOUT_MS,
            frame_timeout_ms: DEFAULT_FRAME_TIMEOUT_MS,
            reserved_connections: DEFAULT_RESERVED_CONNECTIONS,
            reset_settings: false,
            salvage_journal: false,
            hide_out_of_scope_keys: false,
            merge_acls: false,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("invalid configuration file {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("invalid limit: {0}")]
    Limit(String),
    /// Settings that are not the file's: the command-line flags, or the two laid together.
    #[error("invalid settings: {0}")]
    Settings(String),
}

/// Keys a file may not set, with why. Each is a one-time choice given on the command line.
const COMMAND_LINE_ONLY: [(&str, &str); 2] = [
    // A file would make every later start accept lost settings silently.
    ("reset_settings", "--reset-settings"),
    // As above: a salvage drops data, so each one is asked for.
    ("salvage_journal", "--salvage-journal"),
];

/// The settings in the TOML file at `path`, as a table to lay the flags over. The file alone
/// must be a valid description: an unknown key or a value of the wrong type is refused here,
/// with its line and column, as is a key only the command line may give.
fn read_file(path: &Path) -> Result<Table, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.into(), source })?;
    let invalid = |message: String| ConfigError::Parse { path: path.into(), message };
    toml::from_str::<DriveConfig>(&text).map_err(|e| invalid(e.to_string()))?;
    let table: Table = toml::from_str(&text).map_err(|e| invalid(e.to_string()))?;
    for (key, flag) in COMMAND_LINE_ONLY {
        if table.contains_key(key) {
            return Err(invalid(format!("{key} is a one-time choice: give {flag} on the command line")));
        }
    }
    Ok(table)
}

/// Lays `top` over `base`: a key in both takes `top`'s value, except that two tables (such as
/// `[limits]`) are laid over each other key by key.
fn lay_over(base: &mut Table, top: Table) {
    for (key, value) in top {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(below)), toml::Value::Table(above)) => lay_over(below, above),
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

impl DriveConfig {
    /// The drive's settings: the defaults, overridden by the TOML file at `file` if one is
    /// given, overridden in turn by `flags`, then validated as a whole. `flags` holds the
    /// command-line flags the user gave, named as the file's keys; it must leave out the ones
    /// not given (`None` fields are left out by TOML, which has no null), or they would
    /// override the file.
    pub fn load(file: Option<&Path>, flags: &impl Serialize) -> Result<Self, ConfigError> {
        let mut settings = match file {
            Some(path) => read_file(path)?,
            None => Table::new(),
        };
        let flags = Table::try_from(flags).map_err(|e| ConfigError::Settings(format!("command-line flags: {e}")))?;
        lay_over(&mut settings, flags);
        Self::from_table(settings)
    }

    /// The config `settings` describe, keys as in the TOML file; the keys left out keep their
    /// defaults.
    fn from_table(settings: Table) -> Result<Self, ConfigError> {
        let reserved_bytes_configured = settings.contains_key("reserved_bytes");
        let mut config: DriveConfig = settings.try_into().map_err(|e: toml::de::Error| ConfigError::Settings(e.to_string()))?;
        config.reserved_bytes_configured = reserved_bytes_configured;
        config.validate()?;
        Ok(config)
    }

    /// Connection slots kept for TLS: `reserved_connections`, at most an eighth of
    /// maxConnections.
    pub fn tls_reserved_connections(&self) -> u32 {
        self.reserved_connections.min(self.limits.max_connections / 8)
    }

    /// Limits that would make the drive unusable or unsafe are refused at start-up.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let l = &self.limits;
        // Settings of which zero would make the drive unusable.
        let positive = [
            ("max_key_size", u64::from(l.max_key_size)),
            ("max_version_size", u64::from(l.max_version_size)),
            ("max_connections", u64::from(l.max_connections)),
            ("max_outstanding_read_requests", u64::from(l.max_outstanding_read_requests)),
            ("max_outstanding_write_requests", u64::from(l.max_outstanding_write_requests)),
            ("max_key_range_count", u64::from(l.max_key_range_count)),
            ("batch_idle_timeout_ms", self.batch_idle_timeout_ms),
            ("idle_timeout_ms", self.idle_timeout_ms),
            ("unauthenticated_timeout_ms", self.unauthenticated_timeout_ms),
            ("frame_timeout_ms", self.frame_timeout_ms),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err(ConfigError::Limit(format!("{name} must be at least 1")));
        }
        // The engine's metadata record stores version and tag lengths in 16 bits.
        if l.max_version_size > u16::MAX as u32 || l.max_tag_size > u16::MAX as u32 {
            return Err(ConfigError::Limit("max_version_size and max_tag_size must be below 65536".into()));
        }
        if l.max_value_size > i32::MAX as u32 / 2 || l.max_message_size > i32::MAX as u32 / 2 {
            return Err(ConfigError::Limit("max_value_size and max_message_size must be below 1 GiB".into()));
        }
        if let Some(m) = self.metrics_port.filter(|&m| m != 0) {
            if m == self.port || m == self.tls_port {
                return Err(ConfigError::Settings(format!("metrics_port {m} is also the drive's port or TLS port")));
            }
        }
        if l.max_message_size < 1024 {
            return Err(ConfigError::Limit("max_message_size must be at least 1024".into()));
        }
        if !(MIN_MEMTABLE_BYTES..=MAX_MEMTABLE_BYTES).contains(&self.memtable_bytes) {
            return Err(ConfigError::Limit(format!(
                "memtable_bytes must be between {MIN_MEMTABLE_BYTES} and {MAX_MEMTABLE_BYTES}"
            )));
        }
        if (self.value_log_threshold_bytes as usize) <= spindle_engine::INLINE_VALUE_MAX {
            return Err(ConfigError::Limit(format!(
                "value_log_threshold_bytes must be over {} (smaller values are kept in their metadata record)",
                spindle_engine::INLINE_VALUE_MAX
            )));
        }
        if self.gc_bytes_per_sec != 0 && self.gc_bytes_per_sec < MIN_GC_BYTES_PER_SEC {
            return Err(ConfigError::Limit(format!("gc_bytes_per_sec must be 0 (no copies) or at least {MIN_GC_BYTES_PER_SEC}")));
        }
        if l.max_key_size as usize > spindle_engine::KEY_SIZE_MAX {
            return Err(ConfigError::Limit(format!(
                "max_key_size {} is over the storage engine's limit of {}",
                l.max_key_size,
                spindle_engine::KEY_SIZE_MAX
            )));
        }
        // What the memtables hold is flushed to the disk after the puts were admitted: a
        // reserve smaller than that lets the engine's own flushes fill the disk, and then
        // even deletes fail. 0 is the explicit "no reserve" (the engine meets ENOSPC itself).
        if self.reserved_bytes_configured && self.reserved_bytes != 0 && self.reserved_bytes < self.write_buffer_bytes() {
            return Err(ConfigError::Limit(format!(
                "reserved_bytes {} is below the engine's write buffer of {} bytes ({} memtables of memtable_bytes {}): \
                 raise reserved_bytes or lower memtable_bytes",
                self.reserved_bytes,
                self.write_buffer_bytes(),
                spindle_engine::DEFAULT_WRITE_BUFFER_MEMTABLES,
                self.memtable_bytes
            )));
        }
        Ok(())
    }

    /// Most bytes the engine's memtables hold before writes wait for their flush.
    pub fn write_buffer_bytes(&self) -> u64 {
        spindle_engine::DEFAULT_WRITE_BUFFER_MEMTABLES.max(spindle_engine::MIN_WRITE_BUFFER_MEMTABLES) * self.memtable_bytes
    }

    /// Fits a reserve left at its default to a filesystem of `fs_bytes`: at least the write
    /// buffer, at most [`DEFAULT_RESERVED_FS_DIVISOR`]th of the filesystem, with the memtables
    /// made smaller when the write buffer would not fit under that. Returns what it changed,
    /// for the log; a configured reserve is left as it is (`validate` checked it).
    pub fn scale_reserve(&mut self, fs_bytes: u64) -> Option<String> {
        if self.reserved_bytes_configured {
            return None;
        }
        let wanted = self.reserved_bytes.max(self.write_buffer_bytes());
        let ceiling = (fs_bytes / DEFAULT_RESERVED_FS_DIVISOR).max(MIN_SCALED_RESERVED_BYTES);
        if wanted <= ceiling {
            self.reserved_bytes = wanted;
            return None;
        }
        // Memtables of a quarter of the reserve: every admitted value is written twice (journal,
        // then its flush), and the flush's blob and table files, compaction's new files before
        // the old go, and the writes admitted between two readings of the free space must all
        // fit in it, or the engine meets ENOSPC itself and stops.
        let memtables = self.write_buffer_bytes() / self.memtable_bytes;
        let memtable_before = self.memtable_bytes;
        self.memtable_bytes = (ceiling / (4 * memtables)).clamp(MIN_MEMTABLE_BYTES, self.memtable_bytes);
        self.reserved_bytes = ceiling.max(4 * self.write_buffer_bytes());
        Some(format!(
            "the filesystem holds {fs_bytes} bytes: keeping {} bytes free for the engine (reserved_bytes) with memtables of {} bytes, \
             instead of {wanted} bytes and memtables of {memtable_before} bytes",
            self.reserved_bytes,
            self.memtable_bytes,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The drive's settings from a file holding `toml` and from `flags` (a TOML table too).
    fn load(toml: &str, flags: &str) -> Result<DriveConfig, ConfigError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("drive.toml");
        std::fs::write(&path, toml).unwrap();
        DriveConfig::load(Some(&path), &toml::from_str::<Table>(flags).unwrap())
    }

    #[test]
    fn file_overrides_defaults_and_rejects_unknown_keys() {
        let c = load("port = 9000\ncapacity_bytes = 1000000\n[limits]\nmax_key_size = 100\n", "").unwrap();
        assert_eq!((c.port, c.capacity_bytes, c.limits.max_key_size), (9000, Some(1_000_000), 100));
        assert_eq!(c.limits.max_value_size, spindle_proto::limits::MAX_VALUE_SIZE);
        assert!(!c.reserved_bytes_configured);

        assert!(matches!(load("prot = 9000\n", ""), Err(ConfigError::Parse { .. })));
        assert!(matches!(load("[limits]\nmax_key_size = 0\n", ""), Err(ConfigError::Limit(_))));
        // memtable_bytes is taken within its bounds and refused outside them.
        assert_eq!(load(&format!("memtable_bytes = {MIN_MEMTABLE_BYTES}\n"), "").unwrap().memtable_bytes, MIN_MEMTABLE_BYTES);
        for outside in [MIN_MEMTABLE_BYTES - 1, MAX_MEMTABLE_BYTES + 1] {
            assert!(matches!(load(&format!("memtable_bytes = {outside}\n"), ""), Err(ConfigError::Limit(_))), "{outside}");
        }
    }

    /// Goal: every setting is read into the config, under the key it has today. Method: a file
    /// setting every key the file may hold, and flags setting the two it may not, each to
    /// something other than its default; the config read from them writes back exactly those
    /// keys and values. A new setting fails this test until it is added to `FILE`.
    #[test]
    fn every_setting_round_trips() {
        const FILE: &str = r#"
            data = "/srv/spindle"
            listen = "0.0.0.0"
            port = 9000
            tls_port = 9443
            metrics_port = 9100
            engine = "memory"
            capacity_bytes = 1000000000
            reserved_bytes = 536870912
            cache_bytes = 1048576
            memtable_bytes = 1048576
            value_log_threshold_bytes = 8192
            gc_bytes_per_sec = 2097152
            value_log_cached_bytes = 1048576
            tls_cert = "/etc/spindle/cert.pem"
            tls_key = "/etc/spindle/key.pem"
            max_inflight_write_bytes = 1048576
            p2p_tls_trust = "/etc/spindle/peers.pem"
            p2p_timeout_ms = 1
            batch_idle_timeout_ms = 2
            idle_timeout_ms = 3
            unauthenticated_timeout_ms = 4
            frame_timeout_ms = 5
            reserved_connections = 6
            hide_out_of_scope_keys = true
            merge_acls = true
            [limits]
            max_key_size = 100
            max_value_size = 101
            max_version_size = 102
            max_tag_size = 103
            max_connections = 104
            max_outstanding_read_requests = 105
            max_outstanding_write_requests = 106
            max_message_size = 1070
            max_key_range_count = 108
            max_identity_count = 109
            max_operation_count_per_batch = 110
            max_batch_count_per_device = 111
            max_batch_size = 112
            max_deletes_per_batch = 113
        "#;
        const FLAGS: &str = "reset_settings = true\nsalvage_journal = true\n";
        let config = load(FILE, FLAGS).unwrap();
        assert!(config.reserved_bytes_configured);

        let mut given: Table = toml::from_str(FILE).unwrap();
        lay_over(&mut given, toml::from_str(FLAGS).unwrap());
        assert_eq!(Table::try_from(&config).unwrap(), given);
        let defaults = flatten(&Table::try_from(DriveConfig::default()).unwrap());
        for (key, value) in flatten(&given) {
            assert_ne!(defaults.get(&key), Some(&value), "{key} is set to its default");
        }
    }

    /// `table`'s values by dotted key (`limits.max_key_size`).
    fn flatten(table: &Table) -> std::collections::BTreeMap<String, toml::Value> {
        let mut flat = std::collections::BTreeMap::new();
        for (key, value) in table {
            match value {
                toml::Value::Table(inner) => flat.extend(flatten(inner).into_iter().map(|(k, v)| (format!("{key}.{k}"), v))),
                value => {
                    flat.insert(key.clone(), value.clone());
                }
            }
        }
        flat
    }

    /// A flag overrides the file's value for its key, in `[limits]` too, and leaves the file's
    /// other keys as they were; a reserve given by either is a configured one.
    #[test]
    fn flags_override_the_file_key_by_key() {
        let file = "port = 9000\ntls_port = 9443\nhide_out_of_scope_keys = true\n[limits]\nmax_key_size = 100\nmax_tag_size = 50\n";
        let c = load(file, "port = 9001\n[limits]\nmax_tag_size = 60\n").unwrap();
        assert_eq!((c.port, c.tls_port, c.hide_out_of_scope_keys), (9001, 9443, true));
        assert_eq!((c.limits.max_key_size, c.limits.max_tag_size), (100, 60));
        assert_eq!(c.limits.max_value_size, spindle_proto::limits::MAX_VALUE_SIZE);
        assert!(!c.reserved_bytes_configured);

        assert!(load("", "reserved_bytes = 0\n").unwrap().reserved_bytes_configured);
        assert!(load("reserved_bytes = 0\n", "port = 1\n").unwrap().reserved_bytes_configured);
        // Validated once, laid together: a flag may mend what the file alone would fail.
        assert!(load("memtable_bytes = 1\n", "memtable_bytes = 1048576\n").is_ok());
        assert!(matches!(load("value_log_threshold_bytes = 2048\n", ""), Err(ConfigError::Limit(_))));
        assert_eq!(load("value_log_threshold_bytes = 2049\n", "").unwrap().value_log_threshold_bytes, 2049);
        assert!(matches!(load("gc_bytes_per_sec = 7\n", ""), Err(ConfigError::Limit(_))));
        assert_eq!(load("gc_bytes_per_sec = 0\n", "").unwrap().gc_bytes_per_sec, 0);
        assert!(matches!(load("", "memtable_bytes = 1\n"), Err(ConfigError::Limit(_))));
        assert!(matches!(load("", "prot = 1\n"), Err(ConfigError::Settings(m)) if m.contains("prot")));
        // Without a file, the flags alone.
        let flags: Table = toml::from_str("port = 9001\n").unwrap();
        assert_eq!(DriveConfig::load(None, &flags).unwrap().port, 9001);
    }

    /// An unknown key, one the config keeps but does not read, and one only the command line
    /// may give are refused in a file, each named.
    #[test]
    fn a_file_is_refused_unknown_keys_and_command_line_choices() {
        let refused = |toml: &str| match load(toml, "") {
            Err(ConfigError::Parse { message, .. }) => message,
            other => panic!("{toml:?} gave {other:?}"),
        };
        assert!(refused("prot = 9000\n").contains("unknown field `prot`"));
        assert!(refused("data_dir = \"/srv\"\n").contains("unknown field `data_dir`"));
        assert!(refused("reserved_bytes_configured = true\n").contains("unknown field `reserved_bytes_configured`"));
        let in_limits = refused("[limits]\nmax_key_size = 100\nmax_pin_size = 64\n");
        assert!(in_limits.contains("unknown field `max_pin_size`") && in_limits.contains("line 3"), "{in_limits}");
        assert!(refused("port = \"high\"\n").contains("line 1"));
        assert_eq!(
            refused("reset_settings = true\n"),
            "reset_settings is a one-time choice: give --reset-settings on the command line"
        );
        assert_eq!(
            refused("salvage_journal = false\n"),
            "salvage_journal is a one-time choice: give --salvage-journal on the command line"
        );
        // Given as flags, they are taken.
        let c = load("", "reset_settings = true\nsalvage_journal = true\n").unwrap();
        assert!(c.reset_settings && c.salvage_journal);
    }

    /// A default reserve shrinks to a small filesystem with memtables to match, keeping the
    /// write buffer under a quarter of it; a configured one below the write buffer is refused.
    #[test]
    fn the_reserve_fits_the_filesystem_and_covers_the_write_buffer() {
        let mut small = DriveConfig::default();
        let note = small.scale_reserve(64 << 20);
        assert!(note.is_some_and(|n| n.contains("reserved_bytes")));
        assert_eq!(small.reserved_bytes, 16 << 20);
        assert!(4 * small.write_buffer_bytes() <= small.reserved_bytes, "{small:?}");
        let mut large = DriveConfig::default();
        assert_eq!(large.scale_reserve(1 << 40), None);
        assert_eq!((large.reserved_bytes, large.memtable_bytes), (DEFAULT_RESERVED_BYTES, 64 << 20));

        let below = DriveConfig { reserved_bytes: 64 << 20, reserved_bytes_configured: true, ..DriveConfig::default() };
        assert!(matches!(below.validate(), Err(ConfigError::Limit(m)) if m.contains("write buffer")));
        let none = DriveConfig { reserved_bytes: 0, reserved_bytes_configured: true, ..DriveConfig::default() };
        assert!(none.validate().is_ok());
        let mut configured = DriveConfig { reserved_bytes: 300 << 20, reserved_bytes_configured: true, ..DriveConfig::default() };
        assert_eq!(configured.scale_reserve(64 << 20), None);
        assert_eq!(configured.reserved_bytes, 300 << 20);
    }
}
