//! The checker's look at a settled cluster: its final reads, and the checks on the drives
//! (`invariants`) in order, reading a key again where its replicas moved on from the value read.

use std::collections::BTreeMap;
use std::time::Duration;

use spindle_cluster::control::Control;
use spindle_cluster::history::{Event, Op};
use spindle_cluster::map::ClusterMap;
use spindle_cluster::migrate::Drives;
use spindle_cluster::store::Store;

use crate::workload::{self, History};
use crate::{client_config, etcd, invariants};

/// A read of `key` by the checker, in the history: its version (`None`: absent).
pub(crate) async fn final_read(store: &Store, history: &History, key: u64) -> Result<Option<Vec<u8>>, String> {
    let call = etcd::now().as_micros() as u64;
    let v = store.get(workload::key_name(key).as_bytes()).await.map_err(|e| format!("a settled cluster failed to read key {key}: {e}"))?;
    let version = v.as_ref().map(|v| v.version.to_vec());
    let value = v.and_then(|v| v.value[..].try_into().ok().map(u64::from_be_bytes));
    history.events.lock().push(Event { key, op: Op::Read(value), call, ret: Some(etcd::now().as_micros() as u64) });
    Ok(version)
}

/// The most times the checks read a key again because its replicas moved on from the value
/// read to one write of its own: once per write left unsettled by the run is all a run needs.
const REREADS: usize = 16;

/// The settled cluster's invariants on its drives (`invariants`): every value read stands on
/// a write quorum, and the sweeper deletes every partition held where it is not placed. Asked
/// again, with the map reloaded, while a drive does not answer. A key whose replicas all
/// came to hold another write than the one read is read again (`reread`, into the history).
pub(crate) async fn on_the_drives<F, R>(control: &Control, read: &mut BTreeMap<String, Option<Vec<u8>>>, reread: F) -> Result<(), String>
where
    F: Fn(String) -> R,
    R: std::future::Future<Output = Result<Option<Vec<u8>>, String>>,
{
    let started = etcd::now();
    let mut last = String::new();
    let mut stage = Stage::Quorum;
    let mut rereads = 0;
    while etcd::now() - started <= invariants::SETTLED_WITHIN {
        let found = match stage {
            Stage::Agree | Stage::Overtaken => match agreement(control, read).await {
                Ok(invariants::Agreement::MovedOn(key)) => {
                    rereads += 1;
                    if rereads > REREADS {
                        return Err(format!("the replicas moved on from the value read more than {REREADS} times"));
                    }
                    let version = reread(key.clone()).await?;
                    read.insert(key, version);
                    // The new value is checked from the start: on a write quorum first.
                    stage = Stage::Quorum;
                    continue;
                }
                // Back at the value read everywhere: checked from the start.
                Ok(invariants::Agreement::Agree) if matches!(stage, Stage::Overtaken) => {
                    stage = Stage::Quorum;
                    continue;
                }
                // Not moved on as a whole yet: looked at again.
                _ if matches!(stage, Stage::Overtaken) => Ok(Some("a write landed after the value read".into())),
                Ok(invariants::Agreement::Agree) => Ok(None),
                Ok(invariants::Agreement::Apart(m)) => Ok(Some(m)),
                Err(e) => Err(e),
            },
            Stage::Quorum => match drives_now(control).await {
                Ok((map, drives)) => invariants::quorum_holds(&map, &drives, read).await.map(|()| None),
                Err(e) => Err(e),
            },
            Stage::Foreign => match drives_now(control).await {
                Ok((map, drives)) => invariants::foreign(&map, &drives)
                    .await
                    .map(|foreign| (!foreign.is_empty()).then(|| format!("members still hold partitions placed elsewhere: {foreign:?}"))),
                Err(e) => Err(e),
            },
        };
        match found {
            Ok(None) => match stage.next() {
                Some(next) => {
                    stage = next;
                    continue;
                }
                None => return Ok(()),
            },
            Ok(Some(unsettled)) | Err(invariants::Found::Unanswered(unsettled)) => last = unsettled,
            Err(invariants::Found::Overtaken(key)) => {
                last = format!("key {key}: a newer write than the value read stands on some replicas");
                stage = Stage::Overtaken;
            }
            Err(invariants::Found::Broken(m)) => return Err(m),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Err(format!("{:?} after settling: {last}", invariants::SETTLED_WITHIN))
}

/// The checks on the drives, in order: each starts once the one before holds.
#[derive(Clone, Copy)]
enum Stage {
    /// Every value read stands on a write quorum of its replicas (at once, or the run fails).
    Quorum,
    /// No member holds a partition placed elsewhere (once the sweeper has had its time).
    Foreign,
    /// Every replica holds the value read (once the sweeper's scrub has passed).
    Agree,
    /// A write landed after a value read, on some replicas: until they all hold one write,
    /// which is read again.
    Overtaken,
}

impl Stage {
    fn next(self) -> Option<Stage> {
        match self {
            Stage::Quorum => Some(Stage::Foreign),
            Stage::Foreign => Some(Stage::Agree),
            Stage::Agree | Stage::Overtaken => None,
        }
    }
}

/// The map as it is now, and a connection to each of its drives that answers.
async fn drives_now(control: &Control) -> Result<(ClusterMap, Drives), invariants::Found> {
    let (map, _) = control.load_map().await.map_err(|e| invariants::Found::Unanswered(e.to_string()))?;
    let drives = spindle_cluster::migrate::connect_all(&map, &client_config()).await;
    Ok((map, drives))
}

/// `invariants::replicas_agree` under the map as it is now.
async fn agreement(control: &Control, read: &BTreeMap<String, Option<Vec<u8>>>) -> Result<invariants::Agreement, invariants::Found> {
    let (map, drives) = drives_now(control).await?;
    invariants::replicas_agree(&map, &drives, read).await
}
