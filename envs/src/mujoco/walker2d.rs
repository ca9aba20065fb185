//! Walker2d (Gymnasium 1.4.0 `walker2d_v5.py`; gym `walker2d.py` v2 for D4RL).
//!
//! - model `walker2d_v5.xml` for v5 (both feet friction 1.9); `walker2d.xml` for v2 (right foot
//!   0.9, left 1.9, the model the D4RL data was logged in). Timestep 0.002, RK4, frame skip 4.
//! - 6 actions in [−1, 1]; observation: qpos[1..] (8) + clip(qvel, −10, 10) (9) = 17.
//! - healthy iff z = qpos[1] ∈ (0.8, 2.0) and angle = qpos[2] ∈ (−1, 1), strict.
//! - reward: Δx/dt + healthy_reward − 1e−3·‖a‖²; healthy_reward as in Hopper (v5: only while
//!   healthy; v2: every step).
//! - reset: qpos, qvel += U(−5e−3, 5e−3).

use super::hopper::{observe_planar, planar_reward};
use super::noise::{add_uniform, EnvRng};
use super::{state_dim, Data, Task, Version};
use crate::env::Info;
use mujoco_rs::prelude::*;

const CTRL_COST_WEIGHT: f64 = 1e-3;
const RESET_NOISE: f64 = 5e-3;

/// The Walker2d task.
#[derive(Debug, Clone)]
pub struct Walker2d {
    /// v5 or D4RL's v2.
    pub version: Version,
}

fn is_healthy(data: &Data) -> bool {
    let (z, angle) = (data.qpos()[1], data.qpos()[2]);
    0.8 < z && z < 2.0 && -1.0 < angle && angle < 1.0
}

impl Task for Walker2d {
    fn xml_file(&self) -> &'static str {
        match self.version {
            Version::V5 => "walker2d_v5.xml",
            Version::D4rlV2 => "walker2d.xml",
        }
    }

    fn frame_skip(&self) -> usize {
        4
    }

    fn obs_dim(&self, model: &MjModel) -> usize {
        state_dim(model, 1)
    }

    fn clips_action(&self) -> bool {
        self.version.clips_action()
    }

    fn reset_noise(&self, rng: &mut EnvRng, qpos: &mut [f64], qvel: &mut [f64]) {
        add_uniform(rng, qpos, RESET_NOISE);
        add_uniform(rng, qvel, RESET_NOISE);
    }

    fn observe(&self, data: &Data, out: &mut [f64]) {
        observe_planar(data, out);
    }

    fn reward(&self, data: &Data, before: [f64; 2], action: &[f64], dt: f64, info: &mut Info) -> (f64, bool) {
        planar_reward(self.version, is_healthy(data), data, before, action, dt, CTRL_COST_WEIGHT, info)
    }
}
