//! `o2o train`, `o2o run`, `o2o finetune` and `o2o resume`: command lines turned into
//! [`Run`] builder calls (the library's public API; see docs/library.md).
//!
//! - `train --preset <name|file.toml> [--set key=value ...]` resolves a config, creates
//!   `runs/<preset>-<seed>-<timestamp>/`, and runs it (offline, online, or both, per the
//!   config's phases);
//! - `finetune --from <run-dir>` starts a new run from another run's final agent state, online;
//! - `resume <run-dir>` continues a run from its newest checkpoint, exactly;
//! - `run --preset <name> [--from <run-dir>]` is `train` for recipes that span phases (WSRL:
//!   pretrain → warm-up → fine-tune in one run directory); `--from` skips the offline phase by
//!   starting from another run's final agent, and the run ends with a table of the score at
//!   each phase boundary (see `run/stages.rs`).
//!
//! See docs/runs.md.

use anyhow::{bail, Result};
use clap::{Args, ValueEnum};
use o2o_experiments::logging::RerunArgs;
use o2o_experiments::run::{presets, stages};
use o2o_experiments::{Outcome, Run};
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
    /// `--rerun save|spawn|connect [ADDR]|off`.
    #[command(flatten)]
    pub rerun: RerunArgs,
}

impl CommonArgs {
    /// Set the thread count; the device to run on.
    pub fn apply(&self) -> Result<Device> {
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
    if let Some(done) = run_preset(&args.train, args.from.as_deref(), args.reuse)? {
        stages::print(&done.dir, &done.summary)?;
    }
    Ok(())
}

/// Resolve a preset (plus overrides) and run it in a new run directory; `from` starts from
/// that run's newest checkpoint without the offline phase. `None` when only listing presets.
fn run_preset(args: &TrainArgs, from: Option<&Path>, reuse: bool) -> Result<Option<Outcome>> {
    if args.list_presets {
        for name in presets::names() {
            println!("{name}");
        }
        return Ok(None);
    }
    let preset = args.preset.as_deref().ok_or_else(|| anyhow::anyhow!("--preset is required"))?;
    let mut run = Run::preset(preset)?.set(&args.set)?;
    if let Some(seed) = args.seed {
        run = run.seed(seed)?;
    }
    if let Some(parent) = from {
        run = run.starting_from(parent).map_err(|e| e.context(format!("--from {}", parent.display())))?;
    }
    let run = run.runs_dir(&args.runs_dir).reuse_finished(reuse);
    // The config is checked (and a finished run found) before the device is touched.
    run.config()?;
    let device = args.common.apply()?;
    let done = run.device(device).rerun(args.common.rerun.clone()).run()?;
    if !done.reused {
        report(&done);
    }
    Ok(Some(done))
}

/// `o2o finetune`.
pub fn finetune(args: FinetuneArgs) -> Result<()> {
    let mut run = Run::finetune(&args.from)?;
    let parent = run.draft_config()?;
    let steps = args.steps.unwrap_or(if parent.train.online_steps > 0 { parent.train.online_steps } else { 1_000_000 });
    let mut overrides = vec![format!("train.online_steps={steps}")];
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
    run = run.set(&overrides)?;
    run.config()?;
    let device = args.common.apply()?;
    let done = run.runs_dir(&args.runs_dir).device(device).rerun(args.common.rerun.clone()).run()?;
    report(&done);
    Ok(())
}

/// `o2o resume`.
pub fn resume(args: ResumeArgs) -> Result<()> {
    let run = Run::resume(&args.run_dir)?;
    let device = args.common.apply()?;
    let done = run.device(device).rerun(args.common.rerun.clone()).run()?;
    if done.reused {
        println!("{} already finished (checkpoint {}); nothing to do", done.dir.display(), done.dir.join(&done.summary.checkpoint).display());
    } else {
        report(&done);
    }
    Ok(())
}

/// The one line a finished run prints on stdout.
fn report(done: &Outcome) {
    let s = &done.summary;
    let eval = s.final_eval.as_ref().map_or("no evaluation".to_string(), |e| match e.normalized_score {
        Some(n) => format!("eval return {:.1} (normalized {n:.1})", e.mean_return),
        None => format!("eval return {:.1}", e.mean_return),
    });
    println!("{}: {} steps, {eval}", done.dir.display(), s.steps);
}
