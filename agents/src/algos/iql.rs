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

use crate::checkpoint::{load_agent, save_agent};
use crate::nn::critic::{critic_and_target, critic_values, state_action, CriticPass};
use crate::nn::mlp_pass::{forward_no_grad, MlpPass};
use crate::nn::{Adam, EnsembleMlp, GaussianActor, GaussianConfig, Mlp, MlpConfig, ParamSet};
use crate::rng::AgentRng;
use crate::{Agent, AgentError, DeterministicPolicy, Metrics};
use o2o_datasets::TransitionBatch;
use serde::{Deserialize, Serialize};
use std::path::Path;
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

/// Networks and optimizers.
struct Modules {
    actor: GaussianActor,
    actor_params: ParamSet,
    actor_opt: Adam,
    critic: EnsembleMlp,
    critic_params: ParamSet,
    critic_opt: Adam,
    target: EnsembleMlp,
    target_params: ParamSet,
    value: Mlp,
    value_params: ParamSet,
    value_opt: Adam,
}

/// An IQL agent.
pub struct Iql {
    cfg: IqlConfig,
    m: Modules,
    act_dim: i64,
    device: Device,
    rng: AgentRng,
    step: i64,
}

impl Iql {
    /// A new agent for `obs_dim` observations and `act_dim` actions in `[-1, 1]`.
    pub fn new(cfg: IqlConfig, obs_dim: i64, act_dim: i64, device: Device, seed: u64) -> Result<Self, AgentError> {
        cfg.validate()?;
        if obs_dim < 1 || act_dim < 1 {
            return Err(AgentError::Config(format!(
                "iql needs obs_dim and act_dim ≥ 1, found {obs_dim} and {act_dim}"
            )));
        }
        if device == Device::Cpu {
            crate::alloc::tune_cpu_allocator();
        }
        let mut rng = AgentRng::new(seed);
        let mut actor_params = ParamSet::new();
        let actor = GaussianActor::new(&mut actor_params, "actor", obs_dim, act_dim, &cfg.actor, &mut rng, device);
        let (critic, critic_params, target, target_params) =
            critic_and_target(cfg.num_critics, obs_dim + act_dim, &cfg.critic, &mut rng, device);
        let mut value_params = ParamSet::new();
        let value = Mlp::new(&mut value_params, "value", obs_dim, 1, &cfg.value, 1.0, &mut rng, device);
        let m = Modules {
            actor_opt: Adam::new(&actor_params, cfg.actor_lr),
            critic_opt: Adam::new(&critic_params, cfg.critic_lr),
            value_opt: Adam::new(&value_params, cfg.value_lr),
            actor,
            actor_params,
            critic,
            critic_params,
            target,
            target_params,
            value,
            value_params,
        };
        Ok(Self { cfg, m, act_dim, device, rng, step: 0 })
    }

    /// The configuration.
    pub fn config(&self) -> &IqlConfig {
        &self.cfg
    }

    /// Updates done so far.
    pub fn steps(&self) -> i64 {
        self.step
    }

    /// The agent's random stream (dropout masks, exploration noise).
    pub fn rng_mut(&mut self) -> &mut AgentRng {
        &mut self.rng
    }

    /// Every live tensor of the agent's state, by checkpoint name.
    pub fn named_tensors(&self) -> Vec<(String, Tensor)> {
        let m = &self.m;
        let mut v: Vec<(String, Tensor)> = Vec::new();
        for set in [&m.actor_params, &m.critic_params, &m.target_params, &m.value_params] {
            v.extend(set.named().iter().map(|(n, t)| (n.clone(), t.shallow_clone())));
        }
        v.extend(m.actor_opt.state("actor_opt", &m.actor_params));
        v.extend(m.critic_opt.state("critic_opt", &m.critic_params));
        v.extend(m.value_opt.state("value_opt", &m.value_params));
        v
    }

    fn load_impl(&mut self, path: &Path, parts: Option<&[&str]>) -> Result<(), AgentError> {
        let live = self.named_tensors();
        let m = &mut self.m;
        let mut opts: [(&str, &mut Adam); 3] =
            [("actor_opt", &mut m.actor_opt), ("critic_opt", &mut m.critic_opt), ("value_opt", &mut m.value_opt)];
        if let Some(meta) = load_agent(path, "iql", &live, &mut opts, parts)? {
            self.step = meta.step;
            self.rng = meta.rng;
        }
        Ok(())
    }

