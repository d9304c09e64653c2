//! `spindle s3`: the S3 gateway over a cluster or one drive.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use std::collections::BTreeMap;

use spindle_s3::remote::RemoteAccess;
use spindle_s3::{CertFiles, Config, Keys, Limits};

#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct S3Args {
    #[command(subcommand)]
    command: Option<crate::s3_users::S3Command>,
    /// TOML file of settings, keyed by these flags' names (flags given override it)
    #[arg(long)]
    config: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) store: crate::s3_users::Store,
    /// Address to serve S3 on
    #[arg(long, default_value = "127.0.0.1:9000")]
    pub(crate) listen: SocketAddr,
    /// An access key (with --secret-key)
    #[arg(long, env = "SPINDLE_S3_ACCESS_KEY", requires = "secret_key")]
    access_key: Option<String>,
    /// The access key's secret
    #[arg(long, env = "SPINDLE_S3_SECRET_KEY", requires = "access_key", hide_env_values = true)]
    secret_key: Option<String>,
    /// More keys: a file of `ACCESS_KEY SECRET_KEY` lines
    #[arg(long)]
    pub(crate) keys_file: Option<PathBuf>,
    /// Users (`spindle s3 user`) sign in with keys sealed by this file (`spindle s3
    /// users-key`); without it only the keys above do
    #[arg(long, env = "SPINDLE_S3_USERS_KEY")]
    users_key: Option<PathBuf>,
    /// Unreferenced data (replaced objects, crashed uploads) is deleted this long after it lost
    /// its last reference; an upload may stall this long between two pieces of its body
    #[arg(long, default_value_t = spindle_s3::SWEEP_GRACE.as_secs())]
    sweep_grace_secs: u64,
    /// A storage class besides STANDARD and the erasure-coded pool that keeps it, as
    /// CLASS=POOL (e.g. STANDARD_IA=cold); repeat for more
    #[arg(long = "storage-class", value_name = "CLASS=POOL")]
    storage_classes: Vec<String>,
    /// Keys to a remote pool (an external S3 bucket) as POOL=FILE: a TOML file of
    /// `access_key`, `secret_key` and, for an https:// endpoint, `tls_trust` (PEM: its CA, or
    /// the system's bundle such as /etc/ssl/certs/ca-certificates.crt); repeat for more
    #[arg(long = "remote-keys", value_name = "POOL=FILE")]
    remote_keys: Vec<String>,
    /// The storage class of writes that name none [default: STANDARD]
    #[arg(long, value_name = "CLASS")]
    default_storage_class: Option<String>,
    /// How often the lifecycle pass applies buckets' lifecycle rules
    #[arg(long, default_value_t = 3600)]
    lifecycle_interval_secs: u64,
    /// Seconds in a lifecycle day (rules count days; shorter only to watch rules act in a test)
    #[arg(long, default_value_t = 86_400, hide = true)]
    lifecycle_day_secs: u64,
    /// Serve Prometheus metrics on this address (`/metrics`)
    #[arg(long)]
    metrics_listen: Option<SocketAddr>,
    /// How often the sweeper looks for such data
    #[arg(long, default_value_t = spindle_s3::SWEEP_INTERVAL.as_secs())]
    sweep_interval_secs: u64,
    /// How often the sweeper also walks every data id for chunks nothing accounts for (a
    /// write a hung drive took after its upload gave up)
    #[arg(long, default_value_t = spindle_s3::ORPHAN_SCAN_INTERVAL.as_secs())]
    orphan_scan_interval_secs: u64,
    /// Serve HTTPS with this certificate chain (PEM, with --tls-key); a renewed file is taken
    /// without a restart
    #[arg(long, requires = "tls_key")]
    pub(crate) tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM)
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Connections held at most
    #[arg(long, default_value_t = spindle_s3::admission::MAX_CONNECTIONS)]
    max_connections: usize,
    /// Of those, kept for connections that have sent a signed request: others cannot take them
    #[arg(long, default_value_t = spindle_s3::admission::RESERVED_FOR_PROVEN)]
    reserved_connections: usize,
    /// Connections one client address may hold before it sends a signed request
    #[arg(long, default_value_t = spindle_s3::admission::UNPROVEN_PER_ADDRESS)]
    unproven_per_address: usize,
    /// A request's headers must arrive within this; an idle connection is closed after it
    #[arg(long, default_value_t = spindle_s3::admission::HEADER_TIMEOUT.as_secs())]
    header_timeout_secs: u64,
    /// A request body that sends nothing, or a client that reads nothing of a response, for
    /// this long loses its connection
    #[arg(long, default_value_t = spindle_s3::admission::STALL_TIMEOUT.as_secs())]
    stall_timeout_secs: u64,
}

