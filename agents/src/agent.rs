//! The agent contract shared by every algorithm and by the runner.
//!
//! Agents act in the normalized action box `[-1, 1]^A`; the runner rescales to the env's
//! bounds. An agent's full state — weights, optimizer moments, temperature, step counters and
//! its random-number state — round-trips through `save`/`load`, so warm-starting an online
//! agent from an offline one and resuming a killed run are the same mechanism.

use crate::checkpoint::Stateful;
use o2o_datasets::TransitionBatch;
use tch::Tensor;

/// Named scalars produced by one update (`critic_loss`, `q_mean`, `alpha`, ...).
pub type Metrics = Vec<(&'static str, f64)>;

/// The keys an agent's metrics carry, declared by its config ([`crate::AgentConfig::metric_keys`],
/// each algorithm's beside its update), so what reads them (the viewer's layout) asks the agent
/// which panels apply instead of matching algorithm names. A test runs every algorithm's updates
/// and diagnostics and checks the declaration against the keys they return
/// (`config::tests::declared_metric_keys_are_the_logged_ones`): a loss that renames or adds a
/// key fails there until its declaration follows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetricKeys {
    /// Every key a training update returns ([`Agent::update`], or [`OnPolicy::update_rollout`]
    /// for an on-policy agent) over both phases. One update may return a subset: TD3+BC's actor
    /// terms come on its delayed steps only, WSRL's conservative terms offline only.
    pub update: Vec<&'static str>,
    /// Every key [`Agent::diagnose`] returns on a batch with Monte-Carlo returns (on one without,
    /// `mc_return` and `q_minus_mc` are left out).
    pub diagnose: Vec<&'static str>,
}

impl MetricKeys {
    /// Whether an update logs `key`.
    pub fn updates(&self, key: &str) -> bool {
        self.update.contains(&key)
    }

    /// Whether the diagnostics log `key`.
    pub fn diagnoses(&self, key: &str) -> bool {
        self.diagnose.contains(&key)
    }
}

/// The deterministic policy as a function of its own detached copy of the actor's weights:
/// observations `[B, obs_dim]` → actions `[B, act_dim]` in `[-1, 1]`, the same as
/// `act(obs, true)`. Made of plain libtorch ops, so tracing it gives a TorchScript module.
pub type DeterministicPolicy = Box<dyn Fn(&Tensor) -> Tensor + Send>;

/// Paired per-row values of a diagnostic batch, drawn as a scatter plot of `y` against `x`
/// (FamO2O: the balance model's β(s) against Q(s, a) and against the return-to-go).
#[derive(Debug, Clone, PartialEq)]
pub struct Scatter {
    /// Short name, e.g. `beta_vs_q` (the recording's entity under `diag/<source>/`).
    pub name: &'static str,
    /// What `x` holds, e.g. `Q(s, a)`.
    pub x_name: &'static str,
    /// What `y` holds, e.g. `β(s)`.
    pub y_name: &'static str,
    /// One value per row.
    pub x: Vec<f32>,
    /// One value per row, as many as `x`.
    pub y: Vec<f32>,
}

/// A reward bonus formed from the critic's own values on a batch: given `Q_i(s, a)` of every
/// member, `[E, B]` (no gradient), the bonus `[B]` to add to the batch's rewards before the TD
/// target (SERA's, [`crate::sera`]).
pub type RewardBonus<'a> = &'a mut dyn FnMut(&Tensor) -> Tensor;

/// `batch` with `bonus` `[B]` added to its rewards (the other columns shared).
pub(crate) fn with_bonus(batch: &TransitionBatch, bonus: &Tensor) -> TransitionBatch {
    let mut augmented = batch.map_columns(|t| t.shallow_clone());
    augmented.reward = &batch.reward + bonus.to_device(batch.reward.device()).to_kind(batch.reward.kind());
    augmented
}

