//! [`ImagineBenchEnv`]: one level of Mujoco-v0's instruction tasks on our HalfCheetah.
//!
//! The physics is [`HalfCheetah`] at `-v5` (HalfCheetah-v4 and -v5 share the model, the reward
//! terms, the reset noise and the 17 observation numbers; ImagineBench reads v4's
//! `reward_run`, our `reward_forward`). On top, per episode (formats.md §3.3):
//! - reset picks the level's next task round-robin (the first reset takes the first task) and
//!   one of its sentences uniformly from the env's own seeded stream;
//! - observation = [x₀, obs₁₇, e] at reset (x₀ the absolute root x), [Δx, obs₁₇, e] after each
//!   step (Δx = x after − x before), e the sentence's vector;
//! - reward = the task's [`TaskKind::reward`]; `terminated` = the task's success rule on the Δx
//!   history so far; the registry's time limit truncates at 200 steps.
//!
//! The round-robin position lives in the env, as in the released code: a resumed run's new env
//! starts the cycle again at the first task.

use super::{History, InstructionEncoder, Instructions, Level, TaskKind, STATE_DIM};
use crate::env::{BoxSpace, Env, EnvSpec, Step};
use crate::error::EnvError;
use crate::mujoco::{HalfCheetah, MujocoEnv, Version};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Mixed into the reset seed for the sentence stream, so it is not the physics noise stream.
const SENTENCE_STREAM: u64 = 0x1a6_14e_be7c;

/// How to build an [`ImagineBenchEnv`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ImagineBenchOptions {
    /// Which level's tasks to cycle through; `None`: every level's
    /// ([`super::ALL_LEVELS_ID`]).
    pub level: Option<Level>,
    /// Cycle through these tasks instead of the level's (e.g. one task, to collect its data).
    pub tasks: Option<Vec<TaskKind>>,
    /// The jump tasks' sentences: as named (default) or as the released code pairs them.
    pub instructions: Instructions,
    /// Where the sentence vectors come from (default: the built-in encoding, 768 numbers).
    pub encoder: InstructionEncoder,
}

/// ImagineBench Mujoco-v0 (module docs).
pub struct ImagineBenchEnv {
    spec: EnvSpec,
    physics: MujocoEnv,
    tasks: Vec<TaskKind>,
    instructions: Instructions,
    encoder: InstructionEncoder,
    /// Per task, per sentence: its vector (checked against the table when the env is made).
    vectors: Vec<Vec<Vec<f32>>>,
    observation_space: BoxSpace,
    resets: u64,
    current: usize,
    sentence: usize,
    rng: ChaCha8Rng,
    x_before: f64,
    history: History,
    obs: Vec<f32>,
}

impl ImagineBenchEnv {
    /// Build the env; a table encoder must cover every sentence of its tasks.
    pub fn new(opts: ImagineBenchOptions) -> Result<Self, EnvError> {
        let id = opts.level.map_or(super::ALL_LEVELS_ID, Level::env_id);
        let tasks =
            opts.tasks.clone().unwrap_or_else(|| opts.level.map_or_else(super::all_tasks, |l| l.tasks().to_vec()));
        if tasks.is_empty() {
            return Err(EnvError::Other(format!("{id}: the task list is empty")));
        }
        let mut vectors = Vec::new();
        for t in &tasks {
            let per: Result<Vec<Vec<f32>>, String> =
                t.instructions(opts.instructions).iter().map(|s| opts.encoder.encode(s)).collect();
            vectors.push(per.map_err(|message| EnvError::Other(format!("{id}: {message}")))?);
        }
        let spec = EnvSpec {
            id: id.to_string(),
            max_episode_steps: Some(super::MAX_EPISODE_STEPS),
            normalization_family: None,
            goal: None,
        };
        let physics = MujocoEnv::new(
            EnvSpec { id: "HalfCheetah-v5".into(), max_episode_steps: None, normalization_family: None, goal: None },
            Box::new(HalfCheetah { version: Version::V5 }),
        )?;
        let dim = STATE_DIM + opts.encoder.dim();
        Ok(Self {
            spec,
            physics,
            tasks,
            instructions: opts.instructions,
            encoder: opts.encoder,
            vectors,
            observation_space: BoxSpace::unbounded(dim),
            resets: 0,
            current: 0,
            sentence: 0,
            rng: ChaCha8Rng::seed_from_u64(SENTENCE_STREAM),
            x_before: 0.0,
            history: History::default(),
            obs: vec![0.0; dim],
        })
    }

