//! `o2o dataset make-benchmark <hopper|halfcheetah|walker2d> --mixed-quality RUN_DIR
//! --policy-region RULE`: a D4RL-format file whose quality differs by state region, the data of
//! FamO2O's claim (a state-adaptive balance beats any single balance; `o2o experiment
//! famo2o-claim`).
//!
//! Every row is one env step of the task's `-v2` env. In **region A**, the states where the rule
//! holds (e.g. `obs[8]<2.5`: HalfCheetah's forward velocity below 2.5), the action is the
//! trained policy's (the newest checkpoint of the finished o2o run `RUN_DIR`, a sampled action as
//! the benchmark's expert file); in **region B**, everywhere else, it is uniformly random in the
//! action box. So the data is expert-like in one part of the state space and random in the
//! other, along the same trajectories.
//!
//! The file has the benchmark's keys ([`super::locomotion`]: `observations`, `actions`,
//! `rewards`, `terminals`, `timeouts`, `next_observations`, `infos/qpos`, `infos/qvel`) plus
//! `infos/region`, 1 where the row's observation is in region A (the policy acted), 0 in
//! region B. `manifest.json` (format [`FORMAT`]) records the rule, the policy (its run, checkpoint
//! and its own deterministic evaluation), the seeds, and per region the share of rows, the mean
//! reward and the mean length of a stay; the command line and the source revision are in its
//! provenance. The same policy checkpoint, rule, seed and sizes give the same file.

use super::locomotion::Task;
use super::manifest::{self, FileRecord};
use super::{rollout, write_file};
use crate::run::actor::{derive_seed, stream, AgentPolicy, Policy, UniformPolicy};
use crate::run::rundir::{self, Provenance};
use crate::run::{eval, prepare};
use anyhow::{bail, Context, Result};
use o2o_datasets::d4rl::D4rlDataset;
use o2o_datasets::h5util::{Column, Dtype};
use rand::Rng;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Instant;
use tch::Device;

/// Value of the manifest's `format` field.
pub const FORMAT: &str = "o2o-benchmark-mixed/1";
/// The file's per-row region column: 1 in region A (the policy acted), 0 in region B.
pub const REGION_KEY: &str = "infos/region";

/// Which states are region A: `obs[feature] < threshold` or `obs[feature] > threshold`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RegionRule {
    /// Index into the observation.
    pub feature: usize,
    /// Region A is above the threshold (`>`), or below it (`<`).
    pub above: bool,
    /// The threshold X.
    pub threshold: f64,
}

impl RegionRule {
    /// Parse `obs[I]<X` or `obs[I]>X` (spaces allowed).
    pub fn parse(s: &str) -> Result<Self> {
        let t: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        let bad = || {
            anyhow::anyhow!(
                "--policy-region: expected `obs[I]<X` or `obs[I]>X` (region A, where the policy acts), found {s:?}"
            )
        };
        let rest = t.strip_prefix("obs[").ok_or_else(bad)?;
        let (index, rest) = rest.split_once(']').ok_or_else(bad)?;
        let feature: usize = index.parse().map_err(|_| bad())?;
        let above = match rest.chars().next() {
            Some('>') => true,
            Some('<') => false,
            _ => return Err(bad()),
        };
        let threshold: f64 = rest[1..].parse().map_err(|_| bad())?;
        if !threshold.is_finite() {
            return Err(bad());
        }
        Ok(Self { feature, above, threshold })
    }

    /// Whether `obs` is in region A.
    pub fn in_a(&self, obs: &[f32]) -> bool {
        let x = obs[self.feature] as f64;
        if self.above {
            x > self.threshold
        } else {
            x < self.threshold
        }
    }

    /// `obs[I] < X` / `obs[I] > X`.
    pub fn text(&self) -> String {
        format!("obs[{}] {} {}", self.feature, if self.above { ">" } else { "<" }, self.threshold)
    }
}

