//! `[replay] her`: the hindsight relabelling of a run's online replay buffer, built from the
//! env spec's goal layout and reward function (o2o_datasets::replay::Her does the sampling).
//! By default a HER run samples (and so relabels) rows of finished episodes only, as SB3's
//! `HerReplayBuffer` does (fidelity-audit-2 E13); `replay.closed_episodes_only = false` keeps
//! the episode in progress in the draw, its goals taken up to its newest step.

use super::config::{HerMode, RunConfig};
use super::learner::RewardTransform;
use anyhow::{bail, Context, Result};
use o2o_datasets::replay::{GoalReward, GoalSlices, Her};
use o2o_datasets::ReplayBuffer;
use o2o_envs::EnvSpec;

/// Set up a run's online replay buffer as the runner does: HER from `config` and the env's
/// goal layout ([`her_for`]), and sampling of finished episodes only when
/// `replay.closed_episodes_only` says so — unset, for HER runs and for an agent that uses MC
/// returns (`agent_uses_mc_returns`).
pub fn configure_replay(
    buffer: &mut ReplayBuffer,
    config: &RunConfig,
    spec: &EnvSpec,
    obs_dim: usize,
    reward: RewardTransform,
    agent_uses_mc_returns: bool,
) -> Result<()> {
    let her = her_for(config, spec, obs_dim, reward)?;
    buffer.set_her(her).context("setting up [replay] her")?;
    buffer.set_closed_episodes_only(config.replay.closed_episodes_only_for(agent_uses_mc_returns));
    Ok(())
}

/// The run's HER settings, or `None` when `[replay] her = "none"`. Fails, naming the env, when
/// the env is not goal-conditioned. Recomputed rewards get the run's reward transform, as every
/// stored reward does.
pub fn her_for(config: &RunConfig, spec: &EnvSpec, obs_dim: usize, reward: RewardTransform) -> Result<Option<Her>> {
    match config.replay.her {
        HerMode::None => Ok(None),
        HerMode::Future => {
            let Some(goal) = spec.goal else {
                bail!(
                    "key `replay.her` = \"future\" needs a goal-conditioned env (observation = achieved goal, desired goal, observation; e.g. FetchReach-v4, FetchPush-v4), but env {} has no goal layout",
                    spec.id
                );
            };
            let goals = GoalSlices { achieved: goal.layout.achieved, desired: goal.layout.desired };
            let r = if goal.success_terminates {
                GoalReward::SuccessTerminal { threshold: goal.distance_threshold }
            } else if goal.dense {
                GoalReward::Dense
            } else {
                GoalReward::Sparse { threshold: goal.distance_threshold }
            };
            let her = Her::future(goals, r, config.replay.her_k, obs_dim)?;
            Ok(Some(her.with_reward_transform(reward.scale, reward.shift)))
        }
    }
}
