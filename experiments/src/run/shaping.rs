//! `[shaping]` in the runner: a [`TransitionSink`] in front of the replay buffer that replaces
//! each online transition's reward with the shaped one (o2o_reward_models::Shaper) as it is
//! stored, and keeps the episode's potentials for the metrics (`train/episode_shaped_return`,
//! `train/episode_gold_return`, `train/episode_potential_start`, `train/episode_potential_end`).
//!
//! Works with every off-policy agent: the agent only ever sees the stored rewards. The shaper
//! restarts at every episode end, and the runner checkpoints online phases only at episode
//! ends, so resuming a shaped run is exact.

use super::actor::{Transition, TransitionSink};
use super::config::ShapingConfig;
use anyhow::{bail, Context, Result};
use o2o_reward_models::{ProgressModel, ProgressPotential, Shaper};
use tch::Device;

/// The shaper for `config` with the learner's discount `gamma`, checked against the env's
/// observation width.
pub fn shaper(config: &ShapingConfig, gamma: f64, obs_dim: usize) -> Result<Shaper> {
    let model = ProgressModel::load(&config.model, Device::Cpu).with_context(|| format!("[shaping] model = {}", config.model.display()))?;
    for v in &model.config().views {
        match v.obs_slice {
            Some([_, b]) if b <= obs_dim => {}
            other => bail!("[shaping] model {}: view `{}` reads {:?} of the observation, but the env's observation has {obs_dim} numbers", config.model.display(), v.name, other),
        }
    }
    let potential = ProgressPotential::new(model, config.fusion)?;
    Ok(Shaper::new(potential, config.mode, config.gold, gamma)?)
}

/// Sums over the current episode.
#[derive(Debug, Default)]
pub struct ShapedEpisode {
    shaped: f64,
    gold: f64,
    first: Option<f64>,
    last: f64,
}

impl ShapedEpisode {
    /// The finished episode's metrics; resets the sums.
    pub fn take_metrics(&mut self) -> Vec<(&'static str, f64)> {
        let e = std::mem::take(self);
        vec![
            ("train/episode_shaped_return", e.shaped),
            ("train/episode_gold_return", e.gold),
            ("train/episode_potential_start", e.first.unwrap_or(0.0)),
            ("train/episode_potential_end", e.last),
        ]
    }
}

/// Shapes each transition's reward, then hands it on.
pub struct ShapingSink<'a> {
    /// Where shaped transitions go (the replay buffer).
    pub inner: &'a mut dyn TransitionSink,
    /// The shaper.
    pub shaper: &'a mut Shaper,
    /// The running episode's sums.
    pub episode: &'a mut ShapedEpisode,
}

impl TransitionSink for ShapingSink<'_> {
    fn push(&mut self, t: &Transition) -> Result<()> {
        let s = self.shaper.shape(&t.obs, t.reward, &t.next_obs, t.terminated, t.truncated)?;
        self.episode.shaped += s.reward;
        self.episode.gold += s.gold;
        self.episode.first.get_or_insert(s.phi);
        self.episode.last = s.phi_next;
        self.inner.push(&Transition { reward: s.reward, ..t.clone() })
    }
}
