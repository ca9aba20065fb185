//! Episode statistics (Gymnasium's `RecordEpisodeStatistics`): on the step that ends an
//! episode (terminated or truncated), `info` gains `episode_return`, `episode_length` and, when
//! the env reports success, `episode_success` (1 if any step of the episode succeeded, else 0).
//! The return is of the rewards this wrapper sees, so place it where the return you want to
//! log is (inside reward transforms for the task's own return).

use crate::env::{Env, Step};
use crate::error::EnvError;

/// One finished episode.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EpisodeRecord {
    /// Sum of rewards.
    pub episode_return: f64,
    /// Number of steps.
    pub length: usize,
    /// Whether any step reported success; `None` if the env never reports success.
    pub success: Option<bool>,
    /// Whether it ended by termination (else by truncation).
    pub terminated: bool,
}

/// Records the return, length and success of every episode.
pub struct EpisodeStats<E> {
    env: E,
    ret: f64,
    len: usize,
    success: Option<bool>,
    last: Option<EpisodeRecord>,
}

impl<E: Env> EpisodeStats<E> {
    /// Wrap `env`.
    pub fn new(env: E) -> Self {
        Self { env, ret: 0.0, len: 0, success: None, last: None }
    }

    /// The most recent finished episode.
    pub fn last_episode(&self) -> Option<EpisodeRecord> {
        self.last
    }

    /// The wrapped env.
    pub fn inner(&self) -> &E {
        &self.env
    }
}

impl<E: Env> Env for EpisodeStats<E> {
    forward_to_inner!(executed_action);
    forward_to_inner!(spec, observation_space, action_space);
    fn reset(&mut self, seed: Option<u64>) -> Result<Vec<f32>, EnvError> {
        let obs = self.env.reset(seed)?;
        (self.ret, self.len, self.success) = (0.0, 0, None);
        Ok(obs)
    }
    fn step(&mut self, action: &[f32]) -> Result<Step, EnvError> {
        let mut step = self.env.step(action)?;
        self.ret += step.reward;
        self.len += 1;
        if let Some(s) = step.info.success {
            self.success = Some(self.success.unwrap_or(false) || s);
        }
        if step.terminated || step.truncated {
            let rec = EpisodeRecord {
                episode_return: self.ret,
                length: self.len,
                success: self.success,
                terminated: step.terminated,
            };
            step.info.set("episode_return", rec.episode_return);
            step.info.set("episode_length", rec.length as f64);
            if let Some(s) = rec.success {
                step.info.set("episode_success", if s { 1.0 } else { 0.0 });
            }
            self.last = Some(rec);
        }
        Ok(step)
    }
}
