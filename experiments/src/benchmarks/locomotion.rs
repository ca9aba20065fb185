//! Our own D4RL-style benchmark datasets, made the way D4RL made its gym-mujoco v2 files
//! (Fu et al. 2020, arXiv 2004.07219, §5 and its `scripts/generation/mujoco/`), because D4RL's
//! hosts cannot be reached from the build machines:
//!
//! 1. **random**: `rows` env steps of a uniformly random policy;
//! 2. SAC trained online on the D4RL-compatible `<task>-v2` env **by the runner** (`o2o train`'s
//!    loop, [`runner::execute_with`]), recording every env step (`train.record_dataset`) and, through
//!    [`Hooks`], the MuJoCo state of every step and a policy snapshot at every evaluation that
//!    sets a new best return;
//! 3. **medium**: `rows` env steps of the *medium snapshot*, the earliest evaluation whose mean
//!    return reaches one third of the final policy's D4RL-normalized score
//!    ([`choose_medium`]) — the point where D4RL early-stopped its medium SAC run (or, with
//!    [`MediumPick::Closest`], the evaluation nearest that target);
//! 4. **expert**: `rows` env steps of the final policy;
//! 5. **medium-replay**: the SAC run's own transitions (its whole replay buffer) up to the
//!    medium snapshot, cut at the last episode end before it.
//!
//! Policies act stochastically (SAC's sampled action, as D4RL's collector did with its
//! tanh-Gaussian policy). Every file has D4RL's keys: `observations`, `actions` (env units),
//! `rewards`, `terminals`, `timeouts`, `next_observations`, `infos/qpos` and `infos/qvel` (the
//! state before the step), and for the SAC files `metadata/algorithm` = "SAC" and
//! `metadata/iteration` (gradient steps of the policy). `manifest.json` records how it was all
//! made ([`super::manifest`]). docs/datasets.md, "Benchmark datasets", has the sizes per scale.

use super::manifest::{self, BenchmarkManifest, EvalPoint, MediumChoice, SacRecord, Seeds};
use super::{rollout, states, with_work_dir, write_file};
use crate::run::actor::{derive_seed, stream, AgentPolicy, UniformPolicy};
use crate::run::checkpoint;
use crate::run::config::{self, RunConfig};
use crate::run::prepare::{build_agent, Hooks, Start};
use crate::run::runner;
use crate::run::state::{EvalResult, RunnerState};
use crate::run::{presets, rundir};
use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use o2o_agents::Agent;
use o2o_datasets::d4rl::{D4rlDataset, MetaValue};
use o2o_datasets::h5util::{Column, Dtype};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;
use tch::Device;

/// The locomotion tasks D4RL's gym-mujoco datasets cover (Ant aside).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Task {
    /// Hopper (`hopper-v2`).
    Hopper,
    /// HalfCheetah (`halfcheetah-v2`).
    Halfcheetah,
    /// Walker2d (`walker2d-v2`).
    Walker2d,
}

impl Task {
    /// The D4RL name and score family: `hopper`, `halfcheetah`, `walker2d`.
    pub fn name(self) -> &'static str {
        match self {
            Task::Hopper => "hopper",
            Task::Halfcheetah => "halfcheetah",
            Task::Walker2d => "walker2d",
        }
    }

    /// The D4RL-compatible env, e.g. `hopper-v2`.
    pub fn env_id(self) -> String {
        format!("{}-v2", self.name())
    }

    /// The SAC preset the run starts from (its env replaced by [`Task::env_id`]).
    pub fn preset(self) -> &'static str {
        match self {
            Task::Hopper => "sac-hopper",
            Task::Halfcheetah => "sac-halfcheetah",
            Task::Walker2d => "sac-walker2d",
        }
    }
}

/// Dataset sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scale {
    /// SAC 60k env steps (5k random), 100k-row files: ≤ 30 min for hopper on 2 cores.
    Small,
    /// D4RL's sizes: SAC 1M env steps (5k random), 1M-row files.
    Full,
}

impl Scale {
    /// The sizes of this scale.
    pub fn sizes(self) -> Sizes {
        match self {
            Scale::Small => Sizes {
                sac_steps: 60_000,
                sac_random_steps: 5_000,
                rows: 100_000,
                eval_every: 5_000,
                eval_episodes: 5,
                gzip: 4,
            },
            Scale::Full => Sizes {
                sac_steps: 1_000_000,
                sac_random_steps: 5_000,
                rows: 1_000_000,
                eval_every: 5_000,
                eval_episodes: 10,
                gzip: 0,
            },
        }
    }

