//! Reward scaling by a running standard deviation of the discounted return: Uni-O4's
//! `--scale_strategy dynamic` (`ppo_finetune/utils.py RewardScaling`, the classic PPO
//! "reward scaling" trick), first over the offline dataset, then carried on online.
//!
//! Per env `i` a discounted return `R_i` runs over its episode; every scaled reward updates one
//! shared running statistic of those returns:
//!
//! ```text
//! R_i ← γ R_i + r          (R_i = 0 at every episode start)
//! n ← n + 1;  n = 1: μ ← R_i;  n ≥ 2: μ' = μ + (R_i − μ)/n,  S ← S + (R_i − μ)(R_i − μ'),  μ ← μ'
//! σ = √(S / n) for n ≥ 2, else 1
//! r̃ = r / (σ + 1e-8)        (divided only, never centred)
//! ```
//!
//! `S` starts at 1, not 0 (the reference's running statistic starts from unit variance and its
//! first update only sets the mean), so σ is slightly above the sample std early on; this is
//! kept because the online phase continues from the statistic the offline pass left.
//!
//! Two passes use it:
//! - [`ReturnStdScaler::scale_dataset`]: the dataset rows in order; at a row that ends an
//!   episode (terminal or timeout) `R` is reset and that row's reward is left **unscaled**
//!   (the reference's quirk: it resets instead of scaling there);
//! - [`ReturnStdScaler::scale_rollout`]: time-major on-policy rows of `N` envs; every row is
//!   scaled, and an env's `R` is reset after a row that ends its episode.
//!
//! The state (`n, μ, S` and each env's `R`) is what a checkpoint stores for exact resume.

/// The running statistic and each env's return in progress.
#[derive(Debug, Clone, PartialEq)]
pub struct ReturnStdScaler {
    gamma: f64,
    count: f64,
    mean: f64,
    sum_sq: f64,
    returns: Vec<f64>,
}

impl ReturnStdScaler {
    /// A fresh statistic (`n = 0, μ = 0, S = 1`), no env seen yet.
    pub fn new(gamma: f64) -> Self {
        Self { gamma, count: 0.0, mean: 0.0, sum_sq: 1.0, returns: Vec::new() }
    }

    /// `σ`: `√(S / n)` once two returns were seen, else 1.
    pub fn std(&self) -> f64 {
        if self.count >= 2.0 {
            (self.sum_sq / self.count).sqrt()
        } else {
            1.0
        }
    }

    /// `(n, μ, S)`, for a checkpoint.
    pub fn stats(&self) -> [f64; 3] {
        [self.count, self.mean, self.sum_sq]
    }

    /// Each env's return in progress `R_i`, for a checkpoint (empty before the first rollout).
    pub fn returns(&self) -> &[f64] {
        &self.returns
    }

    /// The state a checkpoint stored.
    pub fn from_state(gamma: f64, stats: [f64; 3], returns: Vec<f64>) -> Self {
        Self { gamma, count: stats[0], mean: stats[1], sum_sq: stats[2], returns }
    }

    /// Keep the statistic, start every env's return at 0 (the online phase after the offline
    /// pass: each env starts a fresh episode).
    pub fn reset_returns(&mut self) {
        self.returns.clear();
    }

    fn push(&mut self, x: f64) {
        self.count += 1.0;
        if self.count == 1.0 {
            self.mean = x;
        } else {
            let old = self.mean;
            self.mean = old + (x - old) / self.count;
            self.sum_sq += (x - old) * (x - self.mean);
        }
    }

    /// `R_i ← γ R_i + r`, update the statistic with `R_i`, return `r / (σ + 1e-8)`.
    pub fn scale(&mut self, env: usize, r: f64) -> f64 {
        if self.returns.len() <= env {
            self.returns.resize(env + 1, 0.0);
        }
        let ret = self.gamma * self.returns[env] + r;
        self.returns[env] = ret;
        self.push(ret);
        r / (self.std() + 1e-8)
    }

    /// `R_i ← 0` (an episode of env `i` ended).
    pub fn reset(&mut self, env: usize) {
        if let Some(r) = self.returns.get_mut(env) {
            *r = 0.0;
        }
    }

    /// The offline pass over dataset rows in episode order (one stream, env 0): a row with
    /// `episode_end ≠ 0` resets `R` and keeps its reward; every other row is scaled.
    pub fn scale_dataset(&mut self, rewards: &[f32], episode_end: &[f32]) -> Vec<f32> {
        rewards
            .iter()
            .zip(episode_end)
            .map(|(&r, &end)| {
                if end != 0.0 {
                    self.reset(0);
                    r
                } else {
                    self.scale(0, r as f64) as f32
                }
            })
            .collect()
    }

