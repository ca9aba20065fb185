//! WSRL, warm-start RL (Zhou, Peng, Li, Levine, Kumar, "Efficient Online Reinforcement Learning
//! Fine-Tuning Need Not Retain Offline Data", ICLR 2025, arXiv 2412.07762).
//!
//! Facts: ../shared/reference/algorithms.md §1; reference code consulted for facts:
//! zhouzypaul/wsrl (`finetune.py`, `agents/sac.py`, `configs/wsrl_config.py`).
//!
//! WSRL is three phases of one agent, which is why it is one agent here:
//! 1. **Offline pre-training** with CQL (locomotion) or Cal-QL ([`super::cql`],
//!    [`super::calql`]) using the *online* agent's architecture: 10 LayerNorm critics, a target
//!    over a random subset of 2 drawn with replacement, LayerNorm in the actor, no entropy in
//!    the backup, softplus temperature (α₀ = 1). One critic step per update on 256 rows.
//! 2. **Warm-up** (the runner's `train.warmup_steps`, K = 5000): the frozen pre-trained policy
//!    acts (sampled actions) into an empty online buffer; no update.
//! 3. **Online SAC** on online data only (the runner's `train.offline_ratio = 0`): the
//!    conservative term is dropped and each update takes a 1024-row batch as 4 critic steps on
//!    256-row minibatches, `y = r + γ (1 − d) min_{i∈I} Q̄_i(s', a')` with |I| = 2 drawn with
//!    replacement (no entropy term), Polyak after each; then one actor step with the **min over
//!    all 10** critics, `L_π = E[α log π(ã|s) − min_i Q_i(s, ã)]`, and one temperature step
//!    with H̄ = −|A|, both on the whole 1024 rows ([`super::sac`]).
//!
//! The whole state (weights, target, temperature, Adam moments, counters) carries over from
//! phase 1 to phase 3: it is the same agent, or `load` of a WSRL, CQL or Cal-QL checkpoint of
//! the same architecture. `reset_optimizers` optionally starts phase 3 with fresh Adam moments
//! (an ablation; the paper keeps them). `online_conservative = true` keeps the CQL / Cal-QL term
//! online instead, which with `train.offline_ratio = 0.5` is the Cal-QL fine-tuning baseline
//! the paper compares against.
//! Deviation (as in SAC here): the temperature's entropy estimate uses actions at `s`, where the
//! reference uses `s'`.

use super::calql::{self, CalQlConfig};
use super::cql::{Cql, CqlConfig, CqlTerm};
use super::flat::{join, overlay, split, table_of};
use super::sac::SacConfig;
use crate::agent::Phase;
use crate::checkpoint::{Checkpoint, Part, Stateful};
use crate::nn::{MlpConfig, PolicyGraph, TanhGaussianConfig, TemperatureForm};
use crate::rng::AgentRng;
use crate::{Agent, AgentError, DeterministicPolicy, Metrics, RewardBonus};
use o2o_datasets::TransitionBatch;
use serde::{Deserialize, Serialize};
use std::path::Path;
use tch::{Device, Tensor};

/// The offline pre-training algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pretrain {
    /// CQL (WSRL's choice for locomotion, where dense MC returns are loose).
    Cql,
    /// Cal-QL (AntMaze, Adroit, Kitchen); batches need Monte-Carlo returns.
    Calql,
}

/// WSRL's own switches; CQL's, Cal-QL's and SAC's fields sit beside them in one flat table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WsrlTerm {
    /// `cql` or `calql`.
    pub pretrain: Pretrain,
    /// Critic steps per online update (UTD 4): the online batch is split into this many
    /// minibatches. Offline updates use SAC's `critic_steps` (1).
    pub online_critic_steps: i64,
    /// Keep the conservative (CQL / Cal-QL) term online: false is WSRL; true is the Cal-QL
    /// fine-tuning baseline.
    pub online_conservative: bool,
    /// Fresh Adam moments at the offline→online switch (the paper keeps them).
    pub reset_optimizers: bool,
}

impl Default for WsrlTerm {
    fn default() -> Self {
        Self { pretrain: Pretrain::Cql, online_critic_steps: 4, online_conservative: false, reset_optimizers: false }
    }
}

