//! The updates give the same bits on one thread and on two: the fused passes split their work
//! over libtorch's team (by member, by row, or in two fixed row ranges for one network's
//! backward pass) without changing any sum's order, so a run's numbers do not depend on
//! `--threads`. Batch 256 and HalfCheetah's shapes, large enough that every split is taken.
//! (Its own test binary: it sets libtorch's process-wide thread count.)

use o2o_agents::rng::AgentRng;
use o2o_agents::{build, AgentConfig};
use o2o_datasets::TransitionBatch;
use tch::{Device, Kind, Tensor};

const OBS: i64 = 17;
const ACT: i64 = 6;

fn batches() -> Vec<TransitionBatch> {
    let mut rng = AgentRng::new(7);
    (0..3)
        .map(|_| TransitionBatch {
            obs: rng.normal(&[256, OBS], Device::Cpu),
            action: rng.normal(&[256, ACT], Device::Cpu).tanh(),
            reward: rng.normal(&[256], Device::Cpu),
            next_obs: rng.normal(&[256, OBS], Device::Cpu),
            terminal: rng.uniform_tensor(&[256], Device::Cpu).ge(0.9).to_kind(Kind::Float),
            mc_return: None,
            is_offline: None,
        })
        .collect()
}

/// Every tensor of the agent's checkpoint after three updates on `threads` threads.
fn after_updates(cfg: &AgentConfig, threads: i32) -> Vec<(String, Tensor)> {
    tch::set_num_threads(threads);
    let mut agent = build(cfg, OBS as usize, ACT as usize, Device::Cpu, 11).expect("agent");
    for b in batches() {
        agent.update(&b);
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("agent.ot");
    agent.save(&path).expect("save");
    Tensor::load_multi(&path).expect("read the checkpoint")
}

#[test]
fn sac_and_iql_updates_are_the_same_on_one_and_two_threads() {
    for algo in ["sac", "iql"] {
        let mut table = toml::Table::new();
        table.insert("algo".into(), toml::Value::String(algo.into()));
        let cfg = AgentConfig::from_toml(toml::Value::Table(table)).expect("config");
        let (one, two) = (after_updates(&cfg, 1), after_updates(&cfg, 2));
        assert_eq!(one.len(), two.len());
        for ((name, a), (_, b)) in one.iter().zip(&two) {
            assert!(a.equal(b), "{algo}: {name} differs between 1 and 2 threads");
        }
    }
}
