//! The human in the loop: an [`Operator`] can take over from the policy, label success or
//! failure, press the e-stop, clear a safety latch and confirm episode resets.
//!
//! HIL-SERL's practice (ecosystem.md §1.3): when a person intervenes, the transition stores the
//! action that was executed (theirs, not the policy's) with an `intervention` flag, and the
//! intervened transitions also go to a buffer of their own that is served to the learner as
//! demonstrations. [`crate::env::RobotEnv`] does both.

use crate::guard::Latch;

/// What the operator decides at an episode reset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResetDecision {
    /// Go on (the scene is reset).
    Go,
    /// Clear the safety latch (the operator has checked the arm), then go on.
    ClearLatch,
    /// Stop the run.
    Abort(String),
}

/// A person (or a script standing in for one) next to the robot.
pub trait Operator: Send {
    /// The action to execute instead of the policy's `proposed` one, when the operator takes
    /// over at this step (env units, the env's action space).
    fn intervene(&mut self, step: u64, obs: &[f32], proposed: &[f32]) -> Option<Vec<f32>>;
    /// A success (`true`) or failure (`false`) label for this step, when the operator gives one.
    fn label(&mut self, _step: u64, _obs: &[f32]) -> Option<bool> {
        None
    }
    /// Whether the e-stop is pressed now.
    fn estop(&mut self, _step: u64) -> bool {
        false
    }
    /// Asked before every episode: `latch` is the safety latch in effect, if any. Only
    /// [`ResetDecision::ClearLatch`] clears it.
    fn confirm_reset(&mut self, episode: u64, latch: Option<&Latch>) -> ResetDecision;
}

/// No one at the robot: never intervenes, never clears a latch (a latched run stops).
#[derive(Debug, Clone, Default)]
pub struct Unattended;

impl Operator for Unattended {
    fn intervene(&mut self, _: u64, _: &[f32], _: &[f32]) -> Option<Vec<f32>> {
        None
    }
    fn confirm_reset(&mut self, _: u64, latch: Option<&Latch>) -> ResetDecision {
        match latch {
            None => ResetDecision::Go,
            Some(l) => ResetDecision::Abort(format!("safety latch set ({l}) and no operator to clear it")),
        }
    }
}

/// A scripted operator for tests and unattended simulation: takes over on the listed global
/// steps with a fixed action, labels success on the listed steps, presses the e-stop on the
/// listed steps, and clears latches at resets when `clears_latches` (as a person who checked the
/// arm would), at most `max_clears` times.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ScriptedOperator {
    /// `[first, last]` global step ranges (inclusive) in which the operator takes over.
    pub takeover: Vec<[u64; 2]>,
    /// The action executed during a takeover (env units); empty: the policy's action, negated.
    pub action: Vec<f32>,
    /// Global steps labelled successful.
    pub success_at: Vec<u64>,
    /// Global steps at which the e-stop is pressed.
    pub estop_at: Vec<u64>,
    /// Clear latches at resets.
    pub clears_latches: bool,
    /// At most this many clears (then the run stops, as it would without a person).
    pub max_clears: u32,
    /// Clears made so far.
    #[serde(skip)]
    pub clears: u32,
}

impl Operator for ScriptedOperator {
    fn intervene(&mut self, step: u64, _obs: &[f32], proposed: &[f32]) -> Option<Vec<f32>> {
        if !self.takeover.iter().any(|[a, b]| (*a..=*b).contains(&step)) {
            return None;
        }
        if self.action.len() == proposed.len() {
            Some(self.action.clone())
        } else {
            Some(proposed.iter().map(|v| -v).collect())
        }
    }

    fn label(&mut self, step: u64, _obs: &[f32]) -> Option<bool> {
        self.success_at.contains(&step).then_some(true)
    }

    fn estop(&mut self, step: u64) -> bool {
        self.estop_at.contains(&step)
    }

    fn confirm_reset(&mut self, _episode: u64, latch: Option<&Latch>) -> ResetDecision {
        match latch {
            None => ResetDecision::Go,
            Some(_) if self.clears_latches && self.clears < self.max_clears => {
                self.clears += 1;
                ResetDecision::ClearLatch
            }
            Some(l) => ResetDecision::Abort(format!(
                "safety latch set ({l}); the scripted operator clears at most {} latches",
                self.max_clears
            )),
        }
    }
}

/// A scripted teleoperator: takes over at every step and moves the arm toward the goal with
/// a proportional controller, a = clip(gain · (g − p), ±max_action), where the goal g is the
/// observation's tail and p the end effector (3-D goals, end-effector mode) or the first
/// joints (joint goals, joint mode). It stands in for a person with a spacemouse when
/// recording demonstrations on the sim (`o2o robot record`), and assumes drivers that add no
/// extra observation (the sim adds none).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Reacher {
    /// Proportional gain.
    pub gain: f32,
    /// Largest action per dimension (env units).
    pub max_action: f32,
    /// Goal dimensions (3 for an end-effector goal).
    pub goal_dim: usize,
}

impl Default for Reacher {
    fn default() -> Self {
        Self { gain: 2.0, max_action: 0.03, goal_dim: 3 }
    }
}

impl Operator for Reacher {
    fn intervene(&mut self, _step: u64, obs: &[f32], proposed: &[f32]) -> Option<Vec<f32>> {
        let g = self.goal_dim;
        if obs.len() < 2 * g {
            return None;
        }
        let goal = &obs[obs.len() - g..];
        let pos = if proposed.len() == g && g == 3 { &obs[obs.len() - 2 * g..obs.len() - g] } else { &obs[..g] };
        let mut a = vec![0.0; proposed.len()];
        for i in 0..g.min(a.len()) {
            a[i] = (self.gain * (goal[i] - pos[i])).clamp(-self.max_action, self.max_action);
        }
        Some(a)
    }

    fn confirm_reset(&mut self, _: u64, latch: Option<&Latch>) -> ResetDecision {
        match latch {
            None => ResetDecision::Go,
            Some(l) => {
                ResetDecision::Abort(format!("safety latch set ({l}) while recording; check the arm and start again"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripted_operator_follows_its_script() {
        let mut op = ScriptedOperator {
            takeover: vec![[3, 4]],
            action: vec![0.5, -0.5],
            success_at: vec![9],
            estop_at: vec![2],
            clears_latches: true,
            max_clears: 1,
            ..Default::default()
        };
        assert_eq!(op.intervene(2, &[], &[0.1, 0.1]), None);
        assert_eq!(op.intervene(3, &[], &[0.1, 0.1]), Some(vec![0.5, -0.5]));
        assert_eq!(op.intervene(4, &[], &[0.1, 0.1]), Some(vec![0.5, -0.5]));
        assert_eq!(op.intervene(5, &[], &[0.1, 0.1]), None);
        assert_eq!(op.label(9, &[]), Some(true));
        assert_eq!(op.label(8, &[]), None);
        assert!(op.estop(2) && !op.estop(3));
        let l = Latch::EStop { reason: "t".into() };
        assert_eq!(op.confirm_reset(0, None), ResetDecision::Go);
        assert_eq!(op.confirm_reset(0, Some(&l)), ResetDecision::ClearLatch);
        assert!(matches!(op.confirm_reset(1, Some(&l)), ResetDecision::Abort(_)));
        assert!(matches!(Unattended.confirm_reset(0, Some(&l)), ResetDecision::Abort(_)));
    }
}
