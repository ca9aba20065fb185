//! Flat transitions `(s, a, r, s', terminal)`, the input of the offline replay buffer.
//!
//! Columns are row-major `f32` vectors: row `i` of `observations` is
//! `observations[i * obs_dim .. (i + 1) * obs_dim]`. `terminals` holds 1.0 for a true
//! termination (bootstrapping stops) and 0.0 otherwise; time-limit truncations are 0.0.

use crate::error::{DatasetError, Result};

/// A set of transitions in contiguous `f32` columns.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Transitions {
    /// Observation size.
    pub obs_dim: usize,
    /// Action size.
    pub act_dim: usize,
    /// `[N * obs_dim]` states s.
    pub observations: Vec<f32>,
    /// `[N * act_dim]` actions a.
    pub actions: Vec<f32>,
    /// `[N]` rewards r(s, a).
    pub rewards: Vec<f32>,
    /// `[N * obs_dim]` next states s'.
    pub next_observations: Vec<f32>,
    /// `[N]` 1.0 where the episode truly terminated after this transition, else 0.0.
    pub terminals: Vec<f32>,
    /// `[N]` 1.0 where this is the last kept transition of its episode (terminated, truncated or
    /// the data ran out), else 0.0. Not used for bootstrapping; kept for episode statistics.
    pub episode_ends: Vec<f32>,
    /// `[N]` Monte-Carlo return-to-go of each transition, when computed.
    pub mc_returns: Option<Vec<f32>>,
}

impl Transitions {
    /// Number of transitions.
    pub fn len(&self) -> usize {
        self.rewards.len()
    }

    /// Whether there are no transitions.
    pub fn is_empty(&self) -> bool {
        self.rewards.is_empty()
    }

    /// Checks that every column has `len()` rows of the right width.
    pub fn validate(&self) -> Result<()> {
        let n = self.len();
        let check = |what: &str, found: usize, expected: usize| {
            if found == expected {
                Ok(())
            } else {
                Err(DatasetError::Dimension { what: format!("transitions column `{what}` length"), expected, found })
            }
        };
        check("observations", self.observations.len(), n * self.obs_dim)?;
        check("actions", self.actions.len(), n * self.act_dim)?;
        check("next_observations", self.next_observations.len(), n * self.obs_dim)?;
        check("terminals", self.terminals.len(), n)?;
        check("episode_ends", self.episode_ends.len(), n)?;
        if let Some(mc) = &self.mc_returns {
            check("mc_returns", mc.len(), n)?;
        }
        Ok(())
    }
}
