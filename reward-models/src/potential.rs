//! A progress model (or a task's goal distance) as the potential of an online run, and the
//! reward a transition gets.
//!
//! [`ProgressPotential`] follows one episode: its first observation is the forward anchor
//! s_init, the model's goal anchor the backward one, and a [`Tracker`] carries the
//! path-dependent estimates (incremental, consistency-weighted). Only the backward estimate is
//! a function of the state alone ([`Fusion::is_markov`]); with it, the shaping term of a
//! transition depends on (s, s') and nothing else, so online rows and dataset rows shaped by
//! the same [`Shaper`] carry the same F for the same (s, s'). [`Shaper`] turns each
//! transition (s, a, r_env, s', terminated) into the stored reward:
//!
//! - `pbrs`:  r' = r_gold + γ·Φ(s') − Φ(s), with Φ(s') := 0 when `terminated` (kept at a
//!   time-limit truncation), γ the learner's discount — the optimal policy of r_gold is kept;
//! - `naive`: r' = r_gold + Φ(s') − Φ(s), progress gained, for comparison only (it rewards
//!   lingering in high-progress states);
//! - `progress`: r' = r_gold + λ·Φ(s'), Φ(s') := 0 after a true termination — the per-step
//!   progress reward, whose return is the objective Σ γ^{t−1} Φ(s_t) the paper shows the naive
//!   reward amounts to ([`crate::shaping::progress_reward`]); where success terminates it pays
//!   for hovering short of success (the semantic trap), for comparison only;
//! - r_gold = the env's reward (`gold = "env"`), or 1 when Φ(s') ≥ 1 − δ and 0 otherwise
//!   (`gold = "success"`, Dopamine-RL's automatic success detection).
//!
//! Φ is a [`Potential`]: a learned [`ProgressPotential`], or [`GoalDistance`], Φ(s) = 1 −
//! ‖ag(s) − g(s)‖ / d₀ from a goal-conditioned task's own goal layout (the true distance to go,
//! a ceiling for what a learned Φ can give).

use crate::progress::ProgressModel;
use crate::reconstruct::{Estimate, Fusion, StepHops, Tracker};
use crate::shaping::{naive_reward, progress_reward, success_from_progress, PotentialShaping};
use crate::RewardModelError;
use serde::{Deserialize, Serialize};

/// How the potential enters the reward.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ShapingMode {
    /// r_gold + γΦ(s') − Φ(s), Φ(terminal) = 0.
    Pbrs,
    /// r_gold + Φ(s') − Φ(s) (progress gained; comparison only).
    Naive,
    /// r_gold + λ·Φ(s'), Φ(terminal) = 0 (the per-step progress reward: the semantic trap where
    /// success terminates; comparison only).
    Progress,
}

/// Where r_gold comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GoldReward {
    /// The env's own reward.
    Env,
    /// 1 when Φ(s') ≥ 1 − δ, else 0.
    Success,
}

/// Φ along one episode from a progress model over flat observations.
#[derive(Debug)]
pub struct ProgressPotential {
    model: ProgressModel,
    fusion: Fusion,
    tracker: Tracker,
    start: Vec<f32>,
    prev: Vec<f32>,
    goal: Vec<f32>,
}

impl ProgressPotential {
    /// Φ from `model` with estimate `fusion` (default: the model's own). Every view needs an
    /// `obs_slice` so states can be read from observations.
    pub fn new(model: ProgressModel, fusion: Option<Fusion>) -> Result<Self, RewardModelError> {
        if let Some(v) = model.config().views.iter().find(|v| v.obs_slice.is_none()) {
            return Err(RewardModelError::Config {
                key: format!("views.{}.obs_slice", v.name),
                expected: "a [start, end) slice of the observation, to read the view online".into(),
                found: "none".into(),
            });
        }
        let c = model.config();
        let tracker = Tracker::new(c.consistency_alpha, c.consistency_eps);
        let fusion = fusion.unwrap_or(c.fusion);
        let goal = model.goal();
        Ok(Self { model, fusion, tracker, start: Vec::new(), prev: Vec::new(), goal })
    }

    /// The model.
    pub fn model(&self) -> &ProgressModel {
        &self.model
    }

    /// Which estimate is Φ.
    pub fn fusion(&self) -> Fusion {
        self.fusion
    }

    /// The state (all views, concatenated) of a flat observation.
    pub fn features(&self, obs: &[f32]) -> Result<Vec<f32>, RewardModelError> {
        let mut out = Vec::with_capacity(self.model.input_dim());
        for v in &self.model.config().views {
            v.read_into(obs, &mut out)
                .map_err(|message| RewardModelError::Demo { demo: "observation".into(), message })?;
        }
        Ok(out)
    }

