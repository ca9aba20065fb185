//! MuJoCo tasks: one [`MujocoEnv`] type that steps the physics, and one small [`Task`] per
//! Gymnasium task that says what differs (model file, frame skip, reset noise, observation,
//! reward, termination).
//!
//! The step follows Gymnasium's `MujocoEnv` (formats.md §4.1): `ctrl = action` (unclipped: MuJoCo
//! clamps to `ctrlrange` itself), `mj_step` × frame skip, then `mj_rnePostConstraint` for tasks
//! that read `cfrc_ext` (only Ant-v5: skipping it elsewhere changes no observation or reward).
//! The `-v2` (D4RL) tasks clip the action to the bounds first, as D4RL's `NormalizedBoxEnv` did,
//! so their control cost sees the clipped action.
//!
//! The model is shared (`Arc<MjModel>`, read-only) and the data is owned, so a `MujocoEnv` is
//! `Send` and a vector env can move it into a worker thread.

pub mod adroit;
mod ant;
pub mod ant_goal;
pub mod antmaze;
pub mod fetch;
pub mod fetch_script;
mod half_cheetah;
mod hopper;
mod inverted_pendulum;
pub(crate) mod noise;
#[cfg(feature = "render")]
pub mod render;
mod scene;
mod walker2d;

pub use adroit::{Adroit, AdroitKind};
pub use ant::Ant;
pub use ant_goal::AntGoal;
pub use antmaze::AntMaze;
pub use fetch::{fetch_goal_spec, FetchEnv, FetchReward, FetchTask, GoalLayout};
pub use fetch_script::{FetchScript, Stage};
pub use half_cheetah::HalfCheetah;
pub use hopper::Hopper;
pub use inverted_pendulum::InvertedPendulum;
pub use scene::{GeomInfo, GeomKind, Marker};
pub use walker2d::Walker2d;

use crate::env::{BoxSpace, Env, EnvSpec, Info, Step};
use crate::error::EnvError;
use mujoco_rs::prelude::*;
use noise::EnvRng;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// The physics state type every task works on.
pub type Data = MjData<Arc<MjModel>>;

/// Which semantics a task follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// Gymnasium 1.4.0 `-v5`.
    V5,
    /// The gym `-v2` tasks the D4RL datasets were logged in (formats.md §4.3).
    D4rlV2,
}

impl Version {
    /// Whether the action is clipped to the bounds before the step: D4RL's `NormalizedBoxEnv`
    /// did, so the `-v2` control cost sees the clipped action.
    pub(crate) fn clips_action(self) -> bool {
        self == Version::D4rlV2
    }

    /// The healthy reward a step earns: v5 pays `healthy_reward` only while healthy, gym v2 on
    /// every step, the terminal one included.
    pub(crate) fn survive_reward(self, healthy: bool, healthy_reward: f64) -> f64 {
        match self {
            Version::V5 if !healthy => 0.0,
            _ => healthy_reward,
        }
    }
}

/// How the agent's action becomes MuJoCo's `ctrl`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActionMap {
    /// The action is `ctrl` itself; the action space is the actuators' `ctrlrange`.
    Ctrl,
    /// The action space is [−1, 1]ⁿ and `ctrl = clip(lo + (a + 1)·½·(hi − lo), lo, hi)` over the
    /// `ctrlrange` [lo, hi] (D4RL's `NormalizedBoxEnv`, the same map as Adroit's
    /// `act_mid + a·act_rng`).
    Normalized,
    /// The action space is [−1, 1]ⁿ and `ctrl = mid + clip(a, −1, 1)·rng`, mid = (lo + hi)/2,
    /// rng = ½(hi − lo) (D4RL's and Gymnasium-Robotics' Adroit, in their order of operations).
    Centered,
}