/// WSRL's configuration: the Cal-QL/CQL/SAC fields with WSRL's defaults plus [`WsrlTerm`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "toml::Table", into = "toml::Table")]
pub struct WsrlConfig {
    /// The conservative agent underneath (architecture shared by both phases).
    pub calql: CalQlConfig,
    /// WSRL's switches.
    pub wsrl: WsrlTerm,
}

impl Default for WsrlConfig {
    /// algorithms.md §1.3–1.4 (locomotion): 2×256 ReLU MLPs with LayerNorm in actor and critic,
    /// 10 critics, subset 2 with replacement, γ 0.99, τ 0.005, actor/critic/α LRs
    /// 1e-4/3e-4/1e-4, softplus α₀ = 1, H̄ = −|A|, no backup entropy; CQL weight 5 (§6.2).
    fn default() -> Self {
        let layer_norm = MlpConfig { layer_norm: true, ..MlpConfig::default() };
        let sac = SacConfig {
            actor: TanhGaussianConfig { mlp: layer_norm.clone(), ..TanhGaussianConfig::default() },
            critic: layer_norm,
            num_critics: 10,
            target_subset: 2,
            subset_with_replacement: true,
            actor_lr: 1e-4,
            critic_lr: 3e-4,
            temperature_lr: 1e-4,
            init_temperature: 1.0,
            temperature_form: TemperatureForm::Softplus,
            target_entropy_per_dim: -1.0,
            backup_entropy: false,
            critic_steps: 1,
            ..SacConfig::default()
        };
        let calql = CalQlConfig { cql: CqlConfig { sac, cql: CqlTerm::default() }, ..CalQlConfig::default() };
        Self { calql, wsrl: WsrlTerm::default() }
    }
}

impl WsrlConfig {
    /// Reject settings that cannot work, naming the field.
    pub fn validate(&self) -> Result<(), AgentError> {
        self.calql.cql.validate()?;
        let sac = &self.calql.cql.sac;
        if sac.offline.critic_steps.is_some() || sac.online.critic_steps.is_some() {
            return Err(AgentError::Config("wsrl sets its critic steps per phase with `critic_steps` (offline) and `online_critic_steps`; remove `offline.critic_steps` / `online.critic_steps`".into()));
        }
        if self.wsrl.online_critic_steps < 1 {
            return Err(AgentError::Config(format!(
                "wsrl.online_critic_steps must be ≥ 1, found {}",
                self.wsrl.online_critic_steps
            )));
        }
        Ok(())
    }

    /// Whether batches must carry Monte-Carlo returns (Cal-QL pre-training).
    pub fn needs_mc_returns(&self) -> bool {
        self.wsrl.pretrain == Pretrain::Calql
    }
}

impl TryFrom<toml::Table> for WsrlConfig {
    type Error = String;
    fn try_from(table: toml::Table) -> Result<Self, String> {
        let d = Self::default();
        let (own, rest) = split(table, &table_of(&d.wsrl));
        // The rest overlays WSRL's defaults for the Cal-QL/CQL/SAC fields.
        let mut base = toml::Table::from(d.calql);
        super::flat::merge(&mut base, rest);
        Ok(Self { calql: CalQlConfig::try_from(base)?, wsrl: overlay(&d.wsrl, own)? })
    }
}

impl From<WsrlConfig> for toml::Table {
    fn from(c: WsrlConfig) -> Self {
        join(c.calql.into(), table_of(&c.wsrl))
    }
}

impl WsrlConfig {
    /// Its pre-training's keys (Cal-QL's or CQL's); the online updates without the conservative
    /// term log SAC's, a subset.
    pub fn metric_keys(&self) -> crate::MetricKeys {
        match self.wsrl.pretrain {
            Pretrain::Calql => self.calql.metric_keys(),
            Pretrain::Cql => self.calql.cql.metric_keys(),
        }
    }
}

/// A WSRL agent: a CQL / Cal-QL agent whose online updates are plain high-UTD SAC.
pub struct Wsrl {
    cql: Cql,
    term: WsrlTerm,
    offline_critic_steps: i64,
    phase: Phase,
}

/// Algorithms whose checkpoints a WSRL agent of the same architecture can start from.
const LOADABLE: [&str; 3] = ["wsrl", "cql", "calql"];

