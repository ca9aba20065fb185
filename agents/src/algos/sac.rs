//! Soft Actor-Critic with a batched critic ensemble.
//!
//! Papers: Haarnoja et al., "Soft Actor-Critic Algorithms and Applications", arXiv 1812.05905
//! (SAC with learned temperature); the ensemble options follow REDQ (Chen et al., arXiv
//! 2101.05982) as used by RLPD (Ball et al., arXiv 2302.02948) and WSRL (Zhou et al., arXiv
//! 2412.07762). Facts: ../shared/reference/algorithms.md §6.5 (SAC defaults), §1.3–1.4 (WSRL's
//! 10-critic, subset-2, LayerNorm critic), §6.4 (RLPD). Reference code consulted for facts:
//! jaxrl/rlpd `sac_learner.py`, WSRL `agents/sac.py`, CleanRL `sac_continuous_action.py`.
//!
//! One `update(batch)` does:
//! 1. `critic_steps` critic steps, each on its own minibatch of the batch (WSRL's and RLPD's
//!    high-UTD split): `a' ~ π(·|s')`, a random subset `I` of `M` target members,
//!    `y = r + γ (1 − d) (min_{i∈I} Q̄_i(s', a') − [backup_entropy] α log π(a'|s'))`
//!    (with `max_target_backup`: K next actions, the max over them of the subset-min),
//!    `L_Q = mean_{i,b} (Q_i(s_b, a_b) − y_b)²`, then Polyak `θ̄ ← (1 − τ) θ̄ + τ θ`;
//! 2. one actor step, on the whole batch (SAC, WSRL) or the last minibatch (RLPD):
//!    `L_π = E_s[α log π(ã|s) − agg_i Q_i(s, ã)]`, `ã` reparameterized, `agg` = min over all E
//!    members (SAC, WSRL) or their mean (RLPD);
//! 3. one temperature step: `L_α = −α (E[log π(ã|s)] + H̄)`, `H̄ = target_entropy_per_dim · |A|`.
//!
//! Minibatch `i` of `k` is rows `i, i + k, i + 2k, …` (a strided view), so each keeps a mixed
//! batch's offline/online split, as RLPD's interleaved batches do. The actor does not move during
//! the critic steps, so all k minibatches' next actions are drawn in one pass over the batch's
//! `s'` (one draw of ε) — except with `max_target_backup`, or `zero_grad_adam_steps`, whose idle
//! steps move the actor between critic steps.
//!
//! Plain SAC is E = M = 2, entropy in the backup, one critic step. WSRL's online agent is
//! E = 10, M = 2 with replacement, LayerNorm, no backup entropy, 4 critic steps, softplus α.
//! RLPD ([`super::rlpd`]) is E = 10, M = 2 without replacement, mean actor, 20 critic steps and
//! the actor on the last one. CQL and Cal-QL ([`super::cql`]) add a term to the critic loss
//! through [`Sac::update_with`].
//! Deviation: the temperature is estimated on the actor's samples at `s` (SAC, CleanRL), not at
//! `s'` as WSRL does; it saves a forward pass and targets the same entropy.

use super::check::{self, require};
use crate::agent::with_bonus;
use crate::checkpoint::{progress_in_fields, Part, Stateful};
use crate::nn::critic::{
    actor_through_critic, critic_and_target, critic_values, q_against_returns, soft_td_target, state_action, Backup,
    CriticParts, CriticPass, CriticTerm, TdReduce,
};
use crate::nn::{
    EnsembleMlp, Frozen, MlpConfig, PolicyGraph, TanhGaussianActor, TanhGaussianConfig, Temperature, TemperatureForm,
    Trained,
};
use crate::rng::AgentRng;
use crate::{Agent, AgentError, DeterministicPolicy, Metrics, Phase, RewardBonus};
use o2o_datasets::TransitionBatch;
use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

pub use crate::nn::critic::QReduce;

/// Which rows the actor and temperature steps use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActorBatch {
    /// The whole batch (SAC, WSRL).
    Whole,
    /// The last critic minibatch only (RLPD's UTD schedule).
    LastSlice,
}

