//! Uni-O4's non-IQL offline critic (`critic.py ValueLearner, QSarsaLearner`; `main.py` without
//! `--is_iql`, the code's default and the halfcheetah-medium-expert script's path): the
//! behaviour policy's V and Q, learned one after the other.
//! 1. V regressed on the dataset's Monte-Carlo returns for `steps` steps:
//!    `L_V = E[(V(s) − G)²]`, `G_t = r_t + γ (1 − end_t) G_{t+1}` (episodes cut at every end, as
//!    the code's returns are; [`super::value_refit`]'s regression with a linear head);
//! 2. then one Q by SARSA on the dataset's own next action for `q_steps` steps:
//!    `L_Q = E[(Q(s, a) − y)²]`, `y = r + γ m Q̄(s′, a′)`, `a′` the next row's action, `m` from
//!    [`super::MaskRule`]; `θ̄ ← (1 − τ) θ̄ + τ θ` after every `target_every`-th Q step.
//!
//! BPPO then uses `A = Q(s, a) − V(s)`, standardized per batch and weighted by ω where `A > 0`
//! and `1 − ω` elsewhere ([`OfflineCritic::advantage_weight`]); AM-Q scores with this Q.

use super::critic::{min_q_of, CriticConfig};
use super::value_refit::{ValueRefit, ValueRefitConfig};
use super::{Data, OfflineCritic};
use crate::checkpoint::{Checkpoint, Part, Stateful};
use crate::nn::critic::{critic_and_target, q_step, state_action, target_min_q, CriticParts};
use crate::nn::{EnsembleMlp, Frozen, ParamSet, Trained};
use crate::ppo::{RewardScaling, ValueHead};
use crate::rng::AgentRng;
use crate::{AgentError, Metrics};
use std::path::Path;
use tch::{Device, Tensor};

/// V on MC returns, then a SARSA Q with its target.
pub struct SarsaCritic {
    cfg: CriticConfig,
    /// V and the stage's RNG (its batch stream is also the Q phase's).
    v: ValueRefit,
    q: Trained<EnsembleMlp>,
    target: Frozen<EnsembleMlp>,
    q_step: u64,
}

impl SarsaCritic {
    /// A fresh critic for `data`'s shapes, with its MC returns.
    pub fn new(cfg: CriticConfig, data: &Data, device: Device, seed: u64) -> Result<Self, AgentError> {
        cfg.validate()?;
        crate::algos::prepare("unio4-sarsa-critic", data.obs.size()[1], data.action.size()[1], device)?;
        let vc = ValueRefitConfig {
            value: cfg.value.clone(),
            head: ValueHead::Linear,
            reward_scaling: RewardScaling::Constant,
            steps: cfg.steps.max(1),
            lr: cfg.lr,
            batch_size: cfg.batch_size,
            reward_scale: 1.0,
            gamma: cfg.gamma,
        };
        let mut v = ValueRefit::with_prefix(vc, data, device, seed, "value")?;
        let in_dim = data.obs.size()[1] + data.action.size()[1];
        let (q, target) = critic_and_target(1, in_dim, &cfg.q, cfg.lr, &mut v.rng, device);
        Ok(Self { cfg, v, q, target, q_step: 0 })
    }

    /// The SARSA target `y = r + γ m Q̄(s′, a′)` of rows `idx` (`s′` as the critic sees it).
    pub fn td_target(&self, data: &Data, idx: &Tensor, state_norm: bool) -> Tensor {
        let s_next = data.norm_obs(&data.next_obs.index_select(0, idx), state_norm);
        let a_next = data.next_action.index_select(0, idx);
        let m = data.mask(self.cfg.mask).index_select(0, idx);
        data.reward.index_select(0, idx)
            + m * self.cfg.gamma * target_min_q(&self.target.net, &state_action(&s_next, &a_next))
    }
}

