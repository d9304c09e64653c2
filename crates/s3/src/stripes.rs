//! Where the stripes of an object outside STANDARD live: an erasure-coded pool of the cluster
//! (the cluster client codes and places them) or a remote pool (an external S3 bucket this
//! gateway writes to itself, with the keys it was given). One door for writers, readers and
//! the sweeper, so none of them tells the kinds apart.

use std::collections::BTreeMap;

use bytes::Bytes;
use spindle_cluster::erasure::Stripe;

use crate::kv::{Fault, Kv, KvError};
use crate::remote::{RemoteAccess, RemoteError, RemoteTier};

pub struct Stripes {
    remotes: BTreeMap<String, RemoteTier>,
}

impl Stripes {
    /// The remote pools this gateway was given keys for, each checked against the cluster's
    /// map.
    pub fn open(kv: &Kv, access: &BTreeMap<String, RemoteAccess>) -> Result<Stripes, String> {
        let defined = kv.remote_pools();
        let mut remotes = BTreeMap::new();
        for (name, keys) in access {
            let Some(pool) = defined.get(name) else {
                let have: Vec<&str> = defined.keys().map(String::as_str).collect();
                return Err(format!(
                    "keys for remote pool {name:?}, which the store does not have ({})",
                    if have.is_empty() { "it has no remote pools: `spindle cluster pool add NAME --s3 URL`".to_string() } else { have.join(", ") }
                ));
            };
            remotes.insert(name.clone(), RemoteTier::new(name, pool, keys).map_err(|e| e.to_string())?);
        }
        Ok(Stripes { remotes })
    }

    /// Every pool that may hold stripes: the erasure-coded ones and the remote ones, whether
    /// or not this gateway has keys for them.
    pub fn names(&self, kv: &Kv) -> Vec<String> {
        let mut names = kv.pools();
        names.extend(kv.remote_pools().into_keys());
        names
    }

    /// The remote pool `pool`, if it is one: `Some(Err)` when this gateway has no keys for it.
    fn remote(&self, kv: &Kv, pool: &str) -> Option<Result<&RemoteTier, KvError>> {
        if let Some(t) = self.remotes.get(pool) {
            return Some(Ok(t));
        }
        kv.has_remote_pool(pool).then(|| {
            let reason = format!("this gateway has no keys for it (--remote-keys {pool}=FILE)");
            Err(KvError::Failed(Fault::Remote(RemoteError::Setting { pool: pool.to_string(), reason })))
        })
    }

    /// The largest stripe `pool` takes (a remote pool: any the gateway writes).
    pub fn capacity(&self, kv: &Kv, pool: &str) -> Result<usize, KvError> {
        match self.remote(kv, pool) {
            Some(tier) => tier.map(|_| usize::MAX),
            None => kv.stripe_capacity(pool),
        }
    }

    /// The first of up to `tries` names `draw` makes that would land on drives of `pool`
    /// that are all up, if any (a remote pool places nothing: the first).
    pub fn ready_name<T: AsRef<[u8]>>(&self, kv: &Kv, pool: &str, tries: usize, mut draw: impl FnMut() -> T) -> Option<T> {
        match self.remote(kv, pool) {
            Some(_) => Some(draw()),
            None => kv.ready_name(pool, tries, draw),
        }
    }

    /// Writes stripe `index` of `object` to `pool`, durable before it returns.
    pub async fn put(&self, kv: &Kv, pool: &str, object: &[u8], index: u32, stripe: Bytes) -> Result<(), KvError> {
        match self.remote(kv, pool) {
            Some(tier) => Ok(tier?.put_stripe(object, index, stripe).await?),
            None => kv.put_stripe(pool, object, index, stripe).await,
        }
    }

    /// Stripe `index` of `object` in `pool`, `len` bytes long.
    pub async fn get(&self, kv: &Kv, pool: &str, object: &[u8], index: u32, len: usize) -> Result<Stripe, KvError> {
        match self.remote(kv, pool) {
            Some(tier) => Ok(Stripe::from(tier?.get_stripe(object, index, len).await?)),
            None => kv.get_stripe(pool, object, index, len).await,
        }
    }

    /// Deletes every stripe of `object` in `pool`; returns how many there were (shards, in an
    /// erasure-coded pool).
    pub async fn delete_all(&self, kv: &Kv, pool: &str, object: &[u8]) -> Result<u64, KvError> {
        match self.remote(kv, pool) {
            Some(tier) => Ok(tier?.delete_stripes(object).await?),
            None => kv.delete_stripes(pool, object).await,
        }
    }
}
