//! Clip the action into the action box before the step (Gymnasium's `ClipAction`).

use crate::env::{Env, Step};
use crate::error::EnvError;

/// Clips every action to `env.action_space()`; the wrapped space stays the same.
pub struct ClipAction<E> {
    env: E,
    buf: Vec<f32>,
}

impl<E: Env> ClipAction<E> {
    /// Wrap `env`.
    pub fn new(env: E) -> Self {
        Self { env, buf: Vec::new() }
    }

    /// The wrapped env.
    pub fn inner(&self) -> &E {
        &self.env
    }
}

impl<E: Env> Env for ClipAction<E> {
    forward_to_inner!(spec, observation_space, action_space, reset);
    fn step(&mut self, action: &[f32]) -> Result<Step, EnvError> {
        // Length and finiteness are checked by the env; NaN stays NaN through clamp.
        self.buf.clear();
        self.buf.extend_from_slice(action);
        if action.len() == self.env.action_space().dim() {
            self.env.action_space().clip(&mut self.buf);
        }
        self.env.step(&self.buf)
    }
}
