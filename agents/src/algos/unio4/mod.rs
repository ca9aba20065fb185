//! Uni-O4 (Lei, He, Lu, Hu, Gao, Xu, "Uni-O4: Unifying Online and Offline Deep Reinforcement
//! Learning with Multi-Step On-Policy Optimization", ICLR 2024, arXiv 2311.03351).
//!
//! Facts: ../shared/reference/algorithms-next.md §1 (checked against `Lei-Kun/Uni-O4@1eecc45`:
//! `main.py`, `critic.py`, `BC_ensemble.py`, `abppo.py`, `dynamics_eval.py`,
//! `transition_model/`, `ppo_finetune/`) and algorithms.md §2. The offline pipeline, each stage
//! run to completion before the next (the runner caches each in the run directory,
//! `experiments/src/run/unio4.rs`):
//! 1. [`critic`]: IQL-style twin Q and expectile V on the dataset with the mask
//!    `m = 1 − (terminal ∨ timeout)` of the official code ([`MaskRule::Code`]; the D4RL-standard
//!    `m = 1 − terminal` is [`MaskRule::D4rl`]);
//! 2. [`dynamics`]: a 7-member Gaussian ensemble of `(Δs, r)` from standardized `(s, a)`,
//!    per-member bootstrap, holdout early stopping, 5 elites — the model for OPE;
//! 3. [`bc`]: a behaviour-cloning ensemble of `n = 4` Gaussian policies, then BPPO on each
//!    member (clipped surrogate on `A = min Q − V`, clip and LR schedules), gated by
//! 4. [`ope`]: AM-Q every `eval_step` steps — each member's π_old is replaced by π only when its
//!    model-based score improved;
//! 5. the hand-over ([`handover_candidates`]): the top 3 members by their last AM-Q score; the
//!    runner then picks the one with the best short real evaluation and continues online with
//!    PPO ([`crate::ppo`]) from that member and the offline V, with the dataset's frozen
//!    state normalization.
//!
//! Deviations from the official code: the policies have a state-independent log σ (one
//! parameter per member and action dimension; the code's network outputs log σ through a tanh
//! into [−5, 0]), which is also what the online PPO uses, so the hand-over copies the member
//! exactly and there is no double-tanh σ change; the timeout mask is applied to the last kept
//! transition of each episode (our transitions drop D4RL's dangling timeout row, the code keeps
//! it with `s′ = obs[t+1]` of the next episode).

pub mod bc;
pub mod critic;
pub mod dynamics;
pub mod ope;
pub mod sarsa;
pub mod value_refit;

use crate::checkpoint::Stateful;
use crate::nn::{Activation, GaussianConfig, MlpConfig, ObsNormConfig, ObsNormMode};
use crate::ppo::{AdvantageNorm, PpoConfig, RewardScaling, ValueHead};
use crate::{AgentError, Metrics};
use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

/// Which episode ends stop bootstrapping in the offline critic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MaskRule {
    /// `m = 1 − (terminal ∨ timeout)`: the official code (time limits also cut the target).
    #[default]
    Code,
    /// `m = 1 − terminal`: the D4RL convention (time limits bootstrap).
    D4rl,
}

/// Uni-O4's offline settings; defaults are the official locomotion values (§1.4).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Unio4Config {
    /// The critic stage.
    pub critic: critic::CriticConfig,
    /// The dynamics-model stage.
    pub dynamics: dynamics::DynamicsConfig,
    /// The behaviour-cloning ensemble and BPPO stages.
    pub policy: bc::PolicyConfig,
    /// OPE (AM-Q) settings.
    pub ope: ope::OpeConfig,
    /// Standardize states with the dataset's mean and std for the critic and policies (and
    /// online); the dynamics model always sees raw states (standardizing its own inputs).
    pub state_norm: bool,
    /// Members handed to the real-env evaluation at the hand-over (top-k by last AM-Q score).
    pub handover_top_k: usize,
    /// The online phase: PPO from the chosen member and the offline V (the actor and critic
    /// must have the offline networks' shapes). A table given here is laid over Uni-O4's online
    /// defaults ([`online_defaults`]), not over plain PPO's: keys it leaves out (the dataset's
    /// frozen normalization, advantages standardized over the rollout, …) stay Uni-O4's.
    #[serde(deserialize_with = "online_over_defaults")]
    pub online: PpoConfig,
    /// Start the online critic from a fresh V regressed on the dataset's Monte-Carlo returns of
    /// rescaled rewards instead of the offline IQL V (the hopper scripts' `--scale_strategy
    /// number`, the halfcheetah scripts' `dynamic`); absent = the offline V.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value_refit: Option<value_refit::ValueRefitConfig>,
    /// Stage steps between saves of a stage in progress (critic, BC, BPPO), so a killed run
    /// continues the stage instead of restarting it.
    pub save_every: u64,
    /// Stage steps between logged training metrics.
    pub log_every: u64,
}

