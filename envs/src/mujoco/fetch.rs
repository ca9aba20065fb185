//! Fetch arm tasks of gymnasium-robotics 1.4.2 (`envs/fetch/fetch_env.py`, `reach.py`,
//! `push.py`, `pick_and_place.py`, `robot_env.py`, `utils/mujoco_utils.py`), on MuJoCo 3.17 with
//! the package's own XML files loaded from the venv.
//!
//! - model `fetch/{reach,push,pick_and_place}.xml`, timestep 0.002, `n_substeps` = 20 → dt 0.04;
//!   4 actions in [−1, 1] (clipped): Δx, Δy, Δz of the gripper (× 0.05 m) and the finger command.
//! - the arm is driven through its mocap body: before each step the mocap is moved onto the
//!   welded gripper body (`reset_mocap2body_xpos`), then shifted by the position delta and its
//!   quaternion has (1, 0, 1, 0) added; position actuators (PickAndPlace's fingers) get
//!   `ctrl = qpos + command`, torque ones `ctrl = command`. With `block_gripper` (Reach, Push) the
//!   finger command is 0 and after the physics steps both finger joints are set to 0 and
//!   `mj_forward` runs.
//! - set-up (once, at construction): the `initial_qpos` joints are written, the weld's relative
//!   pose is cleared (`eq_data[:7] = 0,0,0,0,0,0,1`), the mocap goes to
//!   grip + (−0.498, 0.005, −0.431 + gripper_extra_height) with quaternion (1, 0, 1, 0), and
//!   10 × 20 physics steps settle the arm; that state is every episode's start.
//! - reset: `mj_resetData`, the settled state, then (object tasks) the object's x, y at the
//!   initial gripper x, y + U(−0.15, 0.15)², redrawn until ≥ 0.1 away; the goal is the initial
//!   gripper position + U(−0.15, 0.15)³ (object tasks: z = the object's height, and for
//!   PickAndPlace with probability ½ lifted by U(0, 0.45)).
//! - observation (flattened as `gymnasium.spaces.flatten` does a Dict: keys sorted) =
//!   [achieved_goal (3), desired_goal (3), observation (10 Reach, 25 others)]; observation =
//!   grip pos, object pos, object − grip, finger qpos (2), object Euler angles, object linear
//!   velocity − grip velocity, object angular velocity, grip velocity, finger qvel (2); velocities
//!   × dt.
//! - reward: sparse −(d > 0.05), dense −d, d = ‖achieved − desired‖; `info.success` = d < 0.05;
//!   never terminates (50-step time limit in the registry).
//! - o2o's own `Fetch*Terminal-v4` variants ([`FetchReward::SuccessTerminal`], no Python
//!   counterpart): the same task with Robo-Dopamine's gold reward, 1 at success and 0
//!   otherwise, and success terminates the episode (a true end: bootstrapping stops), as in
//!   the manipulation benchmarks the paper trains on. The 50-step limit still truncates.
//!
//! The random stream is ours (ChaCha8, as every o2o env), so object and goal draws differ from
//! NumPy's; parity replays our start states in the Python env.

use super::noise::{rng_from_seed, EnvRng};
use super::Data;
use crate::assets::{robotics_assets_dir, ROBOTICS_HINT};
pub use crate::env::GoalLayout;
use crate::env::{goal_distance as distance, BoxSpace, Env, EnvSpec, GoalSpec, Info, Step};
use crate::error::EnvError;
use mujoco_rs::prelude::*;
use rand::Rng;
use std::path::Path;
use std::sync::Arc;

/// How a Fetch task pays and ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchReward {
    /// −(d > 0.05) every step, never terminates (`Fetch*-v4`).
    Sparse,
    /// −d every step, never terminates (`Fetch*Dense-v4`).
    Dense,
    /// 1 at success (d < 0.05), which terminates the episode; 0 otherwise
    /// (`Fetch*Terminal-v4`, o2o's own).
    SuccessTerminal,
}

/// Which Fetch task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchTask {
    /// Move the gripper to a point (no object).
    Reach,
    /// Push a block to a target on the table (gripper blocked closed).
    Push,
    /// Pick a block up and place it at a target that may be in the air.
    PickAndPlace,
}

struct Params {
    xml: &'static str,
    has_object: bool,
    block_gripper: bool,
    gripper_extra_height: f64,
    target_in_the_air: bool,
    initial_qpos: &'static [(&'static str, &'static [f64])],
}

