//! `ant-goal-v0`: D4RL's AntMaze ant on an open floor, told to walk to a target (x, y). It is
//! the task o2o trains the *low-level* goal-reaching controller on, the one that
//! `o2o dataset make-benchmark antmaze-*` drives from waypoint to waypoint through a maze (D4RL
//! made its AntMaze files the same way, with a goal-reaching ant policy of its own).
//!
//! - model: D4RL's `ant.xml` with no walls (the [`OPEN_FLOOR`] map), frame skip 5 → dt 0.1 s,
//!   actions in [−1, 1]⁸ mapped to ±30 torques — the AntMaze ant exactly.
//! - reset: AntMaze's (qpos + U(±0.1), qvel + 0.1·N(0, 1)); the target is drawn at a uniform
//!   heading and a distance U(2, 6) m from the origin (a waypoint of a 4 m maze grid lies up to
//!   ~6 m away).
//! - observation 29 = [`controller_obs`]: qpos[2..15] (height, orientation, joints), qvel[..14],
//!   and the target's offset in the torso's heading frame (x forward, y left). The absolute
//!   position is left out, so the controller is the same anywhere in a maze.
//! - reward: progress toward the target, r = (‖g − xy_before‖ − ‖g − xy_after‖) / dt (m/s).
//! - termination: at the target (‖g − xy‖ ≤ 0.5, `info.success`, AntMaze's goal radius), or when
//!   the torso leaves the healthy heights [0.2, 1.0] (fallen or flipped, as gym's Ant-v2 rule).
//! - time limit: 200 steps (20 s), set in the registry.

use super::antmaze::{MazeMap, GOAL_RADIUS};
use super::noise::EnvRng;
use super::{AntMaze, Data, Task};
use crate::env::Info;
use crate::error::EnvError;
use mujoco_rs::prelude::*;
use rand::Rng;
use std::sync::Arc;

/// An open floor: one free cell (the reset cell) and no walls.
pub const OPEN_FLOOR: MazeMap = MazeMap { name: "OPEN_FLOOR", rows: &["r"] };
/// Length of [`controller_obs`].
pub const CONTROLLER_OBS_DIM: usize = 29;
/// The range of the target's distance from the start, metres.
pub const TARGET_DISTANCE: (f64, f64) = (2.0, 6.0);
/// Torso heights outside which the ant counts as fallen.
const HEALTHY_Z: (f64, f64) = (0.2, 1.0);

/// The torso's heading (yaw) from its quaternion (w, x, y, z): atan2(2(wz + xy), 1 − 2(y² + z²)).
pub fn yaw(quat: &[f64]) -> f64 {
    let (w, x, y, z) = (quat[0], quat[1], quat[2], quat[3]);
    (2.0 * (w * z + x * y)).atan2(1.0 - 2.0 * (y * y + z * z))
}

/// The controller's input for ant state (qpos ≥ 15, qvel ≥ 14) and a target (x, y):
/// qpos[2..15] + qvel[..14] + the target offset rotated into the heading frame,
/// (cos ψ·dx + sin ψ·dy, −sin ψ·dx + cos ψ·dy).
pub fn controller_obs(qpos: &[f64], qvel: &[f64], target: [f64; 2]) -> [f64; CONTROLLER_OBS_DIM] {
    let mut out = [0.0; CONTROLLER_OBS_DIM];
    out[..13].copy_from_slice(&qpos[2..15]);
    out[13..27].copy_from_slice(&qvel[..14]);
    let (dx, dy) = (target[0] - qpos[0], target[1] - qpos[1]);
    let (s, c) = yaw(&qpos[3..7]).sin_cos();
    out[27] = c * dx + s * dy;
    out[28] = -s * dx + c * dy;
    out
}

/// The goal-reaching task (see the module docs).
#[derive(Debug, Clone)]
pub struct AntGoal {
    ant: AntMaze,
    target: [f64; 2],
}

impl Default for AntGoal {
    fn default() -> Self {
        Self { ant: AntMaze::new(OPEN_FLOOR, true), target: [TARGET_DISTANCE.1, 0.0] }
    }
}

