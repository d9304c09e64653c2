//! The coordinator's sweeper rounds: partitions drives hold without being placed there,
//! deleted once seen foreign for the grace (`sweep`); one partition scrubbed a round
//! (`repair`); leaving members that hold nothing dropped from the map.

use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;

use spindle_client::{Client, ClientConfig};
use tracing::{info, warn};

use crate::control::Control;
use crate::map::ClusterMap;
use crate::metrics::CoordinatorMetrics;
use crate::store::{Store, StoreConfig};
use crate::{map, migrate, repair, sweep, ClusterError};

/// What a round needs of the coordinator's settings.
pub(crate) struct SweepConfig<'a> {
    pub interval: Duration,
    pub grace: Duration,
    pub client: &'a ClientConfig,
    pub metrics: &'a CoordinatorMetrics,
    /// The cluster client the scrub settles keys with where a replica's promise refuses
    /// their newest write.
    pub settler: &'a StoreConfig,
}

/// What the sweeper has seen foreign, since when; when it last looked; and the partition its
/// scrub checks next.
#[derive(Default)]
pub(crate) struct Sweeper {
    seen: BTreeMap<(String, u32), Instant>,
    last: Option<Instant>,
    scrub_next: u32,
    /// The erasure-coded group the scrub checks next, counted over every pool's groups.
    pool_scrub_next: u64,
    /// Opened the first time the scrub meets a key a promise blocks.
    settling: Option<Store>,
}

impl Sweeper {
    /// Scrubs one partition: every key brought to its newest write on every replica that
    /// answers. A replica can miss a write that was acknowledged without it (it refused the
    /// write's epoch while being fenced, or its client went away before the write reached
    /// it); reads repair what they meet, this repairs the rest in time. A replica that
    /// promised a ballot above a key's newest write (a round that never finished) refuses the
    /// late accept for good: such a key is settled through the cluster client, its current
    /// write accepted again by every replica under a ballot above the promise
    /// (`Store::restamp`).
    async fn scrub_partition(&mut self, p: u32, control: &Control, map: &ClusterMap, drives: &migrate::Drives, config: &SweepConfig<'_>) {
        let replicas: Vec<(String, Client)> = map.replicas_of(p).iter().filter_map(|d| drives.get(d).map(|c| (d.clone(), c.clone()))).collect();
        if replicas.len() < 2 {
            return;
        }
        let mut blocked = Vec::new();
        match repair::repair_partition_noting(p, &replicas, &mut blocked).await {
            Ok(n) if n > 0 => {
                config.metrics.repaired(n);
                info!("scrub: partition {p}: {n} entries brought to their newest write");
            }
            Ok(_) => {}
            Err(e) => warn!("scrub: partition {p}: {e}"),
        }
        // A key is noted once for each replica that refused it.
        blocked.sort();
        blocked.dedup();
        for dkey in blocked {
            let Some(key) = map::user_key(p, &dkey) else { continue };
            if self.settling.is_none() {
                match Store::open(control.clone(), config.settler.clone()).await {
                    Ok(store) => self.settling = Some(store),
                    Err(e) => return warn!("scrub: partition {p}: opening the cluster client: {e}"),
                }
            }
            let Some(store) = &self.settling else { return };
            match store.restamp(key).await {
                Ok(()) => info!("scrub: partition {p}: a key a promise held back settled through the cluster client"),
                Err(e) => warn!("scrub: partition {p}: settling a key a promise held back: {e}"),
            }
        }
    }