/// What one MuJoCo task defines on top of the shared stepping.
pub trait Task: Send + Sync {
    /// Gymnasium's asset file name, e.g. `hopper.xml`.
    fn xml_file(&self) -> &'static str;
    /// The compiled model. Default: [`Task::xml_file`] from Gymnasium's installed assets; a task
    /// that builds its model (AntMaze adds maze walls to D4RL's ant) overrides it.
    fn model(&self) -> Result<Arc<MjModel>, EnvError> {
        load_model(&crate::assets::asset_path(self.xml_file())?)
    }
    /// Whether the model is Gymnasium's [`Task::xml_file`] as it stands (default), so another
    /// copy of Gymnasium's assets can stand in for it ([`MujocoEnv::from_assets_dir`]); tasks
    /// that build their model from other files (AntMaze, Adroit) say `false`.
    fn model_is_gym_asset(&self) -> bool {
        true
    }
    /// How actions map to `ctrl` (default: the action is `ctrl`).
    fn action_map(&self) -> ActionMap {
        ActionMap::Ctrl
    }
    /// Called once with the compiled model (resolve names to ids). Default: nothing.
    fn prepare(&mut self, _model: &MjModel) -> Result<(), EnvError> {
        Ok(())
    }
    /// Called at every reset before [`Task::reset_noise`]: per-episode task state such as a
    /// sampled goal. Default: nothing.
    fn begin_episode(&mut self, _rng: &mut EnvRng) {}
    /// Whether the task changes its model per episode ([`Task::episode_model`]). Default: no.
    fn changes_model(&self) -> bool {
        false
    }
    /// Write this episode's changes of the task's `base` model into `model` (Adroit moves the
    /// door, the board, the ball or the pen's target), which is swapped in before the state is
    /// set. `model` is a copy of `base` that earlier episodes may already have changed: write
    /// every changed field in full, from `base`'s values. Called only when
    /// [`Task::changes_model`]. Default: nothing.
    fn episode_model(&mut self, _base: &MjModel, _model: &mut MjModel) {}
    /// The per-episode model values (name, numbers) a replay needs besides qpos/qvel, named as
    /// Gymnasium-Robotics' `initial_state_dict` keys. Default: none.
    fn episode_state(&self) -> Vec<(&'static str, Vec<f64>)> {
        Vec::new()
    }
    /// Called at the end of every reset, with the start state in place. Default: nothing.
    fn after_reset(&mut self, _data: &Data) {}
    /// The task's current goal position (x, y), for goal-reaching tasks.
    fn goal(&self) -> Option<[f64; 2]> {
        None
    }
    /// Replace the current goal (goal-reaching tasks); returns whether the task has one.
    fn set_goal(&mut self, _goal: [f64; 2]) -> bool {
        false
    }
    /// Named task points a viewer draws beside the bodies in the current state (AntMaze's goal
    /// and the ant; Adroit's palm, fingertips, object and target). Default: none.
    fn markers(&self, _data: &Data) -> Vec<Marker> {
        Vec::new()
    }
    /// Physics steps per env step.
    fn frame_skip(&self) -> usize;
    /// Length of the observation vector for `model`.
    fn obs_dim(&self, model: &MjModel) -> usize;
    /// Whether observation or reward read `cfrc_ext` (then `mj_rnePostConstraint` runs).
    fn needs_cfrc_ext(&self) -> bool {
        false
    }
    /// Whether the action is clipped to the bounds before the step (D4RL's wrapper).
    fn clips_action(&self) -> bool {
        false
    }
    /// Perturb the initial state in place (`qpos` starts at `qpos0`, `qvel` at zeros).
    fn reset_noise(&self, rng: &mut EnvRng, qpos: &mut [f64], qvel: &mut [f64]);
    /// The position the forward reward differentiates, read before and after the steps
    /// (default: `qpos[0]`, the root slider x).
    fn position(&self, data: &Data) -> [f64; 2] {
        [data.qpos()[0], 0.0]
    }
    /// Write the observation for the current state into `out` (length `obs_dim`).
    fn observe(&self, data: &Data, out: &mut [f64]);
    /// Reward and `terminated` of the step just taken; fills `info` with the reward terms.
    fn reward(&self, data: &Data, before: [f64; 2], action: &[f64], dt: f64, info: &mut Info) -> (f64, bool);
}

