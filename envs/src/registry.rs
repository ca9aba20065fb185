//! The task registry: ids → constructors, specs and time limits.
//!
//! [`make`] returns the task wrapped in its time limit, like `gymnasium.make`; [`make_mujoco`]
//! returns the same wrapper with the concrete [`MujocoEnv`] inside (for raw state access and the
//! geom list); [`make_unwrapped`] returns the bare task.

use crate::env::{Env, EnvSpec};
use crate::error::EnvError;
use crate::mujoco::antmaze::{BIG_MAZE_TEST, HARDEST_MAZE_TEST, U_MAZE_TEST};
use crate::mujoco::{
    Adroit, AdroitKind, Ant, AntGoal, AntMaze, FetchEnv, FetchReward, FetchTask, HalfCheetah, Hopper, InvertedPendulum,
    MujocoEnv, Task, Version, Walker2d,
};
use crate::wrappers::TimeLimit;
use std::path::Path;

/// One registered task.
struct Entry {
    id: &'static str,
    max_episode_steps: usize,
    family: Option<&'static str>,
    task: fn() -> Box<dyn Task>,
}

/// Every registered id, in listing order.
const ENTRIES: &[Entry] = &[
    Entry {
        id: "HalfCheetah-v5",
        max_episode_steps: 1000,
        family: Some("halfcheetah"),
        task: || Box::new(HalfCheetah { version: Version::V5 }),
    },
    Entry {
        id: "Hopper-v5",
        max_episode_steps: 1000,
        family: Some("hopper"),
        task: || Box::new(Hopper { version: Version::V5 }),
    },
    Entry {
        id: "Walker2d-v5",
        max_episode_steps: 1000,
        family: Some("walker2d"),
        task: || Box::new(Walker2d { version: Version::V5 }),
    },
    Entry {
        id: "Ant-v5",
        max_episode_steps: 1000,
        family: Some("ant"),
        task: || Box::new(Ant { version: Version::V5 }),
    },
    Entry { id: "InvertedPendulum-v5", max_episode_steps: 1000, family: None, task: || Box::new(InvertedPendulum) },
    Entry {
        id: "halfcheetah-v2",
        max_episode_steps: 1000,
        family: Some("halfcheetah"),
        task: || Box::new(HalfCheetah { version: Version::D4rlV2 }),
    },
    Entry {
        id: "hopper-v2",
        max_episode_steps: 1000,
        family: Some("hopper"),
        task: || Box::new(Hopper { version: Version::D4rlV2 }),
    },
    Entry {
        id: "walker2d-v2",
        max_episode_steps: 1000,
        family: Some("walker2d"),
        task: || Box::new(Walker2d { version: Version::D4rlV2 }),
    },
    Entry {
        id: "ant-v2",
        max_episode_steps: 1000,
        family: Some("ant"),
        task: || Box::new(Ant { version: Version::D4rlV2 }),
    },
    // AntMaze as D4RL registers it: the eval (`*_TEST`) map of each size; "play"/"diverse" name
    // datasets, not envs. -v2 draws a goal per reset, -v0 one per env.
    Entry {
        id: "antmaze-umaze-v2",
        max_episode_steps: 700,
        family: Some("antmaze"),
        task: || Box::new(AntMaze::new(U_MAZE_TEST, true)),
    },
    Entry {
        id: "antmaze-umaze-diverse-v2",
        max_episode_steps: 700,
        family: Some("antmaze"),
        task: || Box::new(AntMaze::new(U_MAZE_TEST, true)),
    },
    Entry {
        id: "antmaze-medium-play-v2",
        max_episode_steps: 1000,
        family: Some("antmaze"),
        task: || Box::new(AntMaze::new(BIG_MAZE_TEST, true)),
    },
    Entry {
        id: "antmaze-medium-diverse-v2",
        max_episode_steps: 1000,
        family: Some("antmaze"),
        task: || Box::new(AntMaze::new(BIG_MAZE_TEST, true)),
    },
    Entry {
        id: "antmaze-large-play-v2",
        max_episode_steps: 1000,
        family: Some("antmaze"),
        task: || Box::new(AntMaze::new(HARDEST_MAZE_TEST, true)),
    },
    Entry {
        id: "antmaze-large-diverse-v2",
        max_episode_steps: 1000,
        family: Some("antmaze"),
        task: || Box::new(AntMaze::new(HARDEST_MAZE_TEST, true)),
    },
    Entry {
        id: "antmaze-umaze-v0",
        max_episode_steps: 700,
        family: Some("antmaze"),
        task: || Box::new(AntMaze::new(U_MAZE_TEST, false)),
    },
    Entry {
        id: "antmaze-umaze-diverse-v0",
        max_episode_steps: 700,
        family: Some("antmaze"),
        task: || Box::new(AntMaze::new(U_MAZE_TEST, false)),
    },
    Entry {
        id: "antmaze-medium-play-v0",
        max_episode_steps: 1000,
        family: Some("antmaze"),
        task: || Box::new(AntMaze::new(BIG_MAZE_TEST, false)),
    },
    Entry {
        id: "antmaze-medium-diverse-v0",
        max_episode_steps: 1000,
        family: Some("antmaze"),
        task: || Box::new(AntMaze::new(BIG_MAZE_TEST, false)),
    },
    Entry {
        id: "antmaze-large-play-v0",
        max_episode_steps: 1000,
        family: Some("antmaze"),
        task: || Box::new(AntMaze::new(HARDEST_MAZE_TEST, false)),
    },
    Entry {
        id: "antmaze-large-diverse-v0",
        max_episode_steps: 1000,
        family: Some("antmaze"),
        task: || Box::new(AntMaze::new(HARDEST_MAZE_TEST, false)),
    },
    // The AntMaze ant on an open floor walking to a target: the goal-reaching controller that
    // `o2o dataset make-benchmark antmaze-*` drives through a maze is trained on it.
    Entry { id: "ant-goal-v0", max_episode_steps: 200, family: None, task: || Box::new(AntGoal::default()) },
    // Adroit as D4RL registers it (`{task}-{human,cloned,expert}-v1` all make these envs).
    Entry {
        id: "pen-v1",
        max_episode_steps: 100,
        family: Some("pen"),
        task: || Box::new(Adroit::new(AdroitKind::Pen)),
    },
    Entry {
        id: "door-v1",
        max_episode_steps: 200,
        family: Some("door"),
        task: || Box::new(Adroit::new(AdroitKind::Door)),
    },
    Entry {
        id: "hammer-v1",
        max_episode_steps: 200,
        family: Some("hammer"),
        task: || Box::new(Adroit::new(AdroitKind::Hammer)),
    },
    Entry {
        id: "relocate-v1",
        max_episode_steps: 200,
        family: Some("relocate"),
        task: || Box::new(Adroit::new(AdroitKind::Relocate)),
    },
    // The binary-reward Adroit of Cal-QL / WSRL / RLPD (AWAC's mj_envs fork): r = 1[success] − 1,
    // terminated at the goal; the metric is the success rate, so no normalization family.
    Entry {
        id: "pen-binary-v0",
        max_episode_steps: 100,
        family: None,
        task: || Box::new(Adroit::binary(AdroitKind::Pen)),
    },
    Entry {
        id: "door-binary-v0",
        max_episode_steps: 200,
        family: None,
        task: || Box::new(Adroit::binary(AdroitKind::Door)),
    },
    Entry {
        id: "relocate-binary-v0",
        max_episode_steps: 200,
        family: None,
        task: || Box::new(Adroit::binary(AdroitKind::Relocate)),
    },
];

