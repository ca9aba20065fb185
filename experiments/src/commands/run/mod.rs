//! `o2o train`, `o2o finetune` and `o2o resume`: runs as directories.
//!
//! - `train --preset <name|file.toml> [--set key=value ...]` resolves a config, creates
//!   `runs/<preset>-<seed>-<timestamp>/`, and runs it (offline, online, or both, per the
//!   config's phases);
//! - `finetune --from <run-dir>` starts a new run from another run's final agent state, online;
//! - `resume <run-dir>` continues a run from its newest checkpoint, exactly;
//! - `run --preset <name> [--from <run-dir>]` is `train` for recipes that span phases (WSRL:
//!   pretrain → warm-up → fine-tune in one run directory); `--from` skips the offline phase by
//!   starting from another run's final agent, and the run ends with a table of the score at
//!   each phase boundary (see `stages.rs`).
//!
//! The loop itself is in `runner.rs`; this file turns command lines into configs and run
//! directories. See docs/runs.md.

pub mod actor;
pub mod checkpoint;
pub mod config;
pub mod data;
pub mod eval;
pub mod learner;
pub mod phases;
pub mod presets;
pub mod progress;
pub mod rundir;
pub mod runner;
pub mod stages;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use config::RunConfig;
use rundir::{Manifest, ParentInfo, ResumeInfo, Seeds};
use runner::Start;
use std::path::{Path, PathBuf};
use tch::Device;

/// Where to compute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DeviceArg {
    /// CUDA when available, else the CPU.
    Auto,
    Cpu,
    Cuda,
}

impl DeviceArg {
    /// The tch device; `cuda` fails when no GPU is visible.
    pub fn resolve(self) -> Result<Device> {
        match self {
            DeviceArg::Auto => Ok(Device::cuda_if_available()),
            DeviceArg::Cpu => Ok(Device::Cpu),
            DeviceArg::Cuda if tch::Cuda::is_available() => Ok(Device::Cuda(0)),
            DeviceArg::Cuda => bail!("--device cuda: no CUDA device is available (libtorch sees none); use --device cpu or auto"),
        }
    }
}

/// Options every run command shares.
#[derive(Args, Debug, Clone)]
pub struct CommonArgs {
    /// cpu, cuda, or auto (CUDA when available).
    #[arg(long, value_enum, default_value = "auto")]
    pub device: DeviceArg,
    /// Torch intra-op threads (default: libtorch's choice, usually the number of cores).
    #[arg(long)]
    pub threads: Option<i32>,
    // Added by the visualization work (issue 8): `--rerun save|spawn|connect [ADDR]|off`.
    #[command(flatten)]
    pub rerun: crate::logging::RerunArgs,
}

impl CommonArgs {
    fn apply(&self) -> Result<Device> {
        if let Some(n) = self.threads {
            if n < 1 {
                bail!("--threads: expected at least 1, found {n}");
            }
            tch::set_num_threads(n);
        }
        self.device.resolve()
    }
}