fn distance(a: [f64; 2], b: [f64; 2]) -> f64 {
    ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2)).sqrt()
}

impl Task for AntGoal {
    fn xml_file(&self) -> &'static str {
        "ant.xml"
    }

    fn model(&self) -> Result<Arc<MjModel>, EnvError> {
        self.ant.model()
    }

    fn model_is_gym_asset(&self) -> bool {
        false
    }

    fn frame_skip(&self) -> usize {
        self.ant.frame_skip()
    }

    fn obs_dim(&self, _model: &MjModel) -> usize {
        CONTROLLER_OBS_DIM
    }

    fn action_map(&self) -> super::ActionMap {
        self.ant.action_map()
    }

    /// A target at heading U(−π, π) and distance U(2, 6) m from the origin.
    fn begin_episode(&mut self, rng: &mut EnvRng) {
        let heading = rng.gen_range(-std::f64::consts::PI..std::f64::consts::PI);
        let d = rng.gen_range(TARGET_DISTANCE.0..TARGET_DISTANCE.1);
        self.target = [d * heading.cos(), d * heading.sin()];
    }

    fn goal(&self) -> Option<[f64; 2]> {
        Some(self.target)
    }

    fn set_goal(&mut self, goal: [f64; 2]) -> bool {
        self.target = goal;
        true
    }

    fn markers(&self, data: &Data) -> Vec<super::Marker> {
        let q = data.qpos();
        vec![
            super::Marker { name: "ant", pos: [q[0], q[1], q[2]], trail: true },
            super::Marker { name: "goal", pos: [self.target[0], self.target[1], 0.0], trail: false },
        ]
    }

    fn reset_noise(&self, rng: &mut EnvRng, qpos: &mut [f64], qvel: &mut [f64]) {
        self.ant.reset_noise(rng, qpos, qvel);
    }

    fn position(&self, data: &Data) -> [f64; 2] {
        self.ant.position(data)
    }

    fn observe(&self, data: &Data, out: &mut [f64]) {
        out.copy_from_slice(&controller_obs(data.qpos(), data.qvel(), self.target));
    }

    /// r = (‖g − xy_before‖ − ‖g − xy_after‖)/dt; terminated at the target or when fallen.
    fn reward(&self, data: &Data, before: [f64; 2], _action: &[f64], dt: f64, info: &mut Info) -> (f64, bool) {
        let q = data.qpos();
        let after = [q[0], q[1]];
        let d = distance(self.target, after);
        let progress = (distance(self.target, before) - d) / dt;
        let reached = d <= GOAL_RADIUS;
        let fallen = !(HEALTHY_Z.0..=HEALTHY_Z.1).contains(&q[2]);
        info.set("goal_distance", d);
        info.set("progress", progress);
        info.success = Some(reached);
        (progress, reached || fallen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offset_is_in_the_heading_frame() {
        // Yaw of +90°: quaternion (cos 45°, 0, 0, sin 45°). A target at +y is straight ahead.
        let h = std::f64::consts::FRAC_1_SQRT_2;
        let mut qpos = vec![0.0; 15];
        qpos[0] = 1.0;
        qpos[1] = 2.0;
        qpos[2] = 0.6;
        qpos[3..7].copy_from_slice(&[h, 0.0, 0.0, h]);
        assert!((yaw(&qpos[3..7]) - std::f64::consts::FRAC_PI_2).abs() < 1e-12);
        let qvel: Vec<f64> = (0..14).map(|i| i as f64).collect();
        let o = controller_obs(&qpos, &qvel, [1.0, 5.0]);
        assert!((o[27] - 3.0).abs() < 1e-12 && o[28].abs() < 1e-12, "{:?}", &o[27..]);
        // A target at −x is then to the ant's left (+y of its frame).
        let o = controller_obs(&qpos, &qvel, [-1.0, 2.0]);
        assert!(o[27].abs() < 1e-12 && (o[28] - 2.0).abs() < 1e-12, "{:?}", &o[27..]);
        assert_eq!(o[0], 0.6);
        assert_eq!(&o[13..27], &qvel[..]);
    }
}