    /// `small` or `full`.
    pub fn name(self) -> &'static str {
        match self {
            Scale::Small => "small",
            Scale::Full => "full",
        }
    }
}

/// What one `make-benchmark` produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizes {
    /// SAC env steps in total (the runner's random plus online steps).
    pub sac_steps: u64,
    /// The first of them, taken with uniformly random actions (no updates).
    pub sac_random_steps: u64,
    /// Rows of the random, medium and expert files.
    pub rows: usize,
    /// Env steps between SAC evaluations (each a candidate medium snapshot).
    pub eval_every: u64,
    /// Deterministic episodes per evaluation.
    pub eval_episodes: usize,
    /// gzip level of the files' columns (0: uncompressed, as D4RL's files).
    pub gzip: u8,
}

/// Everything `generate` needs.
#[derive(Debug, Clone)]
pub struct BenchmarkSpec {
    /// The task.
    pub task: Task,
    /// Recorded in the manifest: `small`, `full`, or `custom` when sizes were overridden.
    pub scale_name: String,
    /// How much of everything.
    pub sizes: Sizes,
    /// Seed of everything (the SAC run uses it as `o2o train --seed` would).
    pub seed: u64,
    /// The folder the four files and `manifest.json` go to.
    pub out: PathBuf,
    /// `--set key=value` overrides of the SAC run's config.
    pub sac_overrides: Vec<String>,
    /// Keep the SAC run directory as `<out>/sac-run/` instead of deleting it.
    pub keep_run: bool,
    /// The device SAC trains and the policies act on.
    pub device: Device,
    /// `--medium-score`: the medium policy's D4RL-normalized target instead of one third of the
    /// final policy's score.
    pub medium_score: Option<f64>,
    /// `--medium-pick`: which evaluation the target picks.
    pub medium_pick: MediumPick,
}

/// Which SAC evaluation is the medium policy, given the target return.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum MediumPick {
    /// The earliest evaluation at or above the target (D4RL's early stopping).
    #[default]
    Earliest,
    /// The evaluation whose mean return is nearest the target, the earliest on a tie: for a
    /// run whose evaluations jump past the target (hopper's swing by 40 normalized points
    /// between evaluations), where the earliest one above it can be far above it.
    Closest,
}

/// Seed streams of the rollout sets (distinct from the runner's 1–4).
const STREAM_RANDOM: u64 = 101;
const STREAM_MEDIUM: u64 = 102;
const STREAM_EXPERT: u64 = 103;

/// Make the four datasets and the manifest in `spec.out`; returns the manifest.
pub fn generate(spec: &BenchmarkSpec) -> Result<BenchmarkManifest> {
    let s = &spec.sizes;
    if s.sac_random_steps >= s.sac_steps || s.rows == 0 || s.eval_every == 0 || s.eval_episodes == 0 {
        bail!(
            "sizes: expected sac-random-steps < sac-steps and positive transitions, eval-every and eval-episodes; found sac-steps {}, sac-random-steps {}, transitions {}, eval-every {}, eval-episodes {}",
            s.sac_steps, s.sac_random_steps, s.rows, s.eval_every, s.eval_episodes
        );
    }
    // The SAC run and the snapshots live in a work folder that is removed at the end (or on error).
    with_work_dir(&spec.out, spec.keep_run.then_some("sac-run"), |work| generate_in(spec, work))
}

