//! Uni-O4's offline critic (`critic.py IQL_Q_V`): twin Q and an expectile V, IQL's losses in the
//! official order — V first, then Q towards the *updated* V — with the target Q Polyak-averaged
//! every second Q step:
//! - `L_V = E[ |ω − 1(u < 0)| u² ]`, `u = min_j Q̄_j(s, a) − V(s)` (target Q);
//! - `L_Q = E[ Σ_j (Q_j(s, a) − y)² ]`, `y = r + γ m V(s′)`, `m` from [`MaskRule`] (the code's
//!   `1 − (terminal ∨ timeout)` by default);
//! - `θ̄ ← (1 − τ) θ̄ + τ θ` after every second Q step.
//!
//! The same ω is the expectile here and Uni-O4's advantage weight elsewhere. Shares IQL's
//! expectile loss ([`crate::nn::value`]), target minimum and Q step ([`crate::nn::critic`]).

use super::{Data, MaskRule};
use crate::checkpoint::{progress_in_fields, Part, Stateful};
use crate::nn::critic::{critic_and_target, q_step, state_action, target_min_q, CriticParts};
use crate::nn::value::expectile_loss;
use crate::nn::{EnsembleMlp, Frozen, Mlp, MlpConfig, ParamSet, Trained};
use crate::rng::AgentRng;
use crate::{AgentError, Metrics};
use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

/// Which offline critic Uni-O4 learns (`main.py --is_iql`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CriticPath {
    /// IQL's twin Q and expectile V (this file; the locomotion scripts but halfcheetah-medium-expert).
    #[default]
    Iql,
    /// V regressed on Monte-Carlo returns, then one Q by SARSA on the dataset's next actions
    /// ([`super::sarsa`]; the code's default, halfcheetah-medium-expert's script).
    Sarsa,
}

/// Critic-stage settings (official locomotion defaults).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CriticConfig {
    /// Each Q network (2×1024; AntMaze 3×256).
    pub q: MlpConfig,
    /// The V network (3×512; AntMaze 3×256).
    pub value: MlpConfig,
    /// Expectile ω (0.7; AntMaze 0.9).
    pub omega: f64,
    /// Discount γ.
    pub gamma: f64,
    /// Polyak rate τ.
    pub tau: f64,
    /// Q steps between Polyak steps (2).
    pub target_every: u64,
    /// Adam learning rate of Q and V (1e-4).
    pub lr: f64,
    /// Rows per step (512).
    pub batch_size: usize,
    /// Steps (`v_steps`, 2e6; walker2d-medium-replay 5e5).
    pub steps: u64,
    /// Bootstrap mask: `code` (terminal or timeout) or `d4rl` (terminal only).
    pub mask: MaskRule,
    /// `iql` or `sarsa` (then `steps` are V's regression steps and `q_steps` SARSA's).
    pub path: CriticPath,
    /// SARSA Q steps (`q_bc_steps`, 2e6) on the `sarsa` path; unused by `iql`.
    pub q_steps: u64,
}

impl Default for CriticConfig {
    fn default() -> Self {
        Self {
            q: MlpConfig { hidden: vec![1024, 1024], ..MlpConfig::default() },
            value: MlpConfig { hidden: vec![512, 512, 512], ..MlpConfig::default() },
            omega: 0.7,
            gamma: 0.99,
            tau: 0.005,
            target_every: 2,
            lr: 1e-4,
            batch_size: 512,
            steps: 2_000_000,
            mask: MaskRule::Code,
            path: CriticPath::Iql,
            q_steps: 2_000_000,
        }
    }
}

impl CriticConfig {
    /// Reject settings that cannot work, naming the field.
    pub fn validate(&self) -> Result<(), AgentError> {
        if !(0.0 < self.omega && self.omega < 1.0) {
            return Err(AgentError::Config(format!("unio4.critic.omega must be in (0, 1), found {}", self.omega)));
        }
        if self.batch_size == 0 || self.target_every == 0 {
            return Err(AgentError::Config("unio4.critic.batch_size and target_every must be ≥ 1".into()));
        }
        Ok(())
    }
}

/// `min_j Q_j(s, a)` `[B]` of a Q ensemble, without gradients (one member: `Q(s, a)`).
pub(super) fn min_q_of(q: &EnsembleMlp, s: &Tensor, a: &Tensor) -> Tensor {
    tch::no_grad(|| q.forward(&state_action(s, a), None).squeeze_dim(-1).amin(0, false))
}

/// Twin Q, its target and V, with their optimizers.
pub struct Critic {
    cfg: CriticConfig,
    q: Trained<EnsembleMlp>,
    target: Frozen<EnsembleMlp>,
    v: Trained<Mlp>,
    rng: AgentRng,
    step: i64,
}

impl Critic {
    /// A fresh critic for `obs_dim` states and `act_dim` actions.
    pub fn new(cfg: CriticConfig, obs_dim: i64, act_dim: i64, device: Device, seed: u64) -> Result<Self, AgentError> {
        cfg.validate()?;
        crate::algos::prepare("unio4-critic", obs_dim, act_dim, device)?;
        let mut rng = AgentRng::new(seed);
        let (q, target) = critic_and_target(2, obs_dim + act_dim, &cfg.q, cfg.lr, &mut rng, device);
        let v = Trained::new(cfg.lr, |p| Mlp::new(p, "value", obs_dim, 1, &cfg.value, 1.0, &mut rng, device));
        Ok(Self { cfg, q, target, v, rng, step: 0 })
    }

    /// Steps done.
    pub fn steps(&self) -> i64 {
        self.step
    }

    /// The V network's parameters (handed to the online PPO).
    pub fn value_params(&self) -> &ParamSet {
        &self.v.params
    }