const N_SUBSTEPS: usize = 20;
const OBJ_RANGE: f64 = 0.15;
const TARGET_RANGE: f64 = 0.15;
/// The Fetch models' scene camera (the GRM's front view).
pub const FRONT_CAMERA: &str = "external_camera_0";
/// The Fetch models' gripper camera (the GRM's wrist views).
pub const WRIST_CAMERA: &str = "gripper_camera_rgb";
/// Distance under which the goal counts as reached.
pub const DISTANCE_THRESHOLD: f64 = 0.05;
const OBJECT_START: &[f64] = &[1.25, 0.53, 0.4, 1.0, 0.0, 0.0, 0.0];

impl FetchTask {
    fn params(self) -> Params {
        match self {
            FetchTask::Reach => Params {
                xml: "fetch/reach.xml",
                has_object: false,
                block_gripper: true,
                gripper_extra_height: 0.2,
                target_in_the_air: true,
                initial_qpos: &[("robot0:slide0", &[0.4049]), ("robot0:slide1", &[0.48]), ("robot0:slide2", &[0.0])],
            },
            FetchTask::Push => Params {
                xml: "fetch/push.xml",
                has_object: true,
                block_gripper: true,
                gripper_extra_height: 0.0,
                target_in_the_air: false,
                initial_qpos: &[
                    ("robot0:slide0", &[0.405]),
                    ("robot0:slide1", &[0.48]),
                    ("robot0:slide2", &[0.0]),
                    ("object0:joint", OBJECT_START),
                ],
            },
            FetchTask::PickAndPlace => Params {
                xml: "fetch/pick_and_place.xml",
                has_object: true,
                block_gripper: false,
                gripper_extra_height: 0.2,
                target_in_the_air: true,
                initial_qpos: &[
                    ("robot0:slide0", &[0.405]),
                    ("robot0:slide1", &[0.48]),
                    ("robot0:slide2", &[0.0]),
                    ("object0:joint", OBJECT_START),
                ],
            },
        }
    }

    /// Length of the task's `observation` part (before the goals are added).
    pub fn observation_len(self) -> usize {
        if self.params().has_object {
            25
        } else {
            10
        }
    }
}

/// The goal layout and reward of a Fetch task: what its [`EnvSpec`]'s `goal` says, for
/// hindsight relabelling.
pub fn fetch_goal_spec(task: FetchTask, reward: FetchReward) -> GoalSpec {
    let layout = GoalLayout { achieved: [0, 3], desired: [3, 6], observation: [6, 6 + task.observation_len()] };
    GoalSpec {
        layout,
        distance_threshold: DISTANCE_THRESHOLD,
        dense: reward == FetchReward::Dense,
        success_terminates: reward == FetchReward::SuccessTerminal,
    }
}

/// A Fetch task running on MuJoCo 3.17.
pub struct FetchEnv {
    spec: EnvSpec,
    task: FetchTask,
    params: Params,
    reward: FetchReward,
    data: Data,
    observation_space: BoxSpace,
    action_space: BoxSpace,
    grip_site: usize,
    object_site: Option<usize>,
    object_qpos: Option<usize>,
    fingers: [(usize, usize); 2],
    welds: Vec<(usize, usize)>,
    initial_time: f64,
    initial_qpos: Vec<f64>,
    initial_qvel: Vec<f64>,
    initial_gripper_xpos: [f64; 3],
    height_offset: f64,
    goal: [f64; 3],
    rng: EnvRng,
    needs_reset: bool,
}

/// The model at `path` with its mocap welds reset (`reset_mocap_welds`: the weld's anchor and
/// relative pose cleared so the gripper body is pulled onto the mocap itself). Parsed and
/// modified once per process and then shared read-only, like the other tasks' models.
fn fetch_model(path: &Path) -> Result<Arc<MjModel>, EnvError> {
    super::quiet_log_file();
    let key = path.with_extension("xml#welds-reset");
    let mut cache = super::model_cache().lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(m) = cache.get(&key) {
        return Ok(m.clone());
    }
    let mut model = MjModel::from_xml(path)
        .map_err(|e| EnvError::ModelLoad { path: path.to_path_buf(), message: e.to_string() })?;
    let weld_rows: Vec<usize> =
        (0..model.ffi().neq as usize).filter(|&i| model.eq_type()[i] == MjtEq::mjEQ_WELD).collect();
    // SAFETY: the model is not shared yet and no MjData exists for it; eq_data is plain numbers.
    unsafe {
        for &i in &weld_rows {
            model.eq_data_mut()[i][..7].copy_from_slice(&[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]);
        }
    }
    let model = Arc::new(model);
    cache.insert(key, model.clone());
    Ok(model)
}

