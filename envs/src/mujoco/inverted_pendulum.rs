//! InvertedPendulum-v5 (Gymnasium 1.4.0 `inverted_pendulum_v5.py`): a cart slides on a rail and
//! must keep a hinged pole upright.
//!
//! - model `inverted_pendulum.xml`, frame skip 2; action: 1 cart force in [−3, 3].
//! - observation: [qpos, qvel] = [cart x, pole angle, cart ẋ, pole angle rate] (4 numbers).
//! - terminated when the observation is not finite or |pole angle| > 0.2.
//! - reward: 1 while not terminated, 0 on the terminal step (`reward_survive`).
//! - reset: qpos, qvel += U(−0.01, 0.01).

use super::noise::{add_uniform, EnvRng};
use super::{observe_state, state_dim, state_is_finite, Data, Task};
use crate::env::Info;
use mujoco_rs::prelude::*;

/// The InvertedPendulum-v5 task.
#[derive(Debug, Clone, Default)]
pub struct InvertedPendulum;

impl Task for InvertedPendulum {
    fn xml_file(&self) -> &'static str {
        "inverted_pendulum.xml"
    }

    fn frame_skip(&self) -> usize {
        2
    }

    fn obs_dim(&self, model: &MjModel) -> usize {
        state_dim(model, 0)
    }

    fn reset_noise(&self, rng: &mut EnvRng, qpos: &mut [f64], qvel: &mut [f64]) {
        add_uniform(rng, qpos, 0.01);
        add_uniform(rng, qvel, 0.01);
    }

    fn observe(&self, data: &Data, out: &mut [f64]) {
        observe_state(data, 0, out);
    }

    fn reward(&self, data: &Data, _before: [f64; 2], _action: &[f64], _dt: f64, info: &mut Info) -> (f64, bool) {
        let terminated = !state_is_finite(data) || data.qpos()[1].abs() > 0.2;
        let reward = if terminated { 0.0 } else { 1.0 };
        info.set("reward_survive", reward);
        (reward, terminated)
    }
}
