//! A Spindle cluster as a bench target, through its client (`spindle_cluster::Store`):
//! quorum writes (always WRITETHROUGH on every replica: the cluster acknowledges only durable
//! writes) and quorum reads. How a put is written is the target's prefix:
//!
//! - `cluster:ETCD_URLS[#NAME]`: unconditional puts;
//! - `cluster-cas:...`: each put a compare-and-swap, "if absent" first and then on the version
//!   a refusal names, as a client that does not know the key's version pays;
//! - `cluster-batch:...`: each put a batch of one operation (`Store::batch`), which takes the
//!   batch's path: its entries carry their members, and its writer leaves the batch's record
//!   before it acknowledges it (docs/design/batches.md).
//!
//! One cluster client is shared by every session (it keeps one pipelined connection per
//! drive). A secured cluster is reached with the credentials the `spindle` commands take
//! ([`CREDENTIALS_ENV`]): its etcd user (over TLS for https:// endpoints) and its identity,
//! over TLS to every drive.

use std::sync::Arc;

use bytes::Bytes;
use spindle_client::Synchronization;
use spindle_cluster::{BatchOp, ClusterError, Condition};

use crate::session::{Store, StoreFuture};
use crate::BenchError;

/// The variable naming a secured cluster's credentials directory, as for `spindle cluster`.
pub const CREDENTIALS_ENV: &str = "SPINDLE_CREDENTIALS";

/// Compare-and-swap tries of one conditional bench put (each refusal names the newer version).
const CAS_TRIES: usize = 4;

/// How the target's puts are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Writes {
    Plain,
    Conditional,
    Batch,
}

const PREFIXES: [(&str, Writes); 3] = [("cluster:", Writes::Plain), ("cluster-cas:", Writes::Conditional), ("cluster-batch:", Writes::Batch)];

/// Whether `target` names a cluster.
pub fn is_cluster(target: &str) -> bool {
    PREFIXES.iter().any(|(p, _)| target.starts_with(p))
}

/// The cluster `target` names, connected; `None` for any other target.
pub async fn connect(target: &str) -> Result<Option<Arc<dyn Store>>, BenchError> {
    let Some((spec, writes)) = PREFIXES.iter().find_map(|(p, w)| target.strip_prefix(p).map(|s| (s, *w))) else {
        return Ok(None);
    };
    let (endpoints, name) = spec.split_once('#').unwrap_or((spec, "spindle"));
    let mut config = spindle_cluster::StoreConfig::default();
    let control = match std::env::var_os(CREDENTIALS_ENV) {
        Some(dir) => {
            let creds = spindle_cluster::Credentials::load(std::path::Path::new(&dir)).map_err(cluster_err)?;
            config.client = creds.client_config(config.client.timeout);
            let tls = endpoints.split(',').any(|e| e.trim().starts_with("https://"));
            spindle_cluster::Control::connect_with(endpoints, name, creds.etcd_access(tls).map_err(cluster_err)?).await.map_err(cluster_err)?
        }
        None => spindle_cluster::Control::connect(endpoints, name).await.map_err(cluster_err)?,
    };
    let store = spindle_cluster::Store::open(control, config).await.map_err(cluster_err)?;
    Ok(Some(Arc::new(ClusterStore { store, writes })))
}

fn cluster_err(e: impl std::fmt::Display) -> BenchError {
    BenchError::Invalid(format!("cluster: {e}"))
}

struct ClusterStore {
    store: spindle_cluster::Store,
    writes: Writes,
}

impl Store for ClusterStore {
    fn put(&self, key: Bytes, value: Bytes, _sync: Synchronization) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            match self.writes {
                Writes::Plain => self.store.put(&key, value, Condition::None).await.map(drop).map_err(|e| e.to_string()),
                Writes::Batch => self.store.batch(vec![BatchOp::Put { key, value, condition: Condition::None }]).await.map(drop).map_err(|e| e.to_string()),
                Writes::Conditional => {
                    let mut condition = Condition::Absent;
                    for _ in 0..CAS_TRIES {
                        match self.store.put(&key, value.clone(), condition).await {
                            Err(ClusterError::VersionMismatch { current }) => condition = current.map_or(Condition::Absent, Condition::Version),
                            done => return done.map(drop).map_err(|e| e.to_string()),
                        }
                    }
                    Err(format!("the key changed under {CAS_TRIES} compare-and-swaps in a row"))
                }
            }
        })
    }

    fn get(&self, key: Bytes) -> StoreFuture<'_, Option<Bytes>> {
        Box::pin(async move { Ok(self.store.get(&key).await.map_err(|e| e.to_string())?.map(|v| v.value)) })
    }

    fn scan(&self, start: Bytes, count: usize) -> StoreFuture<'_, Vec<Bytes>> {
        Box::pin(async move { self.store.range(&start, None, count).await.map_err(|e| e.to_string()) })
    }

    fn flush(&self) -> StoreFuture<'_, ()> {
        // Every acknowledged cluster write is already durable on a write quorum.
        Box::pin(async { Ok(()) })
    }

    fn describe(&self) -> StoreFuture<'_, serde_json::Value> {
        Box::pin(async move {
            let map = self.store.map();
            Ok(serde_json::json!({
                "kind": "spindle-cluster", "epoch": map.epoch, "drives": map.members.len(),
                "partitions": map.partitions, "replicas": map.replicas, "write_quorum": map.write_quorum,
                "writes": format!("{:?}", self.writes).to_lowercase(),
            }))
        })
    }
}
