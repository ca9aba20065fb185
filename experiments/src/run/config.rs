//! The resolved run configuration: a preset TOML plus `--set key=value` overrides.
//!
//! A run's whole behaviour is this one struct, written verbatim to `config.toml` in the run
//! directory before the first step; `o2o resume` reads it back from there. Unknown keys are
//! errors everywhere (`deny_unknown_fields`), so a typo in a preset or a `--set` never passes
//! silently. The `[agent]` table is the algorithm's own config (`SacConfig`, `IqlConfig` in
//! `o2o_agents`); it is validated by the agents crate when the run is resolved.

use anyhow::{bail, Context, Result};
use o2o_agents::sera::SeraConfig;
use o2o_agents::AgentConfig;
use o2o_datasets::imaginebench::Rows;
use o2o_datasets::scores::RewardPreset;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Everything a run does.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RunConfig {
    /// Preset name the run was made from (names the run directory).
    pub preset: String,
    /// Algorithm: `sac`, `iql`, `cql`, `calql` or `rlpd`.
    pub algo: String,
    /// Env id for online steps and evaluation, e.g. `Hopper-v5` or `hopper-v2`.
    pub env: String,
    /// The run seed; every random source is derived from it.
    #[serde(default)]
    pub seed: u64,
    /// Offline data, for offline training and for mixing into online batches.
    #[serde(default)]
    pub dataset: Option<DatasetConfig>,
    /// How many steps of each kind, batch sizes, replay.
    #[serde(default)]
    pub train: TrainConfig,
    /// Deterministic evaluation.
    #[serde(default)]
    pub eval: EvalConfig,
    /// Checkpoint cadence.
    #[serde(default)]
    pub checkpoint: CheckpointConfig,
    /// Read-only diagnostics around the offline→online switch.
    #[serde(default)]
    pub diagnostics: DiagnosticsConfig,
    /// SERA's Q-conditioned state-entropy bonus on online batches (off by default; see
    /// [`o2o_agents::sera::SeraConfig`] for every field).
    #[serde(default)]
    pub sera: SeraConfig,
    /// How online batches are drawn from the replay buffer: hindsight relabelling (HER) on
    /// goal-conditioned tasks (off by default).
    #[serde(default, skip_serializing_if = "ReplayConfig::is_default")]
    pub replay: ReplayConfig,
    /// Dopamine-style shaping of online rewards with a progress model (off when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shaping: Option<ShapingConfig>,
    /// The on-policy loop's vector env and rollout length (PPO; unused by off-policy agents).
    #[serde(default, skip_serializing_if = "RolloutConfig::is_default")]
    pub rollout: RolloutConfig,
    /// Where this run starts from, for fine-tuning runs.
    #[serde(default)]
    pub parent: Option<ParentConfig>,
    /// ImagineBench env settings (instruction pairing, where the sentence vectors come from),
    /// for `imaginebench-mujoco-*` envs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imaginebench: Option<ImagineBenchRunConfig>,
    /// The algorithm's hyperparameters: the agents crate's config for `algo`, parsed once when
    /// the config is resolved, with every default filled in and validated, so nothing parses
    /// `[agent]` again. Written as the `[agent]` table without its `algo` tag (the top-level
    /// `algo` names the algorithm): see [`agent_table`].
    #[serde(with = "agent_table")]
    pub agent: AgentConfig,
}

/// How [`RunConfig::agent`] is written and read. The agents crate's [`AgentConfig`] is tagged by
/// `algo` inside its table, but a run config carries `algo` once, at the top, so `[agent]` is
/// written without the tag. A field's deserializer sees no other field, so
/// [`RunConfig::from_table`] copies the top-level `algo` into `[agent]` before serde reads it
/// (`tag_agent_table`); a table without the tag is refused with a message saying so.
///
/// This is the smallest form that keeps the parsed config in the struct: the written
/// `config.toml` is byte for byte the one of a run config that held `[agent]` as a raw table
/// (`every_preset_writes_the_config_toml_of_its_fixture`), and `--set agent.x=…` overrides keep
/// working on the table before it is parsed.
mod agent_table {
    use o2o_agents::AgentConfig;
    use serde::de::Error as _;
    use serde::ser::Error as _;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(agent: &AgentConfig, s: S) -> Result<S::Ok, S::Error> {
        let mut table = match agent.to_toml().map_err(S::Error::custom)? {
            toml::Value::Table(t) => t,
            other => return Err(S::Error::custom(format!("the agent config is a {}, not a table", other.type_str()))),
        };
        table.remove("algo");
        table.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<AgentConfig, D::Error> {
        let table = toml::Table::deserialize(d)?;
        let Some(algo) = table.get("algo").and_then(|a| a.as_str()).map(str::to_string) else {
            return Err(D::Error::custom(
                "section [agent] needs the run's `algo`: read a run config with RunConfig::from_table or from_toml_str",
            ));
        };
        AgentConfig::from_toml(toml::Value::Table(table))
            .map_err(|e| D::Error::custom(format!("section [agent] for algo {algo:?}: {e}")))
    }
}

/// `[imaginebench]`: how the ImagineBench env of a run shows instructions.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ImagineBenchRunConfig {
    /// `fixed` (jump-forward shows the forward jump sentences) or `released` (the released
    /// code's swapped pairing, formats.md §3.3).
    pub instructions: String,
    /// Where sentence vectors come from: `auto` (the dataset file's table when it has one, else
    /// the built-in encoding), `builtin`, `dataset` (the dataset file's table, required), or the
    /// path of a converted table (`scripts/imaginebench_convert.py --encodings …`).
    pub embeddings: String,
    /// Size of the built-in encoding, when it is used (768 = the release table's size; the
    /// small presets use 64, so CPU runs spend less on the first layer).
    pub builtin_dim: usize,
}

impl ImagineBenchRunConfig {
    /// Checks of `[imaginebench]` that serde cannot express.
    pub fn validate(&self) -> Result<()> {
        if !matches!(self.instructions.as_str(), "fixed" | "released") {
            bail!("key `imaginebench.instructions`: expected \"fixed\" or \"released\", found {:?}", self.instructions);
        }
        if self.builtin_dim == 0 {
            bail!("key `imaginebench.builtin_dim`: expected at least 1, found 0");
        }
        if self.embeddings.is_empty() {
            bail!("key `imaginebench.embeddings`: expected \"auto\", \"builtin\", \"dataset\" or a file path, found an empty string");
        }
        Ok(())
    }
}

impl Default for ImagineBenchRunConfig {
    fn default() -> Self {
        Self { instructions: "fixed".into(), embeddings: "auto".into(), builtin_dim: o2o_envs::imaginebench::EMBED_DIM }
    }
}

