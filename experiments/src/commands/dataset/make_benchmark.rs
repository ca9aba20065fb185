//! `o2o dataset make-benchmark <hopper|halfcheetah|walker2d> [--scale small|full] [--out DIR]
//! [--seed S]`: our own D4RL-style `random`, `medium`, `medium-replay` and `expert` files and
//! their `manifest.json`, and the other families' files. The generation is the library's
//! ([`o2o_experiments::benchmarks`]); this file only turns the command line into a family's spec
//! and prints the summary of the manifest it returns.

use crate::commands::run::DeviceArg;
use anyhow::{bail, Context, Result};
use clap::Args;
use o2o_experiments::benchmarks::locomotion::{self, BenchmarkSpec, Scale, Task};
use o2o_experiments::benchmarks::{adroit, antmaze, imaginebench, mixed};
use std::path::PathBuf;

/// Arguments of `o2o dataset make-benchmark`.
#[derive(Args, Debug)]
pub struct MakeBenchmarkArgs {
    /// The task: hopper, halfcheetah or walker2d (SAC is trained on its D4RL-compatible `-v2`
    /// env), or imaginebench-mujoco (ImagineBench-layout real and model-imagined rollouts, see
    /// `imaginebench_benchmark`), or antmaze-{umaze,umaze-diverse,medium-play,medium-diverse,
    /// large-play,large-diverse} (a waypoint planner driving a goal-reaching ant controller,
    /// `antmaze_benchmark`), or pen, door, hammer, relocate (a scripted Adroit controller,
    /// `adroit_benchmark`).
    #[arg(value_parser = parse_target)]
    pub task: Target,
    /// small: SAC 60k env steps, 100k-row files (≤ 30 min for hopper on 2 cores, gzip'd);
    /// full: D4RL's sizes, SAC 1M env steps, 1M-row files.
    #[arg(long, value_enum, default_value = "small")]
    pub scale: Scale,
    /// Output folder (default `data/<task>-<scale>`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Seed of everything (the SAC run uses it as `o2o train --seed` would).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Override the scale: SAC env steps in total.
    #[arg(long)]
    pub sac_steps: Option<u64>,
    /// Override the scale: SAC's initial uniformly random env steps (part of --sac-steps).
    #[arg(long)]
    pub sac_random_steps: Option<u64>,
    /// Override the scale: rows of the random, medium and expert files.
    #[arg(long)]
    pub transitions: Option<usize>,
    /// Override the scale: env steps between SAC evaluations (the medium snapshot candidates).
    #[arg(long)]
    pub eval_every: Option<u64>,
    /// Override the scale: episodes per evaluation.
    #[arg(long)]
    pub eval_episodes: Option<usize>,
    /// gzip level 0-9 of the files' columns (default 4 for small, 0 = uncompressed for full).
    #[arg(long)]
    pub gzip: Option<u8>,
    /// The medium policy: the earliest SAC evaluation at this D4RL-normalized score (e.g. 45,
    /// where D4RL's hopper-medium policy sits) instead of one third of the final policy's score.
    #[arg(long, value_name = "NORMALIZED")]
    pub medium_score: Option<f64>,
    /// Which evaluation the medium target picks: the earliest at or above it (D4RL's early
    /// stopping), or the one nearest it, for runs whose evaluations jump far past the target.
    #[arg(long, value_enum, default_value = "earliest")]
    pub medium_pick: o2o_experiments::benchmarks::locomotion::MediumPick,
    /// Override a key of the SAC run's config, as `o2o train --set` (e.g. `--set agent.critic.hidden=[64,64]`).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Keep the SAC run directory (config, metrics, final checkpoint) as `<out>/sac-run/`.
    #[arg(long)]
    pub keep_run: bool,
    /// cpu, cuda, or auto (CUDA when available).
    #[arg(long, value_enum, default_value = "auto")]
    pub device: DeviceArg,
    /// Torch intra-op threads (default: libtorch's choice).
    #[arg(long)]
    pub threads: Option<i32>,
    /// Locomotion: make one file whose quality differs by state region, `<task>-mixed-v2.hdf5`,
    /// instead of the four: this finished o2o run's policy (its newest checkpoint) acts where
    /// --policy-region holds and uniformly random actions are taken elsewhere
    /// (`mixed_benchmark`); --transitions, --eval-episodes, --gzip, --seed and --scale's sizes apply.
    #[arg(long, value_name = "RUN_DIR", requires = "policy_region")]
    pub mixed_quality: Option<PathBuf>,
    /// With --mixed-quality: region A, the states where the policy acts, as `obs[I]<X` or
    /// `obs[I]>X` (e.g. `obs[8]<2.5`: HalfCheetah's forward velocity below 2.5).
    #[arg(long, value_name = "RULE", requires = "mixed_quality", value_parser = parse_region)]
    pub policy_region: Option<mixed::RegionRule>,
    /// AntMaze: drive this finished SAC run on `ant-goal-v0` (its newest checkpoint) through the
    /// maze instead of training a controller here (then --sac-steps, --sac-random-steps,
    /// --eval-every and --set apply to the controller's training).
    #[arg(long, value_name = "RUN_DIR")]
    pub controller: Option<PathBuf>,
    /// AntMaze: rows per episode (D4RL: 1000).
    #[arg(long, default_value_t = 1000)]
    pub episode_steps: usize,
    /// AntMaze: σ of the Gaussian noise added to the controller's actions (D4RL: 0.2).
    #[arg(long, default_value_t = 0.2)]
    pub action_noise: f64,
    /// AntMaze: cells (ROW,COL of the generation map) the data keeps out of: no goal, start or
    /// waypoint there, and an episode that strays into one is cut (`antmaze_benchmark`'s docs),
    /// e.g. `--avoid-cells 3,1 3,2` for umaze without the eval goal's arm. Not D4RL's layout.
    #[arg(long, value_name = "ROW,COL", num_args = 1.., value_parser = parse_cell)]
    pub avoid_cells: Vec<(usize, usize)>,
}