/// Everything [`generate`] needs.
#[derive(Debug, Clone)]
pub struct MixedSpec {
    /// The task, whose `-v2` env the rows come from.
    pub task: Task,
    /// The finished o2o run whose newest checkpoint acts in region A.
    pub policy_run: PathBuf,
    /// Region A, where the policy acts.
    pub rule: RegionRule,
    /// The folder the file and `manifest.json` go to.
    pub out: PathBuf,
    /// Seed of the episodes and region B's actions.
    pub seed: u64,
    /// Rows of the file (the last episode is cut there).
    pub rows: usize,
    /// Deterministic episodes of the policy alone, measured for the manifest.
    pub eval_episodes: usize,
    /// gzip level of the columns (`None`: uncompressed).
    pub gzip: Option<u8>,
    /// The device the policy acts on.
    pub device: Device,
}

/// The manifest.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MixedManifest {
    /// Always [`FORMAT`].
    pub format: String,
    /// `hopper`, `halfcheetah` or `walker2d`.
    pub task: String,
    /// The env the rows were collected in, e.g. `halfcheetah-v2`.
    pub env: String,
    /// Who made it, when, from which revision.
    #[serde(flatten)]
    pub provenance: Provenance,
    /// The device the policy acted on.
    pub device: String,
    /// libtorch's intra-op threads.
    pub torch_threads: i64,
    /// Every seed used.
    pub seeds: MixedSeeds,
    /// The policy that acts in region A.
    pub policy: PolicyRecord,
    /// The region rule.
    pub region_rule: RuleRecord,
    /// Region A (the rule holds: the policy acted) and region B (uniformly random actions).
    pub regions: Regions,
    /// The written file.
    pub file: FileRecord,
    /// Seconds the whole command took.
    pub wall_s: f64,
}

/// The seeds of each random source.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct MixedSeeds {
    /// `--seed`.
    pub run: u64,
    /// The collection's episodes (episode k resets with `derive_seed(episodes, 1, k)`).
    pub episodes: u64,
    /// The ChaCha8 stream of region B's uniform actions.
    pub random_actions: u64,
    /// The policy's own evaluation episodes.
    pub policy_eval: u64,
}

/// The policy that acts in region A.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PolicyRecord {
    /// The run directory and the checkpoint loaded (its newest).
    pub run_dir: String,
    /// The checkpoint folder loaded.
    pub checkpoint: String,
    /// The run's source revision (from its manifest), when recorded.
    pub run_git_revision: Option<String>,
    /// The run's algorithm.
    pub algo: String,
    /// The env the run trained on.
    pub env: String,
    /// The run's seed.
    pub run_seed: u64,
    /// Env steps of the checkpoint.
    pub env_steps: u64,
    /// Gradient steps of the checkpoint.
    pub grad_steps: u64,
    /// How region A's actions are drawn.
    pub actions: String,
    /// The policy alone on the task's env: deterministic episodes, mean return and D4RL score.
    pub eval_episodes: usize,
    /// Mean return of those episodes.
    pub eval_return: f64,
    /// D4RL normalized score ×100 of that return.
    pub eval_normalized_score: Option<f64>,
}

/// The region rule, as given and parsed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RuleRecord {
    /// `obs[I] < X` or `obs[I] > X`: region A.
    pub text: String,
    /// The parsed rule.
    #[serde(flatten)]
    pub rule: RegionRule,
    /// What acts in region A and in region B, in words.
    pub region_a: String,
    /// What acts in region B, in words.
    pub region_b: String,
    /// The file's per-row region column ([`REGION_KEY`]).
    pub column: String,
}

/// Both regions.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Regions {
    /// Region A: the rule holds, the policy acted.
    pub a: RegionStats,
    /// Region B: uniformly random actions.
    pub b: RegionStats,
}

/// One region's rows.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RegionStats {
    /// Rows in the region.
    pub rows: usize,
    /// Share of the file's rows.
    pub share: f64,
    /// Mean reward of its rows (null without rows).
    pub mean_reward: Option<f64>,
    /// Mean number of consecutive rows of an episode spent in the region per visit.
    pub mean_stay: Option<f64>,
}

