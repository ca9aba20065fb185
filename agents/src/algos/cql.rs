//! Conservative Q-Learning for continuous actions (Kumar, Zhou, Tucker, Levine, "Conservative
//! Q-Learning for Offline Reinforcement Learning", NeurIPS 2020, arXiv 2006.04779), SAC-based,
//! as implemented in JaxCQL / Cal-QL / WSRL / CORL; Cal-QL ([`super::calql`]) is this file with
//! one term changed.
//!
//! Facts: ../shared/reference/algorithms.md §6.2 (and §6.3 for Cal-QL). Reference code
//! consulted for facts: nakamotoo/Cal-QL `conservative_sac.py`, WSRL `agents/cql.py`, CORL
//! `cql.py` / `cal_ql.py`.
//!
//! CQL is SAC ([`super::sac`]: TD target, actor, temperature, ensemble, UTD split all shared
//! through [`Sac::update_with`]) with a term added to every critic step. Per member i:
//!
//! `L_i = mean_b (Q_i(s, a) − y)² + w · Δ_i`, `Δ_i = E_s[ T · log Σ_k exp((Q_i(s, a_k) − log q(a_k)) / T) − Q_i(s, a_D) ]`
//!
//! over `3N` actions per state: N uniform on `[−1, 1]^|A|` (`log q = |A| log ½`), N from
//! `π(·|s)` and N from `π(·|s')` (both evaluated as `Q(s, ·)`, `log q = log π`), temperature
//! T = 1, N = 10 (importance-sampled form). Without importance sampling the data action joins
//! the set and the log-mean-exp is used: `T log(1/(3N+1) Σ_k exp(Q_i(s, a_k)/T))` (WSRL
//! Kitchen). The critic loss is the mean over members (SAC's `L_Q`); the reference has two
//! separate Q-networks, each with its own plain-mean loss and its own optimizer, which is the
//! same per-member gradient up to a constant factor Adam does not see.
//!
//! Lagrange form (`cql_lagrange`): `w · Δ_i` becomes `α' · w · (Δ_i − τ_gap)` with α' ≥ 0
//! learned by `L_α' = −α' · w · mean_i(Δ_i − τ_gap)` and clipped to `[0, cql_lagrange_max]`.
//!
//! The target is SAC's with the options JaxCQL uses: no entropy in the backup, and
//! `max_target_backup` (the max over K next actions; AntMaze). Defaults: locomotion (WSRL,
//! FamO2O base): w = 5, no Lagrange, 2 critics of 2×256, actor LR 1e-4, critic LR 3e-4,
//! H̄ = −|A|. Deviations: SAC's order (critic steps, then actor and temperature with the
//! updated critic) where JaxCQL computes all losses from the same parameters; the temperature
//! loss is SAC's `−α (log π + H̄)`, not JaxCQL's `−log α (log π + H̄)`.

use super::calql;
use super::flat::{join, overlay, split, table_of};
use super::sac::{CriticTerm, Sac, SacConfig, TermLogs};
use crate::agent::Phase;
use crate::nn::{Adam, ParamSet, Temperature, TemperatureForm};
use crate::{Agent, AgentError, DeterministicPolicy, Metrics, RewardBonus};
use o2o_datasets::TransitionBatch;
use serde::{Deserialize, Serialize};
use std::path::Path;
use tch::{Device, Kind, Tensor};

/// CQL's own hyperparameters; SAC's fields sit beside them in the same flat table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CqlTerm {
    /// Min-Q weight w (α in the paper): 5 locomotion and AntMaze, 1 Adroit.
    pub cql_alpha: f64,
    /// N, actions sampled per state from each of the three proposals.
    pub cql_n_actions: i64,
    /// Temperature T of the logsumexp.
    pub cql_temperature: f64,
    /// Importance-sampled logsumexp (true, the default) or log-mean-exp including the data
    /// action (false; WSRL Kitchen).
    pub cql_importance_sample: bool,
    /// Learn the weight α' by dual gradient descent (AntMaze).
    pub cql_lagrange: bool,
    /// τ_gap, the target value of Δ for the Lagrange form (0.8 AntMaze).
    pub cql_target_action_gap: f64,
    /// α'₀, the Lagrange multiplier's initial value: e (log α' = 1, Cal-QL's and CORL's
    /// `Scalar(1.0)`, fidelity-audit D11); WSRL's softplus multiplier starts at 1 instead.
    pub cql_lagrange_init: f64,
    /// The Lagrange multiplier's learning rate.
    pub cql_lagrange_lr: f64,
    /// Upper clip of α' (the reference's 1e6).
    pub cql_lagrange_max: f64,
}

impl Default for CqlTerm {
    fn default() -> Self {
        Self {
            cql_alpha: 5.0,
            cql_n_actions: 10,
            cql_temperature: 1.0,
            cql_importance_sample: true,
            cql_lagrange: false,
            cql_target_action_gap: 0.8,
            cql_lagrange_init: std::f64::consts::E,
            cql_lagrange_lr: 3e-4,
            cql_lagrange_max: 1e6,
        }
    }
}

