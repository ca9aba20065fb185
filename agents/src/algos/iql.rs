//! Implicit Q-Learning (Kostrikov, Nair, Levine, "Offline Reinforcement Learning with Implicit
//! Q-Learning", ICLR 2022, arXiv 2110.06169), for offline training and online fine-tuning.
//!
//! Facts: ../shared/reference/algorithms.md §6.1; reference code consulted for facts:
//! ikostrikov/implicit_q_learning (`learner.py`, `critic.py`, `actor.py`), CORL `iql.py`.
//! One `update(batch)` does, in the reference order (V, actor, Q, target):
//! 1. `L_V = E[ |τ − 1(u < 0)| · u² ]`, `u = min_j Q̄_j(s, a) − V(s)` (expectile regression);
//! 2. `L_π = −E[ min(exp(β (min_j Q̄_j(s, a) − V(s))), 100) · log π(a|s) ]` (advantage-weighted
//!    regression, with the freshly updated V), actor LR cosine-decayed over
//!    `actor_lr_decay_steps` (offline; 0 = constant, as in fine-tuning);
//! 3. `L_Q = E[ Σ_j (r + γ (1 − d) V(s') − Q_j(s, a))² ]`;
//! 4. Polyak `θ̄ ← (1 − τ_tgt) θ̄ + τ_tgt θ`.
//!
//! The policy is a Gaussian with a tanh'd mean and a state-independent log σ ∈ [−5, 2]
//! ([`crate::nn::GaussianActor`]); the deterministic action is the mean. Reward scaling and
//! dataset-action clipping are data preprocessing, done by the runner, not here.

use crate::checkpoint::{progress_in_fields, Part, Stateful};
use crate::nn::critic::{critic_and_target, critic_values, q_step, state_action, target_min_q, CriticParts};
use crate::nn::mlp_pass::forward_no_grad;
use crate::nn::{value, EnsembleMlp, Frozen, GaussianActor, GaussianConfig, Mlp, MlpConfig, PolicyGraph, Trained};
use crate::rng::AgentRng;
use crate::{Agent, AgentError, DeterministicPolicy, Metrics};
use o2o_datasets::TransitionBatch;
use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

/// IQL hyperparameters; defaults are the MuJoCo locomotion values (algorithms.md §6.1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IqlConfig {
    /// Policy network (Gaussian, tanh'd mean); Kitchen/Adroit use `dropout = 0.1`.
    pub actor: GaussianConfig,
    /// Q network (each of the twin critics).
    pub critic: MlpConfig,
    /// V network.
    pub value: MlpConfig,
    /// Number of Q networks (2 = twin Q).
    pub num_critics: i64,
    /// Expectile τ (0.7 MuJoCo and Kitchen/Adroit, 0.9 AntMaze).
    pub expectile: f64,
    /// Inverse temperature β (3 MuJoCo, 10 AntMaze, 0.5 Kitchen/Adroit).
    pub beta: f64,
    /// Clip of the advantage weight exp(β A).
    pub max_weight: f64,
    /// Discount γ.
    pub gamma: f64,
    /// Polyak rate τ_tgt.
    pub tau: f64,
    /// Actor learning rate (initial, when decayed).
    pub actor_lr: f64,
    /// Q learning rate.
    pub critic_lr: f64,
    /// V learning rate.
    pub value_lr: f64,
    /// Cosine-decay the actor LR to 0 over this many updates (the offline run length, 1e6);
    /// 0 keeps it constant (fine-tuning).
    pub actor_lr_decay_steps: i64,
}

impl Default for IqlConfig {
    fn default() -> Self {
        Self {
            actor: GaussianConfig::default(),
            critic: MlpConfig::default(),
            value: MlpConfig::default(),
            num_critics: 2,
            expectile: 0.7,
            beta: 3.0,
            max_weight: 100.0,
            gamma: 0.99,
            tau: 0.005,
            actor_lr: 3e-4,
            critic_lr: 3e-4,
            value_lr: 3e-4,
            actor_lr_decay_steps: 1_000_000,
        }
    }
}

impl IqlConfig {
    /// Reject settings that cannot work, naming the field.
    pub fn validate(&self) -> Result<(), AgentError> {
        let bad = |m: String| Err(AgentError::Config(m));
        if !(0.0 < self.expectile && self.expectile < 1.0) {
            return bad(format!("iql.expectile must be in (0, 1), found {}", self.expectile));
        }
        if self.num_critics < 1 {
            return bad(format!("iql.num_critics must be ≥ 1, found {}", self.num_critics));
        }
        if self.actor_lr_decay_steps < 0 {
            return bad(format!("iql.actor_lr_decay_steps must be ≥ 0, found {}", self.actor_lr_decay_steps));
        }
        if !(0.0..=1.0).contains(&self.tau) || !(0.0..=1.0).contains(&self.gamma) {
            return bad(format!("iql.tau and iql.gamma must be in [0, 1], found {} and {}", self.tau, self.gamma));
        }
        if !(0.0..1.0).contains(&self.actor.mlp.dropout)
            || !(0.0..1.0).contains(&self.critic.dropout)
            || !(0.0..1.0).contains(&self.value.dropout)
        {
            return bad("iql dropout must be in [0, 1)".into());
        }
        Ok(())
    }

