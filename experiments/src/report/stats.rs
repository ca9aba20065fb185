//! Aggregate scores over seeds and tasks the way the rliable library does (Agarwal et al. 2021,
//! "Deep RL at the Edge of the Statistical Precipice", arXiv:2108.13264).
//!
//! Scores are grouped by task: `tasks[m]` holds the per-run scores of task m (one per seed).
//! - mean  = mean over tasks of the per-task mean (rliable `aggregate_mean`);
//! - IQM   = 25 % trimmed mean of all scores pooled (rliable `aggregate_iqm`, i.e.
//!   `scipy.stats.trim_mean(x, 0.25)`: sort, drop ⌊0.25·n⌋ from each end, average the rest);
//! - 95 % CI = stratified percentile bootstrap: each replicate resamples, with replacement, the
//!   runs *within each task* (same count per task), recomputes the statistic, and the interval is
//!   the 2.5th and 97.5th percentiles of the replicates (linear interpolation between order
//!   statistics, numpy's default). rliable uses 50 000 replicates; so do we by default.
//!
//! rliable needs a rectangular runs × tasks matrix; here a task may have its own number of runs
//! (each task is resampled with its own count), which is the same thing when counts are equal.
//! The random source is a ChaCha8 generator seeded by the caller, so reports are reproducible.

use rand::Rng;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Number of bootstrap replicates rliable uses by default.
pub const DEFAULT_REPS: usize = 50_000;

/// Arithmetic mean (NaN for an empty slice).
pub fn mean(x: &[f64]) -> f64 {
    x.iter().sum::<f64>() / x.len() as f64
}

/// Population standard deviation (numpy's `std`, ddof 0) around `mean(x)`.
pub fn std_dev(x: &[f64]) -> f64 {
    let m = mean(x);
    (x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / x.len() as f64).sqrt()
}

/// scipy's `trim_mean(x, cut)`: drop ⌊cut·n⌋ values from each end of the sorted data, average the rest.
pub fn trim_mean(x: &[f64], cut: f64) -> f64 {
    let mut s = x.to_vec();
    s.sort_by(f64::total_cmp);
    let k = (cut * s.len() as f64) as usize;
    mean(&s[k..s.len() - k])
}

/// Interquartile mean of one sample: `trim_mean(x, 0.25)`.
pub fn iqm(x: &[f64]) -> f64 {
    trim_mean(x, 0.25)
}

/// rliable's aggregate mean: the mean over tasks of each task's mean score.
pub fn aggregate_mean(tasks: &[Vec<f64>]) -> f64 {
    mean(&tasks.iter().map(|t| mean(t)).collect::<Vec<_>>())
}

/// rliable's aggregate IQM: the interquartile mean of all runs of all tasks pooled.
pub fn aggregate_iqm(tasks: &[Vec<f64>]) -> f64 {
    iqm(&tasks.concat())
}

/// The `p`-th percentile (0..=100) of sorted data, interpolating linearly between order
/// statistics at rank (n − 1)·p/100 (numpy's default method).
pub fn percentile_sorted(sorted: &[f64], p: f64) -> f64 {
    let h = (sorted.len() - 1) as f64 * p / 100.0;
    let (lo, hi) = (h.floor() as usize, h.ceil() as usize);
    sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
}

/// A point estimate with its confidence interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    /// The point estimate.
    pub point: f64,
    /// Lower end of the confidence interval.
    pub lo: f64,
    /// Upper end of the confidence interval.
    pub hi: f64,
}

