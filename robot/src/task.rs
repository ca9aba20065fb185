//! Rewards on a robot: [`ReachTask`], a goal position the end effector (or, for an arm that
//! reports none, the first joints) must reach.
//!
//! r = −‖p − g‖₂, success when ‖p − g‖₂ < `success_radius`; the goal `g` is drawn uniformly
//! from `[goal_low, goal_high]` at every reset from the env's seeded random stream, and is part
//! of the observation. An operator's label, when given, overrides the success this computes.

use crate::driver::RobotState;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// The `[task]` table of a robot config.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReachTask {
    /// Lowest goal corner (3 numbers for an end effector; else one per reached joint).
    pub goal_low: Vec<f64>,
    /// Highest goal corner.
    pub goal_high: Vec<f64>,
    /// Success radius (m, or rad for joints).
    #[serde(default = "default_radius")]
    pub success_radius: f64,
    /// End the episode (terminated) on success.
    #[serde(default = "default_true")]
    pub terminate_on_success: bool,
}

fn default_radius() -> f64 {
    0.05
}

fn default_true() -> bool {
    true
}

impl ReachTask {
    /// The reached position of `state`: the end effector's, else the first joints'.
    pub fn position(&self, state: &RobotState) -> Vec<f64> {
        match state.ee_position {
            Some(p) if self.goal_low.len() == 3 => p.to_vec(),
            _ => state.joint_positions.iter().take(self.goal_low.len()).copied().collect(),
        }
    }

    /// A new goal.
    pub fn sample_goal(&self, rng: &mut ChaCha8Rng) -> Vec<f64> {
        self.goal_low
            .iter()
            .zip(&self.goal_high)
            .map(|(lo, hi)| if hi > lo { rng.gen_range(*lo..=*hi) } else { *lo })
            .collect()
    }

    /// (r, success) of `state` for `goal`: r = −‖p − g‖₂.
    pub fn reward(&self, state: &RobotState, goal: &[f64]) -> (f64, bool) {
        let p = self.position(state);
        let d = p.iter().zip(goal).map(|(a, b)| (a - b) * (a - b)).sum::<f64>().sqrt();
        (-d, d < self.success_radius)
    }

    /// The task fits an arm of `joints` joints (with or without an end effector).
    pub fn check(&self, joints: usize, has_ee: bool) -> Result<(), String> {
        let n = self.goal_low.len();
        if n != self.goal_high.len() {
            return Err(format!(
                "task.goal_low has {n} numbers and task.goal_high {}; expected the same length",
                self.goal_high.len()
            ));
        }
        if !((n == 3 && has_ee) || (n >= 1 && n <= joints)) {
            return Err(format!(
                "task.goal_low: expected 3 numbers (an end-effector goal) or 1..={joints} (joint goals), found {n}"
            ));
        }
        if self.goal_low.iter().zip(&self.goal_high).any(|(a, b)| !(a.is_finite() && b.is_finite() && a <= b)) {
            return Err("task.goal_low / goal_high: expected finite numbers with low <= high".into());
        }
        if !(self.success_radius > 0.0) {
            return Err(format!("task.success_radius: expected a positive number, found {}", self.success_radius));
        }
        Ok(())
    }
}
