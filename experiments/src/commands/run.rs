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

use anyhow::{bail, Context, Result};
use clap::Args;
use o2o_experiments::logging::RerunArgs;
use o2o_experiments::robot::RobotReport;
pub use o2o_experiments::run::device::DeviceArg;
use o2o_experiments::run::progress::{ProgressMode, ProgressOptions};
use o2o_experiments::run::{presets, stages};
use o2o_experiments::{Outcome, Run};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tch::Device;

pub mod sweep;

/// Options every run command shares.
#[derive(Args, Debug, Clone)]
pub struct CommonArgs {
    /// cpu, cuda, or auto (CUDA when available).
    #[arg(long, value_enum, default_value = "auto")]
    pub device: DeviceArg,
    /// Torch intra-op threads (default: libtorch's choice, usually the number of cores).
    #[arg(long)]
    pub threads: Option<i32>,
    /// `--rerun save|spawn|connect[=ADDR]|off`.
    #[command(flatten)]
    pub rerun: RerunArgs,
    /// Progress on stderr: `bar` (a terminal), `plain` (a line every --progress-every
    /// seconds: nohup, schedulers, `2>log`), `off`; `auto` picks bar or plain.
    #[arg(long, value_enum, default_value = "auto")]
    pub progress: ProgressMode,
    /// Seconds between two plain progress lines.
    #[arg(long, default_value_t = 30.0)]
    pub progress_every: f64,
    /// Print the run's summary as one JSON line on stdout (instead of the human-readable end).
    #[arg(long)]
    pub json: bool,
    /// A wall-clock limit (`90s`, `45m`, `2h`, `1d`, or seconds): when it passes, the run stops
    /// at its next safe point with a checkpoint, as on Ctrl-C, and says how to resume.
    #[arg(long, value_name = "DURATION")]
    pub max_time: Option<String>,
}

impl CommonArgs {
    /// The progress options.
    pub fn progress(&self) -> Result<ProgressOptions> {
        if !(self.progress_every.is_finite() && self.progress_every > 0.0) {
            bail!("--progress-every: expected a positive number of seconds, found {}", self.progress_every);
        }
        Ok(ProgressOptions::new(self.progress, Duration::from_secs_f64(self.progress_every)))
    }

    /// Set the thread count and arm `--max-time`; the device to run on.
    pub fn apply(&self) -> Result<Device> {
        if let Some(n) = self.threads {
            if n < 1 {
                bail!("--threads: expected at least 1, found {n}");
            }
            tch::set_num_threads(n);
        }
        let device = self.device.resolve()?;
        self.arm_max_time()?;
        Ok(device)
    }

    /// Ask this process to stop at its next safe point once `--max-time` has passed (for a
    /// sweep: the whole sweep's wall-clock budget, forwarded to its running seeds).
    pub fn arm_max_time(&self) -> Result<()> {
        if let Some(text) = &self.max_time {
            let limit = parse_duration(text).map_err(|e| anyhow::anyhow!("--max-time {text:?}: {e}"))?;
            let text = text.clone();
            std::thread::spawn(move || {
                std::thread::sleep(limit);
                eprintln!("\no2o: --max-time {text} reached; stopping at the next safe point (writing a checkpoint)");
                o2o_experiments::run::interrupt::request();
            });
        }
        Ok(())
    }
}

/// `90s`, `45m`, `2h`, `1d`, `1.5h` or a plain number of seconds; positive.
pub fn parse_duration(text: &str) -> Result<Duration> {
    let t = text.trim();
    let (number, unit) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&t[..i], c),
        _ => (t, 's'),
    };
    let scale = match unit {
        's' => 1.0,
        'm' => 60.0,
        'h' => 3600.0,
        'd' => 86400.0,
        other => bail!("unknown unit {other:?}; expected s, m, h or d"),
    };
    let n: f64 = number.trim().parse().map_err(|_| anyhow::anyhow!("expected a duration like 90s, 45m, 2h or 1d"))?;
    if !(n.is_finite() && n > 0.0) {
        bail!("expected a positive duration");
    }
    Ok(Duration::from_secs_f64(n * scale))
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
    /// Offline data: a local D4RL-format file (same as `--set dataset.path=FILE`; the preset's
    /// dataset id stays in the config for the record) or a registry id (`--set dataset.id=ID`,
    /// found in o2o's cache or D4RL's own `~/.d4rl/datasets`).
    #[arg(long, value_name = "FILE|ID")]
    pub dataset: Option<String>,
    /// Folder the run directory is created in.
    #[arg(long, default_value = "runs")]
    pub runs_dir: PathBuf,
    /// Print the preset names and exit.
    #[arg(long)]
    pub list_presets: bool,
    /// Print the resolved config (preset + overrides, every default filled in) and exit.
    #[arg(long)]
    pub print_config: bool,
    #[command(flatten)]
    pub sweep: SweepArgs,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// A seed sweep: the same command once per seed, each its own run directory.