/// Offline data: a registry id, a file, or a dataset handed to the run in memory.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DatasetConfig {
    /// A D4RL registry id, e.g. `hopper-medium-v2` (resolved in the dataset cache).
    #[serde(default)]
    pub id: Option<String>,
    /// A file: a D4RL-format HDF5 file, or a replay buffer saved by a run's checkpoint.
    #[serde(default)]
    pub path: Option<PathBuf>,
    /// Reward preprocessing applied to offline and online rewards alike, a preset of the datasets
    /// crate: `none`, `iql-locomotion` (r · 1000 / (R_max − R_min) over the dataset's
    /// episodes, §6.1), `antmaze-minus-one`, `calql-antmaze`, `adroit-binary`,
    /// `kitchen-minus-four` (§7.4).
    #[serde(default)]
    pub reward: RewardPreset,
    /// How rows become transitions: `qlearning` (exactly `d4rl.qlearning_dataset`, for parity
    /// with published numbers) or `corrected` (keeps each episode's last transition, using the
    /// file's `next_observations`).
    #[serde(default)]
    pub transitions: TransitionRule,
    /// The data was handed to the run in memory ([`Run::dataset`](super::builder::Run::dataset)),
    /// not read from a file; the manifest records its content hash, and resuming the run needs
    /// the same data again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub in_memory: bool,
    /// The file's layout: `d4rl` (default), `imaginebench` (an ImagineBench file converted by
    /// `scripts/imaginebench_convert.py` or made by `o2o dataset make-benchmark imaginebench-mujoco`)
    /// or `lerobot` (a LeRobotDataset v3.0 or v2.1 folder; a `path` folder with `meta/info.json`
    /// is read as one without saying so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<DatasetFormat>,
    /// LeRobot folders: which features are the observation, action, reward, termination and
    /// intervention flags (`[dataset.lerobot]`, keys `observation` (a list), `action`, `reward`,
    /// `done`, `intervention`; defaults `observation.state`, `action`, `next.reward`,
    /// `next.done`, `complementary_info.is_intervention`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lerobot: Option<o2o_datasets::lerobot::LeRobotKeys>,
    /// ImagineBench: which rollouts to train on, `real`, `imaginary` or `both` (default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<Rows>,
    /// Recompute the rewards before anything else: `adroit-binary` gives D4RL-layout Adroit data
    /// (`{pen,door,relocate}-*-v1` files) the binary reward of the `*-binary-v0` tasks,
    /// `1[success(s')] − 1`, with Cal-QL's episode processing (episodes without a success
    /// dropped, the rest cut after their last success, success rows terminal;
    /// [`o2o_datasets::adroit_binary`]). Unset: the file's rewards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relabel: Option<Relabel>,
    /// ImagineBench with `rows = "both"`: the fraction of each batch drawn from the real rows
    /// (the paper's 1:1 is 0.5); unset = the released code's mix, uniform over all rows
    /// (proportional to the two sizes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub real_fraction: Option<f64>,
}

/// How dataset rows become transitions ([`DatasetConfig::transitions`]).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum TransitionRule {
    /// Exactly `d4rl.qlearning_dataset`, for parity with published numbers.
    #[default]
    Qlearning,
    /// Each episode's last transition kept, with the file's `next_observations`.
    Corrected,
}

/// The layout of a dataset ([`DatasetConfig::format`]).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum DatasetFormat {
    /// D4RL's HDF5 layout.
    D4rl,
    /// An ImagineBench file in o2o's layout.
    ImagineBench,
    /// A LeRobotDataset folder.
    LeRobot,
}

/// A recomputation of the dataset's rewards ([`DatasetConfig::relabel`]).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Relabel {
    /// Adroit's binary reward `1[success(s')] − 1` with Cal-QL's episode processing.
    AdroitBinary,
}

impl DatasetConfig {
    /// Whether the data is a LeRobotDataset folder: `format = "lerobot"`, or no format and a
    /// `path` folder with `meta/info.json`.
    pub fn is_lerobot(&self) -> bool {
        match self.format {
            Some(f) => f == DatasetFormat::LeRobot,
            None => self.path.as_deref().is_some_and(o2o_datasets::lerobot::is_lerobot_dir),
        }
    }

    /// Whether the file is in ImagineBench's layout.
    pub fn is_imaginebench(&self) -> bool {
        self.format == Some(DatasetFormat::ImagineBench)
    }

    /// Checks of an ImagineBench `[dataset]` section.
    fn validate_imaginebench(&self) -> Result<()> {
        if self.in_memory || self.path.is_none() {
            bail!(
                "section [dataset] with format = \"imaginebench\": expected `path` (an ImagineBench file), found {}",
                if self.in_memory { "in_memory = true" } else { "no path" }
            );
        }
        let rows = self.rows.unwrap_or(Rows::All);
        if let Some(f) = self.real_fraction {
            if rows != Rows::All {
                bail!("key `dataset.real_fraction` needs rows = \"both\", found rows = {:?}", rows.name());
            }
            if !(0.0..=1.0).contains(&f) {
                bail!("key `dataset.real_fraction`: expected a number in [0, 1], found {f}");
            }
        }
        if self.reward != RewardPreset::None {
            bail!(
                "key `dataset.reward`: ImagineBench data takes \"none\" (its rewards are the task's own), found {:?}",
                self.reward.name()
            );
        }
        Ok(())
    }
}

/// Step counts and data settings.
///
/// The run is a sequence of phases (see `phases.rs`), built from these counts in this order:
/// offline gradient steps, uniformly random env steps, frozen-policy env steps, online steps.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TrainConfig {
    /// Gradient steps on the offline dataset.
    pub offline_steps: u64,
    /// Env steps with uniformly random actions and no updates (SAC's "learning starts").
    pub random_steps: u64,
    /// Env steps with the current policy and no updates (WSRL's warm-up).
    pub warmup_steps: u64,
    /// Env steps with updates.
    pub online_steps: u64,
    /// Transitions per gradient step.
    pub batch_size: usize,
    /// Transitions per online gradient step when it differs from offline (WSRL: 256 offline,
    /// 1024 online); 0 = `batch_size`.
    pub online_batch_size: usize,
    /// Gradient steps per online env step (update-to-data ratio).
    pub updates_per_step: usize,
    /// Fraction of each online batch drawn from the offline dataset (0 = online data only),
    /// with `offline_mix = "fixed"`.
    pub offline_ratio: f64,
    /// How online batches mix in the dataset: `fixed` (`offline_ratio` of every batch, RLPD,
    /// Cal-QL) or `proportional` (uniform over the dataset and the online data together, as one
    /// replay buffer pre-filled with the dataset: the offline share decays from 1 to N/(N+t);
    /// IQL's and CORL's fine-tuning).
    pub offline_mix: OfflineMix,
    /// Online replay capacity (transitions).
    pub replay_capacity: usize,
    /// Also write every env transition of the run to `dataset.hdf5` (D4RL format) in the run
    /// directory, e.g. to train offline agents on a SAC run's experience.
    pub record_dataset: bool,
    /// Log training metrics every this many loop steps.
    pub log_every: u64,
    /// Fraction of each online batch drawn from the intervention buffer (HIL-SERL): the
    /// transitions in which an operator took over the robot, kept in a replay buffer of their
    /// own as well as in the online one; 0 = no intervention buffer. While it is empty the
    /// whole batch comes from the other sources.
    pub intervention_share: f64,
}

