//! The coordinator's Prometheus metrics: leadership, the map's epoch, every drive's state as
//! the leader sees it, probes and their latency, repairs and member changes.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use spindle_metrics::emit::{self, Labels};
use spindle_metrics::{Collector, DescriptorEncoder, Histogram};

use crate::map::ClusterMap;

/// One drive as the leader last saw it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DriveView {
    pub up: bool,
    /// Being caught up before it counts as a replica again.
    pub repairing: bool,
    /// Partitions the map places on it.
    pub partitions: usize,
}

#[derive(Debug, Default)]
pub struct CoordinatorMetrics {
    leader: AtomicBool,
    terms: AtomicU64,
    epoch: AtomicU64,
    partitions: AtomicU64,
    /// Replicas placed on drives that are down: copies the cluster is short of.
    replicas_missing: AtomicU64,
    probes_ok: AtomicU64,
    probes_failed: AtomicU64,
    probe_latency: Histogram,
    marked_down: AtomicU64,
    repaired_entries: AtomicU64,
    map_changes: AtomicU64,
    moving_partitions: AtomicU64,
    moved_bytes: AtomicU64,
    moved_entries: AtomicU64,
    swept_entries: AtomicU64,
    drives: Mutex<BTreeMap<String, DriveView>>,
}

impl CoordinatorMetrics {
    pub fn leading(&self, leads: bool) {
        if leads {
            self.terms.fetch_add(1, Ordering::Relaxed);
        } else {
            // A follower's view of the drives would only go stale.
            self.drives.lock().clear();
        }
        self.leader.store(leads, Ordering::Relaxed);
    }

    pub fn probed(&self, answered: bool, took: Duration) {
        let c = if answered { &self.probes_ok } else { &self.probes_failed };
        c.fetch_add(1, Ordering::Relaxed);
        self.probe_latency.observe(took);
    }

    pub fn marked_down(&self) {
        self.marked_down.fetch_add(1, Ordering::Relaxed);
    }

    pub fn repaired(&self, entries: u64) {
        self.repaired_entries.fetch_add(entries, Ordering::Relaxed);
    }

    /// Partitions moving under the map now.
    pub fn moving(&self, partitions: usize) {
        self.moving_partitions.store(partitions as u64, Ordering::Relaxed);
    }

    /// A partition copied: value bytes the drives pushed, entries written.
    pub fn moved(&self, bytes: u64, entries: u64) {
        self.moved_bytes.fetch_add(bytes, Ordering::Relaxed);
        self.moved_entries.fetch_add(entries, Ordering::Relaxed);
    }

    pub fn swept(&self, entries: u64) {
        self.swept_entries.fetch_add(entries, Ordering::Relaxed);
    }

    pub fn map_changed(&self) {
        self.map_changes.fetch_add(1, Ordering::Relaxed);
    }

    /// The map and every drive's state after a round of probes.
    pub fn observe_round(&self, map: &ClusterMap, states: BTreeMap<String, DriveView>) {
        let missing: usize = (0..map.partitions)
            .map(|p| map.replicas_of(p).iter().filter(|d| !states.get(*d).is_some_and(|v| v.up)).count())
            .sum();
        self.epoch.store(map.epoch, Ordering::Relaxed);
        self.partitions.store(u64::from(map.partitions), Ordering::Relaxed);
        self.replicas_missing.store(missing as u64, Ordering::Relaxed);
        *self.drives.lock() = states;
    }

    pub fn drives(&self) -> BTreeMap<String, DriveView> {
        self.drives.lock().clone()
    }
}

