//! A progress model as the potential of an online run, and the reward a transition gets.
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
//! - r_gold = the env's reward (`gold = "env"`), or 1 when Φ(s') ≥ 1 − δ and 0 otherwise
//!   (`gold = "success"`, Dopamine-RL's automatic success detection).

use crate::progress::ProgressModel;
use crate::reconstruct::{Estimate, Fusion, StepHops, Tracker};
use crate::shaping::{success_from_progress, PotentialShaping};
use crate::RewardModelError;
use serde::{Deserialize, Serialize};

/// How the potential enters the reward.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ShapingMode {
    /// r_gold + γΦ(s') − Φ(s), Φ(terminal) = 0.
    Pbrs,
    /// r_gold + Φ(s') − Φ(s) (the semantic trap; comparison only).
    Naive,
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
            let [a, b] = v.obs_slice.unwrap_or([0, 0]);
            let slice = obs.get(a..b).ok_or_else(|| RewardModelError::Demo {
                demo: "observation".into(),
                message: format!("view `{}` reads [{a}, {b}) but the observation has {} numbers", v.name, obs.len()),
            })?;
            out.extend_from_slice(slice);
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
    potential: ProgressPotential,
    mode: ShapingMode,
    gold: GoldReward,
    shaping: PotentialShaping,
    delta: f64,
    phi: Option<f64>,
}

impl Shaper {
    /// A shaper with discount `gamma` (the learner's).
    pub fn new(
        potential: ProgressPotential,
        mode: ShapingMode,
        gold: GoldReward,
        gamma: f64,
    ) -> Result<Self, RewardModelError> {
        let shaping = PotentialShaping::new(gamma).map_err(|e| RewardModelError::Config {
            key: "shaping.gamma".into(),
            expected: "in (0, 1]".into(),
            found: e.to_string(),
        })?;
        let delta = potential.model().config().success_delta;
        Ok(Self { potential, mode, gold, shaping, delta, phi: None })
    }

    /// The discount γ of the shaping term (the learner's).
    pub fn gamma(&self) -> f64 {
        self.shaping.gamma()
    }

    /// The potential.
    pub fn potential(&self) -> &ProgressPotential {
        &self.potential
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
            ShapingMode::Naive => gold + phi_next - phi,
        };
        self.phi = if terminated || truncated { None } else { Some(phi_next) };
        Ok(Shaped { reward, gold, phi, phi_next })
    }
}