/// How online batches mix in the offline dataset ([`TrainConfig::offline_mix`]).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum OfflineMix {
    /// `offline_ratio` of every batch.
    #[default]
    Fixed,
    /// Uniform over the union of the dataset and the online buffer.
    Proportional,
}

impl TrainConfig {
    /// Whether online batches draw on the offline dataset.
    pub fn mixes_offline_data(&self) -> bool {
        self.offline_mix == OfflineMix::Proportional || self.offline_ratio > 0.0
    }

    /// The key that makes the run train on offline rows (`train.offline_steps`,
    /// `train.offline_mix` or `train.offline_ratio`), `None` when it trains on none.
    pub fn offline_share_key(&self) -> Option<&'static str> {
        if self.offline_steps > 0 {
            Some("train.offline_steps")
        } else if self.offline_mix == OfflineMix::Proportional {
            Some("train.offline_mix")
        } else if self.offline_ratio > 0.0 {
            Some("train.offline_ratio")
        } else {
            None
        }
    }
}

impl Default for TrainConfig {
    fn default() -> Self {
        Self {
            offline_steps: 0,
            random_steps: 0,
            warmup_steps: 0,
            online_steps: 0,
            batch_size: 256,
            online_batch_size: 0,
            updates_per_step: 1,
            offline_ratio: 0.0,
            offline_mix: OfflineMix::Fixed,
            replay_capacity: 1_000_000,
            record_dataset: false,
            log_every: 1000,
            intervention_share: 0.0,
        }
    }
}

/// `[replay]`: hindsight experience replay on the online buffer (Andrychowicz et al. 2017).
/// With `her = "future"`, each sampled online row gets, with probability 1 − 1/(1 + k), the
/// goal achieved at a later-or-equal step of its own episode, and its reward recomputed with the
/// env's reward function (`o2o_datasets::replay::Her`). Needs a goal-conditioned env (the Fetch
/// tasks); offline rows are not relabelled.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ReplayConfig {
    /// `none` or `future`.
    pub her: HerMode,
    /// k, relabelled goals per real one: p = 1 − 1/(1 + k) (the paper's k = 4: 80%).
    pub her_k: f64,
    /// Sample online rows of finished episodes only (`true`), or every stored row, the episode
    /// in progress included (`false`). Unset: `true` for agents that use MC returns (Cal-QL), as
    /// WSRL's and Cal-QL's official buffers do, so every sampled row has its return
    /// (fidelity-audit D13), and for HER runs, as SB3's HER buffer samples finished episodes
    /// only, so no row is relabelled with a goal of the episode still running
    /// (fidelity-audit-2 E13); `false` for the others.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub closed_episodes_only: Option<bool>,
}

/// Hindsight relabelling strategy ([`ReplayConfig::her`]).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum HerMode {
    /// Rows are sampled as stored.
    #[default]
    None,
    /// The goal achieved at a uniformly drawn later-or-equal step of the same episode.
    Future,
}

impl Default for ReplayConfig {
    fn default() -> Self {
        Self { her: HerMode::None, her_k: 4.0, closed_episodes_only: None }
    }
}

impl ReplayConfig {
    /// Whether every field is the default (then it is left out of a written config).
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// Whether HER is on.
    pub fn her_enabled(&self) -> bool {
        self.her != HerMode::None
    }

    /// Whether online batches leave out the episode in progress, for an agent that does or does
    /// not use MC returns ([`ReplayConfig::closed_episodes_only`]; unset: yes with MC returns or
    /// HER).
    pub fn closed_episodes_only_for(&self, agent_uses_mc_returns: bool) -> bool {
        self.closed_episodes_only.unwrap_or(agent_uses_mc_returns || self.her_enabled())
    }
}

/// Deterministic evaluation settings.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct EvalConfig {
    /// Evaluate every this many loop steps (gradient steps offline, env steps online); 0 = only
    /// at the end.
    pub every: u64,
    /// Episodes per evaluation.
    pub episodes: usize,
    /// Also evaluate before the first step (fine-tuning runs do, to show the starting point).
    pub at_start: bool,
    /// Also evaluate when a phase ends (end of offline training, end of warm-up); these
    /// results are kept in `summary.json` as `phase_evals`.
    pub at_phase_end: bool,
}

impl Default for EvalConfig {
    fn default() -> Self {
        Self { every: 5000, episodes: 10, at_start: false, at_phase_end: true }
    }
}

/// Read-only diagnostics (the agent's `diagnose` on a batch of online data and on a batch of
/// the dataset): Q against Monte-Carlo returns, Q on dataset actions, policy entropy and
/// temperature, under `diag/online/` and `diag/offline/`. Taken at every evaluation, every
/// `every` loop steps, and every `dense_every` steps within `window` steps of the
/// offline→online switch (where WSRL's Q-values move fastest).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DiagnosticsConfig {
    /// Loop steps between diagnostics; 0 = none at all.
    pub every: u64,
    /// Loop steps before and after the switch with dense diagnostics.
    pub window: u64,
    /// Loop steps between diagnostics inside the window.
    pub dense_every: u64,
    /// Rows per diagnostic batch.
    pub batch: usize,
}

impl Default for DiagnosticsConfig {
    fn default() -> Self {
        Self { every: 5000, window: 5000, dense_every: 500, batch: 1024 }
    }
}

impl TrainConfig {
    /// Rows of an online gradient step's batch.
    pub fn online_batch(&self) -> usize {
        if self.online_batch_size == 0 {
            self.batch_size
        } else {
            self.online_batch_size
        }
    }
}