/// SAC hyperparameters; defaults are the SAC paper / jaxrl values (algorithms.md §6.5).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SacConfig {
    /// Policy network and its log-σ form.
    pub actor: TanhGaussianConfig,
    /// Critic MLP (each ensemble member); WSRL/RLPD set `layer_norm = true`.
    pub critic: MlpConfig,
    /// Ensemble size E.
    pub num_critics: i64,
    /// Target subset size M: the target is the min over M random members of E.
    pub target_subset: i64,
    /// Draw the subset with replacement (WSRL `randint`) or without (RLPD).
    pub subset_with_replacement: bool,
    /// How the actor loss aggregates the E critics.
    pub actor_q: QReduce,
    /// Discount γ.
    pub gamma: f64,
    /// Polyak rate τ.
    pub tau: f64,
    /// Actor learning rate.
    pub actor_lr: f64,
    /// Critic learning rate.
    pub critic_lr: f64,
    /// Temperature learning rate.
    pub temperature_lr: f64,
    /// Initial α.
    pub init_temperature: f64,
    /// α = exp(θ) (`log_alpha`) or softplus(θ) (`softplus`).
    pub temperature_form: TemperatureForm,
    /// Learn α (otherwise it stays at `init_temperature`).
    pub learn_temperature: bool,
    /// Target entropy per action dimension: H̄ = this · |A| (−1 SAC paper; −0.5 RLPD code).
    pub target_entropy_per_dim: f64,
    /// Subtract α log π(a'|s') in the TD target (SAC: yes; WSRL: no).
    pub backup_entropy: bool,
    /// Critic steps per update (UTD): the batch is split into this many minibatches.
    pub critic_steps: i64,
    /// Rows of the actor and temperature steps: `whole` batch or the `last_slice` (RLPD).
    pub actor_batch: ActorBatch,
    /// Max-target backup (CQL / WSRL AntMaze): the target takes the max over K next actions.
    pub max_target_backup: bool,
    /// K, the next actions sampled per state for `max_target_backup`.
    pub max_target_backup_samples: i64,
    /// In updates with several critic steps, give the optimizers without a loss a
    /// zero-gradient Adam step ([`Adam::idle_step`]) as the official WSRL code does (optax
    /// applies every optimizer on every call, fidelity-audit D2): after each critic step the
    /// actor's and the temperature's, after the actor step the critic's (no Polyak then).
    /// The actor and α then move about √5 ≈ 2.2× farther per env step at UTD 4.
    pub zero_grad_adam_steps: bool,
    /// Values of some of the fields above while the agent learns offline (`[agent.offline]`).
    pub offline: PhaseSettings,
    /// Values of some of the fields above once the agent learns online (`[agent.online]`).
    pub online: PhaseSettings,
}

/// Fields of [`SacConfig`] that may take another value in one phase of an offline-to-online
/// run; unset ones keep the agent's own. WSRL's locomotion recipe is CQL with max-target
/// backup offline and plain SAC backups online (fidelity-audit D1):
/// `offline = { max_target_backup = true }`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PhaseSettings {
    /// [`SacConfig::max_target_backup`] in this phase.
    pub max_target_backup: Option<bool>,
    /// [`SacConfig::backup_entropy`] in this phase.
    pub backup_entropy: Option<bool>,
    /// [`SacConfig::critic_steps`] in this phase.
    pub critic_steps: Option<i64>,
    /// [`SacConfig::zero_grad_adam_steps`] in this phase.
    pub zero_grad_adam_steps: Option<bool>,
}

impl Default for SacConfig {
    fn default() -> Self {
        Self {
            actor: TanhGaussianConfig::default(),
            critic: MlpConfig::default(),
            num_critics: 2,
            target_subset: 2,
            subset_with_replacement: false,
            actor_q: QReduce::Min,
            gamma: 0.99,
            tau: 0.005,
            actor_lr: 3e-4,
            critic_lr: 3e-4,
            temperature_lr: 3e-4,
            init_temperature: 1.0,
            temperature_form: TemperatureForm::LogAlpha,
            learn_temperature: true,
            target_entropy_per_dim: -1.0,
            backup_entropy: true,
            critic_steps: 1,
            actor_batch: ActorBatch::Whole,
            max_target_backup: false,
            max_target_backup_samples: 10,
            zero_grad_adam_steps: false,
            offline: PhaseSettings::default(),
            online: PhaseSettings::default(),
        }
    }
}

impl SacConfig {
    /// The WSRL / RLPD-style critic: 10 LayerNorm members, target over a subset of 2.
    pub fn ensemble10() -> Self {
        Self {
            critic: MlpConfig { layer_norm: true, ..MlpConfig::default() },
            num_critics: 10,
            target_subset: 2,
            ..Self::default()
        }
    }

