//! Offline data for a run: find the D4RL-format file or LeRobotDataset folder the config names (a
//! registry id in the dataset cache, or a path), build transitions, map actions into the agent's `[-1, 1]` box,
//! apply the reward preset, and hand back an `OfflineBuffer`. Also the [`Recorder`], which
//! writes a run's own env transitions as a D4RL-format dataset (`train.record_dataset`).

use super::actor::{ActionScale, Transition, TransitionSink};
use super::config::{DatasetConfig, Relabel, RunConfig, TransitionRule};
use super::learner::{RewardTransform, Source};
use super::rundir::DatasetInfo;
use anyhow::{bail, Context, Result};
use o2o_agents::AgentConfig;
use o2o_datasets::d4rl::{BuildOptions, D4rlDataset};
use o2o_datasets::mc_returns::{returns_to_go, McConfig};
use o2o_datasets::OfflineBuffer;
use o2o_envs::BoxSpace;
use std::path::{Path, PathBuf};

/// A loaded offline dataset.
pub struct OfflineData {
    /// The transitions, actions in `[-1, 1]`, rewards transformed.
    pub buffer: OfflineBuffer,
    /// The reward transform online rewards get too.
    pub reward: RewardTransform,
    /// What the manifest records about it.
    pub info: DatasetInfo,
    /// 1.0 on the last kept transition of each episode (terminated, timed out or cut), per
    /// transition (Uni-O4's timeout mask).
    pub episode_ends: Vec<f32>,
    /// A second offline buffer drawn at a fixed share of each offline batch (ImagineBench's
    /// imaginary rows at `1 − real_fraction`, `buffer` then holding the real rows).
    pub second: Option<SecondBuffer>,
}

/// The second buffer of a weighted offline mix.
pub struct SecondBuffer {
    /// Its transitions.
    pub buffer: OfflineBuffer,
    /// The fraction of each offline batch drawn from the first buffer (`OfflineData::buffer`).
    pub first_fraction: f64,
}

impl OfflineData {
    /// Per-number mean and standard deviation of the observations of every offline row (both
    /// buffers), for agents that normalize states (`Agent::set_state_stats`).
    pub fn state_stats(&self) -> (Vec<f32>, Vec<f32>) {
        let dim = self.buffer.obs_dim();
        match &self.second {
            None => o2o_agents::nn::state_norm::column_stats(self.buffer.observations(), dim),
            Some(s) => o2o_agents::nn::state_norm::column_stats(
                &[self.buffer.observations(), s.buffer.observations()].concat(),
                dim,
            ),
        }
    }

    /// Where offline batches come from: the buffer, or the weighted mix of both.
    pub fn source(&self) -> Source<'_> {
        match &self.second {
            None => Source::Offline(&self.buffer),
            Some(s) => Source::Weighted { first: &self.buffer, second: &s.buffer, first_fraction: s.first_fraction },
        }
    }
}

/// The discount of a run's Monte-Carlo returns (the dataset's and the replay buffer's): the
/// agent's γ ([`AgentConfig::gamma`]). BC learns no value; its returns, which only the
/// diagnostics read, take the customary 0.99.
pub fn returns_gamma(agent: &AgentConfig) -> f32 {
    agent.gamma().unwrap_or(0.99) as f32
}

/// How Monte-Carlo returns are computed when the run's algorithm needs them (Cal-QL): the rule
/// of [`dataset_mc_config`]; `None` otherwise.
pub fn mc_config(config: &RunConfig, gamma: f32) -> Option<McConfig> {
    config.agent.needs_mc_returns().then(|| dataset_mc_config(config, gamma))
}

/// How the dataset's Monte-Carlo returns are computed (for Cal-QL, and for diagnostics: `Q − G`
/// on dataset actions): discount `gamma`, and the reward preset's all-failure convention for
/// sparse tasks.
pub fn dataset_mc_config(config: &RunConfig, gamma: f32) -> McConfig {
    let sparse = config.dataset.as_ref().and_then(|d| d.reward.sparse_failure_reward());
    McConfig { gamma, sparse_failure_reward: sparse }
}

