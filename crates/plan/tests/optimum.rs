//! The planner finds the known optimum: hand-made instances whose answer is worked out in the
//! comments, and seeded random instances, each checked against an exhaustive enumeration of
//! every design (node counts per node type x drive type x drives per node) done here, from the
//! instance's own numbers, without the planner's model.

use std::path::Path;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use spindle_plan::model::{Cap, Target};
use spindle_plan::{plan, Catalogue, Design, Infeasibility, PlanError};

#[derive(Clone, Debug)]
struct Node {
    cost: f64,
    power: f64,
    bays: u32,
    network: Option<f64>,
    count_max: Option<u32>,
}

/// Throughput tables give the MB/s of 1, 2, ... drives in one node, so the enumeration reads
/// them without interpolating.
#[derive(Clone, Debug)]
struct Drive {
    cost: f64,
    power: f64,
    tb: f64,
    write: Vec<f64>,
    read: Vec<f64>,
}

#[derive(Clone, Debug)]
struct Instance {
    nodes: Vec<Node>,
    drives: Vec<Drive>,
    capacity: f64,
    write: f64,
    read: f64,
    nodes_min: u32,
    usable: f64,
    amplification: f64,
    capital_max: Option<f64>,
    power_max: Option<f64>,
    years: f64,
    price: f64,
    pue: f64,
}

impl Instance {
    fn new(nodes: Vec<Node>, drives: Vec<Drive>) -> Instance {
        Instance { nodes, drives, capacity: 0.0, write: 0.0, read: 0.0, nodes_min: 0, usable: 1.0, amplification: 1.0, capital_max: None, power_max: None, years: 0.0, price: 0.0, pue: 1.0 }
    }

    fn toml(&self) -> String {
        let mut s = String::from("currency = \"EUR\"\n");
        for (i, n) in self.nodes.iter().enumerate() {
            s += &format!("[[node]]\nname = \"n{i}\"\ncapital_cost = {}\npower_w = {}\nbays = {}\n", n.cost, n.power, n.bays);
            if let Some(network) = n.network {
                s += &format!("network_mb_s = {network}\n");
            }
            if let Some(max) = n.count_max {
                s += &format!("count_max = {max}\n");
            }
        }
        let table = |v: &[f64]| v.iter().enumerate().map(|(k, mb_s)| format!("{{ drives = {}, mb_s = {mb_s} }}", k + 1)).collect::<Vec<_>>().join(", ");
        for (i, d) in self.drives.iter().enumerate() {
            s += &format!(
                "[[drive]]\nname = \"d{i}\"\ncapital_cost = {}\npower_w = {}\ncapacity_tb = {}\nsequential_write = [{}]\nrandom_read = [{}]\n",
                d.cost,
                d.power,
                d.tb,
                table(&d.write),
                table(&d.read)
            );
        }
        s += &format!(
            "[targets]\ncapacity_tb = {}\nsequential_write_mb_s = {}\nrandom_read_mb_s = {}\nnodes_min = {}\nusable_fraction = {}\nwrite_amplification = {}\n",
            self.capacity, self.write, self.read, self.nodes_min, self.usable, self.amplification
        );
        s += "[caps]\n";
        if let Some(max) = self.capital_max {
            s += &format!("capital_cost_max = {max}\n");
        }
        if let Some(max) = self.power_max {
            s += &format!("power_w_max = {max}\n");
        }
        s += &format!("[costs]\nyears = {}\nelectricity_per_kwh = {}\npue = {}\n", self.years, self.price, self.pue);
        s
    }

    fn plan(&self) -> Result<Design, PlanError> {
        let catalogue = Catalogue::parse(&self.toml(), Path::new("instance.toml"), Path::new(".")).expect("the instance parses");
        plan(&catalogue, &catalogue.scenario)
    }

    /// Every node one can build: (node, drive, drives) with its per-node figures.
    fn options(&self) -> Vec<Build> {
        let energy_per_w = 8766.0 * self.years / 1000.0 * self.price * self.pue;
        let mut options = Vec::new();
        for (n, node) in self.nodes.iter().enumerate() {
            for drive in &self.drives {
                for k in 1..=node.bays {
                    let ceiling = node.network.unwrap_or(f64::INFINITY);
                    let kf = f64::from(k);
                    let power = node.power + kf * drive.power;
                    let capital = node.cost + kf * drive.cost;
                    options.push(Build {
                        node: n,
                        tb: kf * drive.tb * self.usable,
                        write: drive.write[k as usize - 1].min(ceiling) / self.amplification,
                        read: drive.read[k as usize - 1].min(ceiling),
                        capital,
                        power,
                        cost: capital + power * energy_per_w,
                    });
                }
            }
        }
        options
    }

