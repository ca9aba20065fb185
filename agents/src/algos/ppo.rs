//! Proximal Policy Optimization (Schulman, Wolski, Dhariwal, Radford, Klimov, "Proximal Policy
//! Optimization Algorithms", arXiv 1707.06347), continuous actions, for online learning from
//! scratch and for Uni-O4's online phase.
//!
//! Facts: ../shared/reference/algorithms.md §2.2 and algorithms-next.md §1.2 (Uni-O4's online
//! PPO); reference code consulted for facts: CleanRL `ppo_continuous_action.py`, Uni-O4
//! `ppo_finetune/ppo.py`. The runner collects a rollout of `T × N` steps (its on-policy loop,
//! `experiments/src/run/onpolicy.rs`) and hands it to [`OnPolicy::update_rollout`], which does:
//! 1. GAE(λ): `δ_t = r_t + γ (1 − terminated_t) V(s'_t) − V(s_t)`,
//!    `A_t = δ_t + γλ (1 − done_t) A_{t+1}`, `R_t = A_t + V(s_t)`
//!    ([`o2o_datasets::rollout::gae`]; a time-limit cut bootstraps from the true last
//!    observation);
//! 2. `epochs` passes over the rollout in shuffled minibatches; per minibatch, with
//!    `ρ = π(a|s) / π_old(a|s)` and `Â` the advantages (standardized per minibatch by default):
//!    - actor: `L_π = E[ max(−Â ρ, −Â clip(ρ, 1 − ε, 1 + ε)) ] − c_H H[π]` (clipped surrogate,
//!      entropy bonus), gradient norm clipped, one Adam step;
//!    - critic: `L_V = ½ E[ max((V − R)², (V_old + clip(V − V_old, −ε, ε) − R)²) ]` (value
//!      clipping around the rollout-time values), gradient norm clipped, one Adam step;
//! 3. learning rates `lr₀ (1 − t / T_decay)` with `t` the env steps before this rollout.
//!
//! The policy is a Gaussian with a state-independent log σ ([`GaussianActor`]; CleanRL's
//! linear mean by default, Uni-O4's tanh'd mean with `actor.squash_mean`). By default (CleanRL)
//! the sample is stored unclipped, with the log-probability of that sample, and the runner clips
//! the action into the env's box. With `store_clamped_action` (Uni-O4's `ppo_finetune/ppo.py
//! choose_action`) the sample is clamped to [−1, 1] first, and the stored action and its
//! log-probability are those of the clamped action (the Gaussian density at the clamped point).
//! Adam's ε is 1e-5. Observations are normalized by the agent
//! ([`ObsNorm`]: running statistics as CleanRL, or a dataset's frozen statistics as Uni-O4).
//!
//! Deviations: actor and critic have separate Adam optimizers and separate gradient-norm clips
//! (Uni-O4's form; CleanRL steps one Adam on `L_π + c_V L_V` and clips the joint norm — Adam
//! is per-parameter, so the only difference is the clip, and `c_V` has no effect beyond Adam's
//! ε). Rewards are scaled before GAE by `reward_scaling`:
//! - `constant` multiplies by `reward_scale`;
//! - `dynamic` divides by a running std of the discounted return ([`ReturnStdScaler`]), whose
//!   state is checkpointed with the agent. This is Uni-O4's `dynamic` strategy. It is also the
//!   statistic of CleanRL's `NormalizeReward` wrapper; only the start differs, `S = 1` here
//!   against a unit-variance prior of weight 1e-4 there, which washes out after a few rollouts.
//!
//! `reward_clip > 0` then clips the scaled reward to ±`reward_clip` (CleanRL's `TransformReward`
//! after `NormalizeReward`: ±10). The `ppo-*` presets use `dynamic` with the ±10 clip.
//!
//! Options for Uni-O4's online phase: `critic_head = "relu"` ends V in a ReLU (`V ≥ 0`, the
//! official `ValueReluMLP` its task scripts use whenever they refit V), and `reward_scaling`.

use crate::checkpoint::{progress_in_fields, Part, Stateful};
use crate::nn::{
    clip_grad_norm, Activation, GaussianActor, GaussianConfig, Layer, Mlp, MlpConfig, ObsNorm, ObsNormConfig,
    ObsNormMode, ParamSet, PolicyGraph, Trained,
};
use crate::rng::AgentRng;
use crate::{Agent, AgentError, DeterministicPolicy, Metrics, OnPolicy};
use o2o_datasets::reward_scaling::ReturnStdScaler;
use o2o_datasets::rollout::gae;
use o2o_datasets::{RolloutBuffer, TransitionBatch};
use serde::{Deserialize, Serialize};
use std::path::Path;
use tch::{Device, Kind, Tensor};

/// How advantages are standardized before the surrogate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AdvantageNorm {
    /// `(Â − mean) / (std + 1e-8)` over each minibatch (CleanRL).
    #[default]
    Minibatch,
    /// Over the whole rollout, once (Uni-O4, `+1e-5`).
    Rollout,
    /// Not standardized.
    None,
}

/// How rewards are scaled before GAE (after which `reward_scale` multiplies them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RewardScaling {
    /// Only the constant `reward_scale` (Uni-O4's `number` strategy with 0.1; 1 = unscaled).
    #[default]
    Constant,
    /// `r / (σ_R + 1e-8)` with σ_R a running std of each env's discounted return
    /// ([`ReturnStdScaler`]; Uni-O4's `dynamic` strategy, continued from the offline pass).
    Dynamic,
}