fn parse_cell(s: &str) -> std::result::Result<(usize, usize), String> {
    let (r, c) = s.split_once(',').ok_or_else(|| format!("expected ROW,COL, found {s:?}"))?;
    let n = |x: &str| {
        x.trim().parse::<usize>().map_err(|_| format!("expected ROW,COL of non-negative integers, found {s:?}"))
    };
    Ok((n(r)?, n(c)?))
}

/// What `make-benchmark` makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// D4RL-style files of a locomotion task.
    Locomotion(Task),
    /// An ImagineBench Mujoco-v0 file.
    ImagineBenchMujoco,
    /// A D4RL-style AntMaze file (`antmaze-umaze`, `antmaze-medium-play`, …).
    AntMaze(antmaze::Maze),
    /// A D4RL-layout Adroit file from a scripted controller (`pen`, `door`, `hammer`, `relocate`).
    Adroit(o2o_envs::mujoco::AdroitKind),
}

fn parse_region(s: &str) -> std::result::Result<mixed::RegionRule, String> {
    mixed::RegionRule::parse(s).map_err(|e| e.to_string())
}

fn parse_target(s: &str) -> std::result::Result<Target, String> {
    use clap::ValueEnum;
    if s == "imaginebench-mujoco" {
        return Ok(Target::ImagineBenchMujoco);
    }
    if let Some(m) = antmaze::Maze::parse(s) {
        return Ok(Target::AntMaze(m));
    }
    if let Some(k) = adroit::parse(s) {
        return Ok(Target::Adroit(k));
    }
    Task::from_str(s, true)
        .map(Target::Locomotion)
        .map_err(|_| format!("expected hopper, halfcheetah, walker2d, imaginebench-mujoco, pen, door, hammer, relocate or antmaze-{{umaze,umaze-diverse,medium-play,medium-diverse,large-play,large-diverse}}, found {s:?}"))
}