    /// The least cost over every design, by exhaustive enumeration; `None` if none is feasible.
    fn brute_force(&self) -> Option<f64> {
        let options = self.options();
        // No optimal design holds more nodes of one option than meet every target alone.
        let bounds: Vec<u32> = options
            .iter()
            .map(|o| {
                let enough = [(self.capacity, o.tb), (self.write, o.write), (self.read, o.read), (f64::from(self.nodes_min), 1.0)]
                    .iter()
                    .map(|(t, a)| (t / a).ceil())
                    .fold(0.0, f64::max) as u32;
                self.nodes[o.node].count_max.map_or(enough, |m| enough.min(m))
            })
            .collect();
        let mut counts = vec![0u32; options.len()];
        let mut best = None;
        self.search(&options, &bounds, 0, &mut counts, 0.0, &mut best);
        best
    }

    fn search(&self, options: &[Build], bounds: &[u32], i: usize, counts: &mut Vec<u32>, cost: f64, best: &mut Option<f64>) {
        // Costs are never negative: a partial design already dearer than the best cannot win.
        if best.is_some_and(|b| cost > b * (1.0 + 1e-12)) {
            return;
        }
        if i == options.len() {
            if self.feasible(options, counts) {
                *best = Some(best.map_or(cost, |b: f64| b.min(cost)));
            }
            return;
        }
        for n in 0..=bounds[i] {
            counts[i] = n;
            self.search(options, bounds, i + 1, counts, cost + f64::from(n) * options[i].cost, best);
        }
        counts[i] = 0;
    }

    fn feasible(&self, options: &[Build], counts: &[u32]) -> bool {
        let sum = |f: &dyn Fn(&Build) -> f64| options.iter().zip(counts).map(|(o, n)| f64::from(*n) * f(o)).sum::<f64>();
        let slack = 1e-9;
        let per_type_ok = self.nodes.iter().enumerate().all(|(t, node)| {
            let used: u32 = options.iter().zip(counts).filter(|(o, _)| o.node == t).map(|(_, n)| n).sum();
            node.count_max.is_none_or(|m| used <= m)
        });
        sum(&|o| o.tb) >= self.capacity * (1.0 - slack)
            && sum(&|o| o.write) >= self.write * (1.0 - slack)
            && sum(&|o| o.read) >= self.read * (1.0 - slack)
            && counts.iter().sum::<u32>() >= self.nodes_min
            && self.capital_max.is_none_or(|m| sum(&|o| o.capital) <= m * (1.0 + slack))
            && self.power_max.is_none_or(|m| sum(&|o| o.power) <= m * (1.0 + slack))
            && per_type_ok
    }
}

#[derive(Clone, Debug)]
struct Build {
    node: usize,
    tb: f64,
    write: f64,
    read: f64,
    capital: f64,
    power: f64,
    cost: f64,
}

fn flat(per_drive: f64, drives: u32) -> Vec<f64> {
    (1..=drives).map(|k| per_drive * f64::from(k)).collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * a.abs().max(b.abs()).max(1.0)
}

/// The design's lines as (node index, drive index, drives per node, nodes).
fn lines(d: &Design) -> Vec<(usize, usize, u32, u32)> {
    d.lines.iter().map(|l| (l.per_node.node, l.per_node.drive, l.drives_per_node, l.nodes)).collect()
}

/// 4-bay nodes (1000 each) behind a 500 MB/s network, drives of 200 MB/s (100 each), 2000
/// MB/s of writes: 2 drives give 400 MB/s (5 nodes, 6000), 3 drives reach the ceiling (4 nodes,
/// 5200), a 4th drive adds cost and nothing else (5600). The ceiling makes 3 the answer.
fn ceiling_instance() -> Instance {
    let node = Node { cost: 1000.0, power: 0.0, bays: 4, network: Some(500.0), count_max: None };
    let drive = Drive { cost: 100.0, power: 0.0, tb: 1.0, write: flat(200.0, 4), read: flat(200.0, 4) };
    Instance { write: 2000.0, capacity: 1.0, ..Instance::new(vec![node], vec![drive]) }
}