impl CqlTerm {
    /// Reject settings that cannot work, naming the field.
    pub fn validate(&self) -> Result<(), AgentError> {
        let bad = |m: String| Err(AgentError::Config(m));
        if self.cql_alpha < 0.0 {
            return bad(format!("cql.cql_alpha must be ≥ 0, found {}", self.cql_alpha));
        }
        if self.cql_n_actions < 1 {
            return bad(format!("cql.cql_n_actions must be ≥ 1, found {}", self.cql_n_actions));
        }
        if self.cql_temperature <= 0.0 {
            return bad(format!("cql.cql_temperature must be > 0, found {}", self.cql_temperature));
        }
        if self.cql_lagrange_init <= 0.0 || self.cql_lagrange_max <= 0.0 {
            return bad(format!(
                "cql.cql_lagrange_init and cql_lagrange_max must be > 0, found {} and {}",
                self.cql_lagrange_init, self.cql_lagrange_max
            ));
        }
        Ok(())
    }
}

/// CQL's configuration: SAC's fields (with CQL's defaults) and the conservative term's, written
/// as one flat table (`actor_lr = 1e-4`, `cql_alpha = 5.0`, …).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "toml::Table", into = "toml::Table")]
pub struct CqlConfig {
    /// The SAC core: networks, ensemble, target, learning rates, temperature.
    pub sac: SacConfig,
    /// The conservative term.
    pub cql: CqlTerm,
}

impl Default for CqlConfig {
    fn default() -> Self {
        let sac = SacConfig { actor_lr: 1e-4, temperature_lr: 1e-4, backup_entropy: false, ..SacConfig::default() };
        Self { sac, cql: CqlTerm::default() }
    }
}

impl CqlConfig {
    /// Reject settings that cannot work, naming the field.
    pub fn validate(&self) -> Result<(), AgentError> {
        self.sac.validate()?;
        self.cql.validate()
    }
}

impl TryFrom<toml::Table> for CqlConfig {
    type Error = String;
    fn try_from(table: toml::Table) -> Result<Self, String> {
        let d = Self::default();
        let (own, rest) = split(table, &table_of(&d.cql));
        Ok(Self { sac: overlay(&d.sac, rest)?, cql: overlay(&d.cql, own)? })
    }
}

impl From<CqlConfig> for toml::Table {
    fn from(c: CqlConfig) -> Self {
        join(table_of(&c.sac), table_of(&c.cql))
    }
}

/// The learned Lagrange multiplier α' and its optimizer.
struct Lagrange {
    alpha: Temperature,
    params: ParamSet,
    opt: Adam,
}

/// A CQL (or Cal-QL) agent: a SAC core plus the conservative term.
pub struct Cql {
    name: &'static str,
    sac: Sac,
    term: CqlTerm,
    lagrange: Option<Lagrange>,
    /// Cal-QL only: `Some(calibrate_online)`.
    calibration: Option<bool>,
    phase: Phase,
}

/// Q-values of the sampled actions, each `[E, B, N]`, and the policy's log-probabilities `[B, N]`.
pub struct SampledQ {
    /// Q(s, a) for uniform a.
    pub rand: Tensor,
    /// Q(s, a) for a ~ π(·|s).
    pub current: Tensor,
    /// Q(s, a) for a ~ π(·|s').
    pub next: Tensor,
    /// log π(a|s) of the `current` actions.
    pub logp_current: Tensor,
    /// log π(a|s') of the `next` actions.
    pub logp_next: Tensor,
}

impl Cql {
    /// A new CQL agent for `obs_dim` observations and `act_dim` actions in `[-1, 1]`.
    pub fn new(cfg: CqlConfig, obs_dim: i64, act_dim: i64, device: Device, seed: u64) -> Result<Self, AgentError> {
        Self::build("cql", cfg, None, obs_dim, act_dim, device, seed)
    }

    /// The agent `name` reports; `calibration` is Cal-QL's `Some(calibrate_online)`.
    pub(crate) fn build(
        name: &'static str,
        cfg: CqlConfig,
        calibration: Option<bool>,
        obs_dim: i64,
        act_dim: i64,
        device: Device,
        seed: u64,
    ) -> Result<Self, AgentError> {
        cfg.cql.validate()?;
        let sac = Sac::named(name, cfg.sac, obs_dim, act_dim, device, seed)?;
        let lagrange = cfg.cql.cql_lagrange.then(|| {
            let mut params = ParamSet::new();
            let alpha = Temperature::new(
                &mut params,
                "cql_lagrange",
                cfg.cql.cql_lagrange_init,
                TemperatureForm::LogAlpha,
                device,
            );
            let opt = Adam::new(&params, cfg.cql.cql_lagrange_lr);
            Lagrange { alpha, params, opt }
        });
        Ok(Self { name, sac, term: cfg.cql, lagrange, calibration, phase: Phase::Offline })
    }

    /// The SAC core (its config, step counter, tensors).
    pub fn sac(&self) -> &Sac {
        &self.sac
    }

    /// The agent's random stream (the benchmark records the noise it draws).
    pub fn rng_mut(&mut self) -> &mut crate::rng::AgentRng {
        self.sac.rng_mut()
    }

    /// The SAC core, mutably (WSRL switches its critic steps and optimizers).
    pub(crate) fn sac_mut(&mut self) -> &mut Sac {
        &mut self.sac
    }

