//! TD3+BC (Fujimoto, Gu, "A Minimalist Approach to Offline Reinforcement Learning", NeurIPS
//! 2021, arXiv 2106.06860): TD3 with a behaviour-cloning term in the actor loss and normalized
//! states; one of the offline baselines ImagineBench compares.
//!
//! Reference code consulted for facts: sfujim/TD3_BC (`TD3_BC.py`, `main.py`). One
//! `update(batch)` (s̃ = (s − μ) / (σ + 10⁻³) with the offline data's statistics,
//! [`crate::nn::StateNorm`]):
//! 1. target action ã' = clip(π̄(s̃') + clip(ε, −c, c), −1, 1), ε ~ N(0, σ_π²) (σ_π 0.2, c 0.5);
//! 2. `L_Q = E[ Σ_j (Q_j(s̃, a) − y)² ]`, y = r + γ (1 − d) min_j Q̄_j(s̃', ã');
//! 3. every `policy_delay` (2) updates: `L_π = −λ E[Q_1(s̃, π(s̃))] + E[(π(s̃) − a)²]`,
//!    λ = α / E|Q_1(s̃, π(s̃))| (detached, α = 2.5), then the Polyak steps
//!    θ̄ ← (1 − τ) θ̄ + τ θ of both critics and of the actor (τ 0.005).
//!
//! Deviations: the behaviour term is the mean over rows and action numbers as in the reference
//! (`F.mse_loss`); stochastic actions (online use) add N(0, `explore_std`²), as TD3's
//! exploration.

use crate::checkpoint::{progress_in_fields, Part, Stateful};
use crate::nn::critic::{critic_and_target, critic_values, state_action, CriticPass};
use crate::nn::state_norm;
use crate::nn::{polyak_update, EnsembleMlp, Frozen, Mlp, MlpConfig, ParamSet, PolicyGraph, StateNorm, Trained};
use crate::rng::AgentRng;
use crate::{Agent, AgentError, DeterministicPolicy, Metrics};
use o2o_datasets::TransitionBatch;
use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

/// TD3+BC hyperparameters; defaults are the paper's (its Table 3).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Td3BcConfig {
    /// Policy network (tanh output).
    pub actor: MlpConfig,
    /// Each critic.
    pub critic: MlpConfig,
    /// Number of critics (TD3: 2).
    pub num_critics: i64,
    /// α, the weight of the Q term against the BC term.
    pub alpha: f64,
    /// Discount γ.
    pub gamma: f64,
    /// Polyak rate τ.
    pub tau: f64,
    /// Actor learning rate.
    pub actor_lr: f64,
    /// Critic learning rate.
    pub critic_lr: f64,
    /// Target policy smoothing noise σ_π.
    pub policy_noise: f64,
    /// Clip c of that noise.
    pub noise_clip: f64,
    /// Actor and target updates every this many critic updates.
    pub policy_delay: i64,
    /// Normalize states with the offline data's statistics.
    pub normalize_states: bool,
    /// σ of the Gaussian noise of a stochastic action.
    pub explore_std: f64,
}

impl Default for Td3BcConfig {
    fn default() -> Self {
        Self {
            actor: MlpConfig::default(),
            critic: MlpConfig::default(),
            num_critics: 2,
            alpha: 2.5,
            gamma: 0.99,
            tau: 0.005,
            actor_lr: 3e-4,
            critic_lr: 3e-4,
            policy_noise: 0.2,
            noise_clip: 0.5,
            policy_delay: 2,
            normalize_states: true,
            explore_std: 0.1,
        }
    }
}

