//! CQL and Cal-QL on small synthetic offline datasets, against SAC trained on the same data:
//! CQL's conservative term lowers Q on out-of-distribution actions; Cal-QL keeps Q on dataset
//! actions at or above the Monte-Carlo return where CQL falls below it.

use o2o_agents::calql::{self, CalQlConfig};
use o2o_agents::cql::{Cql, CqlConfig};
use o2o_agents::nn::{MlpConfig, TanhGaussianConfig};
use o2o_agents::rng::AgentRng;
use o2o_agents::sac::{Sac, SacConfig};
use o2o_agents::Agent;
use o2o_datasets::TransitionBatch;
use tch::{Device, Kind, Tensor};

fn small(sac: SacConfig) -> SacConfig {
    let mlp = MlpConfig { hidden: vec![64, 64], ..Default::default() };
    SacConfig {
        actor: TanhGaussianConfig { mlp: mlp.clone(), ..Default::default() },
        critic: mlp,
        critic_lr: 1e-3,
        actor_lr: 1e-3,
        ..sac
    }
}

/// Rows of a dataset, sampled into batches with the test's own generator.
struct Data {
    obs: Tensor,
    action: Tensor,
    reward: Tensor,
    next_obs: Tensor,
    terminal: Tensor,
    mc_return: Tensor,
}

impl Data {
    fn batch(&self, rng: &mut AgentRng, n: i64) -> TransitionBatch {
        let rows = self.obs.size()[0] as usize;
        let idx: Vec<i64> = (0..n).map(|_| rng.below(rows as u64) as i64).collect();
        let idx = Tensor::from_slice(&idx);
        let pick = |t: &Tensor| t.index_select(0, &idx);
        TransitionBatch {
            obs: pick(&self.obs),
            action: pick(&self.action),
            reward: pick(&self.reward),
            next_obs: pick(&self.next_obs),
            terminal: pick(&self.terminal),
            mc_return: Some(pick(&self.mc_return)),
            is_offline: None,
        }
    }
}

/// Mean Q over members and rows.
fn q_mean(agent: &Sac, obs: &Tensor, action: &Tensor) -> f64 {
    agent_q(agent, obs, action).mean(Kind::Float).double_value(&[])
}

fn agent_q(agent: &Sac, obs: &Tensor, action: &Tensor) -> Tensor {
    tch::no_grad(|| agent.q_values(obs, action))
}

/// A contextual task with bootstrapping: the behaviour action is a narrow function of the
/// state, next states are fresh draws, γ = 0.9. Out-of-distribution actions are uniform.
#[test]
fn cql_lowers_q_on_out_of_distribution_actions_relative_to_sac() {
    tch::set_num_threads(1);
    let mut rng = AgentRng::new(0);
    let n = 2000;
    let obs = rng.normal(&[n, 2], Device::Cpu);
    let action =
        ((obs.narrow(1, 0, 1) * 2.0).tanh() * 0.5 + rng.normal(&[n, 1], Device::Cpu) * 0.05).clamp(-0.99, 0.99);
    let reward = -(&action - (obs.narrow(1, 0, 1) * 2.0).tanh() * 0.5).square().squeeze_dim(1) + 1.0;
    let data = Data {
        next_obs: rng.normal(&[n, 2], Device::Cpu),
        terminal: Tensor::zeros([n], (Kind::Float, Device::Cpu)),
        mc_return: reward.zeros_like(),
        obs,
        action,
        reward,
    };
    let sac_cfg = small(SacConfig { gamma: 0.9, backup_entropy: false, ..SacConfig::default() });
    let mut sac = Sac::new(sac_cfg.clone(), 2, 1, Device::Cpu, 1).unwrap();
    let mut cql = Cql::new(CqlConfig { sac: sac_cfg, ..CqlConfig::default() }, 2, 1, Device::Cpu, 1).unwrap();
    let mut brng = AgentRng::new(2);
    for _ in 0..800 {
        let b = data.batch(&mut brng, 128);
        sac.update(&b);
        cql.update(&b);
    }
    let test = rng.normal(&[1000, 2], Device::Cpu);
    let ood = rng.uniform_tensor(&[1000, 1], Device::Cpu) * 2.0 - 1.0;
    let beh = (test.narrow(1, 0, 1) * 2.0).tanh() * 0.5;
    let (sac_ood, sac_data) = (q_mean(&sac, &test, &ood), q_mean(&sac, &test, &beh));
    let (cql_ood, cql_data) = (q_mean(cql.sac(), &test, &ood), q_mean(cql.sac(), &test, &beh));
    eprintln!("SAC: Q_ood {sac_ood:.3} Q_data {sac_data:.3}; CQL: Q_ood {cql_ood:.3} Q_data {cql_data:.3}");
    assert!(
        cql_ood - cql_data < sac_ood - sac_data - 1.0,
        "CQL gap {} vs SAC gap {}",
        cql_ood - cql_data,
        sac_ood - sac_data
    );
    assert!(cql_ood < sac_ood - 1.0);
}

