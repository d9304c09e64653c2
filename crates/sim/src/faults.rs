//! The faults a run suffers, drawn from its seed between the simulation's steps: partitions
//! (both ways and one way), hung drives, drive crashes that lose unsynced writes, coordinator
//! crashes, etcd cut off from a host, its leader lost, etcd slow, and drives joining and
//! leaving. Each lasts a time drawn from the seed and is then healed; at the end of the
//! workload everything is healed so that the cluster can settle.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::Rng;
use spindle_cluster::control::MemberChange;
use spindle_cluster::map::Member;

use crate::disk::Disk;
use crate::etcd::Etcd;

/// A new fault starts on average once per this many milliseconds of simulated time.
const MEAN_GAP_MS: u32 = 300;
/// With `moves`: a member change starts on average once per this many milliseconds of
/// simulated time, beside the other faults (one of which is a change too, now and then).
pub const MOVE_GAP_MS: u32 = 150;
/// Longest a fault lasts before it is healed.
const LONGEST_MS: u64 = 3_000;
/// With slow links: the longest a message between a slowed client and a drive takes, drawn
/// for each fault between these (each message then between 100 µs and it, so messages
/// overtake each other across connections).
const SLOW_MS: std::ops::Range<u64> = 20..400;
/// The longest a message takes on a link that is not slowed (`crate::run`'s network).
pub const FAST: Duration = Duration::from_millis(5);

#[derive(Debug, Clone)]
enum Fault {
    Partition(String, String),
    OneWay(String, String),
    Hang(String),
    CrashDrive(String),
    CrashCoordinator(String),
    EtcdCut(String),
    EtcdSlow,
    /// A client's (or gateway's) links to every drive slow: its operations last long, and one
    /// may still be under way when another of the same client has loaded a newer map.
    SlowLinks(String),
    /// A client's (or gateway's) links to every drive held (with `moves`): what it sent in
    /// between arrives at once when released, as after a pause of its process or its network,
    /// requests stamped with the map it had when it sent them.
    HeldLinks(String),
}

/// What the run is made of, as the faults need to know it.
pub struct Cast {
    pub drives: Vec<(String, Arc<Disk>)>,
    pub spares: Vec<String>,
    pub coordinators: Vec<String>,
    pub clients: Vec<String>,
    pub etcd: Arc<Etcd>,
    pub cluster: String,
    /// Members a leave never goes below.
    pub min_members: usize,
    /// Whether a drive that left may join again.
    pub rejoin: bool,
    /// Whether a client's links may become slow (`Fault::SlowLinks`).
    pub slow_links: bool,
    /// Whether members change every `MOVE_GAP_MS` or so.
    pub moves: bool,
}

pub struct Faults {
    rng: StdRng,
    /// Faults under way, with when each is healed.
    active: Vec<(Duration, Fault)>,
    /// Drives that are members now (joined and not asked to leave).
    members: BTreeSet<String>,
    spares: Vec<String>,
    /// Drives asked to leave: spares again once the map no longer names them (a drive that
    /// left can join again, with whatever it still holds).
    departed: Vec<String>,
    /// What happened, for the report (`at ms: what`).
    pub log: Vec<String>,
}

impl Faults {
    pub fn new(rng: StdRng, cast: &Cast) -> Faults {
        Faults {
            rng,
            active: Vec::new(),
            members: cast.drives.iter().filter(|(d, _)| !cast.spares.contains(d)).map(|(d, _)| d.clone()).collect(),
            spares: cast.spares.clone(),
            departed: Vec::new(),
            log: Vec::new(),
        }
    }

    /// One step of the simulation: heals what is due, and maybe starts a fault.
    pub fn step(&mut self, sim: &mut turmoil::Sim<'_>, cast: &Cast) {
        let now = sim.elapsed();
        let (due, active): (Vec<_>, Vec<_>) = std::mem::take(&mut self.active).into_iter().partition(|(at, _)| *at <= now);
        self.active = active;
        for (_, fault) in due {
            self.heal(sim, cast, &fault);
        }
        if self.rng.random_ratio(1, MEAN_GAP_MS) {
            self.start(sim, cast, now);
        }
        // Drawn only where the run asks for it: without it a seed runs as it always has.
        if cast.moves && self.rng.random_ratio(1, MOVE_GAP_MS) {
            self.change_members(cast, now);
        }
    }