/// The value network's output: linear, or through a ReLU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ValueHead {
    /// `V(s) = w·h + b`.
    #[default]
    Linear,
    /// `V(s) = max(0, w·h + b)` (Uni-O4's refit and online V, `ValueReluMLP`).
    Relu,
}

impl ValueHead {
    /// Apply the head to the last layer's output.
    pub fn apply(self, v: Tensor) -> Tensor {
        match self {
            ValueHead::Linear => v,
            ValueHead::Relu => v.relu(),
        }
    }
}

/// PPO hyperparameters; defaults are CleanRL's `ppo_continuous_action.py` (MuJoCo).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PpoConfig {
    /// Policy network (mean), with its log σ bounds.
    pub actor: GaussianConfig,
    /// Value network V(s).
    pub critic: MlpConfig,
    /// V's output: `linear` or `relu`.
    pub critic_head: ValueHead,
    /// Observation normalization.
    pub obs_norm: ObsNormConfig,
    /// Discount γ.
    pub gamma: f64,
    /// GAE λ.
    pub gae_lambda: f64,
    /// Clip range ε of the ratio (and of the value, with `clip_value`).
    pub clip: f64,
    /// Clip the value around the rollout-time value.
    pub clip_value: bool,
    /// Entropy bonus c_H.
    pub entropy_coef: f64,
    /// Gradient-norm clip of each network.
    pub max_grad_norm: f64,
    /// Actor learning rate lr₀.
    pub actor_lr: f64,
    /// Critic learning rate lr₀.
    pub critic_lr: f64,
    /// Adam ε.
    pub adam_eps: f64,
    /// Passes K over each rollout.
    pub epochs: usize,
    /// Rows per minibatch.
    pub minibatch_size: usize,
    /// Advantage standardization.
    pub advantage_norm: AdvantageNorm,
    /// Decay the learning rates linearly to 0.
    pub lr_decay: bool,
    /// Env steps over which they decay (Uni-O4: 3e6 whatever the run's length); 0 = the run's
    /// own online steps (CleanRL).
    pub lr_decay_steps: u64,
    /// Rewards are multiplied by this before GAE (Uni-O4's `number` strategy: 0.1).
    pub reward_scale: f64,
    /// `constant` (only `reward_scale`) or `dynamic` (divided by a running return std first).
    pub reward_scaling: RewardScaling,
    /// Clip the scaled reward to ±this before GAE (CleanRL: 10 after its reward normalization);
    /// 0 = no clip.
    pub reward_clip: f64,
    /// Store the sampled action clamped to [−1, 1], and the log-probability of the clamped
    /// action (Uni-O4's online PPO); off = the unclamped sample and its log-probability (CleanRL).
    pub store_clamped_action: bool,
    /// Stop a rollout's epochs early once the approximate KL exceeds this (0 = never).
    pub target_kl: f64,
}

impl Default for PpoConfig {
    fn default() -> Self {
        let mlp = MlpConfig { hidden: vec![64, 64], activation: Activation::Tanh, ..MlpConfig::default() };
        Self {
            actor: GaussianConfig {
                mlp: mlp.clone(),
                log_std_min: -20.0,
                log_std_max: 2.0,
                squash_mean: false,
                head_gain: 0.01,
            },
            critic: mlp,
            critic_head: ValueHead::Linear,
            obs_norm: ObsNormConfig::default(),
            gamma: 0.99,
            gae_lambda: 0.95,
            clip: 0.2,
            clip_value: true,
            entropy_coef: 0.0,
            max_grad_norm: 0.5,
            actor_lr: 3e-4,
            critic_lr: 3e-4,
            adam_eps: 1e-5,
            epochs: 10,
            minibatch_size: 64,
            advantage_norm: AdvantageNorm::Minibatch,
            lr_decay: true,
            lr_decay_steps: 0,
            reward_scale: 1.0,
            reward_scaling: RewardScaling::Constant,
            reward_clip: 0.0,
            store_clamped_action: false,
            target_kl: 0.0,
        }
    }
}

impl PpoConfig {
    /// Reject settings that cannot work, naming the field.
    pub fn validate(&self) -> Result<(), AgentError> {
        let bad = |m: String| Err(AgentError::Config(m));
        if !(0.0..=1.0).contains(&self.gamma) || !(0.0..=1.0).contains(&self.gae_lambda) {
            return bad(format!(
                "ppo.gamma and ppo.gae_lambda must be in [0, 1], found {} and {}",
                self.gamma, self.gae_lambda
            ));
        }
        if !(self.clip > 0.0) {
            return bad(format!("ppo.clip must be > 0, found {}", self.clip));
        }
        if self.epochs == 0 || self.minibatch_size == 0 {
            return bad(format!(
                "ppo.epochs and ppo.minibatch_size must be ≥ 1, found {} and {}",
                self.epochs, self.minibatch_size
            ));
        }
        if !(self.max_grad_norm > 0.0) || !(self.adam_eps > 0.0) {
            return bad(format!(
                "ppo.max_grad_norm and ppo.adam_eps must be > 0, found {} and {}",
                self.max_grad_norm, self.adam_eps
            ));
        }
        if !(self.reward_clip >= 0.0 && self.reward_clip.is_finite()) {
            return bad(format!("ppo.reward_clip must be ≥ 0 (0 = no clip), found {}", self.reward_clip));
        }
        if self.actor.mlp.dropout != 0.0 || self.critic.dropout != 0.0 {
            return bad("ppo takes no dropout (log-probabilities must be those of the acting policy)".into());
        }
        Ok(())
    }