fn id_of(model: &MjModel, kind: MjtObjBase, name: &str, xml: &str) -> Result<usize, EnvError> {
    model
        .name_to_id(kind, name)
        .ok_or_else(|| EnvError::Other(format!("{xml}: the model has no {kind:?} named `{name}`")))
}

impl FetchEnv {
    /// Build `task` with `reward` from the installed gymnasium-robotics assets.
    pub fn new(spec: EnvSpec, task: FetchTask, reward: FetchReward) -> Result<Self, EnvError> {
        Self::from_assets_dir(spec, task, reward, &robotics_assets_dir()?)
    }

    /// Like [`FetchEnv::new`] with the assets in `dir`.
    pub fn from_assets_dir(
        mut spec: EnvSpec,
        task: FetchTask,
        reward: FetchReward,
        dir: &Path,
    ) -> Result<Self, EnvError> {
        spec.goal = Some(fetch_goal_spec(task, reward));
        let params = task.params();
        let path = dir.join(params.xml);
        if !path.is_file() {
            return Err(EnvError::MissingAsset { path, hint: ROBOTICS_HINT.into() });
        }
        let model = fetch_model(&path)?;
        let xml = params.xml;
        let weld_rows: Vec<usize> =
            (0..model.ffi().neq as usize).filter(|&i| model.eq_type()[i] == MjtEq::mjEQ_WELD).collect();
        let mut welds = Vec::new();
        for &i in &weld_rows {
            let (b1, b2) = (model.eq_obj1id()[i] as usize, model.eq_obj2id()[i] as usize);
            let (mocap, body) = if model.body_mocapid()[b1] != -1 {
                (model.body_mocapid()[b1] as usize, b2)
            } else {
                (model.body_mocapid()[b2] as usize, b1)
            };
            welds.push((mocap, body));
        }
        let grip_site = id_of(&model, MjtObjBase::mjOBJ_SITE, "robot0:grip", xml)?;
        let object_site =
            if params.has_object { Some(id_of(&model, MjtObjBase::mjOBJ_SITE, "object0", xml)?) } else { None };
        let object_qpos = match params.has_object {
            true => Some(model.jnt_qposadr()[id_of(&model, MjtObjBase::mjOBJ_JOINT, "object0:joint", xml)?] as usize),
            false => None,
        };
        // robot_get_obs keeps joints named robot*; its last two are the fingers (r, then l).
        let finger = |name: &str| -> Result<(usize, usize), EnvError> {
            let j = id_of(&model, MjtObjBase::mjOBJ_JOINT, name, xml)?;
            Ok((model.jnt_qposadr()[j] as usize, model.jnt_dofadr()[j] as usize))
        };
        let fingers = [finger("robot0:r_gripper_finger_joint")?, finger("robot0:l_gripper_finger_joint")?];
        let mut joints = Vec::new();
        for (name, value) in params.initial_qpos {
            let j = id_of(&model, MjtObjBase::mjOBJ_JOINT, name, xml)?;
            joints.push((model.jnt_qposadr()[j] as usize, *value));
        }
        let data = MjData::try_new(model)
            .map_err(|e| EnvError::Other(format!("{}: MuJoCo could not allocate data: {e}", spec.id)))?;
        let obs_dim = 6 + task.observation_len();
        let mut env = Self {
            spec,
            task,
            params,
            reward,
            data,
            observation_space: BoxSpace::unbounded(obs_dim),
            action_space: BoxSpace::new(vec![-1.0; 4], vec![1.0; 4]),
            grip_site,
            object_site,
            object_qpos,
            fingers,
            welds,
            initial_time: 0.0,
            initial_qpos: Vec::new(),
            initial_qvel: Vec::new(),
            initial_gripper_xpos: [0.0; 3],
            height_offset: 0.0,
            goal: [0.0; 3],
            rng: rng_from_seed(0),
            needs_reset: true,
        };
        env.setup(&joints);
        Ok(env)
    }