    /// The online pass over time-major rows of `envs` envs (row `t · envs + i`): every reward
    /// scaled, env `i`'s `R` reset after a row with `done`.
    pub fn scale_rollout(&mut self, rewards: &[f32], done: &[bool], envs: usize) -> Vec<f32> {
        if self.returns.len() < envs {
            self.returns.resize(envs, 0.0);
        }
        rewards
            .iter()
            .zip(done)
            .enumerate()
            .map(|(row, (&r, &d))| {
                let i = row % envs;
                let x = self.scale(i, r as f64) as f32;
                if d {
                    self.reset(i);
                }
                x
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// γ = 0.5, rewards 1, 2, 3 of one episode:
    /// R = 1 → n 1, μ 1, S 1, σ 1 → 1;
    /// R = 0.5 + 2 = 2.5 → μ 1.75, S = 1 + 1.5·0.75 = 2.125, σ = √1.0625 → 2 / 1.030776406;
    /// R = 1.25 + 3 = 4.25 → μ = 1.75 + 2.5/3, S = 2.125 + 2.5·(4.25 − μ) = 6.291666…,
    /// σ = √(S/3) → 3 / 1.448178….
    #[test]
    fn hand_computed_sequence() {
        let mut s = ReturnStdScaler::new(0.5);
        let out = s.scale_rollout(&[1.0, 2.0, 3.0], &[false; 3], 1);
        let mu = 1.75 + 2.5 / 3.0;
        let s3: f64 = 2.125 + 2.5 * (4.25 - mu);
        let want = [1.0 / (1.0 + 1e-8), 2.0 / (1.0625f64.sqrt() + 1e-8), 3.0 / ((s3 / 3.0).sqrt() + 1e-8)];
        for (x, w) in out.iter().zip(want) {
            assert!((*x as f64 - w).abs() < 1e-6, "{out:?} vs {want:?}");
        }
        assert!((want[1] - 1.940285).abs() < 1e-6 && (want[2] - 2.071568).abs() < 1e-6);
        assert_eq!(s.stats(), [3.0, mu, s3]);
        assert_eq!(s.returns(), &[4.25]);
    }

    /// Offline: the episode-ending row resets R and keeps its reward; the next episode starts
    /// from R = 0 but the statistic continues.
    #[test]
    fn dataset_pass_resets_at_episode_ends_and_keeps_that_reward() {
        let mut s = ReturnStdScaler::new(0.5);
        // Rows: 1, 2 (end), 4, 6.
        let out = s.scale_dataset(&[1.0, 2.0, 4.0, 6.0], &[0.0, 1.0, 0.0, 0.0]);
        assert_eq!(out[1], 2.0, "the end row is left unscaled");
        assert_eq!(out[0], (1.0 / (1.0 + 1e-8)) as f32);
        // Row 2: R = 4 (reset), n = 2: μ = 1 + 3/2 = 2.5, S = 1 + 3·1.5 = 5.5, σ = √2.75.
        assert!((out[2] as f64 - 4.0 / (2.75f64.sqrt() + 1e-8)).abs() < 1e-6);
        // Row 3: R = 2 + 6 = 8, n = 3: μ = 2.5 + 5.5/3, S = 5.5 + 5.5·(8 − μ), σ = √(S/3).
        let mu = 2.5 + 5.5 / 3.0;
        let s3: f64 = 5.5 + 5.5 * (8.0 - mu);
        assert!((out[3] as f64 - 6.0 / ((s3 / 3.0).sqrt() + 1e-8)).abs() < 1e-6);
        assert_eq!(s.stats()[0], 3.0);
    }

    /// Two envs interleaved keep their own R and share the statistic; `done` resets after the
    /// row is scaled; a scaler rebuilt from its state continues identically.
    #[test]
    fn rollout_envs_keep_their_returns_and_state_round_trips() {
        let mut a = ReturnStdScaler::new(0.9);
        // Env 0: 1, 1 (done), 1; env 1: 2, 2, 2.
        let first = a.scale_rollout(&[1.0, 2.0, 1.0, 2.0, 1.0, 2.0], &[false, false, true, false, false, false], 2);
        assert!((first[0] as f64 - 1.0).abs() < 1e-6, "n = 1: σ = 1");
        assert_eq!(a.returns(), &[1.0, 2.0 * 0.81 + 2.0 * 0.9 + 2.0]);
        let mut b = ReturnStdScaler::from_state(0.9, a.stats(), a.returns().to_vec());
        let (x, y) = (a.scale_rollout(&[3.0, 4.0], &[true, false], 2), b.scale_rollout(&[3.0, 4.0], &[true, false], 2));
        assert_eq!(x, y);
        assert_eq!(a, b);
        assert_eq!(a.returns()[0], 0.0);
    }
}
