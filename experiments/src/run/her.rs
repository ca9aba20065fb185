//! `[replay] her`: the hindsight relabelling of a run's online replay buffer, built from the
//! env spec's goal layout and reward function (o2o_datasets::replay::Her does the sampling).

use super::config::{HerMode, RunConfig};
use super::learner::RewardTransform;
use anyhow::{bail, Result};
use o2o_datasets::replay::{GoalReward, GoalSlices, Her};
use o2o_envs::EnvSpec;

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
            let r = if goal.dense { GoalReward::Dense } else { GoalReward::Sparse { threshold: goal.distance_threshold } };
            let her = Her::future(goals, r, config.replay.her_k, obs_dim)?;
            Ok(Some(her.with_reward_transform(reward.scale, reward.shift)))
        }
    }
}
