//! The actor side of the loop: a policy, an env and a transition sink, nothing else.
//!
//! This is the half that would move to another process (or a robot) when acting and learning
//! are split (ARCHITECTURE.md, "Scaling out"): it never sees the agent's optimizer, the replay
//! buffer or the learner's RNG — only something that maps observations to actions, and
//! something that takes transitions.
//!
//! Exactness: every episode starts with `reset(Some(seed))`, the seed derived from the run seed
//! and the episode index, so the env's own random state never has to be checkpointed; the
//! runner checkpoints online phases only at episode boundaries.

use anyhow::{bail, Context, Result};
use o2o_agents::Agent;
use o2o_envs::{BoxSpace, Env};
use rand::Rng;
use tch::{Device, Tensor};

/// SplitMix64: a well-mixed 64-bit seed from a run seed, a stream name and an index, so that
/// train episodes, eval episodes and each component get independent, reproducible seeds.
pub fn derive_seed(run_seed: u64, stream: u64, index: u64) -> u64 {
    let mut z = run_seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ index.wrapping_mul(0xD1B5_4A32_D192_ED03);
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Seed streams (arbitrary distinct constants).
pub mod stream {
    /// Training episodes' reset seeds.
    pub const TRAIN_EPISODE: u64 = 1;
    /// Evaluation episodes' reset seeds.
    pub const EVAL_EPISODE: u64 = 2;
    /// The agent's own random stream.
    pub const AGENT: u64 = 3;
    /// The runner RNG (batch draws, random actions).
    pub const RUNNER_RNG: u64 = 4;
    /// Diagnostic batches (their own stream: diagnostics never move the runner RNG).
    pub const DIAGNOSTICS: u64 = 5;
    /// The on-policy loop's episodes (env i's k-th episode).
    pub const ROLLOUT_EPISODE: u64 = 6;
    /// A fleet actor's episodes and exploration (indexed by the actor's index).
    pub const FLEET_ACTOR: u64 = 7;
}

/// The affine map between the agent's action box `[-1, 1]^A` and the env's bounds.
#[derive(Debug, Clone)]
pub struct ActionScale {
    low: Vec<f32>,
    high: Vec<f32>,
}

impl ActionScale {
    /// The map for an env's action space; the space must be bounded.
    pub fn new(space: &BoxSpace, env_id: &str) -> Result<Self> {
        if !space.is_bounded() {
            bail!(
                "env {env_id} has an unbounded action space; the runner needs finite bounds to rescale [-1, 1] actions"
            );
        }
        Ok(Self { low: space.low.clone(), high: space.high.clone() })
    }

    /// Action dimension.
    pub fn dim(&self) -> usize {
        self.low.len()
    }

    /// The env's bounds `(low, high)`.
    pub fn bounds(&self) -> (&[f32], &[f32]) {
        (&self.low, &self.high)
    }

    /// a_env = low + (a + 1) / 2 · (high − low), with `a` clipped to [-1, 1] first.
    pub fn to_env(&self, a: &[f32]) -> Vec<f32> {
        a.iter()
            .zip(self.low.iter().zip(&self.high))
            .map(|(a, (lo, hi))| lo + (a.clamp(-1.0, 1.0) + 1.0) * 0.5 * (hi - lo))
            .collect()
    }

    /// The inverse map, a = 2 (a_env − low) / (high − low) − 1, clipped to ±(1 − 1e-5) so a
    /// tanh-squashed policy's log-probability of dataset actions stays finite (IQL, §6.1).
    pub fn to_agent(&self, a_env: &[f32]) -> Vec<f32> {
        const EDGE: f32 = 1.0 - 1e-5;
        a_env
            .iter()
            .zip(self.low.iter().zip(&self.high))
            .map(|(a, (lo, hi))| (2.0 * (a - lo) / (hi - lo) - 1.0).clamp(-EDGE, EDGE))
            .collect()
    }
}

/// Chooses an action in `[-1, 1]^A` for one observation.
pub trait Policy {
    /// The action for `obs`, in `[-1, 1]^A`.
    fn act(&mut self, obs: &[f32]) -> Result<Vec<f32>>;
}

/// An agent used as a policy (stochastic for collecting, deterministic for evaluation).
pub struct AgentPolicy<'a> {
    /// The agent.
    pub agent: &'a mut dyn Agent,
    /// Where it computes.
    pub device: Device,
    /// The policy's mode (evaluation) rather than a sample.
    pub deterministic: bool,
}

impl Policy for AgentPolicy<'_> {
    fn act(&mut self, obs: &[f32]) -> Result<Vec<f32>> {
        let t = Tensor::from_slice(obs).view([1, obs.len() as i64]).to_device(self.device);
        let a = self.agent.act(&t, self.deterministic).to_device(Device::Cpu).flatten(0, -1);
        let a = Vec::<f32>::try_from(&a).context("cannot read the agent's action")?;
        if let Some((index, &value)) = a.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(NonFiniteAction { index, value }.into());
        }
        Ok(a)
    }
}

/// The agent's action held a NaN or an infinity: the agent has diverged (the env is not to
/// blame). The runner adds the update number and the last update's losses.
#[derive(Debug, thiserror::Error)]
#[error("the agent's action is not finite at index {index}: {value} (the agent has diverged)")]
pub struct NonFiniteAction {
    /// The first non-finite component.
    pub index: usize,
    /// Its value.
    pub value: f32,
}

/// Uniformly random actions in `[-1, 1]^A` from a caller-owned RNG.
pub struct UniformPolicy<'a, R: Rng> {
    /// The random source.
    pub rng: &'a mut R,
    /// Action dimension.
    pub dim: usize,
}