impl Wsrl {
    /// A new WSRL agent for `obs_dim` observations and `act_dim` actions in `[-1, 1]`.
    pub fn new(cfg: WsrlConfig, obs_dim: i64, act_dim: i64, device: Device, seed: u64) -> Result<Self, AgentError> {
        cfg.validate()?;
        // Pretrained as Cal-QL: Cal-QL's floor in the conservative term.
        let floor = (cfg.wsrl.pretrain == Pretrain::Calql)
            .then(|| calql::return_to_go_floor(cfg.calql.calibration.calibrate_online));
        let offline_critic_steps = cfg.calql.cql.sac.critic_steps;
        let cql = Cql::build("wsrl", cfg.calql.cql, floor, obs_dim, act_dim, device, seed)?;
        Ok(Self { cql, term: cfg.wsrl, offline_critic_steps, phase: Phase::Offline })
    }

    /// Restore `parts` of a WSRL, CQL or Cal-QL checkpoint of the same architecture.
    fn load_from(&mut self, path: &Path, parts: Option<&[&str]>) -> Result<(), AgentError> {
        let written_by = Checkpoint::read(path)?.algo()?;
        if !LOADABLE.contains(&written_by.as_str()) {
            return Err(AgentError::Checkpoint {
                path: path.to_path_buf(),
                message: format!("written by algorithm `{written_by}`; a WSRL agent starts from a wsrl, cql or calql checkpoint of the same architecture"),
            });
        }
        self.restore(path, &written_by, parts)
    }
}

/// The CQL / Cal-QL agent's state; loads also take a CQL or Cal-QL checkpoint.
impl Stateful for Wsrl {
    fn name(&self) -> &'static str {
        "wsrl"
    }

    fn parts(&self) -> Vec<Part<'_>> {
        self.cql.parts()
    }

    fn progress(&self) -> (i64, &AgentRng) {
        self.cql.progress()
    }

    fn set_progress(&mut self, step: i64, rng: AgentRng) {
        self.cql.set_progress(step, rng);
    }

    fn load(&mut self, path: &Path) -> Result<(), AgentError> {
        self.load_from(path, None)
    }

    fn load_parts(&mut self, path: &Path, parts: &[&str]) -> Result<(), AgentError> {
        self.load_from(path, Some(parts))
    }
}

impl Agent for Wsrl {
    fn gamma(&self) -> Option<f64> {
        self.cql.gamma()
    }

    fn act(&mut self, obs: &Tensor, deterministic: bool) -> Tensor {
        self.cql.act(obs, deterministic)
    }

    fn deterministic_policy(&self) -> Option<DeterministicPolicy> {
        self.cql.deterministic_policy()
    }

    fn policy_graph(&self) -> Option<PolicyGraph> {
        self.cql.policy_graph()
    }

    /// Offline: CQL / Cal-QL. Online: SAC on the online batch (or CQL / Cal-QL again with
    /// `online_conservative`).
    fn update(&mut self, batch: &TransitionBatch) -> Metrics {
        match self.phase {
            Phase::Online if !self.term.online_conservative => self.cql.update_without_term(batch, None),
            _ => self.cql.update(batch),
        }
    }

    fn update_with_bonus(&mut self, batch: &TransitionBatch, bonus: RewardBonus<'_>) -> Option<Metrics> {
        match self.phase {
            Phase::Online if !self.term.online_conservative => Some(self.cql.update_without_term(batch, Some(bonus))),
            _ => self.cql.update_with_bonus(batch, bonus),
        }
    }

    fn set_phase(&mut self, phase: Phase) {
        self.phase = phase;
        self.cql.set_phase(phase);
        let steps = match phase {
            Phase::Offline => self.offline_critic_steps,
            Phase::Online => self.term.online_critic_steps,
        };
        self.cql.sac_mut().cfg.critic_steps = steps;
    }

    fn begin_online(&mut self) {
        if self.term.reset_optimizers {
            self.reset_optimizers();
        }
    }

    fn diagnose(&mut self, batch: &TransitionBatch) -> Metrics {
        self.cql.diagnose(batch)
    }