fn generate_in(spec: &BenchmarkSpec, work: &Path) -> Result<BenchmarkManifest> {
    let t0 = Instant::now();
    let task = spec.task.name();
    let env_id = spec.task.env_id();
    let s = spec.sizes;
    let gzip = (s.gzip > 0).then_some(s.gzip);
    let seeds = Seeds {
        run: spec.seed,
        sac: spec.seed,
        random: derive_seed(spec.seed, STREAM_RANDOM, 0),
        medium: derive_seed(spec.seed, STREAM_MEDIUM, 0),
        expert: derive_seed(spec.seed, STREAM_EXPERT, 0),
    };
    let _ = std::fs::remove_dir_all(work);
    let snapshots = work.join("snapshots");
    let run_dir = work.join("sac-run");
    std::fs::create_dir_all(&snapshots).with_context(|| format!("cannot create {}", snapshots.display()))?;
    std::fs::create_dir_all(run_dir.join(rundir::CHECKPOINTS))
        .with_context(|| format!("cannot create {}", run_dir.display()))?;
    let mut files = Vec::new();

    // 1. random: a uniformly random policy.
    eprintln!("make-benchmark {task}: [1/5] random policy, {} rows", s.rows);
    let mut rng = ChaCha8Rng::seed_from_u64(derive_seed(seeds.random, stream::RUNNER_RNG, 0));
    let act_dim = o2o_envs::make(&env_id)?.action_space().dim();
    let mut ds = rollout(&env_id, &mut UniformPolicy { rng: &mut rng, dim: act_dim }, s.rows, seeds.random, "random")?;
    files.push(write_file(
        &spec.out,
        task,
        "random",
        "uniformly random actions in the action box",
        &mut ds,
        Dtype::Float32,
        gzip,
    )?);

    // 2. SAC through the runner, with state logging and snapshots at new best evaluations.
    eprintln!(
        "make-benchmark {task}: [2/5] SAC on {env_id}, {} env steps ({} random), evaluation every {}",
        s.sac_steps, s.sac_random_steps, s.eval_every
    );
    let config = sac_config(spec, &env_id)?;
    rundir::write_config(&run_dir, &config)?;
    let (actor_env, sac_states) = states::make_logged(&env_id)?;
    let mut evals: Vec<EvalPoint> = Vec::new();
    let mut best = f64::NEG_INFINITY;
    let mut on_eval = |r: &EvalResult, agent: &dyn Agent, st: &RunnerState| -> Result<()> {
        evals.push(EvalPoint {
            step: st.step,
            env_step: st.env_step,
            grad_step: st.grad_step,
            mean_return: r.mean_return,
            normalized_score: r.normalized_score,
        });
        // Only a new best can be the earliest evaluation above any target (see `choose_medium`);
        // any evaluation can be the closest to it.
        if r.mean_return > best || spec.medium_pick == MediumPick::Closest {
            best = best.max(r.mean_return);
            let p = snapshot_path(&snapshots, st.step);
            agent.save(&p).with_context(|| format!("saving the policy snapshot {}", p.display()))?;
        }
        Ok(())
    };
    let t_sac = Instant::now();
    let hooks = Hooks { actor_env: Some(actor_env), on_eval: Some(&mut on_eval), ..Hooks::default() };
    let summary = runner::execute_with(&run_dir, &config, spec.device, Start::Fresh, Vec::new(), None, hooks)?;
    let sac_wall = t_sac.elapsed().as_secs_f64();
    let final_agent = run_dir.join(&summary.checkpoint).join(checkpoint::AGENT);

    // 3. medium: the evaluation the medium rule picks ([`choose_medium`]).
    let medium = choose_medium(&evals, task, spec.medium_score, spec.medium_pick)?;
    let last = *evals.last().context("the SAC run made no evaluation")?;
    eprintln!(
        "make-benchmark {task}: [3/5] medium policy = evaluation at env step {} (return {:.1}, target {:.1}; expert {:.1}), {} rows",
        medium.eval.env_step, medium.eval.mean_return, medium.target_return, medium.expert_eval_return, s.rows
    );
    let medium_agent =
        if medium.eval.step == last.step { final_agent.clone() } else { snapshot_path(&snapshots, medium.eval.step) };
    let policy_text = |e: &EvalPoint, what: &str| {
        format!(
            "SAC {what} (env step {}, {} gradient steps, eval return {:.1}), stochastic actions",
            e.env_step, e.grad_step, e.mean_return
        )
    };
    let mut ds = policy_rollout(&config, &env_id, &medium_agent, spec.device, s.rows, seeds.medium, "medium")?;
    ds.metadata = sac_metadata(medium.eval.grad_step);
    files.push(write_file(
        &spec.out,
        task,
        "medium",
        &policy_text(&medium.eval, "medium snapshot"),
        &mut ds,
        Dtype::Float32,
        gzip,
    )?);

    // 4. expert: the final policy.
    eprintln!(
        "make-benchmark {task}: [4/5] expert policy = final SAC policy (eval return {:.1}), {} rows",
        last.mean_return, s.rows
    );
    let mut ds = policy_rollout(&config, &env_id, &final_agent, spec.device, s.rows, seeds.expert, "expert")?;
    ds.metadata = sac_metadata(last.grad_step);
    files.push(write_file(
        &spec.out,
        task,
        "expert",
        &policy_text(&last, "final policy"),
        &mut ds,
        Dtype::Float32,
        gzip,
    )?);

    // 5. medium-replay: the run's own transitions up to the medium snapshot.
    let recorded = run_dir.join(rundir::DATASET);
    let mut ds = D4rlDataset::read(&recorded)
        .with_context(|| format!("reading the SAC run's recorded transitions {}", recorded.display()))?;
    let log = states::lock(&sac_states);
    if log.rows() != ds.len() {
        bail!("the SAC run recorded {} transitions but its env logged {} states", ds.len(), log.rows());
    }
    let rows = replay_cut(&ds, medium.eval.env_step as usize);
    eprintln!(
        "make-benchmark {task}: [5/5] medium-replay = the SAC run's first {rows} transitions (up to env step {})",
        medium.eval.env_step
    );
    keep_rows(&mut ds, rows);
    // D4RL's replay files are float64 throughout.
    ds.infos = log.columns(0, rows, Dtype::Float64)?;
    drop(log);
    ds.dtypes = ["observations", "actions", "rewards", "next_observations"]
        .into_iter()
        .map(|k| (k.to_string(), Dtype::Float64))
        .collect();
    ds.metadata = sac_metadata(medium.eval.grad_step);
    let text = format!("the SAC run's replay buffer: {} random-action steps, then the learning policy's stochastic actions, up to env step {}", s.sac_random_steps.min(rows as u64), medium.eval.env_step);
    files.push(write_file(&spec.out, task, "medium-replay", &text, &mut ds, Dtype::Float64, gzip)?);

    let manifest = BenchmarkManifest {
        format: manifest::FORMAT.to_string(),
        task: task.to_string(),
        env: env_id.clone(),
        scale: spec.scale_name.clone(),
        provenance: rundir::Provenance::now(),
        device: format!("{:?}", spec.device),
        torch_threads: tch::get_num_threads() as i64,
        seeds,
        sac: SacRecord {
            preset: spec.task.preset().to_string(),
            random_steps: config.train.random_steps,
            online_steps: config.train.online_steps,
            grad_steps: summary.grad_steps,
            eval_every: config.eval.every,
            eval_episodes: config.eval.episodes,
            evaluations: evals.clone(),
            wall_s: sac_wall,
        },
        medium_rule: medium_rule(spec.medium_score, spec.medium_pick),
        medium,
        files,
        wall_s: t0.elapsed().as_secs_f64(),
    };
    rundir::write_json(&spec.out.join(manifest::MANIFEST), &manifest)?;
    Ok(manifest)
}

