//! FamO2O over CQL (Wang et al., "Train Once, Get a Family: State-Adaptive Balances for
//! Offline-to-Online Reinforcement Learning", NeurIPS 2023, arXiv 2310.17966), the MuJoCo
//! locomotion variant.
//!
//! Facts: ../shared/reference/algorithms-next.md §2.3 (checked against the official
//! `LeapLabTHU/FamO2O@ea9cb01` `jax_cql/JaxCQL/family_conservative_sac.py`,
//! `hierarchical_policy.py`, `family_model.py`; read, not copied) and algorithms.md §3.3.
//!
//! A universal policy `π_u(a | s, e(β))` (SAC's tanh-Gaussian on `[s, e(β)]`) is a family of
//! SAC policies in which β multiplies Q (larger β: more improvement against the CQL-regularized
//! critic, smaller: more entropy-regularized, data-near behaviour); a balance model
//! `π_b(β | s)` (1-D tanh-Gaussian) picks β per state. One forward pass builds every loss at the
//! *current* parameters; each model gets the gradient of its own loss only, and all steps are
//! applied together, then Polyak:
//! - `β_b(s) ~ π_b(·|s)`, reparameterized, `β = map(u)` (see [`BetaMap`]);
//! - universal: `L_u = E[α log π_u(ã|s, e(β)) − β · min_j Q_j(s, ã)]` with the online critic,
//!   `ã ~ π_u(·|s, e(β))`; offline `β ~ U[β_min, β_max]` per row, online `β = β_b(s)`;
//! - balance: `L_b = −E[min_j Q_j(s, ã_b)]`, `ã_b ~ π_u(·|s, e(β_b(s)))` (offline a separate
//!   draw, online the same ã), no entropy term; the gradient reaches π_b through β and ã;
//! - SAC temperature: `L_α = −α (E[log π_u(ã)] + H̄)`, H̄ = −|A|;
//! - Q: `y = r + γ (1 − d) min_j Q̄_j(s', a')`, `a' ~ π_u(·|s', e(β_b(s)))` — β of the *current*
//!   state, in both phases; no entropy in the backup; `L_Q = mean_j (Q_j(s, a) − y)² + w Δ`,
//!   with CQL's importance-sampled gap `Δ` ([`super::cql::conservative_gap`]) over N uniform
//!   actions, N from `π_u(·|s, e(β))` (the universal loss's β: random offline, β_b online) and N
//!   from `π_u(·|s', e(β_b(s)))`, kept on online; w = 1, T = 1, N = 10, no Lagrange form;
//! - Polyak `θ̄ ← (1 − τ) θ̄ + τ θ`.
//!
//! The Q-networks carry LayerNorm after every hidden layer; the policies do not. Both policies'
//! log σ is JaxCQL's `m · raw + o` with learned scalars (m = 1, o = −1 at the start), clipped
//! to [−20, 2]. Acting: β = the balance model's mode, then π_u's mode (evaluation) or a sample
//! (collection).
//!
//! `fixed_beta = b` turns the balance model off: β = b everywhere, offline and online (the
//! ablation's "CQL with one fixed β").
//!
//! The balance model's output layer starts as the official one (`balance_head_init =
//! "variance-scaling"`: flax `variance_scaling(1e-2, fan_in, uniform)`, zero bias), so β starts
//! at ≈ 0.5 on every state (u ≈ 0: the middle of the coded range (−0.5, 1.5), the bottom of the
//! nominal (0.5, 1.5)).
//!
//! **Why β saturates.** L_u = α log π − β·Q makes β an inverse temperature: a larger β gives a
//! greedier π_u and a larger Q(s, π_u(s, β)), so the balance loss −Q has a positive gradient in β
//! almost everywhere and β climbs to the top of its range. That is the official objective
//! (fidelity-audit-2 E7); the run logs dQ/dβ at the chosen β (`diag/…/dq_dbeta_mean`,
//! `dq_dbeta_positive`) so a saturated β is explained in the run itself. `balance_entropy = true`
//! adds FamO2O-IQL's balance temperature (`L_b = E[α_b log π_b(u|s) − min_j Q_j]`, α_b learned
//! towards `balance_target_entropy` = −0.5): **a deviation** from the official FamO2O-CQL, opt-in.
//!
//! Deviations: the critic loss is the mean over the two heads (the reference sums them, a
//! constant factor Adam does not see); the temperature loss is SAC's `−α (log π + H̄)`, as in
//! [`super::cql`], not JaxCQL's `−log α (log π + H̄)`; hidden weights start orthogonal (JaxCQL:
//! Flax's defaults, the Q head at variance scale 1e-2).

