//! Monte-Carlo return-to-go per transition (the reference value V^μ that Cal-QL floors its
//! policy Q-values with).
//!
//! Within one episode of rewards r_0 … r_{T−1}:
//!
//! ```text
//! G_t = r_t + γ · G_{t+1},   G_T = 0
//! ```
//!
//! An episode that ends by truncation (time limit, or the data running out) is treated the same
//! way: its last G is the reward alone, i.e. the *partial* return of what was observed, with no
//! bootstrap value. This is what the Cal-QL and CORL reference code compute.
//!
//! Sparse-reward convention (algorithms.md §1.5, WSRL `calc_return_to_go`, CORL Cal-QL): when a
//! task is sparse and **every** reward of an episode equals the failure reward r_neg, the episode
//! never reached the goal; its return-to-go is set to the infinite-horizon value
//! `r_neg / (1 − γ)` at every step, instead of the (too optimistic) finite sum.

use crate::error::{DatasetError, Result};

/// How returns are computed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct McConfig {
    /// Discount γ.
    pub gamma: f32,
    /// `Some(r_neg)` for sparse tasks: an all-`r_neg` episode gets `r_neg / (1 − γ)` everywhere.
    /// Compare against the reward *after* preprocessing (e.g. −5 for AntMaze with ×10 − 5).
    pub sparse_failure_reward: Option<f32>,
}

impl McConfig {
    /// Dense rewards, discount `gamma`.
    pub fn dense(gamma: f32) -> Self {
        Self { gamma, sparse_failure_reward: None }
    }

    /// Checks γ ∈ [0, 1).
    pub fn validate(&self) -> Result<()> {
        if !(0.0..1.0).contains(&self.gamma) {
            return Err(DatasetError::Invalid(format!("discount gamma must be in [0, 1), found {}", self.gamma)));
        }
        Ok(())
    }
}

/// Writes the return-to-go of one episode's `rewards` into `out` (same length).
pub fn episode_returns_to_go(rewards: &[f32], cfg: &McConfig, out: &mut [f32]) {
    debug_assert_eq!(rewards.len(), out.len());
    if let Some(r_neg) = cfg.sparse_failure_reward {
        if !rewards.is_empty() && rewards.iter().all(|&r| r == r_neg) {
            // All-failure episode: the value of failing forever, r_neg / (1 − γ).
            out.fill(r_neg / (1.0 - cfg.gamma));
            return;
        }
    }
    // G_t = r_t + γ G_{t+1}, accumulated in f64 so long episodes do not lose precision.
    let gamma = cfg.gamma as f64;
    let mut g = 0.0f64;
    for t in (0..rewards.len()).rev() {
        g = rewards[t] as f64 + gamma * g;
        out[t] = g as f32;
    }
}

/// Return-to-go of every row of a flat reward column split into episodes by `episode_ends`
/// (1.0 on the last row of each episode). Rows after the last end form a final, truncated
/// episode.
pub fn returns_to_go(rewards: &[f32], episode_ends: &[f32], cfg: &McConfig) -> Result<Vec<f32>> {
    cfg.validate()?;
    if rewards.len() != episode_ends.len() {
        return Err(DatasetError::Dimension {
            what: "episode_ends length (must equal rewards length)".into(),
            expected: rewards.len(),
            found: episode_ends.len(),
        });
    }
    let mut out = vec![0.0f32; rewards.len()];
    let mut start = 0;
    for i in 0..rewards.len() {
        if episode_ends[i] != 0.0 || i + 1 == rewards.len() {
            episode_returns_to_go(&rewards[start..=i], cfg, &mut out[start..=i]);
            start = i + 1;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_discounted_sum() {
        let mut out = [0.0; 3];
        episode_returns_to_go(&[1.0, 2.0, 3.0], &McConfig::dense(0.5), &mut out);
        // G_2 = 3, G_1 = 2 + 0.5·3 = 3.5, G_0 = 1 + 0.5·3.5 = 2.75
        assert_eq!(out, [2.75, 3.5, 3.0]);
    }

    #[test]
    fn sparse_all_failure_gets_infinite_horizon_value() {
        let cfg = McConfig { gamma: 0.99, sparse_failure_reward: Some(-5.0) };
        let mut out = [0.0; 4];
        episode_returns_to_go(&[-5.0; 4], &cfg, &mut out);
        for g in out {
            assert!((g - (-500.0)).abs() < 1e-3, "{g}");
        }
        // One success breaks the convention: plain discounted sum.
        episode_returns_to_go(&[-5.0, -5.0, 5.0, 5.0], &cfg, &mut out);
        assert!((out[3] - 5.0).abs() < 1e-6);
        assert!((out[2] - (5.0 + 0.99 * 5.0)).abs() < 1e-5);
    }

    #[test]
    fn splits_on_episode_ends_and_trailing_partial_episode() {
        let r = [1.0, 1.0, 1.0, 1.0, 1.0];
        let ends = [0.0, 1.0, 0.0, 0.0, 0.0];
        let g = returns_to_go(&r, &ends, &McConfig::dense(0.5)).unwrap();
        assert_eq!(g, vec![1.5, 1.0, 1.75, 1.5, 1.0]);
    }

    #[test]
    fn rejects_bad_gamma_and_lengths() {
        assert!(returns_to_go(&[1.0], &[1.0], &McConfig::dense(1.0)).is_err());
        assert!(returns_to_go(&[1.0, 2.0], &[1.0], &McConfig::dense(0.9)).is_err());
    }
}
