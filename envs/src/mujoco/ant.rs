//! Ant (Gymnasium 1.4.0 `ant_v5.py`; gym `ant.py` v2 as logged by D4RL).
//!
//! - model `ant.xml` (timestep 0.01, RK4), frame skip 5 → dt 0.05; 8 actions in [−1, 1].
//! - forward reward: Δx/dt of the torso's `xpos` (body 1), not of qpos.
//! - healthy iff [qpos, qvel] is finite and torso z = qpos[2] ∈ [0.2, 1.0] (inclusive);
//!   terminated = not healthy.
//! - v5: observation qpos[2..] (13) + qvel (14) + clip(cfrc_ext[1..], −1, 1) (13×6) = 105;
//!   reward = (fwd + healthy_reward) − (0.5·‖a‖² + 5e−4·‖clip(cfrc_ext, −1, 1)‖²), the contact
//!   sum over all bodies, healthy_reward = 1 only while healthy. `cfrc_ext` is read after
//!   `mj_rnePostConstraint`.
//! - v2 (D4RL): observation qpos[2..] + qvel (27) followed by 84 zeros = 111, because under
//!   mujoco-py with MuJoCo ≥ 2.0 `cfrc_ext` was never filled; for the same reason the contact
//!   cost is 0. healthy_reward = 1 on every step; the action is clipped first.
//! - reset: qpos += U(−0.1, 0.1) (the quaternion is not renormalised), qvel += 0.1·N(0, 1).

use super::noise::{add_normal, add_uniform, EnvRng};
use super::{observe_state, state_dim, state_is_finite, sum_sq, Data, Task, Version};
use crate::env::Info;
use mujoco_rs::prelude::*;

const FORWARD_WEIGHT: f64 = 1.0;
const CTRL_COST_WEIGHT: f64 = 0.5;
const CONTACT_COST_WEIGHT: f64 = 5e-4;
const HEALTHY_REWARD: f64 = 1.0;
const RESET_NOISE: f64 = 0.1;
/// The body whose `xpos` the forward reward follows ("torso").
const MAIN_BODY: usize = 1;
/// The zero columns D4RL's ant-v2 observation carries after the 27 state numbers.
const V2_ZERO_COLUMNS: usize = 84;

/// The Ant task.
#[derive(Debug, Clone)]
pub struct Ant {
    /// v5 or D4RL's v2.
    pub version: Version,
}

impl Task for Ant {
    fn xml_file(&self) -> &'static str {
        "ant.xml"
    }

    fn frame_skip(&self) -> usize {
        5
    }

    fn obs_dim(&self, model: &MjModel) -> usize {
        let state = state_dim(model, 2);
        match self.version {
            Version::V5 => state + 6 * (model.ffi().nbody as usize - 1),
            Version::D4rlV2 => state + V2_ZERO_COLUMNS,
        }
    }

    fn needs_cfrc_ext(&self) -> bool {
        self.version == Version::V5
    }

    fn clips_action(&self) -> bool {
        self.version.clips_action()
    }

    fn reset_noise(&self, rng: &mut EnvRng, qpos: &mut [f64], qvel: &mut [f64]) {
        add_uniform(rng, qpos, RESET_NOISE);
        add_normal(rng, qvel, RESET_NOISE);
    }

    fn position(&self, data: &Data) -> [f64; 2] {
        let p = data.xpos()[MAIN_BODY];
        [p[0], p[1]]
    }

    fn observe(&self, data: &Data, out: &mut [f64]) {
        let state = observe_state(data, 2, out);
        let rest = &mut out[state..];
        match self.version {
            Version::V5 => {
                for (o, f) in rest.iter_mut().zip(data.cfrc_ext()[1..].iter().flatten()) {
                    *o = f.clamp(-1.0, 1.0);
                }
            }
            Version::D4rlV2 => rest.fill(0.0),
        }
    }

    fn reward(&self, data: &Data, before: [f64; 2], action: &[f64], dt: f64, info: &mut Info) -> (f64, bool) {
        let qpos = data.qpos();
        let healthy = state_is_finite(data) && (0.2..=1.0).contains(&qpos[2]);
        let after = self.position(data);
        let (x_velocity, y_velocity) = ((after[0] - before[0]) / dt, (after[1] - before[1]) / dt);
        let forward = FORWARD_WEIGHT * x_velocity;
        let survive = self.version.survive_reward(healthy, HEALTHY_REWARD);
        let ctrl_cost = CTRL_COST_WEIGHT * sum_sq(action);
        let contact_cost = match self.version {
            Version::V5 => {
                CONTACT_COST_WEIGHT
                    * data
                        .cfrc_ext()
                        .iter()
                        .flatten()
                        .map(|f| {
                            let c = f.clamp(-1.0, 1.0);
                            c * c
                        })
                        .sum::<f64>()
            }
            Version::D4rlV2 => 0.0,
        };
        info.set("x_position", qpos[0]);
        info.set("y_position", qpos[1]);
        info.set("distance_from_origin", qpos[0].hypot(qpos[1]));
        info.set("x_velocity", x_velocity);
        info.set("y_velocity", y_velocity);
        info.set("reward_forward", forward);
        info.set("reward_ctrl", -ctrl_cost);
        info.set("reward_contact", -contact_cost);
        info.set("reward_survive", survive);
        ((forward + survive) - (ctrl_cost + contact_cost), !healthy)
    }
}
