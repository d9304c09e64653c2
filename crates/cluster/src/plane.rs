//! What the cluster asks of its control plane, and nothing more: keys with revisions,
//! transactions guarded by compares, leases, and an election. etcd serves it in production
//! (`plane::etcd`); the simulator serves it from a model of etcd with the same linearizable
//! semantics, so that the coordinator and the clients run unchanged over either.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::ClusterError;

pub mod etcd;

/// A future of the plane: boxed, so that the plane can be a trait object.
pub type PlaneFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, ClusterError>> + Send + 'a>>;

/// A key as the plane holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kv {
    pub key: String,
    pub value: Vec<u8>,
    /// The plane's revision when the key was last written.
    pub mod_revision: i64,
}

/// A compare a transaction is guarded by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Guard {
    /// The key does not exist.
    Absent(String),
    /// The key was last written at this revision.
    WrittenAt(String, i64),
}

/// A write inside a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Put(String, Vec<u8>),
    Delete(String),
}

pub trait Plane: Send + Sync {
    fn get<'a>(&'a self, key: &'a str) -> PlaneFuture<'a, Option<Kv>>;
    /// Every key under `prefix`, the first created first.
    fn list<'a>(&'a self, prefix: &'a str) -> PlaneFuture<'a, Vec<Kv>>;
    /// Writes `key`, attached to `lease` (gone when the lease is) if one is given.
    fn put<'a>(&'a self, key: &'a str, value: Vec<u8>, lease: Option<i64>) -> PlaneFuture<'a, ()>;
    fn delete<'a>(&'a self, key: &'a str) -> PlaneFuture<'a, ()>;
    /// Applies `changes` at once if every one of `guards` holds; whether it did.
    fn txn(&self, guards: Vec<Guard>, changes: Vec<Change>) -> PlaneFuture<'_, bool>;
    /// A lease of `ttl_secs`, ended unless renewed.
    fn grant(&self, ttl_secs: i64) -> PlaneFuture<'_, i64>;
    fn keep_alive(&self, lease: i64) -> PlaneFuture<'_, Box<dyn KeepAlive>>;
    fn revoke(&self, lease: i64) -> PlaneFuture<'_, ()>;
    /// Waits until this candidate (on `lease`) leads the election `name`.
    fn campaign<'a>(&'a self, name: &'a str, value: &'a str, lease: i64) -> PlaneFuture<'a, Box<dyn Term>>;
    /// The value the leader of election `name` campaigned with, if one leads.
    fn leader<'a>(&'a self, name: &'a str) -> PlaneFuture<'a, Option<String>>;
    /// The same plane through a member that answers now.
    fn reconnect(&self) -> PlaneFuture<'_, Arc<dyn Plane>>;
}

/// Renews one lease.
pub trait KeepAlive: Send {
    /// Renews the lease; the time it has left (0 or less: it ended).
    fn renew(&mut self) -> PlaneFuture<'_, i64>;
}

/// Leadership won by a campaign.
pub trait Term: Send {
    /// Gives leadership up before the lease ends.
    fn resign(self: Box<Self>) -> PlaneFuture<'static, ()>;
}