impl Td3BcConfig {
    /// Reject settings that cannot work, naming the field.
    pub fn validate(&self) -> Result<(), AgentError> {
        let bad = |m: String| Err(AgentError::Config(m));
        if self.num_critics < 1 || self.policy_delay < 1 {
            return bad(format!(
                "td3bc.num_critics and td3bc.policy_delay must be ≥ 1, found {} and {}",
                self.num_critics, self.policy_delay
            ));
        }
        if !(0.0..=1.0).contains(&self.tau) || !(0.0..=1.0).contains(&self.gamma) {
            return bad(format!("td3bc.tau and td3bc.gamma must be in [0, 1], found {} and {}", self.tau, self.gamma));
        }
        if self.alpha < 0.0 || self.policy_noise < 0.0 || self.noise_clip < 0.0 || self.explore_std < 0.0 {
            return bad(format!(
                "td3bc.alpha, policy_noise, noise_clip and explore_std must be ≥ 0, found {}, {}, {}, {}",
                self.alpha, self.policy_noise, self.noise_clip, self.explore_std
            ));
        }
        Ok(())
    }
}

impl Td3BcConfig {
    /// The keys of [`Td3Bc`]'s update metrics: the critic's on every step, the actor's
    /// (`actor_loss`, λ and `bc_loss`) on the delayed steps only; it has no diagnostics
    /// ([`crate::MetricKeys`]).
    pub fn metric_keys(&self) -> crate::MetricKeys {
        let update = vec!["critic_loss", "q_mean", "actor_loss", "lambda", "bc_loss"];
        crate::MetricKeys { update, diagnose: Vec::new() }
    }
}

/// A TD3+BC agent.
pub struct Td3Bc {
    cfg: Td3BcConfig,
    actor: Trained<Mlp>,
    actor_target: Frozen<Mlp>,
    critic: Trained<EnsembleMlp>,
    target: Frozen<EnsembleMlp>,
    norm: Frozen<StateNorm>,
    act_dim: i64,
    device: Device,
    rng: AgentRng,
    step: i64,
}

impl Td3Bc {
    /// A new agent for `obs_dim` observations and `act_dim` actions in `[-1, 1]`.
    pub fn new(cfg: Td3BcConfig, obs_dim: i64, act_dim: i64, device: Device, seed: u64) -> Result<Self, AgentError> {
        cfg.validate()?;
        super::prepare("td3bc", obs_dim, act_dim, device)?;
        let mut rng = AgentRng::new(seed);
        let policy = |p: &mut ParamSet, name: &str, rng: &mut AgentRng| {
            Mlp::new(p, name, obs_dim, act_dim, &cfg.actor, 1e-2, rng, device)
        };
        let actor = Trained::new(cfg.actor_lr, |p| policy(p, "actor", &mut rng));
        let actor_target = Frozen::copy_of(&actor, |p| policy(p, "actor_target", &mut rng));
        let (critic, target) =
            critic_and_target(cfg.num_critics, obs_dim + act_dim, &cfg.critic, cfg.critic_lr, &mut rng, device);
        let norm = Frozen::new(|p| StateNorm::new(p, obs_dim, device));
        Ok(Self { cfg, actor, actor_target, critic, target, norm, act_dim, device, rng, step: 0 })
    }

    /// s̃, or s when normalization is off.
    fn normalized(&self, obs: &Tensor) -> Tensor {
        if self.cfg.normalize_states {
            self.norm.net.apply(obs)
        } else {
            obs.shallow_clone()
        }
    }

    /// y = r + γ (1 − d) min_j Q̄_j(s̃', clip(π̄(s̃') + clip(ε, −c, c), −1, 1)).
    fn td_target(&mut self, b: &TransitionBatch, next: &Tensor) -> Tensor {
        let eps = (self.rng.normal(&[next.size()[0], self.act_dim], self.device) * self.cfg.policy_noise)
            .clamp(-self.cfg.noise_clip, self.cfg.noise_clip);
        tch::no_grad(|| {
            let a_next = (self.actor_target.net.forward(next, None).tanh() + eps).clamp(-1.0, 1.0);
            let q_next = self.target.net.forward(&state_action(next, &a_next), None).squeeze_dim(-1).amin(0, false);
            &b.reward + (1.0 - &b.terminal) * self.cfg.gamma * q_next
        })
    }