    /// Reject settings that cannot work, naming the field.
    pub fn validate(&self) -> Result<(), AgentError> {
        let (e, m) = (self.num_critics, self.target_subset);
        require(e >= 1, "sac.num_critics", "≥ 1", e)?;
        let subset_ok = m >= 1 && (self.subset_with_replacement || m <= e);
        require(subset_ok, "sac.target_subset", &format!("in 1..={e} (num_critics)"), m)?;
        for (field, k) in [
            ("sac.critic_steps", Some(self.critic_steps)),
            ("sac.offline.critic_steps", self.offline.critic_steps),
            ("sac.online.critic_steps", self.online.critic_steps),
            ("sac.max_target_backup_samples", Some(self.max_target_backup_samples)),
        ] {
            require(k.is_none_or(|k| k >= 1), field, "≥ 1", k.unwrap_or(1))?;
        }
        check::tau_and_gamma("sac", self.tau, self.gamma)?;
        require(self.init_temperature > 0.0, "sac.init_temperature", "> 0", self.init_temperature)?;
        check::dropout("sac.critic.dropout", self.critic.dropout)?;
        check::dropout("sac.actor.mlp.dropout", self.actor.mlp.dropout)
    }
}

/// What one critic step returns, read back once per update: the TD part of the loss
/// `mean (Q − y)²`, `Q(s, a)` of every member `[E, B]` (detached), the targets `y` `[B]` and the
/// values the added term reported.
struct CriticOut {
    loss: Tensor,
    q: Tensor,
    target: Tensor,
    extra: TermLogs,
}