    /// `V(s)` `[B]` of states as the critic sees them, without gradients.
    pub fn value(&self, s: &Tensor) -> Tensor {
        tch::no_grad(|| self.v.net.forward(s, None).squeeze_dim(-1))
    }

    /// `min_j Q_j(s, a)` `[B]` of the online twin Q (BPPO's advantage, AM-Q's score), without
    /// gradients.
    pub fn min_q(&self, s: &Tensor, a: &Tensor) -> Tensor {
        min_q_of(&self.q.net, s, a)
    }

    /// The TD target `y = r + γ m V(s′)` of rows `idx` (`s′` as the critic sees it).
    pub fn td_target(&self, data: &Data, idx: &Tensor, state_norm: bool) -> Tensor {
        let s_next = data.norm_obs(&data.next_obs.index_select(0, idx), state_norm);
        let m = data.mask(self.cfg.mask).index_select(0, idx);
        data.reward.index_select(0, idx) + m * self.cfg.gamma * self.value(&s_next)
    }

    /// One step on a batch drawn from `data` (V, then Q, then every `target_every` Q steps the
    /// Polyak step).
    pub fn update(&mut self, data: &Data, state_norm: bool) -> Metrics {
        let idx = self.rng.indices(data.len(), self.cfg.batch_size, true, data.obs.device());
        let s = data.norm_obs(&data.obs.index_select(0, &idx), state_norm);
        let a = data.action.index_select(0, &idx);
        let sa = state_action(&s, &a);
        // L_V with u = min_j Q̄_j(s, a) − V(s).
        let q_bar = target_min_q(&self.target.net, &sa);
        let v = self.v.net.forward(&s, None).squeeze_dim(-1);
        let value_loss = expectile_loss(&(&q_bar - &v), self.cfg.omega);
        self.v.minimize(&value_loss);
        // L_Q towards y = r + γ m V(s′) with the updated V; Polyak every `target_every` steps.
        let y = self.td_target(data, &idx, state_norm);
        let tau = if (self.step as u64 + 1) % self.cfg.target_every == 0 { self.cfg.tau } else { 0.0 };
        let parts = CriticParts::of(&mut self.q, &self.target);
        let (q_loss, q_mean) = q_step(parts, &sa, &y, tau, &mut self.rng);
        self.step += 1;
        vec![
            ("value_loss", value_loss.double_value(&[])),
            ("q_loss", q_loss.double_value(&[])),
            ("q_mean", q_mean.double_value(&[])),
            ("v_mean", v.mean(Kind::Float).double_value(&[])),
        ]
    }
}

impl Stateful for Critic {
    fn name(&self) -> &'static str {
        "unio4-critic"
    }

    fn parts(&self) -> Vec<Part<'_>> {
        vec![Part::trained("q_opt", &self.q), Part::frozen(&self.target), Part::trained("value_opt", &self.v)]
    }

    progress_in_fields!();
}

impl super::OfflineCritic for Critic {
    fn update(&mut self, data: &Data, state_norm: bool) -> Metrics {
        Critic::update(self, data, state_norm)
    }
    fn steps(&self) -> u64 {
        self.step as u64
    }
    fn total_steps(&self) -> u64 {
        self.cfg.steps
    }
    fn q(&self, s: &Tensor, a: &Tensor) -> Tensor {
        self.min_q(s, a)
    }
    fn value(&self, s: &Tensor) -> Tensor {
        Critic::value(self, s)
    }
    fn value_params(&self) -> &ParamSet {
        &self.v.params
    }
    fn advantage_weight(&self) -> Option<f64> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Test 1 of §1.8: with the code's mask, a transition whose episode ends by a timeout (not a
    /// termination) gets `y = r` exactly; the D4RL mask bootstraps it; mid-episode rows
    /// bootstrap under both.
    #[test]
    fn timeout_mask_gives_y_equal_r_at_a_timeout() {
        let small = MlpConfig { hidden: vec![16], ..MlpConfig::default() };
        let cfg = CriticConfig { q: small.clone(), value: small, ..CriticConfig::default() };
        // Three transitions of one episode that ends by a timeout at row 2 (terminal 0).
        let d = Data::new(
            &[0.1, 0.2, 0.3],
            &[0.0, 0.5, -0.5],
            &[1.0, 2.0, 3.0],
            &[0.2, 0.3, 0.4],
            &[0.0; 3],
            &[0.0, 0.0, 1.0],
            1,
            1,
            Device::Cpu,
        )
        .unwrap();
        let idx = Tensor::from_slice(&[0i64, 1, 2]);
        let mut c = Critic::new(cfg.clone(), 1, 1, Device::Cpu, 0).unwrap();
        for _ in 0..5 {
            c.update(&d, false);
        }
        let v_next = Vec::<f32>::try_from(&c.value(&d.next_obs)).unwrap();
        assert!(
            v_next.iter().all(|v| v.abs() > 1e-4),
            "V(s′) must be non-zero for the test to mean anything: {v_next:?}"
        );
        let y = Vec::<f32>::try_from(&c.td_target(&d, &idx, false)).unwrap();
        assert_eq!(y[2], 3.0, "y = r at the timeout");
        assert!((y[0] - (1.0 + 0.99 * v_next[0])).abs() < 1e-6 && (y[1] - (2.0 + 0.99 * v_next[1])).abs() < 1e-6);
        let d4rl = Critic { cfg: CriticConfig { mask: MaskRule::D4rl, ..cfg }, ..c };
        let y = Vec::<f32>::try_from(&d4rl.td_target(&d, &idx, false)).unwrap();
        assert!((y[2] - (3.0 + 0.99 * v_next[2])).abs() < 1e-6, "the D4RL mask bootstraps through the timeout");
    }
}
