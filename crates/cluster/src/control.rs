//! The cluster's state in etcd, and nowhere else: the map (members, placement, epoch) under one
//! key changed only by transactions that compare the revision it was read at, each drive's
//! health as the coordinator sees it, member changes waiting for the coordinator, and the
//! coordinator's election.
//!
//! Layout under `/spindle/<cluster>/`: `map`, `health/<drive>`, `changes/<drive>`, `move` (the
//! move under way), `abandoned/` (batches abandoned during it: abandoned.rs), `last-move`
//! (the last one finished), `leader` (etcd's election prefix), `coordinators/<name>` (live
//! coordinators, on their lease).

use std::collections::BTreeMap;

use std::sync::Arc;
use serde::{Deserialize, Serialize};

use crate::map::{ClusterMap, Member};
use crate::plane::etcd::EtcdPlane;
use crate::plane::{Change, Guard, Plane};
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

/// How far the rebuild of one pool has gone (`spindle cluster pool status`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RebuildProgress {
    pub started_ms: u64,
    pub updated_ms: u64,
    /// Groups rebuilt since it started; the pool's pending list says how many are left.
    pub groups_done: u32,
    pub shards: u64,
    pub bytes: u64,
    pub rate_limit: u64,
    /// Every group it had to rebuild is done (the next change of placement starts anew).
    #[serde(default)]
    pub finished: bool,
}

impl RebuildProgress {
    /// Seconds left at the pace so far, by groups.
    pub fn eta_secs(&self, groups_left: usize) -> Option<f64> {
        let done = f64::from(self.groups_done);
        (done > 0.0).then(|| self.updated_ms.saturating_sub(self.started_ms) as f64 / 1000.0 / done * groups_left as f64)
    }

    /// MiB per second so far.
    pub fn mib_per_sec(&self) -> f64 {
        let secs = self.updated_ms.saturating_sub(self.started_ms) as f64 / 1000.0;
        if secs > 0.0 { self.bytes as f64 / f64::from(1u32 << 20) / secs } else { 0.0 }
    }
}

/// A member change asked of the coordinator (`spindle cluster add-drive` / `remove-drive`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "change", rename_all = "kebab-case")]
pub enum MemberChange {
    Add(Member),
    Remove { id: String },
    /// A new erasure-coded pool (`spindle cluster pool add`).
    AddPool { name: String, pool: crate::pool::Pool },
    /// A new remote pool: an external S3 bucket (`spindle cluster pool add --s3`).
    AddRemote { name: String, remote: crate::remote::RemotePool },
}

pub use crate::clock::now_ms;

pub use crate::etcd_auth::EtcdAccess;

/// The cluster's state on its control plane (etcd, or the simulator's model of it).
#[derive(Clone)]
pub struct Control {
    plane: Arc<dyn Plane>,
    prefix: String,
    name: String,
}

impl Control {
    /// `endpoints`: etcd client URLs, comma-separated (`http://127.0.0.1:2379,...`).
    pub async fn connect(endpoints: &str, cluster: &str) -> Result<Control, ClusterError> {
        Control::connect_with(endpoints, cluster, EtcdAccess::default()).await
    }

    /// As `connect`, over TLS and as a user when `access` says so.
    pub async fn connect_with(endpoints: &str, cluster: &str, access: EtcdAccess) -> Result<Control, ClusterError> {
        let prefix = prefix(cluster)?;
        let list: Vec<String> =
            endpoints.split(',').map(|e| e.trim().trim_start_matches("etcd://").to_string()).filter(|e| !e.is_empty()).collect();
        if list.is_empty() {
            return Err(SettingError::NoEndpoint.into());
        }
        let plane = EtcdPlane::connect(list, prefix.clone(), access).await?;
        Ok(Control { plane: Arc::new(plane), prefix, name: cluster.to_string() })
    }

    /// The cluster `cluster` on any plane (the simulator's).
    pub fn over(plane: Arc<dyn Plane>, cluster: &str) -> Result<Control, ClusterError> {
        Ok(Control { plane, prefix: prefix(cluster)?, name: cluster.to_string() })
    }

