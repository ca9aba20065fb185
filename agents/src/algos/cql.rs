//! Conservative Q-Learning for continuous actions (Kumar, Zhou, Tucker, Levine, "Conservative
//! Q-Learning for Offline Reinforcement Learning", NeurIPS 2020, arXiv 2006.04779), SAC-based,
//! as implemented in JaxCQL / Cal-QL / WSRL / CORL. Cal-QL (`calql.rs`) is this file with one
//! term changed: it supplies a [`PolicyFloor`] under the policy actions' Q-values.
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
//! The out-of-distribution part is [`crate::nn::cql`]'s chunked log-sum-exp ([`OodTerm`]).
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

use super::flat::{join, overlay, split, table_of};
use super::sac::{Sac, SacConfig, TermLogs};
use crate::agent::Phase;
use crate::checkpoint::{Part, Stateful};
use crate::nn::cql::{OodTerm, SampledActions, CHUNK_ROWS};
use crate::nn::critic::CriticTerm;
use crate::nn::{PolicyGraph, Temperature, TemperatureForm, Trained};
use crate::rng::AgentRng;
use crate::{Agent, AgentError, DeterministicPolicy, Metrics, RewardBonus};
use o2o_datasets::TransitionBatch;
use serde::{Deserialize, Serialize};
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

impl CqlConfig {
    /// SAC's keys ([`SacConfig::metric_keys`]) and the conservative term's: `cql_q_rand` and
    /// `cql_q_policy` (the mean Q of the uniform and policy proposals), `cql_gap` (Δ), and in the
    /// Lagrange form the multiplier's `cql_alpha_prime` and `cql_alpha_prime_loss`.
    pub fn metric_keys(&self) -> crate::MetricKeys {
        let mut keys = self.sac.metric_keys();
        keys.update.extend(["cql_q_rand", "cql_q_policy", "cql_gap"]);
        if self.cql.cql_lagrange {
            keys.update.extend(["cql_alpha_prime", "cql_alpha_prime_loss"]);
        }
        keys
    }
}

/// A CQL (or Cal-QL) agent: a SAC core plus the conservative term.
pub struct Cql {
    name: &'static str,
    sac: Sac,
    term: CqlTerm,
    /// The learned Lagrange multiplier α' (`cql_lagrange`).
    lagrange: Option<Trained<Temperature>>,
    /// A variant's floor under the policy actions' Q-values (Cal-QL's).
    floor: Option<PolicyFloor>,
    phase: Phase,
}

/// A floor under the Q-values of the policy's actions in the conservative term (Cal-QL's), a
/// parameter of CQL that the variant supplies: `Q(s, a_k) ← max(Q(s, a_k), f(s))` for the
/// actions from π(·|s) and π(·|s'), where `f(b, phase)` is the per-state floor `[B]` of a
/// minibatch `b` in a phase, or `None` where no floor applies in that phase.
pub type PolicyFloor = Box<dyn Fn(&TransitionBatch, Phase) -> Option<Tensor> + Send + Sync>;

impl Cql {
    /// A new CQL agent for `obs_dim` observations and `act_dim` actions in `[-1, 1]`.
    pub fn new(cfg: CqlConfig, obs_dim: i64, act_dim: i64, device: Device, seed: u64) -> Result<Self, AgentError> {
        Self::build("cql", cfg, None, obs_dim, act_dim, device, seed)
    }

    /// The agent `name` reports, with a variant's `floor` under the policy's Q-values.
    pub(crate) fn build(
        name: &'static str,
        cfg: CqlConfig,
        floor: Option<PolicyFloor>,
        obs_dim: i64,
        act_dim: i64,
        device: Device,
        seed: u64,
    ) -> Result<Self, AgentError> {
        cfg.cql.validate()?;
        let sac = Sac::named(name, cfg.sac, obs_dim, act_dim, device, seed)?;
        let (init, lr) = (cfg.cql.cql_lagrange_init, cfg.cql.cql_lagrange_lr);
        let lagrange = (cfg.cql.cql_lagrange)
            .then(|| Temperature::trained("cql_lagrange", init, TemperatureForm::LogAlpha, lr, device));
        Ok(Self { name, sac, term: cfg.cql, lagrange, floor, phase: Phase::Offline })
    }

