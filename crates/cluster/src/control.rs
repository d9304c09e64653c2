//! The cluster's state in etcd, and nowhere else: the map (members, placement, epoch) under one
//! key changed only by transactions that compare the revision it was read at, each drive's
//! health as the coordinator sees it, member changes waiting for the coordinator, and the
//! coordinator's election.
//!
//! Layout under `/spindle/<cluster>/`: `map`, `health/<drive>`, `changes/<drive>`, `move` (the
//! move under way), `last-move` (the last one finished), `leader` (etcd's election prefix), `coordinators/<name>` (live
//! coordinators, on their lease).

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use etcd_client::{Client, Compare, CompareOp, GetOptions, Txn, TxnOp};
use serde::{Deserialize, Serialize};

use crate::map::{ClusterMap, Member};
use crate::{ClusterError, SettingError};

/// How a drive looks to the coordinator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HealthState {
    Up,
    Down,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    pub state: HealthState,
    /// Unix milliseconds of the last answer the coordinator had from the drive.
    pub last_seen_ms: u64,
    /// The drive's cluster version when last seen.
    pub cluster_version: i64,
    /// Set while the coordinator repairs what the drive missed; cleared when done.
    #[serde(default)]
    pub repairing: bool,
}

/// The move under way, as far as it has gone (`move` in etcd; the map holds what moves
/// where). A leader that takes over resumes from it: partitions done at the move's epoch are
/// not copied again.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MoveProgress {
    /// The epoch the move started at (the map's while it is under way).
    pub epoch: u64,
    /// Partitions moving, and those copied and brought up to date.
    pub total: u32,
    pub done: std::collections::BTreeSet<u32>,
    /// Value bytes the drives pushed to each other, and entries copied.
    pub bytes: u64,
    pub entries: u64,
    /// Entries that the catch-up pass after the pushes copied (writes that reached the old
    /// replicas and not the new, while the pushes ran).
    pub repaired: u64,
    /// Unix milliseconds when the move started and when this was last written.
    pub started_ms: u64,
    pub updated_ms: u64,
    /// The bandwidth limit it runs at (bytes per second, 0 for none).
    pub rate_limit: u64,
}

impl MoveProgress {
    /// Seconds left at the pace so far (by partitions), if any is done.
    pub fn eta_secs(&self) -> Option<f64> {
        let done = self.done.len() as f64;
        (done > 0.0).then(|| (self.updated_ms.saturating_sub(self.started_ms)) as f64 / 1000.0 / done * (f64::from(self.total) - done))
    }
}

/// A member change asked of the coordinator (`spindle cluster add-drive` / `remove-drive`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "change", rename_all = "kebab-case")]
pub enum MemberChange {
    Add(Member),
    Remove { id: String },
}

pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

pub use crate::etcd_auth::EtcdAccess;

/// A connection to the cluster's etcd: to one member at a time, chosen among the endpoints
/// given; [`Control::reconnect`] moves to another that answers when it fails. (A channel
/// balanced over all endpoints kept sending some requests to a dead member.)
#[derive(Clone)]
pub struct Control {
    pub(crate) etcd: Client,
    endpoints: Vec<String>,
    prefix: String,
    name: String,
    access: EtcdAccess,
}

/// How long one etcd member gets to answer before the next is tried.
const MEMBER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

impl Control {
    /// `endpoints`: etcd client URLs, comma-separated (`http://127.0.0.1:2379,...`).
    pub async fn connect(endpoints: &str, cluster: &str) -> Result<Control, ClusterError> {
        Control::connect_with(endpoints, cluster, EtcdAccess::default()).await
    }

    /// As `connect`, over TLS and as a user when `access` says so.
    pub async fn connect_with(endpoints: &str, cluster: &str, access: EtcdAccess) -> Result<Control, ClusterError> {
        if cluster.is_empty() || cluster.contains('/') {
            return Err(SettingError::ClusterName(cluster.to_string()).into());
        }
        let list: Vec<String> =
            endpoints.split(',').map(|e| e.trim().trim_start_matches("etcd://").to_string()).filter(|e| !e.is_empty()).collect();
        if list.is_empty() {
            return Err(SettingError::NoEndpoint.into());
        }
        let prefix = format!("/spindle/{cluster}/");
        let etcd = live_member(&list, &prefix, &access).await?;
        Ok(Control { etcd, endpoints: list, prefix, name: cluster.to_string(), access })
    }