/// A Gymnasium MuJoCo task running on MuJoCo 3.17 through mujoco-rs.
pub struct MujocoEnv {
    spec: EnvSpec,
    task: Box<dyn Task>,
    /// The model as loaded; tasks that change the model per episode start from it.
    base_model: Arc<MjModel>,
    /// The previous episode's model, swapped out at the last reset and reused for the next one
    /// (a model copy costs far more than a short episode's steps: pen-v1 resets every 100).
    spare_model: Option<MjModel>,
    data: Data,
    observation_space: BoxSpace,
    action_space: BoxSpace,
    ctrl_range: Vec<[f64; 2]>,
    dt: f64,
    rng: EnvRng,
    needs_reset: bool,
    obs: Vec<f64>,
    action: Vec<f64>,
}

/// Models already loaded in this process, by path: envs made from the same file share one
/// read-only `MjModel` (a vector env of 16 Ants parses `ant.xml` once).
fn model_cache() -> &'static Mutex<HashMap<PathBuf, Arc<MjModel>>> {
    static CACHE: OnceLock<Mutex<HashMap<PathBuf, Arc<MjModel>>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Keep MuJoCo's warnings on the console but out of a `MUJOCO_LOG.TXT` in the current directory
/// (Gymnasium's `half_cheetah.xml` warns about the deprecated `settotalmass` on every load).
fn quiet_log_file() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let config = log_config().with_logto_file(false);
        // SAFETY: runs once, before this crate has created any model or data; the config is a
        // plain global struct MuJoCo reads only when it logs.
        unsafe { set_log_config(config) }
    });
}

pub(crate) fn load_model(path: &Path) -> Result<Arc<MjModel>, EnvError> {
    cached_model(path, || MjModel::from_xml(path).map_err(|e| e.to_string()))
}

/// The model cached under `key`, built by `build` the first time (a file path, or for a model
/// made in memory the path of the file it was made from plus a suffix).
pub(crate) fn cached_model(
    key: &Path,
    build: impl FnOnce() -> Result<MjModel, String>,
) -> Result<Arc<MjModel>, EnvError> {
    quiet_log_file();
    let mut cache = model_cache().lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(m) = cache.get(key) {
        return Ok(m.clone());
    }
    let model = build().map_err(|message| EnvError::ModelLoad { path: key.to_path_buf(), message })?;
    let model = Arc::new(model);
    cache.insert(key.to_path_buf(), model.clone());
    Ok(model)
}

impl MujocoEnv {
    /// Build the env for `task`, loading its XML from Gymnasium's installed assets
    /// (see [`crate::assets`]). `spec` is stored as given.
    pub fn new(spec: EnvSpec, task: Box<dyn Task>) -> Result<Self, EnvError> {
        let model = task.model()?;
        Self::from_model(spec, task, model)
    }

    /// Like [`MujocoEnv::new`], loading the XML from `assets_dir` instead.
    pub fn from_assets_dir(spec: EnvSpec, task: Box<dyn Task>, assets_dir: &Path) -> Result<Self, EnvError> {
        if !task.model_is_gym_asset() {
            return Err(EnvError::Other(format!(
                "{}: its model is not a Gymnasium asset file (it is built from D4RL's or Gymnasium-Robotics' files); \
                 point O2O_D4RL_DIR or O2O_ADROIT_ASSETS at them instead of passing {}",
                spec.id,
                assets_dir.display()
            )));
        }
        let path = assets_dir.join(task.xml_file());
        if !path.is_file() {
            return Err(EnvError::MissingAsset { path, hint: crate::assets::INSTALL_HINT.to_string() });
        }
        Self::from_model(spec, task, load_model(&path)?)
    }

    fn from_model(spec: EnvSpec, mut task: Box<dyn Task>, model: Arc<MjModel>) -> Result<Self, EnvError> {
        task.prepare(&model)?;
        let obs_dim = task.obs_dim(&model);
        let ctrl_range: Vec<[f64; 2]> = model.actuator_ctrlrange().to_vec();
        let action_space = match task.action_map() {
            ActionMap::Ctrl => BoxSpace::new(
                ctrl_range.iter().map(|r| r[0] as f32).collect(),
                ctrl_range.iter().map(|r| r[1] as f32).collect(),
            ),
            ActionMap::Normalized | ActionMap::Centered => {
                BoxSpace::new(vec![-1.0; ctrl_range.len()], vec![1.0; ctrl_range.len()])
            }
        };
        let dt = model.opt().timestep * task.frame_skip() as f64;
        let nu = model.ffi().nu as usize;
        let base_model = model.clone();
        let data = MjData::try_new(model)
            .map_err(|e| EnvError::Other(format!("{}: MuJoCo could not allocate data: {e}", spec.id)))?;
        Ok(Self {
            spec,
            task,
            base_model,
            spare_model: None,
            data,
            observation_space: BoxSpace::unbounded(obs_dim),
            action_space,
            ctrl_range,
            dt,
            rng: noise::rng_from_seed(0),
            needs_reset: true,
            obs: vec![0.0; obs_dim],
            action: vec![0.0; nu],
        })
    }