/// Load the dataset `cfg` names for an env with `action_space`, checking its sizes; with `mc`,
/// also the Monte-Carlo return-to-go of every transition, in the transformed rewards. A config
/// with `in_memory = true` takes `given` (the dataset handed to the run) instead of a file.
#[allow(clippy::too_many_arguments)]
pub fn load(
    cfg: &DatasetConfig,
    given: Option<D4rlDataset>,
    action_space: &BoxSpace,
    env_id: &str,
    obs_dim: usize,
    act_dim: usize,
    max_episode_steps: Option<usize>,
    mc: Option<McConfig>,
) -> Result<OfflineData> {
    load_shaped(cfg, given, action_space, env_id, obs_dim, act_dim, max_episode_steps, mc, None)
}

/// [`load`], with every row's reward shaped by `shaper` (`[shaping]`) as an online row's is:
/// the env's reward shaped first, then the reward transform, then the MC returns, in the same
/// order as online rows are shaped, transformed and stored ([`super::shaping::shape_rows`]).
#[allow(clippy::too_many_arguments)]
pub fn load_shaped(
    cfg: &DatasetConfig,
    given: Option<D4rlDataset>,
    action_space: &BoxSpace,
    env_id: &str,
    obs_dim: usize,
    act_dim: usize,
    max_episode_steps: Option<usize>,
    mc: Option<McConfig>,
    shaper: Option<&mut o2o_reward_models::Shaper>,
) -> Result<OfflineData> {
    let (ds, path, sha256) = if cfg.in_memory {
        let ds = given.context("this run's dataset was handed over in memory (`dataset.in_memory = true`); pass the same data again with Run::dataset")?;
        let sha = ds.content_sha256();
        (ds, PathBuf::from(o2o_datasets::d4rl::IN_MEMORY), sha)
    } else {
        let path = resolve_path(cfg)?;
        if cfg.is_lerobot() {
            // A folder has no one file to hash: the manifest gets the hash of the columns read.
            let keys = cfg.lerobot.clone().unwrap_or_default();
            let l = o2o_datasets::lerobot::LeRobotDataset::read(&path, &keys)
                .with_context(|| format!("reading the LeRobot dataset {}", path.display()))?;
            for w in &l.warnings {
                eprintln!("warning: dataset {}: {w}", path.display());
            }
            let sha = l.d4rl.content_sha256();
            (l.d4rl, path, sha)
        } else {
            let ds = D4rlDataset::read(&path).with_context(|| format!("reading the dataset {}", path.display()))?;
            let (sha, _) = o2o_datasets::download::hash_file(&path)?;
            (ds, path, sha)
        }
    };
    ds.check_env(env_id, obs_dim, act_dim)?;
    for w in ds.action_range_warnings(&action_space.low, &action_space.high) {
        eprintln!("warning: dataset {}: {w}", path.display());
    }
    let opts = BuildOptions { max_episode_steps, mc: None };
    let mut t = match cfg.transitions {
        TransitionRule::Qlearning => ds.qlearning_dataset(&opts)?,
        TransitionRule::Corrected => ds.corrected_transitions(&opts)?,
    };
    if cfg.relabel == Some(Relabel::AdroitBinary) {
        let task = o2o_datasets::adroit_binary::BinaryTask::from_env_id(env_id)?;
        let stats = o2o_datasets::adroit_binary::relabel(&mut t, task)
            .with_context(|| format!("dataset.relabel = \"adroit-binary\" on {}", path.display()))?;
        eprintln!(
            "dataset {}: binary reward 1[success] − 1, {} episodes kept (cut after their last success), {} without a success dropped",
            path.display(),
            stats.kept_episodes,
            stats.dropped_episodes
        );
    }
    if t.is_empty() {
        bail!("dataset {} gives no transitions", path.display());
    }
    // Dataset actions are in the env's units; the agent acts in [-1, 1].
    let scale = ActionScale::new(action_space, env_id)?;
    for row in t.actions.chunks_mut(act_dim) {
        let a = scale.to_agent(row);
        row.copy_from_slice(&a);
    }
    // The reward preset, as an affine map so online rewards get exactly the same transform.
    let mut probe = [0.0f32, 1.0];
    cfg.reward
        .apply(&mut probe, &ds.episode_returns(max_episode_steps))
        .with_context(|| format!("dataset {}", path.display()))?;
    let reward = RewardTransform { scale: (probe[1] - probe[0]) as f64, shift: probe[0] as f64 };
    let shaped = match shaper {
        Some(s) => {
            Some(super::shaping::shape_rows(&t, s).with_context(|| format!("shaping dataset {}", path.display()))?)
        }
        None => None,
    };
    for (i, r) in t.rewards.iter_mut().enumerate() {
        let raw = shaped.as_ref().map_or(*r as f64, |s| s[i]);
        *r = reward.apply(raw) as f32;
    }
    if let Some(mc) = &mc {
        t.mc_returns = Some(
            returns_to_go(&t.rewards, &t.episode_ends, mc)
                .with_context(|| format!("MC returns of dataset {}", path.display()))?,
        );
    }
    let info = DatasetInfo { id: cfg.id.clone(), path: path.display().to_string(), sha256, transitions: t.len() };
    let episode_ends = t.episode_ends.clone();
    let buffer = OfflineBuffer::new(t).with_context(|| format!("dataset {}", path.display()))?;
    Ok(OfflineData { buffer, reward, info, episode_ends, second: None })
}

