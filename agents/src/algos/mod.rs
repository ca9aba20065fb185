//! Algorithms, one file each, readable top to bottom against the paper.

pub mod bc;
pub mod calql;
mod check;
pub mod cql;
pub mod famo2o_cql;
pub mod famo2o_iql;
mod flat;
pub mod iql;
pub mod ppo;
pub mod rlpd;
pub mod sac;
pub mod td3bc;
pub mod unio4;
pub mod wsrl;

use crate::rng::AgentRng;
use tch::{Device, Kind, Tensor};

/// What every constructor checks and sets up first: sizes of at least 1 (the message names
/// the algorithm), and the CPU allocator tuned when the agent lives on the CPU.
pub(crate) fn prepare(algo: &str, obs_dim: i64, act_dim: i64, device: Device) -> Result<(), crate::AgentError> {
    if obs_dim < 1 || act_dim < 1 {
        return Err(crate::AgentError::Config(format!(
            "{algo} needs obs_dim and act_dim ≥ 1, found {obs_dim} and {act_dim}"
        )));
    }
    crate::alloc::tune_allocator_for(device);
    Ok(())
}

/// What every `act` does around its policy: `obs` moved to the agent's `device` as `f32`; for a
/// stochastic action, standard normal noise `ε` `[B, A]` drawn from `noise = (rng, A)`; then
/// `policy(obs, ε)` without gradients, its actions moved back to `obs`'s device.
pub(crate) fn act_with(
    obs: &Tensor,
    device: Device,
    noise: Option<(&mut AgentRng, i64)>,
    policy: impl FnOnce(&Tensor, Option<Tensor>) -> Tensor,
) -> Tensor {
    let out = obs.device();
    let obs = obs.to_device(device).to_kind(Kind::Float);
    tch::no_grad(|| {
        let eps = noise.map(|(rng, act_dim)| rng.normal(&[obs.size()[0], act_dim], device));
        policy(&obs, eps).to_device(out)
    })
}

/// A deterministic action `a` explored with Gaussian noise, `clip(a + σ ε, −1, 1)` (TD3's
/// exploration; BC and TD3+BC acting online), or `a` itself without noise.
pub(crate) fn explore(a: Tensor, eps: Option<Tensor>, std: f64) -> Tensor {
    match eps {
        Some(eps) => (a + eps * std).clamp(-1.0, 1.0),
        None => a,
    }
}

/// Helpers shared by the algorithms' tests.
#[cfg(test)]
pub(crate) mod testing {
    use crate::rng::AgentRng;
    use crate::{Agent, Metrics, Phase};
    use o2o_datasets::TransitionBatch;
    use tch::{Device, Kind, Tensor};

    /// A random CPU batch of `n` rows, `obs`-dimensional states and `act`-dimensional actions in
    /// `[-1, 1]`, drawn from `rng` column by column: states, actions, rewards and next states
    /// from N(0, 1); with `terminals`, each row terminal with probability 0.1 (else none is);
    /// with `returns`, N(0, 1) Monte-Carlo returns.
    pub(crate) fn batch(
        rng: &mut AgentRng,
        n: i64,
        obs: i64,
        act: i64,
        terminals: bool,
        returns: bool,
    ) -> TransitionBatch {
        TransitionBatch {
            obs: rng.normal(&[n, obs], Device::Cpu),
            action: rng.normal(&[n, act], Device::Cpu).tanh(),
            reward: rng.normal(&[n], Device::Cpu),
            next_obs: rng.normal(&[n, obs], Device::Cpu),
            terminal: match terminals {
                true => rng.uniform_tensor(&[n], Device::Cpu).ge(0.9).to_kind(Kind::Float),
                false => Tensor::zeros([n], (Kind::Float, Device::Cpu)),
            },
            mc_return: returns.then(|| rng.normal(&[n], Device::Cpu)),
            is_offline: None,
        }
    }

    /// Save → load → continue equals an uninterrupted run, bit for bit: `make(seed)` builds an
    /// agent, the first `offline` batches are offline updates and the rest online; one agent runs
    /// every batch, another stops after `cut`, is saved and loaded into a fresh agent (built
    /// from another seed), which runs the rest. Metrics, every tensor of `tensors` and a
    /// stochastic action on `obs` must agree exactly.
    pub(crate) fn assert_exact_resume<A: Agent>(
        make: impl Fn(u64) -> A,
        tensors: impl Fn(&A) -> Vec<(String, Tensor)>,
        batches: &[TransitionBatch],
        offline: usize,
        cut: usize,
        obs: &Tensor,
    ) {
        let run = |agent: &mut A, range: std::ops::Range<usize>| -> Vec<Metrics> {
            range
                .map(|i| {
                    agent.set_phase(if i < offline { Phase::Offline } else { Phase::Online });
                    agent.update(&batches[i])
                })
                .collect()
        };
        let mut whole = make(3);
        let want = run(&mut whole, 0..batches.len());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.ot");
        let mut first = make(3);
        let mut got = run(&mut first, 0..cut);
        first.save(&path).unwrap();
        let mut resumed = make(99);
        resumed.load(&path).unwrap();
        got.extend(run(&mut resumed, cut..batches.len()));
        assert_eq!(got, want);
        for ((n, a), (_, b)) in tensors(&whole).iter().zip(tensors(&resumed)) {
            assert!(a.equal(&b), "{n} differs");
        }
        assert!(whole.act(obs, false).equal(&resumed.act(obs, false)));
    }
}
