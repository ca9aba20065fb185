//! Observation normalization with fixed statistics (for example a dataset's):
//! o' = (o − μ) / σ, per dimension. The statistics never change while the env runs, unlike
//! Gymnasium's running `NormalizeObservation`, so a policy trained on normalized dataset rows
//! sees the same mapping online.

use crate::env::{Env, Step};
use crate::error::EnvError;

/// Normalizes observations with a fixed mean and standard deviation.
pub struct NormalizeObservation<E> {
    env: E,
    mean: Vec<f32>,
    std: Vec<f32>,
}

impl<E: Env> NormalizeObservation<E> {
    /// Wrap `env`. `mean` and `std` must have the observation's length; every `std` must be
    /// finite and > 0 (add your ε, e.g. 1e−3, before passing it).
    pub fn new(env: E, mean: Vec<f32>, std: Vec<f32>) -> Result<Self, EnvError> {
        let dim = env.observation_space().dim();
        let id = &env.spec().id;
        if mean.len() != dim {
            return Err(EnvError::Shape {
                what: format!("NormalizeObservation mean for {id}"),
                expected: dim,
                found: mean.len(),
            });
        }
        if std.len() != dim {
            return Err(EnvError::Shape {
                what: format!("NormalizeObservation std for {id}"),
                expected: dim,
                found: std.len(),
            });
        }
        if let Some(i) = mean.iter().position(|m| !m.is_finite()) {
            return Err(EnvError::Other(format!(
                "NormalizeObservation for {id}: mean[{i}] = {} is not finite",
                mean[i]
            )));
        }
        if let Some(i) = std.iter().position(|s| !(s.is_finite() && *s > 0.0)) {
            return Err(EnvError::Other(format!(
                "NormalizeObservation for {id}: std[{i}] = {} must be finite and > 0",
                std[i]
            )));
        }
        Ok(Self { env, mean, std })
    }

    /// The wrapped env.
    pub fn inner(&self) -> &E {
        &self.env
    }

    fn normalize(&self, obs: &mut [f32]) {
        for ((o, m), s) in obs.iter_mut().zip(&self.mean).zip(&self.std) {
            *o = (*o - m) / s;
        }
    }
}

impl<E: Env> Env for NormalizeObservation<E> {
    forward_to_inner!(executed_action);
    forward_to_inner!(spec, observation_space, action_space);
    fn reset(&mut self, seed: Option<u64>) -> Result<Vec<f32>, EnvError> {
        let mut obs = self.env.reset(seed)?;
        self.normalize(&mut obs);
        Ok(obs)
    }
    fn step(&mut self, action: &[f32]) -> Result<Step, EnvError> {
        let mut step = self.env.step(action)?;
        self.normalize(&mut step.obs);
        Ok(step)
    }
}