/// `o2o train`.
#[derive(Args, Debug)]
pub struct TrainArgs {
    /// A preset name (`o2o train --list-presets`) or a path to a .toml file.
    #[arg(long, required_unless_present = "list_presets")]
    pub preset: Option<String>,
    /// Override a config key, e.g. `--set train.online_steps=20000 --set agent.actor_lr=1e-4`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// The run seed (same as `--set seed=N`).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Folder the run directory is created in.
    #[arg(long, default_value = "runs")]
    pub runs_dir: PathBuf,
    /// Print the preset names and exit.
    #[arg(long)]
    pub list_presets: bool,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `o2o run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub train: TrainArgs,
    /// Start from this run's newest checkpoint (its whole agent state: weights, optimizer
    /// moments, temperature) and skip the preset's offline phase.
    #[arg(long)]
    pub from: Option<PathBuf>,
    /// When --runs-dir already holds a finished run with exactly this resolved config, print
    /// its table instead of running again (`make demo` uses this; delete the run to redo it).
    #[arg(long)]
    pub reuse: bool,
}

/// `o2o finetune`.
#[derive(Args, Debug)]
pub struct FinetuneArgs {
    /// The run to start from (its newest checkpoint and its config).
    #[arg(long)]
    pub from: PathBuf,
    /// Env to fine-tune in (default: the parent's env).
    #[arg(long)]
    pub env: Option<String>,
    /// Online env steps (default: 1,000,000, or the parent's train.online_steps when set).
    #[arg(long)]
    pub steps: Option<u64>,
    /// Fraction of each batch drawn from the parent's offline dataset (0 = online data only).
    #[arg(long)]
    pub offline_ratio: Option<f64>,
    /// Override a config key of the fine-tuning run.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// The run seed (default: the parent's).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Folder the new run directory is created in.
    #[arg(long, default_value = "runs")]
    pub runs_dir: PathBuf,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `o2o resume`.
#[derive(Args, Debug)]
pub struct ResumeArgs {
    /// The run directory to continue.
    pub run_dir: PathBuf,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `o2o train`.
pub fn train(args: TrainArgs) -> Result<()> {
    run_preset(&args, None, false).map(|_| ())
}

/// `o2o run`: `train`, or from an offline parent with `--from`; then the phase table.
pub fn run(args: RunArgs) -> Result<()> {
    if let Some((dir, summary)) = run_preset(&args.train, args.from.as_deref(), args.reuse)? {
        stages::print(&dir, &summary)?;
    }
    Ok(())
}

/// Resolve a preset (plus overrides), create its run directory and run it; `from` starts from
/// that run's newest checkpoint without the offline phase. `None` when only listing presets.
fn run_preset(args: &TrainArgs, from: Option<&Path>, reuse: bool) -> Result<Option<(PathBuf, runner::Summary)>> {
    if args.list_presets {
        for name in presets::names() {
            println!("{name}");
        }
        return Ok(None);
    }
    let preset = args.preset.as_deref().context("--preset is required")?;
    let (name, mut table) = presets::load(preset)?;
    table.insert("preset".into(), toml::Value::String(name.clone()));
    let mut overrides = args.set.clone();
    if let Some(seed) = args.seed {
        overrides.push(format!("seed={seed}"));
    }
    let parent = match from {
        None => None,
        Some(parent_dir) => {
            let parent = ParentRun::read(parent_dir).with_context(|| format!("--from {}", parent_dir.display()))?;
            // The parent's offline training replaces this preset's (whatever --set says);
            // evaluate the starting point.
            overrides.extend(["train.offline_steps=0".to_string(), "eval.at_start=true".to_string()]);
            table.insert("parent".into(), parent.config_entry()?);
            Some(parent)
        }
    };
    config::apply_overrides(&mut table, &overrides)?;
    let config = RunConfig::from_table(table, &format!("preset {name} with --set overrides"))?;
    if reuse {
        if let Some(done) = finished_run_with(&args.runs_dir, &config) {
            eprintln!("{} already holds a finished run of this config: {} (delete it to run again)", args.runs_dir.display(), done.0.display());
            return Ok(Some(done));
        }
    }
    check_dataset_exists(&config)?;
    let device = args.common.apply()?;
    let dir = rundir::create(&args.runs_dir, &config.preset, config.seed)?;
    let (start, info) = match parent {
        Some(p) => (Start::FromParent { checkpoint: p.checkpoint }, Some(p.info)),
        None => (Start::Fresh, None),
    };
    let summary = start_run(&dir, &config, device, start, info, &args.common.rerun)?;
    Ok(Some((dir, summary)))
}

/// `o2o finetune`.
pub fn finetune(args: FinetuneArgs) -> Result<()> {
    let parent_dir = &args.from;
    let parent_run = ParentRun::read(parent_dir)?;
    let parent = &parent_run.config;
    // The parent's config, turned into an online run.
    let mut table: toml::Table = parent.to_toml_string()?.parse().context("re-reading the parent's config")?;
    let steps = args.steps.unwrap_or(if parent.train.online_steps > 0 { parent.train.online_steps } else { 1_000_000 });
    let mut overrides = vec![
        "train.offline_steps=0".to_string(),
        "train.random_steps=0".to_string(),
        "train.warmup_steps=0".to_string(),
        format!("train.online_steps={steps}"),
        "eval.at_start=true".to_string(),
    ];
    if parent.algo == "iql" {
        // IQL decays the actor LR only offline; fine-tuning keeps it constant (§6.1).
        overrides.push("agent.actor_lr_decay_steps=0".to_string());
    }
    if let Some(r) = args.offline_ratio {
        overrides.push(format!("train.offline_ratio={r}"));
    }
    if let Some(e) = &args.env {
        overrides.push(format!("env={e:?}"));
    }
    if let Some(s) = args.seed {
        overrides.push(format!("seed={s}"));
    }
    overrides.extend(args.set.iter().cloned());
    config::apply_overrides(&mut table, &overrides)?;
    table.insert("parent".into(), parent_run.config_entry()?);
    let config = RunConfig::from_table(table, &format!("fine-tuning config from {}", parent_dir.display()))?;
    check_dataset_exists(&config)?;
    let device = args.common.apply()?;
    let dir = rundir::create(&args.runs_dir, &format!("{}-finetune", config.preset), config.seed)?;
    let ParentRun { checkpoint, info, .. } = parent_run;
    start_run(&dir, &config, device, Start::FromParent { checkpoint }, Some(info), &args.common.rerun).map(|_| ())
}

/// A run another run starts from (`finetune --from`, `run --from`): its config, its newest
/// checkpoint and what the new run's manifest records about it.
struct ParentRun {
    config: RunConfig,
    /// The newest checkpoint, as an absolute path.
    checkpoint: PathBuf,
    info: ParentInfo,
}

impl ParentRun {
    /// Read the run in `dir`; notes on stderr when it did not finish.
    fn read(dir: &Path) -> Result<Self> {
        let config = RunConfig::read(&dir.join(rundir::CONFIG)).with_context(|| format!("{} is not a run directory", dir.display()))?;
        let checkpoint = checkpoint::latest(dir)?;
        if !checkpoint::read_state(&checkpoint)?.finished {
            eprintln!("note: {} did not finish; starting from its newest checkpoint {}", dir.display(), checkpoint.display());
        }
        let run_dir = std::fs::canonicalize(dir).with_context(|| format!("cannot resolve {}", dir.display()))?;
        let checkpoint = std::fs::canonicalize(&checkpoint)?;
        let git_revision = std::fs::read_to_string(dir.join(rundir::MANIFEST)).ok().and_then(|t| serde_json::from_str::<Manifest>(&t).ok()).map(|m| m.git_revision);
        let info = ParentInfo { run_dir: run_dir.display().to_string(), checkpoint: checkpoint.display().to_string(), git_revision };
        Ok(Self { config, checkpoint, info })
    }

    /// The `[parent]` table of the new run's config.
    fn config_entry(&self) -> Result<toml::Value> {
        Ok(toml::Value::try_from(config::ParentConfig { run_dir: PathBuf::from(&self.info.run_dir), checkpoint: self.checkpoint.clone() })?)
    }
}

/// `o2o resume`.
pub fn resume(args: ResumeArgs) -> Result<()> {
    let dir = &args.run_dir;
    let config = RunConfig::read(&dir.join(rundir::CONFIG)).with_context(|| format!("{} is not a run directory", dir.display()))?;
    checkpoint::remove_partial(dir)?;
    // Killed before its first checkpoint: start over from step 0 (from the parent's agent for a
    // fine-tuning run), which is exactly what the uninterrupted run did.
    let (start, from) = match checkpoint::list(dir)?.pop() {
        Some(checkpoint) => {
            let state = checkpoint::read_state(&checkpoint)?;
            if state.finished {
                println!("{} already finished (checkpoint {}); nothing to do", dir.display(), checkpoint.display());
                return Ok(());
            }
            eprintln!("resuming {} from {} (step {})", dir.display(), checkpoint.display(), state.step);
            let from = checkpoint.display().to_string();
            (Start::Resume { checkpoint }, from)
        }
        None => {
            eprintln!("{} has no checkpoint yet; restarting it from step 0", dir.display());
            std::fs::write(dir.join(rundir::METRICS), b"").with_context(|| format!("cannot reset {}/{}", dir.display(), rundir::METRICS))?;
            match &config.parent {
                Some(p) => (Start::FromParent { checkpoint: p.checkpoint.clone() }, format!("step 0 (parent {})", p.checkpoint.display())),
                None => (Start::Fresh, "step 0".to_string()),
            }
        }
    };
    let device = args.common.apply()?;
    // Record the resume in the manifest.
    let manifest_path = dir.join(rundir::MANIFEST);
    let text = std::fs::read_to_string(&manifest_path).with_context(|| format!("cannot read {}", manifest_path.display()))?;
    let mut manifest: Manifest = serde_json::from_str(&text).with_context(|| format!("{} is not a run manifest", manifest_path.display()))?;
    manifest.resumes.push(ResumeInfo { at_utc: rundir::utc_timestamp(), checkpoint: from, device: format!("{device:?}") });
    rundir::write_json(&manifest_path, &manifest)?;
    let sinks = crate::logging::sinks_for_run(dir, &args.common.rerun)?;
    let summary = runner::execute(dir, &config, device, start, sinks, None)?;
    report(dir, &summary);
    Ok(())
}

/// Write `config.toml`, then run (the runner writes `manifest.json` once the data is loaded).
fn start_run(dir: &Path, config: &RunConfig, device: Device, start: Start, parent: Option<ParentInfo>, rerun: &crate::logging::RerunArgs) -> Result<runner::Summary> {
    eprintln!("run directory: {}", dir.display());
    rundir::write_config(dir, config)?;
    let manifest = Manifest {
        o2o_version: env!("CARGO_PKG_VERSION").to_string(),
        git_revision: rundir::git_revision(),
        created_utc: rundir::utc_timestamp(),
        command: std::env::args().collect(),
        preset: config.preset.clone(),
        algo: config.algo.clone(),
        env: config.env.clone(),
        seeds: Seeds {
            run: config.seed,
            agent: actor::derive_seed(config.seed, actor::stream::AGENT, 0),
            runner_rng: actor::derive_seed(config.seed, actor::stream::RUNNER_RNG, 0),
            episode_seed_rule: "train episode k: derive_seed(run, 1, k); eval episode k: derive_seed(run, 2, k)".into(),
        },
        dataset: None,
        parent,
        device: format!("{device:?}"),
        torch_threads: tch::get_num_threads() as i64,
        machine: rundir::Machine::current(),
        resumes: Vec::new(),
    };
    let sinks = crate::logging::sinks_for_run(dir, rerun)?;
    let summary = runner::execute(dir, config, device, start, sinks, Some(manifest))?;
    report(dir, &summary);
    Ok(summary)
}

/// The newest finished run in `runs_dir` whose resolved config equals `config`, with its summary.
fn finished_run_with(runs_dir: &Path, config: &RunConfig) -> Option<(PathBuf, runner::Summary)> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(runs_dir).ok()?.filter_map(|e| e.ok().map(|e| e.path())).collect();
    dirs.sort();
    dirs.into_iter().rev().find_map(|dir| {
        let summary: runner::Summary = serde_json::from_str(&std::fs::read_to_string(dir.join(rundir::SUMMARY)).ok()?).ok()?;
        let theirs = RunConfig::read(&dir.join(rundir::CONFIG)).ok()?;
        (summary.finished && theirs == *config).then_some((dir, summary))
    })
}

/// Fail before creating a run directory when the run needs a dataset file that is not there.
fn check_dataset_exists(config: &RunConfig) -> Result<()> {
    match &config.dataset {
        Some(d) if config.train.offline_steps > 0 || config.train.offline_ratio > 0.0 => data::resolve_path(d).map(|_| ()),
        _ => Ok(()),
    }
}

/// The one line a finished run prints on stdout.
fn report(dir: &Path, s: &runner::Summary) {
    let eval = s.final_eval.as_ref().map_or("no evaluation".to_string(), |e| match e.normalized_score {
        Some(n) => format!("eval return {:.1} (normalized {n:.1})", e.mean_return),
        None => format!("eval return {:.1}", e.mean_return),
    });
    println!("{}: {} steps, {eval}", dir.display(), s.steps);
}