    /// Heals every fault under way.
    pub fn heal_all(&mut self, sim: &mut turmoil::Sim<'_>, cast: &Cast) {
        for (_, fault) in std::mem::take(&mut self.active) {
            self.heal(sim, cast, &fault);
        }
    }

    fn busy(&self, host: &str) -> bool {
        self.active.iter().any(|(_, f)| match f {
            Fault::Hang(h) | Fault::CrashDrive(h) | Fault::CrashCoordinator(h) | Fault::EtcdCut(h) | Fault::SlowLinks(h) | Fault::HeldLinks(h) => h == host,
            Fault::Partition(a, b) | Fault::OneWay(a, b) => a == host || b == host,
            Fault::EtcdSlow => false,
        })
    }

    /// Drives hung or crashed now: at most one at a time, so that every quorum of three
    /// replicas keeps two.
    fn drives_out(&self) -> usize {
        self.active.iter().filter(|(_, f)| matches!(f, Fault::Hang(_) | Fault::CrashDrive(_))).count()
    }

    fn pick<'a>(&mut self, from: &'a [String]) -> Option<&'a String> {
        let free: Vec<&String> = from.iter().filter(|h| !self.busy(h)).collect();
        (!free.is_empty()).then(|| free[self.rng.random_range(0..free.len())])
    }

    fn start(&mut self, sim: &mut turmoil::Sim<'_>, cast: &Cast, now: Duration) {
        let drives: Vec<String> = self.members.iter().cloned().collect();
        let mut hosts: Vec<String> = drives.clone();
        hosts.extend(cast.coordinators.iter().cloned());
        hosts.extend(cast.clients.iter().cloned());
        // Slow links are an eleventh kind, drawn only where the run asks for them: without them
        // a seed runs as it always has.
        let kinds = if cast.slow_links { 11 } else { 10 };
        // Held links are one kind more, drawn only with `moves` (numbered 11 whatever else).
        let drawn = self.rng.random_range(0..kinds + i32::from(cast.moves));
        let kind = if drawn == kinds { 11 } else { drawn };
        let fault = match kind {
            0 | 1 => {
                let (Some(a), Some(b)) = (self.pick(&drives).cloned(), self.pick(&hosts).cloned()) else { return };
                if a == b {
                    return;
                }
                sim.partition(a.as_str(), b.as_str());
                Fault::Partition(a, b)
            }
            2 => {
                let (Some(a), Some(b)) = (self.pick(&hosts).cloned(), self.pick(&drives).cloned()) else { return };
                if a == b {
                    return;
                }
                sim.partition_oneway(a.as_str(), b.as_str());
                Fault::OneWay(a, b)
            }
            3 if self.drives_out() == 0 => {
                let Some(d) = self.pick(&drives).cloned() else { return };
                for other in hosts.iter().filter(|h| **h != d) {
                    sim.hold(d.as_str(), other.as_str());
                }
                Fault::Hang(d)
            }
            4 if self.drives_out() == 0 => {
                let Some(d) = self.pick(&drives).cloned() else { return };
                sim.crash(d.as_str());
                if let Some((_, disk)) = cast.drives.iter().find(|(name, _)| *name == d) {
                    disk.crash(&mut self.rng);
                }
                Fault::CrashDrive(d)
            }
            5 => {
                let Some(k) = self.pick(&cast.coordinators).cloned() else { return };
                sim.crash(k.as_str());
                Fault::CrashCoordinator(k)
            }
            6 => {
                let mut parties = cast.coordinators.clone();
                parties.extend(cast.clients.iter().cloned());
                let Some(h) = self.pick(&parties).cloned() else { return };
                cast.etcd.cut(&h);
                Fault::EtcdCut(h)
            }
            7 => {
                let outage = Duration::from_millis(self.rng.random_range(100..2_000));
                cast.etcd.lose_leader(now, outage);
                self.log.push(format!("{}: etcd leader lost for {outage:?}", now.as_millis()));
                return;
            }
            8 => {
                if self.active.iter().any(|(_, f)| matches!(f, Fault::EtcdSlow)) {
                    return;
                }
                cast.etcd.set_slow(Duration::from_millis(self.rng.random_range(5..200)));
                Fault::EtcdSlow
            }
            10 => {
                let Some(c) = self.pick(&cast.clients).cloned() else { return };
                let slowest = Duration::from_millis(self.rng.random_range(SLOW_MS));
                for (d, _) in &cast.drives {
                    sim.set_link_max_message_latency(c.as_str(), d.as_str(), slowest);
                }
                self.log.push(format!("{}: links of {c} to the drives take up to {slowest:?}", now.as_millis()));
                Fault::SlowLinks(c)
            }
            11 => {
                let Some(c) = self.pick(&cast.clients).cloned() else { return };
                for (d, _) in &cast.drives {
                    sim.hold(c.as_str(), d.as_str());
                }
                Fault::HeldLinks(c)
            }
            _ => return self.change_members(cast, now),
        };
        let lasts = Duration::from_millis(self.rng.random_range(50..LONGEST_MS));
        self.log.push(format!("{}: {fault:?} for {lasts:?}", now.as_millis()));
        self.active.push((now + lasts, fault));
    }

    /// A spare drive joins, or a member leaves (never below three members, R).
    fn change_members(&mut self, cast: &Cast, now: Duration) {
        let map = cast.etcd.peek(&format!("/spindle/{}/map", cast.cluster)).and_then(|v| serde_json::from_slice::<spindle_cluster::map::ClusterMap>(&v).ok());
        if let Some(map) = map.filter(|_| cast.rejoin) {
            let (gone, still): (Vec<String>, Vec<String>) = self.departed.drain(..).partition(|d| !map.members.contains_key(d));
            self.spares.extend(gone);
            self.departed = still;
        }
        let change = if !self.spares.is_empty() && self.rng.random_bool(0.5) {
            let id = self.spares.remove(0);
            self.members.insert(id.clone());
            MemberChange::Add(member(&id))
        } else if self.members.len() > cast.min_members {
            let list: Vec<String> = self.members.iter().cloned().collect();
            let id = list[self.rng.random_range(0..list.len())].clone();
            if self.busy(&id) {
                return;
            }
            self.members.remove(&id);
            self.departed.push(id.clone());
            MemberChange::Remove { id }
        } else {
            return;
        };
        let id = match &change {
            MemberChange::Add(m) => m.id.clone(),
            MemberChange::Remove { id } => id.clone(),
            MemberChange::AddPool { name, .. } | MemberChange::AddRemote { name, .. } => name.clone(),
        };
        let key = format!("/spindle/{}/changes/{id}", cast.cluster);
        cast.etcd.put_now(&key, serde_json::to_vec(&change).unwrap_or_default());
        self.log.push(format!("{}: {change:?}", now.as_millis()));
    }

    fn heal(&mut self, sim: &mut turmoil::Sim<'_>, cast: &Cast, fault: &Fault) {
        match fault {
            Fault::Partition(a, b) => sim.repair(a.as_str(), b.as_str()),
            Fault::OneWay(a, b) => sim.repair_oneway(a.as_str(), b.as_str()),
            Fault::Hang(d) => {
                for (other, _) in &cast.drives {
                    if other != d {
                        sim.release(d.as_str(), other.as_str());
                    }
                }
                for other in cast.coordinators.iter().chain(&cast.clients) {
                    sim.release(d.as_str(), other.as_str());
                }
            }
            Fault::CrashDrive(h) | Fault::CrashCoordinator(h) => sim.bounce(h.as_str()),
            Fault::EtcdCut(h) => cast.etcd.heal(h),
            Fault::EtcdSlow => cast.etcd.set_slow(Duration::ZERO),
            Fault::SlowLinks(c) => {
                for (d, _) in &cast.drives {
                    sim.set_link_max_message_latency(c.as_str(), d.as_str(), FAST);
                }
            }
            Fault::HeldLinks(c) => {
                for (d, _) in &cast.drives {
                    sim.release(c.as_str(), d.as_str());
                }
            }
        }
    }
}

/// The member a simulated drive is added as.
pub fn member(id: &str) -> Member {
    Member {
        id: id.to_string(),
        addr: format!("{id}:{}", crate::net::DRIVE_PORT),
        tls_port: None,
        capacity: 0,
        weight: 1.0,
        domain: None,
        leaving: false,
        pool: None,
    }
}
