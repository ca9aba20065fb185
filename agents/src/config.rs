//! Building an agent from configuration: the one entry point the runner needs.
//!
//! A preset's agent table is TOML of [`AgentConfig`], tagged by `algo`, every other key a field
//! of that algorithm's config (missing keys take the paper defaults; unknown keys are errors):
//!
//! ```toml
//! [agent]
//! algo = "sac"
//! num_critics = 10
//! target_subset = 2
//! critic = { hidden = [256, 256], layer_norm = true }
//! ```

use crate::algos::bc::{Bc, BcConfig};
use crate::algos::famo2o_cql::{Famo2oCql, Famo2oCqlConfig};
use crate::algos::famo2o_iql::{Famo2oIql, Famo2oIqlConfig};
use crate::algos::ppo::{Ppo, PpoConfig};
use crate::algos::td3bc::{Td3Bc, Td3BcConfig};
use crate::algos::unio4::Unio4Config;
use crate::algos::{
    calql, calql::CalQlConfig, cql::Cql, cql::CqlConfig, iql::Iql, iql::IqlConfig, rlpd, rlpd::RlpdConfig, sac::Sac,
    sac::SacConfig, wsrl::Wsrl, wsrl::WsrlConfig,
};
use crate::{Agent, AgentError, MetricKeys};
use serde::{Deserialize, Serialize};
use tch::Device;

/// Any algorithm's configuration, tagged by `algo` (`"sac"`, `"iql"`, `"cql"`, `"calql"`,
/// `"rlpd"`, `"wsrl"`, `"famo2o-iql"`, `"famo2o-cql"`, `"bc"`, `"td3bc"`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "algo", rename_all = "lowercase")]
pub enum AgentConfig {
    /// Soft Actor-Critic (online).
    Sac(SacConfig),
    /// Implicit Q-Learning (offline, fine-tuning).
    Iql(IqlConfig),
    /// Conservative Q-Learning (offline, fine-tuning).
    Cql(CqlConfig),
    /// Calibrated Q-Learning (offline, fine-tuning; needs MC returns).
    Calql(CalQlConfig),
    /// RLPD (online with offline data mixed in).
    Rlpd(RlpdConfig),
    /// WSRL (CQL / Cal-QL offline, frozen-policy warm-up, then SAC on online data only).
    Wsrl(WsrlConfig),
    /// FamO2O over IQL (a β-conditioned AWR family and a per-state balance model; AntMaze).
    #[serde(rename = "famo2o-iql")]
    Famo2oIql(Famo2oIqlConfig),
    /// FamO2O over CQL (a β-conditioned SAC family and a per-state balance model; locomotion).
    #[serde(rename = "famo2o-cql")]
    Famo2oCql(Famo2oCqlConfig),
    /// PPO (online, on-policy: the runner collects rollouts from a vector env).
    Ppo(PpoConfig),
    /// Uni-O4: its offline pipeline (run by the runner's `unio4` stages), then PPO online; the
    /// agent built is the online PPO.
    Unio4(Unio4Config),
    /// Behaviour cloning (offline baseline).
    Bc(BcConfig),
    /// TD3+BC (offline).
    Td3bc(Td3BcConfig),
}

