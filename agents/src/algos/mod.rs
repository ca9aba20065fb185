//! Algorithms, one file each, readable top to bottom against the paper.

pub mod bc;
pub mod calql;
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

/// What every constructor checks and sets up first: sizes of at least 1 (the message names
/// the algorithm), and the CPU allocator tuned when the agent lives on the CPU.
pub(crate) fn prepare(algo: &str, obs_dim: i64, act_dim: i64, device: tch::Device) -> Result<(), crate::AgentError> {
    if obs_dim < 1 || act_dim < 1 {
        return Err(crate::AgentError::Config(format!(
            "{algo} needs obs_dim and act_dim ≥ 1, found {obs_dim} and {act_dim}"
        )));
    }
    crate::alloc::tune_allocator_for(device);
    Ok(())
}

/// Helpers shared by the algorithms' tests.
#[cfg(test)]
pub(crate) mod testing {
    use crate::{Agent, Metrics, Phase};
    use o2o_datasets::TransitionBatch;
    use tch::Tensor;

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