    fn critic_values(&self, obs: &Tensor, action: &Tensor) -> Option<Tensor> {
        self.cql.critic_values(obs, action)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::AgentRng;
    use tch::Kind;

    /// States of 3 numbers, 2 actions, Monte-Carlo returns.
    fn batch(rng: &mut AgentRng, n: i64) -> TransitionBatch {
        crate::algos::testing::batch(rng, n, 3, 2, false, true)
    }

    fn small() -> WsrlConfig {
        toml::Value::Table(
            toml::from_str(
                "cql_n_actions = 2\ncritic = { hidden = [16, 16] }\nactor = { mlp = { hidden = [16, 16] } }",
            )
            .unwrap(),
        )
        .try_into()
        .unwrap()
    }

    #[test]
    fn defaults_are_wsrls_and_a_partial_table_keeps_them() {
        let c = small();
        let s = &c.calql.cql.sac;
        assert_eq!((s.num_critics, s.target_subset, s.subset_with_replacement), (10, 2, true));
        assert!(s.critic.layer_norm && s.actor.mlp.layer_norm, "LayerNorm survives a partial table");
        assert_eq!(s.critic.hidden, vec![16, 16]);
        assert!(!s.backup_entropy);
        assert_eq!(s.temperature_form, TemperatureForm::Softplus);
        assert_eq!((s.actor_lr, s.critic_lr, s.temperature_lr), (1e-4, 3e-4, 1e-4));
        assert_eq!(c.wsrl, WsrlTerm::default());
        let back: WsrlConfig = toml::Value::Table(toml::Table::from(c.clone())).try_into().unwrap();
        assert_eq!(back, c);
        let e = toml::Value::Table(toml::from_str("online_critic_stepz = 4").unwrap())
            .try_into::<WsrlConfig>()
            .unwrap_err()
            .to_string();
        assert!(e.contains("online_critic_stepz"), "{e}");
    }

    /// Offline updates carry the conservative term; online ones do not, and split the batch into
    /// `online_critic_steps` critic steps.
    #[test]
    fn the_conservative_term_stops_at_the_switch() {
        let mut rng = AgentRng::new(0);
        let mut a = Wsrl::new(small(), 3, 2, Device::Cpu, 0).unwrap();
        a.set_phase(Phase::Offline);
        let m = a.update(&batch(&mut rng, 16));
        assert!(m.iter().any(|(k, _)| *k == "cql_gap"));
        a.set_phase(Phase::Online);
        a.begin_online();
        let m = a.update(&batch(&mut rng, 16));
        assert!(!m.iter().any(|(k, _)| *k == "cql_gap"), "{m:?}");
        assert_eq!(a.cql.sac().config().critic_steps, 4);
        let mut cfg = small();
        cfg.wsrl.online_conservative = true;
        let mut b = Wsrl::new(cfg, 3, 2, Device::Cpu, 0).unwrap();
        b.set_phase(Phase::Online);
        assert!(b.update(&batch(&mut rng, 16)).iter().any(|(k, _)| *k == "cql_gap"));
    }

    /// WSRL's locomotion recipe (fidelity-audit D1, D2): max-target backup while pre-training
    /// only, the reference's zero-gradient Adam steps online only; the flat TOML round-trips the
    /// phase tables, and per-phase critic steps are refused (WSRL has its own keys for them).
    #[test]
    fn per_phase_backup_and_adam_steps() {
        let cfg: WsrlConfig = toml::Value::Table(toml::from_str("cql_n_actions = 2\ncritic = { hidden = [16, 16] }\nactor = { mlp = { hidden = [16, 16] } }\noffline = { max_target_backup = true }\nonline = { zero_grad_adam_steps = true }").unwrap()).try_into().unwrap();
        let back: WsrlConfig = toml::Value::Table(toml::Table::from(cfg.clone())).try_into().unwrap();
        assert_eq!(back, cfg);
        let mut a = Wsrl::new(cfg.clone(), 3, 2, Device::Cpu, 0).unwrap();
        let now = |a: &Wsrl| {
            let c = a.cql.sac().config();
            (c.max_target_backup, c.zero_grad_adam_steps, c.critic_steps)
        };
        a.set_phase(Phase::Offline);
        assert_eq!(now(&a), (true, false, 1));
        let mut rng = AgentRng::new(4);
        assert!(a.update(&batch(&mut rng, 16)).iter().all(|(_, v)| v.is_finite()));
        a.set_phase(Phase::Online);
        assert_eq!(now(&a), (false, true, 4));
        assert!(a.update(&batch(&mut rng, 16)).iter().all(|(_, v)| v.is_finite()));
        let mut bad = cfg;
        bad.calql.cql.sac.online.critic_steps = Some(2);
        assert!(Wsrl::new(bad, 3, 2, Device::Cpu, 0).err().unwrap().to_string().contains("online_critic_steps"));
    }

    fn moments(a: &Wsrl) -> Vec<(String, Tensor)> {
        a.named_tensors().into_iter().filter(|(n, _)| n.contains("_opt/")).collect()
    }

    /// Loading restores the optimizers' moments exactly (WSRL keeps them across the switch);
    /// `reset_optimizers` zeroes them at the switch.
    #[test]
    fn load_restores_optimizer_moments_and_reset_clears_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.ot");
        let mut rng = AgentRng::new(1);
        let mut a = Wsrl::new(small(), 3, 2, Device::Cpu, 7).unwrap();
        a.set_phase(Phase::Offline);
        for _ in 0..3 {
            a.update(&batch(&mut rng, 16));
        }
        a.save(&path).unwrap();
        let mut cfg = small();
        cfg.wsrl.reset_optimizers = true;
        let mut b = Wsrl::new(cfg, 3, 2, Device::Cpu, 99).unwrap();
        let before = moments(&b);
        assert!(
            before.iter().all(|(_, t)| t.abs().sum(Kind::Float).double_value(&[]) == 0.0),
            "fresh moments are zero"
        );
        b.load(&path).unwrap();
        let (ma, mb) = (moments(&a), moments(&b));
        assert_eq!(ma.len(), mb.len());
        assert!(ma.len() >= 6, "first and second moments of actor, critic and temperature");
        for ((na, ta), (nb, tb)) in ma.iter().zip(&mb) {
            assert_eq!(na, nb);
            assert!(ta.abs().sum(Kind::Float).double_value(&[]) > 0.0, "{na} moved during training");
            assert_eq!(ta.equal(tb), true, "{na} restored exactly");
        }
        b.set_phase(Phase::Online);
        b.begin_online();
        assert!(
            moments(&b).iter().all(|(_, t)| t.abs().sum(Kind::Float).double_value(&[]) == 0.0),
            "reset at the switch"
        );
    }

