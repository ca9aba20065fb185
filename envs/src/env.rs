//! The `Env` contract: Gymnasium's API in Rust.
//!
//! `reset(seed) -> obs` and `step(action) -> Step`. `terminated` (a true end: bootstrapping
//! stops) and `truncated` (a time limit or other cut: bootstrapping continues) are kept apart
//! everywhere. Observations are `f32` for the agent; physics stays `f64` inside the env.
//!
//! The trait is object-safe and `Send`, so a vector env can move envs into worker threads and a
//! robot driver behind a safety layer can implement it exactly like a simulated task.

use crate::error::EnvError;

/// A box space: one closed interval per dimension. Infinite bounds are allowed.
#[derive(Debug, Clone, PartialEq)]
pub struct BoxSpace {
    /// Lower bound per dimension.
    pub low: Vec<f32>,
    /// Upper bound per dimension.
    pub high: Vec<f32>,
}

impl BoxSpace {
    /// A box from per-dimension bounds; `low` and `high` must have the same length.
    pub fn new(low: Vec<f32>, high: Vec<f32>) -> Self {
        assert_eq!(low.len(), high.len(), "BoxSpace bounds of different lengths");
        Self { low, high }
    }

    /// An unbounded box of `dim` dimensions.
    pub fn unbounded(dim: usize) -> Self {
        Self::new(vec![f32::NEG_INFINITY; dim], vec![f32::INFINITY; dim])
    }

    /// Number of dimensions.
    pub fn dim(&self) -> usize {
        self.low.len()
    }

    /// Whether every bound is finite.
    pub fn is_bounded(&self) -> bool {
        self.low.iter().chain(&self.high).all(|v| v.is_finite())
    }

    /// Whether `x` has the right length and lies inside the bounds.
    pub fn contains(&self, x: &[f32]) -> bool {
        x.len() == self.dim()
            && x.iter().zip(self.low.iter().zip(&self.high)).all(|(v, (lo, hi))| *v >= *lo && *v <= *hi)
    }

    /// Clip `x` into the box in place.
    pub fn clip(&self, x: &mut [f32]) {
        for (v, (lo, hi)) in x.iter_mut().zip(self.low.iter().zip(&self.high)) {
            *v = v.clamp(*lo, *hi);
        }
    }
}

/// Typed step information: named floats plus an optional success flag.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Info {
    /// Named scalar diagnostics, e.g. `("x_velocity", 1.3)`, in a stable order.
    pub values: Vec<(&'static str, f64)>,
    /// Whether the task was achieved, for tasks that define success.
    pub success: Option<bool>,
    /// On multi-task envs, the `<level>/<task>` this episode is for (ImagineBench:
    /// `hard/jump-in-place`), so evaluation can report success per task.
    pub task: Option<&'static str>,
}

impl Info {
    /// The value named `key`, if present.
    pub fn get(&self, key: &str) -> Option<f64> {
        self.values.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }

    /// Set `key` to `value`, replacing an earlier value of the same name.
    pub fn set(&mut self, key: &'static str, value: f64) {
        match self.values.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.values.push((key, value)),
        }
    }
}

/// The result of one `Env::step`.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Observation after the step.
    pub obs: Vec<f32>,
    /// Reward of the step.
    pub reward: f64,
    /// A true end of the episode (e.g. the robot fell): do not bootstrap from `obs`.
    pub terminated: bool,
    /// The episode was cut (e.g. time limit): `obs` is a real state to bootstrap from.
    pub truncated: bool,
    /// Named diagnostics of the step.
    pub info: Info,
}

impl Step {
    /// Whether the episode is over for either reason (reset needed). Use only for control flow,
    /// never for bootstrapping.
    pub fn done(&self) -> bool {
        self.terminated || self.truncated
    }
}

/// Static description of a task.
#[derive(Debug, Clone, PartialEq)]
pub struct EnvSpec {
    /// The id the env was made with, e.g. `Hopper-v5` or `hopper-v2`.
    pub id: String,
    /// Episode length after which the time-limit wrapper truncates, if any.
    pub max_episode_steps: Option<usize>,
    /// The D4RL normalization family (`hopper`, `halfcheetah`, `walker2d`, `ant`, ...) whose
    /// REF_MIN/REF_MAX turn a return into a normalized score, when the task has one.
    pub normalization_family: Option<String>,
    /// Goal-conditioned tasks (the Fetch tasks): where the achieved and desired goals sit in
    /// the flat observation and how the reward is computed from them, for hindsight
    /// relabelling. `None` for every other task.
    pub goal: Option<GoalSpec>,
}

