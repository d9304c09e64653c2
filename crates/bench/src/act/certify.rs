//! Load stepping: run the ladder of ratings from the lowest up and stop at the first one that
//! fails; the device is certified at the highest rating that passed (ACT's README: certified
//! at the highest load at which it still meets the criteria). Loads above a failure are not
//! run: they would take the test's time to say what the failure already said.

use super::ActError;

/// ACT's published load levels: 1x, 3x ("high load", the old recommended certification), 6x
/// (the old stress level), 12x and 24x (the 3.x sample configs), then 30x and 60x (the current
/// certification and stress levels).
pub const DEFAULT_LADDER: [u32; 7] = [1, 3, 6, 12, 24, 30, 60];

/// Checks that a ladder is non-empty, starts above zero and strictly increases.
pub fn check_ladder(ladder: &[u32]) -> Result<(), ActError> {
    if ladder.is_empty() || ladder[0] == 0 || ladder.windows(2).any(|w| w[0] >= w[1]) {
        return Err(ActError::Config(format!("ratings {ladder:?}: need at least one, each above zero, strictly increasing")));
    }
    Ok(())
}

/// Runs `run(rating)` up the ladder until a run does not pass (`passed` says whether it did).
/// Returns every run made and the highest rating that passed.
pub fn certify<R, E>(ladder: &[u32], mut run: impl FnMut(u32) -> Result<R, E>, passed: impl Fn(&R) -> bool) -> Result<(Vec<R>, Option<u32>), E> {
    let mut runs = Vec::new();
    let mut certified = None;
    for &rating in ladder {
        let r = run(rating)?;
        let ok = passed(&r);
        runs.push(r);
        if !ok {
            break;
        }
        certified = Some(rating);
    }
    Ok((runs, certified))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A device that meets the criteria up to `limit` x.
    fn device(limit: u32) -> impl FnMut(u32) -> Result<(u32, bool), ()> {
        move |rating| Ok((rating, rating <= limit))
    }

    fn ratings(runs: &[(u32, bool)]) -> Vec<u32> {
        runs.iter().map(|r| r.0).collect()
    }

    #[test]
    fn stepping_stops_at_the_first_failure_and_certifies_the_rating_below() {
        let (runs, certified) = certify(&DEFAULT_LADDER, device(6), |r| r.1).unwrap();
        assert_eq!(ratings(&runs), vec![1, 3, 6, 12]);
        assert_eq!(certified, Some(6));
        // Between two steps: passes 8x, so 6x is the highest certified rating on the ladder.
        let (_, certified) = certify(&DEFAULT_LADDER, device(8), |r| r.1).unwrap();
        assert_eq!(certified, Some(6));
    }

    #[test]
    fn failing_the_first_step_certifies_nothing_and_passing_all_certifies_the_top() {
        let (runs, certified) = certify(&DEFAULT_LADDER, device(0), |r| r.1).unwrap();
        assert_eq!((ratings(&runs), certified), (vec![1], None));
        let (runs, certified) = certify(&[1, 3], device(100), |r| r.1).unwrap();
        assert_eq!((ratings(&runs), certified), (vec![1, 3], Some(3)));
    }

    #[test]
    fn an_error_ends_the_stepping() {
        let mut calls = 0;
        let r: Result<(Vec<u32>, _), String> = certify(&[1, 3, 6], |rating| {
            calls += 1;
            if rating == 3 { Err("drive gone".to_string()) } else { Ok(rating) }
        }, |_| true);
        assert_eq!((r.unwrap_err(), calls), ("drive gone".to_string(), 2));
    }

    #[test]
    fn ladders_must_climb() {
        assert!(check_ladder(&DEFAULT_LADDER).is_ok());
        for bad in [&[][..], &[0, 1], &[3, 3], &[6, 3]] {
            assert!(check_ladder(bad).is_err(), "{bad:?}");
        }
    }
}
