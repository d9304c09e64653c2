//! A model of etcd as the cluster uses it: one linearizable key space with revisions, guarded
//! transactions, leases that end unless renewed, and elections (the lowest creation revision
//! under the election's name leads), all in simulated time.
//!
//! Every request takes a latency drawn from the seed, and is applied at one instant (its
//! linearization point). Faults: a host cut off from etcd, a lost leader (nobody served for a
//! while, leases extended when a new one is elected, as etcd does), a slow etcd. A request hit
//! by a fault after it was applied fails at its caller all the same: the caller cannot tell.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use spindle_cluster::plane::{Change, Guard, KeepAlive, Kv, Plane, PlaneFuture, Term};
use spindle_cluster::ClusterError;

/// How long a request waits for an etcd it cannot reach before failing (etcd-client's
/// request timeout is of this order).
const UNREACHABLE_WAIT: Duration = Duration::from_secs(2);
/// How often a campaign looks whether it leads.
const CAMPAIGN_POLL: Duration = Duration::from_millis(20);
/// Latency of a request, each way, in microseconds.
const LATENCY_MICROS: std::ops::Range<u64> = 200..3_000;

struct Entry {
    value: Vec<u8>,
    create_revision: i64,
    mod_revision: i64,
    lease: Option<i64>,
}

struct Lease {
    ttl: Duration,
    expires: Duration,
}

#[derive(Default)]
struct Faults {
    cut: std::collections::BTreeSet<String>,
    leaderless_until: Duration,
    slow: Duration,
}

struct State {
    revision: i64,
    keys: BTreeMap<String, Entry>,
    leases: BTreeMap<i64, Lease>,
    next_lease: i64,
    faults: Faults,
    rng: StdRng,
}

/// The model, shared by every simulated host.
pub struct Etcd {
    state: Mutex<State>,
}

/// The simulation's clock, read by a host: the same for every host.
pub fn now() -> Duration {
    turmoil::sim_elapsed().unwrap_or_default()
}

impl Etcd {
    pub fn new(seed: u64) -> Arc<Etcd> {
        Arc::new(Etcd {
            state: Mutex::new(State {
                revision: 1,
                keys: BTreeMap::new(),
                leases: BTreeMap::new(),
                next_lease: 0x1000,
                faults: Faults::default(),
                rng: StdRng::seed_from_u64(seed),
            }),
        })
    }

    /// The plane as `host` reaches it.
    pub fn plane(self: &Arc<Self>, host: &str) -> Arc<dyn Plane> {
        Arc::new(ModelPlane { etcd: self.clone(), host: host.to_string() })
    }

    pub fn cut(&self, host: &str) {
        self.state.lock().faults.cut.insert(host.to_string());
    }

    pub fn heal(&self, host: &str) {
        self.state.lock().faults.cut.remove(host);
    }

    /// The leader is lost: nobody is served for `outage`; then a new leader extends every
    /// lease by its TTL.
    pub fn lose_leader(&self, now: Duration, outage: Duration) {
        let mut s = self.state.lock();
        let until = now + outage;
        s.faults.leaderless_until = until;
        for lease in s.leases.values_mut() {
            lease.expires = lease.expires.max(until + lease.ttl);
        }
    }

    pub fn set_slow(&self, extra: Duration) {
        self.state.lock().faults.slow = extra;
    }

    /// Writes `key` at once, as an operator's command would (a member change).
    pub fn put_now(&self, key: &str, value: Vec<u8>) {
        self.state.lock().put(key, value, None);
    }

    /// The value under `key`, read outside any fault (the checks after a run).
    pub fn peek(&self, key: &str) -> Option<Vec<u8>> {
        self.state.lock().keys.get(key).map(|e| e.value.clone())
    }

    fn latency(&self) -> Duration {
        let mut s = self.state.lock();
        Duration::from_micros(s.rng.random_range(LATENCY_MICROS)) + s.faults.slow
    }

    fn reachable(&self, host: &str) -> bool {
        let s = self.state.lock();
        !s.faults.cut.contains(host) && now() >= s.faults.leaderless_until
    }

