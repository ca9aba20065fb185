//! Hopper (Gymnasium 1.4.0 `hopper_v5.py`; gym `hopper.py` v2 for D4RL).
//!
//! - model `hopper.xml` (timestep 0.002, RK4), frame skip 4 → dt 0.008; 3 actions in [−1, 1].
//! - observation: qpos[1..] (5) + clip(qvel, −10, 10) (6) = 11.
//! - healthy iff z = qpos[1] > 0.7, |angle = qpos[2]| < 0.2 and every element of
//!   [qpos[2..], qvel] (unclipped) lies in (−100, 100); all strict. terminated = not healthy.
//! - reward: Δx/dt + healthy_reward − 1e−3·‖a‖², x = qpos[0]. v5 pays healthy_reward = 1 only
//!   while healthy; v2 pays it on every step, the terminal one included.
//! - reset: qpos, qvel += U(−5e−3, 5e−3).

use super::noise::{add_uniform, EnvRng};
use super::{state_dim, sum_sq, Data, Task, Version};
use crate::env::Info;
use mujoco_rs::prelude::*;

const FORWARD_WEIGHT: f64 = 1.0;
const CTRL_COST_WEIGHT: f64 = 1e-3;
const HEALTHY_REWARD: f64 = 1.0;
const RESET_NOISE: f64 = 5e-3;

/// The Hopper task.
#[derive(Debug, Clone)]
pub struct Hopper {
    /// v5 or D4RL's v2.
    pub version: Version,
}

fn is_healthy(data: &Data) -> bool {
    let (qpos, qvel) = (data.qpos(), data.qvel());
    let (z, angle) = (qpos[1], qpos[2]);
    let state_ok = qpos[2..].iter().chain(qvel).all(|v| -100.0 < *v && *v < 100.0);
    state_ok && 0.7 < z && z < f64::INFINITY && -0.2 < angle && angle < 0.2
}

impl Task for Hopper {
    fn xml_file(&self) -> &'static str {
        "hopper.xml"
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
        let healthy = is_healthy(data);
        planar_reward(self.version, healthy, data, before, action, dt, CTRL_COST_WEIGHT, info)
    }
}

/// Hopper and Walker2d observation: qpos[1..] then clip(qvel, −10, 10).
pub(crate) fn observe_planar(data: &Data, out: &mut [f64]) {
    let qpos = &data.qpos()[1..];
    out[..qpos.len()].copy_from_slice(qpos);
    for (o, v) in out[qpos.len()..].iter_mut().zip(data.qvel()) {
        *o = v.clamp(-10.0, 10.0);
    }
}

/// Hopper and Walker2d reward: (w_f·Δx/dt + healthy_reward) − w_c·‖a‖²; terminated = not healthy.
#[allow(clippy::too_many_arguments)]
pub(crate) fn planar_reward(
    version: Version,
    healthy: bool,
    data: &Data,
    before: [f64; 2],
    action: &[f64],
    dt: f64,
    ctrl_cost_weight: f64,
    info: &mut Info,
) -> (f64, bool) {
    let x = data.qpos()[0];
    let x_velocity = (x - before[0]) / dt;
    let forward = FORWARD_WEIGHT * x_velocity;
    let survive = version.survive_reward(healthy, HEALTHY_REWARD);
    let ctrl_cost = ctrl_cost_weight * sum_sq(action);
    info.set("x_position", x);
    // Height relative to the initial pose, qpos0[1] (1.25 for Hopper and Walker2d).
    info.set("z_distance_from_origin", data.qpos()[1] - data.model().qpos0()[1]);
    info.set("x_velocity", x_velocity);
    info.set("reward_forward", forward);
    info.set("reward_ctrl", -ctrl_cost);
    info.set("reward_survive", survive);
    ((forward + survive) - ctrl_cost, !healthy)
}
