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
//!
//! Φ is the progress model (`potential = "model"`) or, on a goal-conditioned env, the true
//! distance potential 1 − d/d₀ (`potential = "goal-distance"`, [`GoalDistance`]). The run's Φ
//! is also followed along evaluation episodes ([`eval_potential`]; `eval/potential_*`), with
//! `enabled = false` too, so a sparse baseline's evaluations show the same Φ.

use super::actor::{Transition, TransitionSink};
use super::config::{PotentialKind, ShapingConfig};
use anyhow::{bail, Context, Result};
use o2o_agents::Agent;
use o2o_datasets::Transitions;
use o2o_envs::GoalSpec;
use o2o_reward_models::{GoalDistance, Potential, ProgressModel, ProgressPotential, Shaper};
use tch::Device;

/// The shaper for `config` with the discount of the built `agent` (the one its TD targets use:
/// shaping with any other γ is not potential-based for it), checked against the env's
/// observation width. Fails, naming `[shaping]`, for an agent that has no discount. A
/// `potential = "goal-distance"` section needs the env's goal layout: [`shaper_for_goal`].
pub fn shaper(config: &ShapingConfig, agent: &dyn Agent, obs_dim: usize) -> Result<Shaper> {
    shaper_for_goal(config, agent, obs_dim, None)
}

/// [`shaper`] on an env whose goal layout is `goal` (the Fetch tasks), which
/// `potential = "goal-distance"` reads.
pub fn shaper_for_goal(
    config: &ShapingConfig,
    agent: &dyn Agent,
    obs_dim: usize,
    goal: Option<&GoalSpec>,
) -> Result<Shaper> {
    let Some(gamma) = agent.gamma() else {
        bail!(
            "[shaping] needs the learner's discount γ, but algorithm `{}` has none (it learns no value function)",
            agent.name()
        );
    };
    let potential = potential(config, obs_dim, goal)?;
    Ok(Shaper::new(potential, config.mode, config.gold, gamma)?.with_progress_scale(config.scale)?)
}

/// The run's Φ, fresh (no episode in progress): the progress model of `config.model`, checked
/// against the env's observation width, or the goal distance of `goal`.
pub fn potential(config: &ShapingConfig, obs_dim: usize, goal: Option<&GoalSpec>) -> Result<Potential> {
    match config.potential {
        PotentialKind::Model => {
            let path = config.model.as_ref().context("key `shaping.model`: a progress-model file is needed")?;
            let model = ProgressModel::load(path, Device::Cpu)
                .with_context(|| format!("[shaping] model = {}", path.display()))?;
            for v in &model.config().views {
                let fits = |s: Option<[usize; 2]>| s.is_some_and(|[_, b]| b <= obs_dim);
                if !fits(v.obs_slice) || (v.minus.is_some() && !fits(v.minus)) {
                    bail!("[shaping] model {}: view `{}` reads {:?} (minus {:?}) of the observation, but the env's observation has {obs_dim} numbers", path.display(), v.name, v.obs_slice, v.minus);
                }
            }
            Ok(ProgressPotential::new(model, Some(config.fusion()))?.into())
        }
        PotentialKind::GoalDistance => {
            let Some(g) = goal else {
                bail!("key `shaping.potential` = \"goal-distance\" needs a goal-conditioned env (achieved and desired goals in the observation, e.g. FetchReach-v4), but this env has no goal layout");
            };
            Ok(GoalDistance::new(g.layout.achieved, g.layout.desired, config.distance_scale)?.into())
        }
    }
}

/// Φ to follow along evaluation episodes: the run's `[shaping]` potential, enabled or not.
/// `None` without a section; for a disabled section whose Φ cannot be built (a model file that
/// is not there), `None` with a note, since nothing is trained on it.
pub fn eval_potential(
    config: Option<&ShapingConfig>,
    obs_dim: usize,
    goal: Option<&GoalSpec>,
) -> Result<Option<Potential>> {
    let Some(c) = config else { return Ok(None) };
    match potential(c, obs_dim, goal) {
        Ok(p) => Ok(Some(p)),
        Err(e) if !c.enabled => {
            eprintln!(
                "note: [shaping] is disabled and its Φ cannot be built ({e:#}); evaluations log no eval/potential_*"
            );
            Ok(None)
        }
        Err(e) => Err(e),
    }
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