#[test]
fn the_node_ceiling_binds() {
    let inst = ceiling_instance();
    let d = inst.plan().unwrap();
    assert_eq!(lines(&d), vec![(0, 0, 3, 4)]);
    assert!(d.lines[0].per_node.write_limited_by_node);
    assert!(close(d.totals.total_cost, 5200.0));
    assert!(close(inst.brute_force().unwrap(), 5200.0));
    let write = d.constraints.iter().find(|c| c.name == Target::SequentialWrite.to_string()).unwrap();
    assert!(write.binding && write.slack.abs() < 1e-6, "{write:?}");
    let capacity = d.constraints.iter().find(|c| c.name == Target::Capacity.to_string()).unwrap();
    assert!(!capacity.binding, "12 TB against 1 TB required: {capacity:?}");
}

/// 1-bay nodes (500, 50 W) for 100 TB of 10 TB drives: drive A costs 100 and draws 30 W,
/// drive B costs 150 and draws 5 W. Capital alone: 10 x 600 < 10 x 650, A wins. Over 5 years
/// at 0.2 per kWh one W costs 8.766: A nodes cost 600 + 80 W = 1301.28, B 650 + 55 W = 1132.13.
fn power_instance(years: f64) -> Instance {
    let node = Node { cost: 500.0, power: 50.0, bays: 1, network: None, count_max: None };
    let a = Drive { cost: 100.0, power: 30.0, tb: 10.0, write: flat(100.0, 1), read: flat(100.0, 1) };
    let b = Drive { cost: 150.0, power: 5.0, tb: 10.0, write: flat(100.0, 1), read: flat(100.0, 1) };
    Instance { capacity: 100.0, years, price: 0.2, ..Instance::new(vec![node], vec![a, b]) }
}

#[test]
fn power_over_the_horizon_changes_the_choice() {
    let now = power_instance(0.0);
    let d = now.plan().unwrap();
    assert_eq!(lines(&d), vec![(0, 0, 1, 10)]);
    assert!(close(d.totals.total_cost, 6000.0) && close(now.brute_force().unwrap(), 6000.0));

    let later = power_instance(5.0);
    let d = later.plan().unwrap();
    assert_eq!(lines(&d), vec![(0, 1, 1, 10)]);
    let expected = 10.0 * (650.0 + 55.0 * 8766.0 * 5.0 / 1000.0 * 0.2);
    assert!(close(d.totals.total_cost, expected), "{} vs {expected}", d.totals.total_cost);
    assert!(close(later.brute_force().unwrap(), expected));
    assert!(close(d.totals.energy_cost, expected - 6500.0));
}

#[test]
fn a_binding_power_cap_is_priced() {
    // Capital only, 600 W at most: A draws 80 W a node, B 55 W; x nodes of A need
    // 550 + 25 x <= 600, so x <= 2, and cost 6500 - 50 x: 6400 against 6000 without the cap.
    let inst = Instance { power_max: Some(600.0), ..power_instance(0.0) };
    let d = inst.plan().unwrap();
    assert!(close(d.totals.total_cost, 6400.0), "{}", d.totals.total_cost);
    assert!(close(inst.brute_force().unwrap(), 6400.0));
    let cap = d.constraints.iter().find(|c| c.name == Cap::Power.to_string()).unwrap();
    assert!(cap.binding);
    assert!(close(cap.cost_of_cap.unwrap(), 400.0), "{cap:?}");
    let text = spindle_plan::render_text(&d);
    assert!(text.contains("power cap") && text.contains("BINDING") && text.contains("400.00 EUR less"), "{text}");
}

#[test]
fn a_budget_too_low_is_named_with_the_least_that_works() {
    let inst = Instance { capital_max: Some(5000.0), ..ceiling_instance() };
    assert_eq!(inst.brute_force(), None);
    match inst.plan() {
        Err(PlanError::Infeasible(Infeasibility::CapsTooLow { shortfalls })) => {
            assert_eq!(shortfalls.len(), 1);
            assert_eq!(shortfalls[0].cap, Cap::CapitalCost);
            assert!(close(shortfalls[0].minimum, 5200.0), "{shortfalls:?}");
            assert_eq!(shortfalls[0].to_string(), "capital cost cap of 5000.00 is too low: meeting the targets needs at least 5200.00");
        }
        other => panic!("expected a capital cap shortfall, got {other:?}"),
    }
}