/// The file a dataset config points at: `path`, or the registry id's file in the cache.
pub fn resolve_path(cfg: &DatasetConfig) -> Result<PathBuf> {
    if cfg.in_memory {
        bail!("the dataset was handed to the run in memory (`dataset.in_memory = true`); it has no file");
    }
    if let Some(p) = &cfg.path {
        let found = if cfg.is_lerobot() { p.is_dir() } else { p.is_file() };
        if !found {
            bail!(
                "dataset.path {} does not exist{}",
                p.display(),
                if cfg.is_lerobot() { " (format = \"lerobot\" reads a LeRobotDataset folder)" } else { "" }
            );
        }
        return Ok(p.clone());
    }
    let id = cfg.id.as_deref().context("[dataset] needs `id` or `path`")?;
    let entry = o2o_datasets::registry::lookup(id)?;
    // o2o's cache first, then D4RL's own (~/.d4rl/datasets), where a D4RL user's files already are.
    let (path, found) = o2o_datasets::download::cached_file(None, entry.file_name());
    if !found {
        bail!(
            "dataset {id} is not in the cache ({} does not exist, nor in D4RL's cache {}); run `o2o dataset download {id}` or set dataset.path",
            path.display(),
            o2o_datasets::download::d4rl_cache_dir().map_or("(no HOME)".into(), |d| d.display().to_string())
        );
    }
    Ok(path)
}

/// Records env transitions as a D4RL-format dataset: env-unit actions, the env's own rewards,
/// `terminals`, `timeouts` and true `next_observations` — the way D4RL's "replay" datasets
/// were made from an agent's training experience.
pub struct Recorder {
    ds: D4rlDataset,
    scale: ActionScale,
}

impl Recorder {
    /// An empty recording for an env.
    pub fn new(obs_dim: usize, scale: ActionScale) -> Self {
        let ds = D4rlDataset::empty(PathBuf::from("recording"), obs_dim, scale.dim());
        Self { ds, scale }
    }

    /// Continue a recording saved at a checkpoint.
    pub fn resume(path: &Path, scale: ActionScale) -> Result<Self> {
        let ds = D4rlDataset::read(path).with_context(|| format!("reading the recorded dataset {}", path.display()))?;
        Ok(Self { ds, scale })
    }

    /// The recording as a dataset (env-unit actions, raw rewards).
    pub fn into_dataset(self) -> D4rlDataset {
        self.ds
    }

    /// Write the recording (atomically).
    pub fn write(&self, path: &Path) -> Result<()> {
        self.ds.write(path).with_context(|| format!("writing the recorded dataset {}", path.display()))
    }
}