    /// L_V = E[|τ − 1(u < 0)| u²], u = q̄ − V(s); with V's pass (the taped one on the CPU,
    /// [`MlpPass`]) for its step.
    fn value_loss(&mut self, obs: &Tensor, q_target: &Tensor) -> (Tensor, MlpPass) {
        let pass = MlpPass::new(&self.m.value, obs, Some(&mut self.rng));
        let v = pass.out.squeeze_dim(-1);
        (expectile_loss(&(q_target - v), self.cfg.expectile), pass)
    }

    /// `(L_V, ∂L_V/∂θ_V)`: on the taped pass the expectile loss's gradient in `V(s)` in closed
    /// form, `∂L_V/∂V(s_b) = −2 |τ − 1(u_b < 0)| u_b / B`, carried through V by the tape;
    /// elsewhere autograd on [`Iql::value_loss`].
    fn value_step_grads(&mut self, obs: &Tensor, q_target: &Tensor) -> (Tensor, Vec<Tensor>) {
        let plain =
            q_target.device() == Device::Cpu && q_target.kind() == Kind::Float && MlpPass::applies(&self.m.value, obs);
        if !plain {
            let (loss, pass) = self.value_loss(obs, q_target);
            let grads = pass.grads(&loss, &self.m.value_params);
            return (loss, grads);
        }
        let pass = MlpPass::new(&self.m.value, obs, None);
        let v = Vec::<f32>::try_from(pass.out.detach().contiguous().view([-1])).expect("V(s) as floats");
        let q = Vec::<f32>::try_from(q_target.detach().contiguous().view([-1])).expect("q̄ as floats");
        let (rows, tau) = (v.len(), self.cfg.expectile as f32);
        let (mut grad, mut loss) = (vec![0f32; rows], 0f64);
        for ((g, v), q) in grad.iter_mut().zip(&v).zip(&q) {
            let u = q - v;
            let w = if u < 0.0 { 1.0 - tau } else { tau };
            loss += (w * u * u) as f64;
            *g = -2.0 * w * u / rows as f32;
        }
        let grad = Tensor::from_slice(&grad).view([rows as i64, 1]);
        (Tensor::from((loss / rows as f64) as f32), pass.grads_from_out(&grad, &self.m.value_params))
    }

    /// `(L_π, ∂L_π/∂θ_π)` of [`Iql::actor_loss`]: in closed form on the taped pass
    /// ([`GaussianActor::weighted_nll_step`]), else by autograd.
    fn actor_step_grads(&mut self, obs: &Tensor, action: &Tensor, adv: &Tensor) -> (Tensor, Vec<Tensor>) {
        let weight = (adv * self.cfg.beta).exp().clamp_max(self.cfg.max_weight);
        if let Some(done) = self.m.actor.weighted_nll_step(obs, action, &weight, &self.m.actor_params) {
            return done;
        }
        let (loss, pass) = self.actor_loss(obs, action, &weight);
        let grads = pass.grads(&loss, &self.m.actor_params);
        (loss, grads)
    }

    /// L_π = −E[w · log π(a|s)] for the advantage weights `w = min(exp(β (q̄ − V(s))),
    /// max_weight)`; with the actor's pass.
    fn actor_loss(&mut self, obs: &Tensor, action: &Tensor, weight: &Tensor) -> (Tensor, MlpPass) {
        let (logp, pass) = self.m.actor.log_prob_pass(obs, action, Some(&mut self.rng));
        (-(weight * logp).mean(Kind::Float), pass)
    }

    /// One Q step on L_Q = E[Σ_j (y − Q_j(s, a))²], y = r + γ (1 − d) V(s'), then the target's
    /// Polyak step θ̄ ← (1 − τ) θ̄ + τ θ ([`CriticPass`]); returns `(L_Q, mean Q)`.
    fn critic_step(&mut self, b: &TransitionBatch, y: &Tensor) -> (Tensor, Tensor) {
        let m = &mut self.m;
        let critic = CriticParts {
            critic: &m.critic,
            opt: &mut m.critic_opt,
            params: &m.critic_params,
            target: &m.target_params,
        };
        q_step(critic, &state_action(&b.obs, &b.action), y, self.cfg.tau, &mut self.rng)
    }
}

/// The expectile loss `E[|τ − 1(u < 0)| u²]` of residuals `u` `[B]`.
pub(crate) fn expectile_loss(u: &Tensor, expectile: f64) -> Tensor {
    let weight = u.lt(0.0).to_kind(Kind::Float) * (1.0 - 2.0 * expectile) + expectile;
    (weight * u.square()).mean(Kind::Float)
}