impl Collector for CoordinatorMetrics {
    fn encode(&self, mut e: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let m = self;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let leader = m.leader.load(Ordering::Relaxed);
        emit::gauge(&mut e, "spindle_coordinator_leader", "1 while this coordinator leads.", if leader { 1.0 } else { 0.0 })?;
        emit::counter(&mut e, "spindle_coordinator_terms", "Leadership terms this coordinator has won.", load(&m.terms))?;
        emit::gauge(&mut e, "spindle_coordinator_epoch", "The cluster map's epoch (the drives' cluster version).", load(&m.epoch) as f64)?;
        emit::gauge(&mut e, "spindle_coordinator_partitions", "Partitions in the map.", load(&m.partitions) as f64)?;
        emit::gauge(&mut e, "spindle_coordinator_replicas_missing", "Partition replicas placed on drives that are not up.", load(&m.replicas_missing) as f64)?;
        emit::counters(
            &mut e,
            "spindle_coordinator_probes",
            "Drive probes (NOOP at the map's epoch), by result.",
            [(vec![("result", "answered")], load(&m.probes_ok)), (vec![("result", "failed")], load(&m.probes_failed))],
        )?;
        emit::histograms(&mut e, "spindle_coordinator_probe_duration_seconds", "Time a probe took, fencing included.", [(Labels::new(), &m.probe_latency)])?;
        emit::counter(&mut e, "spindle_coordinator_drives_marked_down", "Times a drive was marked down.", load(&m.marked_down))?;
        emit::counter(&mut e, "spindle_coordinator_repaired_entries", "Entries copied to replicas that lacked them (catch-up of drives that come back).", load(&m.repaired_entries))?;
        emit::counter(&mut e, "spindle_coordinator_map_changes", "Changes of the map (member changes, moves started, flipped, rolled back), each a new epoch.", load(&m.map_changes))?;
        emit::gauge(&mut e, "spindle_coordinator_moving_partitions", "Partitions moving between drives now.", load(&m.moving_partitions) as f64)?;
        emit::counter(&mut e, "spindle_coordinator_moved_bytes", "Value bytes drives pushed to each other for moves.", load(&m.moved_bytes))?;
        emit::counter(&mut e, "spindle_coordinator_moved_entries", "Entries copied by moves (pushed, or caught up after the push).", load(&m.moved_entries))?;
        emit::counter(&mut e, "spindle_coordinator_swept_entries", "Entries deleted from drives that no longer hold their partition.", load(&m.swept_entries))?;
        let drives = m.drives();
        emit::gauges(
            &mut e,
            "spindle_coordinator_drive_up",
            "1 if the drive is up (answering, caught up), by drive.",
            drives.iter().map(|(id, v)| (vec![("drive", id.as_str())], if v.up { 1.0 } else { 0.0 })),
        )?;
        emit::gauges(
            &mut e,
            "spindle_coordinator_drive_repairing",
            "1 while the drive is being caught up, by drive.",
            drives.iter().map(|(id, v)| (vec![("drive", id.as_str())], if v.repairing { 1.0 } else { 0.0 })),
        )?;
        emit::gauges(
            &mut e,
            "spindle_coordinator_drive_partitions",
            "Partitions the map places on the drive.",
            drives.iter().map(|(id, v)| (vec![("drive", id.as_str())], v.partitions as f64)),
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Member;

    #[test]
    fn replicas_on_drives_not_up_are_missing() {
        let mut map = ClusterMap::new(8, 3, 2).unwrap();
        for id in ["a", "b", "c", "d"] {
            map.members.insert(id.into(), Member { id: id.into(), addr: "127.0.0.1:1".into(), tls_port: None, capacity: 0, weight: 1.0, domain: None, leaving: false, pool: None });
        }
        map.placement = map.computed_placement(&Default::default());
        let held_by_a = (0..8).filter(|&p| map.replicas_of(p).iter().any(|d| d == "a")).count();
        let m = CoordinatorMetrics::default();
        let states = ["a", "b", "c", "d"].map(|id| (id.to_string(), DriveView { up: id != "a", repairing: false, partitions: 0 })).into_iter().collect();
        m.observe_round(&map, states);
        assert_eq!(m.replicas_missing.load(Ordering::Relaxed), held_by_a as u64);
        m.leading(true);
        m.leading(false);
        assert!(m.drives().is_empty(), "a follower shows no drives");
        assert_eq!(m.terms.load(Ordering::Relaxed), 1);
    }
}