/// Episodes of 30 steps with reward 1 per step and a true end: G_t = (1 − γ^{30−t}) / (1 − γ).
/// CQL's pushed-down policy values bootstrap into its Q on dataset actions, which falls below
/// G; Cal-QL floors the policy values at G, so its Q on dataset actions stays at or above it.
#[test]
fn calql_keeps_q_on_dataset_actions_above_the_mc_return_where_cql_falls_below() {
    tch::set_num_threads(1);
    let (episodes, horizon, gamma) = (40i64, 30i64, 0.95f64);
    let mut rng = AgentRng::new(3);
    let mut obs = Vec::new();
    let mut next = Vec::new();
    let mut g = Vec::new();
    let mut term = Vec::new();
    for _ in 0..episodes {
        let c = rng.normal_vec(1)[0];
        for t in 0..horizon {
            obs.extend([t as f32 / horizon as f32, c]);
            next.extend([(t + 1) as f32 / horizon as f32, c]);
            g.push(((1.0 - gamma.powi((horizon - t) as i32)) / (1.0 - gamma)) as f32);
            term.push(if t + 1 == horizon { 1.0f32 } else { 0.0 });
        }
    }
    let n = episodes * horizon;
    let action = (rng.normal(&[n, 1], Device::Cpu) * 0.05).clamp(-0.99, 0.99);
    let data = Data {
        obs: Tensor::from_slice(&obs).view([n, 2]),
        next_obs: Tensor::from_slice(&next).view([n, 2]),
        reward: Tensor::ones([n], (Kind::Float, Device::Cpu)),
        terminal: Tensor::from_slice(&term),
        mc_return: Tensor::from_slice(&g),
        action,
    };
    let base = CqlConfig { sac: small(SacConfig { gamma, ..CqlConfig::default().sac }), ..CqlConfig::default() };
    let mut cql = Cql::new(base.clone(), 2, 1, Device::Cpu, 1).unwrap();
    let mut calql = calql::new(CalQlConfig { cql: base, ..CalQlConfig::default() }, 2, 1, Device::Cpu, 1).unwrap();
    let mut brng = AgentRng::new(4);
    let mut bound = 0.0;
    for _ in 0..1000 {
        let b = data.batch(&mut brng, 128);
        cql.update(&b);
        let m = calql.update(&b);
        bound = m.iter().find(|(k, _)| *k == "calql_bound_rate").unwrap().1;
    }
    let under = |a: &Cql| {
        (agent_q(a.sac(), &data.obs, &data.action).mean_dim(0, false, Kind::Float) - &data.mc_return)
            .mean(Kind::Float)
            .double_value(&[])
    };
    let (cql_gap, calql_gap) = (under(&cql), under(&calql));
    let mean_g = data.mc_return.mean(Kind::Float).double_value(&[]);
    eprintln!(
        "mean G {mean_g:.3}; mean Q(s,a_D) − G: CQL {cql_gap:.3}, Cal-QL {calql_gap:.3}; Cal-QL bound rate {bound:.3}"
    );
    assert!(bound > 0.05, "the floor must bind for this test to mean anything: bound rate {bound}");
    assert!(calql_gap > -0.05 * mean_g, "Cal-QL Q(s,a_D) − G = {calql_gap}");
    assert!(cql_gap < calql_gap - 0.1 * mean_g, "CQL {cql_gap} vs Cal-QL {calql_gap}");
}