    /// The SAC core (its config, step counter, tensors).
    pub fn sac(&self) -> &Sac {
        &self.sac
    }

    /// The agent's random stream (the benchmark records the noise it draws).
    pub fn rng_mut(&mut self) -> &mut AgentRng {
        self.sac.rng_mut()
    }

    /// The SAC core, mutably (WSRL switches its critic steps and optimizers).
    pub(crate) fn sac_mut(&mut self) -> &mut Sac {
        &mut self.sac
    }

    /// One update of the SAC core alone: the TD loss without the conservative term (WSRL online).
    pub(crate) fn update_without_term(&mut self, batch: &TransitionBatch, bonus: Option<RewardBonus<'_>>) -> Metrics {
        self.sac.update_with(batch, &mut |_, _, _| Default::default(), bonus)
    }

    /// SAC's update with the conservative term in the critic step (and a reward bonus).
    fn update_conservative(&mut self, batch: &TransitionBatch, bonus: Option<RewardBonus<'_>>) -> Metrics {
        let (term, lagrange, floor, phase) = (&self.term, &mut self.lagrange, &self.floor, self.phase);
        let mut term_of = |sac: &mut Sac, b: &TransitionBatch, q: &Tensor| {
            let floor = floor.as_ref().and_then(|f| f(b, phase));
            conservative_term(sac, term, lagrange.as_mut(), floor, b, q)
        };
        self.sac.update_with(batch, &mut term_of, bonus)
    }
}

/// CQL's 3N actions per state of `b`: N uniform on `[−1, 1]^|A|`, N from `π(·|s)` and N from
/// `π(·|s')`, drawn in that order from the agent's stream (the actor runs once per state, not
/// once per draw), without gradients.
fn proposals(sac: &mut Sac, b: &TransitionBatch, n: i64) -> SampledActions {
    let (rows, act_dim, device) = (b.obs.size()[0], sac.act_dim, sac.device);
    let rand = sac.rng.uniform_tensor(&[rows * n, act_dim], device) * 2.0 - 1.0;
    let mut policy = |obs: &Tensor| {
        let eps = sac.rng.normal(&[rows * n, act_dim], device);
        tch::no_grad(|| sac.actor.net.sample_repeated(obs, &eps, n))
    };
    let (current, next) = (policy(&b.obs), policy(&b.next_obs));
    SampledActions::new(&rand, current, next, n)
}

