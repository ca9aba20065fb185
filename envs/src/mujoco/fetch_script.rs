//! Scripted controllers for the Fetch tasks: proportional moves of the gripper through a few
//! named stages (approach, grasp or push, carry). They know which stage they are in, so the
//! demonstrations they record carry their sub-task boundaries (keyframes) for free.
//!
//! Each controller reads the flat Fetch observation ([`super::fetch::GoalLayout`]): achieved
//! goal 0..3, desired goal 3..6, grip position 6..9 and, for object tasks, object position
//! 9..12 and finger positions 15..17. Actions are Δposition / 0.05 m, clipped to [−1, 1].

use super::fetch::FetchTask;

/// A stage of a scripted demonstration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Move the gripper to a pre-contact pose (above or behind the object, or to the goal).
    Approach,
    /// Close on the object (PickAndPlace) or lower behind it (Push).
    Contact,
    /// Move the object (or the gripper, Reach) to the goal.
    Carry,
}

impl Stage {
    /// The stage's name, used as the keyframe annotation.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Approach => "approach",
            Stage::Contact => "contact",
            Stage::Carry => "carry",
        }
    }
}

/// A stateful scripted controller for one episode.
#[derive(Debug, Clone)]
pub struct FetchScript {
    task: FetchTask,
    stage: Stage,
    grasp_steps: usize,
    /// The largest |Δposition| command, in action units (1 = 0.05 m a step).
    speed: f32,
}

fn v3(o: &[f32], at: usize) -> [f64; 3] {
    [o[at] as f64, o[at + 1] as f64, o[at + 2] as f64]
}

fn norm2(x: [f64; 2]) -> f64 {
    (x[0] * x[0] + x[1] * x[1]).sqrt()
}

/// The action that moves the grip toward `target` (gain: a full step covers the error).
fn toward(grip: [f64; 3], target: [f64; 3], gripper: f64) -> [f32; 4] {
    let a = |i: usize| (((target[i] - grip[i]) / 0.05).clamp(-1.0, 1.0)) as f32;
    [a(0), a(1), a(2), gripper as f32]
}

impl FetchScript {
    /// A controller at the start of an episode of `task`.
    pub fn new(task: FetchTask) -> Self {
        Self { task, stage: Stage::Approach, grasp_steps: 0, speed: 1.0 }
    }

    /// A controller whose position commands are clipped to ±`speed` (in (0, 1]; 1 = the
    /// env's full 0.05 m a step): slower demonstrations, with more frames between start and
    /// success (FetchReach's full-speed script succeeds within 1–4 steps).
    pub fn with_speed(task: FetchTask, speed: f32) -> Self {
        Self { speed: speed.clamp(1e-3, 1.0), ..Self::new(task) }
    }

    /// The current stage.
    pub fn stage(&self) -> Stage {
        self.stage
    }