    /// Seconds of simulated time per env step: `timestep × frame_skip`.
    pub fn dt(&self) -> f64 {
        self.dt
    }

    /// Physics steps per env step.
    pub fn frame_skip(&self) -> usize {
        self.task.frame_skip()
    }

    /// The MuJoCo model (shared, read-only).
    pub fn model(&self) -> &MjModel {
        self.data.model()
    }

    /// The MuJoCo data (the full physics state).
    pub fn data(&self) -> &Data {
        &self.data
    }

    /// The task (read-only): its goal and constants.
    pub fn task(&self) -> &dyn Task {
        self.task.as_ref()
    }

    /// Replace the goal of a goal-reaching task for the rest of the episode (a test or a
    /// parity check placing the goal); errors for a task without one.
    pub fn set_goal(&mut self, goal: [f64; 2]) -> Result<(), EnvError> {
        if goal.iter().any(|v| !v.is_finite()) || !self.task.set_goal(goal) {
            return Err(EnvError::Other(format!(
                "{}: set_goal({goal:?}): the task has no goal or the goal is not finite",
                self.spec.id
            )));
        }
        Ok(())
    }

    /// Joint positions `qpos` (length `nq`).
    pub fn qpos(&self) -> &[f64] {
        self.data.qpos()
    }

    /// Joint velocities `qvel` (length `nv`).
    pub fn qvel(&self) -> &[f64] {
        self.data.qvel()
    }

    /// Set `qpos` and `qvel`, then run `mj_forward` (Gymnasium's `set_state`). The env is then
    /// ready to step, as after a reset.
    pub fn set_state(&mut self, qpos: &[f64], qvel: &[f64]) -> Result<(), EnvError> {
        let (nq, nv) = (self.data.qpos().len(), self.data.qvel().len());
        if qpos.len() != nq || qvel.len() != nv {
            return Err(EnvError::Other(format!(
                "{}: set_state expects qpos of {nq} and qvel of {nv} numbers, found {} and {}",
                self.spec.id,
                qpos.len(),
                qvel.len()
            )));
        }
        if let Some(i) = qpos.iter().chain(qvel).position(|v| !v.is_finite()) {
            return Err(EnvError::Other(format!(
                "{}: set_state got a non-finite value at index {i} of [qpos, qvel]",
                self.spec.id
            )));
        }
        self.data.qpos_mut().copy_from_slice(qpos);
        self.data.qvel_mut().copy_from_slice(qvel);
        self.data.forward();
        self.needs_reset = false;
        Ok(())
    }

    /// The observation of the current state, in `f64` (what [`Env::step`] returns as `f32`).
    pub fn observation_f64(&self) -> Vec<f64> {
        let mut out = vec![0.0; self.observation_space.dim()];
        self.task.observe(&self.data, &mut out);
        out
    }

    fn checked_action(&mut self, action: &[f32]) -> Result<(), EnvError> {
        if action.len() != self.action.len() {
            return Err(EnvError::ActionLength {
                env: self.spec.id.clone(),
                expected: self.action.len(),
                found: action.len(),
            });
        }
        if let Some((index, value)) = action.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(EnvError::NonFiniteAction { env: self.spec.id.clone(), index, value: *value });
        }
        let clip = self.task.clips_action();
        let map = self.task.action_map();
        for ((dst, src), r) in self.action.iter_mut().zip(action).zip(&self.ctrl_range) {
            let a = *src as f64;
            *dst = if map == ActionMap::Normalized {
                // ctrl = clip(lo + (a + 1)·½·(hi − lo), lo, hi), in NormalizedBoxEnv's order.
                (r[0] + (a + 1.0) * 0.5 * (r[1] - r[0])).clamp(r[0], r[1])
            } else if map == ActionMap::Centered {
                // ctrl = mid + clip(a, −1, 1)·rng (Adroit).
                (r[0] + r[1]) / 2.0 + a.clamp(-1.0, 1.0) * (0.5 * (r[1] - r[0]))
            } else if clip {
                a.clamp(r[0], r[1])
            } else {
                a
            };
        }
        Ok(())
    }
}

