//! Time limit (Gymnasium's `TimeLimit`): `truncated = true` on the step that reaches
//! `max_episode_steps`. `terminated` passes through untouched; when both happen on the same
//! step both are true, never merged into one flag.

use crate::env::{Env, EnvSpec, Step};
use crate::error::EnvError;

/// Truncates episodes after `max_episode_steps` steps.
pub struct TimeLimit<E> {
    env: E,
    spec: EnvSpec,
    max_episode_steps: usize,
    elapsed: usize,
    ended: bool,
}

impl<E: Env> TimeLimit<E> {
    /// Wrap `env`; its spec's `max_episode_steps` becomes `max_episode_steps`.
    pub fn new(env: E, max_episode_steps: usize) -> Self {
        let mut spec = env.spec().clone();
        spec.max_episode_steps = Some(max_episode_steps);
        Self { env, spec, max_episode_steps, elapsed: 0, ended: true }
    }

    /// Steps taken in the current episode.
    pub fn elapsed_steps(&self) -> usize {
        self.elapsed
    }

    /// The wrapped env.
    pub fn inner(&self) -> &E {
        &self.env
    }

    /// The wrapped env, mutably (e.g. to set its state after a reset).
    pub fn inner_mut(&mut self) -> &mut E {
        &mut self.env
    }

    /// Unwrap.
    pub fn into_inner(self) -> E {
        self.env
    }
}

impl<E: Env> Env for TimeLimit<E> {
    forward_to_inner!(executed_action);
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }
    forward_to_inner!(observation_space, action_space);
    fn reset(&mut self, seed: Option<u64>) -> Result<Vec<f32>, EnvError> {
        let obs = self.env.reset(seed)?;
        self.elapsed = 0;
        self.ended = false;
        Ok(obs)
    }
    fn step(&mut self, action: &[f32]) -> Result<Step, EnvError> {
        if self.ended {
            return Err(EnvError::NeedsReset { env: self.spec.id.clone() });
        }
        let mut step = self.env.step(action)?;
        self.elapsed += 1;
        if self.elapsed >= self.max_episode_steps {
            step.truncated = true;
        }
        self.ended = step.terminated || step.truncated;
        Ok(step)
    }
}