pub async fn run(a: S3Args) -> Result<(), Box<dyn std::error::Error>> {
    if let Some(command) = a.command {
        return crate::s3_users::run(command).await;
    }
    if let Some(file) = &a.config {
        tracing::info!("settings from {}", file.display());
    }
    let mut keys = match &a.keys_file {
        Some(path) => Keys::parse(&std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?).map_err(|e| format!("{}: {e}", path.display()))?,
        None => Keys::default(),
    };
    if let (Some(ak), Some(sk)) = (&a.access_key, &a.secret_key) {
        keys.add(ak, sk);
    }
    if keys.is_empty() {
        return Err("give an access key: --access-key and --secret-key, or --keys-file".into());
    }
    if a.sweep_grace_secs == 0 || a.sweep_interval_secs == 0 || a.orphan_scan_interval_secs == 0 || a.lifecycle_interval_secs == 0 || a.lifecycle_day_secs == 0 {
        return Err("--sweep-grace-secs, --sweep-interval-secs, --orphan-scan-interval-secs, --lifecycle-interval-secs and --lifecycle-day-secs must be at least 1".into());
    }
    let mut classes = spindle_s3::classes::StorageClasses::parse(&a.storage_classes)?;
    if let Some(class) = &a.default_storage_class {
        classes = classes.with_default(class)?;
    }
    let remotes = remote_keys(&a.remote_keys)?;
    let kv = a.store.open().await?;
    let limits = Limits {
        max_connections: a.max_connections,
        reserved_for_proven: a.reserved_connections,
        unproven_per_address: a.unproven_per_address,
        header_timeout: Duration::from_secs(a.header_timeout_secs),
        stall_timeout: Duration::from_secs(a.stall_timeout_secs),
        ..Limits::default()
    };
    limits.check()?;
    let tls = match (a.tls_cert, a.tls_key) {
        (Some(cert), Some(key)) => Some(CertFiles { cert, key }),
        _ => None,
    };
    // A certificate that does not load stops the gateway before it says it listens.
    if let Some(files) = &tls {
        files.load()?;
    }
    let scheme = if tls.is_some() { "https" } else { "http" };
    let listener = tokio::net::TcpListener::bind(a.listen).await.map_err(|e| format!("{}: {e}", a.listen))?;
    let users_key = a.users_key.as_deref().map(spindle_s3::users::UsersKey::load).transpose()?;
    let config = Config {
        kv,
        keys,
        users_key,
        sweep_grace: Duration::from_secs(a.sweep_grace_secs),
        sweep_interval: Duration::from_secs(a.sweep_interval_secs),
        orphan_scan_interval: Duration::from_secs(a.orphan_scan_interval_secs),
        limits,
        tls,
        classes,
        remotes,
        lifecycle: spindle_s3::lifecycle_pass::LifecycleSettings { every: Duration::from_secs(a.lifecycle_interval_secs), day: Duration::from_secs(a.lifecycle_day_secs) },
        metrics_listen: a.metrics_listen,
    };
    let addr = listener.local_addr()?;
    let ready = move || eprintln!("S3 gateway listening on {addr} ({scheme})");
    spindle_s3::serve(listener, config, ready, crate::cluster_access::stop_signal()).await?;
    Ok(())
}

/// A remote pool's keys as their file holds them.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RemoteKeysFile {
    access_key: String,
    secret_key: String,
    tls_trust: Option<PathBuf>,
}

/// `POOL=FILE` settings read into each remote pool's keys.
fn remote_keys(specs: &[String]) -> Result<BTreeMap<String, RemoteAccess>, String> {
    let mut out = BTreeMap::new();
    for spec in specs {
        let (pool, file) = spec.split_once('=').ok_or_else(|| format!("--remote-keys {spec:?}: expected POOL=FILE"))?;
        let path = PathBuf::from(file.trim());
        let text = std::fs::read_to_string(&path).map_err(|e| format!("remote keys {}: {e}", path.display()))?;
        let keys: RemoteKeysFile = toml::from_str(&text).map_err(|e| format!("remote keys {}: {}", path.display(), e.message()))?;
        if keys.access_key.is_empty() || keys.secret_key.is_empty() {
            return Err(format!("remote keys {}: access_key and secret_key must not be empty", path.display()));
        }
        let access = RemoteAccess { access_key: keys.access_key, secret_key: keys.secret_key, tls_trust: keys.tls_trust };
        if out.insert(pool.trim().to_string(), access).is_some() {
            return Err(format!("--remote-keys: pool {pool:?} named twice"));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn remote_keys_files() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good.toml");
        std::fs::write(&good, "access_key = \"a\"\nsecret_key = \"s\"\n").unwrap();
        let keys = super::remote_keys(&[format!("glacier={}", good.display())]).unwrap();
        assert_eq!(keys["glacier"].access_key, "a");
        let typo = dir.path().join("typo.toml");
        std::fs::write(&typo, "access_key = \"a\"\nsecret = \"s\"\n").unwrap();
        for bad in [format!("glacier={}", typo.display()), "glacier".into(), "glacier=/nonexistent".into()] {
            assert!(super::remote_keys(std::slice::from_ref(&bad)).is_err(), "{bad}");
        }
        let twice = format!("g={}", good.display());
        assert!(super::remote_keys(&[twice.clone(), twice]).unwrap_err().contains("twice"));
    }

    #[test]
    fn etcd_urls() {
        assert_eq!(crate::cluster_access::etcd_endpoints("etcd://127.0.0.1:2379").unwrap(), "http://127.0.0.1:2379");
        assert_eq!(crate::cluster_access::etcd_endpoints("etcd://a:1,b:2").unwrap(), "http://a:1,http://b:2");
        assert!(crate::cluster_access::etcd_endpoints("http://a:1").is_err());
        assert_eq!(crate::cluster_access::etcd_endpoints("etcds://a:1,b:2").unwrap(), "https://a:1,https://b:2");
    }
}