    /// The learning-rate factor `max(0, 1 − t / T_decay)` at env step `t` of a run of `total`.
    pub fn lr_factor(&self, t: u64, total: u64) -> f64 {
        let horizon = if self.lr_decay_steps > 0 { self.lr_decay_steps } else { total };
        if !self.lr_decay || horizon == 0 {
            return 1.0;
        }
        (1.0 - t as f64 / horizon as f64).max(0.0)
    }
}

impl PpoConfig {
    /// The keys of [`Ppo`]'s rollout update metrics ([`OnPolicy::update_rollout`]), with
    /// `reward_scaling_std` under the `dynamic` reward scaling; it has no diagnostics
    /// ([`crate::MetricKeys`]).
    pub fn metric_keys(&self) -> crate::MetricKeys {
        let mut update = vec!["policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "actor_grad_norm"];
        update.extend(["explained_variance", "value_mean", "advantage_mean", "log_std_mean", "actor_lr"]);
        update.push("minibatch_updates");
        if self.reward_scaling == RewardScaling::Dynamic {
            update.push("reward_scaling_std");
        }
        crate::MetricKeys { update, diagnose: Vec::new() }
    }
}

/// A PPO agent.
pub struct Ppo {
    cfg: PpoConfig,
    actor: Trained<GaussianActor>,
    critic: Trained<Mlp>,
    /// The observation statistics.
    norm: ObsNorm,
    /// The `dynamic` reward scaling's running state (checkpoint part `reward_scaling`).
    returns: Option<ReturnStdScaler>,
    act_dim: i64,
    device: Device,
    rng: AgentRng,
    /// Rollouts learned from.
    step: i64,
    /// The name it reports and writes into checkpoints (`ppo`, or `unio4` for Uni-O4's online
    /// phase).
    name: &'static str,
}

/// `L_clip = E[ max(−Â ρ, −Â clip(ρ, 1 − ε, 1 + ε)) ]` (the negated clipped surrogate, so it is
/// minimized). Past the clip in the direction the advantage pushes (`Â > 0, ρ > 1 + ε` or
/// `Â < 0, ρ < 1 − ε`) the max takes the constant clipped term, so that row's gradient is 0.
pub fn clipped_surrogate(ratio: &Tensor, adv: &Tensor, clip: f64) -> Tensor {
    let unclipped = -adv * ratio;
    let clipped = -adv * ratio.clamp(1.0 - clip, 1.0 + clip);
    unclipped.maximum(&clipped).mean(Kind::Float)
}

/// `L_V = ½ E[ max((V − R)², (V_old + clip(V − V_old, −ε, ε) − R)²) ]`, or `½ E[(V − R)²]`
/// without value clipping (`clip = None`).
pub fn clipped_value_loss(v: &Tensor, v_old: &Tensor, ret: &Tensor, clip: Option<f64>) -> Tensor {
    let plain = (v - ret).square();
    match clip {
        Some(eps) => {
            let clipped = (v_old + (v - v_old).clamp(-eps, eps) - ret).square();
            plain.maximum(&clipped).mean(Kind::Float) * 0.5
        }
        None => plain.mean(Kind::Float) * 0.5,
    }
}

impl Ppo {
    /// A new agent for `obs_dim` observations and `act_dim` actions.
    pub fn new(cfg: PpoConfig, obs_dim: i64, act_dim: i64, device: Device, seed: u64) -> Result<Self, AgentError> {
        cfg.validate()?;
        super::prepare("ppo", obs_dim, act_dim, device)?;
        let mut rng = AgentRng::new(seed);
        let actor = Trained::new(cfg.actor_lr, |p| {
            GaussianActor::new(p, "actor", obs_dim, act_dim, &cfg.actor, &mut rng, device)
        });
        let critic =
            Trained::new(cfg.critic_lr, |p| Mlp::new(p, "critic", obs_dim, 1, &cfg.critic, 1.0, &mut rng, device));
        let (actor, critic) = (actor.with_eps(cfg.adam_eps), critic.with_eps(cfg.adam_eps));
        let norm = ObsNorm::new(&cfg.obs_norm, obs_dim, device);
        let returns = (cfg.reward_scaling == RewardScaling::Dynamic).then(|| ReturnStdScaler::new(cfg.gamma));
        Ok(Self { cfg, actor, critic, norm, returns, act_dim, device, rng, step: 0, name: "ppo" })
    }

    /// The same agent reporting (and checkpointing as) `name`.
    pub fn named(mut self, name: &'static str) -> Self {
        self.name = name;
        self
    }

    /// The configuration.
    pub fn config(&self) -> &PpoConfig {
        &self.cfg
    }

    /// The actor's and critic's parameter sets (Uni-O4 copies an offline member and V in).
    pub fn params(&self) -> (&ParamSet, &ParamSet) {
        (&self.actor.params, &self.critic.params)
    }

    /// The `dynamic` reward scaling's state as checkpoint tensors (`reward_scaling/stats` =
    /// `[n, μ, S]`, `reward_scaling/returns` = each env's `R`), none under `constant`.
    pub fn reward_scaling_tensors(scaler: Option<&ReturnStdScaler>) -> Vec<(String, Tensor)> {
        match scaler {
            Some(s) => vec![
                ("reward_scaling/stats".into(), Tensor::from_slice(&s.stats())),
                ("reward_scaling/returns".into(), Tensor::from_slice(s.returns())),
            ],
            None => Vec::new(),
        }
    }