/// Errors from saving, loading or building agents.
#[derive(Debug, thiserror::Error)]
#[allow(missing_docs)] // variant fields (path, name, expected, found) are self-describing
pub enum AgentError {
    /// A checkpoint could not be read or written, or does not belong to this agent.
    #[error("checkpoint {}: {message}", path.display())]
    Checkpoint { path: std::path::PathBuf, message: String },
    /// A checkpoint tensor has a different shape from the agent's.
    #[error("checkpoint {} does not fit this agent: tensor `{name}` has shape {found:?}, expected {expected:?}", path.display())]
    ShapeMismatch { path: std::path::PathBuf, name: String, expected: Vec<i64>, found: Vec<i64> },
    /// A checkpoint lacks a tensor the agent needs.
    #[error("checkpoint {} is missing tensor `{name}`", path.display())]
    MissingTensor { path: std::path::PathBuf, name: String },
    /// A configuration value is invalid (the message names the field).
    #[error("invalid configuration: {0}")]
    Config(String),
    /// An error from libtorch.
    #[error(transparent)]
    Torch(#[from] tch::TchError),
    /// A file-system error.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Which part of an offline-to-online run the next updates belong to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Updates on the offline dataset only.
    Offline,
    /// Updates once the agent acts in the env (online data, possibly mixed with offline data).
    Online,
}

/// What the on-policy loop (PPO, Uni-O4 online) needs from an agent besides [`Agent`]: a value
/// function, log-probabilities at collection time, its own observation normalization, and an
/// update on a whole rollout (K epochs of minibatches, inside the agent so the shuffles come
/// from its checkpointed random stream).
pub trait OnPolicy {
    /// `ŝ` for raw observations `[B, obs_dim]`, folding them into the running statistics first
    /// when `update_stats` (and the statistics are not frozen).
    fn normalize_obs(&mut self, raw: &Tensor, update_stats: bool) -> Tensor;
    /// Freeze the normalization at a dataset's per-dimension mean and std, when the agent's
    /// normalization mode asks for dataset statistics; returns whether it did.
    fn use_dataset_stats(&mut self, mean: &[f32], std: &[f32]) -> bool;
    /// For normalized observations `[B, obs_dim]`: a sampled action `[B, act_dim]`, its
    /// `log π(a|s)` `[B]` and `V(s)` `[B]`, without gradients.
    fn act_value(&mut self, obs: &Tensor) -> (Tensor, Tensor, Tensor);
    /// `V(s)` `[B]` of normalized observations, without gradients.
    fn value(&mut self, obs: &Tensor) -> Tensor;
    /// One update on a full rollout whose observations are normalized; `env_step` of
    /// `total_env_steps` is where the run stands (the learning-rate schedule).
    fn update_rollout(&mut self, rollout: &o2o_datasets::RolloutBuffer, env_step: u64, total_env_steps: u64)
        -> Metrics;
}

/// An RL agent. Its name, full-state `save`/`load` and partial `load_parts` come from
/// [`Stateful`], which lists the agent's parts once.
pub trait Agent: Stateful + Send {
    /// The discount γ of the agent's TD targets or returns, the one potential-based reward
    /// shaping must use to keep the optimal policy; `None` for an agent that learns no value
    /// (BC).
    fn gamma(&self) -> Option<f64>;
    /// Actions for a batch of observations `[B, obs_dim]` → `[B, act_dim]` in `[-1, 1]`.
    /// `deterministic` takes the policy's mode (evaluation); otherwise a sample.
    fn act(&mut self, obs: &Tensor, deterministic: bool) -> Tensor;
    /// One update on a batch; returns what to log.
    fn update(&mut self, batch: &TransitionBatch) -> Metrics;
    /// Tell the agent which phase the next updates belong to, so it applies its paired settings
    /// (e.g. Cal-QL's calibration on or off online). Idempotent; the runner calls it whenever the
    /// phase changes and when a run (re)starts. Most algorithms ignore it.
    fn set_phase(&mut self, phase: Phase) {
        let _ = phase;
    }
    /// Called once, just before the first env step that follows offline training (in the same
    /// run, or in a run started from an offline parent): the offline→online switch. WSRL resets
    /// its optimizers here when asked to. Not called again when a run resumes past the switch.
    fn begin_online(&mut self) {}
    /// The deterministic policy, detached from training (what `o2o export` writes as
    /// TorchScript); `None` when the agent cannot give one.
    fn deterministic_policy(&self) -> Option<DeterministicPolicy> {
        None
    }
    /// The same deterministic policy as data: its layers, with copies of the weights it acts
    /// with (what `o2o export --to onnx` writes). `None` when the agent does not describe its
    /// policy as layers of [`crate::nn::PolicyGraph`].
    fn policy_graph(&self) -> Option<crate::nn::PolicyGraph> {
        None
    }
    /// How [`Agent::deterministic_policy`] normalizes observations before its network: `none`
    /// (it takes them as the env gives them), or what it applies (an exported module carries it,
    /// and its `policy.json` says so).
    fn observation_normalization(&self) -> String {
        "none".into()
    }
    /// `Q_i(s, a)` of every critic member, `[E, B]`, for observations `[B, obs_dim]` and
    /// actions `[B, act_dim]`, without gradients, dropout or a draw from the agent's random
    /// stream: what SERA's bonus conditions on ([`crate::sera`]). `None` when the agent has no
    /// state-action critic.
    fn critic_values(&self, obs: &Tensor, action: &Tensor) -> Option<Tensor> {
        let _ = (obs, action);
        None
    }
    /// One update on `batch` with `bonus(Q(s, a))` added to its rewards, `Q` being the critic
    /// before this update (so the bonus conditions on the critic being fine-tuned, as of this
    /// step). `None` when the agent has no critic ([`Agent::critic_values`]). The default makes
    /// one extra critic pass; SAC and its variants take `Q` from the critic step's own forward
    /// pass instead (the same values, one pass fewer).
    fn update_with_bonus(&mut self, batch: &TransitionBatch, bonus: RewardBonus<'_>) -> Option<Metrics> {
        let q = self.critic_values(&batch.obs, &batch.action)?;
        Some(self.update(&with_bonus(batch, &bonus(&q))))
    }
    /// The on-policy half of an on-policy agent (PPO): the runner then collects rollouts from a
    /// vector env instead of filling a replay buffer. `None` for off-policy agents.
    fn on_policy(&mut self) -> Option<&mut dyn OnPolicy> {
        None
    }
    /// The offline data's per-number observation mean and standard deviation, given once by the
    /// runner before the first update of a fresh agent, for algorithms that normalize states
    /// with them (TD3+BC, BC). Others ignore it.
    fn set_state_stats(&mut self, mean: &[f32], std: &[f32]) -> Result<(), AgentError> {
        let _ = (mean, std);
        Ok(())
    }
    /// Read-only diagnostics on `batch` (no update, no draw from the agent's random stream):
    /// e.g. `q` (ensemble-mean Q(s, a) on the batch's actions), `mc_return` and `q_minus_mc`
    /// (on rows with a finite Monte-Carlo return), `entropy` (−E log π(ã|s)) and `alpha`.
    /// The runner logs them under `diag/<source>/` around the offline→online switch.
    fn diagnose(&mut self, batch: &TransitionBatch) -> Metrics {
        let _ = batch;
        Metrics::new()
    }
    /// Read-only per-row diagnostics on `batch` for scatter plots (no update, no draw from the
    /// agent's random stream); the runner draws them under `diag/<source>/<name>` at every
    /// evaluation. Empty for most algorithms.
    fn diagnose_rows(&mut self, batch: &TransitionBatch) -> Vec<Scatter> {
        let _ = batch;
        Vec::new()
    }
    /// What the last `act` call chose besides the actions, one value per row (FamO2O: `beta`,
    /// the balance coefficient of each state); the runner draws it along evaluation episodes.
    /// Empty for most algorithms.
    fn act_info(&self) -> Vec<(&'static str, Vec<f32>)> {
        Vec::new()
    }
}