/// `o2o dataset make-benchmark imaginebench-mujoco`: only `--scale`, `--out` and `--seed` apply.
fn run_imaginebench(args: MakeBenchmarkArgs) -> Result<()> {
    let sac_only = args.sac_steps.is_some()
        || args.sac_random_steps.is_some()
        || args.transitions.is_some()
        || args.eval_every.is_some()
        || args.eval_episodes.is_some()
        || !args.set.is_empty()
        || args.keep_run
        || args.gzip.is_some()
        || args.medium_score.is_some()
        || args.medium_pick != o2o_experiments::benchmarks::locomotion::MediumPick::Earliest;
    if sac_only {
        bail!("make-benchmark imaginebench-mujoco takes --scale, --out, --seed and --threads only (the SAC and file options belong to the locomotion tasks)");
    }
    set_threads(args.threads)?;
    let spec = imaginebench::ImagineSpec {
        scale: args.scale,
        seed: args.seed,
        out: args.out.unwrap_or_else(|| PathBuf::from(format!("data/imaginebench-mujoco-{}", args.scale.name()))),
    };
    let m = imaginebench::generate(&spec)?;
    println!("{}", imaginebench::summary(&spec.out, &m));
    Ok(())
}

/// `o2o dataset make-benchmark antmaze-*`: small = 100k rows and a 300k-step controller.
fn run_antmaze(args: MakeBenchmarkArgs, maze: antmaze::Maze) -> Result<()> {
    use antmaze::{AntMazeSpec, ControllerSource};
    set_threads(args.threads)?;
    let full = args.scale == Scale::Full;
    let controller = match args.controller {
        Some(dir) => ControllerSource::Run(dir),
        None => ControllerSource::Train {
            steps: args.sac_steps.unwrap_or(300_000),
            random_steps: args.sac_random_steps.unwrap_or(5_000),
            eval_every: args.eval_every.unwrap_or(10_000),
            overrides: args.set,
        },
    };
    if let Some(g) = args.gzip.filter(|g| *g > 9) {
        bail!("--gzip: expected a level 0-9, found {g}");
    }
    let spec = AntMazeSpec {
        maze,
        out: args.out.unwrap_or_else(|| PathBuf::from(format!("data/antmaze-{}-{}", maze.name(), args.scale.name()))),
        seed: args.seed,
        rows: args.transitions.unwrap_or(if full { 1_000_000 } else { 100_000 }),
        episode_steps: args.episode_steps,
        action_noise: args.action_noise,
        controller_eval_episodes: args.eval_episodes.unwrap_or(20),
        controller,
        keep_run: args.keep_run,
        gzip: Some(args.gzip.unwrap_or(4)).filter(|g| *g > 0),
        device: args.device.resolve()?,
        avoid_cells: args.avoid_cells,
    };
    let m = antmaze::generate(&spec)?;
    println!("{}", antmaze::summary(&spec.out, &m));
    Ok(())
}

/// `o2o dataset make-benchmark pen|door|hammer|relocate`: `--transitions` rows rounded down to
/// whole episodes (small: 100 episodes, full: 1000), `--action-noise`, `--gzip`, `--seed`, `--out`.
fn run_adroit(args: MakeBenchmarkArgs, kind: o2o_envs::mujoco::AdroitKind) -> Result<()> {
    let name = adroit::parse_name(kind);
    let horizon = o2o_envs::spec(&format!("{name}-v1"))?.max_episode_steps.unwrap_or(200);
    let episodes = match args.transitions {
        Some(rows) => (rows / horizon).max(1),
        None if args.scale == Scale::Full => 1000,
        None => 100,
    };
    if let Some(g) = args.gzip.filter(|g| *g > 9) {
        bail!("--gzip: expected a level 0-9, found {g}");
    }
    let spec = adroit::AdroitSpec {
        kind,
        out: args.out.unwrap_or_else(|| PathBuf::from(format!("data/{name}-{}", args.scale.name()))),
        seed: args.seed,
        episodes,
        action_noise: args.action_noise,
        gzip: Some(args.gzip.unwrap_or(4)).filter(|g| *g > 0),
    };
    let m = adroit::generate(&spec)?;
    println!("{}", adroit::summary(&spec.out, &m));
    Ok(())
}