/// What `o2o dataset make-benchmark <task>` prints about the folder `out` it made: the files,
/// the times, the medium snapshot, then a line per file.
pub fn summary(out: &Path, m: &BenchmarkManifest) -> String {
    let medium = &m.medium.eval;
    let mut lines = vec![format!(
        "{}: {} in {:.0} s (SAC {:.0} s); medium = env step {} (eval return {:.1}), expert eval return {:.1}",
        out.display(),
        m.files.iter().map(|f| f.file.as_str()).collect::<Vec<_>>().join(", "),
        m.wall_s,
        m.sac.wall_s,
        medium.env_step,
        medium.mean_return,
        m.medium.expert_eval_return
    )];
    for f in &m.files {
        let r = f.returns.map_or("-".to_string(), |s| format!("{:.1} / {:.1} / {:.1}", s.min, s.mean, s.max));
        let n = f.normalized_score.map_or("-".to_string(), |s| format!("{:.1}", s.mean));
        lines.push(format!(
            "  {:<32} {:>8} rows {:>6} episodes  return min/mean/max {r}  normalized {n}  {} bytes",
            f.file, f.rows, f.episodes, f.bytes
        ));
    }
    lines.join("\n")
}

/// The SAC run's config: the task's preset on its `-v2` env, with the spec's sizes, recording
/// every transition, then the user's `--set` overrides.
fn sac_config(spec: &BenchmarkSpec, env_id: &str) -> Result<RunConfig> {
    let s = spec.sizes;
    let (name, mut table) = presets::load(spec.task.preset())?;
    table.insert("preset".into(), toml::Value::String(name.clone()));
    let mut overrides = vec![
        format!("env={env_id:?}"),
        format!("seed={}", spec.seed),
        "train.offline_steps=0".to_string(),
        format!("train.random_steps={}", s.sac_random_steps),
        "train.warmup_steps=0".to_string(),
        format!("train.online_steps={}", s.sac_steps - s.sac_random_steps),
        format!("train.replay_capacity={}", s.sac_steps),
        "train.record_dataset=true".to_string(),
        format!("eval.every={}", s.eval_every),
        format!("eval.episodes={}", s.eval_episodes),
        "eval.at_start=false".to_string(),
        "checkpoint.every=0".to_string(),
        "checkpoint.keep=1".to_string(),
    ];
    overrides.extend(spec.sac_overrides.iter().cloned());
    config::apply_overrides(&mut table, &overrides)?;
    let c = RunConfig::from_table(table, &format!("preset {name} for make-benchmark"))?;
    if c.algo != "sac"
        || c.env != env_id
        || !c.train.record_dataset
        || c.train.offline_steps > 0
        || c.train.warmup_steps > 0
    {
        bail!("--set may tune SAC but not change `algo`, `env`, `train.record_dataset`, offline or warm-up steps (found algo {:?}, env {:?})", c.algo, c.env);
    }
    Ok(c)
}

