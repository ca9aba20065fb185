//! Behaviour cloning: a deterministic policy regressed onto the dataset's actions, the simplest
//! baseline ImagineBench compares (its d3rlpy `BC`: a deterministic MLP, mean squared error).
//!
//! One `update(batch)`: `L_BC = E[ ‖π(s̃) − a‖² ]`, π(s̃) = tanh(MLP(s̃)), s̃ the state,
//! normalized with the offline data's statistics ([`crate::nn::StateNorm`]) when
//! `normalize_states` (on by default, TD3+BC's pipeline); one Adam step. ImagineBench itself does
//! *not* normalize: it trains d3rlpy's BC with no observation scaler, a 2×256 tanh encoder and
//! batch 100, and its presets (`bc-imaginebench-*`) reproduce that (fidelity-audit-2 E14). The deterministic action is
//! π(s̃); a stochastic action adds N(0, `explore_std`²) and clips to [−1, 1] (for online use).
//! Deviation: the tanh output keeps actions inside the box (d3rlpy's BC head is tanh too).

use crate::checkpoint::{progress_in_fields, Part, Stateful};
use crate::nn::state_norm;
use crate::nn::{Frozen, Mlp, MlpConfig, PolicyGraph, StateNorm, Trained};
use crate::rng::AgentRng;
use crate::{Agent, AgentError, DeterministicPolicy, Metrics};
use o2o_datasets::TransitionBatch;
use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

/// BC hyperparameters (d3rlpy's BC defaults: learning rate 1e-3, 2×256).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BcConfig {
    /// Policy network.
    pub actor: MlpConfig,
    /// Adam learning rate.
    pub lr: f64,
    /// Normalize states with the offline data's mean and standard deviation.
    pub normalize_states: bool,
    /// σ of the Gaussian noise of a stochastic action.
    pub explore_std: f64,
}

impl Default for BcConfig {
    fn default() -> Self {
        Self { actor: MlpConfig::default(), lr: 1e-3, normalize_states: true, explore_std: 0.1 }
    }
}

impl BcConfig {
    /// Reject settings that cannot work, naming the field.
    pub fn validate(&self) -> Result<(), AgentError> {
        if !(self.lr > 0.0) || self.explore_std < 0.0 {
            return Err(AgentError::Config(format!(
                "bc.lr must be > 0 and bc.explore_std ≥ 0, found {} and {}",
                self.lr, self.explore_std
            )));
        }
        if !(0.0..1.0).contains(&self.actor.dropout) {
            return Err(AgentError::Config(format!(
                "bc.actor.dropout must be in [0, 1), found {}",
                self.actor.dropout
            )));
        }
        Ok(())
    }
}

impl BcConfig {
    /// The key of [`Bc`]'s update metrics, `bc_loss`; it has no diagnostics ([`crate::MetricKeys`]).
    pub fn metric_keys(&self) -> crate::MetricKeys {
        crate::MetricKeys { update: vec!["bc_loss"], diagnose: Vec::new() }
    }
}

/// A BC agent.
pub struct Bc {
    cfg: BcConfig,
    actor: Trained<Mlp>,
    norm: Frozen<StateNorm>,
    act_dim: i64,
    device: Device,
    rng: AgentRng,
    step: i64,
}

impl Bc {
    /// A new agent for `obs_dim` observations and `act_dim` actions in `[-1, 1]`.
    pub fn new(cfg: BcConfig, obs_dim: i64, act_dim: i64, device: Device, seed: u64) -> Result<Self, AgentError> {
        cfg.validate()?;
        super::prepare("bc", obs_dim, act_dim, device)?;
        let mut rng = AgentRng::new(seed);
        let actor =
            Trained::new(cfg.lr, |p| Mlp::new(p, "actor", obs_dim, act_dim, &cfg.actor, 1e-2, &mut rng, device));
        let norm = Frozen::new(|p| StateNorm::new(p, obs_dim, device));
        Ok(Self { cfg, actor, norm, act_dim, device, rng, step: 0 })
    }

    /// π(s̃) = tanh(MLP(s̃)), dropout masks from `rng` when given.
    fn policy(actor: &Mlp, norm: Option<&StateNorm>, obs: &Tensor, rng: Option<&mut AgentRng>) -> Tensor {
        let s = norm.map_or_else(|| obs.shallow_clone(), |n| n.apply(obs));
        actor.forward(&s, rng).tanh()
    }