impl AgentConfig {
    /// The algorithm name (`"sac"`, `"iql"`), as `Agent::name` reports it.
    pub fn algo(&self) -> &'static str {
        match self {
            AgentConfig::Sac(_) => "sac",
            AgentConfig::Iql(_) => "iql",
            AgentConfig::Cql(_) => "cql",
            AgentConfig::Calql(_) => "calql",
            AgentConfig::Rlpd(_) => "rlpd",
            AgentConfig::Wsrl(_) => "wsrl",
            AgentConfig::Famo2oIql(_) => "famo2o-iql",
            AgentConfig::Famo2oCql(_) => "famo2o-cql",
            AgentConfig::Ppo(_) => "ppo",
            AgentConfig::Unio4(_) => "unio4",
            AgentConfig::Bc(_) => "bc",
            AgentConfig::Td3bc(_) => "td3bc",
        }
    }

    /// Reject settings that cannot work, naming the field.
    pub fn validate(&self) -> Result<(), AgentError> {
        learning_rates_positive(&self.to_toml()?, "agent")?;
        match self {
            AgentConfig::Sac(c) | AgentConfig::Rlpd(RlpdConfig(c)) => c.validate(),
            AgentConfig::Iql(c) => c.validate(),
            AgentConfig::Cql(c) | AgentConfig::Calql(CalQlConfig { cql: c, .. }) => c.validate(),
            AgentConfig::Wsrl(c) => c.validate(),
            AgentConfig::Famo2oIql(c) => c.validate(),
            AgentConfig::Famo2oCql(c) => c.validate(),
            AgentConfig::Ppo(c) => c.validate(),
            AgentConfig::Unio4(c) => c.validate(),
            AgentConfig::Bc(c) => c.validate(),
            AgentConfig::Td3bc(c) => c.validate(),
        }
    }

    /// Whether the algorithm learns on-policy from rollouts of a vector env (PPO) rather than
    /// from a replay buffer.
    pub fn is_on_policy(&self) -> bool {
        matches!(self, AgentConfig::Ppo(_) | AgentConfig::Unio4(_))
    }

    /// The discount γ of the agent this config builds, the one [`Agent::gamma`] of the built agent
    /// reports: its TD targets' (off-policy agents), its returns' and GAE's (PPO), the online
    /// PPO's (Uni-O4, whose built agent is that PPO); `None` for BC, which learns no value.
    pub fn gamma(&self) -> Option<f64> {
        Some(match self {
            AgentConfig::Sac(c) | AgentConfig::Rlpd(RlpdConfig(c)) => c.gamma,
            AgentConfig::Iql(c) => c.gamma,
            AgentConfig::Cql(c) | AgentConfig::Calql(CalQlConfig { cql: c, .. }) => c.sac.gamma,
            AgentConfig::Wsrl(c) => c.calql.cql.sac.gamma,
            AgentConfig::Famo2oIql(c) => c.gamma,
            AgentConfig::Famo2oCql(c) => c.gamma,
            AgentConfig::Ppo(c) => c.gamma,
            AgentConfig::Unio4(c) => c.online_config().gamma,
            AgentConfig::Td3bc(c) => c.gamma,
            AgentConfig::Bc(_) => return None,
        })
    }

    /// The keys of the built agent's update metrics and diagnostics, each algorithm's declaration
    /// ([`MetricKeys`]): what a viewer picks its panels by.
    pub fn metric_keys(&self) -> MetricKeys {
        match self {
            AgentConfig::Sac(c) | AgentConfig::Rlpd(RlpdConfig(c)) => c.metric_keys(),
            AgentConfig::Iql(c) => c.metric_keys(),
            AgentConfig::Cql(c) => c.metric_keys(),
            AgentConfig::Calql(c) => c.metric_keys(),
            AgentConfig::Wsrl(c) => c.metric_keys(),
            AgentConfig::Famo2oIql(c) => c.metric_keys(),
            AgentConfig::Famo2oCql(c) => c.metric_keys(),
            AgentConfig::Ppo(c) => c.metric_keys(),
            AgentConfig::Unio4(c) => c.metric_keys(),
            AgentConfig::Bc(c) => c.metric_keys(),
            AgentConfig::Td3bc(c) => c.metric_keys(),
        }
    }

    /// Whether every training batch must carry `mc_return` (Monte-Carlo returns-to-go, in the
    /// rewards the agent sees): Cal-QL's floor.
    pub fn needs_mc_returns(&self) -> bool {
        match self {
            AgentConfig::Calql(_) => true,
            AgentConfig::Wsrl(c) => c.needs_mc_returns(),
            _ => false,
        }
    }

    /// Parse from a TOML value (e.g. a preset's `[agent]` table). Errors name the bad key.
    pub fn from_toml(value: toml::Value) -> Result<Self, AgentError> {
        value.try_into().map_err(|e: toml::de::Error| AgentError::Config(format!("agent config: {e}")))
    }

    /// The config as a TOML table (all fields, defaults included), for the run's `config.toml`.
    pub fn to_toml(&self) -> Result<toml::Value, AgentError> {
        toml::Value::try_from(self).map_err(|e| AgentError::Config(format!("agent config to TOML: {e}")))
    }
}

