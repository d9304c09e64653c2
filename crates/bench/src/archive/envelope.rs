//! Bootstrap envelopes: the data are resampled (files drawn with replacement; for a histogram,
//! multinomial counts with the observed bin shares), each replicate refitted, and the replicate
//! fits ranked by their mean file size. The fit at the low percentile is the "more small files"
//! workload, the one at the high percentile the "more large files" workload. Taking whole
//! replicate fits (not per-parameter percentiles) keeps every envelope a law that some
//! resampled data set actually produced.

use rand::{Rng, SeedableRng};
use rand_distr::Distribution;
use serde::{Deserialize, Serialize};

use super::fit::{fit_near, Bin, Fit, FitError, SizeData};
use super::model::{Family, SizeModel};

/// Replicates a full run draws.
pub const REPLICATES_DEFAULT: usize = 100;
/// The envelopes are the replicate fits at this percentile of mean file size and at its
/// complement: a 95% percentile interval.
pub const ENVELOPE_PERCENTILE: f64 = 2.5;
/// At least this share of replicates must refit, or the envelope is not trusted.
const REPLICATES_FITTED_MIN: f64 = 0.9;

/// Which of the three workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Envelope {
    /// More small files: the low-mean edge of the envelope.
    Small,
    Fitted,
    /// More large files: the high-mean edge.
    Large,
}

impl Envelope {
    pub const ALL: [Envelope; 3] = [Envelope::Small, Envelope::Fitted, Envelope::Large];

    pub fn name(self) -> &'static str {
        match self {
            Envelope::Small => "small",
            Envelope::Fitted => "fitted",
            Envelope::Large => "large",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EnvelopeModels {
    pub family: Family,
    pub replicates: usize,
    /// Replicates whose refit failed (left out).
    pub failed_replicates: usize,
    pub percentile: f64,
    /// Files per resample.
    pub resample_files: u64,
    pub seed: u64,
    pub small: SizeModel,
    pub fitted: SizeModel,
    pub large: SizeModel,
}

impl EnvelopeModels {
    pub fn model(&self, e: Envelope) -> &SizeModel {
        match e {
            Envelope::Small => &self.small,
            Envelope::Fitted => &self.fitted,
            Envelope::Large => &self.large,
        }
    }
}

/// Bootstraps `fitted` (a fit to `data`) with `replicates` resamples of `resample_files` files
/// each (`None`: as many as the data hold, the classic bootstrap). Fewer files than the data
/// (an m-out-of-n bootstrap) widen the envelope to the variation of a smaller population: with
/// millions of files the classic envelope is very narrow.
pub fn bootstrap(data: &SizeData, fitted: &Fit, replicates: usize, resample_files: Option<u64>, seed: u64) -> Result<EnvelopeModels, FitError> {
    let files = resample_files.unwrap_or_else(|| data.files()).max(2);
    let family = fitted.model.family;
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut fits: Vec<SizeModel> = Vec::with_capacity(replicates);
    for _ in 0..replicates {
        let resampled = resample(data, files, &mut rng);
        if let Ok(f) = fit_near(&resampled, family, Some(&fitted.model)) {
            fits.push(f.model);
        }
    }
    if replicates == 0 || (fits.len() as f64) < REPLICATES_FITTED_MIN * replicates as f64 {
        return Err(FitError::Optimiser(format!("only {} of {replicates} bootstrap replicates could be refitted", fits.len())));
    }
    fits.sort_by(|a, b| a.mean_bytes().total_cmp(&b.mean_bytes()));
    // Nearest-rank percentiles.
    let rank = |pct: f64| (((pct / 100.0) * fits.len() as f64).ceil() as usize).clamp(1, fits.len()) - 1;
    Ok(EnvelopeModels {
        family,
        replicates,
        failed_replicates: replicates - fits.len(),
        percentile: ENVELOPE_PERCENTILE,
        resample_files: files,
        seed,
        small: fits[rank(ENVELOPE_PERCENTILE)],
        fitted: fitted.model,
        large: fits[rank(100.0 - ENVELOPE_PERCENTILE)],
    })
}

/// A data set of `files` files drawn from the observed one.
fn resample(data: &SizeData, files: u64, rng: &mut impl Rng) -> SizeData {
    match data {
        SizeData::Sample(sizes) if sizes.is_empty() => data.clone(),
        SizeData::Sample(sizes) => SizeData::Sample((0..files).map(|_| sizes[rng.random_range(0..sizes.len())]).collect()),
        SizeData::Histogram(bins) => {
            // Multinomial counts, bin by bin: each count is binomial given what is left.
            let mut left_files = files;
            let mut left_share = 1.0f64;
            let total = bins.iter().map(|b| b.count).sum::<u64>().max(1) as f64;
            let resampled = bins
                .iter()
                .map(|b| {
                    let share = b.count as f64 / total;
                    let p = if left_share > 0.0 { (share / left_share).clamp(0.0, 1.0) } else { 0.0 };
                    let count = rand_distr::Binomial::new(left_files, p).map(|d| d.sample(rng)).unwrap_or(0);
                    left_files -= count.min(left_files);
                    left_share -= share;
                    Bin { count, ..*b }
                })
                .collect();
            SizeData::Histogram(resampled)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::fit::{fit, parse_histogram};

    #[test]
    fn the_envelope_brackets_the_fit_for_samples_and_histograms() {
        let truth = SizeModel { family: Family::GeneralizedGamma, scale_bytes: 10_000.0, shape_k: 2.0, power_p: 0.6, zero_fraction: 0.02 };
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let sizes: Vec<u64> = (0..2_000).map(|_| truth.sample(&mut rng, u64::MAX)).collect();
        let hist = parse_histogram(include_str!("../../data/archive-illustrative.hist")).unwrap();
        for (data, family) in [(SizeData::Sample(sizes), Family::GeneralizedGamma), (SizeData::Histogram(hist), Family::Gamma)] {
            let fitted = fit(&data, family).unwrap();
            let env = bootstrap(&data, &fitted, 40, None, 9).unwrap();
            let (s, f, l) = (env.small.mean_bytes(), env.fitted.mean_bytes(), env.large.mean_bytes());
            assert!(s < f && f < l, "{family}: small {s} < fitted {f} < large {l}");
            assert_eq!(env.failed_replicates, 0);
            // Same seed, same envelope.
            assert_eq!(bootstrap(&data, &fitted, 40, None, 9).unwrap().small, env.small);
            // Resampling fewer files widens the envelope.
            let wide = bootstrap(&data, &fitted, 40, Some(data.files() / 10), 9).unwrap();
            assert!(wide.small.mean_bytes() < s && wide.large.mean_bytes() > l, "{family}: {wide:?}");
        }
    }

    #[test]
    fn histogram_resampling_keeps_the_file_count() {
        let data = SizeData::Histogram(parse_histogram("0 1 10\n1 2 30\n2 4 60\n4 inf 900\n").unwrap());
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        for files in [1000, 10, 5000] {
            assert_eq!(resample(&data, files, &mut rng).files(), files);
        }
    }
}
