//! HalfCheetah (Gymnasium 1.4.0 `half_cheetah_v5.py`; gym `half_cheetah.py` v2 for D4RL).
//!
//! - model `half_cheetah.xml` (timestep 0.01, Euler), frame skip 5 → dt 0.05; 6 actions in [−1, 1].
//! - observation: qpos[1..] (8) + qvel (9) = 17; rootx is left out.
//! - reward: Δx/dt − 0.1·‖a‖², x = qpos[0]; never terminates.
//! - reset: qpos += U(−0.1, 0.1), qvel += 0.1·N(0, 1).
//! - v2 and v5 agree except that D4RL clips the action before the step (so the control cost
//!   sees the clipped action); gym v2 named `reward_forward` `reward_run`.

use super::noise::{add_normal, add_uniform, EnvRng};
use super::{observe_state, state_dim, sum_sq, Data, Task, Version};
use crate::env::Info;
use mujoco_rs::prelude::*;

/// Forward reward weight w_f.
const FORWARD_WEIGHT: f64 = 1.0;
/// Control cost weight w_c.
const CTRL_COST_WEIGHT: f64 = 0.1;
/// Reset noise scale c.
const RESET_NOISE: f64 = 0.1;

/// The HalfCheetah task.
#[derive(Debug, Clone)]
pub struct HalfCheetah {
    /// v5 or D4RL's v2.
    pub version: Version,
}

impl Task for HalfCheetah {
    fn xml_file(&self) -> &'static str {
        "half_cheetah.xml"
    }

    fn frame_skip(&self) -> usize {
        5
    }

    fn obs_dim(&self, model: &MjModel) -> usize {
        state_dim(model, 1)
    }

    fn clips_action(&self) -> bool {
        self.version.clips_action()
    }

    fn reset_noise(&self, rng: &mut EnvRng, qpos: &mut [f64], qvel: &mut [f64]) {
        add_uniform(rng, qpos, RESET_NOISE);
        add_normal(rng, qvel, RESET_NOISE);
    }

    fn observe(&self, data: &Data, out: &mut [f64]) {
        observe_state(data, 1, out);
    }

    fn reward(&self, data: &Data, before: [f64; 2], action: &[f64], dt: f64, info: &mut Info) -> (f64, bool) {
        let x = data.qpos()[0];
        let x_velocity = (x - before[0]) / dt;
        let forward = FORWARD_WEIGHT * x_velocity;
        let ctrl_cost = CTRL_COST_WEIGHT * sum_sq(action);
        info.set("x_position", x);
        info.set("x_velocity", x_velocity);
        info.set("reward_forward", forward);
        info.set("reward_ctrl", -ctrl_cost);
        (forward - ctrl_cost, false)
    }
}
