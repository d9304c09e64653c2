//! The core workloads as YCSB's workload files and CoreWorkload defaults define them.

use rand::Rng;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Op {
    Read,
    Update,
    Insert,
    Scan,
    ReadModifyWrite,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Distribution {
    Uniform,
    /// Scrambled Zipfian (YCSB's `zipfian`).
    Zipfian,
    Latest,
    Hotspot,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Workload {
    pub name: &'static str,
    pub read: f64,
    pub update: f64,
    pub insert: f64,
    pub scan: f64,
    pub read_modify_write: f64,
    pub distribution: Distribution,
    pub field_count: usize,
    pub field_length: usize,
    pub max_scan_length: u64,
}

impl Workload {
    /// YCSB's workload files A-F over CoreWorkload's defaults (10 fields of 100 bytes).
    pub fn core(letter: char) -> Option<Workload> {
        let base = |name, read, update, insert, scan, rmw, distribution| Workload {
            name,
            read,
            update,
            insert,
            scan,
            read_modify_write: rmw,
            distribution,
            field_count: 10,
            field_length: 100,
            max_scan_length: 1000,
        };
        Some(match letter.to_ascii_uppercase() {
            'A' => base("A", 0.5, 0.5, 0.0, 0.0, 0.0, Distribution::Zipfian),
            'B' => base("B", 0.95, 0.05, 0.0, 0.0, 0.0, Distribution::Zipfian),
            'C' => base("C", 1.0, 0.0, 0.0, 0.0, 0.0, Distribution::Zipfian),
            'D' => base("D", 0.95, 0.0, 0.05, 0.0, 0.0, Distribution::Latest),
            'E' => Workload { max_scan_length: 100, ..base("E", 0.0, 0.0, 0.05, 0.95, 0.0, Distribution::Zipfian) },
            'F' => base("F", 0.5, 0.0, 0.0, 0.0, 0.5, Distribution::Zipfian),
            _ => return None,
        })
    }

    /// Draws the next operation from the mix (weights normalised by their sum, as YCSB's
    /// DiscreteGenerator does).
    pub fn next_op(&self, rng: &mut impl Rng) -> Op {
        let weights = [
            (Op::Read, self.read),
            (Op::Update, self.update),
            (Op::Insert, self.insert),
            (Op::Scan, self.scan),
            (Op::ReadModifyWrite, self.read_modify_write),
        ];
        let total: f64 = weights.iter().map(|(_, w)| w).sum();
        let mut x = rng.random::<f64>() * total;
        for (op, w) in weights {
            if x < w {
                return op;
            }
            x -= w;
        }
        Op::Read
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn operation_mixes_match_the_workload_files() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for letter in ['A', 'B', 'C', 'D', 'E', 'F'] {
            let w = Workload::core(letter).unwrap();
            let n = 100_000;
            let mut counts = std::collections::HashMap::new();
            for _ in 0..n {
                *counts.entry(w.next_op(&mut rng)).or_insert(0u32) += 1;
            }
            let share = |op| *counts.get(&op).unwrap_or(&0) as f64 / n as f64;
            for (op, expected) in [(Op::Read, w.read), (Op::Update, w.update), (Op::Insert, w.insert), (Op::Scan, w.scan), (Op::ReadModifyWrite, w.read_modify_write)] {
                assert!((share(op) - expected).abs() < 0.01, "workload {letter} {op:?}: {} vs {expected}", share(op));
            }
        }
        assert!(Workload::core('G').is_none());
        assert_eq!(Workload::core('e').unwrap().max_scan_length, 100);
    }
}