    /// One update of the SAC core alone: the TD loss without the conservative term (WSRL online).
    pub(crate) fn update_without_term(&mut self, batch: &TransitionBatch, bonus: Option<RewardBonus<'_>>) -> Metrics {
        self.sac.update_with(batch, |_, _, _| Default::default(), bonus)
    }

    /// SAC's update with the conservative term in the critic step (and a reward bonus).
    fn update_conservative(&mut self, batch: &TransitionBatch, bonus: Option<RewardBonus<'_>>) -> Metrics {
        let calibrate = self.calibrating();
        let (term, lagrange) = (&self.term, &mut self.lagrange);
        self.sac.update_with(batch, |sac, b, q| conservative_term(sac, term, lagrange.as_mut(), calibrate, b, q), bonus)
    }

    /// Reset every optimizer, the Lagrange multiplier's included.
    pub(crate) fn reset_optimizers(&mut self) {
        self.sac.reset_optimizers();
        if let Some(l) = self.lagrange.as_mut() {
            l.opt.reset();
        }
    }

    /// Every live tensor: the SAC core's and the Lagrange multiplier's with its moments.
    pub fn named_tensors(&self) -> Vec<(String, Tensor)> {
        let mut v = self.sac.named_tensors();
        v.extend(self.extra_tensors());
        v
    }

    fn extra_tensors(&self) -> Vec<(String, Tensor)> {
        match &self.lagrange {
            Some(l) => {
                let mut v: Vec<(String, Tensor)> =
                    l.params.named().iter().map(|(n, t)| (n.clone(), t.shallow_clone())).collect();
                v.extend(l.opt.state("cql_lagrange_opt", &l.params));
                v
            }
            None => Vec::new(),
        }
    }

    /// Whether the Cal-QL floor applies to the next updates.
    fn calibrating(&self) -> bool {
        match (self.calibration, self.phase) {
            (None, _) => false,
            (Some(_), Phase::Offline) => true,
            (Some(online), Phase::Online) => online,
        }
    }

    fn load_impl(&mut self, path: &Path, parts: Option<&[&str]>) -> Result<(), AgentError> {
        self.load_written_by(path, self.name, parts)
    }

    /// Restore a checkpoint that an agent named `algo` of the same architecture wrote (WSRL
    /// starts from a CQL or Cal-QL run's checkpoint).
    pub(crate) fn load_written_by(
        &mut self,
        path: &Path,
        algo: &str,
        parts: Option<&[&str]>,
    ) -> Result<(), AgentError> {
        let extra = self.extra_tensors();
        let mut opts: Vec<(&str, &mut Adam)> =
            self.lagrange.iter_mut().map(|l| ("cql_lagrange_opt", &mut l.opt)).collect();
        self.sac.load_with(path, algo, &extra, &mut opts, parts)
    }
}

/// The 3N actions per state of the conservative term, drawn once for the whole batch: N uniform
/// on `[−1, 1]^|A|`, N from `π(·|s)` and N from `π(·|s')`, side by side per state (`[B·3N, A]`,
/// state-major), with the policy draws' log-probabilities (`[B, N]` each).
pub struct SampledActions {
    /// `[B·3N, A]`: per state, N uniform, N from π(·|s), N from π(·|s').
    pub actions: Tensor,
    /// log π(a|s) of the second group.
    pub logp_current: Tensor,
    /// log π(a|s') of the third group.
    pub logp_next: Tensor,
}

/// Draw the conservative term's actions (random stream: uniform, then π(·|s), then π(·|s')).
pub fn sample_actions(sac: &mut Sac, b: &TransitionBatch, n: i64) -> SampledActions {
    let rows = b.obs.size()[0];
    let rand = sac.uniform_actions(rows * n);
    // N draws per state; the actor runs once per state, not once per draw.
    let (current, logp_current) = sac.sample_policy(&b.obs, n);
    let (next, logp_next) = sac.sample_policy(&b.next_obs, n);
    let actions = Tensor::stack(&[rand.view([rows, n, -1]), current.view([rows, n, -1]), next.view([rows, n, -1])], 1)
        .view([rows * 3 * n, -1]);
    SampledActions { actions, logp_current: logp_current.view([rows, n]), logp_next: logp_next.view([rows, n]) }
}

/// Q of the sampled actions of states `first .. first + len`, in one critic pass over their
/// `len·3N` rows; the critic's first layer sees each state once (`Sac::critic_q_paired`).
pub fn sampled_q(sac: &mut Sac, obs: &Tensor, a: &SampledActions, first: i64, len: i64) -> SampledQ {
    let n = a.logp_current.size()[1];
    let q = sac.critic_q_paired(&obs.narrow(0, first, len), &a.actions.narrow(0, first * 3 * n, len * 3 * n));
    SampledQ::split(&q, a, first, len)
}

impl SampledQ {
    /// The groups of `q` `[E, len·3N]`, the Q-values of states `first .. first + len`.
    pub(crate) fn split(q: &Tensor, a: &SampledActions, first: i64, len: i64) -> Self {
        let n = a.logp_current.size()[1];
        let q = q.view([q.size()[0], len, 3, n]);
        SampledQ {
            rand: q.select(2, 0),
            current: q.select(2, 1),
            next: q.select(2, 2),
            logp_current: a.logp_current.narrow(0, first, len),
            logp_next: a.logp_next.narrow(0, first, len),
        }
    }
}