    /// One request from `host`: there, applied, and back.
    async fn call<T: Send>(&self, host: &str, apply: impl FnOnce(&mut State) -> T + Send) -> Result<T, ClusterError> {
        tokio::time::sleep(self.latency()).await;
        if !self.reachable(host) {
            tokio::time::sleep(UNREACHABLE_WAIT).await;
            return Err(unreachable(host));
        }
        let out = {
            let mut s = self.state.lock();
            s.expire();
            apply(&mut s)
        };
        tokio::time::sleep(self.latency()).await;
        if !self.reachable(host) {
            return Err(unreachable(host));
        }
        Ok(out)
    }
}

fn unreachable(host: &str) -> ClusterError {
    ClusterError::EtcdUnreachable { endpoint: format!("etcd (from {host})") }
}

impl State {
    fn bump(&mut self) -> i64 {
        self.revision += 1;
        self.revision
    }

    fn put(&mut self, key: &str, value: Vec<u8>, lease: Option<i64>) -> bool {
        if lease.is_some_and(|l| !self.leases.contains_key(&l)) {
            return false;
        }
        let rev = self.bump();
        let create_revision = self.keys.get(key).map_or(rev, |e| e.create_revision);
        self.keys.insert(key.to_string(), Entry { value, create_revision, mod_revision: rev, lease });
        true
    }

    fn delete(&mut self, key: &str) {
        if self.keys.remove(key).is_some() {
            self.bump();
        }
    }

    /// Ends the leases past their time, with their keys.
    fn expire(&mut self) {
        let t = now();
        let ended: Vec<i64> = self.leases.iter().filter(|(_, l)| l.expires <= t).map(|(id, _)| *id).collect();
        for id in ended {
            self.revoke(id);
        }
    }

    fn revoke(&mut self, id: i64) {
        self.leases.remove(&id);
        let keys: Vec<String> = self.keys.iter().filter(|(_, e)| e.lease == Some(id)).map(|(k, _)| k.clone()).collect();
        for k in keys {
            self.delete(&k);
        }
    }

    fn under(&self, prefix: &str) -> Vec<(&String, &Entry)> {
        let mut found: Vec<_> = self.keys.range(prefix.to_string()..).take_while(|(k, _)| k.starts_with(prefix)).collect();
        found.sort_by_key(|(_, e)| e.create_revision);
        found
    }
}

struct ModelPlane {
    etcd: Arc<Etcd>,
    host: String,
}

fn kv(key: &str, e: &Entry) -> Kv {
    Kv { key: key.to_string(), value: e.value.clone(), mod_revision: e.mod_revision }
}

impl Plane for ModelPlane {
    fn get<'a>(&'a self, key: &'a str) -> PlaneFuture<'a, Option<Kv>> {
        Box::pin(self.etcd.call(&self.host, move |s| s.keys.get(key).map(|e| kv(key, e))))
    }

    fn list<'a>(&'a self, prefix: &'a str) -> PlaneFuture<'a, Vec<Kv>> {
        Box::pin(self.etcd.call(&self.host, move |s| s.under(prefix).into_iter().map(|(k, e)| kv(k, e)).collect()))
    }

    fn put<'a>(&'a self, key: &'a str, value: Vec<u8>, lease: Option<i64>) -> PlaneFuture<'a, ()> {
        Box::pin(async move {
            if self.etcd.call(&self.host, move |s| s.put(key, value, lease)).await? {
                Ok(())
            } else {
                Err(ClusterError::LeaseLost)
            }
        })
    }

    fn delete<'a>(&'a self, key: &'a str) -> PlaneFuture<'a, ()> {
        Box::pin(self.etcd.call(&self.host, move |s| s.delete(key)))
    }

