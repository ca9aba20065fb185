//! Reward scale and shift: r' = scale · r + shift (e.g. IQL's locomotion reward scaling, or
//! AntMaze's r − 1).

use crate::env::{Env, Step};
use crate::error::EnvError;

/// Maps every reward to `scale · r + shift`.
pub struct TransformReward<E> {
    env: E,
    scale: f64,
    shift: f64,
}

impl<E: Env> TransformReward<E> {
    /// Wrap `env`; `scale` and `shift` must be finite.
    pub fn new(env: E, scale: f64, shift: f64) -> Result<Self, EnvError> {
        if !(scale.is_finite() && shift.is_finite()) {
            return Err(EnvError::Other(format!("TransformReward: scale {scale} and shift {shift} must be finite")));
        }
        Ok(Self { env, scale, shift })
    }

    /// The wrapped env.
    pub fn inner(&self) -> &E {
        &self.env
    }
}

impl<E: Env> Env for TransformReward<E> {
    forward_to_inner!(executed_action);
    forward_to_inner!(spec, observation_space, action_space, reset);
    fn step(&mut self, action: &[f32]) -> Result<Step, EnvError> {
        let mut step = self.env.step(action)?;
        step.reward = self.scale * step.reward + self.shift;
        Ok(step)
    }
}