    /// The `dynamic` reward scaling's state (`None` under `constant`).
    pub fn reward_scaler(&self) -> Option<&ReturnStdScaler> {
        self.returns.as_ref()
    }

    /// `V(s)` `[B]` through the configured head.
    fn critic_value(&self, obs: &Tensor) -> Tensor {
        self.cfg.critic_head.apply(self.critic.net.forward(obs, None)).squeeze_dim(-1)
    }

    /// Restore `parts` (`None` = all) of a checkpoint, the reward scaling's state included.
    fn load_impl(&mut self, path: &Path, parts: Option<&[&str]>) -> Result<(), AgentError> {
        // The reward scaling's returns have one entry per env, so they are read here rather
        // than restored into fixed-shape live tensors; checked before anything changes.
        let want_scaler = parts.is_none_or(|ps| ps.contains(&"reward_scaling"));
        let scaler = match (&self.returns, want_scaler) {
            (Some(_), true) => {
                let ck = crate::checkpoint::Checkpoint::read(path)?;
                let (stats, returns) = (ck.get("reward_scaling/stats")?, ck.get("reward_scaling/returns")?);
                if stats.kind() != Kind::Double
                    || stats.size() != [3]
                    || returns.kind() != Kind::Double
                    || returns.dim() != 1
                {
                    return Err(AgentError::ShapeMismatch {
                        path: path.to_path_buf(),
                        name: "reward_scaling/stats".into(),
                        expected: vec![3],
                        found: stats.size(),
                    });
                }
                let s = Vec::<f64>::try_from(stats).unwrap_or_default();
                Some(ReturnStdScaler::from_state(
                    self.cfg.gamma,
                    [s[0], s[1], s[2]],
                    Vec::<f64>::try_from(returns).unwrap_or_default(),
                ))
            }
            (None, true) if parts.is_some() => {
                return Err(AgentError::Config(
                    "checkpoint part `reward_scaling` asked for, but this agent's reward_scaling is `constant`".into(),
                ))
            }
            _ => None,
        };
        let rest: Option<Vec<&str>> = parts.map(|ps| ps.iter().copied().filter(|p| *p != "reward_scaling").collect());
        self.restore(path, self.name, rest.as_deref())?;
        if scaler.is_some() {
            self.returns = scaler;
        }
        Ok(())
    }

    /// One actor step on a minibatch: `L_π = L_clip − c_H H[π]`; returns
    /// `(L_clip, H, approx KL, clip fraction, grad norm)`.
    fn actor_step(&mut self, obs: &Tensor, act: &Tensor, old_logp: &Tensor, adv: &Tensor) -> [f64; 5] {
        let mean = self.actor.net.mean(obs, None);
        let logp = self.actor.net.log_prob_at(&mean, act);
        let log_ratio = &logp - old_logp;
        let ratio = log_ratio.exp();
        let pg = clipped_surrogate(&ratio, adv, self.cfg.clip);
        let entropy = self.actor.net.entropy();
        let loss = &pg - self.cfg.entropy_coef * &entropy;
        let mut grads = Tensor::run_backward(&[&loss], &self.actor.params.tensors(), false, false);
        let norm = clip_grad_norm(&mut grads, self.cfg.max_grad_norm);
        self.actor.apply(&grads);
        // k3 estimator of KL(π_old ‖ π): E[(ρ − 1) − log ρ].
        let (kl, clipped) = tch::no_grad(|| {
            let kl = ((&ratio - 1.0) - &log_ratio).mean(Kind::Float).double_value(&[]);
            let clipped =
                (&ratio - 1.0).abs().gt(self.cfg.clip).to_kind(Kind::Float).mean(Kind::Float).double_value(&[]);
            (kl, clipped)
        });
        [pg.double_value(&[]), entropy.double_value(&[]), kl, clipped, norm]
    }

    /// One critic step on a minibatch: `L_V` of [`clipped_value_loss`]; returns `L_V`.
    fn critic_step(&mut self, obs: &Tensor, v_old: &Tensor, ret: &Tensor) -> f64 {
        let v = self.critic_value(obs);
        let loss = clipped_value_loss(&v, v_old, ret, self.cfg.clip_value.then_some(self.cfg.clip));
        let mut grads = Tensor::run_backward(&[&loss], &self.critic.params.tensors(), false, false);
        clip_grad_norm(&mut grads, self.cfg.max_grad_norm);
        self.critic.apply(&grads);
        loss.double_value(&[])
    }
}

/// `(Â − mean) / (std + eps)`.
fn standardize(a: &Tensor, eps: f64) -> Tensor {
    (a - a.mean(Kind::Float)) / (a.std(true) + eps)
}

impl OnPolicy for Ppo {
    fn normalize_obs(&mut self, raw: &Tensor, update_stats: bool) -> Tensor {
        let raw = raw.to_device(self.device);
        if update_stats {
            self.norm.update(&raw);
        }
        self.norm.apply(&raw)
    }

    fn use_dataset_stats(&mut self, mean: &[f32], std: &[f32]) -> bool {
        if self.cfg.obs_norm.mode != ObsNormMode::Dataset {
            return false;
        }
        self.norm.freeze(mean, std);
        true
    }

