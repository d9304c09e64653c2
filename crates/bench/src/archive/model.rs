//! File-size laws: the Gamma and Stacy's generalized Gamma, with a point mass at zero for empty
//! files (neither law puts probability on 0 bytes, and real file systems hold many empty files).
//!
//! Parametrisation (one struct for both families): X = a * Y^(1/p) with Y ~ Gamma(k, 1), so
//! the density is p x^(kp-1) exp(-(x/a)^p) / (a^(kp) Gamma(k)). Stacy's (1962) form writes the
//! same law with shapes d = k p and p; the Gamma family is p = 1 (a is then the Gamma scale).

use rand::Rng;
use rand_distr::Distribution;
use serde::{Deserialize, Serialize};
use statrs::function::gamma::{checked_gamma_lr, checked_gamma_ur, ln_gamma};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Family {
    Gamma,
    GeneralizedGamma,
}

impl Family {
    /// Free parameters of the continuous part (for AIC).
    pub fn parameters(self) -> u32 {
        match self {
            Family::Gamma => 2,
            Family::GeneralizedGamma => 3,
        }
    }
}

impl std::fmt::Display for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Family::Gamma => "gamma",
            Family::GeneralizedGamma => "generalized-gamma",
        })
    }
}

/// A fitted file-size law (sizes in bytes).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SizeModel {
    pub family: Family,
    /// Stacy's scale a, in bytes.
    pub scale_bytes: f64,
    /// k: the shape of the Gamma law that (X/a)^p follows (Stacy's d / p).
    pub shape_k: f64,
    /// Stacy's power p (1 for the Gamma family).
    pub power_p: f64,
    /// Share of empty (0-byte) files.
    pub zero_fraction: f64,
}

impl SizeModel {
    /// Stacy's first shape parameter d = k p.
    pub fn stacy_d(&self) -> f64 {
        self.shape_k * self.power_p
    }

    /// Mean file size in bytes, empty files included: a Gamma(k + 1/p) / Gamma(k) times the
    /// share of non-empty files.
    pub fn mean_bytes(&self) -> f64 {
        let (k, p) = (self.shape_k, self.power_p);
        (1.0 - self.zero_fraction) * self.scale_bytes * (ln_gamma(k + 1.0 / p) - ln_gamma(k)).exp()
    }

    /// P(X <= x) for the non-empty part.
    pub fn cdf_positive(&self, x: f64) -> f64 {
        lower_regularized(self.shape_k, self.transformed(x))
    }

    /// P(X > x) for the non-empty part (accurate in the upper tail).
    pub fn survival_positive(&self, x: f64) -> f64 {
        upper_regularized(self.shape_k, self.transformed(x))
    }

    /// Probability of a non-empty file falling in [lower, upper) (upper `None`: no bound).
    pub fn bin_probability(&self, lower: f64, upper: Option<f64>) -> f64 {
        let t_lower = self.transformed(lower);
        match upper {
            None => upper_regularized(self.shape_k, t_lower),
            // Subtract in whichever tail keeps the digits.
            Some(u) if t_lower > self.shape_k => upper_regularized(self.shape_k, t_lower) - self.survival_positive(u),
            Some(u) => self.cdf_positive(u) - lower_regularized(self.shape_k, t_lower),
        }
    }

    /// (x / a)^p, the Gamma(k, 1) variable behind x.
    fn transformed(&self, x: f64) -> f64 {
        if x <= 0.0 {
            return 0.0;
        }
        ((x / self.scale_bytes).ln() * self.power_p).exp()
    }

    /// A file size in bytes (0 for an empty file), at most `max_bytes`.
    pub fn sample(&self, rng: &mut impl Rng, max_bytes: u64) -> u64 {
        if rng.random::<f64>() < self.zero_fraction {
            return 0;
        }
        // k was checked positive and finite when the model was fitted or built.
        let y: f64 = match rand_distr::Gamma::new(self.shape_k, 1.0) {
            Ok(g) => g.sample(rng),
            Err(_) => return 0,
        };
        // In logs: near the lognormal limit a is tiny and y^(1/p) huge.
        let x = (self.scale_bytes.ln() + y.ln() / self.power_p).exp();
        // A non-empty file has at least one byte; the cap keeps a heavy tail from emitting one
        // file larger than the whole fileset.
        (x.round().max(1.0) as u64).min(max_bytes.max(1))
    }

    /// Whether every parameter is usable for sampling and probabilities.
    pub fn is_valid(&self) -> bool {
        [self.scale_bytes, self.shape_k, self.power_p].iter().all(|v| v.is_finite() && *v > 0.0) && (0.0..1.0).contains(&self.zero_fraction)
    }
}

/// P(k, t), regularized lower incomplete gamma, total over the whole positive axis.
pub(crate) fn lower_regularized(k: f64, t: f64) -> f64 {
    if t <= 0.0 {
        return 0.0;
    }
    if !t.is_finite() {
        return 1.0;
    }
    checked_gamma_lr(k, t).unwrap_or(f64::NAN)
}

/// Q(k, t) = 1 - P(k, t), computed directly for the upper tail.
pub(crate) fn upper_regularized(k: f64, t: f64) -> f64 {
    if t <= 0.0 {
        return 1.0;
    }
    if !t.is_finite() {
        return 0.0;
    }
    checked_gamma_ur(k, t).unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn mean_matches_the_sample_mean_and_the_cdf_is_a_distribution() {
        let m = SizeModel { family: Family::GeneralizedGamma, scale_bytes: 20_000.0, shape_k: 2.0, power_p: 0.7, zero_fraction: 0.1 };
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let n = 200_000;
        let mean = (0..n).map(|_| m.sample(&mut rng, u64::MAX) as f64).sum::<f64>() / n as f64;
        assert!((mean / m.mean_bytes() - 1.0).abs() < 0.02, "sample mean {mean} vs {}", m.mean_bytes());
        assert_eq!(m.cdf_positive(0.0), 0.0);
        assert!((m.cdf_positive(1e12) - 1.0).abs() < 1e-12);
        let split = m.bin_probability(0.0, Some(5e4)) + m.bin_probability(5e4, None);
        assert!((split - 1.0).abs() < 1e-9, "{split}");
    }
}
