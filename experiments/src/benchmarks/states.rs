//! Simulator states for D4RL's `infos/qpos` and `infos/qvel` (formats.md §1.2): an env wrapper
//! that logs the MuJoCo state **before** every step, so row i of the log is the state in which
//! `observations[i]` was seen and `actions[i]` taken — what `o2o dataset view` replays in 3D.
//!
//! The wrapper sits inside the time limit and implements [`Env`], so the runner's actor steps it
//! like any env; the log is shared with the caller, which pairs its rows 1:1 with the
//! transitions the actor recorded (one env step, one row).

use anyhow::{bail, Context, Result};
use o2o_datasets::h5util::{Column, Dtype};
use o2o_envs::mujoco::MujocoEnv;
use o2o_envs::wrappers::TimeLimit;
use o2o_envs::{Env, EnvError, Step};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// qpos and qvel before each step, row after row.
#[derive(Debug, Default)]
pub struct StateLog {
    /// Position coordinates per row.
    pub nq: usize,
    /// Velocity coordinates per row.
    pub nv: usize,
    /// `nq` numbers per row.
    pub qpos: Vec<f32>,
    /// `nv` numbers per row.
    pub qvel: Vec<f32>,
}

/// A log shared between the wrapped env (which writes) and its owner (which reads).
pub type SharedStateLog = Arc<Mutex<StateLog>>;

impl StateLog {
    /// Rows logged so far.
    pub fn rows(&self) -> usize {
        self.qpos.len() / self.nq.max(1)
    }

    /// `infos/qpos` `(rows, nq)` and `infos/qvel` `(rows, nv)` for rows `start..end`, stored as `dtype`.
    pub fn columns(&self, start: usize, end: usize, dtype: Dtype) -> Result<BTreeMap<String, Column>> {
        if start > end || end > self.rows() {
            bail!("state log: rows {start}..{end} asked for, {} logged", self.rows());
        }
        let mut out = BTreeMap::new();
        out.insert(
            "infos/qpos".to_string(),
            Column {
                shape: vec![end - start, self.nq],
                dtype,
                data: self.qpos[start * self.nq..end * self.nq].to_vec(),
            },
        );
        out.insert(
            "infos/qvel".to_string(),
            Column {
                shape: vec![end - start, self.nv],
                dtype,
                data: self.qvel[start * self.nv..end * self.nv].to_vec(),
            },
        );
        Ok(out)
    }
}

/// Lock a shared log (a poisoned lock only means a panic elsewhere; the data is still whole rows).
pub fn lock(log: &SharedStateLog) -> std::sync::MutexGuard<'_, StateLog> {
    log.lock().unwrap_or_else(|p| p.into_inner())
}

/// A MuJoCo task that appends its state to a [`StateLog`] before each step.
struct StateLogged {
    env: MujocoEnv,
    log: SharedStateLog,
}

impl Env for StateLogged {
    o2o_envs::forward_to_inner!(spec, observation_space, action_space, reset, executed_action);
    fn step(&mut self, action: &[f32]) -> Result<Step, EnvError> {
        {
            let mut log = lock(&self.log);
            log.qpos.extend(self.env.qpos().iter().map(|&v| v as f32));
            log.qvel.extend(self.env.qvel().iter().map(|&v| v as f32));
        }
        self.env.step(action)
    }
}

/// The task `env_id` in its time limit (as `o2o_envs::make`), logging its states into the
/// returned log.
pub fn make_logged(env_id: &str) -> Result<(Box<dyn Env>, SharedStateLog)> {
    let env = o2o_envs::make_unwrapped(env_id).with_context(|| format!("making the env {env_id}"))?;
    let max = o2o_envs::spec(env_id)?.max_episode_steps.with_context(|| format!("env {env_id} has no time limit"))?;
    let log = Arc::new(Mutex::new(StateLog { nq: env.qpos().len(), nv: env.qvel().len(), ..Default::default() }));
    let env = TimeLimit::new(StateLogged { env, log: log.clone() }, max);
    Ok((Box::new(env), log))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_the_state_before_each_step_matching_the_observation() {
        let (mut env, log) = make_logged("hopper-v2").unwrap();
        let mut obs = env.reset(Some(3)).unwrap();
        let mut seen = vec![obs.clone()];
        for _ in 0..4 {
            obs = env.step(&[0.3, -0.2, 0.1]).unwrap().obs;
            seen.push(obs.clone());
        }
        let log = lock(&log);
        assert_eq!((log.rows(), log.nq, log.nv), (4, 6, 6));
        // Hopper's observation is qpos[1:] followed by clip(qvel, -10, 10) (formats.md §4).
        for (i, o) in seen.iter().take(4).enumerate() {
            assert_eq!(&o[..5], &log.qpos[i * 6 + 1..i * 6 + 6], "row {i}");
            let qvel: Vec<f32> = log.qvel[i * 6..i * 6 + 6].iter().map(|v| v.clamp(-10.0, 10.0)).collect();
            assert_eq!(&o[5..], &qvel[..], "row {i}");
        }
        let cols = log.columns(1, 3, Dtype::Float64).unwrap();
        assert_eq!(cols["infos/qpos"].shape, vec![2, 6]);
        assert_eq!(cols["infos/qvel"].data, log.qvel[6..18].to_vec());
        assert!(log.columns(2, 5, Dtype::Float32).is_err());
    }
}