#[test]
fn a_power_cap_too_low_is_named_with_the_least_that_works() {
    // The least power for 100 TB: ten nodes with drive B, 55 W each.
    let inst = Instance { power_max: Some(500.0), ..power_instance(5.0) };
    assert_eq!(inst.brute_force(), None);
    let err = inst.plan().unwrap_err();
    match &err {
        PlanError::Infeasible(Infeasibility::CapsTooLow { shortfalls }) => {
            assert_eq!(shortfalls[0].cap, Cap::Power);
            assert!(close(shortfalls[0].minimum, 550.0), "{shortfalls:?}");
        }
        other => panic!("expected a power cap shortfall, got {other:?}"),
    }
    assert!(err.to_string().contains("power cap of 500.00 W is too low: meeting the targets needs at least 550.00 W"), "{err}");
}

#[test]
fn caps_that_conflict_only_together_are_reported_so() {
    // Capital <= 6200 needs x >= 6 nodes of A (6500 - 50 x); power <= 600 needs x <= 2.
    let inst = Instance { capital_max: Some(6200.0), power_max: Some(600.0), ..power_instance(0.0) };
    assert_eq!(inst.brute_force(), None);
    match inst.plan() {
        Err(PlanError::Infeasible(Infeasibility::CapsTogether { caps })) => assert_eq!(caps, vec![Cap::CapitalCost, Cap::Power]),
        other => panic!("expected caps conflicting together, got {other:?}"),
    }
}

#[test]
fn a_target_no_spend_reaches_is_named() {
    // Three nodes at most, 500 MB/s each: 1500 MB/s of the 2000 asked.
    let mut inst = ceiling_instance();
    inst.nodes[0].count_max = Some(3);
    assert_eq!(inst.brute_force(), None);
    let err = inst.plan().unwrap_err();
    match &err {
        PlanError::Infeasible(Infeasibility::TargetUnreachable { target, maximum, .. }) => {
            assert_eq!(*target, Target::SequentialWrite);
            assert!(close(*maximum, 1500.0));
        }
        other => panic!("expected an unreachable target, got {other:?}"),
    }
    assert!(err.to_string().contains("even with unlimited spend"), "{err}");
}

#[test]
fn uneven_drive_counts_come_out_as_two_lines() {
    // 10 TB in 1 TB drives on 4-bay nodes, at least 3 nodes, nodes dear (1000) and drives cheap:
    // 3 nodes holding 10 drives, spread 4 + 3 + 3.
    let node = Node { cost: 1000.0, power: 0.0, bays: 4, network: None, count_max: None };
    let drive = Drive { cost: 10.0, power: 0.0, tb: 1.0, write: flat(100.0, 4), read: flat(100.0, 4) };
    let inst = Instance { capacity: 10.0, nodes_min: 3, ..Instance::new(vec![node], vec![drive]) };
    let d = inst.plan().unwrap();
    let mut got = lines(&d);
    got.sort();
    assert_eq!(got, vec![(0, 0, 3, 2), (0, 0, 4, 1)]);
    assert!(close(d.totals.total_cost, 3100.0) && close(inst.brute_force().unwrap(), 3100.0));
    assert_eq!(d.totals.drives, 10);
}

#[test]
fn a_curve_that_is_not_concave_gets_one_count_per_configuration() {
    // Two drives stream more than twice one (a measured quirk): the pair cannot be aggregated,
    // and the optimum fills nodes with pairs of drives: 3 nodes x 2 drives = 2 x 250 x 3 >= 700.
    let node = Node { cost: 1000.0, power: 0.0, bays: 3, network: None, count_max: None };
    let drive = Drive { cost: 100.0, power: 0.0, tb: 1.0, write: vec![100.0, 250.0, 300.0], read: vec![100.0, 250.0, 300.0] };
    let inst = Instance { write: 700.0, ..Instance::new(vec![node], vec![drive]) };
    let d = inst.plan().unwrap();
    assert_eq!(d.formulation.aggregated_pairs, 0);
    assert!(d.formulation.explicit_configurations >= 2);
    let best = inst.brute_force().unwrap();
    assert!(close(d.totals.total_cost, best), "{} vs {best}", d.totals.total_cost);
}

