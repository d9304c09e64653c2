//! How a command reaches a cluster: its etcd, its name, and (for a secured cluster) the
//! credentials it connects to drives with; and what long-running cluster commands share
//! (waiting for the map, the stop signal, the coordinator's metrics endpoint).

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use spindle_client::ClientConfig;
use spindle_cluster::coordinator::CoordinatorConfig;
use spindle_cluster::{ClusterMap, Control, Credentials, Store, StoreConfig};

#[derive(Args, Clone)]
pub struct Etcd {
    /// etcd client URLs, comma-separated
    #[arg(long, env = "SPINDLE_ETCD", default_value = "http://127.0.0.1:2379", global = true)]
    pub etcd: String,
    /// Name of the cluster (several may share one etcd)
    #[arg(long, env = "SPINDLE_CLUSTER", default_value = "spindle", global = true)]
    pub cluster: String,
    /// The cluster's credentials directory (identity.json, ca.pem; `init --credentials` makes
    /// it): needed to reach the drives of a secured cluster
    #[arg(long, env = "SPINDLE_CREDENTIALS", global = true)]
    pub credentials: Option<PathBuf>,
    /// Machine-readable output
    #[arg(long, global = true)]
    pub json: bool,
}

impl Etcd {
    pub async fn control(&self) -> Result<Control, Box<dyn std::error::Error>> {
        connect(&self.etcd, &self.cluster, self.credentials.as_deref()).await
    }

    /// The credentials of the cluster `map` describes: none for an open cluster, those given
    /// (and checked to be this cluster's) for a secured one.
    pub fn credentials_for(&self, map: &ClusterMap) -> Result<Option<Credentials>, Box<dyn std::error::Error>> {
        credentials_for(&self.cluster, self.credentials.as_deref(), map)
    }

    /// How to connect to the cluster's drives.
    pub fn client_config(&self, map: &ClusterMap, timeout: Duration) -> Result<ClientConfig, Box<dyn std::error::Error>> {
        Ok(match self.credentials_for(map)? {
            Some(c) => c.client_config(timeout),
            None => ClientConfig { timeout, ..ClientConfig::default() },
        })
    }

    pub async fn store(&self) -> Result<Store, Box<dyn std::error::Error>> {
        let control = self.control().await?;
        open_store(control, &self.cluster, self.credentials.as_deref()).await
    }
}

/// Whether etcd `endpoints` are reached over TLS (`https://`).
pub fn over_tls(endpoints: &str) -> bool {
    endpoints.split(',').any(|e| e.trim().starts_with("https://"))
}

/// The cluster's etcd: over TLS (checked against the credentials' CA) when the endpoints are
/// `https://`, as the cluster's etcd user when the credentials hold one.
pub async fn connect(endpoints: &str, cluster: &str, credentials: Option<&std::path::Path>) -> Result<Control, Box<dyn std::error::Error>> {
    let tls = over_tls(endpoints);
    let access = match credentials {
        Some(dir) => Credentials::load(dir)?.etcd_access(tls)?,
        None if tls => return Err(format!("{endpoints}: an https etcd needs the cluster's credentials (its ca.pem): --credentials DIR").into()),
        None => Default::default(),
    };
    Ok(Control::connect_with(endpoints, cluster, access).await.map_err(|e| format!("{endpoints}: {e}"))?)
}

/// The credentials for `map`'s cluster named `cluster`, from `dir` if given.
pub fn credentials_for(cluster: &str, dir: Option<&std::path::Path>, map: &ClusterMap) -> Result<Option<Credentials>, Box<dyn std::error::Error>> {
    let Some(expected) = &map.security else { return Ok(None) };
    let Some(dir) = dir else {
        return Err(format!("cluster {cluster:?} is secured: give its credentials directory (--credentials DIR or SPINDLE_CREDENTIALS)").into());
    };
    let creds = Credentials::load(dir)?;
    if !expected.admits(&creds.fingerprint()?) {
        return Err(format!("{}: these are not cluster {cluster:?}'s credentials (its identity or CA differs)", dir.display()).into());
    }
    Ok(Some(creds))
}

/// A cluster client, with the cluster's credentials when it is secured.
pub async fn open_store(control: Control, cluster: &str, credentials: Option<&std::path::Path>) -> Result<Store, Box<dyn std::error::Error>> {
    let (map, _) = control.load_map().await?;
    let mut config = StoreConfig::default();
    if let Some(c) = credentials_for(cluster, credentials, &map)? {
        config.client = c.client_config(config.client.timeout);
    }
    Ok(Store::open(control, config).await?)
}

/// The coordinator's `/metrics` on `addr`.
pub(crate) async fn serve_metrics(config: &CoordinatorConfig, addr: std::net::SocketAddr) -> Result<spindle_metrics::Endpoint, Box<dyn std::error::Error>> {
    let mut registry = spindle_metrics::Registry::default();
    registry.register_collector(Box::new(config.metrics.clone()));
    Ok(spindle_metrics::serve(addr, std::sync::Arc::new(registry)).await?)
}

/// Ctrl-C or SIGTERM.
pub(crate) async fn stop_signal() {
    let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) else {
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

/// Waits (up to `limit`) for the coordinator to have committed a map that passes `done`.
pub(crate) async fn wait_for(control: &Control, done: impl Fn(&ClusterMap) -> bool, limit: Duration) -> Result<ClusterMap, Box<dyn std::error::Error>> {
    let start = std::time::Instant::now();
    loop {
        let (map, _) = control.load_map().await?;
        if done(&map) {
            return Ok(map);
        }
        if start.elapsed() >= limit {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (_, leader) = control.coordinators().await?;
    Err(match leader {
        None => "no coordinator is running: the change waits in etcd until one is (spindle cluster coordinator)".into(),
        Some(l) => format!("coordinator {l} has not finished the change within {limit:?} (spindle cluster status shows where it is)").into(),
    })
}

/// `etcd://a:2379,b:2379` (or `etcds://`, over TLS) as the etcd client's endpoint list.
pub(crate) fn etcd_endpoints(url: &str) -> Result<String, String> {
    let (scheme, hosts) = match (url.strip_prefix("etcds://"), url.strip_prefix("etcd://")) {
        (Some(hosts), _) => ("https", hosts),
        (None, Some(hosts)) => ("http", hosts),
        _ => return Err(format!("{url}: expected etcd://HOST:PORT[,HOST:PORT...] (or etcds:// for TLS)")),
    };
    if hosts.is_empty() {
        return Err(format!("{url}: no etcd host"));
    }
    Ok(hosts.split(',').map(|h| format!("{scheme}://{h}")).collect::<Vec<_>>().join(","))
}
