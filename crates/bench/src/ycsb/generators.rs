//! YCSB's key and request generators, reimplemented from the formulas YCSB's CoreWorkload uses
//! (see shared/methodology.md, section 1.4), so a Rust run draws the same key popularity as
//! the official client.

use rand::Rng;

/// YCSB's `Utils.fnvhash64`: 64-bit FNV-1a over the 8 bytes of the value, least significant
/// first, with an arithmetic shift, and the absolute value of the signed result.
pub fn fnvhash64(value: i64) -> i64 {
    let mut v = value;
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for _ in 0..8 {
        let octet = (v & 0xff) as u64;
        v >>= 8;
        h ^= octet;
        h = h.wrapping_mul(1_099_511_628_211);
    }
    (h as i64).wrapping_abs()
}

/// The Zipfian constant YCSB uses.
pub const ZIPFIAN_CONSTANT: f64 = 0.99;

/// zeta(n, theta) = sum of i^-theta for i in 1..=n, continued from `from` with `partial`.
fn zeta(from: u64, to: u64, theta: f64, partial: f64) -> f64 {
    (from + 1..=to).fold(partial, |s, i| s + (i as f64).powf(-theta))
}

/// Gray et al.'s Zipfian generator over items `base..base+items` (item `base` most popular).
#[derive(Debug, Clone)]
pub struct Zipfian {
    base: u64,
    items: u64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
    zeta2: f64,
    /// Item count the zeta was computed for (grows with `items`).
    counted: u64,
}

impl Zipfian {
    pub fn new(base: u64, items: u64) -> Self {
        let zetan = zeta(0, items, ZIPFIAN_CONSTANT, 0.0);
        Self::with_zeta(base, items, zetan)
    }

    /// With a precomputed zeta(items) (YCSB does so for its 10^10-item scrambled generator).
    pub fn with_zeta(base: u64, items: u64, zetan: f64) -> Self {
        let theta = ZIPFIAN_CONSTANT;
        let zeta2 = zeta(0, 2, theta, 0.0);
        let eta = (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan);
        Zipfian { base, items, theta, alpha: 1.0 / (1.0 - theta), zetan, eta, zeta2, counted: items }
    }

    /// Draws over `items` items; a larger count extends zeta incrementally and recomputes eta
    /// from it, with the construction-time count in eta's first factor, as YCSB does.
    pub fn next_with(&mut self, rng: &mut impl Rng, items: u64) -> u64 {
        if items > self.counted {
            self.zetan = zeta(self.counted, items, self.theta, self.zetan);
            self.counted = items;
            self.eta = (1.0 - (2.0 / self.items as f64).powf(1.0 - self.theta)) / (1.0 - self.zeta2 / self.zetan);
        }
        let u: f64 = rng.random();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return self.base;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return self.base + 1;
        }
        self.base + (items as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64
    }

    pub fn next(&mut self, rng: &mut impl Rng) -> u64 {
        let items = self.items;
        self.next_with(rng, items)
    }

    /// Probability of the most popular item under the formula: 1/zeta(n).
    pub fn p_first(&self) -> f64 {
        1.0 / self.zetan
    }

    pub fn zeta2(&self) -> f64 {
        self.zeta2
    }
}

/// YCSB's scrambled Zipfian: a Zipfian over 10^10 items folded onto `min..=max` by FNV hash,
/// so hot keys are scattered over the key space.
#[derive(Debug, Clone)]
pub struct ScrambledZipfian {
    min: u64,
    item_count: u64,
    inner: Zipfian,
}

/// YCSB's fixed inner item count (its range 0..=10^10 holds 10^10 + 1 items) and its
/// precomputed zeta.
pub const SCRAMBLED_ITEM_COUNT: u64 = 10_000_000_001;
pub const SCRAMBLED_ZETAN: f64 = 26.469_028_201_783_02;

impl ScrambledZipfian {
    /// Over `min..=max` (inclusive, as YCSB builds it).
    pub fn new(min: u64, max: u64) -> Self {
        ScrambledZipfian { min, item_count: max - min + 1, inner: Zipfian::with_zeta(0, SCRAMBLED_ITEM_COUNT, SCRAMBLED_ZETAN) }
    }

    pub fn next(&mut self, rng: &mut impl Rng) -> u64 {
        let r = self.inner.next(rng);
        self.min + (fnvhash64(r as i64) as u64) % self.item_count
    }
}

/// YCSB's SkewedLatest: the newest acknowledged record is the most popular.
#[derive(Debug, Clone)]
pub struct SkewedLatest {
    zipfian: Zipfian,
}

impl SkewedLatest {
    /// YCSB builds the Zipfian over the counter's last value at construction: records - 1.
    pub fn new(initial_records: u64) -> Self {
        SkewedLatest { zipfian: Zipfian::new(0, initial_records.saturating_sub(1).max(1)) }
    }

    /// A record number given the highest acknowledged insert `latest`: `latest - Z` with Z a
    /// Zipfian over `latest` items, exactly as YCSB (so record 0 is never drawn).
    pub fn next(&mut self, rng: &mut impl Rng, latest: u64) -> u64 {
        let back = self.zipfian.next_with(rng, latest.max(1));
        latest.saturating_sub(back)
    }
}

/// Uniform over `lb..=ub`.
#[derive(Debug, Clone, Copy)]
pub struct Uniform {
    pub lb: u64,
    pub ub: u64,
}