    /// The same cluster through a member that answers now (the first of the endpoints, in a
    /// random order, that serves a read).
    pub async fn reconnect(&self) -> Result<Control, ClusterError> {
        let etcd = live_member(&self.endpoints, &self.prefix, &self.access).await?;
        Ok(Control { etcd, ..self.clone() })
    }

    pub fn key(&self, rest: &str) -> String {
        format!("{}{rest}", self.prefix)
    }

    /// Writes the first map; refuses if the cluster exists.
    pub async fn init(&self, map: &ClusterMap) -> Result<(), ClusterError> {
        let key = self.key("map");
        let txn = Txn::new()
            .when([Compare::version(key.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key, encode(map)?, None)]);
        if self.etcd.kv_client().txn(txn).await?.succeeded() {
            Ok(())
        } else {
            Err(ClusterError::AlreadyExists(self.name.clone()))
        }
    }

    /// The map and the revision it was last changed at.
    pub async fn load_map(&self) -> Result<(ClusterMap, i64), ClusterError> {
        let resp = self.etcd.kv_client().get(self.key("map"), None).await?;
        let kv = resp.kvs().first().ok_or_else(|| ClusterError::NotInitialized(self.name.clone()))?;
        Ok((decode(kv.value())?, kv.mod_revision()))
    }

    /// Replaces the map if it is still the one read at `revision`. `false`: someone else
    /// changed it first (read again and recompute).
    pub async fn replace_map(&self, revision: i64, map: &ClusterMap) -> Result<bool, ClusterError> {
        let key = self.key("map");
        let txn = Txn::new()
            .when([Compare::mod_revision(key.clone(), CompareOp::Equal, revision)])
            .and_then([TxnOp::put(key, encode(map)?, None)]);
        Ok(self.etcd.kv_client().txn(txn).await?.succeeded())
    }

    pub async fn health(&self) -> Result<BTreeMap<String, Health>, ClusterError> {
        let prefix = self.key("health/");
        let resp = self.etcd.kv_client().get(prefix.clone(), Some(GetOptions::new().with_prefix())).await?;
        let mut out = BTreeMap::new();
        for kv in resp.kvs() {
            let id = kv.key_str()?.trim_start_matches(&prefix).to_string();
            out.insert(id, decode(kv.value())?);
        }
        Ok(out)
    }

    pub async fn set_health(&self, id: &str, health: &Health) -> Result<(), ClusterError> {
        self.etcd.kv_client().put(self.key(&format!("health/{id}")), encode(health)?, None).await?;
        Ok(())
    }

    pub async fn clear_health(&self, id: &str) -> Result<(), ClusterError> {
        self.etcd.kv_client().delete(self.key(&format!("health/{id}")), None).await?;
        Ok(())
    }

    /// Asks the coordinator for a member change; an added member is validated first.
    pub async fn request_change(&self, change: &MemberChange) -> Result<(), ClusterError> {
        let id = match change {
            MemberChange::Add(m) => {
                m.validate()?;
                &m.id
            }
            MemberChange::Remove { id } => id,
        };
        self.etcd.kv_client().put(self.key(&format!("changes/{id}")), encode(change)?, None).await?;
        Ok(())
    }

    /// Waiting member changes, oldest first, with the etcd key that holds each.
    pub async fn pending_changes(&self) -> Result<Vec<(String, MemberChange)>, ClusterError> {
        let options = GetOptions::new().with_prefix().with_sort(etcd_client::SortTarget::Create, etcd_client::SortOrder::Ascend);
        let resp = self.etcd.kv_client().get(self.key("changes/"), Some(options)).await?;
        resp.kvs()
            .iter()
            .map(|kv| Ok((kv.key_str()?.to_string(), decode(kv.value())?)))
            .collect()
    }

    /// Commits `map` (if still at `revision`) and removes the change that led to it, in one
    /// transaction: a coordinator that dies in between leaves either both or neither.
    pub async fn apply_change(&self, revision: i64, map: &ClusterMap, change_key: &str) -> Result<bool, ClusterError> {
        let key = self.key("map");
        let txn = Txn::new()
            .when([Compare::mod_revision(key.clone(), CompareOp::Equal, revision)])
            .and_then([TxnOp::put(key, encode(map)?, None), TxnOp::delete(change_key, None)]);
        Ok(self.etcd.kv_client().txn(txn).await?.succeeded())
    }