impl Default for Unio4Config {
    fn default() -> Self {
        let policy = bc::PolicyConfig::default();
        let critic = critic::CriticConfig::default();
        Self {
            online: online_defaults(&policy.actor, &critic.value),
            critic,
            dynamics: dynamics::DynamicsConfig::default(),
            policy,
            ope: ope::OpeConfig::default(),
            state_norm: true,
            handover_top_k: 3,
            value_refit: None,
            save_every: 20_000,
            log_every: 1000,
        }
    }
}

impl Unio4Config {
    /// The keys of the agent it builds, the online PPO ([`PpoConfig::metric_keys`]); the offline
    /// stages log under `unio4/…` from the runner, not through the agent.
    pub fn metric_keys(&self) -> crate::MetricKeys {
        self.online_config().metric_keys()
    }
}

/// Uni-O4's online PPO defaults (§1.2): 2048-step rollouts, minibatch 128, K = 30, actor LR 2e-5,
/// critic LR 2e-4, ε = 0.05 for the ratio and the value, entropy 0.01, grad-norm 0.5, Adam ε 1e-5,
/// LR decay over 3e6 env steps, advantages standardized over the rollout, the dataset's
/// frozen normalization, the offline networks' shapes, and the sampled action clamped to ±1
/// before it and its log-probability are stored (`ppo_finetune/ppo.py choose_action`;
/// fidelity-audit-2 E4).
pub fn online_defaults(actor: &GaussianConfig, value: &MlpConfig) -> PpoConfig {
    PpoConfig {
        actor: actor.clone(),
        critic: value.clone(),
        obs_norm: ObsNormConfig { mode: ObsNormMode::Dataset, clip: 0.0, eps: 1e-20 },
        clip: 0.05,
        entropy_coef: 0.01,
        actor_lr: 2e-5,
        critic_lr: 2e-4,
        epochs: 30,
        minibatch_size: 128,
        advantage_norm: AdvantageNorm::Rollout,
        lr_decay_steps: 3_000_000,
        store_clamped_action: true,
        ..PpoConfig::default()
    }
}

/// Deserialize `online` as its table laid over [`online_defaults`] (tables merged key by key,
/// recursively), so a preset that sets a few PPO keys keeps Uni-O4's values for the rest.
fn online_over_defaults<'de, D: serde::Deserializer<'de>>(d: D) -> Result<PpoConfig, D::Error> {
    use serde::de::Error;
    fn lay(base: &mut toml::Value, over: toml::Value) {
        match (base, over) {
            (toml::Value::Table(b), toml::Value::Table(o)) => {
                for (k, v) in o {
                    match b.get_mut(&k) {
                        Some(slot) => lay(slot, v),
                        None => {
                            b.insert(k, v);
                        }
                    }
                }
            }
            (slot, v) => *slot = v,
        }
    }
    let given = toml::Value::deserialize(d)?;
    let mut base = toml::Value::try_from(online_defaults(
        &bc::PolicyConfig::default().actor,
        &critic::CriticConfig::default().value,
    ))
    .map_err(D::Error::custom)?;
    lay(&mut base, given);
    base.try_into().map_err(D::Error::custom)
}