    /// Scrubs one group of an erasure-coded pool a round: every shard of its stripes read and
    /// checked, parity against the data, and what is missing or wrong rewritten.
    async fn scrub_pool_group(&mut self, map: &ClusterMap, drives: &migrate::Drives, config: &SweepConfig<'_>) {
        let total: u64 = map.pools.values().map(|p| u64::from(p.groups)).sum();
        if total == 0 {
            return;
        }
        let mut n = self.pool_scrub_next % total;
        self.pool_scrub_next = n + 1;
        for (name, pool) in &map.pools {
            if n >= u64::from(pool.groups) {
                n -= u64::from(pool.groups);
                continue;
            }
            let group = n as u32;
            if pool.drives_of(group).is_empty() || pool.pending.contains_key(&group) {
                return;
            }
            let all: Vec<usize> = (0..pool.code.width()).collect();
            let throttle = migrate::Throttle::new(0);
            match crate::rebuild::heal_group(pool, group, &all, true, drives, &throttle).await {
                Ok(h) if h.shards > 0 || h.unhealable > 0 => {
                    config.metrics.repaired(h.shards);
                    info!("scrub: pool {name} group {group}: {} shards of {} stripes rewritten, {} stripes unreadable", h.shards, h.stripes, h.unhealable);
                }
                Ok(_) => {}
                Err(e) => warn!("scrub: pool {name} group {group}: {e}"),
            }
            return;
        }
    }

    /// Every `sweep_interval`: each drive's foreign partitions found, those seen foreign for
    /// `sweep_grace` deleted; one partition scrubbed; then leaving members that hold nothing
    /// are dropped from the map.
    pub(crate) async fn round(&mut self, control: &Control, config: &SweepConfig<'_>, map: &ClusterMap, revision: i64) -> Result<(), ClusterError> {
        if self.last.is_some_and(|l| l.elapsed() < config.interval) {
            return Ok(());
        }
        self.last = Some(Instant::now());
        let drives = migrate::connect_all(map, config.client).await;
        let mut found = std::collections::BTreeSet::new();
        // Drives of erasure-coded pools hold no partitions of the default pool, but groups of
        // their pool: those placed elsewhere (a drive back after its positions went to others)
        // are foreign, unless a rebuild of the group is pending.
        for (id, c) in &drives {
            let found_here = match map.members.get(id).and_then(|m| m.pool.as_ref()).and_then(|p| map.pools.get(p)) {
                Some(pool) => sweep::foreign_prefixes(pool.groups, |g| pool.drives_of(g).contains(id) || pool.pending.contains_key(&g), c).await,
                None => sweep::foreign_partitions(map, id, c).await,
            };
            let foreign = match found_here {
                Ok(f) => f,
                Err(e) => {
                    warn!("sweeping {id}: {e}");
                    continue;
                }
            };
            for p in foreign {
                let since = *self.seen.entry((id.clone(), p)).or_insert_with(Instant::now);
                if since.elapsed() < config.grace {
                    found.insert((id.clone(), p));
                    continue;
                }
                match sweep::wipe(p, c).await {
                    Ok(n) => {
                        config.metrics.swept(n);
                        info!("swept partition {p} off {id}: {n} entries it no longer holds");
                    }
                    Err(e) => {
                        warn!("sweeping partition {p} off {id}: {e}");
                        found.insert((id.clone(), p));
                    }
                }
            }
        }
        self.seen.retain(|k, _| found.contains(k));
        // Scrub one partition a round: every key brought to its newest write on every replica
        // that answers. A replica can miss a write that was acknowledged without it (it
        // refused the write's epoch while being fenced, or its client went away before the
        // write reached it); reads repair what they meet, this repairs the rest in time.
        if map.partitions > 0 {
            let p = self.scrub_next % map.partitions;
            self.scrub_next = (p + 1) % map.partitions;
            self.scrub_partition(p, control, map, &drives, config).await;
        }
        self.scrub_pool_group(map, &drives, config).await;
        // Leaving members placed nowhere with nothing left on them (or not answering) go.
        let gone: Vec<String> = map
            .members
            .values()
            .filter(|m| m.leaving && !(0..map.partitions).any(|p| map.assigned(&m.id, p)) && !map.pools.values().any(|p| p.places(&m.id) || p.pending.values().any(|g| g.values().any(|d| *d == m.id))) && !found.iter().any(|(d, _)| *d == m.id))
            .map(|m| m.id.clone())
            .collect();
        if !gone.is_empty() {
            let mut next = map.clone();
            for id in &gone {
                next.members.remove(id);
            }
            next.epoch += 1;
            if control.replace_map(revision, &next).await? {
                for id in &gone {
                    control.clear_health(id).await?;
                }
                config.metrics.map_changed();
                info!("epoch {}: {} left the cluster, drained", next.epoch, gone.join(", "));
            }
        }
        Ok(())
    }
}