impl Env for MujocoEnv {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn observation_space(&self) -> &BoxSpace {
        &self.observation_space
    }

    fn action_space(&self) -> &BoxSpace {
        &self.action_space
    }

    /// `mj_resetData`, then the task's noise on `qpos0` / zero `qvel`, then `set_state`.
    fn reset(&mut self, seed: Option<u64>) -> Result<Vec<f32>, EnvError> {
        if let Some(seed) = seed {
            self.rng = noise::rng_from_seed(seed);
        }
        self.data.reset();
        self.task.begin_episode(&mut self.rng);
        if self.task.changes_model() {
            let mut model = self.spare_model.take().unwrap_or_else(|| (*self.base_model).clone());
            self.task.episode_model(&self.base_model, &mut model);
            let old = self.data.try_swap_model(Arc::new(model)).map_err(|e| {
                EnvError::Other(format!("{}: the episode's model does not fit the data: {e}", self.spec.id))
            })?;
            // The first swap returns the shared base model, later ones the last episode's own.
            self.spare_model = Arc::try_unwrap(old).ok();
        }
        let mut qpos = self.model().qpos0().to_vec();
        let mut qvel = vec![0.0; self.data.qvel().len()];
        self.task.reset_noise(&mut self.rng, &mut qpos, &mut qvel);
        self.set_state(&qpos, &qvel)?;
        self.task.after_reset(&self.data);
        self.task.observe(&self.data, &mut self.obs);
        Ok(self.obs.iter().map(|v| *v as f32).collect())
    }

    fn step(&mut self, action: &[f32]) -> Result<Step, EnvError> {
        if self.needs_reset {
            return Err(EnvError::NeedsReset { env: self.spec.id.clone() });
        }
        self.checked_action(action)?;
        let before = self.task.position(&self.data);
        self.data.ctrl_mut().copy_from_slice(&self.action);
        for _ in 0..self.task.frame_skip() {
            self.data.step();
        }
        if self.task.needs_cfrc_ext() {
            self.data.rne_post_constraint();
        }
        self.task.observe(&self.data, &mut self.obs);
        let mut info = Info::default();
        let (reward, terminated) = self.task.reward(&self.data, before, &self.action, self.dt, &mut info);
        self.needs_reset = terminated;
        Ok(Step { obs: self.obs.iter().map(|v| *v as f32).collect(), reward, terminated, truncated: false, info })
    }
}

/// nq + nv − `skip`: the length of [`observe_state`]'s part of an observation.
pub(crate) fn state_dim(model: &MjModel, skip: usize) -> usize {
    (model.ffi().nq + model.ffi().nv) as usize - skip
}

/// The state part most observations start with: qpos[skip..] then qvel, written to the front
/// of `out` (`skip` = the root coordinates the task leaves out). Returns how many it wrote.
pub(crate) fn observe_state(data: &Data, skip: usize, out: &mut [f64]) -> usize {
    let (qpos, qvel) = (&data.qpos()[skip..], data.qvel());
    out[..qpos.len()].copy_from_slice(qpos);
    out[qpos.len()..qpos.len() + qvel.len()].copy_from_slice(qvel);
    qpos.len() + qvel.len()
}

/// Whether every number of [qpos, qvel] is finite.
pub(crate) fn state_is_finite(data: &Data) -> bool {
    data.qpos().iter().chain(data.qvel()).all(|v| v.is_finite())
}

/// Σ aᵢ², the squared norm every control cost uses.
pub(crate) fn sum_sq(x: &[f64]) -> f64 {
    x.iter().map(|v| v * v).sum()
}