/// `statistic(tasks)` with a `size` (e.g. 0.95) stratified percentile bootstrap interval from
/// `reps` replicates drawn with a ChaCha8 generator seeded by `seed`.
pub fn stratified_bootstrap(
    tasks: &[Vec<f64>],
    statistic: impl Fn(&[Vec<f64>]) -> f64,
    reps: usize,
    size: f64,
    seed: u64,
) -> Estimate {
    let point = statistic(tasks);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut sample: Vec<Vec<f64>> = tasks.iter().map(|t| vec![0.0; t.len()]).collect();
    let mut replicates = Vec::with_capacity(reps.max(1));
    for _ in 0..reps.max(1) {
        // Stratified resampling: runs are drawn with replacement inside each task.
        for (task, out) in tasks.iter().zip(sample.iter_mut()) {
            for slot in out.iter_mut() {
                *slot = task[rng.gen_range(0..task.len())];
            }
        }
        replicates.push(statistic(&sample));
    }
    replicates.sort_by(f64::total_cmp);
    let tail = 100.0 * (1.0 - size) / 2.0;
    Estimate { point, lo: percentile_sorted(&replicates, tail), hi: percentile_sorted(&replicates, 100.0 - tail) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trimmed_means_match_scipy_by_hand() {
        // n = 4: ⌊0.25·4⌋ = 1 cut from each end → mean(1, 2) = 1.5.
        assert_eq!(iqm(&[10.0, 0.0, 2.0, 1.0]), 1.5);
        // n = 3: ⌊0.75⌋ = 0, nothing cut → plain mean 11/3.
        assert_eq!(iqm(&[0.0, 1.0, 10.0]), 11.0 / 3.0);
        // n = 8: cut 2 each end of 1..8 → mean(3, 4, 5, 6) = 4.5.
        assert_eq!(iqm(&[8.0, 1.0, 7.0, 2.0, 6.0, 3.0, 5.0, 4.0]), 4.5);
        // n = 5: cut 1 each end → mean(2, 3, 100) over sorted [1, 2, 3, 100, 1000] = 35.
        assert_eq!(iqm(&[1000.0, 1.0, 2.0, 3.0, 100.0]), 35.0);
    }

    #[test]
    fn aggregates_over_tasks() {
        let tasks = vec![vec![0.0, 2.0], vec![10.0, 20.0, 30.0, 40.0]];
        // Per-task means 1 and 25 → 13 (not the pooled mean 17).
        assert_eq!(aggregate_mean(&tasks), 13.0);
        // Pooled sorted [0, 2, 10, 20, 30, 40], cut ⌊1.5⌋ = 1 each end → mean(2, 10, 20, 30) = 15.5.
        assert_eq!(aggregate_iqm(&tasks), 15.5);
    }

    #[test]
    fn percentile_interpolates_like_numpy() {
        let s = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(percentile_sorted(&s, 50.0), 3.0);
        assert_eq!(percentile_sorted(&s, 2.5), 1.1); // rank 0.1
        assert_eq!(percentile_sorted(&s, 97.5), 4.9); // rank 3.9
    }

    /// Scores 0, 1, 10 on one task: the 27 equally likely resamples give a mean (= IQM for n = 3)
    /// of 0 with probability 1/27 ≈ 3.7 % and of 10 with 1/27; both exceed the 2.5 % tails, so
    /// the 95 % interval is exactly [0, 10].
    #[test]
    fn bootstrap_interval_of_three_runs_is_the_extreme_atoms() {
        let tasks = vec![vec![0.0, 1.0, 10.0]];
        let e = stratified_bootstrap(&tasks, aggregate_iqm, DEFAULT_REPS, 0.95, 7);
        assert_eq!(e, Estimate { point: 11.0 / 3.0, lo: 0.0, hi: 10.0 });
    }

    /// Scores 0, 1, 2, 10: enumerating the 256 resamples (by hand, grouped by multiset), the IQM
    /// (mean of the middle two of four) takes value 0 with P = 13/256 ≈ 5.1 % (at least three
    /// zeros), so the 2.5th percentile is 0; the top: IQM = 10 needs ≥ 3 tens (13/256), so the
    /// 97.5th percentile is 10. The mean's interval is narrower: mean 0 only for four zeros
    /// (1/256 = 0.4 %), mean 0.25 for three zeros and a one (4/256, cumulative 1.95 %), mean 0.5
    /// for (0,0,0,2) or (0,0,1,1) (4 + 6 = 10/256, cumulative 5.9 %) → lower bound 0.5;
    /// the top: mean 10 (1/256), 8 (2,10,10,10: 4/256, cumulative 1.95 %), 7.75 (1,10,10,10:
    /// 4/256, cumulative from the top 3.5 %) → upper bound 7.75.
    #[test]
    fn bootstrap_interval_of_four_runs_matches_enumeration() {
        let tasks = vec![vec![0.0, 1.0, 2.0, 10.0]];
        let iq = stratified_bootstrap(&tasks, aggregate_iqm, DEFAULT_REPS, 0.95, 1);
        assert_eq!(iq, Estimate { point: 1.5, lo: 0.0, hi: 10.0 });
        let m = stratified_bootstrap(&tasks, aggregate_mean, DEFAULT_REPS, 0.95, 1);
        assert_eq!(m, Estimate { point: 3.25, lo: 0.5, hi: 7.75 });
    }

    #[test]
    fn stratification_keeps_each_task_in_every_replicate() {
        // Task A always scores 0, task B always 100: per-task resampling keeps the aggregate
        // mean at exactly 50 in every replicate (pooled resampling would not).
        let tasks = vec![vec![0.0; 3], vec![100.0; 3]];
        let e = stratified_bootstrap(&tasks, aggregate_mean, 2_000, 0.95, 3);
        assert_eq!(e, Estimate { point: 50.0, lo: 50.0, hi: 50.0 });
    }

    #[test]
    fn same_seed_same_interval() {
        let tasks = vec![vec![0.1, 0.5, 0.9, 0.3, 0.7]];
        let a = stratified_bootstrap(&tasks, aggregate_iqm, 5_000, 0.95, 11);
        let b = stratified_bootstrap(&tasks, aggregate_iqm, 5_000, 0.95, 11);
        assert_eq!(a, b);
        assert!(a.lo < a.point && a.point < a.hi);
    }
}