impl<R: Rng> Policy for UniformPolicy<'_, R> {
    fn act(&mut self, _obs: &[f32]) -> Result<Vec<f32>> {
        Ok((0..self.dim).map(|_| self.rng.gen_range(-1.0f32..=1.0)).collect())
    }
}

/// One env transition, the action in the agent's `[-1, 1]` box and the env's own reward.
#[derive(Debug, Clone)]
pub struct Transition {
    /// Observation before the step.
    pub obs: Vec<f32>,
    /// The action, in the agent's `[-1, 1]` box.
    pub action: Vec<f32>,
    /// The env's own reward.
    pub reward: f64,
    /// Observation after the step.
    pub next_obs: Vec<f32>,
    /// A true end (no bootstrapping).
    pub terminated: bool,
    /// A time-limit cut.
    pub truncated: bool,
    /// An operator took over at this step (a robot env's `intervention` info).
    pub intervention: bool,
}

/// Where the actor sends transitions (a replay buffer today; a stream when split).
pub trait TransitionSink {
    /// Take one transition.
    fn push(&mut self, t: &Transition) -> Result<()>;
}

/// A finished episode.
#[derive(Debug, Clone, Copy)]
pub struct EpisodeEnd {
    /// Undiscounted return.
    pub ret: f64,
    /// Steps.
    pub length: u64,
    /// Whether the task was achieved, when the env says.
    pub success: Option<bool>,
}

/// Steps one env with a policy, episode after episode.
pub struct Actor {
    env: Box<dyn Env>,
    scale: ActionScale,
    run_seed: u64,
    /// Index of the current episode (or of the next, at a boundary).
    episode: u64,
    obs: Option<Vec<f32>>,
    ep_return: f64,
    ep_length: u64,
}

impl Actor {
    /// An actor at an episode boundary; `episode` is the index of the next episode.
    pub fn new(env: Box<dyn Env>, run_seed: u64, episode: u64) -> Result<Self> {
        let scale = ActionScale::new(env.action_space(), &env.spec().id)?;
        Ok(Self { env, scale, run_seed, episode, obs: None, ep_return: 0.0, ep_length: 0 })
    }

    /// Action dimension.
    pub fn act_dim(&self) -> usize {
        self.scale.dim()
    }

    /// Index of the current episode (or the next one at a boundary).
    pub fn episode(&self) -> u64 {
        self.episode
    }

    /// Whether no episode is in progress (the only state the runner checkpoints online).
    pub fn at_episode_boundary(&self) -> bool {
        self.obs.is_none()
    }

    /// One env step: reset if needed, act, step, send the transition; returns the episode
    /// summary when this step ended it.
    pub fn step(&mut self, policy: &mut dyn Policy, sink: &mut dyn TransitionSink) -> Result<Option<EpisodeEnd>> {
        let obs = match self.obs.take() {
            Some(o) => o,
            None => {
                let seed = derive_seed(self.run_seed, stream::TRAIN_EPISODE, self.episode);
                self.ep_return = 0.0;
                self.ep_length = 0;
                self.env
                    .reset(Some(seed))
                    .with_context(|| format!("resetting {} for episode {}", self.env.spec().id, self.episode))?
            }
        };
        let action = policy.act(&obs)?;
        let step =
            self.env.step(&self.scale.to_env(&action)).with_context(|| format!("stepping {}", self.env.spec().id))?;
        // A robot stores what it executed (an operator's takeover, a clipped command), not
        // what the policy proposed.
        let action = match self.env.executed_action() {
            Some(executed) => self.scale.to_agent(executed),
            None => action,
        };
        self.ep_return += step.reward;
        self.ep_length += 1;
        sink.push(&Transition {
            obs,
            action,
            reward: step.reward,
            next_obs: step.obs.clone(),
            terminated: step.terminated,
            truncated: step.truncated,
            intervention: step.info.get("intervention") == Some(1.0),
        })?;
        if step.done() {
            self.episode += 1;
            return Ok(Some(EpisodeEnd { ret: self.ep_return, length: self.ep_length, success: step.info.success }));
        }
        self.obs = Some(step.obs);
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn action_scale_maps_box_ends_and_round_trips() {
        let s = ActionScale { low: vec![-3.0, 0.0], high: vec![3.0, 2.0] };
        assert_eq!(s.to_env(&[-1.0, 1.0]), vec![-3.0, 2.0]);
        assert_eq!(s.to_env(&[0.0, 0.0]), vec![0.0, 1.0]);
        assert_eq!(s.to_env(&[5.0, -5.0]), vec![3.0, 0.0]);
        let back = s.to_agent(&s.to_env(&[0.5, -0.25]));
        assert!((back[0] - 0.5).abs() < 1e-6 && (back[1] + 0.25).abs() < 1e-6);
        assert_eq!(s.to_agent(&[3.0, 0.0]), vec![1.0 - 1e-5, -1.0 + 1e-5]);
    }

    #[test]
    fn derived_seeds_differ_by_stream_and_index() {
        let a = derive_seed(0, stream::TRAIN_EPISODE, 0);
        assert_ne!(a, derive_seed(0, stream::TRAIN_EPISODE, 1));
        assert_ne!(a, derive_seed(0, stream::EVAL_EPISODE, 0));
        assert_ne!(a, derive_seed(1, stream::TRAIN_EPISODE, 0));
        assert_eq!(a, derive_seed(0, stream::TRAIN_EPISODE, 0));
    }
}