/// A random instance small enough to enumerate.
fn random_instance(rng: &mut StdRng) -> Instance {
    let node_types = rng.random_range(1..=2);
    let drive_types = rng.random_range(1..=2);
    let bays_max = 3;
    let nodes = (0..node_types)
        .map(|_| Node {
            cost: f64::from(rng.random_range(2..=20)) * 100.0,
            power: f64::from(rng.random_range(0..=10)) * 10.0,
            bays: rng.random_range(1..=bays_max),
            network: rng.random_bool(0.5).then(|| f64::from(rng.random_range(2..=8)) * 100.0),
            count_max: rng.random_bool(0.25).then(|| rng.random_range(2..=6)),
        })
        .collect();
    // Half the tables concave (falling steps), half anything.
    let table = |rng: &mut StdRng| -> Vec<f64> {
        let concave = rng.random_bool(0.5);
        let mut step = f64::from(rng.random_range(50..=300));
        let mut total = 0.0;
        (0..bays_max)
            .map(|_| {
                total += step;
                step = if concave { step * rng.random_range(0.3..=1.0) } else { f64::from(rng.random_range(20..=300)) };
                (total * 10.0_f64).round() / 10.0
            })
            .collect()
    };
    let drives = (0..drive_types)
        .map(|_| Drive {
            cost: f64::from(rng.random_range(1..=10)) * 50.0,
            power: f64::from(rng.random_range(3..=15)),
            tb: f64::from(rng.random_range(1..=8)),
            write: table(rng),
            read: table(rng),
        })
        .collect();
    let mut inst = Instance::new(nodes, drives);
    inst.capacity = f64::from(rng.random_range(0..=30));
    inst.write = f64::from(rng.random_range(0..=15)) * 100.0;
    inst.read = f64::from(rng.random_range(0..=15)) * 100.0;
    if inst.capacity == 0.0 && inst.write == 0.0 && inst.read == 0.0 {
        inst.capacity = 5.0;
    }
    inst.nodes_min = rng.random_range(0..=3);
    inst.usable = [1.0, 0.8, 0.5][rng.random_range(0..3)];
    inst.amplification = [1.0, 1.25, 2.0][rng.random_range(0..3)];
    inst.years = f64::from(rng.random_range(0..=5));
    inst.price = 0.25;
    inst.pue = [1.0, 1.5][rng.random_range(0..2)];
    if rng.random_bool(0.3) {
        inst.capital_max = Some(f64::from(rng.random_range(10..=60)) * 500.0);
    }
    if rng.random_bool(0.3) {
        inst.power_max = Some(f64::from(rng.random_range(1..=20)) * 50.0);
    }
    inst
}

/// The enumeration's size: the product of (bound + 1) over the options.
fn search_space(inst: &Instance) -> f64 {
    inst.options()
        .iter()
        .map(|o| {
            let enough = [(inst.capacity, o.tb), (inst.write, o.write), (inst.read, o.read), (f64::from(inst.nodes_min), 1.0)].iter().map(|(t, a)| (t / a).ceil()).fold(0.0, f64::max);
            enough + 1.0
        })
        .product()
}

#[test]
fn random_instances_match_exhaustive_enumeration() {
    let mut rng = StdRng::seed_from_u64(6);
    let (mut checked, mut feasible, mut infeasible) = (0, 0, 0);
    while checked < 60 {
        let inst = random_instance(&mut rng);
        if search_space(&inst) > 2e5 {
            continue;
        }
        checked += 1;
        let expected = inst.brute_force();
        match (inst.plan(), expected) {
            (Ok(d), Some(best)) => {
                feasible += 1;
                assert!(d.proven_optimal);
                assert!(close(d.totals.total_cost, best), "planner {} vs enumeration {best} for {}", d.totals.total_cost, inst.toml());
            }
            (Err(PlanError::Infeasible(_)), None) => infeasible += 1,
            (got, expected) => panic!("planner {got:?} vs enumeration {expected:?} for {}", inst.toml()),
        }
    }
    // Both outcomes must be exercised for the comparison to mean something.
    assert!(feasible >= 20 && infeasible >= 3, "{feasible} feasible, {infeasible} infeasible");
}