/// `o2o dataset make-benchmark <locomotion task> --mixed-quality RUN_DIR --policy-region RULE`.
fn run_mixed(args: MakeBenchmarkArgs, policy_run: PathBuf) -> Result<()> {
    let Target::Locomotion(task) = args.task else {
        bail!("--mixed-quality: expected hopper, halfcheetah or walker2d")
    };
    let sac_only = args.sac_steps.is_some()
        || args.sac_random_steps.is_some()
        || args.eval_every.is_some()
        || !args.set.is_empty()
        || args.keep_run
        || args.medium_score.is_some()
        || args.medium_pick != o2o_experiments::benchmarks::locomotion::MediumPick::Earliest
        || args.controller.is_some();
    if sac_only {
        bail!("--mixed-quality takes --scale, --transitions, --eval-episodes, --gzip, --out, --seed, --device and --threads (the policy is trained already: no SAC options)");
    }
    let rule = args.policy_region.context("--mixed-quality needs --policy-region")?;
    let mut sizes = args.scale.sizes();
    if let Some(g) = args.gzip {
        if g > 9 {
            bail!("--gzip: expected a level 0-9, found {g}");
        }
        sizes.gzip = g;
    }
    set_threads(args.threads)?;
    let spec = mixed::MixedSpec {
        task,
        policy_run,
        rule,
        out: args.out.unwrap_or_else(|| PathBuf::from(format!("data/{}-mixed-{}", task.name(), args.scale.name()))),
        seed: args.seed,
        rows: args.transitions.unwrap_or(sizes.rows),
        eval_episodes: args.eval_episodes.unwrap_or(sizes.eval_episodes),
        gzip: (sizes.gzip > 0).then_some(sizes.gzip),
        device: args.device.resolve()?,
    };
    let m = mixed::generate(&spec)?;
    println!("{}", mixed::summary(&spec.out, &m));
    Ok(())
}

fn set_threads(threads: Option<i32>) -> Result<()> {
    if let Some(n) = threads {
        if n < 1 {
            bail!("--threads: expected at least 1, found {n}");
        }
        tch::set_num_threads(n);
    }
    Ok(())
}

/// `o2o dataset make-benchmark`.
pub fn run(args: MakeBenchmarkArgs) -> Result<()> {
    if let Some(policy_run) = args.mixed_quality.clone() {
        return run_mixed(args, policy_run);
    }
    let task = match args.task {
        Target::ImagineBenchMujoco => return run_imaginebench(args),
        Target::AntMaze(m) => return run_antmaze(args, m),
        Target::Adroit(k) => return run_adroit(args, k),
        Target::Locomotion(t) => t,
    };
    let mut sizes = args.scale.sizes();
    let overridden = args.sac_steps.is_some()
        || args.sac_random_steps.is_some()
        || args.transitions.is_some()
        || args.eval_every.is_some()
        || args.eval_episodes.is_some()
        || !args.set.is_empty();
    sizes.sac_steps = args.sac_steps.unwrap_or(sizes.sac_steps);
    sizes.sac_random_steps = args.sac_random_steps.unwrap_or(sizes.sac_random_steps);
    sizes.rows = args.transitions.unwrap_or(sizes.rows);
    sizes.eval_every = args.eval_every.unwrap_or(sizes.eval_every);
    sizes.eval_episodes = args.eval_episodes.unwrap_or(sizes.eval_episodes);
    if let Some(g) = args.gzip {
        if g > 9 {
            bail!("--gzip: expected a level 0-9, found {g}");
        }
        sizes.gzip = g;
    }
    if let Some(x) = args.medium_score {
        if !(x.is_finite() && x > 0.0) {
            bail!("--medium-score: expected a positive D4RL-normalized score (e.g. 45), found {x}");
        }
    }
    set_threads(args.threads)?;
    let spec = BenchmarkSpec {
        task,
        scale_name: if overridden { "custom".into() } else { args.scale.name().into() },
        sizes,
        seed: args.seed,
        out: args.out.unwrap_or_else(|| PathBuf::from(format!("data/{}-{}", task.name(), args.scale.name()))),
        sac_overrides: args.set,
        keep_run: args.keep_run,
        device: args.device.resolve()?,
        medium_score: args.medium_score,
        medium_pick: args.medium_pick,
    };
    let m = locomotion::generate(&spec)?;
    println!("{}", locomotion::summary(&spec.out, &m));
    Ok(())
}