/// V's stage state, then Q's; the Q steps done are written as `meta/q_step`.
impl Stateful for SarsaCritic {
    fn name(&self) -> &'static str {
        "unio4-sarsa-critic"
    }

    fn parts(&self) -> Vec<Part<'_>> {
        vec![Part::Group(self.v.parts()), Part::trained("q_opt", &self.q), Part::frozen(&self.target)]
    }

    fn progress(&self) -> (i64, &AgentRng) {
        self.v.progress()
    }

    fn set_progress(&mut self, step: i64, rng: AgentRng) {
        self.v.set_progress(step, rng);
    }

    fn written_only(&self) -> Vec<(String, Tensor)> {
        vec![("meta/q_step".into(), Tensor::from_slice(&[self.q_step as i64]))]
    }

    fn load(&mut self, path: &Path) -> Result<(), AgentError> {
        let q_step = Checkpoint::read(path)?.i64s("meta/q_step", 1)?[0];
        self.restore(path, self.name(), None)?;
        self.q_step = q_step as u64;
        Ok(())
    }
}

impl OfflineCritic for SarsaCritic {
    /// A V step while `steps` are not done, then SARSA Q steps.
    fn update(&mut self, data: &Data, state_norm: bool) -> Metrics {
        if self.v.steps() < self.cfg.steps {
            return self.v.update(data, state_norm);
        }
        let idx = self.v.rng.indices(data.len(), self.cfg.batch_size, true, data.obs.device());
        let s = data.norm_obs(&data.obs.index_select(0, &idx), state_norm);
        let sa = state_action(&s, &data.action.index_select(0, &idx));
        let y = self.td_target(data, &idx, state_norm);
        let tau = if (self.q_step + 1) % self.cfg.target_every == 0 { self.cfg.tau } else { 0.0 };
        let parts = CriticParts::of(&mut self.q, &self.target);
        // L_Q = E[(Q(s, a) − y)²] (one member), then the Polyak step when due.
        let (q_loss, q_mean) = q_step(parts, &sa, &y, tau, &mut self.v.rng);
        self.q_step += 1;
        vec![("q_loss", q_loss.double_value(&[])), ("q_mean", q_mean.double_value(&[]))]
    }

    fn steps(&self) -> u64 {
        self.v.steps() + self.q_step
    }

    fn total_steps(&self) -> u64 {
        self.cfg.steps + self.cfg.q_steps
    }

    fn q(&self, s: &Tensor, a: &Tensor) -> Tensor {
        min_q_of(&self.q.net, s, a)
    }

    fn value(&self, s: &Tensor) -> Tensor {
        tch::no_grad(|| self.v.value(s))
    }

    fn value_params(&self) -> &ParamSet {
        self.v.params()
    }

    fn advantage_weight(&self) -> Option<f64> {
        Some(self.cfg.omega)
    }
}