impl Unio4Config {
    /// Reject settings that cannot work, naming the field.
    pub fn validate(&self) -> Result<(), AgentError> {
        self.critic.validate()?;
        self.dynamics.validate()?;
        self.policy.validate()?;
        self.ope.validate()?;
        self.online.validate()?;
        if self.handover_top_k == 0 || self.save_every == 0 || self.log_every == 0 {
            return Err(AgentError::Config("unio4.handover_top_k, save_every and log_every must be ≥ 1".into()));
        }
        if self.save_every % self.log_every != 0 || self.save_every % self.ope.eval_step != 0 {
            return Err(AgentError::Config(format!(
                "unio4.save_every ({}) must be a multiple of log_every ({}) and of ope.eval_step ({})",
                self.save_every, self.log_every, self.ope.eval_step
            )));
        }
        if self.state_norm && self.online.obs_norm.mode != ObsNormMode::Dataset {
            return Err(AgentError::Config(format!(
                "unio4.online.obs_norm.mode must be \"dataset\" when unio4.state_norm = true (the members are trained on states standardized with the dataset's statistics), found {:?}",
                self.online.obs_norm.mode
            )));
        }
        if self.online.actor.mlp != self.policy.actor.mlp
            || self.online.actor.squash_mean != self.policy.actor.squash_mean
        {
            return Err(AgentError::Config(
                "unio4.online.actor must have the shape of unio4.policy.actor (the chosen member is copied into it)"
                    .into(),
            ));
        }
        match &self.value_refit {
            None if self.online.critic != self.critic.value => {
                return Err(AgentError::Config(
                    "unio4.online.critic must have the shape of unio4.critic.value (the offline V is copied into it)"
                        .into(),
                ));
            }
            Some(refit) => {
                refit.validate()?;
                if self.online.critic != refit.value {
                    return Err(AgentError::Config("unio4.online.critic must have the shape of unio4.value_refit.value (the refit V is copied into it)".into()));
                }
                if self.online.reward_scale != refit.reward_scale {
                    return Err(AgentError::Config(format!("unio4.online.reward_scale ({}) must equal unio4.value_refit.reward_scale ({}): the refit V predicts returns of rewards scaled by it", self.online.reward_scale, refit.reward_scale)));
                }
                if self.online.reward_scaling != refit.reward_scaling || self.online.critic_head != refit.head {
                    return Err(AgentError::Config(format!(
                        "unio4.online.reward_scaling and critic_head ({:?}, {:?}) must equal unio4.value_refit.reward_scaling and head ({:?}, {:?}): the refit V is handed over as the online critic",
                        self.online.reward_scaling, self.online.critic_head, refit.reward_scaling, refit.head
                    )));
                }
                if refit.reward_scaling == RewardScaling::Dynamic && self.online.gamma != refit.gamma {
                    return Err(AgentError::Config(format!("unio4.online.gamma ({}) must equal unio4.value_refit.gamma ({}) under `dynamic` scaling: the running return statistic continues online", self.online.gamma, refit.gamma)));
                }
            }
            None => {
                if self.online.reward_scaling != RewardScaling::Constant || self.online.critic_head != ValueHead::Linear
                {
                    return Err(AgentError::Config("unio4.online.reward_scaling = \"dynamic\" and critic_head = \"relu\" need unio4.value_refit (the offline V is linear and learned on unscaled rewards)".into()));
                }
            }
        }
        Ok(())
    }

    /// The online PPO's observation normalization follows the offline `state_norm`.
    pub fn online_config(&self) -> PpoConfig {
        let mut c = self.online.clone();
        if !self.state_norm {
            c.obs_norm.mode = ObsNormMode::None;
        }
        c
    }
}

/// The whole dataset as tensors on one device, what every stage samples from: `obs`,
/// `next_obs` `[N, o]` raw, `action` `[N, a]` in `[-1, 1]`, `reward` `[N]`, `terminal` `[N]`,
/// `episode_end` `[N]` (1 on the last kept transition of each episode).
pub struct Data {
    /// `[N, o]`.
    pub obs: Tensor,
    /// `[N, a]`.
    pub action: Tensor,
    /// `[N]`.
    pub reward: Tensor,
    /// `[N, o]`.
    pub next_obs: Tensor,
    /// `[N]`, 1 at true terminations.
    pub terminal: Tensor,
    /// `[N]`, 1 at the last transition of each episode (terminated, timed out, or cut).
    pub episode_end: Tensor,
    /// `[N, a]`: the dataset's next action `a′` (the next row's action within the episode; the
    /// row's own action at an episode end, where the code's mask never bootstraps), for SARSA.
    pub next_action: Tensor,
    /// Per-dimension state mean and std `[o]` (std floored at 1e-3).
    pub obs_mean: Tensor,
    /// See `obs_mean`.
    pub obs_std: Tensor,
}