/// Where the snapshot of the evaluation at loop step `step` is saved.
fn snapshot_path(dir: &Path, step: u64) -> PathBuf {
    dir.join(format!("step-{step}.ot"))
}

/// The manifest's `medium_rule`, in words.
fn medium_rule(medium_score: Option<f64>, pick: MediumPick) -> String {
    let (which, tail) = match pick {
        MediumPick::Earliest => (
            "the earliest SAC evaluation whose mean return reaches",
            "(deterministic policy, every eval_every env steps); the final policy when none does",
        ),
        MediumPick::Closest => (
            "the SAC evaluation whose mean return is nearest (--medium-pick closest)",
            "(deterministic policy, every eval_every env steps); the earliest on a tie",
        ),
    };
    match medium_score {
        None => format!("{which} target = REF_MIN + (R_expert - REF_MIN) / 3, i.e. one third of the final policy's D4RL-normalized evaluation score {tail}"),
        Some(x) => format!("{which} target = REF_MIN + {x} / 100 * (REF_MAX - REF_MIN), i.e. a D4RL-normalized evaluation score of {x} (--medium-score) {tail}"),
    }
}

/// D4RL's medium policy, "a policy at about one third of the expert's performance": the
/// earliest evaluation whose mean return reaches `REF_MIN + (R_expert − REF_MIN) / 3`, where
/// `R_expert` is the last (final policy's) evaluation — one third of the expert's normalized
/// score. Early stopping would have stopped SAC there. With `medium_score` (`--medium-score`)
/// the target is that D4RL-normalized score instead, `REF_MIN + score / 100 · (REF_MAX −
/// REF_MIN)`: one third of D4RL's own expert, when our SAC's expert is weaker than D4RL's.
/// When none reaches the target, the final policy. With [`MediumPick::Closest`], the
/// evaluation whose mean return is nearest the target instead (the earliest on a tie).
pub fn choose_medium(
    evals: &[EvalPoint],
    family: &str,
    medium_score: Option<f64>,
    pick: MediumPick,
) -> Result<MediumChoice> {
    let last = *evals.last().context("no SAC evaluation to choose the medium policy from")?;
    let (ref_min, ref_max) = o2o_datasets::scores::ref_scores(family)?;
    let target = match medium_score {
        None => ref_min + (last.mean_return - ref_min) / 3.0,
        Some(x) => ref_min + x / 100.0 * (ref_max - ref_min),
    };
    let found = match pick {
        MediumPick::Earliest => evals.iter().find(|e| e.mean_return >= target),
        MediumPick::Closest => evals.iter().reduce(|best, e| {
            if (e.mean_return - target).abs() < (best.mean_return - target).abs() {
                e
            } else {
                best
            }
        }),
    };
    let (eval, fallback_to_final) = match found {
        Some(e) => (*e, false),
        None => (last, true),
    };
    Ok(MediumChoice { expert_eval_return: last.mean_return, target_return: target, eval, fallback_to_final })
}