/// Uni-O4's weighting of a standardized advantage on the non-IQL path:
/// `Â · (ω if Â > 0 else 1 − ω)`.
pub fn weighted_advantage(adv: &Tensor, omega: f64) -> Tensor {
    let w = adv.gt(0.0).to_kind(adv.kind()) * (2.0 * omega - 1.0) + (1.0 - omega);
    adv * w
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::MlpConfig;

    fn small(steps: u64, q_steps: u64) -> CriticConfig {
        let net = MlpConfig { hidden: vec![32, 32], ..MlpConfig::default() };
        CriticConfig {
            q: net.clone(),
            value: net,
            lr: 3e-3,
            batch_size: 16,
            steps,
            q_steps,
            gamma: 0.5,
            target_every: 1,
            tau: 0.5,
            ..CriticConfig::default()
        }
    }

    /// One episode of 8 rows, s_t = t / 8, a_t = (−1)^t / 2, r_t = 1 + t / 8, then a second
    /// episode of 8 rows with the same states: the rows' returns and Q^μ are known by hand.
    fn chain() -> Data {
        let n = 16;
        let obs: Vec<f32> = (0..n).map(|i| (i % 8) as f32 / 8.0).collect();
        let next: Vec<f32> = (0..n).map(|i| ((i % 8) + 1) as f32 / 8.0).collect();
        let act: Vec<f32> = (0..n).map(|i| if i % 2 == 0 { 0.5 } else { -0.5 }).collect();
        let rew: Vec<f32> = (0..n).map(|i| 1.0 + (i % 8) as f32 / 8.0).collect();
        let end: Vec<f32> = (0..n).map(|i| if i % 8 == 7 { 1.0 } else { 0.0 }).collect();
        Data::new(&obs, &act, &rew, &next, &vec![0.0; n], &end, 1, 1, Device::Cpu).unwrap()
    }

    /// The SARSA target uses the next row's action and stops at the episode end (code mask).
    #[test]
    fn sarsa_target_uses_the_datasets_next_action_and_the_mask() {
        let d = chain();
        assert_eq!(
            Vec::<f32>::try_from(&d.next_action.squeeze_dim(-1)).unwrap()[..9],
            [-0.5, 0.5, -0.5, 0.5, -0.5, 0.5, -0.5, -0.5, -0.5]
        );
        let c = SarsaCritic::new(small(1, 1), &d, Device::Cpu, 0).unwrap();
        let idx = Tensor::from_slice(&[0i64, 6, 7]);
        let y = Vec::<f32>::try_from(&c.td_target(&d, &idx, false)).unwrap();
        let q_bar = |s: f32, a: f32| {
            target_min_q(&c.target.net, &Tensor::from_slice(&[s, a]).view([1, 2])).double_value(&[0]) as f32
        };
        assert!((y[0] - (1.0 + 0.5 * q_bar(0.125, -0.5))).abs() < 1e-6);
        assert!((y[1] - (1.75 + 0.5 * q_bar(0.875, -0.5))).abs() < 1e-6);
        assert_eq!(y[2], 1.875, "no bootstrap at the episode end");
    }

    /// V then Q: after the V phase V(s_t) ≈ G_t, after the Q phase Q(s_t, a_t) ≈ G_t (the data
    /// is deterministic, so Q^μ = V^μ = G on it); a save / load mid-Q continues bit for bit.
    #[test]
    fn fits_the_returns_then_sarsa_q_and_resumes_exactly() {
        let d = chain();
        let g: Vec<f32> = {
            let (r, e) = (Vec::<f32>::try_from(&d.reward).unwrap(), Vec::<f32>::try_from(&d.episode_end).unwrap());
            super::super::value_refit::mc_returns(&r, &e, 1.0, 0.5).unwrap()
        };
        assert!((g[7] - 1.875).abs() < 1e-6 && (g[6] - (1.75 + 0.5 * 1.875)).abs() < 1e-6);
        let mut c = SarsaCritic::new(small(1500, 3000), &d, Device::Cpu, 1).unwrap();
        while c.steps() < 1500 {
            c.update(&d, false);
        }
        let v = Vec::<f32>::try_from(&c.value(&d.obs)).unwrap();
        let err = |x: &[f32]| x.iter().zip(&g).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        assert!(err(&v) < 0.1, "V {v:?} vs G {g:?}");
        for _ in 0..1000 {
            c.update(&d, false);
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sarsa.ot");
        c.save(&path).unwrap();
        let mut other = SarsaCritic::new(small(1500, 3000), &d, Device::Cpu, 42).unwrap();
        other.load(&path).unwrap();
        while c.steps() < c.total_steps() {
            let (m1, m2) = (c.update(&d, false), other.update(&d, false));
            assert_eq!(m1, m2);
        }
        let q = Vec::<f32>::try_from(&c.q(&d.obs, &d.action)).unwrap();
        assert!(err(&q) < 0.15, "Q {q:?} vs G {g:?}");
        assert!(c.q(&d.obs, &d.action).equal(&other.q(&d.obs, &d.action)));
    }

    #[test]
    fn advantage_weight_is_omega_above_zero() {
        let a = Tensor::from_slice(&[2.0f32, -1.0, 0.0]);
        let w = Vec::<f32>::try_from(&weighted_advantage(&a, 0.7)).unwrap();
        for (x, want) in w.iter().zip([1.4f32, -0.3, 0.0]) {
            assert!((x - want).abs() < 1e-6, "{w:?}");
        }
    }
}
