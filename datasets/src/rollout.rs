//! The on-policy rollout buffer (PPO, Uni-O4 online): `T` steps × `N` envs of
//! `(s, a, log π(a|s), V(s), r, V(s'), terminated, done)`, and generalized advantage estimation.
//!
//! Layout: time-major, row `t · N + i` is env `i` at step `t`. Each row stores the value of its
//! own next observation `V(s')`, so a time-limit cut bootstraps from the episode's true last
//! observation (the vector env's `final_obs`) rather than from the next episode's first one:
//!
//! - `δ_t = r_t + γ (1 − terminated_t) V(s'_t) − V(s_t)` — only a true end stops bootstrapping;
//! - `A_t = δ_t + γ λ (1 − done_t) A_{t+1}` — any episode end (termination or truncation) cuts
//!   the chain, since step `t + 1` belongs to another episode;
//! - the value target is `R_t = A_t + V(s_t)`.
//!
//! Plain `f32` columns in host memory, like the replay buffers; the learner makes one tensor
//! per column per update.

use crate::error::{DatasetError, Result};

/// `T × N` rows of on-policy experience.
#[derive(Debug, Clone, PartialEq)]
pub struct RolloutBuffer {
    /// Steps per env `T`.
    pub steps: usize,
    /// Envs `N`.
    pub envs: usize,
    /// Observation width.
    pub obs_dim: usize,
    /// Action width.
    pub act_dim: usize,
    /// `[T·N, obs_dim]`, as the agent saw them (before its own normalization).
    pub obs: Vec<f32>,
    /// `[T·N, act_dim]`, in the agent's action box.
    pub actions: Vec<f32>,
    /// `log π_old(a|s)` at collection time, `[T·N]`.
    pub log_probs: Vec<f32>,
    /// `V_old(s)` at collection time, `[T·N]`.
    pub values: Vec<f32>,
    /// `V_old(s')` of the transition's next observation, `[T·N]` (ignored where terminated).
    pub next_values: Vec<f32>,
    /// Rewards as the agent learns from them, `[T·N]`.
    pub rewards: Vec<f32>,
    /// A true end: `V(s')` is not used.
    pub terminated: Vec<bool>,
    /// Any episode end (terminated or truncated): the GAE chain is cut after this row.
    pub done: Vec<bool>,
}

impl RolloutBuffer {
    /// An empty buffer for `steps × envs` rows.
    pub fn new(steps: usize, envs: usize, obs_dim: usize, act_dim: usize) -> Self {
        let rows = steps * envs;
        Self {
            steps,
            envs,
            obs_dim,
            act_dim,
            obs: Vec::with_capacity(rows * obs_dim),
            actions: Vec::with_capacity(rows * act_dim),
            log_probs: Vec::with_capacity(rows),
            values: Vec::with_capacity(rows),
            next_values: vec![0.0; rows],
            rewards: Vec::with_capacity(rows),
            terminated: Vec::with_capacity(rows),
            done: Vec::with_capacity(rows),
        }
    }

    /// Rows stored so far.
    pub fn len(&self) -> usize {
        self.rewards.len()
    }

    /// No rows yet.
    pub fn is_empty(&self) -> bool {
        self.rewards.is_empty()
    }

    /// Every row is filled.
    pub fn is_full(&self) -> bool {
        self.len() == self.steps * self.envs
    }

    /// Append one vector step: `N` rows of observations, actions, log-probabilities, values,
    /// rewards and flags. `next_values` of these rows are filled later with
    /// [`RolloutBuffer::set_next_value`].
    #[allow(clippy::too_many_arguments)]
    pub fn push_step(
        &mut self,
        obs: &[f32],
        actions: &[f32],
        log_probs: &[f32],
        values: &[f32],
        rewards: &[f32],
        terminated: &[bool],
        truncated: &[bool],
    ) -> Result<()> {
        let n = self.envs;
        let check = |what: &str, found: usize, expected: usize| {
            if found == expected {
                Ok(())
            } else {
                Err(DatasetError::Dimension { what: format!("rollout step {what}"), expected, found })
            }
        };
        check("observations", obs.len(), n * self.obs_dim)?;
        check("actions", actions.len(), n * self.act_dim)?;
        check("log-probabilities", log_probs.len(), n)?;
        check("values", values.len(), n)?;
        check("rewards", rewards.len(), n)?;
        check("terminated flags", terminated.len(), n)?;
        check("truncated flags", truncated.len(), n)?;
        if self.is_full() {
            return Err(DatasetError::Dimension {
                what: "rollout rows (the buffer is full)".into(),
                expected: self.steps * n,
                found: self.len() + n,
            });
        }
        self.obs.extend_from_slice(obs);
        self.actions.extend_from_slice(actions);
        self.log_probs.extend_from_slice(log_probs);
        self.values.extend_from_slice(values);
        self.rewards.extend_from_slice(rewards);
        self.terminated.extend_from_slice(terminated);
        self.done.extend(terminated.iter().zip(truncated).map(|(a, b)| *a || *b));
        Ok(())
    }

    /// Set `V(s')` of env `env`'s row at step `t`.
    pub fn set_next_value(&mut self, t: usize, env: usize, value: f32) {
        self.next_values[t * self.envs + env] = value;
    }