/// `q̄ = min_j Q̄_j(s, a)` of the target critics at `sa = [s, a]`, without gradients.
pub(crate) fn target_min_q(target: &EnsembleMlp, sa: &Tensor) -> Tensor {
    match target.tape_applies(sa) {
        true => target.forward_fused(sa, None).amin(0, false),
        false => tch::no_grad(|| target.forward(sa, None).squeeze_dim(-1).amin(0, false)),
    }
}

/// A critic ensemble, its optimizer and its Polyak target, borrowed for one step.
pub(crate) struct CriticParts<'a> {
    pub critic: &'a EnsembleMlp,
    pub opt: &'a mut Adam,
    pub params: &'a ParamSet,
    pub target: &'a ParamSet,
}

/// IQL's Q step on `sa = [s, a]` towards `y` `[B]`: `L_Q = E[Σ_j (y − Q_j(s, a))²]`, then
/// `θ̄ ← (1 − τ) θ̄ + τ θ`; returns `(L_Q, mean Q)`, detached.
pub(crate) fn q_step(c: CriticParts<'_>, sa: &Tensor, y: &Tensor, tau: f64, rng: &mut AgentRng) -> (Tensor, Tensor) {
    let pass = CriticPass::new(c.critic, sa, rng);
    if pass.is_taped() {
        // ∂L_Q/∂Q_j(s_b, a_b) = 2 (Q_j − y_b) / B, formed directly.
        let diff = tch::no_grad(|| pass.q.detach() - y.unsqueeze(0));
        let loss = diff.square().sum_dim_intlist(0, false, Kind::Float).mean(Kind::Float);
        let grad_q = &diff * (2.0 / diff.size()[1] as f64);
        let q = pass.step_from_grad(c.critic, c.opt, c.params, c.target, tau, &grad_q, None);
        return (loss, q.mean(Kind::Float));
    }
    let loss = (&pass.q - y.unsqueeze(0)).square().sum_dim_intlist(0, false, Kind::Float).mean(Kind::Float);
    let q = pass.step(c.critic, c.opt, c.params, c.target, tau, &loss, None);
    (loss.detach(), q.mean(Kind::Float))
}