/// Rows of a recording to keep for a replay file ending at env step `env_steps`: up to the last
/// episode end at or before it (the episode then in progress is dropped, as D4RL's
/// `sequence_dataset` drops a trailing partial episode); all `env_steps` rows if no episode
/// has ended by then.
pub fn replay_cut(ds: &D4rlDataset, env_steps: usize) -> usize {
    let env_steps = env_steps.min(ds.len());
    ds.episodes(None)
        .iter()
        .filter(|e| (e.terminated || e.truncated) && e.rows.end <= env_steps)
        .map(|e| e.rows.end)
        .last()
        .unwrap_or(env_steps)
}

/// Keep the first `n` rows of every row column.
fn keep_rows(ds: &mut D4rlDataset, n: usize) {
    ds.observations.truncate(n * ds.obs_dim);
    ds.actions.truncate(n * ds.act_dim);
    ds.rewards.truncate(n);
    ds.terminals.truncate(n);
    if let Some(t) = ds.timeouts.as_mut() {
        t.truncate(n);
    }
    if let Some(t) = ds.next_observations.as_mut() {
        t.truncate(n * ds.obs_dim);
    }
    ds.infos.clear();
}

/// `metadata/algorithm` and `metadata/iteration`, as in D4RL's SAC files.
fn sac_metadata(grad_steps: u64) -> BTreeMap<String, MetaValue> {
    let mut m = BTreeMap::new();
    m.insert("metadata/algorithm".to_string(), MetaValue::Str("SAC".into()));
    m.insert(
        "metadata/iteration".to_string(),
        MetaValue::Array(Column { shape: vec![], dtype: Dtype::Int32, data: vec![grad_steps as f32] }),
    );
    m
}