    /// `_env_setup`: initial joints, mocap to the start pose, 10 × n_substeps settling steps.
    fn setup(&mut self, joints: &[(usize, &[f64])]) {
        for (adr, value) in joints {
            self.data.qpos_mut()[*adr..*adr + value.len()].copy_from_slice(value);
        }
        self.data.forward();
        self.data.forward();
        let grip = self.data.site_xpos()[self.grip_site];
        let target = [grip[0] - 0.498, grip[1] + 0.005, grip[2] - 0.431 + self.params.gripper_extra_height];
        self.data.mocap_pos_mut()[0] = target;
        self.data.mocap_quat_mut()[0] = [1.0, 0.0, 1.0, 0.0];
        for _ in 0..10 * N_SUBSTEPS {
            self.data.step();
        }
        self.initial_gripper_xpos = self.data.site_xpos()[self.grip_site];
        if let Some(site) = self.object_site {
            self.height_offset = self.data.site_xpos()[site][2];
        }
        self.initial_time = self.data.time();
        self.initial_qpos = self.data.qpos().to_vec();
        self.initial_qvel = self.data.qvel().to_vec();
    }

    /// The task.
    pub fn task(&self) -> FetchTask {
        self.task
    }

    /// Where achieved goal, desired goal and observation sit in the flat observation.
    pub fn goal_layout(&self) -> GoalLayout {
        fetch_goal_spec(self.task, self.reward).layout
    }

    /// The desired goal of the current episode.
    pub fn goal(&self) -> [f64; 3] {
        self.goal
    }

    /// The settled state every episode starts from (before the object and goal draws).
    pub fn initial_qpos(&self) -> &[f64] {
        &self.initial_qpos
    }

    /// The camera images of the current state in the GRM's order of views (front, left wrist,
    /// right wrist) as PNG bytes: the front view is the scene camera `external_camera_0`, both
    /// wrist views the one `gripper_camera_rgb` (a single arm repeats its wrist view, as the
    /// released benchmark does). Make the renderer with [`FetchEnv::camera_renderer`].
    #[cfg(feature = "render")]
    pub fn render_views(&mut self, renderer: &mut super::render::CameraRenderer) -> Result<[Vec<u8>; 3], EnvError> {
        let front = renderer.png(&mut self.data, FRONT_CAMERA)?;
        let wrist = renderer.png(&mut self.data, WRIST_CAMERA)?;
        Ok([front, wrist.clone(), wrist])
    }

    /// The raw RGB frame (top row first) of one of the model's cameras in the current state.
    #[cfg(feature = "render")]
    pub fn render_rgb(
        &mut self,
        renderer: &mut super::render::CameraRenderer,
        camera: &str,
    ) -> Result<Vec<u8>, EnvError> {
        renderer.rgb(&mut self.data, camera)
    }

    /// An offscreen renderer of `width × height` frames for this task's model.
    #[cfg(feature = "render")]
    pub fn camera_renderer(&self, width: usize, height: usize) -> Result<super::render::CameraRenderer, EnvError> {
        super::render::CameraRenderer::new(self.data.model(), width, height)
    }

    /// Joint positions.
    pub fn qpos(&self) -> &[f64] {
        self.data.qpos()
    }

    /// Joint velocities.
    pub fn qvel(&self) -> &[f64] {
        self.data.qvel()
    }

    /// The sparse reward of an achieved/desired goal pair (−1 or 0), as `compute_reward`; HER
    /// relabelling recomputes rewards with it.
    pub fn sparse_reward(achieved: &[f64], desired: &[f64]) -> f64 {
        fetch_goal_spec(FetchTask::Reach, FetchReward::Sparse).reward(achieved, desired)
    }

    /// A site's linear (`rotational = false`) or angular velocity, J·qvel with J from `mj_jacSite`.
    fn site_vel(&self, site: usize, rotational: bool) -> [f64; 3] {
        let (jacp, jacr) = self.data.jac_site(!rotational, rotational, site);
        let jac = if rotational { jacr } else { jacp };
        let qvel = self.data.qvel();
        let nv = qvel.len();
        [0, 1, 2].map(|r| (0..nv).map(|c| jac[r * nv + c] * qvel[c]).sum())
    }