impl Uniform {
    pub fn next(&self, rng: &mut impl Rng) -> u64 {
        rng.random_range(self.lb..=self.ub)
    }
}

/// YCSB's hotspot: with probability `op_fraction` a uniform draw from the first
/// `data_fraction` of `lb..=ub`, otherwise from the rest.
#[derive(Debug, Clone, Copy)]
pub struct Hotspot {
    pub lb: u64,
    pub ub: u64,
    pub data_fraction: f64,
    pub op_fraction: f64,
}

impl Hotspot {
    pub fn next(&self, rng: &mut impl Rng) -> u64 {
        let interval = self.ub - self.lb + 1;
        let hot = ((interval as f64) * self.data_fraction) as u64;
        if hot == 0 || hot >= interval {
            return rng.random_range(self.lb..=self.ub);
        }
        if rng.random::<f64>() < self.op_fraction {
            self.lb + rng.random_range(0..hot)
        } else {
            self.lb + hot + rng.random_range(0..interval - hot)
        }
    }
}

/// YCSB's key for record `k`: "user" + the digits of fnvhash64(k) (hashed order) or of k.
pub fn key_name(k: u64, hashed: bool) -> String {
    if hashed {
        format!("user{}", fnvhash64(k as i64))
    } else {
        format!("user{k}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn rng() -> rand::rngs::StdRng {
        rand::rngs::StdRng::seed_from_u64(42)
    }

    #[test]
    fn fnv_matches_ycsb() {
        // Values from a reimplementation of YCSB's Utils.fnvhash64 (and the key
        // "user6284781860667377211" for record 0 quoted in shared/methodology.md).
        assert_eq!(fnvhash64(0), 6_284_781_860_667_377_211);
        assert_eq!(fnvhash64(1), 8_517_097_267_634_966_620);
        assert_eq!(fnvhash64(12345), 1_792_800_413_050_876_852);
        assert_eq!(key_name(0, true), "user6284781860667377211");
        assert_eq!(key_name(7, false), "user7");
    }

    #[test]
    fn zipfian_follows_its_formula() {
        let mut z = Zipfian::new(0, 1000);
        // zeta(1000, 0.99) and zeta(2, 0.99) computed independently (Python).
        assert!((1.0 / z.p_first() - 7.728_953_217_284_729).abs() < 1e-9);
        assert!((z.zeta2() - 1.503_477_775_028_359_4).abs() < 1e-12);
        let mut r = rng();
        let n = 200_000;
        let mut counts = vec![0u32; 1000];
        for _ in 0..n {
            let v = z.next(&mut r);
            assert!(v < 1000);
            counts[v as usize] += 1;
        }
        let p0 = counts[0] as f64 / n as f64;
        let p1 = counts[1] as f64 / n as f64;
        assert!((p0 - z.p_first()).abs() < 0.005, "P(0) {p0} vs {}", z.p_first());
        assert!((p1 - 0.5f64.powf(0.99) * z.p_first()).abs() < 0.005, "P(1) {p1}");
        // Popularity falls with rank.
        assert!(counts[0] > counts[10] && counts[10] > counts[500]);
    }

    #[test]
    fn scrambled_zipfian_scatters_hot_keys_over_the_range() {
        let mut z = ScrambledZipfian::new(100, 1099);
        let mut r = rng();
        let mut counts = std::collections::HashMap::new();
        for _ in 0..100_000 {
            let v = z.next(&mut r);
            assert!((100..=1099).contains(&v));
            *counts.entry(v).or_insert(0u32) += 1;
        }
        // The hottest key is the hash of inner rank 0, not the start of the range.
        let hottest = counts.iter().max_by_key(|(_, c)| **c).map(|(k, _)| *k).unwrap();
        assert_eq!(hottest, 100 + (fnvhash64(0) as u64) % 1000);
        // Inner rank 0 has probability 1/ZETAN (plus collisions folding other ranks onto it).
        let p = counts[&hottest] as f64 / 100_000.0;
        assert!(p > 1.0 / SCRAMBLED_ZETAN - 0.005, "{p}");
    }

    #[test]
    fn latest_prefers_the_newest_record() {
        let mut l = SkewedLatest::new(1000);
        let mut r = rng();
        let mut newest = 0;
        for _ in 0..10_000 {
            let v = l.next(&mut r, 1999);
            assert!(v <= 1999);
            if v == 1999 {
                newest += 1;
            }
        }
        let zeta1999: f64 = (1..=1999).map(|i| (i as f64).powf(-0.99)).sum();
        assert!((newest as f64 / 10_000.0 - 1.0 / zeta1999).abs() < 0.02);
    }

    #[test]
    fn hotspot_and_uniform_shapes() {
        let h = Hotspot { lb: 0, ub: 999, data_fraction: 0.2, op_fraction: 0.8 };
        let mut r = rng();
        let hot = (0..100_000).filter(|_| h.next(&mut r) < 200).count();
        assert!((hot as f64 / 100_000.0 - 0.8).abs() < 0.01, "{hot}");
        let u = Uniform { lb: 10, ub: 19 };
        let mean = (0..100_000).map(|_| u.next(&mut r) as f64).sum::<f64>() / 100_000.0;
        assert!((mean - 14.5).abs() < 0.05, "{mean}");
    }
}