    /// L_π = −λ E[Q_1(s̃, π(s̃))] + E[(π(s̃) − a)²], λ = α / E|Q_1(s̃, π(s̃))| (detached);
    /// returns (loss, λ, the BC term).
    fn actor_loss(&self, obs: &Tensor, action: &Tensor) -> (Tensor, f64, f64) {
        let pi = self.actor.net.forward(obs, None).tanh();
        let q1 = self.critic.net.forward(&state_action(obs, &pi), None).squeeze_dim(-1).get(0);
        let lambda = self.cfg.alpha / q1.abs().mean(Kind::Float).detach().double_value(&[]).max(1e-8);
        let bc = (&pi - action).square().mean(Kind::Float);
        let loss = -q1.mean(Kind::Float) * lambda + &bc;
        (loss, lambda, bc.double_value(&[]))
    }
}

impl Stateful for Td3Bc {
    fn name(&self) -> &'static str {
        "td3bc"
    }

    fn parts(&self) -> Vec<Part<'_>> {
        vec![
            Part::trained("actor_opt", &self.actor),
            Part::frozen(&self.actor_target),
            Part::trained("critic_opt", &self.critic),
            Part::frozen(&self.target),
            Part::frozen(&self.norm),
        ]
    }

    progress_in_fields!();
}

impl Agent for Td3Bc {
    fn gamma(&self) -> Option<f64> {
        Some(self.cfg.gamma)
    }

    fn act(&mut self, obs: &Tensor, deterministic: bool) -> Tensor {
        let (actor, norm) = (&self.actor.net, self.cfg.normalize_states.then_some(&self.norm.net));
        let noise = (!deterministic).then_some((&mut self.rng, self.act_dim));
        super::act_with(obs, self.device, noise, |obs, eps| {
            let s = norm.map_or_else(|| obs.shallow_clone(), |n| n.apply(obs));
            super::explore(actor.forward(&s, None).tanh(), eps, self.cfg.explore_std)
        })
    }

    fn update(&mut self, batch: &TransitionBatch) -> Metrics {
        let b = batch.to_device(self.device);
        let (obs, next) = (self.normalized(&b.obs), self.normalized(&b.next_obs));
        let y = self.td_target(&b, &next);
        // Critic step; the targets move only on delayed steps (τ = 0 otherwise).
        let delayed = (self.step + 1) % self.cfg.policy_delay == 0;
        let tau = if delayed { self.cfg.tau } else { 0.0 };
        let pass = CriticPass::new(&self.critic.net, &state_action(&obs, &b.action), &mut self.rng);
        let critic_loss = (&pass.q - y.unsqueeze(0)).square().sum_dim_intlist(0, false, Kind::Float).mean(Kind::Float);
        let c = &mut self.critic;
        let q = pass.step(&c.net, &mut c.opt, &c.params, &self.target.params, tau, &critic_loss, None);
        let mut metrics =
            vec![("critic_loss", critic_loss.double_value(&[])), ("q_mean", q.mean(Kind::Float).double_value(&[]))];
        if delayed {
            let (actor_loss, lambda, bc) = self.actor_loss(&obs, &b.action);
            self.actor.minimize(&actor_loss);
            polyak_update(&self.actor_target.params, &self.actor.params, self.cfg.tau);
            metrics.extend([("actor_loss", actor_loss.double_value(&[])), ("lambda", lambda), ("bc_loss", bc)]);
        }
        self.step += 1;
        metrics
    }

    fn set_state_stats(&mut self, mean: &[f32], std: &[f32]) -> Result<(), AgentError> {
        self.norm.net.set(mean, std)
    }

    fn deterministic_policy(&self) -> Option<DeterministicPolicy> {
        Some(StateNorm::tanh_actor_policy(&self.actor.net, self.cfg.normalize_states.then_some(&self.norm.net)))
    }