    /// The flattened observation in `f64`.
    pub fn observation_f64(&self) -> Vec<f64> {
        let dt = N_SUBSTEPS as f64 * self.data.model().opt().timestep;
        let grip = self.data.site_xpos()[self.grip_site];
        let grip_v = self.site_vel(self.grip_site, false).map(|v| v * dt);
        let q = self.data.qpos();
        let qv = self.data.qvel();
        let finger_q = [q[self.fingers[0].0], q[self.fingers[1].0]];
        let finger_v = [qv[self.fingers[0].1] * dt, qv[self.fingers[1].1] * dt];
        let mut obs = Vec::with_capacity(self.observation_space.dim());
        let achieved = match self.object_site {
            Some(s) => self.data.site_xpos()[s],
            None => grip,
        };
        obs.extend_from_slice(&achieved);
        obs.extend_from_slice(&self.goal);
        obs.extend_from_slice(&grip);
        if let Some(s) = self.object_site {
            let pos = self.data.site_xpos()[s];
            let velp = self.site_vel(s, false);
            let velr = self.site_vel(s, true);
            obs.extend_from_slice(&pos);
            obs.extend((0..3).map(|i| pos[i] - grip[i]));
            obs.extend_from_slice(&finger_q);
            obs.extend_from_slice(&mat2euler(&self.data.site_xmat()[s]));
            obs.extend((0..3).map(|i| velp[i] * dt - grip_v[i]));
            obs.extend(velr.iter().map(|v| v * dt));
        } else {
            obs.extend_from_slice(&finger_q);
        }
        obs.extend_from_slice(&grip_v);
        obs.extend_from_slice(&finger_v);
        obs
    }

    /// `_set_action`, `ctrl_set_action` and `mocap_set_action` for a clipped action.
    fn apply_action(&mut self, a: &[f64; 4]) {
        let g = if self.params.block_gripper { 0.0 } else { a[3] };
        let model = self.data.model().clone();
        let nu = model.ffi().nu as usize;
        for i in 0..nu {
            let value = if model.actuator_biastype()[i] == MjtBias::mjBIAS_NONE {
                g
            } else {
                let joint = model.actuator_trnid()[i][0] as usize;
                self.data.qpos()[model.jnt_qposadr()[joint] as usize] + g
            };
            self.data.ctrl_mut()[i] = value;
        }
        // reset_mocap2body_xpos, then the deltas (the quaternion delta is added, not composed).
        for &(mocap, body) in &self.welds {
            let (xpos, xquat) = (self.data.xpos()[body], self.data.xquat()[body]);
            self.data.mocap_pos_mut()[mocap] = xpos;
            self.data.mocap_quat_mut()[mocap] = xquat;
        }
        let rot = [1.0, 0.0, 1.0, 0.0];
        for m in 0..self.data.mocap_pos().len() {
            let p = self.data.mocap_pos()[m];
            let qt = self.data.mocap_quat()[m];
            self.data.mocap_pos_mut()[m] = [p[0] + 0.05 * a[0], p[1] + 0.05 * a[1], p[2] + 0.05 * a[2]];
            self.data.mocap_quat_mut()[m] = [qt[0] + rot[0], qt[1] + rot[1], qt[2] + rot[2], qt[3] + rot[3]];
        }
    }

    /// Put the env at a given state (qpos, qvel, goal) and run `mj_forward`; parity starts
    /// both sides here.
    pub fn set_state(&mut self, qpos: &[f64], qvel: &[f64], goal: [f64; 3]) -> Result<(), EnvError> {
        let (nq, nv) = (self.data.qpos().len(), self.data.qvel().len());
        if qpos.len() != nq || qvel.len() != nv {
            return Err(EnvError::Other(format!(
                "{}: set_state expects qpos of {nq} and qvel of {nv} numbers, found {} and {}",
                self.spec.id,
                qpos.len(),
                qvel.len()
            )));
        }
        self.data.qpos_mut().copy_from_slice(qpos);
        self.data.qvel_mut().copy_from_slice(qvel);
        self.goal = goal;
        self.data.forward();
        self.needs_reset = false;
        Ok(())
    }

    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.rng.gen::<f64>()
    }
}

/// gymnasium-robotics' `rotations.mat2euler` for a row-major 3×3 matrix.
fn mat2euler(m: &[f64; 9]) -> [f64; 3] {
    let at = |r: usize, c: usize| m[3 * r + c];
    let cy = (at(2, 2) * at(2, 2) + at(1, 2) * at(1, 2)).sqrt();
    let eps4 = f64::EPSILON * 4.0;
    if cy > eps4 {
        [-at(1, 2).atan2(at(2, 2)), -(-at(0, 2)).atan2(cy), -at(0, 1).atan2(at(0, 0))]
    } else {
        [0.0, -(-at(0, 2)).atan2(cy), -(-at(1, 0)).atan2(at(1, 1))]
    }
}