impl TransitionSink for Recorder {
    fn push(&mut self, t: &Transition) -> Result<()> {
        let flag = |b: bool| if b { 1.0 } else { 0.0 };
        self.ds.observations.extend_from_slice(&t.obs);
        self.ds.actions.extend(self.scale.to_env(&t.action));
        self.ds.rewards.push(t.reward as f32);
        self.ds.terminals.push(flag(t.terminated));
        self.ds.timeouts.get_or_insert_with(Vec::new).push(flag(t.truncated && !t.terminated));
        self.ds.next_observations.get_or_insert_with(Vec::new).extend_from_slice(&t.next_obs);
        Ok(())
    }
}

/// Sends each transition to two sinks (the replay buffer and a recorder).
pub struct Tee<'a> {
    /// Gets each transition first.
    pub first: &'a mut dyn TransitionSink,
    /// Then this one.
    pub second: &'a mut dyn TransitionSink,
}

impl TransitionSink for Tee<'_> {
    fn push(&mut self, t: &Transition) -> Result<()> {
        self.first.push(t)?;
        self.second.push(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use o2o_datasets::scores::RewardPreset;

    #[test]
    fn recorded_dataset_round_trips_through_the_loader() {
        let tmp = tempfile::tempdir().unwrap();
        let space = BoxSpace::new(vec![-3.0], vec![3.0]);
        let mut rec = Recorder::new(2, ActionScale::new(&space, "t").unwrap());
        // Two episodes: one terminated after 2 steps (return 3), one truncated after 1 (return 5).
        let rows = [
            ([0.0, 0.0], 0.5, 1.0, [1.0, 0.0], false, false),
            ([1.0, 0.0], -0.5, 2.0, [2.0, 0.0], true, false),
            ([0.0, 1.0], 1.0, 5.0, [0.0, 2.0], false, true),
        ];
        for (o, a, r, n, term, trunc) in rows {
            rec.push(&Transition {
                obs: o.to_vec(),
                action: vec![a],
                reward: r,
                next_obs: n.to_vec(),
                terminated: term,
                truncated: trunc,
                intervention: false,
            })
            .unwrap();
        }
        let path = tmp.path().join("d.hdf5");
        rec.write(&path).unwrap();
        let cfg = DatasetConfig {
            id: None,
            path: Some(path.clone()),
            reward: RewardPreset::IqlLocomotion,
            transitions: TransitionRule::Corrected,
            in_memory: false,
            format: None,
            lerobot: None,
            rows: None,
            real_fraction: None,
            relabel: None,
        };
        let data = load(&cfg, None, &space, "t", 2, 1, None, Some(McConfig::dense(0.5))).unwrap();
        assert_eq!(data.buffer.len(), 3);
        // R_max − R_min = 5 − 3 = 2, so rewards scale by 1000 / 2.
        assert_eq!(data.reward, RewardTransform { scale: 500.0, shift: 0.0 });
        assert_eq!(data.info.sha256.len(), 64);
        // MC returns in the transformed rewards: episode 1 (500, 1000) → G = 500 + ½·1000, 1000.
        let b = data
            .buffer
            .sample(64, &mut <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(0), tch::Device::Cpu)
            .unwrap();
        let (r, g) =
            (Vec::<f32>::try_from(&b.reward).unwrap(), Vec::<f32>::try_from(b.mc_return.as_ref().unwrap()).unwrap());
        for (r, g) in r.iter().zip(&g) {
            let want = match *r as i64 {
                500 => 1000.0,
                1000 => 1000.0,
                2500 => 2500.0,
                other => panic!("reward {other}"),
            };
            assert_eq!(*g, want, "reward {r}");
        }
        let back = D4rlDataset::read(&path).unwrap();
        assert_eq!(back.actions, vec![1.5, -1.5, 3.0], "actions are stored in env units");
        assert_eq!(back.terminals, vec![0.0, 1.0, 0.0]);
        assert_eq!(back.timeouts, Some(vec![0.0, 0.0, 1.0]));
    }
}