    fn estimate(&mut self, s: &[f32], first: bool) -> Result<Estimate, RewardModelError> {
        let incremental = if first { 0.0 } else { self.model.hop(&self.prev, s)? };
        let from_start = self.model.hop(&self.start, s)?;
        let from_goal = self.model.hop(&self.goal, s)?;
        Ok(self.tracker.step(StepHops { incremental, from_start, from_goal }))
    }

    /// Start an episode at `obs`; returns Φ(s_0).
    pub fn reset(&mut self, obs: &[f32]) -> Result<f64, RewardModelError> {
        let s = self.features(obs)?;
        self.tracker.reset();
        self.start = s.clone();
        let e = self.estimate(&s, true)?;
        self.prev = s;
        Ok(e.get(self.fusion))
    }

    /// Move to the next observation; returns Φ(s_t).
    pub fn step(&mut self, obs: &[f32]) -> Result<f64, RewardModelError> {
        let s = self.features(obs)?;
        let e = self.estimate(&s, false)?;
        self.prev = s;
        Ok(e.get(self.fusion))
    }
}

/// Φ(s) = 1 − ‖ag(s) − g(s)‖ / d₀: the true distance to go of a goal-conditioned task, read from
/// the achieved and desired goal slots of the flat observation. A function of the state alone
/// (Markov), 1 at the goal, falling by 1 per d₀ metres (unclamped).
#[derive(Debug, Clone, PartialEq)]
pub struct GoalDistance {
    achieved: [usize; 2],
    desired: [usize; 2],
    scale: f64,
}

impl GoalDistance {
    /// Φ from the goal slots `achieved` and `desired` (`[start, end)` of the observation, equal
    /// widths) with distance scale d₀ = `scale` (> 0).
    pub fn new(achieved: [usize; 2], desired: [usize; 2], scale: f64) -> Result<Self, RewardModelError> {
        if !(scale.is_finite() && scale > 0.0) {
            return Err(RewardModelError::Config {
                key: "shaping.distance_scale".into(),
                expected: "a distance d₀ > 0 (Φ = 1 − d/d₀)".into(),
                found: scale.to_string(),
            });
        }
        let ([a0, a1], [d0, d1]) = (achieved, desired);
        if a0 >= a1 || d0 >= d1 || a1 - a0 != d1 - d0 {
            return Err(RewardModelError::Config {
                key: "goal layout".into(),
                expected: "non-empty achieved and desired goal ranges of equal width".into(),
                found: format!("achieved {a0}..{a1}, desired {d0}..{d1}"),
            });
        }
        Ok(Self { achieved, desired, scale })
    }

    /// Φ of one flat observation.
    pub fn phi(&self, obs: &[f32]) -> Result<f64, RewardModelError> {
        let end = self.achieved[1].max(self.desired[1]);
        if obs.len() < end {
            return Err(RewardModelError::Demo {
                demo: "observation".into(),
                message: format!(
                    "the goal distance reads up to index {end} but the observation has {} numbers",
                    obs.len()
                ),
            });
        }
        let (a, g) = (&obs[self.achieved[0]..self.achieved[1]], &obs[self.desired[0]..self.desired[1]]);
        let d = a.iter().zip(g).map(|(x, y)| (*x as f64 - *y as f64).powi(2)).sum::<f64>().sqrt();
        Ok(1.0 - d / self.scale)
    }
}

/// The potential Φ of a run.
#[derive(Debug)]
pub enum Potential {
    /// A learned progress model, followed along the episode.
    Model(ProgressPotential),
    /// The task's true goal distance.
    GoalDistance(GoalDistance),
}

impl From<ProgressPotential> for Potential {
    fn from(p: ProgressPotential) -> Self {
        Potential::Model(p)
    }
}

impl From<GoalDistance> for Potential {
    fn from(p: GoalDistance) -> Self {
        Potential::GoalDistance(p)
    }
}

/// The success threshold δ of `gold = "success"` when Φ is not a model (which carries its own).
pub const DEFAULT_SUCCESS_DELTA: f64 = 0.05;

impl Potential {
    /// Start an episode at `obs`; returns Φ(s_0).
    pub fn reset(&mut self, obs: &[f32]) -> Result<f64, RewardModelError> {
        match self {
            Potential::Model(p) => p.reset(obs),
            Potential::GoalDistance(g) => g.phi(obs),
        }
    }