impl Env for FetchEnv {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn observation_space(&self) -> &BoxSpace {
        &self.observation_space
    }

    fn action_space(&self) -> &BoxSpace {
        &self.action_space
    }

    fn reset(&mut self, seed: Option<u64>) -> Result<Vec<f32>, EnvError> {
        if let Some(seed) = seed {
            self.rng = rng_from_seed(seed);
        }
        self.data.reset();
        self.data.set_time(self.initial_time);
        let (q0, v0) = (self.initial_qpos.clone(), self.initial_qvel.clone());
        self.data.qpos_mut().copy_from_slice(&q0);
        self.data.qvel_mut().copy_from_slice(&v0);
        self.data.forward();
        let g0 = self.initial_gripper_xpos;
        if let Some(adr) = self.object_qpos {
            let mut xy = [g0[0], g0[1]];
            while ((xy[0] - g0[0]).powi(2) + (xy[1] - g0[1]).powi(2)).sqrt() < 0.1 {
                xy = [g0[0] + self.uniform(-OBJ_RANGE, OBJ_RANGE), g0[1] + self.uniform(-OBJ_RANGE, OBJ_RANGE)];
            }
            self.data.qpos_mut()[adr..adr + 2].copy_from_slice(&xy);
        }
        self.data.forward();
        let mut goal = [0.0; 3];
        for (k, g) in goal.iter_mut().enumerate() {
            *g = g0[k] + self.uniform(-TARGET_RANGE, TARGET_RANGE);
        }
        if self.params.has_object {
            goal[2] = self.height_offset;
            if self.params.target_in_the_air && self.uniform(0.0, 1.0) < 0.5 {
                goal[2] += self.uniform(0.0, 0.45);
            }
        }
        self.goal = goal;
        self.needs_reset = false;
        Ok(self.observation_f64().iter().map(|v| *v as f32).collect())
    }

    fn step(&mut self, action: &[f32]) -> Result<Step, EnvError> {
        if self.needs_reset {
            return Err(EnvError::NeedsReset { env: self.spec.id.clone() });
        }
        if action.len() != 4 {
            return Err(EnvError::ActionLength { env: self.spec.id.clone(), expected: 4, found: action.len() });
        }
        if let Some((index, value)) = action.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(EnvError::NonFiniteAction { env: self.spec.id.clone(), index, value: *value });
        }
        let a = [0, 1, 2, 3].map(|i| (action[i] as f64).clamp(-1.0, 1.0));
        self.apply_action(&a);
        for _ in 0..N_SUBSTEPS {
            self.data.step();
        }
        if self.params.block_gripper {
            for (adr, _) in self.fingers {
                self.data.qpos_mut()[adr] = 0.0;
            }
            self.data.forward();
        }
        let obs = self.observation_f64();
        let d = distance(&obs[0..3], &obs[3..6]);
        let mut info = Info::default();
        info.success = Some(d < DISTANCE_THRESHOLD);
        info.set("distance", d);
        let (reward, terminated) = match self.reward {
            FetchReward::Sparse => (Self::sparse_reward(&obs[0..3], &obs[3..6]), false),
            FetchReward::Dense => (-d, false),
            FetchReward::SuccessTerminal => {
                let success = d < DISTANCE_THRESHOLD;
                self.needs_reset = success;
                ((success as i32) as f64, success)
            }
        };
        Ok(Step { obs: obs.iter().map(|v| *v as f32).collect(), reward, terminated, truncated: false, info })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn euler_of_identity_and_a_z_turn() {
        assert_eq!(mat2euler(&[1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]), [-0.0, -0.0, -0.0]);
        let (c, s) = (0.3f64.cos(), 0.3f64.sin());
        let e = mat2euler(&[c, -s, 0.0, s, c, 0.0, 0.0, 0.0, 1.0]);
        assert!((e[2] - 0.3).abs() < 1e-12 && e[0].abs() < 1e-12 && e[1].abs() < 1e-12, "{e:?}");
    }

    #[test]
    fn sparse_reward_threshold() {
        assert_eq!(FetchEnv::sparse_reward(&[0.0, 0.0, 0.0], &[0.049, 0.0, 0.0]), 0.0);
        assert_eq!(FetchEnv::sparse_reward(&[0.0, 0.0, 0.0], &[0.051, 0.0, 0.0]), -1.0);
    }
}