    /// The actor learning rate at actor step `t`: `lr · ½ (1 + cos(π min(t, T) / T))`.
    pub fn actor_lr_at(&self, t: i64) -> f64 {
        if self.actor_lr_decay_steps == 0 {
            return self.actor_lr;
        }
        let frac = t.min(self.actor_lr_decay_steps) as f64 / self.actor_lr_decay_steps as f64;
        self.actor_lr * 0.5 * (1.0 + (std::f64::consts::PI * frac).cos())
    }
}

impl IqlConfig {
    /// The keys of [`Iql`]'s update metrics; it has no diagnostics ([`crate::MetricKeys`]).
    pub fn metric_keys(&self) -> crate::MetricKeys {
        crate::MetricKeys {
            update: ["value_loss", "actor_loss", "critic_loss", "v_mean", "q_mean", "adv_mean", "actor_lr"]
                .into_iter()
                .chain(value::ADVANTAGE_WEIGHT_STATS)
                .collect(),
            diagnose: Vec::new(),
        }
    }
}

/// An IQL agent.
pub struct Iql {
    cfg: IqlConfig,
    actor: Trained<GaussianActor>,
    critic: Trained<EnsembleMlp>,
    target: Frozen<EnsembleMlp>,
    value: Trained<Mlp>,
    act_dim: i64,
    device: Device,
    rng: AgentRng,
    step: i64,
}

impl Iql {
    /// A new agent for `obs_dim` observations and `act_dim` actions in `[-1, 1]`.
    pub fn new(cfg: IqlConfig, obs_dim: i64, act_dim: i64, device: Device, seed: u64) -> Result<Self, AgentError> {
        cfg.validate()?;
        super::prepare("iql", obs_dim, act_dim, device)?;
        let mut rng = AgentRng::new(seed);
        let actor = Trained::new(cfg.actor_lr, |p| {
            GaussianActor::new(p, "actor", obs_dim, act_dim, &cfg.actor, &mut rng, device)
        });
        let (critic, target) =
            critic_and_target(cfg.num_critics, obs_dim + act_dim, &cfg.critic, cfg.critic_lr, &mut rng, device);
        let value = Trained::new(cfg.value_lr, |p| Mlp::new(p, "value", obs_dim, 1, &cfg.value, 1.0, &mut rng, device));
        Ok(Self { cfg, actor, critic, target, value, act_dim, device, rng, step: 0 })
    }

    /// The configuration.
    pub fn config(&self) -> &IqlConfig {
        &self.cfg
    }

    /// The agent's random stream (dropout masks, exploration noise).
    pub fn rng_mut(&mut self) -> &mut AgentRng {
        &mut self.rng
    }

    /// L_V = E[|τ − 1(u < 0)| u²], u = q̄ − V(s): the value step's loss and gradients.
    fn value_step_grads(&mut self, obs: &Tensor, q_target: &Tensor) -> (Tensor, Vec<Tensor>) {
        let v = &self.value;
        value::expectile_step(&v.net, &v.params, obs, q_target, self.cfg.expectile, &mut self.rng)
    }

    /// L_π = −E[w · log π(a|s)] with the advantage weights `w = min(exp(β A), max_weight)`,
    /// A = q̄ − V(s): the actor step's loss and gradients.
    fn actor_step_grads(&mut self, obs: &Tensor, action: &Tensor, adv: &Tensor) -> (Tensor, Vec<Tensor>) {
        let weight = value::advantage_weights(&(adv * self.cfg.beta), self.cfg.max_weight);
        self.actor.net.weighted_nll_step(obs, action, &weight, &self.actor.params, &mut self.rng)
    }

    /// One Q step on L_Q = E[Σ_j (y − Q_j(s, a))²], y = r + γ (1 − d) V(s'), then the target's
    /// Polyak step θ̄ ← (1 − τ) θ̄ + τ θ; returns `(L_Q, mean Q)`.
    fn critic_step(&mut self, b: &TransitionBatch, y: &Tensor) -> (Tensor, Tensor) {
        let critic = CriticParts::of(&mut self.critic, &self.target);
        q_step(critic, &state_action(&b.obs, &b.action), y, self.cfg.tau, &mut self.rng)
    }
}

impl Stateful for Iql {
    fn name(&self) -> &'static str {
        "iql"
    }

    fn parts(&self) -> Vec<Part<'_>> {
        vec![
            Part::trained("actor_opt", &self.actor),
            Part::trained("critic_opt", &self.critic),
            Part::frozen(&self.target),
            Part::trained("value_opt", &self.value),
        ]
    }

    progress_in_fields!();
}

impl Agent for Iql {
    fn gamma(&self) -> Option<f64> {
        Some(self.cfg.gamma)
    }

    fn act(&mut self, obs: &Tensor, deterministic: bool) -> Tensor {
        let (actor, noise) = (&self.actor.net, (!deterministic).then_some((&mut self.rng, self.act_dim)));
        super::act_with(obs, self.device, noise, |obs, eps| match eps {
            Some(eps) => actor.sample(obs, &eps),
            None => actor.mean(obs, None),
        })
    }