impl MixedManifest {
    /// The manifest of the folder `dir`, if it is a mixed-quality one.
    pub fn read_dir(dir: &Path) -> Result<Option<Self>> {
        manifest::read_dir(dir, FORMAT)
    }
}

/// Seed stream of the collection (distinct from the benchmark's 101–103 and AntMaze's 201–202).
const STREAM_MIXED: u64 = 301;
const STREAM_POLICY_EVAL: u64 = 302;

/// Region A's policy, region B's uniform actions.
struct RegionPolicy<'a, R: Rng> {
    rule: RegionRule,
    policy: AgentPolicy<'a>,
    random: UniformPolicy<'a, R>,
}

impl<R: Rng> Policy for RegionPolicy<'_, R> {
    fn act(&mut self, obs: &[f32]) -> Result<Vec<f32>> {
        if self.rule.in_a(obs) {
            self.policy.act(obs)
        } else {
            self.random.act(obs)
        }
    }
}

/// Make `<out>/<task>-mixed-v2.hdf5` and `<out>/manifest.json`; returns the manifest.
pub fn generate(spec: &MixedSpec) -> Result<MixedManifest> {
    let t0 = Instant::now();
    if spec.rows == 0 || spec.eval_episodes == 0 {
        bail!(
            "mixed-quality sizes: expected positive transitions and eval episodes, found {} and {}",
            spec.rows,
            spec.eval_episodes
        );
    }
    let task = spec.task.name();
    let env_id = spec.task.env_id();
    let seeds = MixedSeeds {
        run: spec.seed,
        episodes: derive_seed(spec.seed, STREAM_MIXED, 0),
        random_actions: derive_seed(derive_seed(spec.seed, STREAM_MIXED, 0), stream::RUNNER_RNG, 0),
        policy_eval: derive_seed(spec.seed, STREAM_POLICY_EVAL, 0),
    };
    let mut env = o2o_envs::make(&env_id)?;
    let (obs_dim, act_dim) = (env.observation_space().dim(), env.action_space().dim());
    if spec.rule.feature >= obs_dim {
        bail!(
            "--policy-region {}: {env_id} has {obs_dim} observation numbers (indices 0..{})",
            spec.rule.text(),
            obs_dim - 1
        );
    }

    // 1. The policy, and how well it does alone.
    let mut loaded = prepare::load_checkpoint_agent(&spec.policy_run, None, None, spec.device)
        .with_context(|| format!("--mixed-quality {}: loading the policy", spec.policy_run.display()))?;
    let (run_obs, run_act) = (loaded.env.observation_space().dim(), loaded.env.action_space().dim());
    if (run_obs, run_act) != (obs_dim, act_dim) {
        bail!("--mixed-quality {}: the run's env {} has {run_obs} observations and {run_act} actions, {env_id} has {obs_dim} and {act_dim}", spec.policy_run.display(), loaded.config.env);
    }
    eprintln!(
        "make-benchmark {task} --mixed-quality: [1/2] the policy of {} ({}, env step {}) alone, {} episodes",
        spec.policy_run.display(),
        loaded.config.algo,
        loaded.state.env_step,
        spec.eval_episodes
    );
    let alone = eval::evaluate(&mut *env, &mut *loaded.agent, spec.device, seeds.policy_eval, spec.eval_episodes, 0)?;
    eprintln!(
        "  mean return {:.1} (normalized {})",
        alone.mean_return,
        alone.normalized_score.map_or("-".into(), |s| format!("{s:.1}"))
    );
    let run_git_revision = std::fs::read_to_string(spec.policy_run.join(rundir::MANIFEST))
        .ok()
        .and_then(|t| serde_json::from_str::<rundir::Manifest>(&t).ok())
        .map(|m| m.provenance.git_revision);
    let policy = PolicyRecord {
        run_dir: spec.policy_run.display().to_string(),
        checkpoint: loaded.folder.display().to_string(),
        run_git_revision,
        algo: loaded.config.algo.clone(),
        env: loaded.config.env.clone(),
        run_seed: loaded.config.seed,
        env_steps: loaded.state.env_step,
        grad_steps: loaded.state.grad_step,
        actions: "the policy's sampled action (stochastic, as the benchmark's expert file)".into(),
        eval_episodes: spec.eval_episodes,
        eval_return: alone.mean_return,
        eval_normalized_score: alone.normalized_score,
    };

    // 2. The collection.
    eprintln!(
        "make-benchmark {task} --mixed-quality: [2/2] {} rows, the policy where {}, uniform random actions elsewhere",
        spec.rows,
        spec.rule.text()
    );
    let mut rng = ChaCha8Rng::seed_from_u64(seeds.random_actions);
    let mut mixed = RegionPolicy {
        rule: spec.rule,
        policy: AgentPolicy { agent: &mut *loaded.agent, device: spec.device, deterministic: false },
        random: UniformPolicy { rng: &mut rng, dim: act_dim },
    };
    std::fs::create_dir_all(&spec.out).with_context(|| format!("cannot create {}", spec.out.display()))?;
    let mut ds = rollout(&env_id, &mut mixed, spec.rows, seeds.episodes, "mixed")?;
    let region: Vec<f32> = (0..ds.len()).map(|i| if spec.rule.in_a(ds.obs(i)) { 1.0 } else { 0.0 }).collect();
    let regions = region_stats(&ds, &region);
    ds.infos.insert(REGION_KEY.to_string(), Column { shape: vec![region.len()], dtype: Dtype::Int32, data: region });
    let text = format!(
        "the policy of {} where {} (region A), uniformly random actions elsewhere (region B)",
        spec.policy_run.display(),
        spec.rule.text()
    );
    let file = write_file(&spec.out, task, "mixed", &text, &mut ds, Dtype::Float32, spec.gzip)?;
    eprintln!(
        "  region A: {} rows ({:.1}%), mean reward {}; region B: {} rows ({:.1}%), mean reward {}",
        regions.a.rows,
        100.0 * regions.a.share,
        regions.a.mean_reward.map_or("-".into(), |r| format!("{r:.3}")),
        regions.b.rows,
        100.0 * regions.b.share,
        regions.b.mean_reward.map_or("-".into(), |r| format!("{r:.3}"))
    );

    let manifest = MixedManifest {
        format: FORMAT.to_string(),
        task: task.to_string(),
        env: env_id,
        provenance: Provenance::now(),
        device: format!("{:?}", spec.device),
        torch_threads: tch::get_num_threads() as i64,
        seeds,
        policy,
        region_rule: RuleRecord {
            text: spec.rule.text(),
            rule: spec.rule,
            region_a: "the policy acts (its sampled action)".into(),
            region_b: "uniformly random actions in [-1, 1]^A".into(),
            column: format!("{REGION_KEY}: 1 in region A, 0 in region B, by the rule on each row's observation"),
        },
        regions,
        file,
        wall_s: t0.elapsed().as_secs_f64(),
    };
    rundir::write_json(&spec.out.join(manifest::MANIFEST), &manifest)?;
    Ok(manifest)
}