/// The out-of-distribution part of CQL's gap per member and state, `[E, B]`:
/// importance-sampled `T log Σ_k exp((Q_i(s, a_k) − log q(a_k)) / T)` with `log q = |A| log ½` for
/// the uniform actions and `log π` for the policy's; otherwise
/// `T log(1/(3N+1) Σ_k exp(Q_i(s, a_k) / T))` with the data action a_D in the set.
/// `q_data` is `[E, B]`; the sampled Q-values are `[E, B, N]` (already floored for Cal-QL).
pub fn ood_value(q_data: &Tensor, s: &SampledQ, act_dim: i64, temperature: f64, importance_sample: bool) -> Tensor {
    let cat = if importance_sample {
        let log_uniform = act_dim as f64 * 0.5f64.ln();
        Tensor::cat(
            &[&s.rand - log_uniform, &s.next - s.logp_next.unsqueeze(0), &s.current - s.logp_current.unsqueeze(0)],
            -1,
        )
    } else {
        Tensor::cat(
            &[s.rand.shallow_clone(), q_data.unsqueeze(-1), s.next.shallow_clone(), s.current.shallow_clone()],
            -1,
        )
    };
    let ood = (cat / temperature).logsumexp([-1], false) * temperature;
    if importance_sample {
        ood
    } else {
        let k = s.rand.size()[2] * 3 + 1;
        ood - temperature * (k as f64).ln()
    }
}

/// CQL's gap per member, `[E]`: `Δ_i = mean_b [ood_i(b) − Q_i(s, a_D)]` ([`ood_value`]).
pub fn conservative_gap(
    q_data: &Tensor,
    s: &SampledQ,
    act_dim: i64,
    temperature: f64,
    importance_sample: bool,
) -> Tensor {
    (ood_value(q_data, s, act_dim, temperature, importance_sample) - q_data).mean_dim(-1, false, Kind::Float)
}

/// One chunk's out-of-distribution part, written out (the taped CPU path).
struct OodChunk {
    /// [`ood_value`] per member and state, `[E, len]`.
    value: Tensor,
    /// `∂(c Σ ood)/∂Q` for the sampled Q-values, `[E, len·3N]` (their layout).
    grad_q: Tensor,
    /// The same for the data action's Q, `[E, len]` (without importance sampling only).
    grad_data: Option<Tensor>,
    /// Σ Q of the uniform actions, Σ Q of π(·|s)'s (before the floor), and how many of the
    /// latter are below Cal-QL's floor.
    rand_sum: f64,
    policy_sum: f64,
    below: f64,
}

/// [`ood_value`] and its gradient for one chunk, per member and state, in one pass over the
/// chunk's sampled Q-values `q` `[E, len·3N]` (state-major, groups uniform / π(·|s) / π(·|s')):
/// with `x_k` the terms of the log-sum-exp (Cal-QL's floor `max(Q, G)` on the policy's groups
/// first), `ood = T log Σ_k exp(x_k / T)` (minus `T log(3N + 1)` without importance sampling) and
/// `∂ood/∂x_k = softmax(x / T)_k`, so a loss `c Σ ood` has gradient `c · softmax_k` in each
/// sampled Q (zero where the floor binds) and in the data action's Q. The same function as
/// the autograd path ([`ood_value`] on [`calql::floor`]ed values), without its dozen small ops
/// per chunk; sums are in f64.
#[allow(clippy::too_many_arguments)]
fn ood_chunk_cpu(
    q: &Tensor,
    q_data: &Tensor,
    logp_current: &Tensor,
    logp_next: &Tensor,
    floor: Option<&Tensor>,
    act_dim: i64,
    temperature: f64,
    importance_sample: bool,
    c: f64,
) -> OodChunk {
    let vec = |t: &Tensor| {
        Vec::<f32>::try_from(t.detach().contiguous().view([-1]).to_kind(Kind::Float)).expect("float tensor")
    };
    let (e, len) = (q_data.size()[0] as usize, q_data.size()[1] as usize);
    let n = logp_current.size()[1] as usize;
    let (qv, qd, lc, ln) = (vec(q), vec(q_data), vec(logp_current), vec(logp_next));
    let g = floor.map(vec);
    let log_uniform = act_dim as f64 * 0.5f64.ln();
    let terms = 3 * n + usize::from(!importance_sample);
    let shift = if importance_sample { 0.0 } else { temperature * (terms as f64).ln() };
    let (mut value, mut grad_q, mut grad_data) =
        (vec![0f32; e * len], vec![0f32; e * len * 3 * n], vec![0f32; e * len]);
    let (mut rand_sum, mut policy_sum, mut below) = (0.0, 0.0, 0.0);
    let mut x = vec![0f64; terms];
    let mut live = vec![true; terms];
    for i in 0..e {
        for s in 0..len {
            let row = &qv[(i * len + s) * 3 * n..][..3 * n];
            for k in 0..3 * n {
                let (group, j) = (k / n, k % n);
                let mut v = row[k] as f64;
                match group {
                    0 => rand_sum += v,
                    1 => policy_sum += v,
                    _ => {}
                }
                live[k] = true;
                if let (Some(g), 1 | 2) = (&g, group) {
                    let floor = g[s] as f64;
                    if group == 1 && v < floor {
                        below += 1.0;
                    }
                    if v < floor {
                        v = floor;
                        live[k] = false;
                    }
                }
                x[k] = match (importance_sample, group) {
                    (false, _) => v,
                    (true, 0) => v - log_uniform,
                    (true, 1) => v - lc[s * n + j] as f64,
                    (true, _) => v - ln[s * n + j] as f64,
                };
            }
            if !importance_sample {
                x[3 * n] = qd[i * len + s] as f64;
            }
            let m = x.iter().fold(f64::NEG_INFINITY, |a, &b| a.max(b / temperature));
            let total: f64 = x.iter().map(|&v| (v / temperature - m).exp()).sum();
            value[i * len + s] = (temperature * (m + total.ln()) - shift) as f32;
            let out = &mut grad_q[(i * len + s) * 3 * n..][..3 * n];
            for k in 0..3 * n {
                out[k] = if live[k] { (c * (x[k] / temperature - m).exp() / total) as f32 } else { 0.0 };
            }
            if !importance_sample {
                grad_data[i * len + s] = (c * (x[3 * n] / temperature - m).exp() / total) as f32;
            }
        }
    }
    let t = |v: Vec<f32>, shape: &[i64]| Tensor::from_slice(&v).view(shape);
    OodChunk {
        value: t(value, &[e as i64, len as i64]),
        grad_q: t(grad_q, &[e as i64, (len * 3 * n) as i64]),
        grad_data: (!importance_sample).then(|| t(grad_data, &[e as i64, len as i64])),
        rand_sum,
        policy_sum,
        below,
    }
}