    fn deterministic_policy(&self) -> Option<DeterministicPolicy> {
        let actor = self.actor.net.detached();
        Some(Box::new(move |obs| actor.mean(obs, None)))
    }

    fn policy_graph(&self) -> Option<PolicyGraph> {
        Some(self.actor.net.mean_graph())
    }

    fn update(&mut self, batch: &TransitionBatch) -> Metrics {
        let moved = (batch.obs.device() != self.device).then(|| batch.to_device(self.device));
        let b = moved.as_ref().unwrap_or(batch);
        // q̄ = min_j Q̄_j(s, a) from the target critics.
        let q_target = target_min_q(&self.target.net, &state_action(&b.obs, &b.action));
        // 1. value step.
        let (value_loss, grads) = self.value_step_grads(&b.obs, &q_target);
        self.value.apply(&grads);
        // 2. actor step with the updated V: V(s) and V(s') in one pass over both row sets.
        let n = b.obs.size()[0];
        let both = forward_no_grad(&self.value.net, &Tensor::cat(&[&b.obs, &b.next_obs], 0)).squeeze_dim(-1);
        let (v, v_next) = (both.narrow(0, 0, n), both.narrow(0, n, n));
        let adv = &q_target - &v;
        let (actor_loss, grads) = self.actor_step_grads(&b.obs, &b.action, &adv);
        self.actor.opt.lr = self.cfg.actor_lr_at(self.actor.opt.steps());
        let actor_lr = self.actor.opt.lr;
        self.actor.apply(&grads);
        // 3. Q step towards r + γ (1 − d) V(s'), and 4. the target's Polyak step.
        let y = &b.reward + (1.0 - &b.terminal) * self.cfg.gamma * v_next;
        let (critic_loss, q_mean) = self.critic_step(b, &y);
        self.step += 1;
        let weights = value::advantage_weights(&(&adv * self.cfg.beta), self.cfg.max_weight);
        let mut out = vec![
            ("value_loss", value_loss.double_value(&[])),
            ("actor_loss", actor_loss.double_value(&[])),
            ("critic_loss", critic_loss.double_value(&[])),
            ("v_mean", v.mean(Kind::Float).double_value(&[])),
            ("q_mean", q_mean.double_value(&[])),
            ("adv_mean", adv.mean(Kind::Float).double_value(&[])),
            ("actor_lr", actor_lr),
        ];
        out.extend(value::advantage_weight_stats(&weights, self.cfg.max_weight));
        out
    }

    /// The twin Q critics (not the target, not V).
    fn critic_values(&self, obs: &Tensor, action: &Tensor) -> Option<Tensor> {
        Some(critic_values(&self.critic.net, obs, action, self.device))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cosine_schedule_ends_at_zero() {
        let c = IqlConfig { actor_lr_decay_steps: 100, ..IqlConfig::default() };
        assert_eq!(c.actor_lr_at(0), 3e-4);
        assert!((c.actor_lr_at(50) - 1.5e-4).abs() < 1e-12);
        assert!(c.actor_lr_at(100).abs() < 1e-12 && c.actor_lr_at(500).abs() < 1e-12);
        assert_eq!(IqlConfig { actor_lr_decay_steps: 0, ..c }.actor_lr_at(77), 3e-4);
    }

    /// Offline on data from a fixed linear policy a = tanh(W s): advantage-weighted regression
    /// with a flat critic is behaviour cloning, so the deterministic action must approach it.
    #[test]
    fn actor_clones_the_data_policy() {
        let small = MlpConfig { hidden: vec![64, 64], ..MlpConfig::default() };
        let cfg = IqlConfig {
            actor_lr_decay_steps: 0,
            actor_lr: 1e-3,
            actor: GaussianConfig { mlp: small.clone(), ..GaussianConfig::default() },
            critic: small.clone(),
            value: small,
            ..IqlConfig::default()
        };
        let mut agent = Iql::new(cfg, 3, 2, Device::Cpu, 4).unwrap();
        let mut rng = AgentRng::new(7);
        let w = Tensor::from_slice(&[0.8f32, -0.5, 0.3, 0.1, 0.9, -0.7]).view([3, 2]);
        let make = |rng: &mut AgentRng| {
            let obs = rng.normal(&[128, 3], Device::Cpu);
            TransitionBatch {
                action: obs.matmul(&w).tanh(),
                reward: Tensor::zeros([128], (Kind::Float, Device::Cpu)),
                next_obs: rng.normal(&[128, 3], Device::Cpu),
                terminal: Tensor::zeros([128], (Kind::Float, Device::Cpu)),
                obs,
                mc_return: None,
                is_offline: None,
            }
        };
        for _ in 0..400 {
            let m = agent.update(&make(&mut rng));
            assert!(m.iter().all(|(_, v)| v.is_finite()));
        }
        let test = make(&mut rng);
        let err = (agent.act(&test.obs, true) - &test.action).abs().mean(Kind::Float).double_value(&[]);
        assert!(err < 0.08, "mean abs action error {err}");
    }
}