impl Data {
    /// From row-major host columns.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        obs: &[f32],
        action: &[f32],
        reward: &[f32],
        next_obs: &[f32],
        terminal: &[f32],
        episode_end: &[f32],
        obs_dim: usize,
        act_dim: usize,
        device: Device,
    ) -> Result<Self, AgentError> {
        let n = reward.len();
        let bad = |what: &str, found: usize, want: usize| {
            AgentError::Config(format!("unio4 data: {what} has {found} values, expected {want}"))
        };
        for (what, len, want) in [
            ("obs", obs.len(), n * obs_dim),
            ("action", action.len(), n * act_dim),
            ("next_obs", next_obs.len(), n * obs_dim),
            ("terminal", terminal.len(), n),
            ("episode_end", episode_end.len(), n),
        ] {
            if len != want {
                return Err(bad(what, len, want));
            }
        }
        if n < 2 {
            return Err(AgentError::Config(format!("unio4 data: expected at least 2 transitions, found {n}")));
        }
        let t = |v: &[f32], w: usize| Tensor::from_slice(v).view([n as i64, w as i64]).to_device(device);
        // a′_t = a_{t+1} inside an episode (the code takes act[t+1] everywhere; at an episode
        // end that row is another episode's, and the code's mask zeroes its term anyway).
        let next_action: Vec<f32> = (0..n)
            .flat_map(|i| {
                let j = if episode_end[i] == 0.0 && i + 1 < n { i + 1 } else { i };
                action[j * act_dim..(j + 1) * act_dim].iter().copied()
            })
            .collect();
        let obs_t = t(obs, obs_dim);
        let obs_mean = obs_t.mean_dim(0, false, Kind::Float);
        let obs_std = obs_t.std_dim(0, false, false).clamp_min(1e-3);
        Ok(Self {
            obs: obs_t,
            action: t(action, act_dim),
            reward: t(reward, 1).squeeze_dim(-1),
            next_obs: t(next_obs, obs_dim),
            terminal: t(terminal, 1).squeeze_dim(-1),
            episode_end: t(episode_end, 1).squeeze_dim(-1),
            next_action: t(&next_action, act_dim),
            obs_mean,
            obs_std,
        })
    }

    /// Number of transitions.
    pub fn len(&self) -> usize {
        self.reward.size()[0] as usize
    }

    /// Never true (a `Data` holds at least 2 transitions).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bootstrap mask `m` `[N]`: `1 − (terminal ∨ episode_end)` ([`MaskRule::Code`]) or
    /// `1 − terminal` ([`MaskRule::D4rl`]).
    pub fn mask(&self, rule: MaskRule) -> Tensor {
        match rule {
            MaskRule::Code => 1.0 - self.terminal.maximum(&self.episode_end),
            MaskRule::D4rl => 1.0 - &self.terminal,
        }
    }

    /// States as the critic and policies see them: standardized when `on`.
    pub fn norm_obs(&self, s: &Tensor, on: bool) -> Tensor {
        if on {
            (s - &self.obs_mean) / &self.obs_std
        } else {
            s.shallow_clone()
        }
    }
}

/// The offline critic stage BPPO and AM-Q read: IQL's ([`critic::Critic`]) or the non-IQL one
/// ([`sarsa::SarsaCritic`]), chosen by `critic.path`; its state saves and loads as
/// [`Stateful`].
pub trait OfflineCritic: Stateful {
    /// One stage step on a batch of `data`.
    fn update(&mut self, data: &Data, state_norm: bool) -> Metrics;
    /// Stage steps done.
    fn steps(&self) -> u64;
    /// Stage steps in all.
    fn total_steps(&self) -> u64;
    /// The Q BPPO's advantage and AM-Q use, `[B]`, no gradients: `min_j Q_j` (IQL) or `Q` (SARSA).
    fn q(&self, s: &Tensor, a: &Tensor) -> Tensor;
    /// `V(s)` `[B]`, no gradients.
    fn value(&self, s: &Tensor) -> Tensor;
    /// V's parameters (`value/…`, handed to the online PPO when no refit replaces it).
    fn value_params(&self) -> &crate::nn::ParamSet;
    /// BPPO's weight of the standardized advantage: `Some(ω)` gives `ω` to `Â > 0` and `1 − ω`
    /// to the rest (the non-IQL path), `None` leaves `Â`.
    fn advantage_weight(&self) -> Option<f64>;
}