    fn txn(&self, guards: Vec<Guard>, changes: Vec<Change>) -> PlaneFuture<'_, bool> {
        Box::pin(self.etcd.call(&self.host, move |s| {
            let holds = guards.iter().all(|guard| match guard {
                Guard::Absent(key) => !s.keys.contains_key(key),
                Guard::WrittenAt(key, rev) => s.keys.get(key).is_some_and(|e| e.mod_revision == *rev),
            });
            if holds {
                // One revision for the whole transaction, as etcd gives it.
                let rev = s.bump();
                for change in changes {
                    match change {
                        Change::Put(key, value) => {
                            let create_revision = s.keys.get(&key).map_or(rev, |e| e.create_revision);
                            s.keys.insert(key, Entry { value, create_revision, mod_revision: rev, lease: None });
                        }
                        Change::Delete(key) => {
                            s.keys.remove(&key);
                        }
                    }
                }
            }
            holds
        }))
    }

    fn grant(&self, ttl_secs: i64) -> PlaneFuture<'_, i64> {
        Box::pin(self.etcd.call(&self.host, move |s| {
            s.next_lease += 1;
            let ttl = Duration::from_secs(ttl_secs.max(1) as u64);
            s.leases.insert(s.next_lease, Lease { ttl, expires: now() + ttl });
            s.next_lease
        }))
    }

    fn keep_alive(&self, lease: i64) -> PlaneFuture<'_, Box<dyn KeepAlive>> {
        Box::pin(async move { Ok(Box::new(ModelKeepAlive { etcd: self.etcd.clone(), host: self.host.clone(), lease }) as Box<dyn KeepAlive>) })
    }

    fn revoke(&self, lease: i64) -> PlaneFuture<'_, ()> {
        Box::pin(self.etcd.call(&self.host, move |s| s.revoke(lease)))
    }

    fn campaign<'a>(&'a self, name: &'a str, value: &'a str, lease: i64) -> PlaneFuture<'a, Box<dyn Term>> {
        Box::pin(async move {
            let key = format!("{name}/{lease:x}");
            let placed = {
                let key = key.clone();
                let value = value.as_bytes().to_vec();
                self.etcd.call(&self.host, move |s| s.keys.contains_key(&key) || s.put(&key, value, Some(lease))).await?
            };
            if !placed {
                return Err(ClusterError::LeaseLost);
            }
            let prefix = format!("{name}/");
            loop {
                let (mine, first) = {
                    let key = key.clone();
                    let prefix = prefix.clone();
                    self.etcd
                        .call(&self.host, move |s| {
                            let first = s.under(&prefix).first().map(|(k, _)| (*k).clone());
                            (s.keys.contains_key(&key), first)
                        })
                        .await?
                };
                if !mine {
                    return Err(ClusterError::LeaseLost);
                }
                if first.as_deref() == Some(key.as_str()) {
                    return Ok(Box::new(ModelTerm { etcd: self.etcd.clone(), host: self.host.clone(), key }) as Box<dyn Term>);
                }
                tokio::time::sleep(CAMPAIGN_POLL).await;
            }
        })
    }

    fn leader<'a>(&'a self, name: &'a str) -> PlaneFuture<'a, Option<String>> {
        let prefix = format!("{name}/");
        Box::pin(self.etcd.call(&self.host, move |s| s.under(&prefix).first().map(|(_, e)| String::from_utf8_lossy(&e.value).into_owned())))
    }

    fn reconnect(&self) -> PlaneFuture<'_, Arc<dyn Plane>> {
        Box::pin(async move {
            self.etcd.call(&self.host, |_| ()).await?;
            Ok(self.etcd.plane(&self.host))
        })
    }
}

struct ModelKeepAlive {
    etcd: Arc<Etcd>,
    host: String,
    lease: i64,
}

impl KeepAlive for ModelKeepAlive {
    fn renew(&mut self) -> PlaneFuture<'_, i64> {
        let lease = self.lease;
        Box::pin(self.etcd.call(&self.host, move |s| match s.leases.get_mut(&lease) {
            Some(l) => {
                l.expires = now() + l.ttl;
                l.ttl.as_secs() as i64
            }
            None => 0,
        }))
    }
}

struct ModelTerm {
    etcd: Arc<Etcd>,
    host: String,
    key: String,
}

impl Term for ModelTerm {
    fn resign(self: Box<Self>) -> PlaneFuture<'static, ()> {
        Box::pin(async move {
            let key = self.key.clone();
            self.etcd.call(&self.host, move |s| s.delete(&key)).await
        })
    }
}