/// The on-policy loop (PPO): `num_envs` envs stepped together by a vector env on `threads`
/// threads, `steps` steps of each per rollout (a rollout is `steps × num_envs` transitions;
/// `train.online_steps` counts env steps over all envs, rounded up to whole rollouts).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct RolloutConfig {
    /// Envs stepped together.
    pub num_envs: usize,
    /// Steps per env per rollout (T).
    pub steps: usize,
    /// Threads stepping the envs (the caller's included).
    pub threads: usize,
}

impl Default for RolloutConfig {
    fn default() -> Self {
        Self { num_envs: 1, steps: 2048, threads: 1 }
    }
}

impl RolloutConfig {
    /// Whether every field is the default (then it is left out of a written config).
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// Transitions per rollout.
    pub fn rows(&self) -> u64 {
        (self.num_envs * self.steps) as u64
    }
}

/// Checkpoint settings.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct CheckpointConfig {
    /// Checkpoint every this many loop steps (online: at the first episode end after that);
    /// 0 = only at the end.
    pub every: u64,
    /// How many of the newest checkpoints to keep.
    pub keep: usize,
}

impl Default for CheckpointConfig {
    fn default() -> Self {
        Self { every: 10_000, keep: 2 }
    }
}

/// `[shaping]`: online transitions get r' = r_gold + γΦ(s') − Φ(s) (`mode = "pbrs"`, Φ := 0
/// after a true termination, kept at truncation, γ = the built agent's discount), or for
/// comparison the naive r_gold + Φ(s') − Φ(s) (`mode = "naive"`) or the per-step progress
/// reward r_gold + λΦ(s') (`mode = "progress"`, Φ := 0 after a true termination), as they are
/// stored; Φ is a progress model from `o2o reward train` (`potential = "model"`) or the task's
/// true goal distance 1 − d/d₀ (`potential = "goal-distance"`). A section with `enabled =
/// false` stores the env's rewards, and its Φ is still logged along evaluation episodes. The `[dataset]` rows are shaped the same way at
/// load (same model, γ and terminal convention, episode by episode), so every row of a mixed
/// batch carries its F; where a dataset cannot be shaped at load (ImagineBench's), a nonzero
/// offline share is refused naming its key. Evaluation is not shaped. Use it with
/// `[dataset] reward = "none"`: a reward shift applied after shaping would break the
/// invariance.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ShapingConfig {
    /// Shape at all (`false`: the section is kept but rewards are the env's, the sparse
    /// baseline of a comparison).
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// The progress-model file (needed with `potential = "model"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<PathBuf>,
    /// `pbrs`, `naive` or `progress`.
    #[serde(default = "default_shaping_mode")]
    pub mode: o2o_reward_models::ShapingMode,
    /// What Φ is: `model` (the progress model, default) or `goal-distance` (Φ = 1 − d/d₀ with d
    /// the achieved-to-desired goal distance of a goal-conditioned env, the Fetch tasks: the
    /// true distance to go, a ceiling for a learned Φ).
    #[serde(default, skip_serializing_if = "PotentialKind::is_model")]
    pub potential: PotentialKind,
    /// d₀ of `potential = "goal-distance"`, in the goal's units (m): Φ = 0 at that distance.
    /// Default 0.25, about FetchReach's largest initial goal distance (offsets U(−0.15, 0.15)³).
    #[serde(default = "default_distance_scale")]
    pub distance_scale: f64,
    /// λ of `mode = "progress"` (r' = r_gold + λΦ(s')).
    #[serde(default = "default_progress_scale")]
    pub scale: f64,
    /// r_gold: `env` (the env's reward) or `success` (1 when Φ(s') ≥ 1 − δ).
    #[serde(default = "default_gold")]
    pub gold: o2o_reward_models::GoldReward,
    /// Which estimate is Φ. Default `backward` (goal-anchored, 1 + H(goal, s)): the only Markov
    /// one, a function of the state alone, as potential-based shaping needs for its guarantee.
    /// History-dependent options (the shaped reward then depends on the path, and the guarantee
    /// no longer holds): `incremental` (the whole path), `forward` (anchored at the episode's
    /// first state), `mean` (the three averaged), `weighted` (the consistency-weighted update).
    #[serde(default)]
    pub fusion: Option<o2o_reward_models::Fusion>,
}

/// `[shaping] potential`: where Φ comes from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PotentialKind {
    /// The progress model of `model`.
    #[default]
    Model,
    /// 1 − ‖achieved − desired goal‖ / `distance_scale`, from the env's goal layout.
    GoalDistance,
}

impl PotentialKind {
    fn is_model(&self) -> bool {
        *self == PotentialKind::Model
    }
}

impl Default for ShapingConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            model: None,
            mode: default_shaping_mode(),
            potential: PotentialKind::Model,
            distance_scale: default_distance_scale(),
            scale: default_progress_scale(),
            gold: default_gold(),
            fusion: None,
        }
    }
}

impl ShapingConfig {
    /// The estimate used as Φ: `fusion`, or the Markov `backward` when unset.
    pub fn fusion(&self) -> o2o_reward_models::Fusion {
        self.fusion.unwrap_or(o2o_reward_models::Fusion::Backward)
    }

    /// Checks serde cannot express: a model for `potential = "model"`, a positive d₀, a finite λ.
    pub fn validate(&self) -> Result<()> {
        if self.potential == PotentialKind::Model && self.model.is_none() {
            bail!("key `shaping.model`: expected the progress-model file (potential = \"model\"), found none; or set shaping.potential = \"goal-distance\"");
        }
        if !(self.distance_scale.is_finite() && self.distance_scale > 0.0) {
            bail!("key `shaping.distance_scale`: expected a distance > 0, found {}", self.distance_scale);
        }
        if !self.scale.is_finite() {
            bail!("key `shaping.scale`: expected a finite number, found {}", self.scale);
        }
        Ok(())
    }
}

fn default_distance_scale() -> f64 {
    0.25
}

fn default_progress_scale() -> f64 {
    1.0
}

fn default_true() -> bool {
    true
}

fn default_shaping_mode() -> o2o_reward_models::ShapingMode {
    o2o_reward_models::ShapingMode::Pbrs
}

fn default_gold() -> o2o_reward_models::GoldReward {
    o2o_reward_models::GoldReward::Env
}

/// The run a fine-tuning run starts from.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ParentConfig {
    /// The parent run directory.
    pub run_dir: PathBuf,
    /// The parent's checkpoint whose agent state this run loads.
    pub checkpoint: PathBuf,
}

impl RunConfig {
    /// Parse a whole config from TOML text; `origin` names the text in errors
    /// ([`Error::BadConfig`](crate::Error::BadConfig)).
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Self, crate::Error> {
        let table = toml::from_str(text).with_context(|| format!("{origin} is not valid TOML"));
        table.and_then(|table| Self::from_table(table, origin)).map_err(|e| crate::Error::bad_config(origin, e))
    }