    #[test]
    fn loads_cql_checkpoints_of_the_same_architecture_and_refuses_others() {
        let dir = tempfile::tempdir().unwrap();
        let cql_cfg = small().calql.cql;
        let cql = Cql::new(cql_cfg, 3, 2, Device::Cpu, 3).unwrap();
        let p = dir.path().join("cql.ot");
        cql.save(&p).unwrap();
        let mut a = Wsrl::new(small(), 3, 2, Device::Cpu, 0).unwrap();
        a.load(&p).unwrap();
        let actor = |t: Vec<(String, Tensor)>| t.into_iter().find(|(n, _)| n.starts_with("actor/")).unwrap().1;
        assert!(actor(a.named_tensors()).equal(&actor(cql.named_tensors())));
        let sac = crate::sac::Sac::new(SacConfig::default(), 3, 2, Device::Cpu, 0).unwrap();
        let p = dir.path().join("sac.ot");
        sac.save(&p).unwrap();
        let e = a.load(&p).unwrap_err().to_string();
        assert!(e.contains("written by algorithm `sac`"), "{e}");
    }

    #[test]
    fn diagnostics_report_q_against_finite_returns_and_leave_the_agent_alone() {
        let mut rng = AgentRng::new(2);
        let mut a = Wsrl::new(small(), 3, 2, Device::Cpu, 0).unwrap();
        let mut b = batch(&mut rng, 8);
        b.mc_return = Some(Tensor::from_slice(&[1.0f32, 2.0, 3.0, f32::NEG_INFINITY, 5.0, 6.0, 7.0, 8.0]));
        let before = a.named_tensors().iter().map(|(_, t)| t.copy()).collect::<Vec<_>>();
        let m = a.diagnose(&b);
        let get = |k: &str| m.iter().find(|(n, _)| *n == k).map(|(_, v)| *v);
        assert!((get("mc_return").unwrap() - 32.0 / 7.0).abs() < 1e-5, "{m:?}");
        assert!(
            get("q").is_some() && get("q_minus_mc").is_some() && get("entropy").is_some() && get("alpha").is_some()
        );
        assert!(get("mean_abs_action").is_some() && get("log_std").is_some(), "{m:?}");
        assert_eq!(m, a.diagnose(&b), "no draw from the agent's stream");
        assert!(a.named_tensors().iter().zip(&before).all(|((_, t), u)| t.equal(u)));
    }
}
