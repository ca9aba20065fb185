//! SAC learns a trivial problem: a one-step contextual bandit whose best action is a known
//! function of the observation. (The MuJoCo learning tests live with the runner.)

use o2o_agents::rng::AgentRng;
use o2o_agents::sac::{Sac, SacConfig};
use o2o_agents::Agent;
use o2o_datasets::TransitionBatch;
use tch::{Device, Kind, Tensor};

#[test]
fn sac_finds_the_best_action_of_a_contextual_bandit() {
    // Tiny networks: one thread is fastest and does not suffer when the machine is busy.
    tch::set_num_threads(1);
    let mlp = o2o_agents::nn::MlpConfig { hidden: vec![64, 64], ..Default::default() };
    let cfg = SacConfig {
        actor: o2o_agents::nn::TanhGaussianConfig { mlp: mlp.clone(), ..Default::default() },
        critic: mlp,
        actor_lr: 1e-3,
        critic_lr: 1e-3,
        temperature_lr: 1e-3,
        ..SacConfig::default()
    };
    let mut agent = Sac::new(cfg, 2, 1, Device::Cpu, 0).unwrap();
    let mut rng = AgentRng::new(1);
    // a*(s) = 0.6 tanh(2 s₀); reward −4 (a − a*)²; every episode ends after one step.
    let best = |obs: &Tensor| (obs.narrow(1, 0, 1) * 2.0).tanh() * 0.6;
    let mut first_error = None;
    for step in 0..1000 {
        let obs = rng.normal(&[64, 2], Device::Cpu);
        let action = agent.act(&obs, false);
        let reward = ((&action - best(&obs)).square() * -4.0).squeeze_dim(1);
        let b = TransitionBatch {
            next_obs: obs.zeros_like(),
            terminal: Tensor::ones([64], (Kind::Float, Device::Cpu)),
            obs,
            action,
            reward,
            mc_return: None,
            is_offline: None,
        };
        let m = agent.update(&b);
        assert!(m.iter().all(|(_, v)| v.is_finite()), "step {step}: {m:?}");
        if step == 0 {
            let test = rng.normal(&[512, 2], Device::Cpu);
            first_error = Some((agent.act(&test, true) - best(&test)).abs().mean(Kind::Float).double_value(&[]));
        }
    }
    let test = rng.normal(&[512, 2], Device::Cpu);
    let err = (agent.act(&test, true) - best(&test)).abs().mean(Kind::Float).double_value(&[]);
    assert!(err < 0.1, "mean |a − a*| = {err} (at start {first_error:?})");
}