use crate::checkpoint::{progress_in_fields, Part, Stateful};
use crate::nn::cql::{conservative_gap, SampledActions, SampledQ};
use crate::nn::critic::{critic_and_target, critic_values, state_action};
use crate::nn::family::{beta_scatters, beta_stats, dq_dbeta};
use crate::nn::{
    polyak_update, BalanceHeadInit, BalanceModel, BetaEncoding, BetaMap, BetaRange, Conditioned, EnsembleMlp, Frozen,
    MlpConfig, ParamSet, PolicyGraph, TanhGaussianActor, TanhGaussianConfig, Temperature, TemperatureForm, Trained,
};
use crate::rng::AgentRng;
use crate::{Agent, AgentError, DeterministicPolicy, Metrics, Phase, Scatter};
use o2o_datasets::TransitionBatch;
use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

/// FamO2O-CQL hyperparameters; defaults are the official locomotion values (algorithms-next.md
/// §2.3–2.4).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Famo2oCqlConfig {
    /// Universal policy π_u (tanh-Gaussian on `[s, e(β)]`).
    pub actor: TanhGaussianConfig,
    /// Balance model π_b (1-D tanh-Gaussian).
    pub balance: TanhGaussianConfig,
    /// Q network (each head), with LayerNorm.
    pub critic: MlpConfig,
    /// Number of Q heads.
    pub num_critics: i64,
    /// β_min of the nominal range (0.5).
    pub beta_min: f64,
    /// β_max of the nominal range (1.5).
    pub beta_max: f64,
    /// How the balance model's u ∈ (−1, 1) becomes β: `code` (the official code's
    /// β = β_min + u (β_max − β_min), β ∈ (−0.5, 1.5); the default, which reproduces the paper's
    /// runs) or `paper` (the nominal β ∈ (0.5, 1.5)). The offline random β is U[β_min, β_max]
    /// under both.
    pub beta_map: BetaMap,
    /// Hold β at this value offline and online and leave the balance model out (the fixed-β
    /// ablation); absent: FamO2O.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fixed_beta: Option<f64>,
    /// The β encoding e(β) (d, n).
    pub encoding: BetaEncoding,
    /// Discount γ.
    pub gamma: f64,
    /// Polyak rate τ.
    pub tau: f64,
    /// Universal policy learning rate.
    pub actor_lr: f64,
    /// Q learning rate.
    pub critic_lr: f64,
    /// Balance model learning rate.
    pub balance_lr: f64,
    /// SAC temperature learning rate.
    pub temperature_lr: f64,
    /// Initial α.
    pub init_temperature: f64,
    /// Target entropy per action dimension: H̄ = this · |A|.
    pub target_entropy_per_dim: f64,
    /// CQL min-Q weight w (`cql_min_q_weight`; 1.0 in the family config, 5.0 in CQL's base).
    pub cql_alpha: f64,
    /// N, actions sampled per state from each of the three proposals.
    pub cql_n_actions: i64,
    /// Temperature T of the logsumexp.
    pub cql_temperature: f64,
    /// How the balance model's output layer starts: `variance-scaling` (the official head, the
    /// default) or `orthogonal`.
    pub balance_head_init: BalanceHeadInit,
    /// Add FamO2O-IQL's entropy term to the balance loss, with a learned temperature α_b
    /// (a deviation from the official FamO2O-CQL, whose balance loss is −Q alone; off by default).
    pub balance_entropy: bool,
    /// H̄_b, the balance model's target entropy with `balance_entropy` (FamO2O-IQL: −0.5).
    pub balance_target_entropy: f64,
    /// α_b's learning rate with `balance_entropy`.
    pub balance_temperature_lr: f64,
    /// α_b's initial value with `balance_entropy`.
    pub balance_init_temperature: f64,
}

impl Default for Famo2oCqlConfig {
    fn default() -> Self {
        let policy = TanhGaussianConfig {
            log_std_affine: true,
            log_std_offset: -1.0,
            log_std_min: -20.0,
            log_std_max: 2.0,
            ..TanhGaussianConfig::default()
        };
        Self {
            actor: policy.clone(),
            balance: policy,
            critic: MlpConfig { layer_norm: true, ..MlpConfig::default() },
            num_critics: 2,
            beta_min: 0.5,
            beta_max: 1.5,
            beta_map: BetaMap::Code,
            fixed_beta: None,
            encoding: BetaEncoding::default(),
            gamma: 0.99,
            tau: 5e-3,
            actor_lr: 3e-4,
            critic_lr: 3e-4,
            balance_lr: 3e-4,
            temperature_lr: 3e-4,
            init_temperature: 1.0,
            target_entropy_per_dim: -1.0,
            cql_alpha: 1.0,
            cql_n_actions: 10,
            cql_temperature: 1.0,
            balance_head_init: BalanceHeadInit::VarianceScaling,
            balance_entropy: false,
            balance_target_entropy: -0.5,
            balance_temperature_lr: 3e-4,
            balance_init_temperature: 1.0,
        }
    }
}