    /// Set `V(s')` of step `t`'s rows whose episode went on (not done) to `values[i]`, the
    /// value of env `i`'s next observation (the following step's `V(s)`).
    pub fn set_continuing_next_values(&mut self, t: usize, values: &[f32]) {
        for (i, v) in values.iter().enumerate().take(self.envs) {
            let row = t * self.envs + i;
            if !self.done[row] {
                self.next_values[row] = *v;
            }
        }
    }

    /// Forget every row (the next rollout starts).
    pub fn clear(&mut self) {
        self.obs.clear();
        self.actions.clear();
        self.log_probs.clear();
        self.values.clear();
        self.rewards.clear();
        self.terminated.clear();
        self.done.clear();
        self.next_values.iter_mut().for_each(|v| *v = 0.0);
    }

    /// GAE(λ) advantages and value targets `(A, R)` of a full buffer (see the module docs).
    pub fn advantages(&self, gamma: f32, lambda: f32) -> (Vec<f32>, Vec<f32>) {
        gae(&self.rewards, &self.values, &self.next_values, &self.terminated, &self.done, self.envs, gamma, lambda)
    }
}

/// Generalized advantage estimation over time-major rows of `envs` envs:
/// `δ_t = r_t + γ (1 − terminated_t) V(s'_t) − V(s_t)`, `A_t = δ_t + γ λ (1 − done_t) A_{t+1}`,
/// `R_t = A_t + V(s_t)`; the chain after the last step starts at 0. Returns `(A, R)`.
#[allow(clippy::too_many_arguments)]
pub fn gae(
    rewards: &[f32],
    values: &[f32],
    next_values: &[f32],
    terminated: &[bool],
    done: &[bool],
    envs: usize,
    gamma: f32,
    lambda: f32,
) -> (Vec<f32>, Vec<f32>) {
    let rows = rewards.len();
    let mut adv = vec![0.0f32; rows];
    let mut carry = vec![0.0f32; envs];
    for row in (0..rows).rev() {
        let i = row % envs;
        let bootstrap = if terminated[row] { 0.0 } else { gamma * next_values[row] };
        let delta = rewards[row] + bootstrap - values[row];
        let keep = if done[row] { 0.0 } else { gamma * lambda };
        carry[i] = delta + keep * carry[i];
        adv[row] = carry[i];
    }
    let ret = adv.iter().zip(values).map(|(a, v)| a + v).collect();
    (adv, ret)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One env, four steps: a time-limit cut after step 1 (bootstrapping from the true final
    /// observation's value 10, not from step 2's value), a termination at step 3.
    /// γ = 0.9, λ = 0.5, V = [1, 2, 3, 4], V(s') = [2, 10, 4, —], r = [1, 1, 1, 1]:
    /// δ₃ = 1 − 4 = −3 (terminated), A₃ = −3;
    /// δ₂ = 1 + 0.9·4 − 3 = 1.6, A₂ = 1.6 + 0.45·(−3) = 0.25;
    /// δ₁ = 1 + 0.9·10 − 2 = 8 (truncated: bootstrap, but cut the chain), A₁ = 8;
    /// δ₀ = 1 + 0.9·2 − 1 = 1.8, A₀ = 1.8 + 0.45·8 = 5.4.
    #[test]
    fn gae_by_hand_with_a_truncation_and_a_termination() {
        let mut b = RolloutBuffer::new(4, 1, 1, 1);
        let (term, trunc) = ([false, false, false, true], [false, true, false, false]);
        for t in 0..4 {
            b.push_step(&[t as f32], &[0.0], &[0.0], &[t as f32 + 1.0], &[1.0], &[term[t]], &[trunc[t]]).unwrap();
        }
        for (t, v) in [(0, 2.0), (1, 10.0), (2, 4.0), (3, 99.0)] {
            b.set_next_value(t, 0, v);
        }
        let (a, r) = b.advantages(0.9, 0.5);
        let want = [5.4f32, 8.0, 0.25, -3.0];
        for t in 0..4 {
            assert!((a[t] - want[t]).abs() < 1e-5, "A[{t}] = {} want {}", a[t], want[t]);
            assert!((r[t] - (want[t] + t as f32 + 1.0)).abs() < 1e-5);
        }
    }

    /// Two envs interleaved time-major keep separate chains: env 1's termination does not cut
    /// env 0's chain.
    #[test]
    fn envs_have_separate_chains() {
        let (r, v, nv) = ([1.0f32, 0.0, 1.0, 0.0], [0.0f32; 4], [0.0f32; 4]);
        let (term, done) = ([false, true, false, false], [false, true, false, false]);
        let (a, _) = gae(&r, &v, &nv, &term, &done, 2, 1.0, 1.0);
        assert_eq!(a, vec![2.0, 0.0, 1.0, 0.0]);
        let mut b = RolloutBuffer::new(1, 2, 1, 1);
        assert!(
            b.push_step(&[0.0], &[0.0, 0.0], &[0.0; 2], &[0.0; 2], &[0.0; 2], &[false; 2], &[false; 2]).is_err(),
            "observation rows must match N"
        );
    }
}