    /// The same cluster through a member that answers now (the first of the endpoints, in a
    /// random order, that serves a read).
    pub async fn reconnect(&self) -> Result<Control, ClusterError> {
        Ok(Control { plane: self.plane.reconnect().await?, ..self.clone() })
    }

    pub(crate) fn plane(&self) -> &dyn Plane {
        &*self.plane
    }

    pub fn key(&self, rest: &str) -> String {
        format!("{}{rest}", self.prefix)
    }

    /// Writes the first map; refuses if the cluster exists.
    pub async fn init(&self, map: &ClusterMap) -> Result<(), ClusterError> {
        let key = self.key("map");
        if self.plane.txn(vec![Guard::Absent(key.clone())], vec![Change::Put(key, encode(map)?)]).await? {
            Ok(())
        } else {
            Err(ClusterError::AlreadyExists(self.name.clone()))
        }
    }

    /// The map and the revision it was last changed at.
    pub async fn load_map(&self) -> Result<(ClusterMap, i64), ClusterError> {
        let kv = self.plane.get(&self.key("map")).await?.ok_or_else(|| ClusterError::NotInitialized(self.name.clone()))?;
        Ok((decode(&kv.value)?, kv.mod_revision))
    }

    /// Replaces the map if it is still the one read at `revision`. `false`: someone else
    /// changed it first (read again and recompute).
    pub async fn replace_map(&self, revision: i64, map: &ClusterMap) -> Result<bool, ClusterError> {
        let key = self.key("map");
        self.plane.txn(vec![Guard::WrittenAt(key.clone(), revision)], vec![Change::Put(key, encode(map)?)]).await
    }

    pub async fn health(&self) -> Result<BTreeMap<String, Health>, ClusterError> {
        let prefix = self.key("health/");
        let mut out = BTreeMap::new();
        for kv in self.plane.list(&prefix).await? {
            out.insert(kv.key.trim_start_matches(&prefix).to_string(), decode(&kv.value)?);
        }
        Ok(out)
    }

    pub async fn set_health(&self, id: &str, health: &Health) -> Result<(), ClusterError> {
        self.plane.put(&self.key(&format!("health/{id}")), encode(health)?, None).await
    }

    pub async fn clear_health(&self, id: &str) -> Result<(), ClusterError> {
        self.plane.delete(&self.key(&format!("health/{id}"))).await
    }

    /// Asks the coordinator for a member change; an added member is validated first.
    pub async fn request_change(&self, change: &MemberChange) -> Result<(), ClusterError> {
        let id = match change {
            MemberChange::Add(m) => {
                m.validate()?;
                m.id.clone()
            }
            MemberChange::Remove { id } => id.clone(),
            MemberChange::AddPool { name, pool } => {
                crate::pool::check_name(name)?;
                crate::pool::Pool::new(pool.code, pool.groups)?;
                format!("pool:{name}")
            }
            MemberChange::AddRemote { name, remote } => {
                crate::pool::check_name(name)?;
                remote.validate()?;
                format!("pool:{name}")
            }
        };
        self.plane.put(&self.key(&format!("changes/{id}")), encode(change)?, None).await
    }

    /// Waiting member changes, oldest first, with the key that holds each.
    pub async fn pending_changes(&self) -> Result<Vec<(String, MemberChange)>, ClusterError> {
        self.plane.list(&self.key("changes/")).await?.into_iter().map(|kv| Ok((kv.key, decode(&kv.value)?))).collect()
    }

    /// Commits `map` (if still at `revision`) and removes the change that led to it, in one
    /// transaction: a coordinator that dies in between leaves either both or neither.
    pub async fn apply_change(&self, revision: i64, map: &ClusterMap, change_key: &str) -> Result<bool, ClusterError> {
        let key = self.key("map");
        let changes = vec![Change::Put(key.clone(), encode(map)?), Change::Delete(change_key.to_string())];
        self.plane.txn(vec![Guard::WrittenAt(key, revision)], changes).await
    }