impl Famo2oCqlConfig {
    /// Reject settings that cannot work, naming the field.
    pub fn validate(&self) -> Result<(), AgentError> {
        let bad = |m: String| Err(AgentError::Config(m));
        if self.num_critics < 1 {
            return bad(format!("famo2o-cql.num_critics must be ≥ 1, found {}", self.num_critics));
        }
        if !(self.beta_min.is_finite() && self.beta_max.is_finite() && self.beta_min < self.beta_max) {
            return bad(format!(
                "famo2o-cql.beta_min must be below famo2o-cql.beta_max, found {} and {}",
                self.beta_min, self.beta_max
            ));
        }
        if self.fixed_beta.is_some_and(|b| !b.is_finite()) {
            return bad(format!("famo2o-cql.fixed_beta must be a finite number, found {:?}", self.fixed_beta));
        }
        if !(0.0..=1.0).contains(&self.tau) || !(0.0..=1.0).contains(&self.gamma) {
            return bad(format!(
                "famo2o-cql.tau and famo2o-cql.gamma must be in [0, 1], found {} and {}",
                self.tau, self.gamma
            ));
        }
        if self.init_temperature <= 0.0 {
            return bad(format!("famo2o-cql.init_temperature must be > 0, found {}", self.init_temperature));
        }
        if self.balance_entropy && (self.balance_init_temperature <= 0.0 || self.balance_temperature_lr <= 0.0) {
            return bad(format!("famo2o-cql.balance_init_temperature and famo2o-cql.balance_temperature_lr must be > 0 with balance_entropy, found {} and {}", self.balance_init_temperature, self.balance_temperature_lr));
        }
        if self.cql_alpha < 0.0 || self.cql_n_actions < 1 || self.cql_temperature <= 0.0 {
            return bad(format!(
                "famo2o-cql.cql_alpha must be ≥ 0, cql_n_actions ≥ 1 and cql_temperature > 0, found {}, {} and {}",
                self.cql_alpha, self.cql_n_actions, self.cql_temperature
            ));
        }
        self.encoding.validate("famo2o-cql.encoding").map_err(AgentError::Config)
    }

    fn range(&self) -> BetaRange {
        BetaRange { min: self.beta_min, max: self.beta_max, map: self.beta_map }
    }
}