    /// The task of the current episode.
    pub fn task(&self) -> TaskKind {
        self.tasks[self.current]
    }

    /// The tasks the env cycles through.
    pub fn tasks(&self) -> &[TaskKind] {
        &self.tasks
    }

    /// The sentence of the current episode.
    pub fn instruction(&self) -> &'static str {
        self.task().instructions(self.instructions)[self.sentence]
    }

    /// Which sentences the jump tasks get.
    pub fn instruction_pairing(&self) -> Instructions {
        self.instructions
    }

    /// The encoder the sentence vectors come from.
    pub fn encoder(&self) -> &InstructionEncoder {
        &self.encoder
    }

    /// The Δx history of the current episode.
    pub fn history(&self) -> &History {
        &self.history
    }

    /// The HalfCheetah underneath (qpos, qvel, set_state).
    pub fn physics(&self) -> &MujocoEnv {
        &self.physics
    }

    /// The 18 state numbers of the observation, in `f64`: [x₀ or Δx, obs₁₇].
    pub fn state_f64(&self, first: f64) -> Vec<f64> {
        let mut out = Vec::with_capacity(STATE_DIM);
        out.push(first);
        out.extend(self.physics.observation_f64());
        out
    }

    fn write_obs(&mut self, first: f64) -> Vec<f32> {
        let state = self.state_f64(first);
        for (dst, src) in self.obs.iter_mut().zip(&state) {
            *dst = *src as f32;
        }
        self.obs[STATE_DIM..].copy_from_slice(&self.vectors[self.current][self.sentence]);
        self.obs.clone()
    }
}

impl Env for ImagineBenchEnv {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn observation_space(&self) -> &BoxSpace {
        &self.observation_space
    }

    fn action_space(&self) -> &BoxSpace {
        self.physics.action_space()
    }

    fn reset(&mut self, seed: Option<u64>) -> Result<Vec<f32>, EnvError> {
        if let Some(s) = seed {
            self.rng = ChaCha8Rng::seed_from_u64(s ^ SENTENCE_STREAM);
        }
        self.current = (self.resets % self.tasks.len() as u64) as usize;
        self.resets += 1;
        self.physics.reset(seed)?;
        self.sentence = self.rng.gen_range(0..self.vectors[self.current].len());
        self.x_before = self.physics.qpos()[0];
        self.history = History::default();
        Ok(self.write_obs(self.x_before))
    }

    fn step(&mut self, action: &[f32]) -> Result<Step, EnvError> {
        let mut step = self.physics.step(action)?;
        let x = self.physics.qpos()[0];
        let dx = x - self.x_before;
        self.x_before = x;
        self.history.push(dx);
        let task = self.task();
        let run = step.info.get("reward_forward").unwrap_or(0.0);
        let ctrl = step.info.get("reward_ctrl").unwrap_or(0.0);
        let success = task.success(&self.history);
        let mut info = std::mem::take(&mut step.info);
        info.set("reward_run", run);
        info.set("x_delta", dx);
        info.set("x_travelled", self.history.sum);
        info.success = Some(success);
        info.task = Some(task.key());
        Ok(Step {
            obs: self.write_obs(dx),
            reward: task.reward(run, ctrl),
            terminated: success,
            truncated: false,
            info,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_default_to_every_level_fixed_builtin() {
        let env = ImagineBenchEnv::new(ImagineBenchOptions::default()).unwrap();
        assert_eq!(env.spec().id, "imaginebench-mujoco-all-v0");
        assert_eq!(env.observation_space().dim(), 18 + 768);
        assert_eq!(env.tasks().len(), 13);
        assert_eq!(env.instruction_pairing(), Instructions::Fixed);
        let real =
            ImagineBenchEnv::new(ImagineBenchOptions { level: Some(Level::Real), ..Default::default() }).unwrap();
        assert_eq!((real.spec().id.as_str(), real.tasks().len()), ("imaginebench-mujoco-real-v0", 4));
    }
}