/// Values a variant's critic term reports, by metric name.
pub(crate) type TermLogs = Vec<(&'static str, Tensor)>;

impl SacConfig {
    /// The keys of [`Sac`]'s update metrics (a variant's critic-term keys come after them) and
    /// of its diagnostics: the declaration a viewer picks its panels from ([`crate::MetricKeys`]).
    pub fn metric_keys(&self) -> crate::MetricKeys {
        crate::MetricKeys {
            update: vec!["critic_loss", "q_mean", "target_q_mean", "actor_loss", "alpha", "alpha_loss", "entropy"],
            diagnose: vec!["q", "mc_return", "q_minus_mc", "entropy", "alpha", "mean_abs_action", "log_std"],
        }
    }
}

/// A variant's term in every critic step, `extra(sac, minibatch, Q(s, a))` (CQL's regularizer).
pub(crate) type AddedTerm<'a> = dyn FnMut(&mut Sac, &TransitionBatch, &Tensor) -> (CriticTerm, TermLogs) + 'a;

/// A SAC agent.
pub struct Sac {
    name: &'static str,
    /// The configuration in effect (WSRL sets its critic steps per phase).
    pub(super) cfg: SacConfig,
    /// The configuration as given, before any [`PhaseSettings`].
    base: SacConfig,
    // The policy, the critic being trained, |A|, the device and the random stream are the
    // variants' too (CQL's term samples actions and differentiates the critic).
    pub(super) actor: Trained<TanhGaussianActor>,
    pub(super) critic: Trained<EnsembleMlp>,
    target: Frozen<EnsembleMlp>,
    temperature: Trained<Temperature>,
    pub(super) act_dim: i64,
    pub(super) device: Device,
    pub(super) rng: AgentRng,
    step: i64,
}

impl Sac {
    /// A new agent for `obs_dim` observations and `act_dim` actions in `[-1, 1]`, all tensors
    /// on `device`, every random draw from `seed`.
    pub fn new(cfg: SacConfig, obs_dim: i64, act_dim: i64, device: Device, seed: u64) -> Result<Self, AgentError> {
        Self::named("sac", cfg, obs_dim, act_dim, device, seed)
    }

    /// A SAC agent that reports (and checkpoints as) `name`: a SAC configuration with its own
    /// name (RLPD), or the SAC core of a variant (CQL, Cal-QL).
    pub(crate) fn named(
        name: &'static str,
        cfg: SacConfig,
        obs_dim: i64,
        act_dim: i64,
        device: Device,
        seed: u64,
    ) -> Result<Self, AgentError> {
        cfg.validate()?;
        super::prepare(name, obs_dim, act_dim, device)?;
        let mut rng = AgentRng::new(seed);
        let actor = Trained::new(cfg.actor_lr, |p| {
            TanhGaussianActor::new(p, "actor", obs_dim, act_dim, &cfg.actor, &mut rng, device)
        });
        let (critic, target) =
            critic_and_target(cfg.num_critics, obs_dim + act_dim, &cfg.critic, cfg.critic_lr, &mut rng, device);
        let (init, form) = (cfg.init_temperature, cfg.temperature_form);
        let temperature = Temperature::trained("temperature", init, form, cfg.temperature_lr, device);
        Ok(Self { name, base: cfg.clone(), cfg, actor, critic, target, temperature, act_dim, device, rng, step: 0 })
    }

    /// The configuration.
    pub fn config(&self) -> &SacConfig {
        &self.cfg
    }

    /// The agent's random stream (the benchmark records the noise it draws).
    pub fn rng_mut(&mut self) -> &mut AgentRng {
        &mut self.rng
    }

    /// `Q_i(s, a)` of every member, `[E, B]`, without dropout (evaluation, tests, diagnostics).
    pub fn q_values(&self, obs: &Tensor, action: &Tensor) -> Tensor {
        self.critic.net.forward(&state_action(obs, action), None).squeeze_dim(-1)
    }

    /// The TD target, without gradients:
    /// `y = r + γ (1 − d) (min_{i∈I} Q̄_i(s', a') − [backup_entropy] α log π(a'|s'))`, `a' ~ π(·|s')`;
    /// with `max_target_backup`, K next actions per state and the max over them (with its log π).
    /// `next` is `(a', log π(a'|s'))` drawn beforehand for these rows ([`Sac::next_actions`]);
    /// without it they are drawn here.
    fn td_target(&mut self, b: &TransitionBatch, alpha: &Tensor, next: Option<(Tensor, Tensor)>) -> Tensor {
        let k = if self.cfg.max_target_backup { self.cfg.max_target_backup_samples } else { 1 };
        let next_obs =
            if k > 1 { b.next_obs.repeat_interleave_self_int(k, 0, None) } else { b.next_obs.shallow_clone() };
        let (next_a, next_logp) = match next {
            Some(drawn) if k == 1 => drawn,
            _ => self.next_actions(&next_obs),
        };
        let cfg = &self.cfg;
        // The random subset I of M target members (REDQ), unless it is all E of them.
        let subset = (cfg.target_subset < cfg.num_critics || cfg.subset_with_replacement).then(|| {
            let (e, m) = (cfg.num_critics as usize, cfg.target_subset as usize);
            self.rng.indices(e, m, cfg.subset_with_replacement, self.device)
        });
        let backup = Backup {
            reward: &b.reward,
            terminal: &b.terminal,
            gamma: cfg.gamma,
            alpha: cfg.backup_entropy.then_some(alpha),
        };
        // y = r + γ (1 − d) (max_k min_{i∈I} Q̄_i(s', a'_k) − α log π(a'_k|s')).
        soft_td_target(&self.target.net, subset.as_ref(), &state_action(&next_obs, &next_a), &next_logp, k, backup)
    }

    /// `a' ~ π(·|s')` and `log π(a'|s')` for every row of `next_obs`, without gradients.
    fn next_actions(&mut self, next_obs: &Tensor) -> (Tensor, Tensor) {
        let eps = self.rng.normal(&[next_obs.size()[0], self.act_dim], self.device);
        self.actor.net.sample_no_grad(next_obs, &eps)
    }

    /// One critic step on `b`: `L = mean_{i,b} (Q_i(s, a) − y)² + extra`, then Polyak
    /// `θ̄ ← (1 − τ) θ̄ + τ θ`. With `bonus`, the critic's pass comes first and `y` is formed with
    /// `r + bonus(Q(s, a))` (SERA without a second critic pass).
    fn critic_step(
        &mut self,
        b: &TransitionBatch,
        alpha: &Tensor,
        extra: &mut AddedTerm<'_>,
        bonus: Option<RewardBonus<'_>>,
        next: Option<(Tensor, Tensor)>,
    ) -> CriticOut {
        let (y, pass) = match bonus {
            None => {
                let y = self.td_target(b, alpha, next);
                (y, CriticPass::new(&self.critic.net, &state_action(&b.obs, &b.action), &mut self.rng))
            }
            Some(f) => {
                let pass = CriticPass::new(&self.critic.net, &state_action(&b.obs, &b.action), &mut self.rng);
                (self.td_target(&with_bonus(b, &f(&pass.q.detach())), alpha, next), pass)
            }
        };
        let (term, logs) = extra(self, b, &pass.q);
        let critic = CriticParts::of(&mut self.critic, &self.target);
        // L_Q = mean_{i,b} (Q_i(s, a) − y)² plus the variant's term, then θ̄ ← (1 − τ) θ̄ + τ θ.
        let (loss, q) = pass.td_step(critic, &y, TdReduce::MeanOverMembers, self.cfg.tau, term);
        CriticOut { loss, q, target: y, extra: logs }
    }

    /// One actor step and one temperature step on `obs`; returns `(L_π, L_α, log π)`.
    fn actor_step(&mut self, obs: &Tensor, alpha: &Tensor) -> (Tensor, Tensor, Tensor) {
        let eps = self.rng.normal(&[obs.size()[0], self.act_dim], self.device);
        let (actor, critic) = (&mut self.actor, &self.critic.net);
        // L_π = E[α log π(ã|s) − agg_i Q_i(s, ã)], ã = tanh(μ + σ ε); gradients flow to the actor only.
        let (actor_loss, grads, logp) =
            actor_through_critic(&actor.net, &actor.params, critic, obs, &eps, alpha, self.cfg.actor_q);
        actor.apply(&grads);
        // L_α = −α (E[log π] + H̄), H̄ = target_entropy_per_dim · |A|.
        let target_entropy = self.cfg.target_entropy_per_dim * self.act_dim as f64;
        let (alpha_loss, grad) = self.temperature.net.loss_and_grad(&logp, target_entropy);
        if self.cfg.learn_temperature {
            self.temperature.apply(&[grad]);
        }
        (actor_loss, alpha_loss.detach(), logp)
    }

    /// One update (the module docs' steps 1–3) with `extra(sac, minibatch, Q)` added to every
    /// critic step's loss; `extra` returns the term (or `None`) and values to log, of which the
    /// last critic step's are returned after SAC's own metrics.
    pub(crate) fn update_with(
        &mut self,
        batch: &TransitionBatch,
        extra: &mut AddedTerm<'_>,
        bonus: Option<RewardBonus<'_>>,
    ) -> Metrics {
        let moved = (batch.obs.device() != self.device).then(|| batch.to_device(self.device));
        let b = moved.as_ref().unwrap_or(batch);
        let n = b.len() as i64;
        let k = self.cfg.critic_steps.min(n.max(1));
        // A reward bonus is formed once on the whole batch with the critic before this update:
        // inside the one critic step, or (UTD > 1, several critic steps on slices) up front.
        let (augmented, mut bonus) = match bonus {
            Some(f) if k > 1 => {
                let q = tch::no_grad(|| self.q_values(&b.obs, &b.action));
                (Some(with_bonus(b, &f(&q))), None)
            }
            other => (None, other),
        };
        let b = augmented.as_ref().unwrap_or(b);
        let idle = self.cfg.zero_grad_adam_steps && k > 1;
        let mut alpha = self.temperature.net.alpha().detach();
        let mut critic = None;
        let mut last_obs = b.obs.shallow_clone();
        // Every minibatch's a' ~ π(·|s') from one pass over the batch (the module docs).
        let next = (k > 1 && !idle && !self.cfg.max_target_backup).then(|| self.next_actions(&b.next_obs));
        for i in 0..k {
            let part = b.strided(i, k);
            let part_next = next.as_ref().map(|(a, logp)| (a.slice(0, i, n, k), logp.slice(0, i, n, k)));
            critic = Some(self.critic_step(&part, &alpha, extra, bonus.take(), part_next));
            last_obs = part.obs;
            if idle {
                // The reference's critic-only call also applies the actor's and α's optimizers.
                self.actor.idle_step();
                if self.cfg.learn_temperature {
                    self.temperature.idle_step();
                }
                alpha = self.temperature.net.alpha().detach();
            }
        }
        let actor_obs = match self.cfg.actor_batch {
            ActorBatch::Whole => b.obs.shallow_clone(),
            ActorBatch::LastSlice => last_obs,
        };
        let (actor_loss, alpha_loss, logp) = self.actor_step(&actor_obs, &alpha);
        if idle {
            // ... and its actor call the critic's (the target is not updated on that call).
            self.critic.idle_step();
        }
        self.step += 1;
        let c = critic.expect("at least one critic step");
        let mut out = vec![
            ("critic_loss", c.loss.double_value(&[])),
            ("q_mean", c.q.mean(Kind::Float).double_value(&[])),
            ("target_q_mean", c.target.mean(Kind::Float).double_value(&[])),
            ("actor_loss", actor_loss.double_value(&[])),
            ("alpha", alpha.double_value(&[0])),
            ("alpha_loss", alpha_loss.double_value(&[])),
            ("entropy", -logp.mean(Kind::Float).double_value(&[])),
        ];
        out.extend(c.extra.iter().map(|(name, t)| (*name, t.double_value(&[]))));
        out
    }
}

impl Stateful for Sac {
    fn name(&self) -> &'static str {
        self.name
    }

    fn parts(&self) -> Vec<Part<'_>> {
        vec![
            Part::trained("actor_opt", &self.actor),
            Part::trained("critic_opt", &self.critic),
            Part::frozen(&self.target),
            Part::trained("temperature_opt", &self.temperature),
        ]
    }

    progress_in_fields!();
}