/// `rows` env steps of a saved SAC agent (stochastic actions) on `env_id`.
fn policy_rollout(
    config: &RunConfig,
    env_id: &str,
    agent_path: &Path,
    device: Device,
    rows: usize,
    seed: u64,
    label: &'static str,
) -> Result<D4rlDataset> {
    let env = o2o_envs::make(env_id)?;
    let (obs_dim, act_dim) = (env.observation_space().dim(), env.action_space().dim());
    let mut agent = build_agent(config, obs_dim, act_dim, device)?;
    agent.load(agent_path).with_context(|| format!("loading the {label} policy {}", agent_path.display()))?;
    rollout(env_id, &mut AgentPolicy { agent: &mut *agent, device, deterministic: false }, rows, seed, label)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(step: u64, ret: f64) -> EvalPoint {
        EvalPoint { step, env_step: step, grad_step: step, mean_return: ret, normalized_score: None }
    }

    #[test]
    fn medium_is_the_earliest_evaluation_at_a_third_of_the_expert_score() {
        // Hopper: REF_MIN = -20.272305, so a final return of 1500 gives a target of
        // -20.272305 + 1520.272305 / 3 = 486.485130.
        let evals = [ev(1, 100.0), ev(2, 600.0), ev(3, 300.0), ev(4, 900.0), ev(5, 1500.0)];
        let m = choose_medium(&evals, "hopper", None, MediumPick::Earliest).unwrap();
        assert!((m.target_return - 486.485_13).abs() < 1e-5, "{}", m.target_return);
        assert_eq!((m.eval.step, m.fallback_to_final, m.expert_eval_return), (2, false, 1500.0));
        // Normalized score of the target = a third of the expert's.
        let n = |r: f64| o2o_datasets::scores::normalized_score("hopper", r).unwrap();
        assert!((n(m.target_return) - n(1500.0) / 3.0).abs() < 1e-9);
        // A final policy below D4RL's random reference: no evaluation reaches the target.
        let m = choose_medium(&[ev(1, -50.0), ev(2, -60.0)], "hopper", None, MediumPick::Earliest).unwrap();
        assert_eq!((m.eval.step, m.fallback_to_final), (2, true));
        assert!(choose_medium(&[], "hopper", None, MediumPick::Earliest).is_err());
    }

    #[test]
    fn medium_score_sets_the_target_on_d4rls_scale() {
        // Hopper: REF_MIN = -20.272305, REF_MAX = 3234.3; a score of 45 is
        // -20.272305 + 0.45 * 3254.572305 = 1444.285232.
        let evals = [ev(1, 100.0), ev(2, 1200.0), ev(3, 1500.0), ev(4, 1300.0), ev(5, 3000.0)];
        let m = choose_medium(&evals, "hopper", Some(45.0), MediumPick::Earliest).unwrap();
        assert!((m.target_return - 1444.285_232).abs() < 1e-5, "{}", m.target_return);
        // The default rule would have taken step 2 (target 986.5); the score rule takes step 3.
        assert_eq!((m.eval.step, m.fallback_to_final, m.expert_eval_return), (3, false, 3000.0));
        assert_eq!(choose_medium(&evals, "hopper", None, MediumPick::Earliest).unwrap().eval.step, 2);
        // No evaluation that high: the final policy.
        let m = choose_medium(&evals, "hopper", Some(95.0), MediumPick::Earliest).unwrap();
        assert_eq!((m.eval.step, m.fallback_to_final), (5, true));
    }

    #[test]
    fn closest_picks_the_evaluation_nearest_the_target() {
        // Target 1444.285232 (score 45, as above). Hopper's evaluations swing: the earliest one
        // above the target (step 2, 2600) is far above it; the nearest is step 4 (1400).
        let evals = [ev(1, 900.0), ev(2, 2600.0), ev(3, 700.0), ev(4, 1400.0), ev(5, 1500.0), ev(6, 1000.0)];
        assert_eq!(choose_medium(&evals, "hopper", Some(45.0), MediumPick::Earliest).unwrap().eval.step, 2);
        let m = choose_medium(&evals, "hopper", Some(45.0), MediumPick::Closest).unwrap();
        assert_eq!((m.eval.step, m.fallback_to_final, m.expert_eval_return), (4, false, 1000.0));
        // On a tie, the earliest; a target above every evaluation takes the highest, not the final.
        let tie = [ev(1, 1400.0), ev(2, 1400.0), ev(3, 2600.0)];
        assert_eq!(choose_medium(&tie, "hopper", Some(45.0), MediumPick::Closest).unwrap().eval.step, 1);
        let m = choose_medium(&evals, "hopper", Some(95.0), MediumPick::Closest).unwrap();
        assert_eq!((m.eval.step, m.fallback_to_final), (2, false));
        assert!(choose_medium(&[], "hopper", None, MediumPick::Closest).is_err());
    }

    fn episodes(ends: &[(usize, bool, bool)], n: usize) -> D4rlDataset {
        let mut terminals = vec![0.0; n];
        let mut timeouts = vec![0.0; n];
        for &(row, term, trunc) in ends {
            terminals[row] = if term { 1.0 } else { 0.0 };
            timeouts[row] = if trunc { 1.0 } else { 0.0 };
        }
        D4rlDataset {
            source: PathBuf::from("t"),
            obs_dim: 1,
            act_dim: 1,
            observations: (0..n).map(|i| i as f32).collect(),
            actions: vec![0.0; n],
            rewards: vec![1.0; n],
            terminals,
            timeouts: Some(timeouts),
            next_observations: Some((1..=n).map(|i| i as f32).collect()),
            infos: BTreeMap::new(),
            metadata: BTreeMap::new(),
            dtypes: BTreeMap::new(),
        }
    }

    #[test]
    fn replay_is_cut_at_the_last_episode_end_before_the_snapshot() {
        // Episodes end at rows 2 (terminated), 5 (timeout), 8 (terminated); 10 rows recorded.
        let ds = episodes(&[(2, true, false), (5, false, true), (8, true, false)], 10);
        assert_eq!(replay_cut(&ds, 7), 6);
        assert_eq!(replay_cut(&ds, 6), 6);
        assert_eq!(replay_cut(&ds, 9), 9);
        assert_eq!(replay_cut(&ds, 100), 9);
        assert_eq!(replay_cut(&ds, 2), 2, "no episode ended yet: keep what there is");
        let mut d = ds.clone();
        keep_rows(&mut d, 6);
        assert_eq!(
            (
                d.len(),
                d.observations.len(),
                d.next_observations.as_ref().unwrap().len(),
                d.timeouts.as_ref().unwrap().len()
            ),
            (6, 6, 6, 6)
        );
        assert_eq!(d.episodes(None).len(), 2);
    }
}