    /// Build from a TOML table, checking every key and value, and complete `[agent]` with the
    /// algorithm's defaults so the resolved config names every hyperparameter.
    pub fn from_table(table: toml::Table, origin: &str) -> Result<Self> {
        let config = Self::from_table_without_steps(table, origin)?;
        config.check_has_steps().with_context(|| format!("invalid config in {origin}"))?;
        Ok(config)
    }

    /// [`RunConfig::from_table`] for a config whose step counts are still to be set (a
    /// [`Run`](super::builder::Run) before `fit` or `fit_online`): every check but "has steps".
    pub fn from_table_without_steps(mut table: toml::Table, origin: &str) -> Result<Self> {
        let invalid = || format!("invalid config in {origin}");
        tag_agent_table(&mut table).with_context(invalid)?;
        let config: RunConfig = toml::Value::Table(table).try_into().with_context(invalid)?;
        config.validate_values().with_context(invalid)?;
        if config.agent.is_on_policy() {
            config.check_on_policy().with_context(invalid)?;
        }
        Ok(config)
    }

    /// Read `config.toml` from a run directory (or any config file): an
    /// [`Error::BadConfig`](crate::Error::BadConfig) naming it when it cannot be read or used.
    pub fn read(path: &Path) -> Result<Self, crate::Error> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {origin}"));
        Self::from_toml_str(&text.map_err(|e| crate::Error::bad_config(&origin, e))?, &origin)
    }

    /// The config as TOML text.
    pub fn to_toml_string(&self) -> Result<String> {
        toml::to_string_pretty(self).context("cannot write the config as TOML")
    }

    /// Checks that serde cannot express: values in range, combinations that make sense, and at
    /// least one step.
    pub fn validate(&self) -> Result<()> {
        self.validate_values()?;
        self.check_has_steps()
    }

    /// What an on-policy agent's run can do: online steps only, from a vector env of at least
    /// one env and one step per rollout.
    fn check_on_policy(&self) -> Result<()> {
        let t = &self.train;
        if t.offline_steps + t.random_steps + t.warmup_steps > 0 || t.mixes_offline_data() {
            bail!(
                "algo `{}` learns on-policy from its own rollouts: train.offline_steps, train.random_steps, train.warmup_steps and train.offline_ratio must be 0 and train.offline_mix \"fixed\", found {}, {}, {}, {}, {:?}",
                self.algo, t.offline_steps, t.random_steps, t.warmup_steps, t.offline_ratio, t.offline_mix
            );
        }
        if t.intervention_share > 0.0 {
            bail!("algo `{}` is on-policy: train.intervention_share must be 0 (an intervention buffer is for off-policy learners), found {}", self.algo, t.intervention_share);
        }
        if t.record_dataset || self.sera.enabled || self.shaping.as_ref().is_some_and(|s| s.enabled) {
            bail!("algo `{}` is on-policy: train.record_dataset, [sera] and [shaping] are not supported", self.algo);
        }
        if self.replay.her_enabled() {
            bail!(
                "algo `{}` is on-policy and has no replay buffer: key `replay.her` must be \"none\", found {:?}",
                self.algo,
                self.replay.her
            );
        }
        if let Some(v) = self.replay.closed_episodes_only {
            bail!(
                "algo `{}` is on-policy and has no replay buffer: remove key `replay.closed_episodes_only` (found {v})",
                self.algo
            );
        }
        if matches!(self.agent, AgentConfig::Unio4(_)) && self.dataset.is_none() {
            bail!("algo `unio4` trains offline on a dataset first: add a [dataset] section");
        }
        let r = &self.rollout;
        if r.num_envs == 0 || r.steps == 0 || r.threads == 0 {
            bail!(
                "section [rollout]: num_envs, steps and threads must be at least 1, found {}, {}, {}",
                r.num_envs,
                r.steps,
                r.threads
            );
        }
        Ok(())
    }

    /// The run has at least one step of some kind.
    fn check_has_steps(&self) -> Result<()> {
        let t = &self.train;
        // Uni-O4's offline stages count their own steps in [agent]: an offline-only run is one.
        let unio4 = matches!(self.agent, AgentConfig::Unio4(_));
        if t.offline_steps + t.random_steps + t.warmup_steps + t.online_steps == 0 && !unio4 {
            bail!("the run has no steps: set train.offline_steps or train.online_steps");
        }
        Ok(())
    }

    /// [`RunConfig::validate`] without the step check.
    fn validate_values(&self) -> Result<()> {
        if self.agent.algo() != self.algo {
            bail!("key `algo` is {:?} but [agent] holds the config of {:?}", self.algo, self.agent.algo());
        }
        self.agent.validate().with_context(|| format!("section [agent] for algo {:?}", self.algo))?;
        let t = &self.train;
        if t.batch_size == 0 {
            bail!("key `train.batch_size`: expected at least 1, found 0");
        }
        if t.updates_per_step == 0 {
            bail!("key `train.updates_per_step`: expected at least 1, found 0");
        }
        if !(0.0..=1.0).contains(&t.offline_ratio) {
            bail!("key `train.offline_ratio`: expected a number in [0, 1], found {}", t.offline_ratio);
        }
        if !(0.0..=1.0).contains(&t.intervention_share) {
            bail!("key `train.intervention_share`: expected a number in [0, 1], found {}", t.intervention_share);
        }
        if t.offline_mix == OfflineMix::Proportional && t.offline_ratio > 0.0 {
            bail!("key `train.offline_ratio` = {} applies to train.offline_mix = \"fixed\" only; with \"proportional\" the offline share is N / (N + online rows)", t.offline_ratio);
        }
        if t.replay_capacity < t.online_batch() && t.online_steps + t.random_steps + t.warmup_steps > 0 {
            bail!(
                "key `train.replay_capacity`: expected at least one online batch ({} rows) for a run with online steps, found {}",
                t.online_batch(),
                t.replay_capacity
            );
        }
        if self.diagnostics.every > 0 && (self.diagnostics.dense_every == 0 || self.diagnostics.batch == 0) {
            bail!("section [diagnostics]: dense_every and batch must be at least 1 when every > 0");
        }
        if t.log_every == 0 {
            bail!("key `train.log_every`: expected at least 1, found 0");
        }
        if self.eval.episodes == 0 {
            bail!("key `eval.episodes`: expected at least 1, found 0");
        }
        if self.checkpoint.keep == 0 {
            bail!("key `checkpoint.keep`: expected at least 1, found 0");
        }
        if self.sera.enabled {
            self.sera.validate(t.online_batch())?;
        }
        if self.replay.her_enabled() {
            let k = self.replay.her_k;
            if !(k.is_finite() && k >= 0.0) {
                bail!("key `replay.her_k`: expected a finite number ≥ 0 (relabelled goals per real one), found {k}");
            }
            if self.shaping.as_ref().is_some_and(|s| s.enabled) {
                bail!("key `replay.her` = \"future\" with an enabled [shaping] section: HER recomputes rewards from the goals alone, which would drop the shaping term (and the progress model's goal view would see the old goal); use one or the other");
            }
        }
        if let Some(s) = &self.shaping {
            s.validate()?;
        }
        if let (Some(s), Some(d)) = (&self.shaping, &self.dataset) {
            // ImagineBench rows (real and imaginary, two buffers) are loaded without the shaper:
            // shaping only the online rows of a mixed batch is not potential-based (E10).
            if s.enabled && d.is_imaginebench() {
                if let Some(key) = self.train.offline_share_key() {
                    bail!("key `{key}`: an enabled [shaping] needs every trained-on row shaped, but ImagineBench datasets are not shaped at load; set `{key}` to its default (no offline rows) or disable [shaping]");
                }
            }
        }
        if let Some(ib) = &self.imaginebench {
            ib.validate()?;
        }
        let needs_data = t.offline_steps > 0 || t.mixes_offline_data();
        match &self.dataset {
            None if needs_data => bail!(
                "the run needs offline data (train.offline_steps = {}, train.offline_ratio = {}, train.offline_mix = {:?}) but has no [dataset] section",
                t.offline_steps,
                t.offline_ratio,
                t.offline_mix
            ),
            Some(d) if d.in_memory && (d.id.is_some() || d.path.is_some()) => {
                bail!("section [dataset]: `in_memory = true` takes no `id` or `path`")
            }
            Some(d) if !d.in_memory && d.id.is_none() && d.path.is_none() => {
                bail!("section [dataset]: expected `id` or `path`, found neither")
            }
            Some(d) if d.format == Some(DatasetFormat::LeRobot) && (d.in_memory || d.path.is_none()) => {
                bail!("section [dataset] with format = \"lerobot\": expected `path` (a LeRobotDataset folder)")
            }
            Some(d) if d.lerobot.is_some() && !d.is_lerobot() => {
                bail!("section [dataset.lerobot] applies to LeRobotDataset folders only (format = \"lerobot\")")
            }
            Some(d) if d.is_imaginebench() => d.validate_imaginebench()?,
            Some(d) if d.rows.is_some() || d.real_fraction.is_some() => {
                bail!("section [dataset]: `rows` and `real_fraction` apply to `format = \"imaginebench\"` only")
            }
            Some(d) if d.relabel.is_some() => {
                o2o_datasets::adroit_binary::BinaryTask::from_env_id(&self.env).context("key `dataset.relabel`")?;
            }
            Some(_) => {}
            None => {}
        }
        Ok(())
    }
}

