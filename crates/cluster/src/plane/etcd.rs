//! The control plane on etcd: one member at a time, chosen among the endpoints given;
//! [`Plane::reconnect`] moves to another that answers when it fails. (A channel balanced over
//! all endpoints kept sending some requests to a dead member.)

use std::sync::Arc;

use etcd_client::{Client, Compare, CompareOp, GetOptions, LeaderKey, LeaseKeepAliveStream, LeaseKeeper, PutOptions, Txn, TxnOp};

use super::{Change, Guard, KeepAlive, Kv, Plane, PlaneFuture, Term};
use crate::etcd_auth::EtcdAccess;
use crate::{ClusterError, SettingError};

/// How long one etcd member gets to answer before the next is tried.
const MEMBER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

#[derive(Clone)]
pub struct EtcdPlane {
    client: Client,
    endpoints: Vec<String>,
    /// What a member must serve (a linearizable read) to be taken.
    probe: String,
    access: EtcdAccess,
}

impl EtcdPlane {
    /// A member of `endpoints` that serves a read of `probe`.
    pub async fn connect(endpoints: Vec<String>, probe: String, access: EtcdAccess) -> Result<EtcdPlane, ClusterError> {
        let client = live_member(&endpoints, &probe, &access).await?;
        Ok(EtcdPlane { client, endpoints, probe, access })
    }
}

fn kv(kv: &etcd_client::KeyValue) -> Result<Kv, ClusterError> {
    Ok(Kv { key: kv.key_str()?.to_string(), value: kv.value().to_vec(), mod_revision: kv.mod_revision() })
}

impl Plane for EtcdPlane {
    fn get<'a>(&'a self, key: &'a str) -> PlaneFuture<'a, Option<Kv>> {
        Box::pin(async move {
            let resp = self.client.kv_client().get(key, None).await?;
            resp.kvs().first().map(kv).transpose()
        })
    }

    fn list<'a>(&'a self, prefix: &'a str) -> PlaneFuture<'a, Vec<Kv>> {
        Box::pin(async move {
            let options = GetOptions::new().with_prefix().with_sort(etcd_client::SortTarget::Create, etcd_client::SortOrder::Ascend);
            let resp = self.client.kv_client().get(prefix, Some(options)).await?;
            resp.kvs().iter().map(kv).collect()
        })
    }

    fn put<'a>(&'a self, key: &'a str, value: Vec<u8>, lease: Option<i64>) -> PlaneFuture<'a, ()> {
        Box::pin(async move {
            let options = lease.map(|l| PutOptions::new().with_lease(l));
            self.client.kv_client().put(key, value, options).await?;
            Ok(())
        })
    }

    fn delete<'a>(&'a self, key: &'a str) -> PlaneFuture<'a, ()> {
        Box::pin(async move {
            self.client.kv_client().delete(key, None).await?;
            Ok(())
        })
    }

    fn txn(&self, guards: Vec<Guard>, changes: Vec<Change>) -> PlaneFuture<'_, bool> {
        Box::pin(async move {
            let compares: Vec<Compare> = guards
                .into_iter()
                .map(|guard| match guard {
                    Guard::Absent(key) => Compare::version(key, CompareOp::Equal, 0),
                    Guard::WrittenAt(key, revision) => Compare::mod_revision(key, CompareOp::Equal, revision),
                })
                .collect();
            let ops: Vec<TxnOp> = changes
                .into_iter()
                .map(|c| match c {
                    Change::Put(key, value) => TxnOp::put(key, value, None),
                    Change::Delete(key) => TxnOp::delete(key, None),
                })
                .collect();
            Ok(self.client.kv_client().txn(Txn::new().when(compares).and_then(ops)).await?.succeeded())
        })
    }

    fn grant(&self, ttl_secs: i64) -> PlaneFuture<'_, i64> {
        Box::pin(async move { Ok(self.client.lease_client().grant(ttl_secs, None).await?.id()) })
    }

    fn keep_alive(&self, lease: i64) -> PlaneFuture<'_, Box<dyn KeepAlive>> {
        Box::pin(async move {
            let (keeper, acks) = self.client.lease_client().keep_alive(lease).await?;
            Ok(Box::new(EtcdKeepAlive { keeper, acks }) as Box<dyn KeepAlive>)
        })
    }

    fn revoke(&self, lease: i64) -> PlaneFuture<'_, ()> {
        Box::pin(async move {
            self.client.lease_client().revoke(lease).await?;
            Ok(())
        })
    }

    fn campaign<'a>(&'a self, name: &'a str, value: &'a str, lease: i64) -> PlaneFuture<'a, Box<dyn Term>> {
        Box::pin(async move {
            let won = self.client.election_client().campaign(name, value, lease).await?;
            Ok(Box::new(EtcdTerm { client: self.client.clone(), key: won.leader().cloned() }) as Box<dyn Term>)
        })
    }

    fn leader<'a>(&'a self, name: &'a str) -> PlaneFuture<'a, Option<String>> {
        Box::pin(async move {
            // No leader is an error in etcd's election API.
            Ok(match self.client.election_client().leader(name).await {
                Ok(r) => r.kv().and_then(|kv| kv.value_str().ok().map(str::to_string)),
                Err(_) => None,
            })
        })
    }

    fn reconnect(&self) -> PlaneFuture<'_, Arc<dyn Plane>> {
        Box::pin(async move {
            let client = live_member(&self.endpoints, &self.probe, &self.access).await?;
            Ok(Arc::new(EtcdPlane { client, ..self.clone() }) as Arc<dyn Plane>)
        })
    }
}

struct EtcdKeepAlive {
    keeper: LeaseKeeper,
    acks: LeaseKeepAliveStream,
}

impl KeepAlive for EtcdKeepAlive {
    fn renew(&mut self) -> PlaneFuture<'_, i64> {
        Box::pin(async move {
            self.keeper.keep_alive().await?;
            Ok(self.acks.message().await?.map_or(0, |r| r.ttl()))
        })
    }
}

struct EtcdTerm {
    client: Client,
    key: Option<LeaderKey>,
}

impl Term for EtcdTerm {
    fn resign(self: Box<Self>) -> PlaneFuture<'static, ()> {
        Box::pin(async move {
            if let Some(key) = self.key {
                self.client.election_client().resign(Some(etcd_client::ResignOptions::new().with_leader(key))).await?;
            }
            Ok(())
        })
    }
}

/// A client of one etcd member that serves a read of `probe` within [`MEMBER_TIMEOUT`].
async fn live_member(endpoints: &[String], probe: &str, access: &EtcdAccess) -> Result<Client, ClusterError> {
    let start = rand::random_range(0..endpoints.len().max(1));
    let mut last = None;
    for i in 0..endpoints.len() {
        let endpoint = &endpoints[(start + i) % endpoints.len()];
        let options = access.options(MEMBER_TIMEOUT);
        let attempt = async {
            let mut c = Client::connect([endpoint.as_str()], Some(options)).await?;
            // A linearizable read: a member cut off from the others' quorum does not serve it.
            c.get(probe, Some(GetOptions::new().with_count_only())).await?;
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