/// The Fetch tasks of gymnasium-robotics 1.4.2: id, task, reward. 50-step episodes. The
/// `Terminal` ids are o2o's own variants (gold reward 1 at success, which terminates; see
/// [`FetchReward::SuccessTerminal`]): no Python counterpart, so no parity oracle.
const FETCH: &[(&str, FetchTask, FetchReward)] = &[
    ("FetchReach-v4", FetchTask::Reach, FetchReward::Sparse),
    ("FetchPush-v4", FetchTask::Push, FetchReward::Sparse),
    ("FetchPickAndPlace-v4", FetchTask::PickAndPlace, FetchReward::Sparse),
    ("FetchReachDense-v4", FetchTask::Reach, FetchReward::Dense),
    ("FetchPushDense-v4", FetchTask::Push, FetchReward::Dense),
    ("FetchPickAndPlaceDense-v4", FetchTask::PickAndPlace, FetchReward::Dense),
    ("FetchReachTerminal-v4", FetchTask::Reach, FetchReward::SuccessTerminal),
    ("FetchPushTerminal-v4", FetchTask::Push, FetchReward::SuccessTerminal),
    ("FetchPickAndPlaceTerminal-v4", FetchTask::PickAndPlace, FetchReward::SuccessTerminal),
];

/// Episode length of the Fetch tasks.
pub const FETCH_MAX_EPISODE_STEPS: usize = 50;

/// Registered ids that are o2o's own tasks with no outside oracle to check parity against
/// (`ant-goal-v0`: the AntMaze controller's training task; the `Fetch*Terminal-v4` variants,
/// whose dynamics and observations are the checked `Fetch*-v4` ones).
pub const NO_PARITY_ORACLE: &[&str] =
    &["ant-goal-v0", "FetchReachTerminal-v4", "FetchPushTerminal-v4", "FetchPickAndPlaceTerminal-v4"];

/// All ids [`make`] accepts.
pub fn known_ids() -> Vec<&'static str> {
    ENTRIES.iter().map(|e| e.id).chain(FETCH.iter().map(|f| f.0)).collect()
}

/// Whether `id` is one of the Fetch tasks.
pub fn is_fetch(id: &str) -> bool {
    FETCH.iter().any(|f| f.0 == id)
}

/// The Fetch task `id` without its time limit.
pub fn make_fetch_unwrapped(id: &str) -> Result<FetchEnv, EnvError> {
    let (_, task, reward) = FETCH.iter().find(|f| f.0 == id).ok_or_else(|| EnvError::UnknownId {
        id: id.to_string(),
        known: known_ids().iter().map(|s| s.to_string()).collect(),
    })?;
    FetchEnv::new(spec(id)?, *task, *reward)
}