/// The term added to one critic step, and the values to log.
///
/// The loss is `c · mean_i Δ_i` (`c = w`, or `α' · w` with α' held fixed in the Lagrange form,
/// which also subtracts `τ_gap`), with the policy actions' Q-values floored at `floor` where a
/// variant supplies one. Its out-of-distribution part `c / (E B) Σ_{i,s} ood_i(s)` is
/// differentiated a chunk of states at a time ([`OodTerm::sum`]) and returned as
/// [`CriticTerm::grads`]; the data part `−c · mean(Q(s, a_D))` (plus, without importance
/// sampling, the data action's share of the log-sum-exp) as [`CriticTerm::on_q`],
/// differentiated with the TD loss.
fn conservative_term(
    sac: &mut Sac,
    term: &CqlTerm,
    lagrange: Option<&mut Trained<Temperature>>,
    floor: Option<Tensor>,
    b: &TransitionBatch,
    q_data: &Tensor,
) -> (CriticTerm, TermLogs) {
    let (e, rows, n) = (q_data.size()[0], q_data.size()[1], term.cql_n_actions);
    let actions = proposals(sac, b, n);
    // The Lagrange multiplier α' (differentiable, for the dual step) with its optimizer state.
    let lagrange = lagrange.map(|l| {
        let alpha_prime = l.net.alpha().clamp(0.0, term.cql_lagrange_max).squeeze();
        (l, alpha_prime)
    });
    // α' held fixed in the critic's loss.
    let alpha_prime = lagrange.as_ref().map(|(_, a)| a.detach());
    // (w / (E B)) Σ_{i,s} T log Σ_k exp((Q_i(s, a_k) − log q(a_k)) / T), times α', and its gradient.
    let ood = OodTerm {
        critic: &sac.critic.net,
        params: &sac.critic.params,
        act_dim: sac.act_dim,
        temperature: term.cql_temperature,
        importance_sample: term.cql_importance_sample,
        floor: floor.as_ref(),
        scale: term.cql_alpha / (e * rows) as f64,
        alpha_prime: alpha_prime.as_ref(),
        chunk_rows: CHUNK_ROWS,
    }
    .sum(&b.obs, &actions, q_data, &mut sac.rng);
    // Δ_i, held fixed (logs and the Lagrange step).
    let gap = ood.per_member / rows as f64 - q_data.detach().mean_dim(1, false, Kind::Float);
    // Sums over members, states and N draws.
    let count = (e * rows * n) as f64;
    let mut logs = vec![("cql_q_rand", ood.rand_sum / count), ("cql_q_policy", ood.policy_sum / count)];
    if floor.is_some() {
        logs.push(("calql_bound_rate", ood.below / count));
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
        l.minimize(&dual);
        logs.push(("cql_alpha_prime", alpha_prime));
        logs.push(("cql_alpha_prime_loss", dual.detach()));
    }
    // ⟨Q(s, a_D), G_D⟩: gradient G_D, the data action's share of the log-sum-exp.
    if let Some(qg) = &ood.q_data_grad {
        on_q = on_q + (q_data * qg).sum(Kind::Float);
    }
    (CriticTerm { on_q: Some(on_q), grads: Some(ood.grads) }, logs)
}

impl Stateful for Cql {
    fn name(&self) -> &'static str {
        self.name
    }

    /// The SAC core's parts, then the Lagrange multiplier's.
    fn parts(&self) -> Vec<Part<'_>> {
        let mut parts = vec![Part::Group(self.sac.parts())];
        parts.extend(self.lagrange.as_ref().map(|l| Part::trained("cql_lagrange_opt", l)));
        parts
    }

    fn progress(&self) -> (i64, &AgentRng) {
        self.sac.progress()
    }

    fn set_progress(&mut self, step: i64, rng: AgentRng) {
        self.sac.set_progress(step, rng);
    }
}

impl Agent for Cql {
    fn gamma(&self) -> Option<f64> {
        self.sac.gamma()
    }

    fn act(&mut self, obs: &Tensor, deterministic: bool) -> Tensor {
        self.sac.act(obs, deterministic)
    }

    fn deterministic_policy(&self) -> Option<DeterministicPolicy> {
        self.sac.deterministic_policy()
    }

    fn policy_graph(&self) -> Option<PolicyGraph> {
        self.sac.policy_graph()
    }

    fn update(&mut self, batch: &TransitionBatch) -> Metrics {
        self.update_conservative(batch, None)
    }

    fn update_with_bonus(&mut self, batch: &TransitionBatch, bonus: RewardBonus<'_>) -> Option<Metrics> {
        Some(self.update_conservative(batch, Some(bonus)))
    }

    fn set_phase(&mut self, phase: Phase) {
        self.phase = phase;
        self.sac.set_phase(phase);
    }

    fn diagnose(&mut self, batch: &TransitionBatch) -> Metrics {
        self.sac.diagnose(batch)
    }