impl Agent for Sac {
    fn gamma(&self) -> Option<f64> {
        Some(self.cfg.gamma)
    }

    fn act(&mut self, obs: &Tensor, deterministic: bool) -> Tensor {
        let (actor, noise) = (&self.actor.net, (!deterministic).then_some((&mut self.rng, self.act_dim)));
        super::act_with(obs, self.device, noise, |obs, eps| match eps {
            Some(eps) => actor.sample(obs, &eps).0,
            None => actor.mode(obs),
        })
    }

    fn deterministic_policy(&self) -> Option<DeterministicPolicy> {
        let actor = self.actor.net.detached();
        Some(Box::new(move |obs| actor.mode(obs)))
    }

    fn policy_graph(&self) -> Option<PolicyGraph> {
        Some(self.actor.net.mode_graph())
    }

    fn update(&mut self, batch: &TransitionBatch) -> Metrics {
        self.update_with(batch, &mut |_, _, _| Default::default(), None)
    }

    fn update_with_bonus(&mut self, batch: &TransitionBatch, bonus: RewardBonus<'_>) -> Option<Metrics> {
        Some(self.update_with(batch, &mut |_, _, _| Default::default(), Some(bonus)))
    }

    /// Without an update or a draw from the agent's stream: ensemble-mean `Q(s, a)` against the
    /// batch's Monte-Carlo returns ([`q_against_returns`]), the policy's entropy `−E log π(ã|s)`
    /// (noise from a stream seeded by the update count), α, and where the policy's mean sits:
    /// `mean_abs_action` = mean |tanh μ(s)| over rows and action dimensions (near 1: the mean
    /// action is saturated, where the tanh term makes log π large) and `log_std` = mean log σ(s).
    fn diagnose(&mut self, batch: &TransitionBatch) -> Metrics {
        let b = batch.to_device(self.device);
        tch::no_grad(|| {
            let q = self.q_values(&b.obs, &b.action).mean_dim(0, false, Kind::Float);
            let mut out = q_against_returns(&q, b.mc_return.as_ref());
            let mut rng = AgentRng::new(0xd1a6_0000 ^ self.step as u64);
            let eps = rng.normal(&[b.obs.size()[0], self.act_dim], self.device);
            let (_, logp) = self.actor.net.sample(&b.obs, &eps);
            out.push(("entropy", -logp.mean(Kind::Float).double_value(&[])));
            out.push(("alpha", self.temperature.net.alpha().double_value(&[0])));
            let (mu, log_std) = self.actor.net.dist(&b.obs, None);
            out.push(("mean_abs_action", mu.tanh().abs().mean(Kind::Float).double_value(&[])));
            out.push(("log_std", log_std.mean(Kind::Float).double_value(&[])));
            out
        })
    }

