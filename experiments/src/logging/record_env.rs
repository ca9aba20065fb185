//! An evaluation env that records its episodes (bodies, actions, rewards) to Rerun on the side.
//!
//! The runner only swaps the env it evaluates on ([`eval_env`]); stepping is unchanged and every
//! logging call is a non-blocking push (see `queue.rs`). To keep recordings small, only the
//! episodes reset with the seed of the first recorded reset are recorded: the runner resets
//! evaluation episode k with the same seed at every evaluation, so this is episode 0 of each
//! evaluation — one moving body per evaluation, comparable across the run.

use super::rerun_sink::EpisodeLogger;
use super::scene::{body_poses, model_geometry};
use super::shapes::Pose;
use super::MetricSink;
use o2o_envs::mujoco::{Marker, MujocoEnv};
use o2o_envs::wrappers::TimeLimit;
use o2o_envs::{Env, EnvError, Step};
use std::sync::{Arc, Mutex};

/// What the agent chose besides the action for the next step (FamO2O's β), handed from the
/// evaluation loop to the [`RecordingEnv`], which logs it with the step it belongs to.
#[derive(Clone, Default)]
pub struct StepNotes(Arc<Mutex<Vec<(String, f64)>>>);

impl StepNotes {
    /// Set the values for the next step.
    pub fn set(&self, values: Vec<(String, f64)>) {
        if let Ok(mut v) = self.0.lock() {
            *v = values;
        }
    }

    fn take(&self) -> Vec<(String, f64)> {
        self.0.lock().map(|mut v| std::mem::take(&mut *v)).unwrap_or_default()
    }
}

/// What a recorded env shows besides actions and rewards: its bodies' poses and its markers
/// (a MuJoCo task), or nothing (the Fetch tasks, recorded as actions, rewards and notes only).
pub trait Scene: Env {
    /// Every body's world pose, in body order (empty: no 3D scene).
    fn poses(&self) -> Vec<Pose> {
        Vec::new()
    }
    /// The task's markers (goal, ant, hand, object) in the current state.
    fn markers(&self) -> Vec<Marker> {
        Vec::new()
    }
}

impl Scene for TimeLimit<MujocoEnv> {
    fn poses(&self) -> Vec<Pose> {
        body_poses(self.inner())
    }
    fn markers(&self) -> Vec<Marker> {
        self.inner().markers()
    }
}

impl Scene for Box<dyn Env> {}

/// An env that logs chosen episodes to an [`EpisodeLogger`]: a MuJoCo task in its time limit
/// with its moving bodies, or any env ([`RecordingEnv::plain`]) with its actions, rewards and
/// notes (Φ, `episode/potential`) step by step.
pub struct RecordingEnv<E: Scene = TimeLimit<MujocoEnv>> {
    env: E,
    log: EpisodeLogger,
    /// The seed whose episodes are recorded (set by the first reset).
    record_seed: Option<Option<u64>>,
    recording: bool,
    notes: StepNotes,
}

impl RecordingEnv {
    /// Wrap `env`; its geometry is sent with the first recorded episode.
    pub fn new(env: TimeLimit<MujocoEnv>, mut log: EpisodeLogger, notes: StepNotes) -> Self {
        log.set_geometry(model_geometry(env.inner()));
        Self { env, log, record_seed: None, recording: false, notes }
    }
}

impl RecordingEnv<Box<dyn Env>> {
    /// Wrap an env without a 3D scene of ours (the Fetch tasks).
    pub fn plain(env: Box<dyn Env>, log: EpisodeLogger, notes: StepNotes) -> Self {
        Self { env, log, record_seed: None, recording: false, notes }
    }
}

impl<E: Scene> Env for RecordingEnv<E> {
    o2o_envs::forward_to_inner!(spec, observation_space, action_space, executed_action);
    fn reset(&mut self, seed: Option<u64>) -> Result<Vec<f32>, EnvError> {
        let obs = self.env.reset(seed)?;
        let first = *self.record_seed.get_or_insert(seed);
        self.recording = first == seed;
        if self.recording {
            self.log.begin_episode(None);
            let poses = self.env.poses();
            if !poses.is_empty() {
                // The reset pose, with no action or reward yet.
                self.log.set_markers(self.env.markers());
                self.log.step(&poses, &[], 0.0);
            }
        }
        Ok(obs)
    }
    fn step(&mut self, action: &[f32]) -> Result<Step, EnvError> {
        let s = self.env.step(action)?;
        let values = self.notes.take();
        if self.recording {
            self.log.set_markers(self.env.markers());
            self.log.step_with_values(&self.env.poses(), &[], action, s.reward, values);
        }
        Ok(s)
    }
}

/// The env to evaluate on: `id` recording its episodes when one of `sinks` offers an episode
/// logger (a Rerun sink) — in 3D for a MuJoCo task, as actions, rewards and notes only for a
/// Fetch task — else plain `o2o_envs::make(id)`; with the recording env, the notes it logs with
/// each step.
pub fn eval_env(id: &str, sinks: &[Box<dyn MetricSink>]) -> Result<(Box<dyn Env>, Option<StepNotes>), EnvError> {
    match sinks.iter().find_map(|s| s.episode_logger()) {
        // Fetch tasks are not MujocoEnv tasks: no 3D bodies (yet), the step values only.
        Some(log) if o2o_envs::registry::is_fetch(id) => {
            let notes = StepNotes::default();
            Ok((Box::new(RecordingEnv::plain(o2o_envs::make(id)?, log, notes.clone())), Some(notes)))
        }
        Some(log) => {
            let notes = StepNotes::default();
            Ok((Box::new(RecordingEnv::new(o2o_envs::make_mujoco(id)?, log, notes.clone())), Some(notes)))
        }
        None => Ok((o2o_envs::make(id)?, None)),
    }
}