    fn critic_values(&self, obs: &Tensor, action: &Tensor) -> Option<Tensor> {
        self.sac.critic_values(obs, action)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::cql::{conservative_gap, SampledQ};
    use crate::nn::critic::state_action;
    use crate::rng::AgentRng;

    /// States of 3 numbers, 2 actions, Monte-Carlo returns.
    fn batch(rng: &mut AgentRng, n: i64) -> TransitionBatch {
        crate::algos::testing::batch(rng, n, 3, 2, false, true)
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

    /// The term has the value and the critic gradient of the whole-batch formula
    /// (`conservative_gap` on one pass over every state's sampled actions, data part included),
    /// for CQL and with a floor, with and without importance sampling, in the plain and the
    /// Lagrange form.
    #[test]
    fn term_matches_the_whole_batch_formula() {
        let mut rng = AgentRng::new(4);
        let b = batch(&mut rng, 7);
        let g = b.mc_return.as_ref().unwrap();
        for (floored, is, lagrange) in
            [(false, true, false), (true, true, false), (false, false, false), (true, false, true)]
        {
            let mut cfg = CqlConfig::default();
            cfg.cql.cql_n_actions = 3;
            cfg.cql.cql_importance_sample = is;
            cfg.cql.cql_lagrange = lagrange;
            cfg.sac.critic.hidden = vec![16, 16];
            let term = cfg.cql.clone();
            let q_of = |a: &mut Cql| a.sac.critic.net.forward(&state_action(&b.obs, &b.action), None).squeeze_dim(-1);
            let mut whole = Cql::new(cfg.clone(), 3, 2, Device::Cpu, 9).unwrap();
            // Reference: one pass, the formula as written.
            let q = q_of(&mut whole);
            let actions = proposals(&mut whole.sac, &b, 3);
            let (critic, params) = (&whole.sac.critic.net, &whole.sac.critic.params);
            let mut s =
                SampledQ::split(&critic.forward_paired(&b.obs, &actions.actions, None).squeeze_dim(-1), &actions, 0, 7);
            if floored {
                s.current = s.current.maximum(&g.view([1, -1, 1]));
                s.next = s.next.maximum(&g.view([1, -1, 1]));
            }
            let gap = conservative_gap(&q, &s, 2, 1.0, is);
            let alpha_prime = whole.lagrange.as_ref().map(|l| l.net.alpha().detach().squeeze());
            let want = match &alpha_prime {
                None => gap.mean(Kind::Float) * 5.0,
                Some(a) => (gap.shallow_clone() - term.cql_target_action_gap).mean(Kind::Float) * 5.0 * a,
            };
            let params = params.tensors();
            let want_g = Tensor::run_backward(&[&want], &params.iter().collect::<Vec<_>>(), false, false);
            let want_gap = gap.mean(Kind::Float).double_value(&[]);
            let mut a = Cql::new(cfg.clone(), 3, 2, Device::Cpu, 9).unwrap();
            let q = q_of(&mut a);
            let (t, logs) =
                conservative_term(&mut a.sac, &term, a.lagrange.as_mut(), floored.then(|| g.shallow_clone()), &b, &q);
            let gap = logs.iter().find(|(k, _)| *k == "cql_gap").unwrap().1.double_value(&[]);
            assert!((gap - want_gap).abs() < 1e-5 * (1.0 + want_gap.abs()), "gap: {gap} vs {want_gap}");
            // The whole gradient: the data part through the data pass, plus the chunks' own.
            let params = a.sac.critic.params.tensors();
            let through_q =
                Tensor::run_backward(&[t.on_q.as_ref().unwrap()], &params.iter().collect::<Vec<_>>(), false, false);
            for ((g, own), w) in through_q.iter().zip(t.grads.as_ref().unwrap()).zip(&want_g) {
                let err = (g + own - w).abs().max().double_value(&[]);
                let scale = 1.0 + w.abs().max().double_value(&[]);
                assert!(err < 1e-5 * scale, "gradient, floor {floored}, is {is}, lagrange {lagrange}: {err}");
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