/// Critic rows per member in one chunk of the sampled-action pass (see [`conservative_term`]).
const CHUNK_ROWS: i64 = 1024;

/// The term added to one critic step, and the values to log.
///
/// The loss is `c · mean_i Δ_i` (`c = w`, or `α' · w` with α' held fixed in the Lagrange form,
/// which also subtracts `τ_gap`). Its out-of-distribution part is a mean over states of a
/// function of that state's 3N sampled rows, so it is evaluated and differentiated a chunk of
/// states at a time (about `CHUNK_ROWS` rows per member), its gradient summed over chunks: the
/// pass's activations (`[E, B·3N, width]`, 15.7 MB per layer for 2 critics at B = 256, N = 10)
/// then stay in cache, where one pass over all rows runs its matmuls and elementwise passes
/// from memory. On the CPU each chunk runs the critic's taped pass (the chunk's loss is
/// differentiated in its Q-values, then carried through the networks by
/// `EnsembleMlp::backward_params`); elsewhere autograd differentiates it. The summed gradient is
/// returned as [`CriticTerm::grads`]; the data part `−c · mean(Q(s, a_D))` (plus, without
/// importance sampling, the data action's share of the log-sum-exp) as [`CriticTerm::on_q`],
/// differentiated with the TD loss.
fn conservative_term(
    sac: &mut Sac,
    term: &CqlTerm,
    lagrange: Option<&mut Lagrange>,
    calibrate: bool,
    b: &TransitionBatch,
    q_data: &Tensor,
) -> (CriticTerm, TermLogs) {
    conservative_term_in_chunks(sac, term, lagrange, calibrate, b, q_data, CHUNK_ROWS)
}

