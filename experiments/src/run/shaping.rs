//! `[shaping]` in the runner: a [`TransitionSink`] in front of the replay buffer that replaces
//! each online transition's reward with the shaped one (o2o_reward_models::Shaper) as it is
//! stored, and keeps the episode's potentials for the metrics (`train/episode_shaped_return`,
//! `train/episode_gold_return`, `train/episode_potential_start`, `train/episode_potential_end`).
//! The dataset's rows go through the same shaper at load ([`shape_rows`]), so every row of a
//! batch that mixes them with online rows carries F = γΦ(s') − Φ(s) (fidelity-audit-2 E10):
//! the same model, the same γ (the built agent's, E12) and the same terminal convention
//! (Φ(s') := 0 after a true termination, kept at a time-limit cut or where the data runs out).
//! With the default Markov potential (`fusion = "backward"`, E11) F is a function of (s, s')
//! alone, so an online row and a dataset row with the same (s, s') get the same F.
//!
//! Works with every off-policy agent: the agent only ever sees the stored rewards. The shaper
//! restarts at every episode end, and the runner checkpoints online phases only at episode
//! ends, so resuming a shaped run is exact.

use super::actor::{Transition, TransitionSink};
use super::config::ShapingConfig;
use anyhow::{bail, Context, Result};
use o2o_agents::Agent;
use o2o_datasets::Transitions;
use o2o_reward_models::{ProgressModel, ProgressPotential, Shaper};
use tch::Device;

/// The shaper for `config` with the discount of the built `agent` (the one its TD targets use:
/// shaping with any other γ is not potential-based for it), checked against the env's
/// observation width. Fails, naming `[shaping]`, for an agent that has no discount.
pub fn shaper(config: &ShapingConfig, agent: &dyn Agent, obs_dim: usize) -> Result<Shaper> {
    let Some(gamma) = agent.gamma() else {
        bail!(
            "[shaping] needs the learner's discount γ, but algorithm `{}` has none (it learns no value function)",
            agent.name()
        );
    };
    let model = ProgressModel::load(&config.model, Device::Cpu)
        .with_context(|| format!("[shaping] model = {}", config.model.display()))?;
    for v in &model.config().views {
        match v.obs_slice {
            Some([_, b]) if b <= obs_dim => {}
            other => bail!("[shaping] model {}: view `{}` reads {:?} of the observation, but the env's observation has {obs_dim} numbers", config.model.display(), v.name, other),
        }
    }
    let potential = ProgressPotential::new(model, Some(config.fusion()))?;
    Ok(Shaper::new(potential, config.mode, config.gold, gamma)?)
}

/// The shaped reward of every row of a dataset, as an online row with the same transition gets
/// it from `shaper`: `t`'s rewards are the env's (before the run's reward transform), its rows
/// in episode order; each episode ends at `episode_ends`, with Φ(s') := 0 where `terminals`
/// says it truly terminated and Φ(s') kept otherwise (a time-limit cut, or the data ran out).
/// The shaper starts and leaves with no episode in progress.
pub fn shape_rows(t: &Transitions, shaper: &mut Shaper) -> Result<Vec<f64>> {
    let d = t.obs_dim;
    shaper.restart();
    let mut shaped = Vec::with_capacity(t.len());
    for i in 0..t.len() {
        let (obs, next_obs) = (&t.observations[i * d..(i + 1) * d], &t.next_observations[i * d..(i + 1) * d]);
        let (terminated, end) = (t.terminals[i] > 0.5, t.episode_ends[i] > 0.5);
        let s = shaper
            .shape(obs, t.rewards[i] as f64, next_obs, terminated, end)
            .with_context(|| format!("[shaping] dataset row {i}"))?;
        shaped.push(s.reward);
    }
    shaper.restart();
    Ok(shaped)
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