/// The Fetch task `id` in its 50-step time limit, keeping the concrete type.
pub fn make_fetch(id: &str) -> Result<TimeLimit<FetchEnv>, EnvError> {
    Ok(TimeLimit::new(make_fetch_unwrapped(id)?, FETCH_MAX_EPISODE_STEPS))
}

fn entry(id: &str) -> Result<&'static Entry, EnvError> {
    ENTRIES.iter().find(|e| e.id == id).ok_or_else(|| EnvError::UnknownId {
        id: id.to_string(),
        known: known_ids().into_iter().chain(crate::imaginebench::env_ids()).map(str::to_string).collect(),
    })
}

/// The spec of a registered id (no model is loaded).
pub fn spec(id: &str) -> Result<EnvSpec, EnvError> {
    if let Some(f) = FETCH.iter().find(|f| f.0 == id) {
        return Ok(EnvSpec {
            id: f.0.to_string(),
            max_episode_steps: Some(FETCH_MAX_EPISODE_STEPS),
            normalization_family: None,
            goal: Some(crate::mujoco::fetch_goal_spec(f.1, f.2)),
        });
    }
    if crate::imaginebench::is_env_id(id) {
        return Ok(EnvSpec {
            id: id.to_string(),
            max_episode_steps: Some(crate::imaginebench::MAX_EPISODE_STEPS),
            normalization_family: None,
            goal: None,
        });
    }
    let e = entry(id)?;
    Ok(EnvSpec {
        id: e.id.to_string(),
        max_episode_steps: Some(e.max_episode_steps),
        normalization_family: e.family.map(str::to_string),
        goal: None,
    })
}

/// The task `id` without its time limit (Gymnasium's `env.unwrapped`).
pub fn make_unwrapped(id: &str) -> Result<MujocoEnv, EnvError> {
    let e = entry(id)?;
    MujocoEnv::new(spec(id)?, (e.task)())
}

/// Like [`make_unwrapped`], loading the XML from `assets_dir` instead of the installed Gymnasium.
pub fn make_unwrapped_from(id: &str, assets_dir: &Path) -> Result<MujocoEnv, EnvError> {
    let e = entry(id)?;
    MujocoEnv::from_assets_dir(spec(id)?, (e.task)(), assets_dir)
}

/// The task `id` in its time limit, keeping the concrete type.
pub fn make_mujoco(id: &str) -> Result<TimeLimit<MujocoEnv>, EnvError> {
    let env = make_unwrapped(id)?;
    let max = entry(id)?.max_episode_steps;
    Ok(TimeLimit::new(env, max))
}

/// The task `id`, truncated at its `max_episode_steps` (as `gymnasium.make(id)`).
pub fn make(id: &str) -> Result<Box<dyn Env>, EnvError> {
    if is_fetch(id) {
        return Ok(Box::new(make_fetch(id)?));
    }
    if let Some(level) = crate::imaginebench::level_of_env_id(id) {
        return make_imaginebench(crate::imaginebench::ImagineBenchOptions { level, ..Default::default() });
    }
    Ok(Box::new(make_mujoco(id)?))
}

/// An ImagineBench env (`imaginebench-mujoco-<level>-v0`, or `-all-v0` for every level) with `opts` (instruction pairing,
/// encoder, tasks) in its 200-step time limit. [`make`] gives the defaults: the level's tasks,
/// the jump sentences as named, the built-in encoding.
pub fn make_imaginebench(opts: crate::imaginebench::ImagineBenchOptions) -> Result<Box<dyn Env>, EnvError> {
    let env = crate::imaginebench::ImagineBenchEnv::new(opts)?;
    Ok(Box::new(TimeLimit::new(env, crate::imaginebench::MAX_EPISODE_STEPS)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_id_lists_known_ids() {
        let err = spec("Hopper-v9").unwrap_err().to_string();
        assert!(err.contains("Hopper-v9"), "{err}");
        for id in known_ids() {
            assert!(err.contains(id), "{err} misses {id}");
        }
    }

    #[test]
    fn specs_carry_time_limit_and_family() {
        let s = spec("hopper-v2").unwrap();
        assert_eq!(s.max_episode_steps, Some(1000));
        assert_eq!(s.normalization_family.as_deref(), Some("hopper"));
        assert_eq!(spec("InvertedPendulum-v5").unwrap().normalization_family, None);
        // 9 locomotion + 12 AntMaze + 1 ant-goal + 4 Adroit + 3 Adroit binary + 9 Fetch.
        assert_eq!(known_ids().len(), 38);
        assert_eq!(FETCH.len(), 9);
        assert_eq!(spec("antmaze-umaze-v2").unwrap().max_episode_steps, Some(700));
        assert_eq!(spec("antmaze-large-play-v2").unwrap().normalization_family.as_deref(), Some("antmaze"));
        assert_eq!(spec("FetchPush-v4").unwrap().max_episode_steps, Some(50));
    }
}