#[derive(Args, Debug, Clone)]
pub struct SweepArgs {
    /// Run once per seed, each in its own run directory: `0..5` (0 to 4), `0..=4`, or `0,3,7`.
    #[arg(long, value_name = "SEEDS", conflicts_with = "seed")]
    pub seeds: Option<String>,
    /// With --seeds: how many runs at once (each a separate process).
    #[arg(long, default_value_t = 1, requires = "seeds")]
    pub jobs: usize,
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
    /// Online env steps (default: the parent's train.online_steps; required when it has none).
    #[arg(long)]
    pub steps: Option<u64>,
    /// The parent's checkpoint to start from (`step-N`); default: its newest.
    #[arg(long)]
    pub checkpoint: Option<String>,
    /// Fraction of each batch drawn from the parent's offline dataset (0 = online data only);
    /// replaces the parent's `train.offline_mix = "proportional"` (the `iql-*` presets') with
    /// this fixed ratio.
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
    pub sweep: SweepArgs,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `o2o resume`.
#[derive(Args, Debug)]
pub struct ResumeArgs {
    /// The run directory to continue.
    pub run_dir: PathBuf,
    /// Continue from this checkpoint (`step-N`) instead of the newest; newer ones are moved
    /// aside (`checkpoints/.discarded-step-…`).
    #[arg(long)]
    pub checkpoint: Option<String>,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `o2o train`.
pub fn train(args: TrainArgs) -> Result<()> {
    if args.sweep.seeds.is_some() {
        return sweep::run(&args.sweep, &args.common);
    }
    run_preset(&args, None, false).map(|_| ())
}

/// `o2o run`: `train`, or from an offline parent with `--from`; then the phase table.
pub fn run(args: RunArgs) -> Result<()> {
    if args.train.sweep.seeds.is_some() {
        return sweep::run(&args.train.sweep, &args.train.common);
    }
    if let Some(done) = run_preset(&args.train, args.from.as_deref(), args.reuse)? {
        if !args.train.common.json {
            stages::print(&done.dir, &done.summary)?;
        }
    }
    Ok(())
}

/// Resolve a preset (plus overrides) and run it in a new run directory; `from` starts from
/// that run's newest checkpoint without the offline phase. `None` when only listing presets
/// or printing the config.
fn run_preset(args: &TrainArgs, from: Option<&Path>, reuse: bool) -> Result<Option<Outcome>> {
    if args.list_presets {
        for name in presets::names() {
            println!("{name}");
        }
        return Ok(None);
    }
    let preset = args.preset.as_deref().ok_or_else(|| anyhow::anyhow!("--preset is required"))?;
    let mut overrides = Vec::new();
    if let Some(d) = &args.dataset {
        let key = if Path::new(d).is_file() { "dataset.path" } else { "dataset.id" };
        overrides.push(format!("{key}={d:?}"));
    }
    overrides.extend(args.set.iter().cloned());
    seed_agrees(args.seed, &args.set)?;
    let mut run = Run::preset(preset)?.set(&overrides)?;
    if let Some(seed) = args.seed {
        run = run.seed(seed)?;
    }
    if let Some(parent) = from {
        run = run.starting_from(parent).with_context(|| format!("--from {}", parent.display()))?;
    }
    if args.print_config {
        let config = run.config()?;
        let budget = o2o_experiments::run::phases::describe(&o2o_experiments::run::phases::plan(&config.train));
        // The budget first, every phase named: train.online_steps counts the online phase only.
        println!("# budget: {budget}");
        print!("{}", config.to_toml_string()?);
        return Ok(None);
    }
    let run = run.runs_dir(&args.runs_dir).reuse_finished(reuse);
    // The config is checked (and a finished run found) before the device is touched.
    run.config()?;
    let done = launch(run, &args.common)?;
    Ok(Some(done))
}

/// `--seed` and a `--set seed=…` that disagree are refused (issue 47, item 3): neither silently
/// wins.
fn seed_agrees(seed: Option<u64>, set: &[String]) -> Result<()> {
    let Some(seed) = seed else { return Ok(()) };
    for s in set {
        if let Some((key, value)) = s.split_once('=') {
            if key.trim() == "seed" && value.trim().parse::<u64>().ok() != Some(seed) {
                anyhow::bail!("--seed {seed} and --set {s} disagree; give the seed once");
            }
        }
    }
    Ok(())
}

/// Device, threads, Rerun and progress from the common options; run; the end as one line or JSON.
/// A run whose env is a robot (`robot:<config.toml>`) gets the robot's env factory, recording
/// and safety report (`o2o_experiments::robot`).
pub(crate) fn launch(run: Run, common: &CommonArgs) -> Result<Outcome> {
    let progress = common.progress()?;
    let device = common.apply()?;
    let robot = o2o_experiments::robot::RobotSession::for_env(&run.draft_config()?.env)?;
    let run = match &robot {
        Some(session) => session.attach(run),
        None => run,
    };
    // A malformed --rerun address is refused before the run directory exists.
    common.rerun.target()?;
    let done = run.device(device).rerun(common.rerun.clone()).progress(progress).run()?;
    if let (Some(session), false) = (&robot, done.reused) {
        let report = session.finish(&done.dir)?;
        if !common.json {
            print_robot_report(&report);
        }
    }
    if common.json {
        let mut v = serde_json::to_value(&done.summary)?;
        v["run_dir"] = done.dir.display().to_string().into();
        v["reused"] = done.reused.into();
        println!("{v}");
    } else if !done.reused {
        report(&done);
    }
    Ok(done)
}

/// `o2o finetune`.
pub fn finetune(args: FinetuneArgs) -> Result<()> {
    if args.sweep.seeds.is_some() {
        return sweep::run(&args.sweep, &args.common);
    }
    let parent_path = match &args.checkpoint {
        Some(name) => o2o_experiments::run::checkpoint::find(&args.from, Some(name))?,
        None => args.from.clone(),
    };
    let mut run = Run::finetune(&parent_path)?;
    let parent = run.draft_config()?;
    let steps = match (args.steps, parent.train.online_steps) {
        (Some(s), _) => s,
        (None, s) if s > 0 => s,
        (None, _) => bail!(
            "--steps is required: {} has no online steps of its own to reuse (train.online_steps = 0)",
            args.from.display()
        ),
    };
    let mut overrides = vec![format!("train.online_steps={steps}")];
    if let Some(r) = args.offline_ratio {
        // A fixed ratio asked for on the command line replaces a parent's proportional mix.
        overrides.push(format!("train.offline_ratio={r}"));
        overrides.push("train.offline_mix=\"fixed\"".into());
    }
    if let Some(e) = &args.env {
        overrides.push(format!("env={e:?}"));
    }
    seed_agrees(args.seed, &args.set)?;
    if let Some(s) = args.seed {
        overrides.push(format!("seed={s}"));
    }
    overrides.extend(args.set.iter().cloned());
    run = run.set(&overrides)?;
    run.config()?;
    launch(run.runs_dir(&args.runs_dir), &args.common)?;
    Ok(())
}

/// `o2o resume`.
pub fn resume(args: ResumeArgs) -> Result<()> {
    let mut run = Run::resume(&args.run_dir)?;
    if let Some(c) = &args.checkpoint {
        run = run.from_checkpoint(c);
    }
    let done = launch(run, &args.common)?;
    if done.reused && !args.common.json {
        println!(
            "{} already finished (checkpoint {}); nothing to do",
            done.dir.display(),
            done.dir.join(&done.summary.checkpoint).display()
        );
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

/// The end of a run on a robot: what the safety layer and the loop did.
fn print_robot_report(r: &RobotReport) {
    println!(
        "robot: {} transitions recorded ({} intervened) in {}",
        r.transitions,
        r.interventions,
        r.recording.as_deref().unwrap_or("(nothing written)")
    );
    for e in &r.envs {
        let s = &e.safety;
        println!(
            "  {} steps: sent {}, clipped {}, rejected {}, dropped {}, watchdog stops {}, e-stops {}, faults {}, link drops {}, deadline faults {}, latch clears {}; period {:.1} ms, max jitter {:.1} ms, {} missed deadlines{}",
            e.timing.steps,
            s.sent,
            s.clipped_commands,
            s.rejected_nonfinite,
            s.dropped_commands,
            s.watchdog_stops,
            s.estops,
            s.driver_faults + s.overspeed_faults,
            s.link_drops,
            s.deadline_faults,
            s.latch_clears,
            e.timing.mean_period_s * 1e3,
            e.timing.max_jitter_s * 1e3,
            e.timing.missed_deadlines,
            e.latch.as_ref().map_or(String::new(), |l| format!(", latched at the end: {l}"))
        );
    }
}
