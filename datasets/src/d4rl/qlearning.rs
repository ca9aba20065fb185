//! Building flat transitions from a D4RL dataset, two ways.
//!
//! **`qlearning_dataset` (exact).** Reproduces `d4rl.qlearning_dataset(env, terminate_on_end=False)`
//! (formats.md §1.6) row for row, for score parity with published baselines. Its quirks, kept on
//! purpose:
//! 1. it loops over rows `0 … N−2`, so the file's **last row is always dropped**;
//! 2. `next_obs[i] = observations[i+1]`, ignoring `next_observations` even when present; a
//!    terminal row's next state is therefore the next episode's reset state (masked by the
//!    terminal flag in TD targets, wrong for dynamics models);
//! 3. a row that ends an episode by time limit (`timeouts[i]`, or `episode_step ==
//!    max_episode_steps − 1` without a `timeouts` key) is **skipped**, so a 1000-step timed-out
//!    episode gives 999 transitions;
//! 4. the step counter restarts at 0 on a terminal row and is then incremented for that row,
//!    so after a terminal the next episode's counter starts at 1 (matters only without
//!    `timeouts`, e.g. Kitchen).
//!
//! **Corrected.** Every row whose true next state is known becomes a transition:
//! `next_observations[i]` when the file has it (so truncated episodes keep their last
//! transition), otherwise `observations[i+1]` for rows that do not end an episode by time
//! limit. Terminal rows keep `terminal = 1`.
//!
//! Both can attach Monte-Carlo returns-to-go, computed per episode over the kept rows (a skipped
//! timeout row's reward is not part of the returns, as in CORL's Cal-QL which computes them from
//! the `qlearning_dataset` output).

use super::read::D4rlDataset;
use crate::error::Result;
use crate::mc_returns::{returns_to_go, McConfig};
use crate::transitions::Transitions;

/// Options shared by both builders.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct BuildOptions {
    /// The env's time limit, used when the file has no `timeouts` key (Kitchen: 280).
    pub max_episode_steps: Option<usize>,
    /// Attach MC returns-to-go with this config.
    pub mc: Option<McConfig>,
}

impl D4rlDataset {
    /// Transitions exactly as `d4rl.qlearning_dataset` returns them (see the module docs).
    pub fn qlearning_dataset(&self, opts: &BuildOptions) -> Result<Transitions> {
        let n = self.len();
        let mut t = self.empty_transitions(n);
        let mut episode_step = 0usize;
        for i in 0..n.saturating_sub(1) {
            let done = self.terminals[i] != 0.0;
            let final_timestep = match &self.timeouts {
                Some(to) => to[i] != 0.0,
                None => opts.max_episode_steps.is_some_and(|m| episode_step + 1 == m),
            };
            if final_timestep {
                // Skipped; the previous kept row was this episode's last.
                episode_step = 0;
                if let Some(last) = t.episode_ends.last_mut() {
                    *last = 1.0;
                }
                continue;
            }
            if done {
                episode_step = 0;
            }
            let next = self.obs(i + 1).to_vec();
            self.push_row(&mut t, i, &next, done);
            episode_step += 1;
        }
        self.finish(t, opts)
    }

    /// Transitions keeping every row whose true next state is known (see the module docs).
    pub fn corrected_transitions(&self, opts: &BuildOptions) -> Result<Transitions> {
        let n = self.len();
        let mut t = self.empty_transitions(n);
        for ep in self.episodes(opts.max_episode_steps) {
            let before = t.len();
            for i in ep.rows.clone() {
                let next = match &self.next_observations {
                    Some(next) => &next[i * self.obs_dim..(i + 1) * self.obs_dim],
                    None if i + 1 < ep.rows.end => self.obs(i + 1),
                    // Last row of an episode, no stored s': the following row is the reset
                    // state. Keep it only when it is a true termination (s' is masked).
                    None if ep.terminated && i + 1 < n => self.obs(i + 1),
                    None => continue,
                };
                let next = next.to_vec();
                self.push_row(&mut t, i, &next, self.terminals[i] != 0.0);
            }
            if t.len() > before {
                if let Some(last) = t.episode_ends.last_mut() {
                    *last = 1.0;
                }
            }
        }
        self.finish(t, opts)
    }

    fn empty_transitions(&self, n: usize) -> Transitions {
        Transitions {
            obs_dim: self.obs_dim,
            act_dim: self.act_dim,
            observations: Vec::with_capacity(n * self.obs_dim),
            actions: Vec::with_capacity(n * self.act_dim),
            rewards: Vec::with_capacity(n),
            next_observations: Vec::with_capacity(n * self.obs_dim),
            terminals: Vec::with_capacity(n),
            episode_ends: Vec::with_capacity(n),
            mc_returns: None,
        }
    }

    fn push_row(&self, t: &mut Transitions, i: usize, next: &[f32], done: bool) {
        t.observations.extend_from_slice(self.obs(i));
        t.actions.extend_from_slice(&self.actions[i * self.act_dim..(i + 1) * self.act_dim]);
        t.rewards.push(self.rewards[i]);
        t.next_observations.extend_from_slice(next);
        t.terminals.push(if done { 1.0 } else { 0.0 });
        // A terminal row ends its episode (MC returns restart after it).
        t.episode_ends.push(if done { 1.0 } else { 0.0 });
    }

    fn finish(&self, mut t: Transitions, opts: &BuildOptions) -> Result<Transitions> {
        if let Some(mc) = &opts.mc {
            t.mc_returns = Some(returns_to_go(&t.rewards, &t.episode_ends, mc)?);
        }
        t.validate()?;
        Ok(t)
    }
}
