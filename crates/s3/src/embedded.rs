//! A gateway without its HTTP server: the S3 operations over a store, called by a process
//! that runs them itself (the simulator runs gateways so, each on a simulated host of its
//! own), with the sweeper's pass and a census of what the store holds for objects.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use crate::access::{Decision, Granted, Principal};
use crate::gateway::Gateway;
use crate::kv::{Kv, Pages};
use crate::layout::{self, DataId};
use crate::md5_lanes::Md5Lanes;
use crate::objects::{Core, PAGE};
use crate::GatewayError;

/// The S3 operations of one gateway over `kv`.
pub struct Embedded {
    gateway: Gateway,
    core: Arc<Core>,
}

/// What the store holds for objects: the data ids that have chunks, those that records
/// reference (objects' versions, uploads' parts), and the intents not yet collected.
#[derive(Debug, Default)]
pub struct Census {
    pub stored: BTreeSet<DataId>,
    pub referenced: BTreeSet<DataId>,
    /// Those of `referenced` that uploads' parts reference.
    pub in_parts: BTreeSet<DataId>,
    pub intents: BTreeSet<DataId>,
}

impl Census {
    /// Data with chunks that no record references: what the sweeper must have deleted once
    /// every upload has ended and the grace has passed.
    pub fn unreferenced(&self) -> Vec<DataId> {
        self.stored.difference(&self.referenced).copied().collect()
    }

    /// Data a record references that has no chunk left (an object cut short): never allowed.
    /// Only data stored as replicated chunks is counted (`census`), and an empty object has
    /// none.
    pub fn missing(&self) -> Vec<DataId> {
        self.referenced.difference(&self.stored).copied().collect()
    }
}

impl Embedded {
    /// A gateway over `kv` that cuts objects into chunks of at most `chunk` bytes (the store's
    /// largest value at most), takes multipart uploads' parts (but the last) of `min_part`
    /// bytes or more, and keeps unreferenced data for `grace`. Uploads hash their own bytes (no
    /// hashing thread), and data ids are drawn from `seed`.
    pub async fn open(kv: Kv, chunk: usize, min_part: u64, grace: Duration, seed: u64) -> Result<Embedded, GatewayError> {
        let chunk = chunk.clamp(1, kv.max_value().await?);
        let stripes = crate::stripes::Stripes::open(&kv, &Default::default()).map_err(GatewayError::Invalid)?;
        let ids = parking_lot::Mutex::new(rand::SeedableRng::seed_from_u64(seed));
        let core = Arc::new(Core { kv, chunk, min_part, grace, md5: Md5Lanes::inline(), classes: Default::default(), stripes, ids, watched: Default::default(), marks_looked_for: crate::gateway::room_for_left_marks(), turns: Default::default() });
        Ok(Embedded { gateway: Gateway::new(core.clone()), core })
    }

    /// The S3 operations (`s3s::S3`), as the HTTP server calls them once a request is
    /// authenticated and its access decided.
    pub fn s3(&self) -> &impl s3s::S3 {
        &self.gateway
    }

    /// A request for `input` made with one of the gateway's own keys (allowed everything).
    pub fn admin_request<T>(input: T) -> s3s::S3Request<T> {
        let mut extensions = http::Extensions::new();
        extensions.insert(Granted { principal: Principal::Admin, object: Decision::Allowed, source: None, bucket: None, per_key: None });
        s3s::S3Request {
            input,
            method: http::Method::GET,
            uri: http::Uri::from_static("/"),
            headers: http::HeaderMap::new(),
            extensions,
            credentials: None,
            region: None,
            service: None,
            trailing_headers: None,
        }
    }

    /// One pass of the sweeper, as the server's runs: over the intents, then the uploads
    /// (also when the pass over the intents failed); returns (intents seen, chunks deleted).
    pub async fn sweep(&self) -> s3s::S3Result<(u64, u64)> {
        let swept = self.core.sweep().await;
        crate::gateway::tidy_uploads(&self.core).await?;
        swept
    }

    /// One orphan scan, as the server's sweeper runs one now and then, `window` data ids
    /// without an intent at a time (the server's: `SCAN_WINDOW`).
    pub async fn scan_orphans(&self, window: usize) -> s3s::S3Result<crate::Scanned> {
        self.core.scan_orphans(window).await
    }

    /// Walks every chunk, intent and referencing record of the store.
    pub async fn census(&self) -> Result<Census, GatewayError> {
        let mut census = Census::default();
        let mut chunks = Pages::new(layout::all_chunks(), PAGE);
        while let Some(keys) = chunks.next(&self.core.kv).await? {
            census.stored.extend(keys.iter().filter_map(|k| layout::chunk_data(k)));
        }
        let mut intents = Pages::new(layout::intents(), PAGE);
        while let Some(keys) = intents.next(&self.core.kv).await? {
            census.intents.extend(keys.iter().filter_map(|k| layout::intent_data(k)));
        }
        self.core
            .walk_references(|r| {
                if r.size > 0 && !r.pooled {
                    census.referenced.insert(r.data);
                    if r.in_part {
                        census.in_parts.insert(r.data);
                    }
                }
            })
            .await?;
        Ok(census)
    }
}
