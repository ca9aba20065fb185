//! Rescale actions from a box [min, max] (default [−1, 1]) to the env's bounds (Gymnasium's
//! `RescaleAction`): a = low + (a' − min) · (high − low) / (max − min), per dimension.

use crate::env::{BoxSpace, Env, Step};
use crate::error::EnvError;

/// Takes actions in `[min, max]` and maps them affinely onto the env's action box.
pub struct RescaleAction<E> {
    env: E,
    space: BoxSpace,
    buf: Vec<f32>,
}

impl<E: Env> RescaleAction<E> {
    /// Wrap `env` so it takes actions in `[min, max]` in every dimension. Fails when the env's
    /// action box is unbounded or `min >= max`.
    pub fn new(env: E, min: f32, max: f32) -> Result<Self, EnvError> {
        let target = env.action_space();
        if !target.is_bounded() {
            return Err(EnvError::Other(format!("RescaleAction: {} has an unbounded action space", env.spec().id)));
        }
        if !(min.is_finite() && max.is_finite() && min < max) {
            return Err(EnvError::Other(format!("RescaleAction: need finite min < max, found [{min}, {max}]")));
        }
        let dim = target.dim();
        Ok(Self { space: BoxSpace::new(vec![min; dim], vec![max; dim]), env, buf: Vec::new() })
    }

    /// The wrapped env.
    pub fn inner(&self) -> &E {
        &self.env
    }
}

impl<E: Env> Env for RescaleAction<E> {
    forward_to_inner!(spec, observation_space, reset);
    fn action_space(&self) -> &BoxSpace {
        &self.space
    }
    fn step(&mut self, action: &[f32]) -> Result<Step, EnvError> {
        let target = self.env.action_space();
        if action.len() != target.dim() {
            return Err(EnvError::ActionLength {
                env: self.env.spec().id.clone(),
                expected: target.dim(),
                found: action.len(),
            });
        }
        self.buf.clear();
        for (i, a) in action.iter().enumerate() {
            let (lo, hi) = (target.low[i], target.high[i]);
            let (min, max) = (self.space.low[i], self.space.high[i]);
            self.buf.push(lo + (a - min) * (hi - lo) / (max - min));
        }
        self.env.step(&self.buf)
    }
}