/// The configured offline critic for `data`'s shapes.
pub fn offline_critic(
    cfg: &critic::CriticConfig,
    data: &Data,
    device: Device,
    seed: u64,
) -> Result<Box<dyn OfflineCritic>, AgentError> {
    let (o, a) = (data.obs.size()[1], data.action.size()[1]);
    Ok(match cfg.path {
        critic::CriticPath::Iql => Box::new(critic::Critic::new(cfg.clone(), o, a, device, seed)?),
        critic::CriticPath::Sarsa => Box::new(sarsa::SarsaCritic::new(cfg.clone(), data, device, seed)?),
    })
}

/// The members the hand-over evaluates in the real env: the `k` highest last AM-Q scores, every
/// member tied with the k-th kept (the official rule), best first.
pub fn handover_candidates(last_scores: &[f64], k: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..last_scores.len()).collect();
    order.sort_by(|&a, &b| last_scores[b].total_cmp(&last_scores[a]));
    let Some(&kth) = order.get(k.min(order.len()).saturating_sub(1)) else { return Vec::new() };
    order.into_iter().filter(|&i| last_scores[i] >= last_scores[kth]).collect()
}

/// The hidden layers' activation of the default policy (ReLU; `tanh` for halfcheetah-medium and
/// -medium-replay in the official scripts).
pub fn policy_mlp(hidden: Vec<i64>, activation: Activation) -> MlpConfig {
    MlpConfig { hidden, activation, ..MlpConfig::default() }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Test 3 of §1.8: a 1-D reach task (s′ = s + 0.1 a, r = −|s′ − 1|, 50-step episodes from
    /// s₀ ~ U(−1, 0)) and three linear-gain policies a = clip(k (1 − s)), k ∈ {0.2, 1, 5}, whose
    /// true returns increase with k. A critic fitted by this module's IQL stage on their mixed,
    /// noisy data, and AM-Q with the exact dynamics (H = 50), rank the three in the same order.
    #[test]
    fn am_q_ranks_three_reach_policies_by_true_return() {
        use crate::rng::AgentRng;
        let gains = [0.2f32, 1.0, 5.0];
        let pol = |k: f32, s: f32| (k * (1.0 - s)).clamp(-1.0, 1.0);
        let mut rng = AgentRng::new(11);
        let (mut obs, mut act, mut rew, mut next, mut end) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut true_return = [0.0f64; 3];
        for (g, &k) in gains.iter().enumerate() {
            for ep in 0..30 {
                let mut s = -(rng.uniform() as f32);
                let (mut s_true, mut ret) = (s, 0.0);
                for t in 0..50 {
                    let a = (pol(k, s) + 0.3 * rng.normal_vec(1)[0]).clamp(-1.0, 1.0);
                    let s2 = s + 0.1 * a;
                    (
                        obs.push(s),
                        act.push(a),
                        rew.push(-(s2 - 1.0).abs()),
                        next.push(s2),
                        end.push(if t == 49 { 1.0 } else { 0.0 }),
                    );
                    s = s2;
                    // The noiseless policy from the same start, for its true return.
                    s_true += 0.1 * pol(k, s_true);
                    ret += -(s_true - 1.0).abs() as f64;
                }
                true_return[g] += ret / 30.0;
                let _ = ep;
            }
        }
        assert!(true_return[0] < true_return[1] && true_return[1] < true_return[2], "{true_return:?}");
        let zeros = vec![0.0f32; rew.len()];
        let d = Data::new(&obs, &act, &rew, &next, &zeros, &end, 1, 1, Device::Cpu).unwrap();
        let small = MlpConfig { hidden: vec![32, 32], ..MlpConfig::default() };
        let cfg = critic::CriticConfig {
            q: small.clone(),
            value: small,
            lr: 1e-3,
            batch_size: 256,
            ..critic::CriticConfig::default()
        };
        let mut c = critic::Critic::new(cfg, 1, 1, Device::Cpu, 3).unwrap();
        for _ in 0..1000 {
            c.update(&d, false);
        }
        let start = d.obs.index_select(0, &rng.indices(d.len(), 512, true, Device::Cpu));
        let scores: Vec<f64> = gains
            .iter()
            .map(|&k| {
                let mut policy = |s: &Tensor| (s.neg() + 1.0).g_mul_scalar(k as f64).clamp(-1.0, 1.0);
                let mut q = |s: &Tensor, a: &Tensor| c.min_q(s, a);
                let mut step = |s: &Tensor, a: &Tensor| s + a * 0.1;
                let done = |s: &Tensor| Tensor::zeros([s.size()[0]], (Kind::Bool, Device::Cpu));
                ope::am_q(&start, 50, ope::Rollout { policy: &mut policy, q: &mut q, step: &mut step, done: &done })
            })
            .collect();
        assert!(scores[0] < scores[1] && scores[1] < scores[2], "AM-Q {scores:?} against true returns {true_return:?}");
    }

    /// An `online` table that sets a few PPO keys keeps Uni-O4's online defaults for the rest
    /// (it used to fall back to plain PPO's: running normalization, per-minibatch advantages, so
    /// the members, trained on dataset-standardized states, were evaluated and fine-tuned on raw
    /// ones); a normalization other than the dataset's is refused while `state_norm` is on.
    #[test]
    fn an_online_table_is_laid_over_unio4s_online_defaults() {
        let cfg: Unio4Config = toml::from_str("[online]\nepochs = 10\nactor_lr = 1e-5\nactor = { mlp = { hidden = [256, 256, 256] }, log_std_min = -5.0 }").unwrap();
        let want = online_defaults(&bc::PolicyConfig::default().actor, &critic::CriticConfig::default().value);
        assert_eq!(cfg.online.obs_norm, ObsNormConfig { mode: ObsNormMode::Dataset, clip: 0.0, eps: 1e-20 });
        assert_eq!(cfg.online.advantage_norm, AdvantageNorm::Rollout);
        assert_eq!((cfg.online.epochs, cfg.online.actor_lr, cfg.online.clip), (10, 1e-5, 0.05));
        assert_eq!(cfg.online.actor, want.actor, "nested tables merge key by key");
        cfg.validate().unwrap();
        assert_eq!(cfg.online_config().obs_norm.mode, ObsNormMode::Dataset);
        let running: Unio4Config = toml::from_str("[online]\nobs_norm = { mode = \"running\" }").unwrap();
        let err = running.validate().unwrap_err().to_string();
        assert!(err.contains("unio4.online.obs_norm.mode") && err.contains("Running"), "{err}");
        let off: Unio4Config =
            toml::from_str("state_norm = false\n[online]\nobs_norm = { mode = \"running\" }").unwrap();
        off.validate().unwrap();
        assert_eq!(off.online_config().obs_norm.mode, ObsNormMode::None);
        assert!(
            toml::from_str::<Unio4Config>("[online]\nepoch = 3").unwrap_err().to_string().contains("epoch"),
            "unknown keys are still refused"
        );
    }

    /// fidelity-audit-2 E4: Uni-O4's online PPO stores the clamped action by default, also under
    /// an `online` table that does not mention it, and a table can turn it off; plain PPO's
    /// default (CleanRL) stores the unclamped sample.
    #[test]
    fn online_phase_stores_the_clamped_action_by_default() {
        assert!(Unio4Config::default().online.store_clamped_action);
        assert!(!PpoConfig::default().store_clamped_action);
        let cfg: Unio4Config = toml::from_str("[online]\nepochs = 10").unwrap();
        assert!(cfg.online.store_clamped_action && cfg.online_config().store_clamped_action);
        let off: Unio4Config = toml::from_str("[online]\nstore_clamped_action = false").unwrap();
        assert!(!off.online.store_clamped_action);
    }

    #[test]
    fn handover_keeps_ties_and_orders_best_first() {
        assert_eq!(handover_candidates(&[1.0, 5.0, 3.0, 4.0], 3), vec![1, 3, 2]);
        assert_eq!(handover_candidates(&[2.0, 5.0, 2.0, 4.0], 3), vec![1, 3, 0, 2]);
        assert_eq!(handover_candidates(&[1.0, 2.0], 3), vec![1, 0]);
    }

    #[test]
    fn defaults_validate_and_mask_rules_differ_at_a_timeout() {
        Unio4Config::default().validate().unwrap();
        let d =
            Data::new(&[0.0, 1.0], &[0.0, 0.0], &[1.0, 1.0], &[1.0, 2.0], &[0.0, 0.0], &[0.0, 1.0], 1, 1, Device::Cpu)
                .unwrap();
        assert_eq!(Vec::<f32>::try_from(&d.mask(MaskRule::Code)).unwrap(), vec![1.0, 0.0]);
        assert_eq!(Vec::<f32>::try_from(&d.mask(MaskRule::D4rl)).unwrap(), vec![1.0, 1.0]);
    }
}
