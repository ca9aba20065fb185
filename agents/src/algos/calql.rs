//! Calibrated Q-Learning (Nakamoto, Zhai, Singh, Sobol Mark, Ma, Finn, Kumar, Levine,
//! "Cal-QL: Calibrated Offline RL Pre-Training for Efficient Online Fine-Tuning", NeurIPS 2023,
//! arXiv 2303.05479): CQL ([`super::cql`]) with one term changed.
//!
//! Facts: ../shared/reference/algorithms.md §6.3; reference code consulted for facts:
//! nakamotoo/Cal-QL `conservative_sac.py`, WSRL `agents/cql.py` (`calql_bound_random_actions =
//! False`), CORL `cal_ql.py`, d3rlpy `cal_ql_impl.py`.
//!
//! The regularizer pushes the policy's Q-values down only to a reference value, the Monte-Carlo
//! return-to-go G(s) of the dataset trajectory (V^μ of the behaviour policy):
//!
//! `w · ( E_{s~D, a~π}[ max(Q(s, a), G(s)) ] − E_{(s,a)~D}[ Q(s, a) ] )`
//!
//! implemented, as in the reference code, by `Q(s, a_k) ← max(Q(s, a_k), G(s))` for the actions
//! from π(·|s) and π(·|s') inside CQL's logsumexp (not for the uniform ones). Batches must carry
//! `mc_return` ([`crate::AgentConfig::needs_mc_returns`]); rows of an online episode still in
//! progress have G = −∞ (no floor).
//!
//! Online, the official code keeps the calibration on; CORL switches it off at the start of
//! fine-tuning. `calibrate_online` chooses (default true, the official code); the runner tells
//! the agent its phase ([`crate::agent::Phase`]).

use super::cql::{Cql, CqlConfig, PolicyFloor};
use super::flat::{join, overlay, split, table_of};
use crate::agent::Phase;
use crate::AgentError;
use o2o_datasets::TransitionBatch;
use serde::{Deserialize, Serialize};
use tch::Device;

/// Cal-QL's own field; CQL's and SAC's fields sit beside it in the same flat table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Calibration {
    /// Keep the floor on during online fine-tuning (official Cal-QL: true; CORL: false).
    pub calibrate_online: bool,
}

impl Default for Calibration {
    fn default() -> Self {
        Self { calibrate_online: true }
    }
}

/// Cal-QL's configuration: CQL's (with its defaults) plus [`Calibration`], one flat table.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "toml::Table", into = "toml::Table")]
pub struct CalQlConfig {
    /// The CQL agent underneath.
    pub cql: CqlConfig,
    /// The calibration switch.
    pub calibration: Calibration,
}

impl TryFrom<toml::Table> for CalQlConfig {
    type Error = String;
    fn try_from(table: toml::Table) -> Result<Self, String> {
        let d = Calibration::default();
        let (own, rest) = split(table, &table_of(&d));
        Ok(Self { cql: CqlConfig::try_from(rest)?, calibration: overlay(&d, own)? })
    }
}

impl From<CalQlConfig> for toml::Table {
    fn from(c: CalQlConfig) -> Self {
        join(c.cql.into(), table_of(&c.calibration))
    }
}

impl CalQlConfig {
    /// CQL's keys ([`CqlConfig::metric_keys`]) and the floor's `calql_bound_rate`, the share of
    /// the policy actions' Q-values raised to the return-to-go.
    pub fn metric_keys(&self) -> crate::MetricKeys {
        let mut keys = self.cql.metric_keys();
        keys.update.push("calql_bound_rate");
        keys
    }
}

/// A new Cal-QL agent: a [`Cql`] that reports `calql` with [`return_to_go_floor`] as its floor.
pub fn new(cfg: CalQlConfig, obs_dim: i64, act_dim: i64, device: Device, seed: u64) -> Result<Cql, AgentError> {
    let floor = return_to_go_floor(cfg.calibration.calibrate_online);
    Cql::build("calql", cfg.cql, Some(floor), obs_dim, act_dim, device, seed)
}

/// Cal-QL's changed term: the policy actions' Q-values in CQL's log-sum-exp floored at the
/// return-to-go, `Q(s, a_k) ← max(Q(s, a_k), G(s))`, with `G(s)` the minibatch's `mc_return`;
/// offline always, online when `calibrate_online`.
pub(crate) fn return_to_go_floor(calibrate_online: bool) -> PolicyFloor {
    Box::new(move |b: &TransitionBatch, phase: Phase| {
        let on = match phase {
            Phase::Offline => true,
            Phase::Online => calibrate_online,
        };
        on.then(|| {
            let g = b.mc_return.as_ref().expect("calql needs batches with mc_return (AgentConfig::needs_mc_returns)");
            g.shallow_clone()
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::AgentRng;
    use crate::{Agent, Stateful};
    use tch::{Kind, Tensor};

    #[test]
    fn calibration_follows_the_phase_and_the_switch() {
        let mut rng = AgentRng::new(0);
        let b = TransitionBatch {
            obs: rng.normal(&[8, 3], Device::Cpu),
            action: rng.normal(&[8, 1], Device::Cpu).tanh(),
            reward: rng.normal(&[8], Device::Cpu),
            next_obs: rng.normal(&[8, 3], Device::Cpu),
            terminal: Tensor::zeros([8], (Kind::Float, Device::Cpu)),
            mc_return: Some(Tensor::full([8], 100.0, (Kind::Float, Device::Cpu))),
            is_offline: None,
        };
        for online in [true, false] {
            let cfg: CalQlConfig =
                toml::Value::Table(toml::from_str(&format!("calibrate_online = {online}\ncql_n_actions = 2")).unwrap())
                    .try_into()
                    .unwrap();
            let mut a = new(cfg, 3, 1, Device::Cpu, 0).unwrap();
            assert_eq!(a.name(), "calql");
            let rate = |m: &crate::Metrics| m.iter().find(|(k, _)| *k == "calql_bound_rate").map(|(_, v)| *v);
            // G = 100 is far above a fresh critic's Q: every policy value is floored.
            assert_eq!(rate(&a.update(&b)), Some(1.0));
            a.set_phase(Phase::Online);
            assert_eq!(rate(&a.update(&b)).is_some(), online);
        }
    }
}