impl Agent for Iql {
    fn name(&self) -> &'static str {
        "iql"
    }

    fn gamma(&self) -> Option<f64> {
        Some(self.cfg.gamma)
    }

    fn act(&mut self, obs: &Tensor, deterministic: bool) -> Tensor {
        let out_device = obs.device();
        let obs = obs.to_device(self.device).to_kind(Kind::Float);
        tch::no_grad(|| {
            let a = if deterministic {
                self.m.actor.mean(&obs, None)
            } else {
                let eps = self.rng.normal(&[obs.size()[0], self.act_dim], self.device);
                self.m.actor.sample(&obs, &eps)
            };
            a.to_device(out_device)
        })
    }

    fn deterministic_policy(&self) -> Option<DeterministicPolicy> {
        let actor = self.m.actor.detached();
        Some(Box::new(move |obs| actor.mean(obs, None)))
    }

    fn update(&mut self, batch: &TransitionBatch) -> Metrics {
        let moved;
        let b = if batch.obs.device() == self.device {
            batch
        } else {
            moved = batch.to_device(self.device);
            &moved
        };
        // q̄ = min_j Q̄_j(s, a) from the target critics.
        let q_target = target_min_q(&self.m.target, &state_action(&b.obs, &b.action));
        // 1. value step.
        let (value_loss, grads) = self.value_step_grads(&b.obs, &q_target);
        self.m.value_opt.apply(&self.m.value_params, &grads);
        // 2. actor step with the updated V: V(s) and V(s') in one pass over both row sets.
        let n = b.obs.size()[0];
        let both = forward_no_grad(&self.m.value, &Tensor::cat(&[&b.obs, &b.next_obs], 0)).squeeze_dim(-1);
        let (v, v_next) = (both.narrow(0, 0, n), both.narrow(0, n, n));
        let adv = &q_target - &v;
        let (actor_loss, grads) = self.actor_step_grads(&b.obs, &b.action, &adv);
        self.m.actor_opt.lr = self.cfg.actor_lr_at(self.m.actor_opt.steps());
        let actor_lr = self.m.actor_opt.lr;
        self.m.actor_opt.apply(&self.m.actor_params, &grads);
        // 3. Q step towards r + γ (1 − d) V(s'), and 4. the target's Polyak step.
        let y = &b.reward + (1.0 - &b.terminal) * self.cfg.gamma * v_next;
        let (critic_loss, q_mean) = self.critic_step(b, &y);
        self.step += 1;
        vec![
            ("value_loss", value_loss.double_value(&[])),
            ("actor_loss", actor_loss.double_value(&[])),
            ("critic_loss", critic_loss.double_value(&[])),
            ("v_mean", v.mean(Kind::Float).double_value(&[])),
            ("q_mean", q_mean.double_value(&[])),
            ("adv_mean", adv.mean(Kind::Float).double_value(&[])),
            ("actor_lr", actor_lr),
        ]
    }

    fn save(&self, path: &Path) -> Result<(), AgentError> {
        let m = &self.m;
        save_agent(
            path,
            "iql",
            &self.named_tensors(),
            &[("actor_opt", &m.actor_opt), ("critic_opt", &m.critic_opt), ("value_opt", &m.value_opt)],
            self.step,
            &self.rng,
        )
    }

    fn load(&mut self, path: &Path) -> Result<(), AgentError> {
        self.load_impl(path, None)
    }

    fn load_parts(&mut self, path: &Path, parts: &[&str]) -> Result<(), AgentError> {
        self.load_impl(path, Some(parts))
    }

    /// The twin Q critics (not the target, not V).
    fn critic_values(&self, obs: &Tensor, action: &Tensor) -> Option<Tensor> {
        Some(critic_values(&self.m.critic, obs, action, self.device))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expectile_loss_weights_signs() {
        let mut agent = Iql::new(IqlConfig { expectile: 0.9, ..IqlConfig::default() }, 2, 1, Device::Cpu, 0).unwrap();
        let obs = Tensor::zeros([2, 2], (Kind::Float, Device::Cpu));
        let v0 = agent.m.value.forward(&obs, None).squeeze_dim(-1).detach();
        // u = +1 weighs τ, u = −1 weighs 1 − τ: mean(0.9·1, 0.1·1) = 0.5.
        let q = &v0 + Tensor::from_slice(&[1.0f32, -1.0]);
        let l = agent.value_loss(&obs, &q).0.double_value(&[]);
        assert!((l - 0.5).abs() < 1e-6, "{l}");
    }

    /// The value step's closed-form gradient equals autograd's on the expectile loss, and the
    /// Q step's directly formed gradient moves the critic as autograd's does.
    #[test]
    fn closed_form_value_and_q_steps_match_autograd() {
        let cfg = IqlConfig { expectile: 0.8, ..IqlConfig::default() };
        let mut agent = Iql::new(cfg.clone(), 4, 2, Device::Cpu, 1).unwrap();
        let mut rng = AgentRng::new(5);
        let obs = rng.normal(&[64, 4], Device::Cpu);
        let q = rng.normal(&[64], Device::Cpu);
        let (loss, grads) = agent.value_step_grads(&obs, &q);
        let (want_loss, pass) = agent.value_loss(&obs, &q);
        let want = pass.grads(&want_loss, &agent.m.value_params);
        assert!((loss.double_value(&[]) - want_loss.double_value(&[])).abs() < 1e-5);
        for (g, w) in grads.iter().zip(&want) {
            assert!((g - w).abs().max().double_value(&[]) < 1e-5 * (1.0 + w.abs().max().double_value(&[])));
        }
        // Q: two copies of one agent, one step each, the closed form against autograd.
        let (sa, y) = (rng.normal(&[64, 6], Device::Cpu), rng.normal(&[64], Device::Cpu));
        let mut other = Iql::new(cfg, 4, 2, Device::Cpu, 1).unwrap();
        let m = &mut agent.m;
        let (l1, _) = q_step(
            CriticParts {
                critic: &m.critic,
                opt: &mut m.critic_opt,
                params: &m.critic_params,
                target: &m.target_params,
            },
            &sa,
            &y,
            0.005,
            &mut AgentRng::new(0),
        );
        let o = &mut other.m;
        let pass = CriticPass::new(&o.critic, &sa, &mut AgentRng::new(0));
        let l2 = (&pass.q - y.unsqueeze(0)).square().sum_dim_intlist(0, false, Kind::Float).mean(Kind::Float);
        let _ = pass.step(&o.critic, &mut o.critic_opt, &o.critic_params, &o.target_params, 0.005, &l2, None);
        assert!((l1.double_value(&[]) - l2.double_value(&[])).abs() < 1e-5);
        for ((name, a), (_, b)) in agent.m.critic_params.named().iter().zip(other.m.critic_params.named()) {
            assert!((a - b).abs().max().double_value(&[]) < 1e-6, "{name}");
        }
    }

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