/// What `o2o dataset make-benchmark <task> --mixed-quality` prints about the folder `out` it
/// made: the file, the policy alone, and each region's share of rows and mean reward.
pub fn summary(out: &Path, m: &MixedManifest) -> String {
    let reward = |r: Option<f64>| r.map_or("-".to_string(), |r| format!("{r:.3}"));
    format!(
        "{}: {} ({} rows, {} episodes, mean return {}) in {:.0} s; the policy alone: return {:.1}; region A ({}): {:.1}% of rows, mean reward {}; region B: {:.1}%, mean reward {}",
        out.display(), m.file.file, m.file.rows, m.file.episodes, m.file.returns.map_or("-".to_string(), |s| format!("{:.1}", s.mean)), m.wall_s,
        m.policy.eval_return, m.region_rule.text, 100.0 * m.regions.a.share, reward(m.regions.a.mean_reward), 100.0 * m.regions.b.share, reward(m.regions.b.mean_reward)
    )
}

/// Rows, share, mean reward and mean stay (consecutive rows of one episode) of each region;
/// `region[i]` is 1 in region A.
pub fn region_stats(ds: &D4rlDataset, region: &[f32]) -> Regions {
    let n = ds.len();
    let stats = |want: f32| {
        let rows: Vec<usize> = (0..n).filter(|&i| region[i] == want).collect();
        let mean_reward =
            (!rows.is_empty()).then(|| rows.iter().map(|&i| ds.rewards[i] as f64).sum::<f64>() / rows.len() as f64);
        // A stay starts at a row of the region whose predecessor in the episode is not in it.
        let ends = |i: usize| ds.terminals[i] != 0.0 || ds.timeouts.as_ref().is_some_and(|t| t[i] != 0.0);
        let stays = rows.iter().filter(|&&i| i == 0 || ends(i - 1) || region[i - 1] != want).count();
        RegionStats {
            rows: rows.len(),
            share: if n == 0 { 0.0 } else { rows.len() as f64 / n as f64 },
            mean_reward,
            mean_stay: (stays > 0).then(|| rows.len() as f64 / stays as f64),
        }
    };
    Regions { a: stats(1.0), b: stats(0.0) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn rules_parse_apply_and_print() {
        let r = RegionRule::parse("obs[8] < 2.5").unwrap();
        assert_eq!(r, RegionRule { feature: 8, above: false, threshold: 2.5 });
        assert_eq!(r.text(), "obs[8] < 2.5");
        assert_eq!(RegionRule::parse(&r.text()).unwrap(), r);
        let mut obs = vec![0.0f32; 9];
        assert!(r.in_a(&obs));
        obs[8] = 2.5;
        assert!(!r.in_a(&obs), "the threshold itself is region B");
        let up = RegionRule::parse("obs[0]>-1e-1").unwrap();
        assert_eq!((up.feature, up.above, up.threshold), (0, true, -0.1));
        assert!(up.in_a(&[0.0]) && !up.in_a(&[-0.2]));
        for bad in ["obs[8]=2", "obs8<2", "obs[x]<2", "obs[8]<", "obs[8]<nan", "state[8]<2", "obs[8]<inf"] {
            assert!(RegionRule::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn region_stats_count_rows_rewards_and_stays_per_episode() {
        // Two episodes: rows 0..4 (ends at 3, a termination), rows 4..7 (timeout at 6).
        let mut terminals = vec![0.0; 7];
        terminals[3] = 1.0;
        let mut timeouts = vec![0.0; 7];
        timeouts[6] = 1.0;
        let ds = D4rlDataset {
            source: PathBuf::from("t"),
            obs_dim: 1,
            act_dim: 1,
            observations: vec![0.0; 7],
            actions: vec![0.0; 7],
            rewards: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0],
            terminals,
            timeouts: Some(timeouts),
            next_observations: None,
            infos: BTreeMap::new(),
            metadata: BTreeMap::new(),
            dtypes: BTreeMap::new(),
        };
        // A at rows 0, 1, 3 | 4, 6; B at 2 | 5. Row 4 starts a new stay (a new episode) though
        // row 3 was A too.
        let region = [1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0];
        let r = region_stats(&ds, &region);
        assert_eq!(
            r.a,
            RegionStats {
                rows: 5,
                share: 5.0 / 7.0,
                mean_reward: Some((1.0 + 2.0 + 4.0 + 5.0 + 7.0) / 5.0),
                mean_stay: Some(5.0 / 4.0)
            }
        );
        assert_eq!(
            r.b,
            RegionStats { rows: 2, share: 2.0 / 7.0, mean_reward: Some((3.0 + 6.0) / 2.0), mean_stay: Some(1.0) }
        );
        let none = region_stats(&ds, &[1.0; 7]);
        assert_eq!((none.b.rows, none.b.mean_reward, none.b.mean_stay), (0, None, None));
    }
}