#[allow(clippy::too_many_arguments)]
fn conservative_term_in_chunks(
    sac: &mut Sac,
    term: &CqlTerm,
    lagrange: Option<&mut Lagrange>,
    calibrate: bool,
    b: &TransitionBatch,
    q_data: &Tensor,
    chunk_rows: i64,
) -> (CriticTerm, TermLogs) {
    let (n, is) = (term.cql_n_actions, term.cql_importance_sample);
    let (e, rows) = (q_data.size()[0], q_data.size()[1]);
    let g = calibrate
        .then(|| b.mc_return.as_ref().expect("calql needs batches with mc_return (AgentConfig::needs_mc_returns)"));
    let actions = sample_actions(sac, b, n);
    // The Lagrange multiplier α' (differentiable, for the dual step) with its optimizer state.
    let lagrange = lagrange.map(|l| {
        let alpha_prime = l.alpha.alpha().clamp(0.0, term.cql_lagrange_max).squeeze();
        (l, alpha_prime)
    });
    // α' held fixed in the critic's loss.
    let alpha_prime = lagrange.as_ref().map(|(_, a)| a.detach());
    // c / (E·B) per (member, state) of the out-of-distribution sum.
    let scale = term.cql_alpha / (e * rows) as f64;
    let params = sac.critic_params().tensors();
    let mut grads: Vec<Tensor> = params.iter().map(|p| p.detach().zeros_like()).collect();
    let taped = sac.critic().tape_applies(&b.obs);
    // Without importance sampling a_D is in the set: its share of the gradient goes through
    // the data pass.
    let q_data_grad = (!is).then(|| q_data.detach().zeros_like());
    let mut ood_sum = Tensor::zeros([e], (Kind::Float, q_data.device()));
    let scalar = || Tensor::zeros([], (Kind::Float, q_data.device()));
    let (mut rand_sum, mut policy_sum, mut below) = (scalar(), scalar(), scalar());
    let per_chunk = (chunk_rows / (3 * n)).max(1);
    // c · α' per (member, state) of the out-of-distribution sum, as a number (the written-out path).
    let c = scale * alpha_prime.as_ref().map_or(1.0, |a| a.double_value(&[]));
    let mut first = 0;
    while first < rows {
        let len = per_chunk.min(rows - first);
        let (obs, act) = (b.obs.narrow(0, first, len), actions.actions.narrow(0, first * 3 * n, len * 3 * n));
        let qd = q_data.detach().narrow(1, first, len);
        let (chunk, ood, qd_grad) = if taped {
            // The critic's taped pass, the term's gradient in the Q-values written out.
            let (q, tape) = sac.critic().forward_paired_taped(&obs, &act);
            let floor = g.map(|g| g.narrow(0, first, len));
            let o = ood_chunk_cpu(
                &q,
                &qd,
                &actions.logp_current.narrow(0, first, len),
                &actions.logp_next.narrow(0, first, len),
                floor.as_ref(),
                sac.act_dim(),
                term.cql_temperature,
                is,
                c,
            );
            let _ = rand_sum.g_add_(&Tensor::from(o.rand_sum as f32));
            let _ = policy_sum.g_add_(&Tensor::from(o.policy_sum as f32));
            let _ = below.g_add_(&Tensor::from(o.below as f32));
            (sac.critic().backward_params(tape, &o.grad_q), o.value, o.grad_data)
        } else {
            let q = sac.critic_q_paired(&obs, &act);
            let mut s = SampledQ::split(&q, &actions, first, len);
            let _ = rand_sum.g_add_(&s.rand.detach().sum(Kind::Float));
            let _ = policy_sum.g_add_(&s.current.detach().sum(Kind::Float));
            if let Some(g) = g {
                let g = g.narrow(0, first, len);
                let _ = below.g_add_(&calql::below_floor(&s.current.detach(), &g));
                s.current = calql::floor(&s.current, &g);
                s.next = calql::floor(&s.next, &g);
            }
            let qd = if is { qd } else { qd.set_requires_grad(true) };
            let ood = ood_value(&qd, &s, sac.act_dim(), term.cql_temperature, is);
            let mut loss = ood.sum(Kind::Float) * scale;
            if let Some(a) = &alpha_prime {
                loss = loss * a;
            }
            let mut inputs: Vec<&Tensor> = params.iter().collect();
            if !is {
                inputs.push(&qd);
            }
            let mut chunk = Tensor::run_backward(&[&loss], &inputs, false, false);
            let qd_grad = if is { None } else { chunk.pop() };
            (chunk, ood.detach(), qd_grad)
        };
        tch::no_grad(|| {
            for (acc, g) in grads.iter_mut().zip(&chunk) {
                let _ = acc.g_add_(g);
            }
            if let (Some(acc), Some(g)) = (&q_data_grad, &qd_grad) {
                let _ = acc.narrow(1, first, len).g_add_(g);
            }
        });
        let _ = ood_sum.g_add_(&ood.sum_dim_intlist(&[1i64][..], false, Kind::Float));
        first += len;
    }
    // Δ_i, held fixed (logs and the Lagrange step).
    let gap = ood_sum / rows as f64 - q_data.detach().mean_dim(1, false, Kind::Float);
    // Sums over members, states and N draws.
    let count = (e * rows * n) as f64;
    let mut logs = vec![("cql_q_rand", rand_sum / count), ("cql_q_policy", policy_sum / count)];
    if calibrate {
        logs.push(("calql_bound_rate", below / count));
    }
    logs.push(("cql_gap", gap.mean(Kind::Float)));
    // The data part −c · mean(Q(s, a_D)), differentiated through the data pass.
    let mut on_q = -q_data.mean(Kind::Float) * term.cql_alpha;
    if let Some((l, live)) = lagrange {
        // α' · w · mean_i (Δ_i − τ_gap) in the critic's loss, α' held fixed (the summed chunk
        // gradient already carries it); then one step on L_α' = −α' · w · mean_i (Δ_i − τ_gap)
        // with Δ held fixed.
        let alpha_prime = live.detach();
        on_q = on_q * &alpha_prime;
        let excess = (&gap - term.cql_target_action_gap).mean(Kind::Float) * term.cql_alpha;
        let dual = -(live * &excess);
        l.opt.minimize(&l.params, &dual);
        logs.push(("cql_alpha_prime", alpha_prime));
        logs.push(("cql_alpha_prime_loss", dual.detach()));
    }
    // ⟨Q(s, a_D), G_D⟩: gradient G_D, the data action's share of the log-sum-exp.
    if let Some(qg) = &q_data_grad {
        on_q = on_q + (q_data * qg).sum(Kind::Float);
    }
    (CriticTerm { on_q: Some(on_q), grads: Some(grads) }, logs)
}