    /// Commits `map` if still at `revision` and sets or clears the move's progress with it,
    /// in one transaction (starting a move, flipping it, rolling it back).
    pub async fn commit_move(&self, revision: i64, map: &ClusterMap, progress: Option<&MoveProgress>) -> Result<bool, ClusterError> {
        let key = self.key("map");
        let progress_op = match progress {
            Some(p) => TxnOp::put(self.key("move"), encode(p)?, None),
            None => TxnOp::delete(self.key("move"), None),
        };
        let txn = Txn::new()
            .when([Compare::mod_revision(key.clone(), CompareOp::Equal, revision)])
            .and_then([TxnOp::put(key, encode(map)?, None), progress_op]);
        Ok(self.etcd.kv_client().txn(txn).await?.succeeded())
    }

    /// Flips a move: commits `map` (if still at `revision`), drops the move's progress and
    /// keeps it, with its end time, as the last move (`status` and `bench migrate` read it).
    pub async fn commit_flip(&self, revision: i64, map: &ClusterMap, finished: &MoveProgress) -> Result<bool, ClusterError> {
        let key = self.key("map");
        let txn = Txn::new().when([Compare::mod_revision(key.clone(), CompareOp::Equal, revision)]).and_then([
            TxnOp::put(key, encode(map)?, None),
            TxnOp::delete(self.key("move"), None),
            TxnOp::put(self.key("last-move"), encode(finished)?, None),
        ]);
        Ok(self.etcd.kv_client().txn(txn).await?.succeeded())
    }

    /// The last move that finished, if any.
    pub async fn last_move(&self) -> Result<Option<MoveProgress>, ClusterError> {
        let resp = self.etcd.kv_client().get(self.key("last-move"), None).await?;
        resp.kvs().first().map(|kv| decode(kv.value())).transpose()
    }

    /// The move under way, if any.
    pub async fn progress(&self) -> Result<Option<MoveProgress>, ClusterError> {
        let resp = self.etcd.kv_client().get(self.key("move"), None).await?;
        resp.kvs().first().map(|kv| decode(kv.value())).transpose()
    }

    /// Records how far the move at `progress.epoch` has gone (a record of another epoch than
    /// the map's is ignored by whoever reads it).
    pub async fn save_progress(&self, progress: &MoveProgress) -> Result<(), ClusterError> {
        self.etcd.kv_client().put(self.key("move"), encode(progress)?, None).await?;
        Ok(())
    }

    pub async fn drop_change(&self, change_key: &str) -> Result<(), ClusterError> {
        self.etcd.kv_client().delete(change_key, None).await?;
        Ok(())
    }

    /// Names of the coordinators alive now, and which one leads.
    pub async fn coordinators(&self) -> Result<(Vec<String>, Option<String>), ClusterError> {
        let resp = self.etcd.kv_client().get(self.key("coordinators/"), Some(GetOptions::new().with_prefix())).await?;
        let names = resp.kvs().iter().filter_map(|kv| kv.value_str().ok().map(str::to_string)).collect();
        let leader = match self.etcd.election_client().leader(self.key("leader")).await {
            Ok(r) => r.kv().and_then(|kv| kv.value_str().ok().map(str::to_string)),
            Err(_) => None,
        };
        Ok((names, leader))
    }
}

pub(crate) fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, ClusterError> {
    Ok(serde_json::to_vec(value)?)
}

pub(crate) fn decode<T: for<'de> Deserialize<'de>>(bytes: &[u8]) -> Result<T, ClusterError> {
    Ok(serde_json::from_slice(bytes)?)
}

/// A client of one etcd member that serves a read of `prefix` within [`MEMBER_TIMEOUT`].
async fn live_member(endpoints: &[String], prefix: &str, access: &EtcdAccess) -> Result<Client, ClusterError> {
    let start = rand::random_range(0..endpoints.len());
    let mut last = None;
    for i in 0..endpoints.len() {
        let endpoint = &endpoints[(start + i) % endpoints.len()];
        let options = access.options(MEMBER_TIMEOUT);
        let attempt = async {
            let mut c = Client::connect([endpoint.as_str()], Some(options)).await?;
            // A linearizable read: a member cut off from the others' quorum does not serve it.
            c.get(prefix, Some(GetOptions::new().with_count_only())).await?;
            Ok::<Client, etcd_client::Error>(c)
        };
        match tokio::time::timeout(MEMBER_TIMEOUT * 2, attempt).await {
            Ok(Ok(c)) => return Ok(c),
            Ok(Err(e)) => last = Some(ClusterError::Etcd(e)),
            Err(_) => last = Some(ClusterError::EtcdUnreachable { endpoint: endpoint.clone() }),
        }
    }
    Err(last.unwrap_or_else(|| SettingError::NoEndpoint.into()))
}