    /// Move to the next observation; returns Φ(s_t).
    pub fn step(&mut self, obs: &[f32]) -> Result<f64, RewardModelError> {
        match self {
            Potential::Model(p) => p.step(obs),
            Potential::GoalDistance(g) => g.phi(obs),
        }
    }

    /// The progress model, when Φ is one.
    pub fn progress(&self) -> Option<&ProgressPotential> {
        match self {
            Potential::Model(p) => Some(p),
            Potential::GoalDistance(_) => None,
        }
    }

    /// Whether Φ is a function of the state alone (what PBRS's guarantee needs).
    pub fn is_markov(&self) -> bool {
        self.progress().is_none_or(|p| p.fusion().is_markov())
    }

    fn success_delta(&self) -> f64 {
        self.progress().map_or(DEFAULT_SUCCESS_DELTA, |p| p.model().config().success_delta)
    }
}

/// One shaped transition.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shaped {
    /// The reward to store.
    pub reward: f64,
    /// r_gold.
    pub gold: f64,
    /// Φ(s).
    pub phi: f64,
    /// Φ(s') as estimated (before the terminal convention).
    pub phi_next: f64,
}

/// Turns env transitions into shaped rewards, episode by episode.
#[derive(Debug)]
pub struct Shaper {
    potential: Potential,
    mode: ShapingMode,
    gold: GoldReward,
    shaping: PotentialShaping,
    delta: f64,
    /// λ of `mode = "progress"`.
    scale: f64,
    phi: Option<f64>,
}

impl Shaper {
    /// A shaper with discount `gamma` (the learner's); `mode = "progress"` weighs Φ by λ = 1
    /// unless [`Shaper::with_progress_scale`] says otherwise.
    pub fn new(
        potential: impl Into<Potential>,
        mode: ShapingMode,
        gold: GoldReward,
        gamma: f64,
    ) -> Result<Self, RewardModelError> {
        let potential = potential.into();
        let shaping = PotentialShaping::new(gamma).map_err(|e| RewardModelError::Config {
            key: "shaping.gamma".into(),
            expected: "in (0, 1]".into(),
            found: e.to_string(),
        })?;
        let delta = potential.success_delta();
        Ok(Self { potential, mode, gold, shaping, delta, scale: 1.0, phi: None })
    }

    /// λ of `mode = "progress"` (r' = r_gold + λΦ(s')); a finite number.
    pub fn with_progress_scale(self, scale: f64) -> Result<Self, RewardModelError> {
        if !scale.is_finite() {
            return Err(RewardModelError::Config {
                key: "shaping.scale".into(),
                expected: "a finite number".into(),
                found: scale.to_string(),
            });
        }
        Ok(Self { scale, ..self })
    }

    /// The discount γ of the shaping term (the learner's).
    pub fn gamma(&self) -> f64 {
        self.shaping.gamma()
    }

    /// The potential.
    pub fn potential(&self) -> &Potential {
        &self.potential
    }

    /// The potential, to follow episodes with outside the shaper (evaluation's Φ).
    pub fn into_potential(self) -> Potential {
        self.potential
    }

    /// Forget the episode in progress: the next transition starts a new one at its `obs`.
    pub fn restart(&mut self) {
        self.phi = None;
    }

    /// The reward for the transition obs → next_obs with env reward `reward`. A transition
    /// after an episode end (or the first one) starts a new episode at `obs`.
    pub fn shape(
        &mut self,
        obs: &[f32],
        reward: f64,
        next_obs: &[f32],
        terminated: bool,
        truncated: bool,
    ) -> Result<Shaped, RewardModelError> {
        let phi = match self.phi {
            Some(p) => p,
            None => self.potential.reset(obs)?,
        };
        let phi_next = self.potential.step(next_obs)?;
        let gold = match self.gold {
            GoldReward::Env => reward,
            GoldReward::Success => success_from_progress(phi_next, self.delta).map(|s| s as u8 as f64).unwrap_or(0.0),
        };
        let reward = match self.mode {
            // r' = r_gold + γΦ(s') − Φ(s), Φ(s') := 0 after a true termination.
            ShapingMode::Pbrs => self.shaping.shape(gold, phi, phi_next, terminated),
            // r' = r_gold + Φ(s') − Φ(s).
            ShapingMode::Naive => naive_reward(gold, phi, phi_next),
            // r' = r_gold + λΦ(s'), Φ(s') := 0 after a true termination.
            ShapingMode::Progress => progress_reward(gold, phi_next, terminated, self.scale),
        };
        self.phi = if terminated || truncated { None } else { Some(phi_next) };
        Ok(Shaped { reward, gold, phi, phi_next })
    }
}