    fn act_value(&mut self, obs: &Tensor) -> (Tensor, Tensor, Tensor) {
        let obs = obs.to_device(self.device);
        let eps = self.rng.normal(&[obs.size()[0], self.act_dim], self.device);
        tch::no_grad(|| {
            let mean = self.actor.net.mean(&obs, None);
            let a = &mean + self.actor.net.log_std().exp() * eps;
            let a = if self.cfg.store_clamped_action { a.clamp(-1.0, 1.0) } else { a };
            let logp = self.actor.net.log_prob_at(&mean, &a);
            let v = self.critic_value(&obs);
            (a, logp, v)
        })
    }

    fn value(&mut self, obs: &Tensor) -> Tensor {
        tch::no_grad(|| self.critic_value(&obs.to_device(self.device)))
    }

    fn update_rollout(&mut self, r: &RolloutBuffer, env_step: u64, total_env_steps: u64) -> Metrics {
        let c = self.cfg.clone();
        // 1. GAE on the scaled rewards: `dynamic` divides by the running return std first (in
        // time order, each env's R continuing across rollouts), then × reward_scale, then the
        // optional clip to ±reward_clip.
        let dynamic = self.returns.as_mut().map(|s| s.scale_rollout(&r.rewards, &r.done, r.envs));
        let mut rewards: Vec<f32> =
            dynamic.as_deref().unwrap_or(&r.rewards).iter().map(|x| x * c.reward_scale as f32).collect();
        if c.reward_clip > 0.0 {
            let b = c.reward_clip as f32;
            rewards.iter_mut().for_each(|x| *x = x.clamp(-b, b));
        }
        let (adv, ret) = gae(
            &rewards,
            &r.values,
            &r.next_values,
            &r.terminated,
            &r.done,
            r.envs,
            c.gamma as f32,
            c.gae_lambda as f32,
        );
        let rows = r.len() as i64;
        let dev = self.device;
        let col = |v: &[f32], w: usize| Tensor::from_slice(v).view([rows, w as i64]).to_device(dev);
        let obs = col(&r.obs, r.obs_dim);
        let act = col(&r.actions, r.act_dim);
        let (old_logp, v_old) = (col(&r.log_probs, 1).squeeze_dim(-1), col(&r.values, 1).squeeze_dim(-1));
        let (mut adv_t, ret_t) = (col(&adv, 1).squeeze_dim(-1), col(&ret, 1).squeeze_dim(-1));
        if c.advantage_norm == AdvantageNorm::Rollout {
            adv_t = standardize(&adv_t, 1e-5);
        }
        // 3. the learning-rate schedule.
        let f = c.lr_factor(env_step, total_env_steps);
        self.actor.opt.lr = c.actor_lr * f;
        self.critic.opt.lr = c.critic_lr * f;
        // 2. epochs of shuffled minibatches.
        let mut sums = [0.0f64; 6];
        let mut count = 0.0f64;
        let mut kl = 0.0;
        for _ in 0..c.epochs {
            let perm = self.rng.permutation(rows as usize);
            for chunk in perm.chunks(c.minibatch_size) {
                let idx = Tensor::from_slice(chunk).to_device(dev);
                let pick = |t: &Tensor| t.index_select(0, &idx);
                let mut a = pick(&adv_t);
                if c.advantage_norm == AdvantageNorm::Minibatch && chunk.len() > 1 {
                    a = standardize(&a, 1e-8);
                }
                let mb_obs = pick(&obs);
                let [pg, ent, k, clipped, norm] = self.actor_step(&mb_obs, &pick(&act), &pick(&old_logp), &a);
                let vl = self.critic_step(&mb_obs, &pick(&v_old), &pick(&ret_t));
                for (s, x) in sums.iter_mut().zip([pg, vl, ent, k, clipped, norm]) {
                    *s += x;
                }
                count += 1.0;
                kl = k;
            }
            if c.target_kl > 0.0 && kl > c.target_kl {
                break;
            }
        }
        self.step += 1;
        let explained = {
            let var_r = ret_t.var(true).double_value(&[]);
            if var_r > 0.0 {
                1.0 - (&ret_t - &v_old).var(true).double_value(&[]) / var_r
            } else {
                f64::NAN
            }
        };
        let mean = |i: usize| sums[i] / count.max(1.0);
        let scaling_std = self.returns.as_ref().map(|s| ("reward_scaling_std", s.std()));
        let mut metrics = vec![
            ("policy_loss", mean(0)),
            ("value_loss", mean(1)),
            ("entropy", mean(2)),
            ("approx_kl", mean(3)),
            ("clip_fraction", mean(4)),
            ("actor_grad_norm", mean(5)),
            ("explained_variance", explained),
            ("value_mean", v_old.mean(Kind::Float).double_value(&[])),
            ("advantage_mean", col(&adv, 1).mean(Kind::Float).double_value(&[])),
            ("log_std_mean", self.actor.net.log_std().mean(Kind::Float).double_value(&[])),
            ("actor_lr", self.actor.opt.lr),
            ("minibatch_updates", count),
        ];
        metrics.extend(scaling_std);
        metrics
    }
}

impl Stateful for Ppo {
    fn parts(&self) -> Vec<Part<'_>> {
        vec![
            Part::trained("actor_opt", &self.actor),
            Part::trained("critic_opt", &self.critic),
            Part::Tensors(self.norm.named("obs_norm")),
        ]
    }