/// Where the parts of a flattened goal-conditioned observation sit, as `[start, end)` ranges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GoalLayout {
    /// `achieved_goal`.
    pub achieved: [usize; 2],
    /// `desired_goal`.
    pub desired: [usize; 2],
    /// `observation` (everything else).
    pub observation: [usize; 2],
}

/// A goal-conditioned task's goal layout and reward function (gymnasium-robotics'
/// `compute_reward`): d = ‖achieved − desired‖, reward −(d > threshold) or, dense, −d;
/// success d < threshold. With `success_terminates` (o2o's `Fetch*Terminal-v4` ids) the reward
/// is Dopamine's gold reward instead, 1 at success and 0 otherwise, and success ends the
/// episode (a true termination).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GoalSpec {
    /// Where the goals are in the flat observation.
    pub layout: GoalLayout,
    /// The success distance (Fetch: 0.05 m).
    pub distance_threshold: f64,
    /// Dense reward −d instead of the sparse −(d > threshold).
    pub dense: bool,
    /// Success terminates the episode and pays 1 (every other step 0); `dense` is then unused.
    pub success_terminates: bool,
}

impl GoalSpec {
    /// The reward of an achieved/desired goal pair.
    pub fn reward(&self, achieved: &[f64], desired: &[f64]) -> f64 {
        let d = goal_distance(achieved, desired);
        if self.success_terminates {
            (d < self.distance_threshold) as i32 as f64
        } else if self.dense {
            -d
        } else {
            -((d > self.distance_threshold) as i32 as f64)
        }
    }

    /// Whether reaching `desired` ends the episode here (a true termination).
    pub fn terminates(&self, achieved: &[f64], desired: &[f64]) -> bool {
        self.success_terminates && self.success(achieved, desired)
    }

    /// Whether `achieved` is within the threshold of `desired`.
    pub fn success(&self, achieved: &[f64], desired: &[f64]) -> bool {
        goal_distance(achieved, desired) < self.distance_threshold
    }
}

/// ‖a − b‖.
pub fn goal_distance(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum::<f64>().sqrt()
}

/// A Gymnasium-style environment.
pub trait Env: Send {
    /// The task's static description.
    fn spec(&self) -> &EnvSpec;
    /// Bounds of the observation vector.
    fn observation_space(&self) -> &BoxSpace;
    /// Bounds of the action vector.
    fn action_space(&self) -> &BoxSpace;
    /// Start a new episode. `Some(seed)` reseeds the env's random source (as Gymnasium's
    /// `reset(seed=...)`); `None` continues the current random stream.
    fn reset(&mut self, seed: Option<u64>) -> Result<Vec<f32>, EnvError>;
    /// Apply one action. Errors on a wrong action length or a non-finite action.
    fn step(&mut self, action: &[f32]) -> Result<Step, EnvError>;
    /// The action the last `step` actually executed, in the env's units, when it can differ
    /// from the one given: a robot whose operator took over, or whose safety layer clipped or
    /// rejected the command. Learners store this one (HIL-SERL). `None` (the default): the
    /// action given was executed.
    fn executed_action(&self) -> Option<&[f32]> {
        None
    }
}

impl<E: Env + ?Sized> Env for Box<E> {
    fn spec(&self) -> &EnvSpec {
        (**self).spec()
    }
    fn observation_space(&self) -> &BoxSpace {
        (**self).observation_space()
    }
    fn action_space(&self) -> &BoxSpace {
        (**self).action_space()
    }
    fn reset(&mut self, seed: Option<u64>) -> Result<Vec<f32>, EnvError> {
        (**self).reset(seed)
    }
    fn step(&mut self, action: &[f32]) -> Result<Step, EnvError> {
        (**self).step(action)
    }
    fn executed_action(&self) -> Option<&[f32]> {
        (**self).executed_action()
    }
}