/// Copy the top-level `algo` into `[agent]` (made when absent), where the agents crate's tagged
/// [`AgentConfig`] reads it ([`agent_table`]). `agent.algo` may repeat `algo`, not contradict it.
/// Without a string `algo` the table is left as it is, for serde to name what is wrong.
fn tag_agent_table(table: &mut toml::Table) -> Result<()> {
    let Some(algo) = table.get("algo").and_then(|a| a.as_str()).map(str::to_string) else {
        return Ok(());
    };
    let toml::Value::Table(agent) = table.entry("agent").or_insert_with(|| toml::Value::Table(toml::Table::new()))
    else {
        return Ok(());
    };
    if let Some(toml::Value::String(a)) = agent.get("algo") {
        if *a != algo {
            bail!("key `agent.algo` is {a:?} but `algo` is {algo:?}; set only `algo`");
        }
    }
    agent.insert("algo".into(), toml::Value::String(algo));
    Ok(())
}

/// Apply `key=value` overrides to a config table. `key` is a dotted path (`train.online_steps`,
/// `agent.actor_lr`); `value` is a TOML value (`3e-4`, `true`, `"x"`, `[256, 256]`), and a bare
/// word that is not valid TOML is taken as a string (`env=Hopper-v5`). Whether the key exists is
/// checked when the table is turned into a [`RunConfig`].
pub fn apply_overrides(table: &mut toml::Table, overrides: &[String]) -> Result<()> {
    for item in overrides {
        let (key, raw) = item
            .split_once('=')
            .with_context(|| format!("--set {item:?}: expected key=value, e.g. train.online_steps=10000"))?;
        let key = key.trim();
        if key.is_empty() || key.split('.').any(str::is_empty) {
            bail!("--set {item:?}: the key {key:?} is not a dotted path like train.online_steps");
        }
        let value = parse_value(raw.trim());
        set_path(table, key, value).with_context(|| format!("--set {item:?}"))?;
    }
    Ok(())
}

/// A TOML value from the right-hand side of `--set`; a bare word becomes a string.
fn parse_value(raw: &str) -> toml::Value {
    match format!("v = {raw}").parse::<toml::Table>() {
        Ok(mut t) => t.remove("v").unwrap_or_else(|| toml::Value::String(raw.to_string())),
        Err(_) => toml::Value::String(raw.to_string()),
    }
}