impl Agent for Cql {
    fn name(&self) -> &'static str {
        self.name
    }

    fn gamma(&self) -> Option<f64> {
        self.sac.gamma()
    }

    fn act(&mut self, obs: &Tensor, deterministic: bool) -> Tensor {
        self.sac.act(obs, deterministic)
    }

    fn deterministic_policy(&self) -> Option<DeterministicPolicy> {
        self.sac.deterministic_policy()
    }

    fn update(&mut self, batch: &TransitionBatch) -> Metrics {
        self.update_conservative(batch, None)
    }

    fn update_with_bonus(&mut self, batch: &TransitionBatch, bonus: RewardBonus<'_>) -> Option<Metrics> {
        Some(self.update_conservative(batch, Some(bonus)))
    }

    fn save(&self, path: &Path) -> Result<(), AgentError> {
        let opts: Vec<(&str, &Adam)> = self.lagrange.iter().map(|l| ("cql_lagrange_opt", &l.opt)).collect();
        self.sac.save_with(path, self.name, &self.extra_tensors(), &opts)
    }

    fn load(&mut self, path: &Path) -> Result<(), AgentError> {
        self.load_impl(path, None)
    }

    fn load_parts(&mut self, path: &Path, parts: &[&str]) -> Result<(), AgentError> {
        self.load_impl(path, Some(parts))
    }

    fn set_phase(&mut self, phase: Phase) {
        self.phase = phase;
        self.sac.enter_phase(phase);
    }

    fn diagnose(&mut self, batch: &TransitionBatch) -> Metrics {
        self.sac.diagnostics(batch)
    }

    fn critic_values(&self, obs: &Tensor, action: &Tensor) -> Option<Tensor> {
        self.sac.critic_values(obs, action)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::AgentRng;

    fn t(v: &[f32], shape: &[i64]) -> Tensor {
        Tensor::from_slice(v).view(shape)
    }

    /// Δ on a 1-member, 1-state, N = 1 example, against the formula evaluated by hand.
    #[test]
    fn gap_matches_hand_computed_values() {
        let s = SampledQ {
            rand: t(&[1.0], &[1, 1, 1]),
            current: t(&[2.0], &[1, 1, 1]),
            next: t(&[0.5], &[1, 1, 1]),
            logp_current: t(&[-1.0], &[1, 1]),
            logp_next: t(&[0.3], &[1, 1]),
        };
        let q_data = t(&[1.5], &[1, 1]);
        // Importance-sampled, |A| = 2: terms 1 − 2 ln ½, 0.5 − 0.3, 2 + 1.
        let terms = [1.0 - 2.0 * 0.5f64.ln(), 0.5 - 0.3, 3.0];
        let want = terms.iter().map(|x| x.exp()).sum::<f64>().ln() - 1.5;
        let got = conservative_gap(&q_data, &s, 2, 1.0, true).double_value(&[0]);
        assert!((got - want).abs() < 1e-5, "{got} vs {want}");
        // Temperature 2: T log Σ exp(x / T).
        let want_t = 2.0 * terms.iter().map(|x| (x / 2.0).exp()).sum::<f64>().ln() - 1.5;
        assert!((conservative_gap(&q_data, &s, 2, 2.0, true).double_value(&[0]) - want_t).abs() < 1e-5);
        // Without importance sampling: log-mean-exp over {1, 1.5, 0.5, 2}.
        let want_n = ([1.0f64, 1.5, 0.5, 2.0].iter().map(|x| x.exp()).sum::<f64>() / 4.0).ln() - 1.5;
        assert!((conservative_gap(&q_data, &s, 2, 1.0, false).double_value(&[0]) - want_n).abs() < 1e-5);
        // Equal Q everywhere and no importance weights: the log-mean-exp gap is exactly 0.
        let flat =
            SampledQ { rand: t(&[1.5], &[1, 1, 1]), current: t(&[1.5], &[1, 1, 1]), next: t(&[1.5], &[1, 1, 1]), ..s };
        assert!(conservative_gap(&q_data, &flat, 2, 1.0, false).double_value(&[0]).abs() < 1e-6);
    }

    fn batch(rng: &mut AgentRng, n: i64) -> TransitionBatch {
        TransitionBatch {
            obs: rng.normal(&[n, 3], Device::Cpu),
            action: rng.normal(&[n, 2], Device::Cpu).tanh(),
            reward: rng.normal(&[n], Device::Cpu),
            next_obs: rng.normal(&[n, 3], Device::Cpu),
            terminal: Tensor::zeros([n], (Kind::Float, Device::Cpu)),
            mc_return: Some(rng.normal(&[n], Device::Cpu)),
            is_offline: None,
        }
    }

    #[test]
    fn both_forms_update_with_finite_metrics_and_the_lagrange_multiplier_moves() {
        let mut rng = AgentRng::new(0);
        for lagrange in [false, true] {
            let mut cfg = CqlConfig::default();
            cfg.cql.cql_lagrange = lagrange;
            cfg.cql.cql_n_actions = 3;
            cfg.sac.max_target_backup = true;
            let mut a = Cql::new(cfg, 3, 2, Device::Cpu, 1).unwrap();
            let log_alpha_prime = |a: &Cql| {
                a.named_tensors()
                    .into_iter()
                    .find(|(n, _)| n == "cql_lagrange/param")
                    .map(|(_, t)| t.double_value(&[0]))
            };
            if lagrange {
                // α'₀ = e, as Cal-QL's and CORL's log α' = Scalar(1.0) (fidelity-audit D11).
                assert!((log_alpha_prime(&a).unwrap() - 1.0).abs() < 1e-6);
            }
            for _ in 0..3 {
                let m = a.update(&batch(&mut rng, 16));
                assert!(m.iter().all(|(_, v)| v.is_finite()), "{m:?}");
                assert!(m.iter().any(|(k, _)| *k == "cql_gap"));
                assert_eq!(m.iter().any(|(k, _)| *k == "cql_alpha_prime"), lagrange);
            }
            if lagrange {
                assert!((log_alpha_prime(&a).unwrap() - 1.0).abs() > 1e-5, "α' did not move");
            }
        }
    }

    /// The chunked term has the value and the critic gradient of the whole-batch formula
    /// (`conservative_gap` on one pass over every state's sampled actions), for CQL and Cal-QL,
    /// with and without importance sampling, in the plain and the Lagrange form.
    #[test]
    fn chunked_term_matches_the_whole_batch_formula() {
        let mut rng = AgentRng::new(4);
        let b = batch(&mut rng, 7);
        for (calibrate, is, lagrange) in
            [(false, true, false), (true, true, false), (false, false, false), (true, false, true)]
        {
            let mut cfg = CqlConfig::default();
            cfg.cql.cql_n_actions = 3;
            cfg.cql.cql_importance_sample = is;
            cfg.cql.cql_lagrange = lagrange;
            cfg.sac.critic.hidden = vec![16, 16];
            let term = cfg.cql.clone();
            let mut whole = Cql::build("cql", cfg.clone(), calibrate.then_some(true), 3, 2, Device::Cpu, 9).unwrap();
            // Reference: one pass, the formula as written.
            let q = whole.sac.critic_q(&b.obs, &b.action);
            let actions = sample_actions(&mut whole.sac, &b, 3);
            let mut s = sampled_q(&mut whole.sac, &b.obs, &actions, 0, 7);
            if calibrate {
                let g = b.mc_return.as_ref().unwrap();
                s.current = calql::floor(&s.current, g);
                s.next = calql::floor(&s.next, g);
            }
            let gap = conservative_gap(&q, &s, 2, 1.0, is);
            let alpha_prime = whole.lagrange.as_ref().map(|l| l.alpha.alpha().detach().squeeze());
            let want = match &alpha_prime {
                None => gap.mean(Kind::Float) * 5.0,
                Some(a) => (gap - term.cql_target_action_gap).mean(Kind::Float) * 5.0 * a,
            };
            let params = whole.sac.critic_params().tensors();
            let want_g = Tensor::run_backward(&[&want], &params.iter().collect::<Vec<_>>(), false, false);
            let want_gap = tch::no_grad(|| {
                conservative_gap(&whole.sac.q_values(&b.obs, &b.action), &s, 2, 1.0, is)
                    .mean(Kind::Float)
                    .double_value(&[])
            });
            for chunk_rows in [9, 27, 1024] {
                let mut a = Cql::build("cql", cfg.clone(), calibrate.then_some(true), 3, 2, Device::Cpu, 9).unwrap();
                let q = a.sac.critic_q(&b.obs, &b.action);
                let t =
                    conservative_term_in_chunks(&mut a.sac, &term, a.lagrange.as_mut(), calibrate, &b, &q, chunk_rows);
                let (t, logs) = t;
                let gap = logs.iter().find(|(k, _)| *k == "cql_gap").unwrap().1.double_value(&[]);
                assert!(
                    (gap - want_gap).abs() < 1e-5 * (1.0 + want_gap.abs()),
                    "gap, chunk {chunk_rows}: {gap} vs {want_gap}"
                );
                // The whole gradient: the data part through the data pass, plus the chunks' own.
                let params = a.sac.critic_params().tensors();
                let through_q =
                    Tensor::run_backward(&[t.on_q.as_ref().unwrap()], &params.iter().collect::<Vec<_>>(), false, false);
                for ((g, own), w) in through_q.iter().zip(t.grads.as_ref().unwrap()).zip(&want_g) {
                    let err = (g + own - w).abs().max().double_value(&[]);
                    let scale = 1.0 + w.abs().max().double_value(&[]);
                    assert!(
                        err < 1e-5 * scale,
                        "gradient, chunk {chunk_rows}, calibrate {calibrate}, is {is}, lagrange {lagrange}: {err}"
                    );
                }
            }
        }
    }

    #[test]
    fn flat_table_round_trip_and_unknown_keys() {
        let c: CqlConfig = toml::Value::Table(
            toml::from_str("cql_alpha = 1.0\nactor_lr = 3e-5\ncritic = { layer_norm = true }").unwrap(),
        )
        .try_into()
        .unwrap();
        assert_eq!(c.cql.cql_alpha, 1.0);
        assert_eq!(c.sac.actor_lr, 3e-5);
        assert!(c.sac.critic.layer_norm);
        assert_eq!(c.sac.critic.hidden, vec![256, 256]);
        assert!(!c.sac.backup_entropy, "CQL's default");
        let back: CqlConfig = toml::Value::Table(toml::Table::from(c.clone())).try_into().unwrap();
        assert_eq!(back, c);
        let e = toml::Value::Table(toml::from_str("cql_alpah = 1.0").unwrap())
            .try_into::<CqlConfig>()
            .unwrap_err()
            .to_string();
        assert!(e.contains("cql_alpah"), "{e}");
    }
}