    fn name(&self) -> &'static str {
        self.name
    }

    progress_in_fields!();

    /// The reward scaling's state, whose returns have one entry per env.
    fn written_only(&self) -> Vec<(String, Tensor)> {
        Self::reward_scaling_tensors(self.returns.as_ref())
    }

    fn load(&mut self, path: &Path) -> Result<(), AgentError> {
        self.load_impl(path, None)
    }

    fn load_parts(&mut self, path: &Path, parts: &[&str]) -> Result<(), AgentError> {
        self.load_impl(path, Some(parts))
    }
}

impl Agent for Ppo {
    fn gamma(&self) -> Option<f64> {
        Some(self.cfg.gamma)
    }

    /// The policy's mean (deterministic) or a sample, clipped to `[-1, 1]`, on raw observations
    /// (normalized here with the statistics as they stand, not updated).
    fn act(&mut self, obs: &Tensor, deterministic: bool) -> Tensor {
        let (actor, norm) = (&self.actor.net, &self.norm);
        let noise = (!deterministic).then_some((&mut self.rng, self.act_dim));
        super::act_with(obs, self.device, noise, |obs, eps| {
            let mean = actor.mean(&norm.apply(obs), None);
            let a = match eps {
                Some(e) => mean + actor.log_std().exp() * e,
                None => mean,
            };
            a.clamp(-1.0, 1.0)
        })
    }

    /// PPO learns from rollouts ([`OnPolicy::update_rollout`]); a batch of off-policy transitions
    /// carries no log-probabilities or values to learn from, so this makes no update and
    /// returns no metrics (the runner never calls it for an on-policy agent).
    fn update(&mut self, _batch: &TransitionBatch) -> Metrics {
        Metrics::new()
    }

    fn observation_normalization(&self) -> String {
        match self.cfg.obs_norm.mode {
            ObsNormMode::None => "none".into(),
            ObsNormMode::Running => "running mean and variance, frozen at the checkpoint (inside the module)".into(),
            ObsNormMode::Dataset => "the dataset's mean and variance (inside the module)".into(),
        }
    }

    fn deterministic_policy(&self) -> Option<DeterministicPolicy> {
        let actor = self.actor.net.detached();
        let norm = self.norm.detached();
        Some(Box::new(move |obs| actor.mean(&norm.apply(obs), None).clamp(-1.0, 1.0)))
    }

    fn policy_graph(&self) -> Option<PolicyGraph> {
        let mean = self.actor.net.mean_graph().normalized(self.norm.layer());
        Some(mean.then(Layer::Clip { low: -1.0, high: 1.0 }))
    }