    /// The stages this task goes through, in order.
    pub fn stages(task: FetchTask) -> &'static [Stage] {
        match task {
            FetchTask::Reach => &[Stage::Carry],
            FetchTask::Push | FetchTask::PickAndPlace => &[Stage::Approach, Stage::Contact, Stage::Carry],
        }
    }

    /// The next action for observation `obs`; advances the stage when its goal is met.
    pub fn act(&mut self, obs: &[f32]) -> [f32; 4] {
        let mut a = self.act_at_full_speed(obs);
        if self.speed < 1.0 {
            for x in &mut a[..3] {
                *x = x.clamp(-self.speed, self.speed);
            }
        }
        a
    }

    fn act_at_full_speed(&mut self, obs: &[f32]) -> [f32; 4] {
        let goal = v3(obs, 3);
        let grip = v3(obs, 6);
        match self.task {
            FetchTask::Reach => {
                self.stage = Stage::Carry;
                toward(grip, goal, 0.0)
            }
            FetchTask::Push => self.push(obs, grip, goal),
            FetchTask::PickAndPlace => self.pick(obs, grip, goal),
        }
    }

    fn push(&mut self, obs: &[f32], grip: [f64; 3], goal: [f64; 3]) -> [f32; 4] {
        let obj = v3(obs, 9);
        let d = [goal[0] - obj[0], goal[1] - obj[1]];
        let n = norm2(d).max(1e-6);
        let dir = [d[0] / n, d[1] / n];
        // Stand 6 cm behind the block on the line block → goal.
        let behind = [obj[0] - 0.06 * dir[0], obj[1] - 0.06 * dir[1]];
        let off_line = norm2([grip[0] - behind[0], grip[1] - behind[1]]);
        match self.stage {
            Stage::Approach => {
                // Lift clear of the block before moving sideways over it.
                if grip[2] < obj[2] + 0.06 && off_line > 0.02 {
                    return toward(grip, [grip[0], grip[1], obj[2] + 0.08], 0.0);
                }
                let target = [behind[0], behind[1], obj[2] + 0.08];
                if off_line < 0.01 {
                    self.stage = Stage::Contact;
                }
                toward(grip, target, 0.0)
            }
            Stage::Contact => {
                let target = [behind[0], behind[1], obj[2]];
                if (grip[2] - obj[2]).abs() < 0.01 {
                    self.stage = Stage::Carry;
                }
                toward(grip, target, 0.0)
            }
            Stage::Carry => {
                // Lateral error of the grip from the block → goal line; too large: re-approach.
                let rel = [grip[0] - obj[0], grip[1] - obj[1]];
                let lateral = (rel[0] * dir[1] - rel[1] * dir[0]).abs();
                if lateral > 0.025 && n > 0.04 {
                    self.stage = Stage::Approach;
                    return toward(grip, [grip[0], grip[1], obj[2] + 0.08], 0.0);
                }
                // Close enough (the block slides on a little): hold still rather than push past.
                if n < 0.025 {
                    return [0.0; 4];
                }
                // Push the block's centre onto the goal: aim the grip at the goal minus the
                // block-to-finger spacing, at most 2 cm per step (less near the goal, so the
                // block does not slide past it).
                let aim = [goal[0] - 0.045 * dir[0], goal[1] - 0.045 * dir[1]];
                let step = [aim[0] - grip[0], aim[1] - grip[1]];
                let scale = (0.02f64.min(0.5 * n) / norm2(step).max(1e-9)).min(1.0);
                let target = [grip[0] + scale * step[0], grip[1] + scale * step[1], obj[2]];
                toward(grip, target, 0.0)
            }
        }
    }

    fn pick(&mut self, obs: &[f32], grip: [f64; 3], goal: [f64; 3]) -> [f32; 4] {
        let obj = v3(obs, 9);
        let xy_err = norm2([grip[0] - obj[0], grip[1] - obj[1]]);
        match self.stage {
            Stage::Approach => {
                if xy_err < 0.01 {
                    self.stage = Stage::Contact;
                    self.grasp_steps = 0;
                }
                toward(grip, [obj[0], obj[1], obj[2] + 0.1], 1.0)
            }
            Stage::Contact => {
                // Open and descend onto the block, then close for a few steps.
                if (grip[2] - obj[2]).abs() > 0.008 && self.grasp_steps == 0 {
                    return toward(grip, obj, 1.0);
                }
                self.grasp_steps += 1;
                if self.grasp_steps >= 4 {
                    self.stage = Stage::Carry;
                }
                toward(grip, obj, -1.0)
            }
            Stage::Carry => {
                // The block slipped out: start over.
                if xy_err > 0.03 || (grip[2] - obj[2]).abs() > 0.03 {
                    self.stage = Stage::Approach;
                    return toward(grip, [grip[0], grip[1], grip[2] + 0.05], 1.0);
                }
                let target = [goal[0] + grip[0] - obj[0], goal[1] + grip[1] - obj[1], goal[2] + grip[2] - obj[2]];
                toward(grip, target, -1.0)
            }
        }
    }
}