    /// Take `phase`'s [`PhaseSettings`] over the configured values (idempotent).
    fn set_phase(&mut self, phase: Phase) {
        let (base, cfg) = (&self.base, &mut self.cfg);
        let over = if phase == Phase::Offline { &base.offline } else { &base.online };
        cfg.max_target_backup = over.max_target_backup.unwrap_or(base.max_target_backup);
        cfg.backup_entropy = over.backup_entropy.unwrap_or(base.backup_entropy);
        cfg.zero_grad_adam_steps = over.zero_grad_adam_steps.unwrap_or(base.zero_grad_adam_steps);
        cfg.critic_steps = over.critic_steps.unwrap_or(base.critic_steps);
    }

    fn critic_values(&self, obs: &Tensor, action: &Tensor) -> Option<Tensor> {
        Some(critic_values(&self.critic.net, obs, action, self.device))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(rng: &mut AgentRng, n: i64, obs: i64, act: i64) -> TransitionBatch {
        crate::algos::testing::batch(rng, n, obs, act, true, false)
    }

    #[test]
    fn update_gives_finite_metrics_and_bounded_actions() {
        for cfg in [
            SacConfig::default(),
            SacConfig {
                critic_steps: 2,
                subset_with_replacement: true,
                backup_entropy: false,
                temperature_form: TemperatureForm::Softplus,
                ..SacConfig::ensemble10()
            },
        ] {
            let mut agent = Sac::new(cfg, 5, 2, Device::Cpu, 0).unwrap();
            let mut rng = AgentRng::new(1);
            for _ in 0..3 {
                let m = agent.update(&batch(&mut rng, 32, 5, 2));
                assert_eq!(m.len(), 7);
                assert!(m.iter().all(|(_, v)| v.is_finite()), "{m:?}");
            }
            let a = agent.act(&rng.normal(&[4, 5], Device::Cpu), false);
            assert_eq!(a.size(), vec![4, 2]);
            assert!(a.abs().max().double_value(&[]) <= 1.0);
        }
    }

    /// The diagnostics' `mean_abs_action` and `log_std` are the means of |tanh μ(s)| and
    /// log σ(s) over rows and action dimensions, by hand from the actor's distribution; the
    /// diagnostics change nothing in the agent.
    #[test]
    fn diagnostics_report_where_the_policy_mean_sits() {
        let mut agent = Sac::new(SacConfig::default(), 5, 3, Device::Cpu, 0).unwrap();
        let mut rng = AgentRng::new(4);
        let mut b = batch(&mut rng, 16, 5, 3);
        for _ in 0..3 {
            agent.update(&b);
        }
        b.mc_return = Some(Tensor::ones([16], (Kind::Float, Device::Cpu)));
        let m = agent.diagnose(&b);
        let get = |k: &str| m.iter().find(|(n, _)| *n == k).map(|(_, v)| *v).unwrap();
        let mean = |t: Tensor| {
            let v = Vec::<f32>::try_from(t.flatten(0, -1)).unwrap();
            v.iter().map(|x| *x as f64).sum::<f64>() / v.len() as f64
        };
        let (mu, log_std) = tch::no_grad(|| agent.actor.net.dist(&b.obs, None));
        assert!((get("mean_abs_action") - mean(mu.tanh().abs())).abs() < 1e-6, "{m:?}");
        assert!((get("log_std") - mean(log_std)).abs() < 1e-6, "{m:?}");
        assert!(get("mean_abs_action") > 0.0 && get("mean_abs_action") < 1.0, "{m:?}");
        assert_eq!(m, agent.diagnose(&b), "no draw from the agent's stream");
        assert_eq!(SacConfig::default().metric_keys().diagnose.len(), m.len(), "every key declared");
    }

    #[test]
    fn bad_configs_are_rejected_with_the_field_name() {
        let e = Sac::new(SacConfig { target_subset: 3, ..SacConfig::default() }, 3, 1, Device::Cpu, 0).err().unwrap();
        assert!(e.to_string().contains("target_subset"), "{e}");
        assert!(Sac::new(SacConfig { critic_steps: 0, ..SacConfig::default() }, 3, 1, Device::Cpu, 0).is_err());
    }

    /// The TD target bootstraps through time-limit truncations (terminal = 0) but not through
    /// true terminations (terminal = 1): with γ = 1 and α fixed at ~0, y = r exactly when
    /// terminal = 1.
    #[test]
    fn target_stops_bootstrapping_only_on_terminal() {
        let cfg = SacConfig { gamma: 1.0, backup_entropy: false, ..SacConfig::default() };
        let mut agent = Sac::new(cfg, 3, 1, Device::Cpu, 0).unwrap();
        let mut rng = AgentRng::new(3);
        let mut b = batch(&mut rng, 8, 3, 1);
        b.terminal = Tensor::ones([8], (Kind::Float, Device::Cpu));
        let alpha = agent.temperature.net.alpha().detach();
        let y = agent.td_target(&b, &alpha, None).mean(Kind::Float);
        assert!((y.double_value(&[]) - b.reward.mean(Kind::Float).double_value(&[])).abs() < 1e-6);
        b.terminal = Tensor::zeros([8], (Kind::Float, Device::Cpu));
        let y = agent.td_target(&b, &alpha, None).mean(Kind::Float);
        assert!((y.double_value(&[]) - b.reward.mean(Kind::Float).double_value(&[])).abs() > 1e-4);
    }

    /// `[agent.offline]` / `[agent.online]` values apply in their phase and the agent's own
    /// ones come back in the other.
    #[test]
    fn phase_settings_switch_with_the_phase() {
        let cfg: SacConfig = toml::from_str("critic_steps = 2\noffline = { max_target_backup = true }\nonline = { backup_entropy = false, critic_steps = 4 }").unwrap();
        let mut a = Sac::new(cfg, 3, 1, Device::Cpu, 0).unwrap();
        let now = |a: &Sac| (a.cfg.max_target_backup, a.cfg.backup_entropy, a.cfg.critic_steps);
        a.set_phase(Phase::Offline);
        assert_eq!(now(&a), (true, true, 2));
        a.set_phase(Phase::Online);
        assert_eq!(now(&a), (false, false, 4));
        a.set_phase(Phase::Offline);
        assert_eq!(now(&a), (true, true, 2));
        let bad: Result<SacConfig, _> = toml::from_str("online = { max_target_backupp = true }");
        assert!(bad.unwrap_err().to_string().contains("max_target_backupp"));
        let e = Sac::new(
            SacConfig { online: PhaseSettings { critic_steps: Some(0), ..Default::default() }, ..SacConfig::default() },
            3,
            1,
            Device::Cpu,
            0,
        )
        .err()
        .unwrap();
        assert!(e.to_string().contains("sac.online.critic_steps"), "{e}");
    }

    /// With `zero_grad_adam_steps`, one update with k = 4 critic steps advances every
    /// optimizer 5 times (the reference applies all three on each of its 5 calls), and its
    /// state equals the reference's order spelled out step by step: (critic step, idle actor,
    /// idle α) × 4, then the actor and α step and an idle critic step. Without it, the counts
    /// are 4 / 1 / 1.
    #[test]
    fn zero_grad_adam_steps_follow_the_reference_order() {
        let cfg = SacConfig {
            critic_steps: 4,
            zero_grad_adam_steps: true,
            subset_with_replacement: true,
            backup_entropy: true,
            ..SacConfig::ensemble10()
        };
        let mut rng = AgentRng::new(5);
        let b = batch(&mut rng, 32, 3, 2);
        let mut a = Sac::new(cfg.clone(), 3, 2, Device::Cpu, 1).unwrap();
        a.update(&b);
        assert_eq!((a.critic.opt.steps(), a.actor.opt.steps(), a.temperature.opt.steps()), (5, 5, 5));
        let mut r = Sac::new(SacConfig { zero_grad_adam_steps: false, ..cfg.clone() }, 3, 2, Device::Cpu, 1).unwrap();
        for i in 0..4 {
            let alpha = r.temperature.net.alpha().detach();
            r.critic_step(
                &b.strided(i, 4),
                &alpha,
                &mut |_: &mut Sac, _: &TransitionBatch, _: &Tensor| Default::default(),
                None,
                None,
            );
            r.actor.idle_step();
            r.temperature.idle_step();
        }
        let alpha = r.temperature.net.alpha().detach();
        let _ = r.actor_step(&b.obs, &alpha);
        r.critic.idle_step();
        for ((n, x), (_, y)) in a.named_tensors().iter().zip(r.named_tensors()) {
            assert!(x.equal(&y), "{n} differs from the spelled-out reference order");
        }
        let mut plain = Sac::new(SacConfig { zero_grad_adam_steps: false, ..cfg }, 3, 2, Device::Cpu, 1).unwrap();
        plain.update(&b);
        assert_eq!((plain.critic.opt.steps(), plain.actor.opt.steps(), plain.temperature.opt.steps()), (4, 1, 1));
        let actor = |s: &Sac| s.actor.params.named()[0].1.copy();
        assert!(!actor(&a).equal(&actor(&plain)), "the idle steps move the actor");
    }
}