/// Every learning rate in `value` (a key `lr` or `*_lr`, at any depth) is positive and finite:
/// a rate ≤ 0 ascends the loss or freezes a network, and shows up only much later as a NaN
/// action. The error names the key under `path`.
fn learning_rates_positive(value: &toml::Value, path: &str) -> Result<(), AgentError> {
    match value {
        toml::Value::Table(t) => {
            for (k, v) in t {
                let key = format!("{path}.{k}");
                if k == "lr" || k.ends_with("_lr") {
                    let rate = v.as_float().or_else(|| v.as_integer().map(|i| i as f64));
                    if let Some(r) = rate.filter(|r| !(*r > 0.0 && r.is_finite())) {
                        return Err(AgentError::Config(format!(
                            "key `{key}`: expected a positive finite learning rate, found {r}"
                        )));
                    }
                }
                learning_rates_positive(v, &key)?;
            }
        }
        toml::Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                learning_rates_positive(v, &format!("{path}[{i}]"))?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// Build the agent `config` describes for `obs_dim`-dimensional observations and
/// `act_dim`-dimensional actions in `[-1, 1]`, with every tensor on `device` and every random
/// draw (weight init, exploration noise, ensemble subsets, dropout) from `seed`.
pub fn build(
    config: &AgentConfig,
    obs_dim: usize,
    act_dim: usize,
    device: Device,
    seed: u64,
) -> Result<Box<dyn Agent>, AgentError> {
    let (o, a) = (obs_dim as i64, act_dim as i64);
    Ok(match config {
        AgentConfig::Sac(c) => Box::new(Sac::new(c.clone(), o, a, device, seed)?),
        AgentConfig::Iql(c) => Box::new(Iql::new(c.clone(), o, a, device, seed)?),
        AgentConfig::Cql(c) => Box::new(Cql::new(c.clone(), o, a, device, seed)?),
        AgentConfig::Calql(c) => Box::new(calql::new(c.clone(), o, a, device, seed)?),
        AgentConfig::Rlpd(c) => Box::new(rlpd::new(c.clone(), o, a, device, seed)?),
        AgentConfig::Wsrl(c) => Box::new(Wsrl::new(c.clone(), o, a, device, seed)?),
        AgentConfig::Famo2oIql(c) => Box::new(Famo2oIql::new(c.clone(), o, a, device, seed)?),
        AgentConfig::Famo2oCql(c) => Box::new(Famo2oCql::new(c.clone(), o, a, device, seed)?),
        AgentConfig::Ppo(c) => Box::new(Ppo::new(c.clone(), o, a, device, seed)?),
        AgentConfig::Unio4(c) => Box::new(Ppo::new(c.online_config(), o, a, device, seed)?.named("unio4")),
        AgentConfig::Bc(c) => Box::new(Bc::new(c.clone(), o, a, device, seed)?),
        AgentConfig::Td3bc(c) => Box::new(Td3Bc::new(c.clone(), o, a, device, seed)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Metrics, Phase};
    use o2o_datasets::TransitionBatch;

    #[test]
    fn toml_round_trip_defaults_and_unknown_keys() {
        let v: toml::Value =
            toml::from_str("algo = \"sac\"\nnum_critics = 10\ncritic = { layer_norm = true }\n").unwrap();
        let c = AgentConfig::from_toml(v).unwrap();
        let AgentConfig::Sac(s) = &c else { panic!("not sac") };
        assert_eq!(s.num_critics, 10);
        assert!(s.critic.layer_norm);
        assert_eq!(s.critic.hidden, vec![256, 256]);
        assert_eq!(s.gamma, 0.99);
        let back = AgentConfig::from_toml(c.to_toml().unwrap()).unwrap();
        assert_eq!(back, c);
        let bad: toml::Value = toml::from_str("algo = \"iql\"\nexpectille = 0.7\n").unwrap();
        let e = AgentConfig::from_toml(bad).unwrap_err().to_string();
        assert!(e.contains("expectille"), "{e}");
        let bad: toml::Value = toml::from_str("algo = \"ppx\"\n").unwrap();
        assert!(AgentConfig::from_toml(bad).is_err());
    }

    /// Every algorithm's γ, set away from its default where the algorithm keeps it, is what
    /// [`AgentConfig::gamma`] reports and what the built agent discounts with.
    #[test]
    fn gamma_is_the_built_agents_discount() {
        let top = "gamma = 0.9";
        let all = ["sac", "iql", "cql", "calql", "rlpd", "wsrl", "famo2o-iql", "famo2o-cql", "ppo", "td3bc"];
        let cases = all.iter().map(|a| (*a, top)).chain([("unio4", "online = { gamma = 0.9 }")]);
        for (algo, gamma) in cases {
            let c = AgentConfig::from_toml(toml::from_str(&format!("algo = {algo:?}\n{gamma}\n")).unwrap()).unwrap();
            assert_eq!(c.gamma(), Some(0.9), "{algo}");
            assert_eq!(build(&c, 4, 2, Device::Cpu, 0).unwrap().gamma(), Some(0.9), "{algo}");
        }
        let bc = AgentConfig::Bc(BcConfig::default());
        assert_eq!((bc.gamma(), build(&bc, 4, 2, Device::Cpu, 0).unwrap().gamma()), (None, None));
    }

    /// The keys of every algorithm's metrics, as it returns them from `steps` updates in each
    /// phase (offline, then online after the switch) on `b` (an on-policy agent: rollout updates
    /// on a rollout of its own), and from its diagnostics on `b`.
    fn logged_keys(agent: &mut dyn Agent, b: &TransitionBatch, steps: usize) -> (Vec<Metrics>, Metrics) {
        let mut updates = Vec::new();
        if let Some(op) = agent.on_policy() {
            op.use_dataset_stats(&[0.0; 3], &[1.0; 3]);
            let mut rollout = o2o_datasets::RolloutBuffer::new(8, 16, 3, 2);
            for _ in 0..8 {
                let obs = op.normalize_obs(&b.obs.narrow(0, 0, 16), true);
                let (a, lp, v) = op.act_value(&obs);
                let f = |t: &tch::Tensor| Vec::<f32>::try_from(&t.flatten(0, -1)).unwrap();
                rollout.push_step(&f(&obs), &f(&a), &f(&lp), &f(&v), &[0.5; 16], &[true; 16], &[false; 16]).unwrap();
            }
            updates.extend((0..steps).map(|_| op.update_rollout(&rollout, 0, 1000)));
        } else {
            for phase in [Phase::Offline, Phase::Online] {
                agent.set_phase(phase);
                if phase == Phase::Online {
                    agent.begin_online();
                }
                updates.extend((0..steps).map(|_| agent.update(b)));
            }
        }
        (updates, agent.diagnose(b))
    }

    /// Each algorithm declares exactly the keys it logs ([`AgentConfig::metric_keys`]): every
    /// key an update returns is declared, every declared key is returned by some update (two per
    /// phase, so TD3+BC's delayed actor step is among them), and the diagnostics on a batch
    /// with Monte-Carlo returns return exactly theirs. A loss that renames a key fails here.
    #[test]
    fn declared_metric_keys_are_the_logged_ones() {
        use crate::algos::testing::batch;
        use std::collections::BTreeSet;
        // Small networks (the keys do not depend on sizes), then each algorithm's switches that
        // change which keys it logs.
        let (actor, critic) = ("actor = { mlp = { hidden = [16] } }", "critic = { hidden = [16] }");
        let (value, balance) = ("value = { hidden = [16] }", "balance = { mlp = { hidden = [16] } }");
        let online = "online = { actor = { mlp = { hidden = [16] } }, critic = { hidden = [16] }, epochs = 2 }";
        let nets = |algo: &str| -> String {
            let nets = match algo {
                "bc" => vec!["actor = { hidden = [16] }"],
                "td3bc" => vec!["actor = { hidden = [16] }", critic],
                "unio4" => vec![online],
                "ppo" => vec![actor, critic, "epochs = 2"],
                "iql" => vec![actor, critic, value],
                "famo2o-iql" => vec![actor, critic, value, balance],
                "famo2o-cql" => vec![actor, critic, balance],
                _ => vec![actor, critic],
            };
            nets.join("\n")
        };
        let cases = [
            ("sac", ""),
            ("rlpd", ""),
            ("iql", ""),
            ("cql", ""),
            ("cql", "cql_lagrange = true"),
            ("calql", ""),
            ("wsrl", ""),
            ("wsrl", "pretrain = \"calql\"\nonline_conservative = true"),
            ("famo2o-iql", ""),
            ("famo2o-iql", "fixed_beta = 11.0"),
            ("famo2o-cql", ""),
            ("famo2o-cql", "balance_entropy = true"),
            ("famo2o-cql", "fixed_beta = 1.0"),
            ("ppo", ""),
            ("ppo", "reward_scaling = \"dynamic\""),
            ("unio4", ""),
            ("bc", ""),
            ("td3bc", ""),
        ];
        let mut rng = crate::rng::AgentRng::new(0);
        let b = batch(&mut rng, 40, 3, 2, true, true);
        for (algo, switches) in cases {
            let case = format!("algo = {algo:?}\n{}\n{switches}", nets(algo));
            let c = AgentConfig::from_toml(toml::from_str(&case).unwrap()).unwrap();
            let mut agent = build(&c, 3, 2, Device::Cpu, 0).unwrap();
            let declared = c.metric_keys();
            let (updates, diagnosed) = logged_keys(&mut *agent, &b, 2);
            let mut logged = BTreeSet::new();
            for (key, _) in updates.iter().flatten() {
                assert!(declared.updates(key), "{case}: an update logs `{key}`, which is not declared");
                logged.insert(*key);
            }
            let want: BTreeSet<&str> = declared.update.iter().copied().collect();
            assert_eq!(logged, want, "{case}: update keys logged vs declared");
            let diagnosed: BTreeSet<&str> = diagnosed.iter().map(|(k, _)| *k).collect();
            assert_eq!(diagnosed, declared.diagnose.iter().copied().collect(), "{case}: diagnostics");
        }
    }

    #[test]
    fn build_every_algorithm_and_round_trip_its_toml() {
        let all = [
            AgentConfig::Sac(SacConfig::default()),
            AgentConfig::Iql(IqlConfig::default()),
            AgentConfig::Cql(CqlConfig::default()),
            AgentConfig::Calql(CalQlConfig::default()),
            AgentConfig::Rlpd(RlpdConfig::default()),
            AgentConfig::Wsrl(WsrlConfig::default()),
            AgentConfig::Famo2oIql(Famo2oIqlConfig::default()),
            AgentConfig::Famo2oIql(Famo2oIqlConfig { fixed_beta: Some(11.0), ..Famo2oIqlConfig::default() }),
            AgentConfig::Famo2oCql(Famo2oCqlConfig::default()),
            AgentConfig::Famo2oCql(Famo2oCqlConfig { fixed_beta: Some(1.0), ..Famo2oCqlConfig::default() }),
            AgentConfig::Ppo(PpoConfig::default()),
            AgentConfig::Unio4(Unio4Config::default()),
            AgentConfig::Bc(BcConfig::default()),
            AgentConfig::Td3bc(Td3BcConfig::default()),
        ];
        for c in all {
            c.validate().unwrap();
            assert_eq!(AgentConfig::from_toml(c.to_toml().unwrap()).unwrap(), c, "{}", c.algo());
            assert_eq!(c.needs_mc_returns(), c.algo() == "calql");
            let a = build(&c, 4, 2, Device::Cpu, 0).unwrap();
            assert_eq!(a.name(), c.algo());
            assert_eq!(a.gamma(), c.gamma(), "{}: the config's γ is the built agent's", c.algo());
        }
    }
}