    /// L_BC = E[‖π(s̃) − a‖²] (summed over action numbers, averaged over rows).
    fn bc_loss(&mut self, obs: &Tensor, action: &Tensor) -> Tensor {
        let norm = self.cfg.normalize_states.then_some(&self.norm.net);
        let pred = Self::policy(&self.actor.net, norm, obs, Some(&mut self.rng));
        (pred - action).square().sum_dim_intlist(-1, false, Kind::Float).mean(Kind::Float)
    }
}

impl Stateful for Bc {
    fn name(&self) -> &'static str {
        "bc"
    }

    fn parts(&self) -> Vec<Part<'_>> {
        vec![Part::trained("actor_opt", &self.actor), Part::frozen(&self.norm)]
    }

    progress_in_fields!();
}

impl Agent for Bc {
    /// BC fits actions only: no value, no discount.
    fn gamma(&self) -> Option<f64> {
        None
    }

    fn act(&mut self, obs: &Tensor, deterministic: bool) -> Tensor {
        let (actor, norm) = (&self.actor.net, self.cfg.normalize_states.then_some(&self.norm.net));
        let noise = (!deterministic).then_some((&mut self.rng, self.act_dim));
        super::act_with(obs, self.device, noise, |obs, eps| {
            super::explore(Self::policy(actor, norm, obs, None), eps, self.cfg.explore_std)
        })
    }

    fn update(&mut self, batch: &TransitionBatch) -> Metrics {
        let b = batch.to_device(self.device);
        let loss = self.bc_loss(&b.obs, &b.action);
        self.actor.minimize(&loss);
        self.step += 1;
        vec![("bc_loss", loss.double_value(&[]))]
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(rng: &mut AgentRng, n: i64) -> TransitionBatch {
        let w = Tensor::from_slice(&[0.8f32, -0.5, 0.3, 0.1, 0.9, -0.7]).view([3, 2]);
        let obs = rng.normal(&[n, 3], Device::Cpu) * 4.0 + 2.0;
        let z = || Tensor::zeros([n], (Kind::Float, Device::Cpu));
        TransitionBatch {
            action: ((&obs - 2.0) / 4.0).matmul(&w).tanh(),
            reward: z(),
            next_obs: obs.shallow_clone(),
            terminal: z(),
            obs,
            mc_return: None,
            is_offline: None,
        }
    }

    /// On data from a = tanh(W s̃), with the data's statistics set, BC recovers the policy.
    #[test]
    fn clones_a_linear_policy_on_normalized_states() {
        let cfg = BcConfig { actor: MlpConfig { hidden: vec![64, 64], ..MlpConfig::default() }, ..BcConfig::default() };
        let mut agent = Bc::new(cfg, 3, 2, Device::Cpu, 1).unwrap();
        agent.set_state_stats(&[2.0; 3], &[4.0; 3]).unwrap();
        let mut rng = AgentRng::new(5);
        let first = agent.update(&batch(&mut rng, 128))[0].1;
        for _ in 0..300 {
            agent.update(&batch(&mut rng, 128));
        }
        let test = batch(&mut rng, 256);
        let err = (agent.act(&test.obs, true) - &test.action).abs().mean(Kind::Float).double_value(&[]);
        assert!(err < 0.05, "mean abs action error {err} (first loss {first})");
        let noisy = agent.act(&test.obs, false);
        assert!(noisy.abs().max().double_value(&[]) <= 1.0);
    }

    #[test]
    fn save_load_resumes_exactly() {
        let make = |seed| {
            let mut a = Bc::new(
                BcConfig { actor: MlpConfig { hidden: vec![16], ..MlpConfig::default() }, ..BcConfig::default() },
                3,
                2,
                Device::Cpu,
                seed,
            )
            .unwrap();
            a.set_state_stats(&[2.0; 3], &[4.0; 3]).unwrap();
            a
        };
        let mut rng = AgentRng::new(9);
        let batches: Vec<TransitionBatch> = (0..6).map(|_| batch(&mut rng, 32)).collect();
        let obs = batches[0].obs.shallow_clone();
        super::super::testing::assert_exact_resume(make, |a: &Bc| a.named_tensors(), &batches, 6, 3, &obs);
    }
}