    /// Commits `map` if still at `revision` and sets or clears the move's progress with it,
    /// in one transaction (starting a move, flipping it, rolling it back).
    pub async fn commit_move(&self, revision: i64, map: &ClusterMap, progress: Option<&MoveProgress>) -> Result<bool, ClusterError> {
        let key = self.key("map");
        let progress = match progress {
            Some(p) => Change::Put(self.key("move"), encode(p)?),
            None => Change::Delete(self.key("move")),
        };
        let done = self.plane.txn(vec![Guard::WrittenAt(key.clone(), revision)], vec![Change::Put(key, encode(map)?), progress]).await?;
        if done {
            self.drop_notes(map.epoch).await;
        }
        Ok(done)
    }

    /// Flips a move: commits `map` (if still at `revision`, and the batches abandoned during
    /// the move still as `noted` read them: abandoned.rs), drops the move's progress and
    /// keeps it, with its end time, as the last move (`status` and `bench migrate` read it).
    pub async fn commit_flip(&self, revision: i64, map: &ClusterMap, finished: &MoveProgress, noted: Guard) -> Result<bool, ClusterError> {
        let key = self.key("map");
        let changes = vec![
            Change::Put(key.clone(), encode(map)?),
            Change::Delete(self.key("move")),
            Change::Put(self.key("last-move"), encode(finished)?),
        ];
        let done = self.plane.txn(vec![Guard::WrittenAt(key, revision), noted], changes).await?;
        if done {
            self.drop_notes(map.epoch).await;
        }
        Ok(done)
    }

    /// Drops the notes of earlier moves once the map has left them behind; one left by a
    /// failure here is dropped after the next move.
    async fn drop_notes(&self, epoch: u64) {
        if let Err(e) = self.drop_notes_before(epoch).await {
            tracing::debug!(error = ?e, "notes of batches abandoned during earlier moves not dropped yet");
        }
    }

    /// The last move that finished, if any.
    pub async fn last_move(&self) -> Result<Option<MoveProgress>, ClusterError> {
        self.plane.get(&self.key("last-move")).await?.map(|kv| decode(&kv.value)).transpose()
    }

    /// The move under way, if any.
    pub async fn progress(&self) -> Result<Option<MoveProgress>, ClusterError> {
        self.plane.get(&self.key("move")).await?.map(|kv| decode(&kv.value)).transpose()
    }

    /// Records how far the move at `progress.epoch` has gone (a record of another epoch than
    /// the map's is ignored by whoever reads it).
    pub async fn save_progress(&self, progress: &MoveProgress) -> Result<(), ClusterError> {
        self.plane.put(&self.key("move"), encode(progress)?, None).await
    }

    /// Each pool's rebuild, as far as it has gone.
    pub async fn rebuilds(&self) -> Result<BTreeMap<String, RebuildProgress>, ClusterError> {
        Ok(self.plane.get(&self.key("rebuild")).await?.map(|kv| decode(&kv.value)).transpose()?.unwrap_or_default())
    }

    pub async fn save_rebuilds(&self, rebuilds: &BTreeMap<String, RebuildProgress>) -> Result<(), ClusterError> {
        self.plane.put(&self.key("rebuild"), encode(rebuilds)?, None).await
    }

    pub async fn drop_change(&self, change_key: &str) -> Result<(), ClusterError> {
        self.plane.delete(change_key).await
    }

    /// Names of the coordinators alive now, and which one leads.
    pub async fn coordinators(&self) -> Result<(Vec<String>, Option<String>), ClusterError> {
        let names = self.plane.list(&self.key("coordinators/")).await?.into_iter().filter_map(|kv| String::from_utf8(kv.value).ok()).collect();
        let leader = self.plane.leader(&self.key("leader")).await?;
        Ok((names, leader))
    }
}

fn prefix(cluster: &str) -> Result<String, ClusterError> {
    if cluster.is_empty() || cluster.contains('/') {
        return Err(SettingError::ClusterName(cluster.to_string()).into());
    }
    Ok(format!("/spindle/{cluster}/"))
}

pub(crate) fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, ClusterError> {
    Ok(serde_json::to_vec(value)?)
}

pub(crate) fn decode<T: for<'de> Deserialize<'de>>(bytes: &[u8]) -> Result<T, ClusterError> {
    Ok(serde_json::from_slice(bytes)?)
}