/// Every loss of one update, built at the same parameters.
pub(crate) struct Losses {
    universal: Tensor,
    /// `None` with `fixed_beta`.
    balance: Option<Tensor>,
    /// α_b's loss (`balance_entropy`).
    balance_temperature: Option<Tensor>,
    temperature: Tensor,
    critic: Tensor,
    logs: Vec<(&'static str, Tensor)>,
    /// β_b(s) of the update's draw, `[B]`.
    beta: Tensor,
}

/// Which losses reach their model (all in an update; tests switch one off).
#[derive(Clone, Copy)]
pub(crate) struct Terms {
    universal: bool,
    balance: bool,
}

impl Terms {
    const ALL: Terms = Terms { universal: true, balance: true };
}

impl Famo2oCqlConfig {
    /// The keys of [`Famo2oCql`]'s update metrics and diagnostics ([`crate::MetricKeys`]): the SAC
    /// and CQL terms, the balance model's (not with `fixed_beta`), the β drawn and the β chosen
    /// over the batch ([`crate::nn::family::BETA_STATS`]); diagnostics add dQ/dβ
    /// ([`crate::nn::family::DQ_DBETA`]).
    pub fn metric_keys(&self) -> crate::MetricKeys {
        use crate::nn::family::{BETA_STATS, DQ_DBETA};
        let mut update = vec!["critic_loss", "cql_gap", "q_mean", "target_q_mean", "actor_loss", "alpha"];
        update.extend(["alpha_loss", "entropy"]);
        if self.fixed_beta.is_none() {
            update.push("balance_loss");
            if self.balance_entropy {
                update.extend(["balance_alpha", "balance_entropy"]);
            }
        }
        update.push("beta_draw_mean");
        update.extend(BETA_STATS);
        let diagnose = ["q", "alpha"].into_iter().chain(BETA_STATS).chain(DQ_DBETA).collect();
        crate::MetricKeys { update, diagnose }
    }
}

/// A FamO2O-CQL agent.
pub struct Famo2oCql {
    cfg: Famo2oCqlConfig,
    actor: Trained<Conditioned<TanhGaussianActor>>,
    balance: Trained<BalanceModel>,
    critic: Trained<EnsembleMlp>,
    target: Frozen<EnsembleMlp>,
    temperature: Trained<Temperature>,
    /// α_b (`balance_entropy` only).
    balance_temperature: Option<Trained<Temperature>>,
    act_dim: i64,
    target_entropy: f64,
    device: Device,
    rng: AgentRng,
    step: i64,
    phase: Phase,
    /// β of the last `act` call, one per row.
    last_beta: Vec<f32>,
}

impl Famo2oCql {
    /// A new agent for `obs_dim` observations and `act_dim` actions in `[-1, 1]`.
    pub fn new(
        cfg: Famo2oCqlConfig,
        obs_dim: i64,
        act_dim: i64,
        device: Device,
        seed: u64,
    ) -> Result<Self, AgentError> {
        super::prepare("famo2o-cql", obs_dim, act_dim, device)?;
        cfg.validate()?;
        let mut rng = AgentRng::new(seed);
        let actor = Trained::new(cfg.actor_lr, |p| {
            Conditioned::new(obs_dim, cfg.encoding, |d| {
                TanhGaussianActor::new(p, "actor", d, act_dim, &cfg.actor, &mut rng, device)
            })
        });
        let balance = Trained::new(cfg.balance_lr, |p| {
            let (range, init) = (cfg.range(), cfg.balance_head_init);
            BalanceModel::new(p, "balance", obs_dim, &cfg.balance, range, init, &mut rng, device)
        });
        let (critic, target) =
            critic_and_target(cfg.num_critics, obs_dim + act_dim, &cfg.critic, cfg.critic_lr, &mut rng, device);
        let log_alpha = TemperatureForm::LogAlpha;
        let temperature =
            Temperature::trained("temperature", cfg.init_temperature, log_alpha, cfg.temperature_lr, device);
        let balance_temperature = cfg.balance_entropy.then(|| {
            let (init, lr) = (cfg.balance_init_temperature, cfg.balance_temperature_lr);
            Temperature::trained("balance_temperature", init, log_alpha, lr, device)
        });
        let target_entropy = cfg.target_entropy_per_dim * act_dim as f64;
        Ok(Self {
            cfg,
            actor,
            balance,
            critic,
            target,
            temperature,
            balance_temperature,
            act_dim,
            target_entropy,
            device,
            rng,
            step: 0,
            phase: Phase::Offline,
            last_beta: Vec::new(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &Famo2oCqlConfig {
        &self.cfg
    }

    /// The β the agent acts with for states `[B, obs]`, `[B]`: the balance model's mode, or
    /// `fixed_beta`.
    pub fn beta(&self, obs: &Tensor) -> Tensor {
        let obs = obs.to_device(self.device).to_kind(Kind::Float);
        tch::no_grad(|| self.balance.net.mode_or(self.cfg.fixed_beta, &obs))
    }

    /// `min_j Q_j(s, a)` of the online critic, `[B]`, differentiable in `a` and the weights.
    fn min_q(&self, obs: &Tensor, action: &Tensor) -> Tensor {
        self.critic.net.forward(&state_action(obs, action), None).squeeze_dim(-1).amin(0, false)
    }

    /// A reparameterized draw `ã ~ π_u(·|s, e(β))` and its log-probability.
    fn universal_sample(&mut self, obs: &Tensor, beta: &Tensor) -> (Tensor, Tensor) {
        let eps = self.rng.normal(&[obs.size()[0], self.act_dim], self.device);
        self.actor.net.policy.sample(&self.actor.net.input(obs, beta), &eps)
    }

    /// `k` draws per state of `π_u(·|s, e(β))` without gradients (`[B·k]` rows, state-major).
    fn universal_draws(&mut self, obs: &Tensor, beta: &Tensor, k: i64) -> (Tensor, Tensor) {
        let eps = self.rng.normal(&[obs.size()[0] * k, self.act_dim], self.device);
        tch::no_grad(|| self.actor.net.policy.sample_repeated(&self.actor.net.input(obs, beta), &eps, k))
    }

    /// L_u = E[α log π_u(ã|s, e(β)) − β · min_j Q_j(s, ã)], β held fixed in the product.
    fn universal_loss(&self, alpha: &Tensor, log_prob: &Tensor, beta: &Tensor, q: &Tensor) -> Tensor {
        (alpha * log_prob - beta.detach() * q).mean(Kind::Float)
    }

    /// L_b = −E[min_j Q_j(s, ã_b)], ã_b ~ π_u(·|s, e(β_b(s))); with `balance_entropy`,
    /// L_b = E[α_b log π_b(u|s) − min_j Q_j(s, ã_b)] (FamO2O-IQL's form; a deviation here).
    fn balance_loss(&self, q_b: &Tensor, log_prob_b: &Tensor) -> Tensor {
        match &self.balance_temperature {
            Some(t) => (t.net.alpha().detach() * log_prob_b - q_b).mean(Kind::Float),
            None => -q_b.mean(Kind::Float),
        }
    }

    /// The TD target `y = r + γ (1 − d) min_j Q̄_j(s', a')`, `a' ~ π_u(·|s', e(β_b(s)))`, no
    /// entropy backup, without gradients.
    fn td_target(&mut self, b: &TransitionBatch, beta_b: &Tensor) -> Tensor {
        let eps = self.rng.normal(&[b.obs.size()[0], self.act_dim], self.device);
        tch::no_grad(|| {
            let (next_a, _) = self.actor.net.policy.sample(&self.actor.net.input(&b.next_obs, beta_b), &eps);
            let q_next =
                self.target.net.forward(&state_action(&b.next_obs, &next_a), None).squeeze_dim(-1).amin(0, false);
            &b.reward + (1.0 - &b.terminal) * self.cfg.gamma * q_next
        })
    }

    /// CQL's gap per head `Δ_j` `[E]` at the data's `Q_j(s, a)` `[E, B]`, over N uniform actions,
    /// N from `π_u(·|s, e(β_cur))` and N from `π_u(·|s', e(β_b(s)))`, all evaluated at s.
    fn conservative_gap(&mut self, b: &TransitionBatch, q_data: &Tensor, beta_cur: &Tensor, beta_b: &Tensor) -> Tensor {
        let (rows, n) = (b.obs.size()[0], self.cfg.cql_n_actions);
        let rand = self.rng.uniform_tensor(&[rows * n, self.act_dim], self.device) * 2.0 - 1.0;
        let current = self.universal_draws(&b.obs, beta_cur, n);
        let next = self.universal_draws(&b.next_obs, beta_b, n);
        let a = SampledActions::new(&rand, current, next, n);
        let q = self.critic.net.forward_paired(&b.obs, &a.actions, None).squeeze_dim(-1);
        let s = SampledQ::split(&q, &a, 0, rows);
        conservative_gap(q_data, &s, self.act_dim, self.cfg.cql_temperature, true)
    }

    /// Every loss at the current parameters.
    pub(crate) fn losses(&mut self, b: &TransitionBatch) -> Losses {
        let n = b.obs.size()[0];
        let alpha = self.temperature.net.alpha().detach();
        // β_b(s) ~ π_b(·|s), reparameterized (or the fixed β).
        let (beta_b, log_prob_b) = match self.cfg.fixed_beta {
            Some(v) => (Tensor::full([n], v, (Kind::Float, self.device)), None),
            None => {
                let eps = self.rng.normal(&[n, 1], self.device);
                let (beta, log_prob) = self.balance.net.sample(&b.obs, &eps);
                (beta, Some(log_prob))
            }
        };
        let beta_bd = beta_b.detach();
        // The universal policy's β: random offline (FamO2O), β_b(s) online.
        let random_beta = self.phase == Phase::Offline && self.cfg.fixed_beta.is_none();
        let beta_u = if random_beta {
            self.rng.uniform_tensor(&[n], self.device) * (self.cfg.beta_max - self.cfg.beta_min) + self.cfg.beta_min
        } else {
            beta_b.shallow_clone()
        };
        let (a_u, logp_u) = self.universal_sample(&b.obs, &beta_u);
        let q_u = self.min_q(&b.obs, &a_u);
        let universal = self.universal_loss(&alpha, &logp_u, &beta_u, &q_u);
        // The balance loss: online through the same ã, offline through a draw of its own.
        let balance = self.cfg.fixed_beta.is_none().then(|| {
            let q_b = if random_beta {
                let (a_b, _) = self.universal_sample(&b.obs, &beta_b);
                self.min_q(&b.obs, &a_b)
            } else {
                q_u.shallow_clone()
            };
            self.balance_loss(&q_b, log_prob_b.as_ref().expect("a balance draw"))
        });
        let balance_temperature = match (&self.balance_temperature, &log_prob_b) {
            (Some(t), Some(lp)) => Some(t.net.loss(lp, self.cfg.balance_target_entropy)),
            _ => None,
        };
        let temperature = self.temperature.net.loss(&logp_u, self.target_entropy);
        // Q: TD towards y with s' actions conditioned on β_b(s), plus w Δ.
        let y = self.td_target(b, &beta_bd);
        let q_data = self.critic.net.forward(&state_action(&b.obs, &b.action), None).squeeze_dim(-1);
        let td = (&q_data - y.unsqueeze(0)).square().mean(Kind::Float);
        let gap = self.conservative_gap(b, &q_data, &beta_u.detach(), &beta_bd);
        let critic = &td + gap.mean(Kind::Float) * self.cfg.cql_alpha;
        let mut logs = vec![
            ("critic_loss", td.detach()),
            ("cql_gap", gap.mean(Kind::Float).detach()),
            ("q_mean", q_data.mean(Kind::Float).detach()),
            ("target_q_mean", y.mean(Kind::Float)),
            ("actor_loss", universal.detach()),
            ("alpha", alpha.squeeze()),
            ("alpha_loss", temperature.detach()),
            ("entropy", -logp_u.mean(Kind::Float).detach()),
        ];
        if let (Some(t), Some(lp)) = (&self.balance_temperature, &log_prob_b) {
            logs.push(("balance_alpha", t.net.alpha().detach().squeeze()));
            logs.push(("balance_entropy", -lp.mean(Kind::Float).detach()));
        }
        Losses { universal, balance, balance_temperature, temperature, critic, logs, beta: beta_bd }
    }

    /// Gradients of every loss for its own model only, then every step together, then Polyak.
    pub(crate) fn apply(&mut self, l: &Losses, terms: Terms) {
        let grads = |loss: &Tensor, params: &ParamSet, keep: bool| {
            Tensor::run_backward(&[loss], &params.tensors(), keep, false)
        };
        // The universal and balance losses share the online draw's graph: keep it for the second.
        let g_u = terms.universal.then(|| grads(&l.universal, &self.actor.params, true));
        let g_b = l.balance.as_ref().filter(|_| terms.balance).map(|loss| grads(loss, &self.balance.params, false));
        let g_t = grads(&l.temperature, &self.temperature.params, false);
        let g_bt = match (&l.balance_temperature, &self.balance_temperature) {
            (Some(loss), Some(t)) => Some(grads(loss, &t.params, false)),
            _ => None,
        };
        let g_q = grads(&l.critic, &self.critic.params, false);
        if let Some(g) = g_u {
            self.actor.apply(&g);
        }
        if let Some(g) = g_b {
            self.balance.apply(&g);
        }
        self.temperature.apply(&g_t);
        if let (Some(g), Some(t)) = (g_bt, self.balance_temperature.as_mut()) {
            t.apply(&g);
        }
        self.critic.apply(&g_q);
        polyak_update(&self.target.params, &self.critic.params, self.cfg.tau);
    }

    fn update_terms(&mut self, batch: &TransitionBatch, terms: Terms) -> Metrics {
        let moved = (batch.obs.device() != self.device).then(|| batch.to_device(self.device));
        let b = moved.as_ref().unwrap_or(batch);
        let l = self.losses(b);
        self.apply(&l, terms);
        self.step += 1;
        let mut out: Metrics = l.logs.iter().map(|(k, t)| (*k, t.double_value(&[]))).collect();
        if let Some(loss) = &l.balance {
            out.push(("balance_loss", loss.double_value(&[])));
        }
        // The β the agent now chooses for the batch's states (the update's draw: `beta_draw_mean`).
        out.push(("beta_draw_mean", l.beta.mean(Kind::Float).double_value(&[])));
        out.extend(beta_stats(&self.beta(&b.obs)));
        out
    }
}

impl Stateful for Famo2oCql {
    fn name(&self) -> &'static str {
        "famo2o-cql"
    }

    fn parts(&self) -> Vec<Part<'_>> {
        let mut parts = vec![
            Part::trained("actor_opt", &self.actor),
            Part::trained("balance_opt", &self.balance),
            Part::trained("critic_opt", &self.critic),
            Part::frozen(&self.target),
            Part::trained("temperature_opt", &self.temperature),
        ];
        parts.extend(self.balance_temperature.as_ref().map(|t| Part::trained("balance_temperature_opt", t)));
        parts
    }

    progress_in_fields!();
}

impl Agent for Famo2oCql {
    fn gamma(&self) -> Option<f64> {
        Some(self.cfg.gamma)
    }

    fn act(&mut self, obs: &Tensor, deterministic: bool) -> Tensor {
        let beta = self.beta(obs);
        self.last_beta = Vec::<f32>::try_from(&beta).unwrap_or_default();
        let (actor, noise) = (&self.actor.net, (!deterministic).then_some((&mut self.rng, self.act_dim)));
        super::act_with(obs, self.device, noise, |obs, eps| {
            let input = actor.input(obs, &beta);
            match eps {
                Some(eps) => actor.policy.sample(&input, &eps).0,
                None => actor.policy.mode(&input),
            }
        })
    }

    fn act_info(&self) -> Vec<(&'static str, Vec<f32>)> {
        vec![("beta", self.last_beta.clone())]
    }

    fn deterministic_policy(&self) -> Option<DeterministicPolicy> {
        let balance = self.balance.net.detached();
        let fixed = self.cfg.fixed_beta;
        let actor = Conditioned { policy: self.actor.net.policy.detached(), encoding: self.actor.net.encoding };
        Some(Box::new(move |obs| actor.policy.mode(&actor.input(obs, &balance.mode_or(fixed, obs)))))
    }

    /// β from the balance model in the graph, or the configured fixed β.
    fn policy_graph(&self) -> Option<PolicyGraph> {
        let beta = self.balance.net.beta_source_or(self.cfg.fixed_beta);
        Some(self.actor.net.graph(self.actor.net.policy.mode_graph(), beta))
    }

    fn update(&mut self, batch: &TransitionBatch) -> Metrics {
        self.update_terms(batch, Terms::ALL)
    }

    fn set_phase(&mut self, phase: Phase) {
        self.phase = phase;
    }

    /// The Q critics at (s, a), every member (what SERA conditions on).
    fn critic_values(&self, obs: &Tensor, action: &Tensor) -> Option<Tensor> {
        Some(critic_values(&self.critic.net, obs, action, self.device))
    }

    fn diagnose(&mut self, batch: &TransitionBatch) -> Metrics {
        let b = batch.to_device(self.device);
        let beta = self.beta(&b.obs);
        let mut out = tch::no_grad(|| {
            let q = critic_values(&self.critic.net, &b.obs, &b.action, self.device).mean_dim(0, false, Kind::Float);
            let mut out = vec![
                ("q", q.mean(Kind::Float).double_value(&[])),
                ("alpha", self.temperature.net.alpha().double_value(&[0])),
            ];
            out.extend(beta_stats(&beta));
            out
        });
        // dQ/dβ at the chosen β: Q of π_u's mode at (s, e(β)) as a function of β.
        out.extend(dq_dbeta(&beta, |beta| {
            let a = self.actor.net.policy.mode(&self.actor.net.input(&b.obs, beta));
            self.min_q(&b.obs, &a)
        }));
        out
    }

    fn diagnose_rows(&mut self, batch: &TransitionBatch) -> Vec<Scatter> {
        let b = batch.to_device(self.device);
        let beta = self.beta(&b.obs);
        let q = tch::no_grad(|| self.min_q(&b.obs, &b.action));
        beta_scatters(&beta, &q, b.mc_return.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> Famo2oCqlConfig {
        let mlp = MlpConfig { hidden: vec![32, 32], ..MlpConfig::default() };
        let d = Famo2oCqlConfig::default();
        Famo2oCqlConfig {
            actor: TanhGaussianConfig { mlp: mlp.clone(), ..d.actor.clone() },
            balance: TanhGaussianConfig { mlp: mlp.clone(), ..d.balance.clone() },
            critic: MlpConfig { layer_norm: true, ..mlp },
            cql_n_actions: 3,
            ..d
        }
    }

    /// States of 3 numbers, 2 actions, Monte-Carlo returns.
    fn batch(rng: &mut AgentRng, n: i64) -> TransitionBatch {
        crate::algos::testing::batch(rng, n, 3, 2, true, true)
    }

    /// The code's map (the default) sends the balance model's u = 0 to 0.5 and spans (−0.5, 1.5);
    /// the paper's sends it to 1.0 and spans (0.5, 1.5). Pinned through an agent whose balance
    /// mean is zeroed.
    #[test]
    fn beta_range_code_by_default_and_paper_by_option() {
        assert_eq!(Famo2oCqlConfig::default().beta_map, BetaMap::Code);
        for (map, want, bounds) in [(BetaMap::Code, 0.5, (-0.5, 1.5)), (BetaMap::Paper, 1.0, (0.5, 1.5))] {
            let agent = Famo2oCql::new(Famo2oCqlConfig { beta_map: map, ..small() }, 3, 2, Device::Cpu, 0).unwrap();
            // Zero the balance model's head: μ_b(s) = 0, so the mode is u = tanh(0) = 0.
            tch::no_grad(|| {
                for (n, t) in agent.balance.params.named() {
                    if n.starts_with("balance/head") {
                        let _ = t.shallow_clone().zero_();
                    }
                }
            });
            let beta = agent.beta(&Tensor::ones([4, 3], (Kind::Float, Device::Cpu)));
            assert!((beta - want).abs().max().double_value(&[]) < 1e-6, "{map:?}");
            assert_eq!(agent.balance.net.range().bounds(), bounds);
        }
        let t: Famo2oCqlConfig = toml::from_str("beta_map = \"paper\"").unwrap();
        assert_eq!(t.beta_map, BetaMap::Paper);
        assert!(toml::from_str::<Famo2oCqlConfig>("beta_map = \"nominal\"").is_err());
    }

    /// The balance loss moves only the balance model and the universal loss only the universal
    /// policy: an update with one of them switched off changes exactly that model's parameters
    /// (and its optimizer's moments) relative to a full update, in both phases. Both losses'
    /// graphs do reach the other models (checked), so only the routing keeps them apart.
    #[test]
    fn each_policy_loss_moves_only_its_own_model() {
        let mut rng = AgentRng::new(1);
        let b = batch(&mut rng, 16);
        for phase in [Phase::Offline, Phase::Online] {
            let fresh = || {
                let mut a = Famo2oCql::new(small(), 3, 2, Device::Cpu, 4).unwrap();
                a.set_phase(phase);
                a.update(&b);
                a
            };
            // The graphs cross models: ∂L_b/∂actor ≠ 0 and, online, ∂L_u/∂balance ≠ 0.
            let mut probe = fresh();
            let l = probe.losses(&b);
            let touches = |loss: &Tensor, params: &ParamSet| {
                Tensor::run_backward(&[loss], &params.tensors(), true, false)
                    .iter()
                    .any(|g| g.defined() && g.abs().sum(Kind::Float).double_value(&[]) > 0.0)
            };
            assert!(touches(l.balance.as_ref().unwrap(), &probe.actor.params), "{phase:?}: L_b reaches π_u");
            assert!(touches(&l.universal, &probe.critic.params), "{phase:?}: L_u reaches Q");
            if phase == Phase::Online {
                assert!(touches(&l.universal, &probe.balance.params), "online: L_u reaches π_b");
            }
            for (off, owner) in [
                (Terms { universal: true, balance: false }, "balance"),
                (Terms { universal: false, balance: true }, "actor"),
            ] {
                let (mut full, mut masked) = (fresh(), fresh());
                full.update(&b);
                masked.update_terms(&b, off);
                let differ: Vec<String> = full
                    .named_tensors()
                    .iter()
                    .zip(masked.named_tensors())
                    .filter(|((_, x), (_, y))| !x.equal(y))
                    .map(|((n, _), _)| n.clone())
                    .collect();
                assert!(!differ.is_empty(), "{phase:?}: switching off the {owner} loss changed nothing");
                for n in &differ {
                    assert!(
                        n.starts_with(&format!("{owner}/")) || n.starts_with(&format!("{owner}_opt/")),
                        "{phase:?}: switching off the {owner} loss changed {n}"
                    );
                }
            }
        }
    }

    #[test]
    fn updates_are_finite_in_both_phases_and_with_a_fixed_beta() {
        let mut rng = AgentRng::new(2);
        for fixed in [None, Some(1.0)] {
            let mut a = Famo2oCql::new(Famo2oCqlConfig { fixed_beta: fixed, ..small() }, 3, 2, Device::Cpu, 0).unwrap();
            for phase in [Phase::Offline, Phase::Online] {
                a.set_phase(phase);
                for _ in 0..3 {
                    let m = a.update(&batch(&mut rng, 16));
                    assert!(m.iter().all(|(_, v)| v.is_finite()), "{m:?}");
                    assert_eq!(m.iter().any(|(k, _)| *k == "balance_loss"), fixed.is_none());
                }
            }
            let obs = rng.normal(&[4, 3], Device::Cpu);
            let act = a.act(&obs, true);
            assert!(act.abs().max().double_value(&[]) <= 1.0);
            let info = a.act_info();
            assert_eq!(info[0].1.len(), 4);
            if let Some(v) = fixed {
                assert!(info[0].1.iter().all(|b| *b == v as f32));
            }
            assert!(act.equal(&a.deterministic_policy().unwrap()(&obs)));
        }
    }

    #[test]
    fn save_load_continue_equals_an_uninterrupted_run() {
        let mut rng = AgentRng::new(11);
        let batches: Vec<TransitionBatch> = (0..8).map(|_| batch(&mut rng, 16)).collect();
        let obs = rng.normal(&[5, 3], Device::Cpu);
        let make = |seed| Famo2oCql::new(small(), 3, 2, Device::Cpu, seed).unwrap();
        crate::algos::testing::assert_exact_resume(make, Famo2oCql::named_tensors, &batches, 4, 6, &obs);
    }

    /// The official head is the default; `balance_entropy` is opt-in, learns α_b, logs it and
    /// resumes exactly; the diagnostics carry dQ/dβ.
    #[test]
    fn balance_entropy_is_opt_in_learns_its_temperature_and_resumes_exactly() {
        assert_eq!(Famo2oCqlConfig::default().balance_head_init, BalanceHeadInit::VarianceScaling);
        assert!(!Famo2oCqlConfig::default().balance_entropy);
        let mut rng = AgentRng::new(3);
        let batches: Vec<TransitionBatch> = (0..8).map(|_| batch(&mut rng, 16)).collect();
        let plain = Famo2oCql::new(small(), 3, 2, Device::Cpu, 0).unwrap();
        assert!(plain.named_tensors().iter().all(|(n, _)| !n.starts_with("balance_temperature")));
        let cfg = Famo2oCqlConfig { balance_entropy: true, balance_temperature_lr: 1e-2, ..small() };
        let mut a = Famo2oCql::new(cfg.clone(), 3, 2, Device::Cpu, 0).unwrap();
        assert!(a.named_tensors().iter().any(|(n, _)| n.starts_with("balance_temperature/")));
        let mut last = Metrics::new();
        for b in &batches {
            last = a.update(b);
        }
        let alpha = last.iter().find(|(k, _)| *k == "balance_alpha").expect("balance_alpha logged").1;
        assert!(alpha.is_finite() && (alpha - 1.0).abs() > 1e-3, "α_b moved: {alpha}");
        assert!(last.iter().any(|(k, _)| *k == "balance_entropy"));
        let d = a.diagnose(&batches[0]);
        assert!(d.iter().any(|(k, v)| *k == "dq_dbeta_mean" && v.is_finite()), "{d:?}");
        let obs = rng.normal(&[5, 3], Device::Cpu);
        let make = |seed| Famo2oCql::new(cfg.clone(), 3, 2, Device::Cpu, seed).unwrap();
        crate::algos::testing::assert_exact_resume(make, Famo2oCql::named_tensors, &batches, 4, 6, &obs);
    }
}