    fn observation_normalization(&self) -> String {
        state_norm::describe(self.cfg.normalize_states)
    }

    fn policy_graph(&self) -> Option<PolicyGraph> {
        Some(StateNorm::tanh_actor_graph(&self.actor.net, self.cfg.normalize_states.then_some(&self.norm.net)))
    }

    /// The critics on normalized states.
    fn critic_values(&self, obs: &Tensor, action: &Tensor) -> Option<Tensor> {
        Some(critic_values(&self.critic.net, &self.normalized(&obs.to_device(self.device)), action, self.device))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> Td3BcConfig {
        let h = MlpConfig { hidden: vec![32, 32], ..MlpConfig::default() };
        Td3BcConfig { actor: h.clone(), critic: h, ..Td3BcConfig::default() }
    }

    /// A one-step bandit: r = −‖a − a*(s)‖², terminal. The behaviour data is a noisy a*; the
    /// actor must end near a* (the BC term and Q agree), and the actor moves only every second
    /// update.
    #[test]
    fn learns_the_bandit_and_delays_the_actor() {
        let mut agent = Td3Bc::new(small(), 2, 2, Device::Cpu, 0).unwrap();
        agent.set_state_stats(&[0.0, 0.0], &[1.0, 1.0]).unwrap();
        let mut rng = AgentRng::new(3);
        let make = |rng: &mut AgentRng| {
            let obs = rng.normal(&[128, 2], Device::Cpu);
            let best = (&obs * 0.5).tanh();
            let action = (&best + rng.normal(&[128, 2], Device::Cpu) * 0.3).clamp(-1.0, 1.0);
            let reward = -(&action - &best).square().sum_dim_intlist(-1, false, Kind::Float);
            TransitionBatch {
                reward,
                next_obs: obs.shallow_clone(),
                terminal: Tensor::ones([128], (Kind::Float, Device::Cpu)),
                obs,
                action,
                mc_return: None,
                is_offline: None,
            }
        };
        let m0 = agent.update(&make(&mut rng));
        assert!(!m0.iter().any(|(k, _)| *k == "actor_loss"), "update 1 does not move the actor");
        let m1 = agent.update(&make(&mut rng));
        let lambda = m1.iter().find(|(k, _)| *k == "lambda").unwrap().1;
        assert!(lambda > 0.0 && lambda.is_finite());
        for _ in 0..600 {
            agent.update(&make(&mut rng));
        }
        let test = make(&mut rng);
        let best = (&test.obs * 0.5).tanh();
        let err = (agent.act(&test.obs, true) - best).abs().mean(Kind::Float).double_value(&[]);
        assert!(err < 0.1, "mean abs error to the best action {err}");
    }

    #[test]
    fn save_load_resumes_exactly() {
        let make = |seed| {
            let mut a = Td3Bc::new(small(), 2, 2, Device::Cpu, seed).unwrap();
            a.set_state_stats(&[0.5, -0.5], &[2.0, 1.0]).unwrap();
            a
        };
        let mut rng = AgentRng::new(11);
        let batches: Vec<TransitionBatch> = (0..7)
            .map(|_| {
                let obs = rng.normal(&[16, 2], Device::Cpu);
                TransitionBatch {
                    action: rng.normal(&[16, 2], Device::Cpu).tanh(),
                    reward: rng.normal(&[16], Device::Cpu),
                    next_obs: rng.normal(&[16, 2], Device::Cpu),
                    terminal: Tensor::zeros([16], (Kind::Float, Device::Cpu)),
                    obs,
                    mc_return: None,
                    is_offline: None,
                }
            })
            .collect();
        let obs = batches[0].obs.shallow_clone();
        super::super::testing::assert_exact_resume(make, |a: &Td3Bc| a.named_tensors(), &batches, 7, 3, &obs);
    }
}