/// Set `table[a][b]…[z] = value`, creating intermediate tables; fails when a path component
/// is a value rather than a table.
fn set_path(table: &mut toml::Table, key: &str, value: toml::Value) -> Result<()> {
    let mut parts: Vec<&str> = key.split('.').collect();
    let last = parts.pop().expect("split yields at least one part");
    let mut cur = table;
    let mut walked = String::new();
    for p in parts {
        if !walked.is_empty() {
            walked.push('.');
        }
        walked.push_str(p);
        let entry = cur.entry(p.to_string()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
        cur = match entry {
            toml::Value::Table(t) => t,
            other => bail!("`{walked}` is a {}, not a section, so `{key}` cannot be set", other.type_str()),
        };
    }
    cur.insert(last.to_string(), value);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
preset = "t"
algo = "sac"
env = "InvertedPendulum-v5"
[train]
online_steps = 100
"#;

    fn resolve(overrides: &[&str]) -> Result<RunConfig> {
        let mut t: toml::Table = BASE.parse().unwrap();
        apply_overrides(&mut t, &overrides.iter().map(|s| s.to_string()).collect::<Vec<_>>())?;
        RunConfig::from_table(t, "test")
    }

    #[test]
    fn overrides_reach_their_fields() {
        let c = resolve(&[
            "train.online_steps=2000",
            "seed=7",
            "env=Hopper-v5",
            "agent.actor_lr=1e-4",
            "eval.at_start=true",
        ])
        .unwrap();
        assert_eq!(c.train.online_steps, 2000);
        assert_eq!(c.seed, 7);
        assert_eq!(c.env, "Hopper-v5");
        let AgentConfig::Sac(sac) = &c.agent else { panic!("not sac") };
        assert_eq!(sac.actor_lr, 1e-4);
        assert!(c.eval.at_start);
    }

    /// An on-policy agent never samples offline data in its online steps, so a mix that would
    /// draw on it is refused, naming the key, rather than silently ignored.
    #[test]
    fn on_policy_agents_refuse_an_offline_mix() {
        let err = format!(
            "{:#}",
            resolve(&["algo=\"ppo\"", "dataset.path=\"d.hdf5\"", "train.offline_mix=\"proportional\""]).unwrap_err()
        );
        assert!(err.contains("offline_mix") && err.contains("Proportional"), "{err}");
        assert!(resolve(&["algo=\"ppo\"", "dataset.path=\"d.hdf5\""]).is_ok());
    }

    #[test]
    fn intervention_share_is_a_fraction_and_off_policy_only() {
        let err = format!("{:#}", resolve(&["train.intervention_share=1.5"]).unwrap_err());
        assert!(err.contains("train.intervention_share") && err.contains("1.5"), "{err}");
        let err = format!("{:#}", resolve(&["train.intervention_share=-0.1"]).unwrap_err());
        assert!(err.contains("train.intervention_share"), "{err}");
        let err = format!("{:#}", resolve(&["algo=\"ppo\"", "train.intervention_share=0.5"]).unwrap_err());
        assert!(err.contains("on-policy") && err.contains("intervention_share"), "{err}");
        assert!(resolve(&["train.intervention_share=0.5"]).is_ok());
    }

    /// D13: Cal-QL (MC returns) samples finished episodes only unless told otherwise; other
    /// agents sample every stored row unless told otherwise; on-policy runs refuse the key.
    #[test]
    fn closed_episodes_only_follows_the_agent_unless_set() {
        let c = resolve(&[]).unwrap();
        assert!(c.replay.closed_episodes_only.is_none());
        assert!(c.replay.closed_episodes_only_for(true) && !c.replay.closed_episodes_only_for(false));
        let c = resolve(&["replay.closed_episodes_only=false"]).unwrap();
        assert!(!c.replay.closed_episodes_only_for(true));
        let c = resolve(&["replay.closed_episodes_only=true"]).unwrap();
        assert!(c.replay.closed_episodes_only_for(false));
        assert!(c.to_toml_string().unwrap().contains("closed_episodes_only = true"));
        let err = format!("{:#}", resolve(&["algo=\"ppo\"", "replay.closed_episodes_only=true"]).unwrap_err());
        assert!(err.contains("on-policy") && err.contains("replay.closed_episodes_only"), "{err}");
    }

    /// E13: a HER run samples finished episodes only unless told otherwise, as SB3's HER buffer.
    #[test]
    fn her_runs_sample_finished_episodes_only_by_default() {
        let c = resolve(&["replay.her=\"future\""]).unwrap();
        assert!(c.replay.closed_episodes_only_for(false), "HER: closed episodes by default");
        let c = resolve(&["replay.her=\"future\"", "replay.closed_episodes_only=false"]).unwrap();
        assert!(
            !c.replay.closed_episodes_only_for(false) && !c.replay.closed_episodes_only_for(true),
            "the open episode on request"
        );
    }

    /// `[shaping]`'s Φ: a model file unless `potential = "goal-distance"`, a positive d₀, a
    /// finite λ for `mode = "progress"`; the defaults are the model, d₀ = 0.25, λ = 1.
    #[test]
    fn shaping_potential_and_progress_scale_are_checked() {
        let c = resolve(&["shaping.mode=\"progress\"", "shaping.model=\"m.pt\"", "shaping.scale=0.1"]).unwrap();
        let s = c.shaping.unwrap();
        assert_eq!(
            (s.mode, s.potential, s.scale, s.distance_scale),
            (o2o_reward_models::ShapingMode::Progress, PotentialKind::Model, 0.1, 0.25)
        );
        let c = resolve(&["shaping.potential=\"goal-distance\"", "shaping.distance_scale=0.3"]).unwrap();
        assert_eq!(c.shaping.unwrap().potential, PotentialKind::GoalDistance);
        let err = format!("{:#}", resolve(&["shaping.mode=\"pbrs\""]).unwrap_err());
        assert!(err.contains("shaping.model"), "{err}");
        let err = format!(
            "{:#}",
            resolve(&["shaping.potential=\"goal-distance\"", "shaping.distance_scale=0.0"]).unwrap_err()
        );
        assert!(err.contains("shaping.distance_scale"), "{err}");
        let err = format!("{:#}", resolve(&["shaping.model=\"m.pt\"", "shaping.scale=nan"]).unwrap_err());
        assert!(err.contains("shaping.scale"), "{err}");
        assert_eq!(ShapingConfig::default().scale, 1.0);
    }

    /// E10/E11: `[shaping]` defaults to the Markov (backward) potential, and refuses a share of
    /// ImagineBench rows (not shaped at load), naming the key that sets it.
    #[test]
    fn shaping_defaults_to_a_markov_potential_and_refuses_unshaped_offline_rows() {
        let c = resolve(&["shaping.model=\"m.pt\""]).unwrap();
        let s = c.shaping.as_ref().unwrap();
        assert_eq!(s.fusion(), o2o_reward_models::Fusion::Backward);
        assert!(s.fusion().is_markov());
        let c = resolve(&["shaping.model=\"m.pt\"", "shaping.fusion=\"mean\""]).unwrap();
        assert!(!c.shaping.unwrap().fusion().is_markov(), "history-dependent fusions stay options");
        let ib = [
            "shaping.model=\"m.pt\"",
            "dataset.path=\"d.hdf5\"",
            "dataset.format=\"imaginebench\"",
            "dataset.reward=\"none\"",
        ];
        for (set, key) in [
            ("train.offline_ratio=0.5", "train.offline_ratio"),
            ("train.offline_mix=\"proportional\"", "train.offline_mix"),
            ("train.offline_steps=10", "train.offline_steps"),
        ] {
            let err = format!("{:#}", resolve(&[&ib[..], &[set]].concat()).unwrap_err());
            assert!(err.contains(key) && err.contains("[shaping]"), "{set}: {err}");
        }
        assert!(resolve(&ib).is_ok(), "no offline share: nothing to refuse");
        assert!(resolve(&[&ib[..], &["train.offline_ratio=0.5", "shaping.enabled=false"]].concat()).is_ok());
    }

    #[test]
    fn unknown_key_is_an_error_naming_it() {
        let err = format!("{:#}", resolve(&["train.online_stepz=5"]).unwrap_err());
        assert!(err.contains("online_stepz"), "{err}");
        let err = format!("{:#}", resolve(&["bogus=1"]).unwrap_err());
        assert!(err.contains("bogus"), "{err}");
    }

    #[test]
    fn bad_value_is_an_error_naming_key_and_type() {
        let err = format!("{:#}", resolve(&["train.online_steps=abc"]).unwrap_err());
        assert!(err.contains("online_steps") || err.contains("abc"), "{err}");
        let err = format!("{:#}", resolve(&["train.offline_ratio=1.5"]).unwrap_err());
        assert!(err.contains("offline_ratio") && err.contains("1.5"), "{err}");
        assert!(resolve(&["train.online_steps"]).is_err());
        let err = format!("{:#}", resolve(&["env.x=1"]).unwrap_err());
        assert!(err.contains("`env` is a string"), "{err}");
    }

    #[test]
    fn agent_section_is_checked_and_completed() {
        let c = resolve(&["agent.tau=0.01"]).unwrap();
        let AgentConfig::Sac(sac) = &c.agent else { panic!("not sac") };
        assert_eq!(sac.tau, 0.01);
        assert_eq!(c.agent.gamma(), Some(0.99), "defaults are filled in");
        let written: toml::Table = c.to_toml_string().unwrap().parse().unwrap();
        let agent = written["agent"].as_table().unwrap();
        assert_eq!(agent["gamma"].as_float(), Some(0.99), "defaults are written");
        assert!(!agent.contains_key("algo"), "the top-level `algo` names the algorithm");
        let c = resolve(&["agent.algo=sac"]).unwrap();
        assert_eq!(c.agent.algo(), "sac", "agent.algo may repeat algo");
        let err = format!("{:#}", resolve(&["agent.expectile=0.7"]).unwrap_err());
        assert!(err.contains("expectile"), "{err}");
        let err = format!("{:#}", resolve(&["algo=ppx"]).unwrap_err());
        assert!(err.contains("ppx"), "{err}");
        let err = format!("{:#}", resolve(&["agent.algo=iql"]).unwrap_err());
        assert!(err.contains("agent.algo"), "{err}");
        let err = format!("{:#}", resolve(&["agent.actor_lr=-1.0"]).unwrap_err());
        assert!(err.contains("actor_lr") && err.contains("section [agent]"), "{err}");
        let err = format!("{:#}", resolve(&["agent=3"]).unwrap_err());
        assert!(err.contains("agent"), "{err}");
    }

    /// serde alone cannot read `[agent]` without the run's `algo` (a field sees no sibling), so
    /// deserializing config text directly says where to read it instead.
    #[test]
    fn reading_without_from_table_names_the_way_to_read() {
        let text = resolve(&[]).unwrap().to_toml_string().unwrap();
        let err = toml::from_str::<RunConfig>(&text).unwrap_err().to_string();
        assert!(err.contains("RunConfig::from_table"), "{err}");
    }

    /// The dataset options are closed sets: an unknown value is refused, naming the key and the
    /// allowed values, and a known one reads as its variant.
    #[test]
    fn dataset_options_are_closed_sets() {
        let data = |set: &str| resolve(&["dataset.id=hopper-medium-v2", set]);
        for (set, key, allowed) in [
            ("dataset.reward=iql", "reward", &["none", "iql-locomotion", "calql-antmaze", "kitchen-minus-four"][..]),
            ("dataset.transitions=fixed", "transitions", &["qlearning", "corrected"]),
            ("dataset.format=parquet", "format", &["d4rl", "imaginebench", "lerobot"]),
            ("dataset.relabel=binary", "relabel", &["adroit-binary"]),
            ("dataset.rows=dreamt", "rows", &["real", "imaginary", "both"]),
        ] {
            let err = format!("{:#}", data(set).unwrap_err());
            assert!(err.contains(key) && allowed.iter().all(|a| err.contains(a)), "{set}: {err}");
        }
        let c = data("dataset.transitions=corrected").unwrap();
        let d = c.dataset.as_ref().unwrap();
        assert_eq!((d.reward, d.transitions, d.format), (RewardPreset::None, TransitionRule::Corrected, None));
        let c = resolve(&["env=door-binary-v0", "dataset.id=door-human-v1", "dataset.relabel=adroit-binary"]).unwrap();
        assert_eq!(c.dataset.unwrap().relabel, Some(Relabel::AdroitBinary));
        let err = format!("{:#}", data("dataset.relabel=adroit-binary").unwrap_err());
        assert!(err.contains("dataset.relabel"), "adroit-binary needs an Adroit env: {err}");
    }

    #[test]
    fn offline_steps_need_a_dataset() {
        let err = format!("{:#}", resolve(&["train.offline_steps=10"]).unwrap_err());
        assert!(err.contains("[dataset]"), "{err}");
        assert!(resolve(&["train.offline_steps=10", "dataset.id=hopper-medium-v2"]).is_ok());
    }

    #[test]
    fn replay_her_keys_are_checked() {
        let c = resolve(&["replay.her=\"future\"", "replay.her_k=2"]).unwrap();
        assert_eq!((c.replay.her, c.replay.her_k), (HerMode::Future, 2.0));
        assert!(resolve(&[]).unwrap().replay.is_default());
        let err = format!("{:#}", resolve(&["replay.her=\"past\""]).unwrap_err());
        assert!(err.contains("past"), "{err}");
        let err = format!("{:#}", resolve(&["replay.her=\"future\"", "replay.her_k=-1"]).unwrap_err());
        assert!(err.contains("replay.her_k") && err.contains("-1"), "{err}");
        let err = format!("{:#}", resolve(&["replay.her=\"future\"", "shaping.model=\"m.pt\""]).unwrap_err());
        assert!(err.contains("[shaping]"), "{err}");
        let err = format!("{:#}", resolve(&["algo=\"ppo\"", "replay.her=\"future\""]).unwrap_err());
        assert!(err.contains("replay.her") && err.contains("ppo"), "{err}");
    }

    #[test]
    fn toml_round_trip_is_identity() {
        let c = resolve(&["agent.critic.hidden=[64, 64]", "dataset.path=/tmp/x.hdf5"]).unwrap();
        let back = RunConfig::from_toml_str(&c.to_toml_string().unwrap(), "round trip").unwrap();
        assert_eq!(c, back);
    }
}