    fn on_policy(&mut self) -> Option<&mut dyn OnPolicy> {
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Gradient of the clipped surrogate in ρ: exactly 0 past the clip in the advantage's
    /// direction (both signs), −Â/B inside it and on the other side.
    #[test]
    fn clipped_surrogate_gradient_is_zero_past_the_clip() {
        let eps = 0.2;
        let ratio = Tensor::from_slice(&[1.5f32, 0.5, 1.1, 0.5, 1.5]).set_requires_grad(true);
        let adv = Tensor::from_slice(&[2.0f32, -3.0, 1.0, 2.0, -1.0]);
        let loss = clipped_surrogate(&ratio, &adv, eps);
        let g = Vec::<f32>::try_from(&Tensor::run_backward(&[&loss], &[&ratio], false, false)[0]).unwrap();
        // Row 0: Â > 0, ρ > 1 + ε → 0. Row 1: Â < 0, ρ < 1 − ε → 0 (both exactly).
        assert_eq!(g[0], 0.0);
        assert_eq!(g[1], 0.0);
        // Row 2 inside the clip: −Â/5. Row 3: Â > 0 below the clip still pulls ρ up: −2/5.
        // Row 4: Â < 0 above the clip still pushes ρ down: +1/5.
        assert!((g[2] + 0.2).abs() < 1e-7 && (g[3] + 0.4).abs() < 1e-7 && (g[4] - 0.2).abs() < 1e-7, "{g:?}");
        // The loss value: mean of [−2·1.2, 3·0.8, −1.1, −1.0, 1.5].
        let want = (-2.4 + 2.4 - 1.1 - 1.0 + 1.5) / 5.0;
        assert!((loss.double_value(&[]) - want).abs() < 1e-6);
    }

    /// Value clipping keeps the larger of the two errors: a value moved past V_old ± ε toward
    /// the target is charged at the clipped point.
    #[test]
    fn value_clipping_around_the_rollout_value() {
        let (v, v_old, ret) =
            (Tensor::from_slice(&[2.0f32]), Tensor::from_slice(&[0.0f32]), Tensor::from_slice(&[3.0f32]));
        // Unclipped (2−3)² = 1; clipped (0 + 0.2 − 3)² = 7.84 → ½ · 7.84.
        assert!((clipped_value_loss(&v, &v_old, &ret, Some(0.2)).double_value(&[]) - 3.92).abs() < 1e-5);
        assert!((clipped_value_loss(&v, &v_old, &ret, None).double_value(&[]) - 0.5).abs() < 1e-6);
    }

    #[test]
    fn lr_schedule_and_config_checks() {
        let c = PpoConfig::default();
        assert_eq!(c.lr_factor(0, 100), 1.0);
        assert!((c.lr_factor(25, 100) - 0.75).abs() < 1e-12);
        assert_eq!(PpoConfig { lr_decay_steps: 1000, ..c.clone() }.lr_factor(500, 100), 0.5);
        assert_eq!(PpoConfig { lr_decay: false, ..c.clone() }.lr_factor(99, 100), 1.0);
        assert!(PpoConfig { epochs: 0, ..c.clone() }.validate().is_err());
        assert!(PpoConfig { clip: 0.0, ..c }.validate().is_err());
    }

    /// A four-step rollout of 16 envs on a bandit: reward `−(a − 0.5)²`; `done` where given.
    fn bandit_rollout(agent: &mut Ppo, done: [bool; 16]) -> RolloutBuffer {
        let mut b = RolloutBuffer::new(4, 16, 2, 1);
        for _ in 0..4 {
            let obs = agent.normalize_obs(&Tensor::ones([16, 2], (Kind::Float, Device::Cpu)), true);
            let (a, lp, v) = agent.act_value(&obs);
            let r: Vec<f32> =
                Vec::<f32>::try_from(&a.squeeze_dim(-1)).unwrap().iter().map(|x| -(x - 0.5).powi(2)).collect();
            let f = |t: &Tensor| Vec::<f32>::try_from(&t.flatten(0, -1)).unwrap();
            b.push_step(&f(&obs), &f(&a), &f(&lp), &f(&v), &r, &done, &[false; 16]).unwrap();
        }
        b
    }

    /// A synthetic two-step rollout on a bandit: actions near +0.5 are rewarded, so updates move
    /// the mean there; save → load continues bit for bit.
    #[test]
    fn learns_a_bandit_and_resumes_exactly() {
        let make = |seed| {
            Ppo::new(
                PpoConfig { epochs: 4, minibatch_size: 16, actor_lr: 3e-3, ..PpoConfig::default() },
                2,
                1,
                Device::Cpu,
                seed,
            )
            .unwrap()
        };
        let rollout = |agent: &mut Ppo| bandit_rollout(agent, [true; 16]);
        let mut agent = make(1);
        for k in 0..30 {
            let b = rollout(&mut agent);
            let m = agent.update_rollout(&b, k * 64, 30 * 64);
            assert!(m.iter().all(|(n, v)| v.is_finite() || *n == "explained_variance"), "{m:?}");
        }
        let a = agent.act(&Tensor::ones([1, 2], (Kind::Float, Device::Cpu)), true).double_value(&[0, 0]);
        assert!((a - 0.5).abs() < 0.15, "mean action {a}");
        // Exact resume through save/load.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ppo.ot");
        agent.save(&path).unwrap();
        let mut other = make(9);
        other.load(&path).unwrap();
        let (b1, b2) = (rollout(&mut agent), rollout(&mut other));
        assert_eq!(b1, b2);
        assert_eq!(agent.update_rollout(&b1, 0, 100), other.update_rollout(&b2, 0, 100));
        for ((n, x), (_, y)) in agent.named_tensors().iter().zip(other.named_tensors()) {
            assert!(x.equal(&y), "{n}");
        }
    }

    /// `dynamic` reward scaling: the update equals a `constant` agent's update on rewards
    /// pre-scaled by a fresh [`ReturnStdScaler`] (so the scaling happens before GAE, in time
    /// order, continuing across rollouts); its running state is saved with the agent and a
    /// loaded agent continues bit for bit, and `load_parts(["reward_scaling"])` takes only it.
    #[test]
    fn dynamic_reward_scaling_is_applied_and_resumes_exactly() {
        let cfg =
            PpoConfig { epochs: 2, minibatch_size: 16, reward_scaling: RewardScaling::Dynamic, ..PpoConfig::default() };
        let make = |cfg: &PpoConfig, seed| Ppo::new(cfg.clone(), 2, 1, Device::Cpu, seed).unwrap();
        let (mut dynamic, mut constant) =
            (make(&cfg, 3), make(&PpoConfig { reward_scaling: RewardScaling::Constant, ..cfg.clone() }, 3));
        let mut reference = ReturnStdScaler::new(cfg.gamma);
        let mut done = [false; 16];
        done[3] = true;
        for k in 0..3 {
            let b = bandit_rollout(&mut dynamic, done);
            let mut scaled = bandit_rollout(&mut constant, done);
            assert_eq!(b, scaled, "same seed, same rollout");
            scaled.rewards = reference.scale_rollout(&scaled.rewards, &scaled.done, scaled.envs);
            let (m1, m2) = (dynamic.update_rollout(&b, k * 64, 1000), constant.update_rollout(&scaled, k * 64, 1000));
            assert_eq!(m1[..m2.len()], m2[..], "rollout {k}");
            assert_eq!(dynamic.reward_scaler(), Some(&reference));
        }
        assert!(reference.stats()[0] == 3.0 * 64.0 && reference.returns()[3] == 0.0 && reference.returns()[0] != 0.0);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ppo.ot");
        dynamic.save(&path).unwrap();
        let mut other = make(&cfg, 77);
        other.load(&path).unwrap();
        assert_eq!(other.reward_scaler(), dynamic.reward_scaler());
        let (b1, b2) = (bandit_rollout(&mut dynamic, done), bandit_rollout(&mut other, done));
        assert_eq!(dynamic.update_rollout(&b1, 0, 100), other.update_rollout(&b2, 0, 100));
        // Only the scaling state, by part.
        let mut fresh = make(&cfg, 5);
        fresh.load_parts(&path, &["reward_scaling"]).unwrap();
        assert_eq!(fresh.reward_scaler().unwrap().stats(), reference.stats());
        assert!(
            make(&PpoConfig::default(), 5).load_parts(&path, &["reward_scaling"]).is_err(),
            "a constant-scaling agent has no such part"
        );
    }

    /// `store_clamped_action` (Uni-O4, fidelity-audit-2 E4): the stored action is the sample
    /// clamped to [−1, 1], and the stored log-probability is the Gaussian's at that clamped
    /// action. Without it (CleanRL) the same seed stores the unclamped sample and its own
    /// log-probability. With σ = 1 at the start, about a third of the coordinates leave
    /// [−1, 1], so both cases occur.
    #[test]
    fn store_clamped_action_stores_the_clamp_and_its_log_prob() {
        let make = |clamped| {
            Ppo::new(PpoConfig { store_clamped_action: clamped, ..PpoConfig::default() }, 3, 2, Device::Cpu, 11)
                .unwrap()
        };
        let (mut off, mut on) = (make(false), make(true));
        let obs = AgentRng::new(12).normal(&[256, 3], Device::Cpu);
        let ((a0, lp0, v0), (a1, lp1, v1)) = (off.act_value(&obs), on.act_value(&obs));
        assert!(v0.equal(&v1));
        let outside = a0.abs().gt(1.0);
        let rows_out = outside.any_dim(1, false);
        let n_out = rows_out.sum(Kind::Int64).int64_value(&[]);
        assert!(n_out > 20 && n_out < 236, "{n_out} of 256 rows have a coordinate outside [−1, 1]");
        assert!(a1.equal(&a0.clamp(-1.0, 1.0)), "the stored action is the clamped sample");
        // log N(a; μ, σ²) at the clamped action, written out: μ = the actor's mean, σ = e^{log σ}.
        let mean = on.actor.net.mean(&obs, None).detach();
        let ls = on.actor.net.log_std().detach();
        let want = ((&a1 - &mean) * (-&ls).exp()).square() * (-0.5) - &ls - 0.918_938_533_204_672_7;
        let want = want.sum_dim_intlist(-1, false, Kind::Float);
        assert!(
            (&lp1 - &want).abs().max().double_value(&[]) < 1e-5,
            "the stored log-probability is that of the clamped action"
        );
        // Rows inside the box are untouched; rows outside it store a higher density (closer to μ).
        let inside = rows_out.logical_not();
        assert!(lp1.masked_select(&inside).equal(&lp0.masked_select(&inside)));
        assert!(lp1.masked_select(&rows_out).gt_tensor(&lp0.masked_select(&rows_out)).all().int64_value(&[]) == 1);
    }

    /// `reward_clip` clips the reward GAE sees after the scaling (CleanRL's ±10 after
    /// `NormalizeReward`): an agent with `reward_scale = 100, reward_clip = 1` updates exactly as
    /// an unscaled, unclipped agent given `clamp(100 r, −1, 1)`.
    #[test]
    fn reward_clip_clips_the_scaled_reward() {
        let base = PpoConfig { epochs: 2, minibatch_size: 16, ..PpoConfig::default() };
        let (mut clipped, mut plain) = (
            Ppo::new(PpoConfig { reward_scale: 100.0, reward_clip: 1.0, ..base.clone() }, 2, 1, Device::Cpu, 3)
                .unwrap(),
            Ppo::new(base, 2, 1, Device::Cpu, 3).unwrap(),
        );
        let done = [true; 16];
        for k in 0..2 {
            let b = bandit_rollout(&mut clipped, done);
            let mut pre = bandit_rollout(&mut plain, done);
            assert_eq!(b, pre, "same seed, same rollout");
            assert!(
                b.rewards.iter().any(|r| r * 100.0 < -1.0) && b.rewards.iter().any(|r| r * 100.0 > -1.0),
                "the clip engages on some rows only"
            );
            pre.rewards = pre.rewards.iter().map(|r| (r * 100.0f32).clamp(-1.0, 1.0)).collect();
            assert_eq!(
                clipped.update_rollout(&b, k * 64, 1000),
                plain.update_rollout(&pre, k * 64, 1000),
                "rollout {k}"
            );
        }
        assert!(PpoConfig { reward_clip: -1.0, ..PpoConfig::default() }.validate().is_err());
    }

    /// `critic_head = "relu"`: V is the linear head's output through a ReLU (same weights).
    #[test]
    fn relu_critic_head_clamps_the_linear_value() {
        let lin = Ppo::new(PpoConfig::default(), 3, 1, Device::Cpu, 4).unwrap();
        let mut relu =
            Ppo::new(PpoConfig { critic_head: ValueHead::Relu, ..PpoConfig::default() }, 3, 1, Device::Cpu, 4).unwrap();
        let mut lin = lin;
        let obs = Tensor::from_slice(&[0.3f32, -1.0, 2.0, -2.0, 0.5, -0.7, 1.0, 1.0, -3.0, 0.0, 0.2, 0.9]).view([4, 3]);
        let (v_lin, v_relu) = (lin.value(&obs), relu.value(&obs));
        assert!(v_relu.equal(&v_lin.relu()));
        assert!(
            v_lin.lt(0.0).any().int64_value(&[]) == 1 && v_lin.gt(0.0).any().int64_value(&[]) == 1,
            "both signs occur: {v_lin}"
        );
    }
}
